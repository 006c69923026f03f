// The sparse ReLU FFN's down product over live columns (kernels.h DownCols), AVX-512 BW: the i2_s
// columns (the block types take the AVX2 kernel). Two columns at a time, a 32-row chunk's 8 code bytes
// of each interleaved byte by byte, broadcast to the four 128-bit lanes and shifted by 6, 4, 2, 0
// (rows 0..7, 8..15, 16..23, 24..31 in the low bits), vpmaddubsw of the codes with the pair's int8
// activations into 32 int16 row sums per chunk (flushed to int32 every 32 pairs), then
// isum = sum(code * q) - sum(q) and y = (float)isum * (scale * xs[0]). Columns are read whole (all
// rows of the range, up to 2048, in order) and the sums kept in L1: reading 64 bytes of every live
// column per pass over 256 rows was 5x slower per byte than the dense rows (a cache miss per line).
#include "kernels/x86_512/avx512_kernels.h"

namespace mcullm::avx512 {

namespace {

// Rows [32 * c0, 32 * c1), at most kMaxChunks chunks: the live columns one pair at a time, each
// column's bytes of the range read in order (16 bytes = two chunks per step), the int16 row sums in
// memory (L1) and flushed to int32 every 32 pairs.
constexpr int kMaxChunks = 64;
void i2s_rows(const DownCols& w, const int8_t* xq, const float* xs, const int32_t* live, int n_live, int32_t sum_q,
              float* y, int c0, int c1) {
  constexpr int kFlushPairs = 32;  // 32 * 2 * 3 * 128 < 2^15
  alignas(64) int16_t acc[32 * kMaxChunks];
  alignas(64) int32_t isum[32 * kMaxChunks] = {};
  const int n = c1 - c0;
  const __m512i shifts = _mm512_setr_epi64(6, 6, 4, 4, 2, 2, 0, 0);
  const __m512i three = _mm512_set1_epi8(3);
  auto add = [&](int c, __m128i ab, __m512i qq) {
    const __m512i codes = _mm512_and_si512(_mm512_srlv_epi64(_mm512_broadcast_i32x4(ab), shifts), three);
    __m512i* a = reinterpret_cast<__m512i*>(acc + 32 * c);
    _mm512_store_si512(a, _mm512_add_epi16(_mm512_load_si512(a), _mm512_maddubs_epi16(codes, qq)));
  };
  for (int k = 0; k < n_live;) {
    for (int c = 0; c < n; ++c) _mm512_store_si512(acc + 32 * c, _mm512_setzero_si512());
    for (int p = 0; p < kFlushPairs && k < n_live; ++p) {
      const int ja = live[k++];
      const bool pair = k < n_live;
      const int jb = pair ? live[k++] : ja;
      const int qb = pair ? xq[jb] : 0;
      const __m512i qq = _mm512_set1_epi16(static_cast<int16_t>(static_cast<uint16_t>(static_cast<uint8_t>(xq[ja])) |
                                                                 static_cast<uint16_t>(static_cast<uint8_t>(qb) << 8)));
      const uint8_t* ca = w.w + static_cast<size_t>(ja) * w.col_bytes + 8 * c0;
      const uint8_t* cb = w.w + static_cast<size_t>(jb) * w.col_bytes + 8 * c0;
      avx2::prefetch_columns(w, live, k + 6, n_live, c0, n);  // the pair three pairs ahead
      int c = 0;
      for (; c + 2 <= n; c += 2) {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(ca + 8 * c));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(cb + 8 * c));
        add(c, _mm_unpacklo_epi8(a, b), qq);      // chunk c
        add(c + 1, _mm_unpackhi_epi8(a, b), qq);  // chunk c + 1
      }
      if (c < n)
        add(c, _mm_unpacklo_epi8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(ca + 8 * c)),
                                 _mm_loadl_epi64(reinterpret_cast<const __m128i*>(cb + 8 * c))), qq);
    }
    for (int o = 0; o < 32 * n; o += 32) {
      const __m512i a16 = _mm512_load_si512(acc + o);
      const __m512i a = _mm512_cvtepi16_epi32(_mm512_castsi512_si256(a16));
      const __m512i b = _mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64(a16, 1));
      _mm512_store_si512(isum + o, _mm512_add_epi32(_mm512_load_si512(isum + o), a));
      _mm512_store_si512(isum + o + 16, _mm512_add_epi32(_mm512_load_si512(isum + o + 16), b));
    }
  }
  const __m512 scale = _mm512_set1_ps(w.scales[0] * xs[0]);
  const __m512i sq = _mm512_set1_epi32(sum_q);
  for (int o = 0; o < 32 * n; o += 16) {
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
  for (int c = r0 / 32; c < r1 / 32; c += kMaxChunks)
    i2s_rows(w, xq, xs, live, n_live, sum_q, y, c, c + kMaxChunks < r1 / 32 ? c + kMaxChunks : r1 / 32);
}

}  // namespace mcullm::avx512
