#include "core/fingerprint.h"

#include <string.h>

namespace mcullm {

namespace {
constexpr uint64_t kPrime = 0x100000001b3ull;
uint64_t fnv_word(uint64_t h, uint32_t w) {
  for (int i = 0; i < 4; ++i) {  // little-endian byte order on every target
    h ^= (w >> (8 * i)) & 0xFFu;
    h *= kPrime;
  }
  return h;
}
}  // namespace

void Fingerprint::add_token(int32_t id) { tokens_ = fnv_word(tokens_, static_cast<uint32_t>(id)); }

void Fingerprint::add_logits(const float* logits, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t u;
    memcpy(&u, &logits[i], 4);
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu) != 0) u = 0x7FC00000u;  // one NaN
    logits_ = fnv_word(logits_, u);
  }
}

uint64_t Fingerprint::combined() const { return fnv_word(fnv_word(tokens_, static_cast<uint32_t>(logits_)), static_cast<uint32_t>(logits_ >> 32)); }

}  // namespace mcullm
