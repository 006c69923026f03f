#include "core/fingerprint.h"

#include <string.h>

namespace mcullm {

namespace {
// h * 0x100000001b3 (FNV-1a's 64-bit prime, 2^40 + 0x1b3) mod 2^64 in 32-bit halves: cores without
// a high-word multiply (the ESP32-S3 as built here) otherwise call __muldi3 four times a logit.
// lo * 0x1b3 is split at bit 16 so that every partial product fits in 32 bits.
inline uint64_t times_prime(uint64_t h) {
  const uint32_t lo = static_cast<uint32_t>(h), hi = static_cast<uint32_t>(h >> 32);
  const uint32_t t = (lo & 0xFFFFu) * 0x1b3u;             // < 2^25
  const uint32_t u = (lo >> 16) * 0x1b3u + (t >> 16);     // < 2^26: bits 16.. of lo * 0x1b3
  const uint32_t new_lo = (u << 16) | (t & 0xFFFFu);
  const uint32_t new_hi = hi * 0x1b3u + (u >> 16) + (lo << 8);  // + (h << 40)'s high word
  return static_cast<uint64_t>(new_hi) << 32 | new_lo;
}
uint64_t fnv_word(uint64_t h, uint32_t w) {
  for (int i = 0; i < 4; ++i) {  // little-endian byte order on every target
    h ^= (w >> (8 * i)) & 0xFFu;
    h = times_prime(h);
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
