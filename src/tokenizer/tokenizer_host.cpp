#include "tokenizer/tokenizer_host.h"

#include "tokenizer/pretokenizer.h"

namespace mcullm {

void append_utf8(uint32_t cp, std::string* out) {
  uint8_t b[4];
  out->append(reinterpret_cast<const char*>(b), utf8_encode(cp, b));
}

std::string Tokenizer::describe() const {
  return std::string(kind()) + ", " + std::to_string(vocab_size()) + " tokens";
}

std::string Tokenizer::decode(const std::vector<int>& ids) const {
  std::string out;
  int prev = -1;
  for (const int id : ids) {
    out += decode_step(prev, id);
    prev = id;
  }
  return out;
}

}  // namespace mcullm
