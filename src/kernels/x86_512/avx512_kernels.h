// The AVX-512 (F + BW + VL) kernels: compiled with those flags, called only after a CPU check
// (kernels/dispatch.cpp). The rest of the avx512 table is the AVX2 kernels.
#pragma once
#include "kernels/x86/avx2_kernels.h"

namespace mcullm::avx512 {

void tl_matmul(const TlTensor& w, const uint8_t* lut, size_t lut_stride, const float* inv_scales, int n_tokens, float* y,
               size_t y_stride, int tile0, int tile1);
// q8_0 / q4_0 / q4g64 (VNNI, kernels/x86/gemm_blocks.h) and f16 times n columns (gemm_avx512.cpp).
bool matmat_tiled(const MatRef& w, const ActMat& x, int n, float* y, size_t y_stride, int r0, int r1);
// q4_0 times q8 activations, one column (matvec_q4_0_avx512.cpp).
void matvec_q4_0(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1);
// The sparse FFN's down product over live columns: i2_s on 512-bit vectors, the block types avx2's (down_cols_avx512.cpp).
void matvec_down_cols(const DownCols& w, const int8_t* xq, const float* xs, const int32_t* live, int n_live, float* y,
                      int r0, int r1);

}  // namespace mcullm::avx512

namespace mcullm::amx {

// Batched i2_s on AMX-INT8 tiles (kernels/x86_512/ternary_amx.cpp); the rest of the amx table is the avx512 one.
void matmat_i2s(const MatRef& w, const int8_t* xq, size_t xq_stride, const float* xs, int n, float* y, size_t y_stride,
                int r0, int r1);

}  // namespace mcullm::amx
