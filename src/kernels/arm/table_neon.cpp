// The NEON kernel table (aarch64, constant-initialised): the NEON kernels of this folder; the f16
// matvec, softmax, SwiGLU, the TL LUT build, q4e with f32 activations (esp32-ai's sequential float
// order), the int8 KV cache's attention, the quantizers and the block types' sparse down columns stay
// the reference's (kernels.h).
#include "kernels/arm/neon_kernels.h"
#include "kernels/matmat_rows.h"

namespace mcullm {

namespace {
constexpr KernelSet kNeon = {.name = "neon",
                             .dot_f32 = neon::dot_f32,
                             .matvec_f32 = neon::matvec_f32,
                             .matvec_q8_0 = neon::matvec_q8_0,
                             .matvec_q4_0 = neon::matvec_q4_0,
                             .matvec_q4g64 = neon::matvec_q4g64,
                             .attn_scores = neon::attn_scores,
                             .attn_values = neon::attn_values,
                             .matvec_i2s = neon::matvec_i2s,
                             .matmat_i2s = matmat_i2s_by_rows<neon::matvec_i2s>,
                             .matvec_i2s_rows = matvec_rows_by_row<neon::matvec_i2s>,
                             .tl_matmul = neon::tl_matmul,
                             .matvec_q4e_q8 = neon::matvec_q4e_q8,
                             .matvec_q4e_q8_rows = matvec_rows_by_row<neon::matvec_q4e_q8>,
                             .matvec_down_cols = neon::matvec_down_cols};
}  // namespace

const KernelSet* kernels_neon_table() { return &kNeon; }

}  // namespace mcullm
