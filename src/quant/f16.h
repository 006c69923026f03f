// IEEE half <-> float, bit-exact and portable (no F16C, no _Float16): the same bits on every target.
// Internal linkage (static) on purpose: these helpers are also compiled into the AVX2 file, and a
// shared inline definition could let the linker pick its AVX2 copy for a CPU without AVX2.
#pragma once
#include <stdint.h>
#include <string.h>

namespace mcullm {

static inline uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float f32_from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0) {
    if (mant == 0) return f32_from_bits(sign);
    // subnormal half: normalise
    int e = -1;
    do { mant <<= 1; ++e; } while ((mant & 0x400u) == 0);
    mant &= 0x3FFu;
    return f32_from_bits(sign | static_cast<uint32_t>(127 - 15 - e) << 23 | mant << 13);
  }
  if (exp == 31) return f32_from_bits(sign | 0x7F800000u | mant << 13);  // inf / nan
  return f32_from_bits(sign | (exp + 112) << 23 | mant << 13);
}

// Round to nearest, ties to even; overflow gives inf, NaN stays NaN.
static inline uint16_t f32_to_f16(float f) {
  const uint32_t u = f32_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t abs = u & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u);  // nan
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // < 2^-25 rounds to 0
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // 14..24
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = ((abs >> 13) - (112u << 10));
  const uint32_t rem = abs & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

}  // namespace mcullm
