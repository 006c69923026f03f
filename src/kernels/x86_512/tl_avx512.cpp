// AVX-512 (BW + VL) TL2 LUT matmul: like the AVX2 kernel (kernels/x86/tl_avx2.cpp) but 64 index
// bytes at a time, i.e. two pairs of triples for the same 32 rows: the lower 256 bits look up in one
// group's tables, the upper in the next pair's, and the halves are added at the end of a K block
// (still exact: a block's partial sums are bounded below 2^15 whatever the subset). TL1 uses the
// AVX2 kernel (the table in table_avx512.cpp).
#include <immintrin.h>

#include "kernels/tl_layout.h"
#include "kernels/x86_512/avx512_kernels.h"

namespace mcullm::avx512 {

namespace {

inline __m512i load(const uint8_t* p) { return _mm512_loadu_si512(p); }

// [low plane, low plane] of group table a | of table b, and the same for the high planes.
inline void tables(const uint8_t* a, const uint8_t* b, __m512i* lo, __m512i* hi) {
  const __m512i x = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a))),
                                       _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)), 1);
  *lo = _mm512_shuffle_i64x2(x, x, _MM_SHUFFLE(2, 2, 0, 0));
  *hi = _mm512_shuffle_i64x2(x, x, _MM_SHUFFLE(3, 3, 1, 1));
}

inline __m512i counts(int lower, int upper) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(static_cast<int16_t>(lower))),
                            _mm256_set1_epi16(static_cast<int16_t>(upper)), 1);
}

inline void lookup(const uint8_t* ta, const uint8_t* tb, __m512i nib, __m512i* a0, __m512i* a1) {
  __m512i lo, hi;
  tables(ta, tb, &lo, &hi);
  const __m512i vl = _mm512_shuffle_epi8(lo, nib), vh = _mm512_shuffle_epi8(hi, nib);
  *a0 = _mm512_add_epi16(*a0, _mm512_unpacklo_epi8(vl, vh));
  *a1 = _mm512_add_epi16(*a1, _mm512_unpackhi_epi8(vl, vh));
}

inline void lookup_signed(const uint8_t* ta, const uint8_t* tb, __m512i nib, __m512i signs, __m512i c0, __m512i c1,
                          __m512i* a0, __m512i* a1) {
  __m512i lo, hi;
  tables(ta, tb, &lo, &hi);
  const __m512i vl = _mm512_shuffle_epi8(lo, nib), vh = _mm512_shuffle_epi8(hi, nib);
  const __m512i s0 = _mm512_srai_epi16(_mm512_sllv_epi16(signs, c0), 15);
  const __m512i s1 = _mm512_srai_epi16(_mm512_sllv_epi16(signs, c1), 15);
  const __m512i v0 = _mm512_unpacklo_epi8(vl, vh), v1 = _mm512_unpackhi_epi8(vl, vh);
  *a0 = _mm512_add_epi16(*a0, _mm512_xor_si512(_mm512_add_epi16(v0, s0), s0));
  *a1 = _mm512_add_epi16(*a1, _mm512_xor_si512(_mm512_add_epi16(v1, s1), s1));
}

// acc[0..31] += the halves of a0 (rows 0-15) and a1 (rows 16-31), added, widened.
inline void add_rows32(int32_t* acc, __m512i a0, __m512i a1) {
  const __m256i r0 = _mm256_add_epi16(_mm512_castsi512_si256(a0), _mm512_extracti64x4_epi64(a0, 1));
  const __m256i r1 = _mm256_add_epi16(_mm512_castsi512_si256(a1), _mm512_extracti64x4_epi64(a1, 1));
  _mm512_storeu_si512(acc, _mm512_add_epi32(_mm512_loadu_si512(acc), _mm512_cvtepi16_epi32(r0)));
  _mm512_storeu_si512(acc + 16, _mm512_add_epi32(_mm512_loadu_si512(acc + 16), _mm512_cvtepi16_epi32(r1)));
}

void tl2_tile(const TlTensor& w, int tile, const uint8_t* lut, int32_t* acc) {
  const int BK = w.tiling.BK, nrb = w.tiling.BM / 32;
  constexpr size_t G = tl::kLutGroupBytes;
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  // Sign bit shifts (kernels/x86/tl_avx2.cpp): triple gi of the eight uses bit 15 - 2gi (rows 0-15)
  // and 15 - 2gi - 1 (rows 16-31); registers hold triples j, j + 1 (lower half), j + 2, j + 3 (upper).
  __m512i cnt[2][4];
  for (int j = 0; j < 2; ++j)
    for (int v = 0; v < 4; ++v) {  // v: 0 high nibble rows 0-15, 1 rows 16-31, 2 low nibble 0-15, 3 16-31
      const int g = 4 * j + (v / 2);
      cnt[j][v] = counts(2 * g + v % 2, 2 * (g + 2) + v % 2);
    }
  const uint8_t* ip = w.index + tile * tl::tile_index_bytes(w);
  const uint8_t* sp = w.sign + tile * tl::tile_sign_bytes(w);
  for (int kb = 0; kb < w.three_k / BK; ++kb) {
    const uint8_t* block_lut = lut + static_cast<size_t>(kb) * (BK / 3) * G;
    for (int rb = 0; rb < nrb; ++rb) {
      __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
      for (int s = 0; s < BK / 24; ++s, sp += 32) {
        const __m512i signs = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sp)));
        for (int j = 0; j < 2; ++j, ip += 64) {  // triples 8s + 4j .. 8s + 4j + 3
          const __m512i idx = load(ip);
          const uint8_t* t0 = block_lut + static_cast<size_t>(8 * s + 4 * j) * G;
          lookup_signed(t0, t0 + 2 * G, _mm512_and_si512(_mm512_srli_epi16(idx, 4), m4), signs, cnt[j][0], cnt[j][1],
                        &a0, &a1);
          lookup_signed(t0 + G, t0 + 3 * G, _mm512_and_si512(idx, m4), signs, cnt[j][2], cnt[j][3], &a0, &a1);
        }
      }
      add_rows32(acc + rb * 32, a0, a1);
    }
  }
  if (!w.pairs) return;
  const uint8_t* pp = w.pairs + tile * tl::tile_pair_bytes(w);
  const uint8_t* pair_lut = lut + static_cast<size_t>(w.three_k / 3) * G;
  for (int kb = 0; kb < (w.cols - w.three_k) / tl::kPairBK; ++kb)
    for (int rb = 0; rb < nrb; ++rb) {
      __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
      for (int yb = 0; yb < tl::kPairBK / 4; yb += 2, pp += 64) {
        const __m512i idx = load(pp);
        const uint8_t* t0 = pair_lut + static_cast<size_t>(kb * 16 + 2 * yb) * G;
        lookup(t0, t0 + 2 * G, _mm512_and_si512(_mm512_srli_epi16(idx, 4), m4), &a0, &a1);
        lookup(t0 + G, t0 + 3 * G, _mm512_and_si512(idx, m4), &a0, &a1);
      }
      add_rows32(acc + rb * 32, a0, a1);
    }
}

void tl1_unused(const TlTensor&, int, const uint8_t*, int32_t*) {}

}  // namespace

void tl_matmul(const TlTensor& w, const uint8_t* lut, size_t lut_stride, const float* inv_scales, int n_tokens, float* y,
               size_t y_stride, int tile0, int tile1) {
  if (w.type != TlType::kTL2) {
    avx2::tl_matmul(w, lut, lut_stride, inv_scales, n_tokens, y, y_stride, tile0, tile1);
    return;
  }
  tl::matmul_tiles<tl1_unused, tl2_tile>(w, lut, lut_stride, inv_scales, n_tokens, y, y_stride, tile0, tile1);
}

}  // namespace mcullm::avx512
