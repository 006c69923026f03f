// The block types' batched product (kernels/x86/gemm_blocks.h) on plain AVX2 + F16C, no VNNI (e.g.
// AMD Zen 2 / Zen 3, Intel before Alder Lake): the avx2 table's matmat_tiled. vpdpbusd is replaced by
// vpmaddubsw (unsigned x signed bytes, adjacent pairs summed into saturating int16) then vpmaddwd
// by ones (int16 pairs summed into int32, exact), which together leave in each 32-bit lane the sum of
// its 4 byte products, as vpdpbusd does. What keeps the int16 step from saturating:
//  * q4_0 / q4g64 (DpFlip): the weights are nibble codes - 8, in [-8, 7]; the activations go in as
//    x + 128 in [1, 255] (flipped, the accumulators start at -128 * sum of the weights, exactly as
//    on VNNI). A pair is at most 2 * 255 * 8 = 4080 in magnitude.
//  * q8_0 (DpSign): weights use the whole int8 range [-128, 127], so flipping could reach
//    2 * 255 * 128; instead the sign trick of the AVX2 matvec: |w| (unsigned, <= 128; vpsignb
//    leaves -128 as the byte 0x80, read as 128 unsigned) times sign(x, w) = x * sgn(w). The
//    activations come from quantize_activations, whose codes are in [-127, 127] (round_to_int8
//    clamps there), so x * sgn(w) never wraps and |w| * |x| <= 128 * 127: a pair is at most
//    2 * 128 * 127 = 32512 < 32767. (The AVX2 matvec rests on the same range.)
// The int32 block sums are therefore exact and every output gets the matvec's bits (kernels.h), the
// float steps being gemm_blocks.h's. Compiled with -mavx2 -mf16c (cmake/Sources.cmake).
#include "kernels/x86/gemm_blocks.h"

namespace mcullm::avx2 {

namespace {
// q4_0 / q4g64: x + 128 times w in [-8, 7]. A pair is at most 2 * 255 * 8 = 4080 in magnitude, so 8
// of them (one 32-weight word column of a chunk, gemm_blocks.h's J = 8 steps) sum to at most 32640
// < 32767: added in int16 before the one vpmaddwd.
struct DpFlip {
  static constexpr bool kFlip = true;
  static constexpr int kGroup = 8;
  static __m256i pairs(__m256i u8, __m256i s8) { return _mm256_maddubs_epi16(u8, s8); }
};
// q8_0: |w| times x * sgn(w); a pair is at most 32512, so each is widened on its own (kGroup 1).
struct DpSign {
  static constexpr bool kFlip = false;
  static constexpr int kGroup = 1;
  static __m256i pairs(__m256i x, __m256i w) { return _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w)); }
};
}  // namespace

bool matmat_tiled(const MatRef& w, const ActMat& x, int n, float* y, size_t y_stride, int r0, int r1) {
  if (!x.q || !x.scales) return false;
  switch (w.type) {
    case DType::kQ8_0: return gemm::matmat<gemm::Q8_0, DpSign, 2, 4>(w, x, n, y, y_stride, r0, r1);
    case DType::kQ4_0: return gemm::matmat<gemm::Q4_0, DpFlip, 4, 2>(w, x, n, y, y_stride, r0, r1);
    case DType::kQ4G64: return gemm::matmat<gemm::Q4G64, DpFlip, 4, 2>(w, x, n, y, y_stride, r0, r1);
    default: return false;
  }
}

}  // namespace mcullm::avx2
