// The AVX-512 kernel tables: the AVX2 table with the kernels AVX-512 makes faster (constant-initialised):
// the VNNI i2_s matvec / matmat (kernels/x86/ternary_avx512.cpp), the q4_0 matvec, the TL2 LUT matmul, the VNNI
// GEMM of the block types (gemm_avx512.cpp) and the i2_s sparse down columns (down_cols_avx512.cpp); and the amx table, the same with the batched i2_s
// product on AMX tiles (kernels/x86_512/ternary_amx.cpp).
#include "kernels/x86/avx2_kernels.h"
#include "kernels/x86_512/avx512_kernels.h"

namespace mcullm {

namespace {
constexpr KernelSet avx512_table(const char* name, decltype(KernelSet::matmat_i2s) matmat_i2s) {
  KernelSet k = avx2::table(name, avx512::matmat_tiled);
  k.matvec_i2s = avx512::matvec_i2s;
  k.matvec_i2s_rows = avx512::matvec_i2s_rows;
  k.matvec_q4_0 = avx512::matvec_q4_0;
  k.matmat_i2s = matmat_i2s;
  k.tl_matmul = avx512::tl_matmul;
  k.matvec_down_cols = avx512::matvec_down_cols;
  return k;
}
constexpr KernelSet kAvx512 = avx512_table("avx512", avx512::matmat_i2s);
constexpr KernelSet kAmx = avx512_table("amx", amx::matmat_i2s);
}  // namespace

const KernelSet* kernels_avx512_table() { return &kAvx512; }
const KernelSet* kernels_amx_table() { return &kAmx; }

}  // namespace mcullm
