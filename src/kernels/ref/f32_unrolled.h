// The f32 dot product and attention loops written so that an in-order scalar FPU (the ESP32-S3's LX7:
// PIE's lanes are integer, its FPU one float at a time) keeps the running sums in registers: the
// reference (matvec_ref.cpp) indexes its 16 lanes with j % 16 and adds into memory on every step.
// Same operations in the same order per output, so the same bits as the reference on every target
// (tests/kernels_test.cpp); the PIE table uses them.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "quant/mat_ref.h"

namespace mcullm {

// kernels.h's dot_f32 contract: lane j % 16 accumulates a[j] * b[j] in increasing j from +0, then fold_lanes16.
float dot_f32_unrolled(const float* a, const float* b, int n);
// matvec_f32_ref: every row one dot_f32.
void matvec_f32_unrolled(const MatRef& w, const float* x, float* y, int r0, int r1);
// attn_scores_ref / attn_values_ref with the loops above: per output the reference's order.
void attn_scores_unrolled(const float* q, const float* keys, size_t stride, int n, int hs, float scale, float* scores);
void attn_values_unrolled(const float* att, const float* values, size_t stride, int n, int hs, float* out);
// attn_values_q8_ref likewise (int8 values, f32 sums).
void attn_values_q8_unrolled(const float* att, const int8_t* values, const float* vscales, size_t stride, size_t s_stride,
                             int n, int hs, float* out);

}  // namespace mcullm
