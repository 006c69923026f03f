// The AVX2 kernel table (constant-initialised, no guard variables); the AVX-512 one is in x86_512/.
#include "kernels/matmat_rows.h"
#include "kernels/x86/avx2_kernels.h"

namespace mcullm {

namespace {
constexpr KernelSet kAvx2 = {
    "avx2",          avx2::dot_f32,     avx2::matvec_f32,  avx2::matvec_f16, avx2::matvec_q8_0,
    avx2::matvec_q4_0, avx2::matvec_q4g64, avx2::attn_scores, avx2::attn_values, avx2::softmax,
    avx2::silu_mul,  avx2::matvec_i2s, matmat_i2s_by_rows<avx2::matvec_i2s>,
    avx2::tl_lut_build, avx2::tl_matmul,
    avx2::matvec_q4e_f32, avx2::matvec_q4e_q8, avx2::attn_scores_q8, avx2::attn_values_q8, avx2::quantize_i8s,
    matmat_blocks_none,  // no VNNI: matmat's row-block path
};
}  // namespace

const KernelSet* kernels_avx2_table() { return &kAvx2; }

}  // namespace mcullm
