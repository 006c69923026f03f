// Scalar reference kernels for esp32-ai's int4 layout (q4e): the order contract of kernels.h.
#pragma once
#include "kernels/kernels.h"

namespace mcullm {

void matvec_q4e_f32_ref(const MatRef& w, const float* x, float* y, int r0, int r1);
void matvec_q4e_q8_ref(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1);

}  // namespace mcullm
