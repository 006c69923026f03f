// Scalar reference of the TL1 / TL2 LUT kernels (the oracle of every SIMD variant; kernels.h).
#pragma once
#include "kernels/kernels.h"

namespace mcullm {

void tl_lut_build_ref(const TlTensor& w, const int8_t* q, uint8_t* lut);
void tl_matmul_ref(const TlTensor& w, const uint8_t* lut, size_t lut_stride, const float* inv_scales, int n_tokens,
                   float* y, size_t y_stride, int tile0, int tile1);

#if defined(MCULLM_HAVE_NEON)
void tl_matmul_neon(const TlTensor& w, const uint8_t* lut, size_t lut_stride, const float* inv_scales, int n_tokens,
                    float* y, size_t y_stride, int tile0, int tile1);  // kernels/arm/tl_neon.cpp
#endif

}  // namespace mcullm
