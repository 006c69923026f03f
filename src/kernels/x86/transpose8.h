// An 8 x 8 transpose of 32-bit words in AVX2 registers: r[k] = words 0..7 of row k in, r[j] = word j
// of rows 0..7 out. Shared by the int8 GEMM's block lanes and the attention's key / weight columns
// (floats moved as their bits). Internal linkage: each includer compiles it with its own flags.
#pragma once
#include <immintrin.h>

namespace mcullm {
namespace {

inline void transpose8_epi32(__m256i* r) {
  const __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
  const __m256i t4 = _mm256_unpacklo_epi32(r[4], r[5]), t5 = _mm256_unpackhi_epi32(r[4], r[5]);
  const __m256i t6 = _mm256_unpacklo_epi32(r[6], r[7]), t7 = _mm256_unpackhi_epi32(r[6], r[7]);
  const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
  const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
  const __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
  const __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
  r[0] = _mm256_permute2x128_si256(u0, u4, 0x20);
  r[1] = _mm256_permute2x128_si256(u1, u5, 0x20);
  r[2] = _mm256_permute2x128_si256(u2, u6, 0x20);
  r[3] = _mm256_permute2x128_si256(u3, u7, 0x20);
  r[4] = _mm256_permute2x128_si256(u0, u4, 0x31);
  r[5] = _mm256_permute2x128_si256(u1, u5, 0x31);
  r[6] = _mm256_permute2x128_si256(u2, u6, 0x31);
  r[7] = _mm256_permute2x128_si256(u3, u7, 0x31);
}

// The same for floats: col[i] lane j = r[j] lane i.
inline void transpose8_ps(const __m256 r[8], __m256 col[8]) {
  __m256i w[8];
  for (int i = 0; i < 8; ++i) w[i] = _mm256_castps_si256(r[i]);
  transpose8_epi32(w);
  for (int i = 0; i < 8; ++i) col[i] = _mm256_castsi256_ps(w[i]);
}

}  // namespace
}  // namespace mcullm
