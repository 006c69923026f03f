// Scalar reference kernels for ternary weights: the oracle of every optimized ternary kernel.
#pragma once
#include "kernels/kernels.h"

namespace mcullm {

// i2_s rows (quant/ternary.h) times int8 activations with one scale: y[r] = (float)isum * (w.scale * xs[0]).
void matvec_i2s_ref(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1);

}  // namespace mcullm
