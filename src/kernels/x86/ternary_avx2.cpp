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

// Sums of code * x over rows [r, r + R): the four activation vectors of each 128-weight group are
// loaded once for the R rows. Codes are 0..2 (3 on corrupt data), so a maddubs pair is at most
// 2 * 3 * 128 and four of them fit int16 exactly before they are widened to int32.
template <int R>
inline void rows_dot(const MatRef& w, int r, const int8_t* xq, int32_t* out) {
  const int groups = w.cols / 128;
  const __m256i mask = _mm256_set1_epi8(3), ones = _mm256_set1_epi16(1);
  const uint8_t* row[R];
  __m256i acc[R];
  for (int i = 0; i < R; ++i) {
    row[i] = w.row(r + i);
    acc[i] = _mm256_setzero_si256();
  }
  for (int g = 0; g < groups; ++g) {
    const __m256i* xv = reinterpret_cast<const __m256i*>(xq + 128 * g);
    const __m256i x0 = _mm256_loadu_si256(xv), x1 = _mm256_loadu_si256(xv + 1);
    const __m256i x2 = _mm256_loadu_si256(xv + 2), x3 = _mm256_loadu_si256(xv + 3);
    for (int i = 0; i < R; ++i) {
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row[i] + 32 * g));
      __m256i s16 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(raw, 6), mask), x0);
      s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(raw, 4), mask), x1));
      s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(raw, 2), mask), x2));
      s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(_mm256_and_si256(raw, mask), x3));
      acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(s16, ones));
    }
  }
  for (int i = 0; i < R; ++i) out[i] = hsum_i32(acc[i]);
}

// One row times C columns (the batched product): the row's codes of a 128-weight group are
// unpacked once for the C columns. |code| <= 3 and |x| <= 128, so a maddubs pair is at most
// 2 * 3 * 128 = 768 in magnitude and the 4 pairs of kGroups groups (32 per int16 lane, at most
// 24576 < 32767) are added in int16 exactly before they are widened to int32.
template <int C>
inline void row_cols_dot(const uint8_t* row, int groups, const int8_t* const* x, int32_t* out) {
  constexpr int kGroups = 8;
  const __m256i mask = _mm256_set1_epi8(3), ones = _mm256_set1_epi16(1);
  __m256i acc[C];
  for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_si256();
  for (int g0 = 0; g0 < groups; g0 += kGroups) {
    const int g1 = groups - g0 < kGroups ? groups : g0 + kGroups;
    __m256i p[C];
    for (int c = 0; c < C; ++c) p[c] = _mm256_setzero_si256();
    for (int g = g0; g < g1; ++g) {
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 32 * g));
      const __m256i c0 = _mm256_and_si256(_mm256_srli_epi16(raw, 6), mask);
      const __m256i c1 = _mm256_and_si256(_mm256_srli_epi16(raw, 4), mask);
      const __m256i c2 = _mm256_and_si256(_mm256_srli_epi16(raw, 2), mask);
      const __m256i c3 = _mm256_and_si256(raw, mask);
      for (int c = 0; c < C; ++c) {
        const __m256i* xv = reinterpret_cast<const __m256i*>(x[c] + 128 * g);
        const __m256i s01 = _mm256_add_epi16(_mm256_maddubs_epi16(c0, _mm256_loadu_si256(xv)),
                                             _mm256_maddubs_epi16(c1, _mm256_loadu_si256(xv + 1)));
        const __m256i s23 = _mm256_add_epi16(_mm256_maddubs_epi16(c2, _mm256_loadu_si256(xv + 2)),
                                             _mm256_maddubs_epi16(c3, _mm256_loadu_si256(xv + 3)));
        p[c] = _mm256_add_epi16(p[c], _mm256_add_epi16(s01, s23));
      }
    }
    for (int c = 0; c < C; ++c) acc[c] = _mm256_add_epi32(acc[c], _mm256_madd_epi16(p[c], ones));
  }
  for (int c = 0; c < C; ++c) out[c] = hsum_i32(acc[c]);
}

}  // namespace

// Rows in blocks that stay in L1 (matmat_row_block) while the columns pass over them, four columns
// per pass (the avx512 table's scheme with vpmaddubsw). Each output is
// (float)(isum - xsum_c) * (w.scale * xs[c]): matvec_i2s's bits (integer sums are exact).
void matmat_i2s(const MatRef& w, const int8_t* xq, size_t xq_stride, const float* xs, int n, float* y, size_t y_stride,
                int r0, int r1) {
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

void matvec_i2s(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1) {
  const float scale = w.scale * xs[0];
  const int32_t xsum = sum_i8(xq, w.cols);
  int32_t s[4];
  const int r4 = (rows_side_by_side(w, 4) ? r1 - r0 : 0) / 4 * 4 + r0;  // end of the four-row passes
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

// The listed rows with the activations' sum computed once (matvec_i2s's per call) and each row
// prefetched 8 rows ahead.
void matvec_i2s_rows(const MatRef& w, const int8_t* xq, const float* xs, const int32_t* rows, int n, float* y) {
  const float scale = w.scale * xs[0];
  const int32_t xsum = sum_i8(xq, w.cols);
  for (int i = 0; i < n && i < 8; ++i) prefetch_listed_row(w, rows, i, n, 0);
  for (int i = 0; i < n; ++i) {
    prefetch_listed_row(w, rows, i, n, 8);
    int32_t s;
    rows_dot<1>(w, rows[i], xq, &s);
    y[rows[i]] = static_cast<float>(s - xsum) * scale;
  }
}

}  // namespace mcullm::avx2
