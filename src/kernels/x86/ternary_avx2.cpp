// AVX2 ternary kernels: exact int32 sums, the same bits as kernels/ref/ternary_ref.cpp.
#include <immintrin.h>

#include "kernels/x86/avx2_kernels.h"

namespace mcullm::avx2 {

namespace {

inline int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// Sum of all int8 activations (the codes are w + 1, so sum(w x) = sum(code x) - sum(x)).
inline int32_t sum_i8(const int8_t* x, int n) {
  __m256i acc = _mm256_setzero_si256();
  const __m256i ones = _mm256_set1_epi16(1);
  for (int j = 0; j < n; j += 32) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + j));
    const __m256i lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(v));
    const __m256i hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(v, 1));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_add_epi16(lo, hi), ones));
  }
  return hsum_i32(acc);
}

// sum over one 128-weight group of code * x, as 8 int32 lanes. Codes are 0..2 (3 on corrupt data),
// so maddubs pairs are at most 2 * 3 * 128 and four of them fit int16 exactly.
inline __m256i group_dot(const uint8_t* packed, const int8_t* x) {
  const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(packed));
  const __m256i mask = _mm256_set1_epi8(3);
  const __m256i c0 = _mm256_and_si256(_mm256_srli_epi16(raw, 6), mask);
  const __m256i c1 = _mm256_and_si256(_mm256_srli_epi16(raw, 4), mask);
  const __m256i c2 = _mm256_and_si256(_mm256_srli_epi16(raw, 2), mask);
  const __m256i c3 = _mm256_and_si256(raw, mask);
  const __m256i* xv = reinterpret_cast<const __m256i*>(x);
  __m256i s = _mm256_maddubs_epi16(c0, _mm256_loadu_si256(xv));
  s = _mm256_add_epi16(s, _mm256_maddubs_epi16(c1, _mm256_loadu_si256(xv + 1)));
  s = _mm256_add_epi16(s, _mm256_maddubs_epi16(c2, _mm256_loadu_si256(xv + 2)));
  s = _mm256_add_epi16(s, _mm256_maddubs_epi16(c3, _mm256_loadu_si256(xv + 3)));
  return _mm256_madd_epi16(s, _mm256_set1_epi16(1));
}

}  // namespace

void matvec_i2s(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1) {
  const float scale = w.scale * xs[0];
  const int groups = w.cols / 128;
  const int32_t xsum = sum_i8(xq, w.cols);
  int r = r0;
  for (; r + 2 <= r1; r += 2) {
    const uint8_t* a = w.row(r);
    const uint8_t* b = w.row(r + 1);
    __m256i acc_a = _mm256_setzero_si256(), acc_b = _mm256_setzero_si256();
    for (int g = 0; g < groups; ++g) {
      acc_a = _mm256_add_epi32(acc_a, group_dot(a + 32 * g, xq + 128 * g));
      acc_b = _mm256_add_epi32(acc_b, group_dot(b + 32 * g, xq + 128 * g));
    }
    y[r] = static_cast<float>(hsum_i32(acc_a) - xsum) * scale;
    y[r + 1] = static_cast<float>(hsum_i32(acc_b) - xsum) * scale;
  }
  for (; r < r1; ++r) {
    const uint8_t* a = w.row(r);
    __m256i acc = _mm256_setzero_si256();
    for (int g = 0; g < groups; ++g) acc = _mm256_add_epi32(acc, group_dot(a + 32 * g, xq + 128 * g));
    y[r] = static_cast<float>(hsum_i32(acc) - xsum) * scale;
  }
}

}  // namespace mcullm::avx2
