#include "tokenizer/wordpiece_tokenizer_host.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstring>

#include "tokenizer/pretokenizer.h"

namespace mcullm {

namespace {

constexpr const char* kWordStart = "\xE2\x96\x81";  // U+2581, llama.cpp's mark of a word-initial token


// BERT's _is_chinese_char: the CJK Unified Ideographs blocks.
bool is_cjk(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

}  // namespace

Status WordPieceTokenizer::load(WordPieceVocab v) {
  const size_t n = v.tokens.size();
  if (n == 0) return Status::Error(Code::kCorrupt, "the vocabulary is empty");
  if (n > 0x7fffffff) return Status::Error(Code::kCorrupt, "vocabulary of %zu tokens is too large", n);
  if (!v.types.empty() && v.types.size() != n)
    return Status::Error(Code::kCorrupt, "%zu token types for %zu tokens", v.types.size(), n);
  if (v.types.empty()) v.types.assign(n, TokenType::kNormal);
  for (int* id : {&v.unk, &v.cls, &v.sep})
    if (*id >= static_cast<int>(n) || *id < -1)
      return Status::Error(Code::kCorrupt, "special token id %d is outside the vocabulary of %zu", *id, n);
  if (v.unk < 0) return Status::Error(Code::kCorrupt, "a WordPiece vocabulary needs an unknown-token id");
  tokens_ = std::move(v.tokens);
  types_ = std::move(v.types);
  index_.clear();
  control_.clear();
  index_.reserve(n);
  max_token_bytes_ = 0;
  for (size_t i = 0; i < n; ++i) {
    index_.emplace(tokens_[i], static_cast<int>(i));
    max_token_bytes_ = std::max(max_token_bytes_, tokens_[i].size());
    if (types_[i] == TokenType::kControl && !tokens_[i].empty()) control_.push_back(Added{tokens_[i], static_cast<int>(i)});
  }
  std::sort(control_.begin(), control_.end(), [](const Added& a, const Added& b) {
    return a.text.size() != b.text.size() ? a.text.size() > b.text.size() : a.id < b.id;
  });
  unk_ = v.unk;
  cls_ = v.cls;
  sep_ = v.sep;
  return Status::Ok();
}

std::string WordPieceTokenizer::describe() const { return "WordPiece, " + std::to_string(tokens_.size()) + " tokens"; }

bool WordPieceTokenizer::is_control(int id) const {
  return id >= 0 && id < vocab_size() && types_[static_cast<size_t>(id)] == TokenType::kControl;
}

std::string WordPieceTokenizer::token_text(int id) const {
  return id >= 0 && id < vocab_size() ? tokens_[static_cast<size_t>(id)] : std::string();
}

std::vector<std::string> WordPieceTokenizer::words(std::string_view text) const {
  std::vector<std::string> out(1);
  const uint8_t* s = reinterpret_cast<const uint8_t*>(text.data());
  utf8proc_int32_t dec[32];
  for (size_t i = 0; i < text.size();) {
    size_t len;
    const uint32_t cp = utf8_decode(s + i, text.size() - i, &len);
    i += len;
    if (cp >= kInvalidCodePoint || cp == 0 || cp == 0xFFFD) continue;  // not text: dropped, as BERT's clean-up
    if (unicode_class(cp) == UnicodeClass::kSpace) {
      if (!out.back().empty()) out.emplace_back();
      continue;
    }
    int last_boundclass = 0;
    const utf8proc_ssize_t nd = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(cp), dec, 32, UTF8PROC_DECOMPOSE,
                                                        &last_boundclass);
    const int count = nd > 0 && nd <= 32 ? static_cast<int>(nd) : 0;
    for (int k = 0; k < count; ++k) {
      const uint32_t c = static_cast<uint32_t>(dec[k]);
      const utf8proc_category_t cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
      if (cat == UTF8PROC_CATEGORY_MN) continue;  // accents
      if (cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF || cat == UTF8PROC_CATEGORY_CN ||
          cat == UTF8PROC_CATEGORY_CO || cat == UTF8PROC_CATEGORY_CS)
        continue;  // control and unassigned characters
      std::string lower;
      append_utf8(static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))), &lower);
      const bool punct = unicode_class(c) == UnicodeClass::kPunct ||
                         (c < 0x7F && (cat == UTF8PROC_CATEGORY_SM || cat == UTF8PROC_CATEGORY_SC ||
                                       cat == UTF8PROC_CATEGORY_SK || cat == UTF8PROC_CATEGORY_SO));
      if (punct || is_cjk(c)) {
        if (!out.back().empty()) out.emplace_back();
        out.back() = lower;
        out.emplace_back();
      } else {
        out.back() += lower;
      }
    }
  }
  if (out.back().empty()) out.pop_back();
  return out;
}

void WordPieceTokenizer::encode_segment(std::string_view text, std::vector<int>* ids) const {
  std::string word;
  for (const std::string& w : words(text)) {
    // Hugging Face's max_input_chars_per_word: a longer word is [UNK] whole.
    size_t chars = 0;
    for (const char c : w) chars += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
    if (chars > 100) {
      ids->push_back(unk_);
      continue;
    }
    word.assign(kWordStart);
    word += w;
    const size_t start = ids->size();
    const size_t n = word.size();
    for (size_t i = 0; i < n;) {
      size_t j = std::min(n, i + max_token_bytes_);
      int id = -1;
      for (; j > i; --j) {
        const auto it = index_.find(word.substr(i, j - i));
        if (it != index_.end()) {
          id = it->second;
          break;
        }
      }
      if (id < 0) {  // the word cannot be covered: [UNK] for all of it
        ids->resize(start);
        break;
      }
      ids->push_back(id);
      i = j;
    }
    if (ids->size() == start) ids->push_back(unk_);
  }
}

Status WordPieceTokenizer::encode(std::string_view text, const EncodeOptions& options, std::vector<int>* ids) const {
  ids->clear();
  if (tokens_.empty()) return Status::Error(Code::kInvalidArgument, "encode: tokenizer not loaded");
  if (options.add_bos) {
    if (cls_ < 0) return Status::Error(Code::kUnsupported, "the vocabulary has no [CLS] token");
    ids->push_back(cls_);
  }
  size_t seg = 0, i = 0;
  while (i < text.size()) {
    const Added* hit = nullptr;
    if (options.parse_special) {
      for (const Added& a : control_)
        if (a.text.size() <= text.size() - i && std::memcmp(a.text.data(), text.data() + i, a.text.size()) == 0) {
          hit = &a;
          break;
        }
    }
    if (!hit) {
      ++i;
      continue;
    }
    encode_segment(text.substr(seg, i - seg), ids);
    ids->push_back(hit->id);
    i += hit->text.size();
    seg = i;
  }
  encode_segment(text.substr(seg), ids);
  if (options.add_eos) {
    if (sep_ < 0) return Status::Error(Code::kUnsupported, "the vocabulary has no [SEP] token");
    ids->push_back(sep_);
  }
  return Status::Ok();
}

std::string WordPieceTokenizer::decode_step(int /*prev*/, int id) const {
  if (id < 0 || id >= vocab_size()) return std::string();
  const std::string& t = tokens_[static_cast<size_t>(id)];
  if (t.compare(0, 3, kWordStart) != 0) return t;
  std::string out(1, ' ');
  out.append(t, 3, std::string::npos);
  return out;
}

}  // namespace mcullm
