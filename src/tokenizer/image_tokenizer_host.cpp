#include "tokenizer/image_tokenizer_host.h"

#include <string.h>

namespace mcullm {

Status ImageTokenizer::load(const uint8_t* data, size_t size) {
  storage_.assign((size + 7) / 8, 0);
  if (size) memcpy(storage_.data(), data, size);
  return img_.open(storage_.data(), size);
}

const char* ImageTokenizer::kind() const { return img_.kind() == TokImageKind::kSpm ? "image-spm" : "image-bpe"; }

std::string ImageTokenizer::describe() const {
  return std::string("board image (") + (img_.kind() == TokImageKind::kSpm ? "SentencePiece-style" : "byte-level BPE, pre-tokenizer ") +
         (img_.kind() == TokImageKind::kSpm ? "" : pretokenizer_name(img_.pretokenizer())) + "), " +
         std::to_string(vocab_size()) + " tokens, " + std::to_string(img_.size_bytes()) + " bytes";
}

std::string ImageTokenizer::token_text(int id) const {
  size_t len;
  const char* s = img_.token_bytes(id, &len);
  return std::string(s, len);
}

Status ImageTokenizer::encode(std::string_view text, const EncodeOptions& options, std::vector<int>* ids) const {
  std::vector<int32_t> out(text.size() + 3), work(text.size() + 3);
  size_t n = 0;
  MC_TRY(img_.encode(text.data(), text.size(), options.add_bos, options.add_eos, options.parse_special, out.data(),
                     work.data(), out.size(), &n));
  ids->assign(out.begin(), out.begin() + static_cast<long>(n));
  return Status::Ok();
}

std::string ImageTokenizer::decode_step(int prev, int id) const {
  size_t len;
  const char* s = img_.decode_step(prev, id, &len);
  return std::string(s, len);
}

}  // namespace mcullm
