// The block types' batched product (kernels/x86/gemm_blocks.h) with AVX-VNNI's vpdpbusd (VEX, no
// AVX-512: Alder Lake-class cores); 16 vector registers hold a 2-row x 3-column tile. Compiled with
// -mavx2 -mf16c -mavxvnni (cmake/Sources.cmake), called only behind kernels_avxvnni()'s CPU check.
// The avxvnni table is the AVX2 one with this GEMM.
#include "kernels/matmat_rows.h"
#include "kernels/x86/gemm_blocks.h"

namespace mcullm {

namespace {
struct DpAvxVnni {
  static constexpr bool kFlip = true;  // vpdpbusd: unsigned x + 128 times signed weights
  static constexpr int kGroup = 0;     // dp() below
  static __m256i dp(__m256i acc, __m256i u8, __m256i s8) { return _mm256_dpbusd_avx_epi32(acc, u8, s8); }
};

bool matmat_tiled(const MatRef& w, const ActMat& x, int n, float* y, size_t y_stride, int r0, int r1) {
  if (!x.q || !x.scales) return false;
  switch (w.type) {
    case DType::kQ8_0: return gemm::matmat<gemm::Q8_0, DpAvxVnni, 2, 3>(w, x, n, y, y_stride, r0, r1);
    case DType::kQ4_0: return gemm::matmat<gemm::Q4_0, DpAvxVnni, 2, 3>(w, x, n, y, y_stride, r0, r1);
    case DType::kQ4G64: return gemm::matmat<gemm::Q4G64, DpAvxVnni, 2, 3>(w, x, n, y, y_stride, r0, r1);
    default: return false;
  }
}

constexpr KernelSet kAvxVnni = avx2::table("avxvnni", matmat_tiled);
}  // namespace

const KernelSet* kernels_avxvnni_table() { return &kAvxVnni; }

}  // namespace mcullm
