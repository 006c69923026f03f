// The AVX-512 (F + BW + VL) kernels: compiled with those flags, called only after a CPU check
// (kernels/dispatch.cpp). The rest of the avx512 table is the AVX2 kernels.
#pragma once
#include "kernels/x86/avx2_kernels.h"

namespace mcullm::avx512 {

void tl_matmul(const TlTensor& w, const uint8_t* lut, size_t lut_stride, const float* inv_scales, int n_tokens, float* y,
               size_t y_stride, int tile0, int tile1);

}  // namespace mcullm::avx512
