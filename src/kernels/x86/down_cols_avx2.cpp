// The sparse ReLU FFN's down product over live columns (kernels.h DownCols), AVX2. Per 32-row chunk
// and live block: the int32 sums of the block's live columns, two columns at a time with vpmaddwd
// (weights interleaved as int16 pairs, activations as an int16 pair); then, as the reference,
// acc[b % 8][r] += (float)isum * (scale * xs[b]) and the 8-lane tree fold per row; q4e (its own
// order): acc[r] += (float)isum * scale per group, y = acc * xs[0].
// i2_s (one int32 sum per row, kernels.h DownCols): two columns at a time, their 8 code bytes of a
// 32-row chunk interleaved byte by byte, shifted per 128-bit half to put rows 0..15 / 16..31 in the
// low bits, and vpmaddubsw of the codes (w + 1, unsigned) with the column pair's int8 activations
// into int16 row sums (|sum| <= 2 * 3 * 128 per pair; flushed to int32 every 32 pairs); then
// isum = sum(code * q) - sum(q) and y = (float)isum * (scale * xs[0]), matvec_i2s's step.
#include "kernels/ref/dot_order.h"
#include "kernels/x86/avx2_kernels.h"

namespace mcullm::avx2 {

namespace {

enum class Kind { kQ8, kQ4, kQ4E };  // q8_0; q4_0 / q4g64; q4e

// The 32 integer weights (rows 32c .. 32c + 31, in order) of a column chunk.
template <Kind kK>
inline __m256i column_chunk(const uint8_t* col, int c) {
  if constexpr (kK == Kind::kQ8) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(col + 32 * c));
  else return unpack_nibbles16(col + 16 * c);
}

// Rows [32 * c0, 32 * (c0 + kChunks)) of y.
template <Kind kK, int kChunks>
void down_rows(const DownCols& w, const int8_t* xq, const float* xs, const int32_t* live, int n_live, float* y, int c0) {
  constexpr int kLanes = kK == Kind::kQ4E ? 1 : kBlockLanes;
  alignas(32) float acc[kLanes][32 * kChunks] = {};
  for (int k = 0; k < n_live;) {
    const int b = live[k] / w.block;
    // isum[c][0]: rows 0..3 and 8..11 of chunk c's first 16, [1]: rows 4..7, 12..15; [2], [3]: the next 16.
    __m256i isum[kChunks][4];
    for (int c = 0; c < kChunks; ++c)
      for (int i = 0; i < 4; ++i) isum[c][i] = _mm256_setzero_si256();
    for (; k < n_live && live[k] / w.block == b;) {
      const int ja = live[k++];
      const bool pair = k < n_live && live[k] / w.block == b;
      const int jb = pair ? live[k++] : ja;
      const int qb = pair ? xq[jb] : 0;
      const __m256i qq = _mm256_set1_epi32(static_cast<int32_t>((static_cast<uint32_t>(static_cast<uint16_t>(xq[ja]))) |
                                                                (static_cast<uint32_t>(static_cast<uint16_t>(qb)) << 16)));
      const uint8_t* ca = w.w + static_cast<size_t>(ja) * w.col_bytes;
      const uint8_t* cb = w.w + static_cast<size_t>(jb) * w.col_bytes;
      for (int c = 0; c < kChunks; ++c) {
        const __m256i va = column_chunk<kK>(ca, c0 + c), vb = column_chunk<kK>(cb, c0 + c);
        const __m256i a0 = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(va));
        const __m256i a1 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(va, 1));
        const __m256i b0 = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(vb));
        const __m256i b1 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(vb, 1));
        isum[c][0] = _mm256_add_epi32(isum[c][0], _mm256_madd_epi16(_mm256_unpacklo_epi16(a0, b0), qq));
        isum[c][1] = _mm256_add_epi32(isum[c][1], _mm256_madd_epi16(_mm256_unpackhi_epi16(a0, b0), qq));
        isum[c][2] = _mm256_add_epi32(isum[c][2], _mm256_madd_epi16(_mm256_unpacklo_epi16(a1, b1), qq));
        isum[c][3] = _mm256_add_epi32(isum[c][3], _mm256_madd_epi16(_mm256_unpackhi_epi16(a1, b1), qq));
      }
    }
    const __m256 dx = _mm256_set1_ps(kK == Kind::kQ4E ? 1.0f : xs[b]);
    const float* sc = w.scales + static_cast<size_t>(b) * w.rows + 32 * c0;
    float* a = acc[b % kLanes];
    for (int c = 0; c < kChunks; ++c) {
      const __m256i rows[4] = {_mm256_permute2x128_si256(isum[c][0], isum[c][1], 0x20),
                               _mm256_permute2x128_si256(isum[c][0], isum[c][1], 0x31),
                               _mm256_permute2x128_si256(isum[c][2], isum[c][3], 0x20),
                               _mm256_permute2x128_si256(isum[c][2], isum[c][3], 0x31)};
      for (int i = 0; i < 4; ++i) {
        const int o = 32 * c + 8 * i;
        const __m256 d = kK == Kind::kQ4E ? _mm256_loadu_ps(sc + o) : _mm256_mul_ps(_mm256_loadu_ps(sc + o), dx);
        _mm256_store_ps(a + o, _mm256_add_ps(_mm256_load_ps(a + o), _mm256_mul_ps(_mm256_cvtepi32_ps(rows[i]), d)));
      }
    }
  }
  if constexpr (kK == Kind::kQ4E) {
    const __m256 s = _mm256_set1_ps(xs[0]);
    for (int o = 0; o < 32 * kChunks; o += 8) _mm256_storeu_ps(y + 32 * c0 + o, _mm256_mul_ps(_mm256_load_ps(acc[0] + o), s));
    return;
  }
  for (int o = 0; o < 32 * kChunks; o += 8) {  // fold_lanes8 per row: s = 4, 2, 1
    __m256 l[kBlockLanes];
    for (int i = 0; i < kBlockLanes; ++i) l[i] = _mm256_load_ps(acc[i] + o);
    for (int i = 0; i < 4; ++i) l[i] = _mm256_add_ps(l[i], l[i + 4]);
    for (int i = 0; i < 2; ++i) l[i] = _mm256_add_ps(l[i], l[i + 2]);
    _mm256_storeu_ps(y + 32 * c0 + o, _mm256_add_ps(l[0], l[1]));
  }
}

template <Kind kK>
void down_cols(const DownCols& w, const int8_t* xq, const float* xs, const int32_t* live, int n_live, float* y, int r0,
               int r1) {
  int c = r0 / 32;
  const int c1 = r1 / 32;
  for (; c + 2 <= c1; c += 2) down_rows<kK, 2>(w, xq, xs, live, n_live, y, c);
  for (; c < c1; ++c) down_rows<kK, 1>(w, xq, xs, live, n_live, y, c);
}

// i2_s: rows [32 * c0, 32 * c1), at most kI2sMaxChunks chunks: the live columns one pair at a time,
// each column's bytes of the range read in order (16 bytes = two chunks per step; reading a few bytes
// of every live column per pass over a few rows made each line a cache miss: half the speed), the
// int16 row sums in memory (L1), flushed to int32 every 32 pairs.
constexpr int kI2sMaxChunks = 64;
void i2s_rows(const DownCols& w, const int8_t* xq, const float* xs, const int32_t* live, int n_live, int32_t sum_q,
              float* y, int c0, int c1) {
  constexpr int kFlushPairs = 32;  // 32 * 2 * 3 * 128 < 2^15
  alignas(32) int16_t acc[32 * kI2sMaxChunks];
  alignas(32) int32_t isum[32 * kI2sMaxChunks] = {};
  const int n = c1 - c0;
  const __m256i s_lo = _mm256_setr_epi64x(6, 6, 4, 4), s_hi = _mm256_setr_epi64x(2, 2, 0, 0);
  const __m256i three = _mm256_set1_epi8(3);
  auto add = [&](int c, __m128i ab, __m256i qq) {  // ab: chunk c's pairs of code bytes
    const __m256i both = _mm256_broadcastsi128_si256(ab);
    const __m256i lo = _mm256_and_si256(_mm256_srlv_epi64(both, s_lo), three);  // rows 0..7 | 8..15
    const __m256i hi = _mm256_and_si256(_mm256_srlv_epi64(both, s_hi), three);  // rows 16..23 | 24..31
    __m256i* a = reinterpret_cast<__m256i*>(acc + 32 * c);
    _mm256_store_si256(a, _mm256_add_epi16(_mm256_load_si256(a), _mm256_maddubs_epi16(lo, qq)));
    _mm256_store_si256(a + 1, _mm256_add_epi16(_mm256_load_si256(a + 1), _mm256_maddubs_epi16(hi, qq)));
  };
  for (int k = 0; k < n_live;) {
    for (int c = 0; c < 2 * n; ++c) _mm256_store_si256(reinterpret_cast<__m256i*>(acc) + c, _mm256_setzero_si256());
    for (int p = 0; p < kFlushPairs && k < n_live; ++p) {
      const int ja = live[k++];
      const bool pair = k < n_live;
      const int jb = pair ? live[k++] : ja;
      const int qb = pair ? xq[jb] : 0;
      const __m256i qq = _mm256_set1_epi16(static_cast<int16_t>(static_cast<uint16_t>(static_cast<uint8_t>(xq[ja])) |
                                                                 static_cast<uint16_t>(static_cast<uint8_t>(qb) << 8)));
      const uint8_t* ca = w.w + static_cast<size_t>(ja) * w.col_bytes + 8 * c0;
      const uint8_t* cb = w.w + static_cast<size_t>(jb) * w.col_bytes + 8 * c0;
      prefetch_columns(w, live, k + 6, n_live, c0, n);  // the pair three pairs ahead
      int c = 0;
      for (; c + 2 <= n; c += 2) {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(ca + 8 * c));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(cb + 8 * c));
        add(c, _mm_unpacklo_epi8(a, b), qq);
        add(c + 1, _mm_unpackhi_epi8(a, b), qq);
      }
      if (c < n)
        add(c, _mm_unpacklo_epi8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(ca + 8 * c)),
                                 _mm_loadl_epi64(reinterpret_cast<const __m128i*>(cb + 8 * c))), qq);
    }
    for (int o = 0; o < 32 * n; o += 16) {
      const __m256i a16 = _mm256_load_si256(reinterpret_cast<const __m256i*>(acc + o));
      __m256i* d = reinterpret_cast<__m256i*>(isum + o);
      _mm256_store_si256(d, _mm256_add_epi32(_mm256_load_si256(d), _mm256_cvtepi16_epi32(_mm256_castsi256_si128(a16))));
      _mm256_store_si256(d + 1, _mm256_add_epi32(_mm256_load_si256(d + 1), _mm256_cvtepi16_epi32(_mm256_extracti128_si256(a16, 1))));
    }
  }
  const __m256 scale = _mm256_set1_ps(w.scales[0] * xs[0]);
  const __m256i sq = _mm256_set1_epi32(sum_q);
  for (int o = 0; o < 32 * n; o += 8) {
    const __m256i v = _mm256_sub_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(isum + o)), sq);
    _mm256_storeu_ps(y + 32 * c0 + o, _mm256_mul_ps(_mm256_cvtepi32_ps(v), scale));
  }
}

void i2s_down_cols(const DownCols& w, const int8_t* xq, const float* xs, const int32_t* live, int n_live, float* y,
                   int r0, int r1) {
  int32_t sum_q = 0;
  for (int k = 0; k < n_live; ++k) sum_q += xq[live[k]];
  for (int c = r0 / 32; c < r1 / 32; c += kI2sMaxChunks)
    i2s_rows(w, xq, xs, live, n_live, sum_q, y, c, c + kI2sMaxChunks < r1 / 32 ? c + kI2sMaxChunks : r1 / 32);
}

}  // namespace

void matvec_down_cols(const DownCols& w, const int8_t* xq, const float* xs, const int32_t* live, int n_live, float* y,
                      int r0, int r1) {
  if (w.type == DType::kI2_S) {
    i2s_down_cols(w, xq, xs, live, n_live, y, r0, r1);
  } else if (w.type == DType::kQ8_0) {
    down_cols<Kind::kQ8>(w, xq, xs, live, n_live, y, r0, r1);
  } else if (w.type == DType::kQ4E) {
    down_cols<Kind::kQ4E>(w, xq, xs, live, n_live, y, r0, r1);
  } else {
    down_cols<Kind::kQ4>(w, xq, xs, live, n_live, y, r0, r1);
  }
}

}  // namespace mcullm::avx2
