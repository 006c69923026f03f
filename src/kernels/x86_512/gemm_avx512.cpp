// The block types' batched product (kernels/x86/gemm_blocks.h) with the AVX-512 VL form of
// vpdpbusd on 256-bit vectors; 32 vector registers hold a 4-row x 3-column tile.
#include "kernels/x86/gemm_blocks.h"
#include "kernels/x86_512/avx512_kernels.h"

namespace mcullm::avx512 {

namespace {
struct Dp512 {
  static __m256i dp(__m256i acc, __m256i u8, __m256i s8) { return _mm256_dpbusd_epi32(acc, u8, s8); }
};
}  // namespace

bool matmat_blocks(const MatRef& w, const ActMat& x, int n, float* y, size_t y_stride, int r0, int r1) {
  switch (w.type) {
    case DType::kQ8_0: return gemm::matmat<gemm::Q8_0, Dp512, 4, 3>(w, x, n, y, y_stride, r0, r1);
    case DType::kQ4_0: return gemm::matmat<gemm::Q4_0, Dp512, 4, 3>(w, x, n, y, y_stride, r0, r1);
    case DType::kQ4G64: return gemm::matmat<gemm::Q4G64, Dp512, 4, 3>(w, x, n, y, y_stride, r0, r1);
    default: return false;
  }
}

}  // namespace mcullm::avx512
