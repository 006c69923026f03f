// The AVX2 and AVX-512 kernel tables (constant-initialised, no guard variables).
#include "kernels/matmat_rows.h"
#include "kernels/x86/avx2_kernels.h"

namespace mcullm {

namespace {
constexpr KernelSet kAvx2 = {
    "avx2",          avx2::dot_f32,     avx2::matvec_f32,  avx2::matvec_f16, avx2::matvec_q8_0,
    avx2::matvec_q4_0, avx2::matvec_q4g64, avx2::attn_scores, avx2::attn_values, avx2::softmax,
    avx2::silu_mul,  avx2::matvec_i2s, matmat_i2s_by_rows<avx2::matvec_i2s>,
};
// The AVX2 table with the kernels that AVX-512 (F, BW, VL, VNNI) makes faster.
constexpr KernelSet kAvx512 = {
    "avx512",        avx2::dot_f32,     avx2::matvec_f32,  avx2::matvec_f16, avx2::matvec_q8_0,
    avx2::matvec_q4_0, avx2::matvec_q4g64, avx2::attn_scores, avx2::attn_values, avx2::softmax,
    avx2::silu_mul,  avx512::matvec_i2s, avx512::matmat_i2s,
};
}  // namespace

const KernelSet* kernels_avx2_table() { return &kAvx2; }
const KernelSet* kernels_avx512_table() { return &kAvx512; }

}  // namespace mcullm
