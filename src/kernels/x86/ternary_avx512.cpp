// i2_s x int8 with AVX-512 VNNI (vpdpbusd: unsigned codes times signed activations, four products
// summed into each int32 lane, replacing AVX2's maddubs + add + madd). Integer sums are exact, so the bits equal kernels/ref/ternary_ref.cpp.
// The file is compiled with -mavx2 like its neighbours; the functions carry the AVX-512 target and
// run only behind kernels_avx512()'s CPU check.
#include <immintrin.h>

#include "kernels/matmat_rows.h"
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

}  // namespace

// Sum of the n int8 activations (codes are w + 1: sum(w x) = sum(code x) - sum(x)).
MCULLM_AVX512 int32_t sum_i8(const int8_t* x, int n) {
  const __m256i ones = _mm256_set1_epi8(1);
  __m256i acc = _mm256_setzero_si256();
  for (int j = 0; j < n; j += 32)
    acc = _mm256_dpbusd_epi32(acc, ones, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + j)));
  return hsum_i32(acc);
}

namespace {

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
  const int r4 = (avx2::rows_side_by_side(w, 4) ? r1 - r0 : 0) / 4 * 4 + r0;  // end of the four-row passes
  int r = r0;
  for (; r < r4; r += 4) {
    rows_dot<4>(w, r, xq, s);
    for (int k = 0; k < 4; ++k) y[r + k] = static_cast<float>(s[k] - xsum) * scale;
  }
  for (; r < r1; ++r) {
    rows_dot<1>(w, r, xq, s);
    y[r] = static_cast<float>(s[0] - xsum) * scale;
  }
}

namespace {

// One row against C columns: each group's codes are unpacked once and multiplied into the C
// columns' activations (two accumulators per column, as in rows_dot).
template <int C>
MCULLM_AVX512 inline void row_cols_dot(const uint8_t* row, int groups, const int8_t* const* x, int32_t* out) {
  const __m256i mask = _mm256_set1_epi8(3);
  __m256i acc0[C], acc1[C];
  for (int c = 0; c < C; ++c) {
    acc0[c] = _mm256_setzero_si256();
    acc1[c] = _mm256_setzero_si256();
  }
  for (int g = 0; g < groups; ++g) {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 32 * g));
    const __m256i c0 = _mm256_and_si256(_mm256_srli_epi16(raw, 6), mask);
    const __m256i c1 = _mm256_and_si256(_mm256_srli_epi16(raw, 4), mask);
    const __m256i c2 = _mm256_and_si256(_mm256_srli_epi16(raw, 2), mask);
    const __m256i c3 = _mm256_and_si256(raw, mask);
    for (int c = 0; c < C; ++c) {
      const __m256i* xv = reinterpret_cast<const __m256i*>(x[c] + 128 * g);
      acc0[c] = _mm256_dpbusd_epi32(acc0[c], c0, _mm256_loadu_si256(xv));
      acc1[c] = _mm256_dpbusd_epi32(acc1[c], c1, _mm256_loadu_si256(xv + 1));
      acc0[c] = _mm256_dpbusd_epi32(acc0[c], c2, _mm256_loadu_si256(xv + 2));
      acc1[c] = _mm256_dpbusd_epi32(acc1[c], c3, _mm256_loadu_si256(xv + 3));
    }
  }
  for (int c = 0; c < C; ++c) out[c] = hsum_i32(_mm256_add_epi32(acc0[c], acc1[c]));
}

}  // namespace

// Rows in blocks that stay in L1 (matmat_row_block) while the columns pass over them, four columns
// per pass. Each output is (float)(isum - xsum_c) * (w.scale * xs[c]): matvec_i2s's bits.
MCULLM_AVX512 void matmat_i2s(const MatRef& w, const int8_t* xq, size_t xq_stride, const float* xs, int n, float* y,
                              size_t y_stride, int r0, int r1) {
  const int groups = w.cols / 128;
  constexpr int kCols = 4;
  for_row_blocks(w, (n + kCols - 1) / kCols, r0, r1, [&](int cb, int rb0, int rb1) {
    const int c0 = cb * kCols, nc = n - c0 < kCols ? n - c0 : kCols;
    const int8_t* x[kCols];
    int32_t xsum[kCols];
    float scale[kCols];
    for (int c = 0; c < nc; ++c) {
      x[c] = xq + static_cast<size_t>(c0 + c) * xq_stride;
      xsum[c] = sum_i8(x[c], w.cols);
      scale[c] = w.scale * xs[c0 + c];
    }
    int32_t s[kCols];
    for (int r = rb0; r < rb1; ++r) {
      if (nc == kCols) {
        row_cols_dot<kCols>(w.row(r), groups, x, s);
      } else {
        for (int c = 0; c < nc; ++c) row_cols_dot<1>(w.row(r), groups, x + c, s + c);
      }
      for (int c = 0; c < nc; ++c)
        y[static_cast<size_t>(c0 + c) * y_stride + r] = static_cast<float>(s[c] - xsum[c]) * scale[c];
    }
  });
}

// The listed rows with the activations' sum computed once (matvec_i2s's per call) and each row
// prefetched 8 rows ahead (avx2::matvec_i2s_rows with the VNNI row kernel).
MCULLM_AVX512 void matvec_i2s_rows(const MatRef& w, const int8_t* xq, const float* xs, const int32_t* rows, int n,
                                   float* y) {
  const float scale = w.scale * xs[0];
  const int32_t xsum = sum_i8(xq, w.cols);
  for (int i = 0; i < n && i < 8; ++i) avx2::prefetch_listed_row(w, rows, i, n, 0);
  for (int i = 0; i < n; ++i) {
    avx2::prefetch_listed_row(w, rows, i, n, 8);
    int32_t s;
    rows_dot<1>(w, rows[i], xq, &s);
    y[rows[i]] = static_cast<float>(s - xsum) * scale;
  }
}

}  // namespace mcullm::avx512
