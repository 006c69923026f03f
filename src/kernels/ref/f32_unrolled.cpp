#include "kernels/ref/f32_unrolled.h"

#include "kernels/ref/dot_order.h"

namespace mcullm {

float dot_f32_unrolled(const float* a, const float* b, int n) {
  float acc[kF32Lanes];  // every index below is a constant after unrolling: the lanes live in registers
#pragma GCC unroll 16
  for (int i = 0; i < kF32Lanes; ++i) acc[i] = 0.0f;
  int j = 0;
  for (; j + kF32Lanes <= n; j += kF32Lanes) {
#pragma GCC unroll 16
    for (int i = 0; i < kF32Lanes; ++i) acc[i] += a[j + i] * b[j + i];
  }
  const int rest = n - j;  // the last lanes' partial round, in lane order
#pragma GCC unroll 16
  for (int i = 0; i < kF32Lanes; ++i)
    if (i < rest) acc[i] += a[j + i] * b[j + i];
  return fold_lanes16(acc);
}

void matvec_f32_unrolled(const MatRef& w, const float* x, float* y, int r0, int r1) {
  for (int r = r0; r < r1; ++r) y[r] = dot_f32_unrolled(reinterpret_cast<const float*>(w.row(r)), x, w.cols);
}

void attn_scores_unrolled(const float* q, const float* keys, size_t stride, int n, int hs, float scale, float* scores) {
  for (int t = 0; t < n; ++t) scores[t] = dot_f32_unrolled(q, keys + static_cast<size_t>(t) * stride, hs) / scale;
}

namespace {
// out[i] = sum over t < n, in increasing t, of weight(t) * value(t, i): kBlock outputs in registers while
// every position passes, then the rest one by one.
template <typename V, typename Weight>
void values_blocked(const V* values, size_t stride, int n, int hs, Weight weight, float* out) {
  constexpr int kBlock = 8;
  int i = 0;
  for (; i + kBlock <= hs; i += kBlock) {
    float o[kBlock];
#pragma GCC unroll 8
    for (int k = 0; k < kBlock; ++k) o[k] = 0.0f;
    const V* v = values + i;
    for (int t = 0; t < n; ++t, v += stride) {
      const float a = weight(t);
#pragma GCC unroll 8
      for (int k = 0; k < kBlock; ++k) o[k] += a * static_cast<float>(v[k]);
    }
#pragma GCC unroll 8
    for (int k = 0; k < kBlock; ++k) out[i + k] = o[k];
  }
  for (; i < hs; ++i) {
    float o = 0.0f;
    for (int t = 0; t < n; ++t) o += weight(t) * static_cast<float>(values[static_cast<size_t>(t) * stride + i]);
    out[i] = o;
  }
}
}  // namespace

void attn_values_unrolled(const float* att, const float* values, size_t stride, int n, int hs, float* out) {
  values_blocked(values, stride, n, hs, [att](int t) { return att[t]; }, out);
}

void attn_values_q8_unrolled(const float* att, const int8_t* values, const float* vscales, size_t stride, size_t s_stride,
                             int n, int hs, float* out) {
  values_blocked(values, stride, n, hs, [=](int t) { return att[t] * vscales[static_cast<size_t>(t) * s_stride]; }, out);
}

}  // namespace mcullm
