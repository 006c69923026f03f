// The sparse ReLU FFN's down product over live columns (kernels.h DownCols), AVX-512 BW: the i2_s
// columns (the block types take the AVX2 kernel). down_cols_avx2.cpp's method on 512-bit vectors: two
// columns at a time, a 32-row chunk's 8 code bytes of each interleaved byte by byte, broadcast to the
// four 128-bit lanes and shifted by 6, 4, 2, 0 (rows 0..7, 8..15, 16..23, 24..31 in the low bits),
// vpmaddubsw of the codes with the pair's int8 activations into 32 int16 row sums per chunk (flushed
// to int32 every 32 pairs), then isum = sum(code * q) - sum(q) and y = (float)isum * (scale * xs[0]).
#include "kernels/x86_512/avx512_kernels.h"

namespace mcullm::avx512 {

namespace {

// Rows [32 * c0, 32 * (c0 + kChunks)); kChunks even (16 bytes of a column hold two chunks) or 1.
template <int kChunks>
void i2s_rows(const DownCols& w, const int8_t* xq, const float* xs, const int32_t* live, int n_live, int32_t sum_q,
              float* y, int c0) {
  constexpr int kFlushPairs = 32;  // 32 * 2 * 3 * 128 < 2^15
  alignas(64) int32_t isum[32 * kChunks] = {};
  const __m512i shifts = _mm512_setr_epi64(6, 6, 4, 4, 2, 2, 0, 0);
  const __m512i three = _mm512_set1_epi8(3);
  for (int k = 0; k < n_live;) {
    __m512i acc[kChunks];  // chunk c's rows 0..31 as int16
    for (int c = 0; c < kChunks; ++c) acc[c] = _mm512_setzero_si512();
    for (int p = 0; p < kFlushPairs && k < n_live; ++p) {
      const int ja = live[k++];
      const bool pair = k < n_live;
      const int jb = pair ? live[k++] : ja;
      const int qb = pair ? xq[jb] : 0;
      const __m512i qq = _mm512_set1_epi16(static_cast<int16_t>(static_cast<uint16_t>(static_cast<uint8_t>(xq[ja])) |
                                                                 static_cast<uint16_t>(static_cast<uint8_t>(qb) << 8)));
      const uint8_t* ca = w.w + static_cast<size_t>(ja) * w.col_bytes + 8 * c0;
      const uint8_t* cb = w.w + static_cast<size_t>(jb) * w.col_bytes + 8 * c0;
      for (int c = 0; c < kChunks; c += 2) {
        __m128i ab[2];
        if constexpr (kChunks == 1) {
          ab[0] = _mm_unpacklo_epi8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(ca)),
                                    _mm_loadl_epi64(reinterpret_cast<const __m128i*>(cb)));
        } else {
          const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(ca + 8 * c));
          const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(cb + 8 * c));
          ab[0] = _mm_unpacklo_epi8(a, b);  // chunk c
          ab[1] = _mm_unpackhi_epi8(a, b);  // chunk c + 1
        }
        for (int h = 0; h < 2 && c + h < kChunks; ++h) {
          const __m512i codes = _mm512_and_si512(_mm512_srlv_epi64(_mm512_broadcast_i32x4(ab[h]), shifts), three);
          acc[c + h] = _mm512_add_epi16(acc[c + h], _mm512_maddubs_epi16(codes, qq));
        }
      }
    }
    for (int c = 0; c < kChunks; ++c) {
      int32_t* o = isum + 32 * c;
      const __m512i a = _mm512_cvtepi16_epi32(_mm512_castsi512_si256(acc[c]));
      const __m512i b = _mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64(acc[c], 1));
      _mm512_store_si512(o, _mm512_add_epi32(_mm512_load_si512(o), a));
      _mm512_store_si512(o + 16, _mm512_add_epi32(_mm512_load_si512(o + 16), b));
    }
  }
  const __m512 scale = _mm512_set1_ps(w.scales[0] * xs[0]);
  const __m512i sq = _mm512_set1_epi32(sum_q);
  for (int o = 0; o < 32 * kChunks; o += 16) {
    const __m512i v = _mm512_sub_epi32(_mm512_load_si512(isum + o), sq);
    _mm512_storeu_ps(y + 32 * c0 + o, _mm512_mul_ps(_mm512_cvtepi32_ps(v), scale));
  }
}

}  // namespace

void matvec_down_cols(const DownCols& w, const int8_t* xq, const float* xs, const int32_t* live, int n_live, float* y,
                      int r0, int r1) {
  if (w.type != DType::kI2_S) {
    avx2::matvec_down_cols(w, xq, xs, live, n_live, y, r0, r1);
    return;
  }
  int32_t sum_q = 0;
  for (int k = 0; k < n_live; ++k) sum_q += xq[live[k]];
  int c = r0 / 32;
  const int c1 = r1 / 32;
  for (; c + 8 <= c1; c += 8) i2s_rows<8>(w, xq, xs, live, n_live, sum_q, y, c);
  for (; c + 2 <= c1; c += 2) i2s_rows<2>(w, xq, xs, live, n_live, sum_q, y, c);
  if (c < c1) i2s_rows<1>(w, xq, xs, live, n_live, sum_q, y, c);
}

}  // namespace mcullm::avx512
