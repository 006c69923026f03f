// The AVX-512 kernel table: the AVX2 table with the kernels AVX-512 makes faster (constant-initialised):
// the VNNI i2_s matvec / matmat (kernels/x86/ternary_avx512.cpp), the TL2 LUT matmul and the VNNI
// GEMM of the block types (gemm_avx512.cpp); and the amx table.
#include "kernels/matmat_rows.h"
#include "kernels/x86/avx2_kernels.h"
#include "kernels/x86_512/avx512_kernels.h"

namespace mcullm {

namespace {
#define MCULLM_AVX512_ENTRIES(matmat_i2s)                                                                  \
  avx2::dot_f32, avx2::matvec_f32, avx2::matvec_f16, avx2::matvec_q8_0, avx2::matvec_q4_0, avx2::matvec_q4g64, \
      avx2::attn_scores, avx2::attn_values, avx2::softmax, avx2::silu_mul, avx512::matvec_i2s, matmat_i2s,     \
      avx2::tl_lut_build, avx512::tl_matmul, avx2::matvec_q4e_f32, avx2::matvec_q4e_q8, avx2::attn_scores_q8, avx2::attn_values_q8, \
      avx2::quantize_i8s, avx2::quantize_blocks, avx512::matmat_tiled
constexpr KernelSet kAvx512 = {"avx512", MCULLM_AVX512_ENTRIES(avx512::matmat_i2s)};
// The same with the batched i2_s product on AMX tiles (kernels/x86_512/ternary_amx.cpp).
constexpr KernelSet kAmx = {"amx", MCULLM_AVX512_ENTRIES(amx::matmat_i2s)};
#undef MCULLM_AVX512_ENTRIES
}  // namespace

const KernelSet* kernels_avx512_table() { return &kAvx512; }
const KernelSet* kernels_amx_table() { return &kAmx; }

}  // namespace mcullm
