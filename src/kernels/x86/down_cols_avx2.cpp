// The sparse ReLU FFN's down product over live columns (kernels.h DownCols), AVX2. Per 32-row chunk
// and live block: the int32 sums of the block's live columns, two columns at a time with vpmaddwd
// (weights interleaved as int16 pairs, activations as an int16 pair); then, as the reference,
// acc[b % 8][r] += (float)isum * (scale * xs[b]) and the 8-lane tree fold per row; q4e (its own
// order): acc[r] += (float)isum * scale per group, y = acc * xs[0].
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

}  // namespace

void matvec_down_cols(const DownCols& w, const int8_t* xq, const float* xs, const int32_t* live, int n_live, float* y,
                      int r0, int r1) {
  if (w.type == DType::kQ8_0) {
    down_cols<Kind::kQ8>(w, xq, xs, live, n_live, y, r0, r1);
  } else if (w.type == DType::kQ4E) {
    down_cols<Kind::kQ4E>(w, xq, xs, live, n_live, y, r0, r1);
  } else {
    down_cols<Kind::kQ4>(w, xq, xs, live, n_live, y, r0, r1);
  }
}

}  // namespace mcullm::avx2
