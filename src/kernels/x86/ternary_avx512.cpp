// i2_s x int8 with AVX-512 VNNI (vpdpbusd: unsigned codes times signed activations, four products
// summed into each int32 lane, replacing AVX2's maddubs + add + madd). Integer sums are exact, so the bits equal kernels/ref/ternary_ref.cpp.
// The file is compiled with -mavx2 like its neighbours; the functions carry the AVX-512 target and
// run only behind kernels_avx512()'s CPU check.
#include <immintrin.h>

#include "kernels/x86/avx2_kernels.h"

#define MCULLM_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

namespace mcullm::avx512 {

namespace {

// Through memory, once per row: GCC 12 warns inside its 256 <-> 512-bit conversion intrinsics.
MCULLM_AVX512 inline int32_t hsum_i32(__m256i v) {
  alignas(32) int32_t l[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(l), v);
  int32_t s = 0;
  for (int i = 0; i < 8; ++i) s += l[i];
  return s;
}

// Sum of the n int8 activations (codes are w + 1: sum(w x) = sum(code x) - sum(x)).
MCULLM_AVX512 int32_t sum_i8(const int8_t* x, int n) {
  const __m256i ones = _mm256_set1_epi8(1);
  __m256i acc = _mm256_setzero_si256();
  for (int j = 0; j < n; j += 32)
    acc = _mm256_dpbusd_epi32(acc, ones, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + j)));
  return hsum_i32(acc);
}

// Rows [r, r + R) of w: exact int32 sums of code * x. 256-bit vectors (AVX512VL forms of vpdpbusd):
// on this class of core the 512-bit form has half the issue ports, so it measured slower
// (bench/ternary_bench). The activation vectors of each 128-weight group are loaded once for the R
// rows; two accumulators per row halve the dpbusd dependency chain.
template <int R>
MCULLM_AVX512 inline void rows_dot(const MatRef& w, int r, const int8_t* xq, int32_t* out) {
  const int groups = w.cols / 128;
  const __m256i mask = _mm256_set1_epi8(3);
  const uint8_t* row[R];
  __m256i acc0[R], acc1[R];
  for (int i = 0; i < R; ++i) {
    row[i] = w.row(r + i);
    acc0[i] = _mm256_setzero_si256();
    acc1[i] = _mm256_setzero_si256();
  }
  for (int g = 0; g < groups; ++g) {
    const __m256i* xv = reinterpret_cast<const __m256i*>(xq + 128 * g);
    const __m256i x0 = _mm256_loadu_si256(xv), x1 = _mm256_loadu_si256(xv + 1);
    const __m256i x2 = _mm256_loadu_si256(xv + 2), x3 = _mm256_loadu_si256(xv + 3);
    for (int i = 0; i < R; ++i) {
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row[i] + 32 * g));
      acc0[i] = _mm256_dpbusd_epi32(acc0[i], _mm256_and_si256(_mm256_srli_epi16(raw, 6), mask), x0);
      acc1[i] = _mm256_dpbusd_epi32(acc1[i], _mm256_and_si256(_mm256_srli_epi16(raw, 4), mask), x1);
      acc0[i] = _mm256_dpbusd_epi32(acc0[i], _mm256_and_si256(_mm256_srli_epi16(raw, 2), mask), x2);
      acc1[i] = _mm256_dpbusd_epi32(acc1[i], _mm256_and_si256(raw, mask), x3);
    }
  }
  for (int i = 0; i < R; ++i) out[i] = hsum_i32(_mm256_add_epi32(acc0[i], acc1[i]));
}

}  // namespace

MCULLM_AVX512 void matvec_i2s(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1) {
  const float scale = w.scale * xs[0];
  const int32_t xsum = sum_i8(xq, w.cols);
  int32_t s[4];
  int r = r0;
  for (; r + 4 <= r1; r += 4) {
    rows_dot<4>(w, r, xq, s);
    for (int k = 0; k < 4; ++k) y[r + k] = static_cast<float>(s[k] - xsum) * scale;
  }
  for (; r < r1; ++r) {
    rows_dot<1>(w, r, xq, s);
    y[r] = static_cast<float>(s[0] - xsum) * scale;
  }
}

}  // namespace mcullm::avx512
