// The NEON kernel functions of the aarch64 table (table_neon.cpp). NEON is part of every aarch64
// CPU: no runtime check.
#pragma once
#include "kernels/kernels.h"

namespace mcullm::neon {

float dot_f32(const float* a, const float* b, int n);
void matvec_f32(const MatRef& w, const float* x, float* y, int r0, int r1);
void attn_scores(const float* q, const float* keys, size_t stride, int n, int hs, float scale, float* scores);
void attn_values(const float* att, const float* values, size_t stride, int n, int hs, float* out);
void matvec_q8_0(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1);
void matvec_q4_0(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1);
void matvec_q4g64(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1);
void matvec_q4e_q8(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1);
void matvec_i2s(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1);
// The sparse FFN's down product over live columns: i2_s in NEON, the block types the reference's (down_cols_neon.cpp).
void matvec_down_cols(const DownCols& w, const int8_t* xq, const float* xs, const int32_t* live, int n_live, float* y,
                      int r0, int r1);
void tl_matmul(const TlTensor& w, const uint8_t* lut, size_t lut_stride, const float* inv_scales, int n_tokens,
               float* y, size_t y_stride, int tile0, int tile1);  // tl_neon.cpp (TL1; TL2 takes the reference)

}  // namespace mcullm::neon
