// AVX2 TL1 / TL2 LUT matmul: byte-shuffle lookups into the low and high byte planes of each group's
// int16 table, int16 sums inside a K block (exact: the tilings bound them), int32 per tile row.
#include "kernels/tl_layout.h"
#include "kernels/x86/avx2_kernels.h"

namespace mcullm::avx2 {

namespace {

inline __m256i load(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256i bcast16(const uint8_t* p) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// acc[0..15] += a (16 int16 lanes), widened.
inline void add_rows16(int32_t* acc, __m256i a) {
  __m256i* p = reinterpret_cast<__m256i*>(acc);
  _mm256_storeu_si256(p, _mm256_add_epi32(_mm256_loadu_si256(p), _mm256_cvtepi16_epi32(_mm256_castsi256_si128(a))));
  _mm256_storeu_si256(p + 1,
                      _mm256_add_epi32(_mm256_loadu_si256(p + 1), _mm256_cvtepi16_epi32(_mm256_extracti128_si256(a, 1))));
}
// acc[0..7] += 8 int16 lanes, widened.
inline void add_rows8(int32_t* acc, __m128i a) {
  __m256i* p = reinterpret_cast<__m256i*>(acc);
  _mm256_storeu_si256(p, _mm256_add_epi32(_mm256_loadu_si256(p), _mm256_cvtepi16_epi32(a)));
}

// One group's lookups for 32 rows (TL2 order: unpacklo gives rows 0-15, unpackhi rows 16-31), the
// sign of row c taken from bit 15 - i (rows 0-15) and 15 - (i + 1) (rows 16-31) of sign word c.
inline void lookup32(const uint8_t* table, __m256i nib, __m256i* a0, __m256i* a1) {
  const __m256i vl = _mm256_shuffle_epi8(bcast16(table), nib), vh = _mm256_shuffle_epi8(bcast16(table + 16), nib);
  *a0 = _mm256_add_epi16(*a0, _mm256_unpacklo_epi8(vl, vh));
  *a1 = _mm256_add_epi16(*a1, _mm256_unpackhi_epi8(vl, vh));
}
inline void lookup32_signed(const uint8_t* table, __m256i nib, __m256i signs, int i, __m256i* a0, __m256i* a1) {
  const __m256i vl = _mm256_shuffle_epi8(bcast16(table), nib), vh = _mm256_shuffle_epi8(bcast16(table + 16), nib);
  const __m256i s0 = _mm256_srai_epi16(_mm256_sll_epi16(signs, _mm_cvtsi32_si128(i)), 15);
  const __m256i s1 = _mm256_srai_epi16(_mm256_sll_epi16(signs, _mm_cvtsi32_si128(i + 1)), 15);
  const __m256i v0 = _mm256_unpacklo_epi8(vl, vh), v1 = _mm256_unpackhi_epi8(vl, vh);
  *a0 = _mm256_add_epi16(*a0, _mm256_xor_si256(_mm256_add_epi16(v0, s0), s0));  // (v + s) ^ s: -v when s = -1
  *a1 = _mm256_add_epi16(*a1, _mm256_xor_si256(_mm256_add_epi16(v1, s1), s1));
}

void tl2_tile(const TlTensor& w, int tile, const uint8_t* lut, int32_t* acc) {
  const int BK = w.tiling.BK, nrb = w.tiling.BM / 32;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const uint8_t* ip = w.index + tile * tl::tile_index_bytes(w);
  const uint8_t* sp = w.sign + tile * tl::tile_sign_bytes(w);
  for (int kb = 0; kb < w.three_k / BK; ++kb) {
    const uint8_t* block_lut = lut + static_cast<size_t>(kb) * (BK / 3) * tl::kLutGroupBytes;
    for (int rb = 0; rb < nrb; ++rb) {
      __m256i a0 = _mm256_setzero_si256(), a1 = _mm256_setzero_si256();
      for (int s = 0; s < BK / 24; ++s, sp += 32) {
        const __m256i signs = load(sp);
        for (int j = 0; j < 4; ++j, ip += 32) {  // triples 8s + 2j (high nibble) and 8s + 2j + 1
          const __m256i idx = load(ip);
          const uint8_t* t0 = block_lut + static_cast<size_t>(8 * s + 2 * j) * tl::kLutGroupBytes;
          lookup32_signed(t0, _mm256_and_si256(_mm256_srli_epi16(idx, 4), m4), signs, 4 * j, &a0, &a1);
          lookup32_signed(t0 + tl::kLutGroupBytes, _mm256_and_si256(idx, m4), signs, 4 * j + 2, &a0, &a1);
        }
      }
      add_rows16(acc + rb * 32, a0);
      add_rows16(acc + rb * 32 + 16, a1);
    }
  }
  if (!w.pairs) return;
  const uint8_t* pp = w.pairs + tile * tl::tile_pair_bytes(w);
  const uint8_t* pair_lut = lut + static_cast<size_t>(w.three_k / 3) * tl::kLutGroupBytes;
  for (int kb = 0; kb < (w.cols - w.three_k) / tl::kPairBK; ++kb)
    for (int rb = 0; rb < nrb; ++rb) {
      __m256i a0 = _mm256_setzero_si256(), a1 = _mm256_setzero_si256();
      for (int yb = 0; yb < tl::kPairBK / 4; ++yb, pp += 32) {
        const __m256i idx = load(pp);
        const uint8_t* t0 = pair_lut + static_cast<size_t>(kb * 16 + 2 * yb) * tl::kLutGroupBytes;
        lookup32(t0, _mm256_and_si256(_mm256_srli_epi16(idx, 4), m4), &a0, &a1);
        lookup32(t0 + tl::kLutGroupBytes, _mm256_and_si256(idx, m4), &a0, &a1);
      }
      add_rows16(acc + rb * 32, a0);
      add_rows16(acc + rb * 32 + 16, a1);
    }
}

// TL1: a pair block (by weights) of a bm-row block is 64 bytes = four 16-row units ("slots");
// slot u covers rows 16 * (u / (by / 4)) and pairs 2 * (u % (by / 4)) (high nibble), + 1 (low).
// Two slots share a register: the lookup tables differ per 128-bit lane.
inline void lookup_slots(const uint8_t* tu, const uint8_t* tv, __m256i nib, __m256i* lo, __m256i* hi) {
  const __m256i a = load(tu), b = load(tv);  // [low plane, high plane] of each slot's table
  const __m256i tl = _mm256_permute2x128_si256(a, b, 0x20), th = _mm256_permute2x128_si256(a, b, 0x31);
  const __m256i vl = _mm256_shuffle_epi8(tl, nib), vh = _mm256_shuffle_epi8(th, nib);
  *lo = _mm256_add_epi16(*lo, _mm256_unpacklo_epi8(vl, vh));  // rows 0-7 of slot u | of slot v
  *hi = _mm256_add_epi16(*hi, _mm256_unpackhi_epi8(vl, vh));  // rows 8-15
}

void tl1_tile(const TlTensor& w, int tile, const uint8_t* lut, int32_t* acc) {
  const int BK = w.tiling.BK, bm = w.tiling.bm, by = 256 / bm, quads = by / 4;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const uint8_t* ip = w.index + tile * tl::tile_index_bytes(w);
  for (int kb = 0; kb < w.cols / BK; ++kb)
    for (int rb = 0; rb < w.tiling.BM / bm; ++rb) {
      __m256i lo[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()}, hi[2] = {lo[0], lo[0]};
      for (int yb = 0; yb < BK / by; ++yb, ip += 64) {
        const uint8_t* t = lut + static_cast<size_t>(kb * (BK / 2) + yb * (by / 2)) * tl::kLutGroupBytes;
        for (int h = 0; h < 2; ++h) {  // slots 2h, 2h + 1
          const __m256i idx = load(ip + 32 * h);
          const uint8_t* tu = t + static_cast<size_t>(2 * ((2 * h) % quads)) * tl::kLutGroupBytes;
          const uint8_t* tv = t + static_cast<size_t>(2 * ((2 * h + 1) % quads)) * tl::kLutGroupBytes;
          lookup_slots(tu, tv, _mm256_and_si256(_mm256_srli_epi16(idx, 4), m4), &lo[h], &hi[h]);
          lookup_slots(tu + tl::kLutGroupBytes, tv + tl::kLutGroupBytes, _mm256_and_si256(idx, m4), &lo[h], &hi[h]);
        }
      }
      for (int u = 0; u < 4; ++u) {
        int32_t* rows = acc + rb * bm + 16 * (u / quads);
        const __m256i l = lo[u / 2], hh = hi[u / 2];
        add_rows8(rows, u % 2 ? _mm256_extracti128_si256(l, 1) : _mm256_castsi256_si128(l));
        add_rows8(rows + 8, u % 2 ? _mm256_extracti128_si256(hh, 1) : _mm256_castsi256_si128(hh));
      }
    }
}

// Per table entry (16 int16 lanes), the coefficient of each activation: TL2 triple patterns
// 9a + 3b + c = 0..13, pairs 3a + b + 4 = 0..8; unused entries 0.
alignas(32) constexpr int16_t kTripleA[16] = {0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0};
alignas(32) constexpr int16_t kTripleB[16] = {0, 0, 1, 1, 1, -1, -1, -1, 0, 0, 0, 1, 1, 1, 0, 0};
alignas(32) constexpr int16_t kTripleC[16] = {0, 1, -1, 0, 1, -1, 0, 1, -1, 0, 1, -1, 0, 1, 0, 0};
alignas(32) constexpr int16_t kPairA[16] = {-1, -1, -1, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
alignas(32) constexpr int16_t kPairB[16] = {-1, 0, 1, -1, 0, 1, -1, 0, 1, 0, 0, 0, 0, 0, 0, 0};

inline __m256i coef(const int16_t* c) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(c)); }

// 16 int16 entries -> [16 low bytes, 16 high bytes].
inline void store_table(__m256i v, uint8_t* out) {
  const __m256i split = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,  //
                                         0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  const __m256i b = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(v, split), _MM_SHUFFLE(3, 1, 2, 0));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), b);
}

}  // namespace

void tl_lut_build(const TlTensor& w, const int8_t* q, uint8_t* lut) {
  int k = 0;
  if (w.type == TlType::kTL2) {
    const __m256i a = coef(kTripleA), b = coef(kTripleB), c = coef(kTripleC);
    for (; k < w.three_k; k += 3, lut += tl::kLutGroupBytes) {
      const __m256i v = _mm256_add_epi16(_mm256_add_epi16(_mm256_sign_epi16(_mm256_set1_epi16(q[k]), a),
                                                          _mm256_sign_epi16(_mm256_set1_epi16(q[k + 1]), b)),
                                         _mm256_sign_epi16(_mm256_set1_epi16(q[k + 2]), c));
      store_table(v, lut);
    }
  }
  const __m256i a = coef(kPairA), b = coef(kPairB);
  for (; k < w.cols; k += 2, lut += tl::kLutGroupBytes)
    store_table(_mm256_add_epi16(_mm256_sign_epi16(_mm256_set1_epi16(q[k]), a),
                                 _mm256_sign_epi16(_mm256_set1_epi16(q[k + 1]), b)),
                lut);
}

void tl_matmul(const TlTensor& w, const uint8_t* lut, size_t lut_stride, const float* inv_scales, int n_tokens, float* y,
               size_t y_stride, int tile0, int tile1) {
  tl::matmul_tiles<tl1_tile, tl2_tile>(w, lut, lut_stride, inv_scales, n_tokens, y, y_stride, tile0, tile1);
}

}  // namespace mcullm::avx2
