#include "tokenizer/tokenizer_image_writer_host.h"

#include <string.h>

#include <algorithm>
#include <string>

#include "tokenizer/tokenizer_image.h"
#include "tokenizer/bpe_tokenizer_host.h"
#include "tokenizer/llama2c_tokenizer_host.h"

namespace mcullm {

namespace {

// Appends a section at the next 8-byte boundary and returns its offset.
uint32_t append(std::vector<uint8_t>* out, const void* data, size_t bytes) {
  out->resize((out->size() + 7) & ~size_t{7}, 0);
  const uint32_t off = static_cast<uint32_t>(out->size());
  out->insert(out->end(), static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + bytes);
  return off;
}

}  // namespace

Status write_tokenizer_image(const Tokenizer& tok, std::vector<uint8_t>* out) {
  out->clear();
  const std::string kind = tok.kind();
  const bool spm = kind == "llama2c-spm";
  if (!spm && kind != "bpe")
    return Status::Error(Code::kUnsupported, "a %s tokenizer cannot be written as a board image (SentencePiece-style and byte-level BPE can)",
                         kind.c_str());
  const auto* sp = spm ? static_cast<const Llama2cTokenizer*>(&tok) : nullptr;
  const auto* bpe = spm ? nullptr : static_cast<const BpeTokenizer*>(&tok);
  const int n = tok.vocab_size();

  TokImageHeader h{};
  h.magic = kTokImageMagic;
  h.version = kTokImageVersion;
  h.header_bytes = sizeof(TokImageHeader);
  h.kind = static_cast<uint32_t>(spm ? TokImageKind::kSpm : TokImageKind::kBpe);
  h.pre = spm ? 0 : static_cast<uint32_t>(bpe->pretokenizer());
  h.flags = (tok.wants_bos() ? kTokImageAddBos : 0) |
            (bpe && bpe->ignores_merges() ? kTokImageIgnoreMerges : 0) | (bpe && bpe->normalizes_nfc() ? kTokImageNfc : 0);
  h.n_tokens = static_cast<uint32_t>(n);
  h.bos = tok.bos_id();
  h.eos = tok.eos_id();
  h.eot = tok.eot_id();

  std::vector<std::string> strs(static_cast<size_t>(n));
  std::vector<uint8_t> types(static_cast<size_t>(n), 1);
  std::vector<float> scores;
  for (int i = 0; i < n; ++i) {
    strs[static_cast<size_t>(i)] = spm ? sp->piece(i) : bpe->token_bytes(i);
    if (bpe) types[static_cast<size_t>(i)] = static_cast<uint8_t>(bpe->token_type(i));
    else if (tok.is_control(i)) types[static_cast<size_t>(i)] = 3;
    if (sp) scores.push_back(sp->score(i));
  }
  std::vector<uint32_t> str_off(static_cast<size_t>(n) + 1, 0);
  std::string strings;
  for (int i = 0; i < n; ++i) {
    strings += strs[static_cast<size_t>(i)];
    str_off[static_cast<size_t>(i) + 1] = static_cast<uint32_t>(strings.size());
  }
  std::vector<uint32_t> sorted(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) sorted[static_cast<size_t>(i)] = static_cast<uint32_t>(i);
  std::sort(sorted.begin(), sorted.end(), [&](uint32_t a, uint32_t b) {
    const int c = strs[a].compare(strs[b]);  // std::string compares bytes as unsigned char
    return c != 0 ? c < 0 : a < b;
  });
  int32_t byte_ids[256];
  for (int b = 0; b < 256; ++b) byte_ids[b] = spm ? (b + 3 < n ? b + 3 : -1) : bpe->byte_token(static_cast<uint8_t>(b));
  std::vector<TokImageMerge> merges;
  std::vector<uint32_t> added;
  if (bpe) {
    for (const auto& m : bpe->merge_entries()) merges.push_back(TokImageMerge{m.left, m.right, m.rank, m.result});
    std::sort(merges.begin(), merges.end(),
              [](const TokImageMerge& a, const TokImageMerge& b) { return a.left != b.left ? a.left < b.left : a.right < b.right; });
    for (int i = 0; i < n; ++i) {
      const TokenType t = bpe->token_type(i);
      if ((t == TokenType::kControl || t == TokenType::kUserDefined) && !strs[static_cast<size_t>(i)].empty())
        added.push_back(static_cast<uint32_t>(i));
    }
    std::sort(added.begin(), added.end(), [&](uint32_t a, uint32_t b) {
      return strs[a].size() != strs[b].size() ? strs[a].size() > strs[b].size() : a < b;
    });
  }
  h.n_merges = static_cast<uint32_t>(merges.size());
  h.n_added = static_cast<uint32_t>(added.size());
  h.strings_bytes = static_cast<uint32_t>(strings.size());

  out->resize(sizeof h);
  h.off_str = append(out, str_off.data(), str_off.size() * 4);
  h.off_strings = append(out, strings.data(), strings.size());
  h.off_sorted = append(out, sorted.data(), sorted.size() * 4);
  h.off_scores = spm ? append(out, scores.data(), scores.size() * 4) : 0;
  h.off_types = append(out, types.data(), types.size());
  h.off_merges = merges.empty() ? 0 : append(out, merges.data(), merges.size() * sizeof(TokImageMerge));
  h.off_byte_ids = append(out, byte_ids, sizeof byte_ids);
  h.off_added = added.empty() ? 0 : append(out, added.data(), added.size() * 4);
  out->resize((out->size() + 7) & ~size_t{7}, 0);
  if (out->size() > 0xffffffffu) return Status::Error(Code::kUnsupported, "the image would be larger than 4 GiB");
  h.total_bytes = static_cast<uint32_t>(out->size());
  memcpy(out->data(), &h, sizeof h);
  return Status::Ok();
}

}  // namespace mcullm
