// Any bytes through every pre-tokenizer: the pieces must tile the input, each non-empty.
#include <cstddef>
#include <cstdint>

#include "fuzz_support.h"
#include "tokenizer/pretokenizer.h"

using namespace mcullm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  struct Ctx {
    size_t at = 0;
  };
  for (int k = 0; k <= static_cast<int>(PreTokenizer::kDeepseekCoder); ++k) {
    Ctx c;
    pretokenize(
        static_cast<PreTokenizer>(k), reinterpret_cast<const char*>(data), size,
        [](void* user, size_t off, size_t len) {
          Ctx* c = static_cast<Ctx*>(user);
          FUZZ_CHECK(off == c->at);
          FUZZ_CHECK(len > 0);
          c->at += len;
        },
        &c);
    FUZZ_CHECK(c.at == size);
  }
  return 0;
}
