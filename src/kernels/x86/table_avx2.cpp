// The AVX2 kernel table (constant-initialised, no guard variables), with the block GEMM without VNNI
// (gemm_avx2.cpp); the avxvnni table is in gemm_avxvnni.cpp, the AVX-512 ones in x86_512/. Entries not named here are the reference's (kernels.h).
#include "kernels/matmat_rows.h"
#include "kernels/x86/avx2_kernels.h"

namespace mcullm {

namespace {
constexpr KernelSet kAvx2 = avx2::table("avx2", avx2::matmat_tiled);  // vpmaddubsw + vpmaddwd GEMM
}  // namespace

const KernelSet* kernels_avx2_table() { return &kAvx2; }

}  // namespace mcullm
