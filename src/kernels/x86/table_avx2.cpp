// The AVX2 kernel table (constant-initialised, no guard variables); the AVX-512 one is in x86_512/.
#include "kernels/matmat_rows.h"
#include "kernels/x86/avx2_kernels.h"

namespace mcullm {

namespace {
constexpr KernelSet kAvx2 = {"avx2", MCULLM_AVX2_ENTRIES(matmat_tiled_none)};  // no VNNI: matmat's row-block path
}  // namespace

const KernelSet* kernels_avx2_table() { return &kAvx2; }

}  // namespace mcullm
