#include "tokenizer/tokenizer_host.h"

namespace mcullm {

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
