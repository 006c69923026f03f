// q4_0 matvec on AVX-512 VL + BW + VNNI (kernels/x86/matvec_q4_0_pairs.h): vpdpbusd on 256-bit
// vectors, and the eight weight scales picked out of two 64-byte loads by one vpermt2w.
#include "kernels/x86/matvec_q4_0_pairs.h"
#include "kernels/x86_512/avx512_kernels.h"

namespace mcullm::avx512 {

namespace {
struct Dp512 {
  static __m256i pair_dot(__m256i u8, __m256i s8) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u8, s8); }
  // Word 9k of 8 consecutive 18-byte blocks is block k's scale; in kLaneBlock's order.
  static __m128i scales(const BlockQ4_0* bg) {
    const __m512i idx = _mm512_castsi128_si512(_mm_setr_epi16(0, 18, 36, 54, 9, 27, 45, 63));
    const __m512i raw0 = _mm512_loadu_si512(bg), raw1 = _mm512_loadu_si512(reinterpret_cast<const uint8_t*>(bg) + 64);
    return _mm512_castsi512_si128(_mm512_permutex2var_epi16(raw0, idx, raw1));
  }
};
}  // namespace

void matvec_q4_0(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1) {
  if (!q4_0_pairs::matvec<Dp512>(w, xq, xs, y, r0, r1)) avx2::matvec_q4_0(w, xq, xs, y, r0, r1);
}

}  // namespace mcullm::avx512
