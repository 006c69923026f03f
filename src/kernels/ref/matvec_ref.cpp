// Scalar reference kernels: the oracle every optimized variant must equal bit for bit.
#include "core/fmath.h"
#include "kernels/kernels.h"
#include "kernels/ref/dot_order.h"
#include "kernels/matmat_rows.h"
#include "quant/blocks.h"
#include "quant/f16.h"
#include "quant/ternary.h"

namespace mcullm {

float dot_f32_ref(const float* a, const float* b, int n) {
  float acc[kF32Lanes] = {};
  for (int j = 0; j < n; ++j) acc[j % kF32Lanes] += a[j] * b[j];
  return fold_lanes16(acc);
}

void matvec_f32_ref(const MatRef& w, const float* x, float* y, int r0, int r1) {
  for (int r = r0; r < r1; ++r) y[r] = dot_f32_ref(reinterpret_cast<const float*>(w.row(r)), x, w.cols);
}

void matvec_f16_ref(const MatRef& w, const float* x, float* y, int r0, int r1) {
  for (int r = r0; r < r1; ++r) {
    const uint16_t* row = reinterpret_cast<const uint16_t*>(w.row(r));
    float acc[kF32Lanes] = {};
    for (int j = 0; j < w.cols; ++j) acc[j % kF32Lanes] += f16_to_f32(row[j]) * x[j];
    y[r] = fold_lanes16(acc);
  }
}

namespace {
// Integer value of weight j of a block (block-local index).
inline int weight_q8_0(const BlockQ8_0& b, int j) { return b.qs[j]; }
inline int weight_q4_0(const BlockQ4_0& b, int j) { return (j < 16 ? (b.qs[j] & 0x0F) : (b.qs[j - 16] >> 4)) - 8; }
inline int weight_q4g64(const BlockQ4G64& b, int j) { return (j < 32 ? (b.qs[j] & 0x0F) : (b.qs[j - 32] >> 4)) - 8; }

template <typename Block, int kBlock, int (*Weight)(const Block&, int)>
void matvec_blocks_ref(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1) {
  const int nb = (w.cols + kBlock - 1) / kBlock;
  for (int r = r0; r < r1; ++r) {
    const Block* blocks = reinterpret_cast<const Block*>(w.row(r));
    float acc[kBlockLanes] = {};
    for (int b = 0; b < nb; ++b) {
      int32_t isum = 0;
      for (int j = 0; j < kBlock; ++j) isum += Weight(blocks[b], j) * xq[b * kBlock + j];
      acc[b % kBlockLanes] += static_cast<float>(isum) * (f16_to_f32(blocks[b].d) * xs[b]);
    }
    y[r] = fold_lanes8(acc);
  }
}
}  // namespace

void matvec_q8_0_ref(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1) {
  matvec_blocks_ref<BlockQ8_0, 32, weight_q8_0>(w, xq, xs, y, r0, r1);
}
void matvec_q4_0_ref(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1) {
  matvec_blocks_ref<BlockQ4_0, 32, weight_q4_0>(w, xq, xs, y, r0, r1);
}
void matvec_q4g64_ref(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1) {
  matvec_blocks_ref<BlockQ4G64, 64, weight_q4g64>(w, xq, xs, y, r0, r1);
}
void matmat_i2s_ref(const MatRef& w, const int8_t* xq, size_t xq_stride, const float* xs, int n, float* y,
                    size_t y_stride, int r0, int r1) {
  matmat_i2s_by_rows<matvec_i2s_ref>(w, xq, xq_stride, xs, n, y, y_stride, r0, r1);
}
bool matmat_tiled_none(const MatRef&, const ActMat&, int, float*, size_t, int, int) { return false; }

void q4e_quantize_activations(const KernelSet& k, const float* x, int n, int8_t* q, float* scale) {
  const float xmax = k.q4e_activations_max(x, n);
  k.q4e_quantize_with(x, n, xmax, q);
  *scale = xmax / 127.0f;
}

void attn_scores_ref(const float* q, const float* keys, size_t stride, int n, int hs, float scale, float* scores) {
  for (int t = 0; t < n; ++t) scores[t] = dot_f32_ref(q, keys + static_cast<size_t>(t) * stride, hs) / scale;
}

void attn_values_ref(const float* att, const float* values, size_t stride, int n, int hs, float* out) {
  for (int i = 0; i < hs; ++i) out[i] = 0.0f;
  for (int t = 0; t < n; ++t) {
    const float* v = values + static_cast<size_t>(t) * stride;
    for (int i = 0; i < hs; ++i) out[i] += att[t] * v[i];
  }
}

void attn_scores_q8_ref(const int8_t* q, float qs, const int8_t* keys, const float* kscales, size_t stride,
                        size_t s_stride, int n, int hs, float scale, float* scores) {
  for (int t = 0; t < n; ++t) {
    const int8_t* k = keys + static_cast<size_t>(t) * stride;
    int32_t isum = 0;
    for (int i = 0; i < hs; ++i) isum += q[i] * k[i];
    scores[t] = static_cast<float>(isum) * (qs * kscales[static_cast<size_t>(t) * s_stride]) / scale;
  }
}

void attn_values_q8_ref(const float* att, const int8_t* values, const float* vscales, size_t stride, size_t s_stride,
                        int n, int hs, float* out) {
  for (int i = 0; i < hs; ++i) out[i] = 0.0f;
  for (int t = 0; t < n; ++t) {
    const int8_t* v = values + static_cast<size_t>(t) * stride;
    const float w = att[t] * vscales[static_cast<size_t>(t) * s_stride];
    for (int i = 0; i < hs; ++i) out[i] += w * static_cast<float>(v[i]);
  }
}

void softmax_ref(float* x, int n) {
  float max = x[0];
  for (int i = 1; i < n; ++i) max = x[i] > max ? x[i] : max;
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) {
    x[i] = mc_expf(x[i] - max);
    sum += x[i];
  }
  for (int i = 0; i < n; ++i) x[i] /= sum;
}

void fill_f32_ref(float* x, int n, float value) {
  // Four stores a step: LLVM's Xtensa back end reloads the constant and rebuilds the loop test for
  // every store of a plain loop (9 instructions a value on the S3).
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    x[i] = value;
    x[i + 1] = value;
    x[i + 2] = value;
    x[i + 3] = value;
  }
  for (; i < n; ++i) x[i] = value;
}

void attn_heads_by_head(const KernelSet& k, const AttnHeads& a, int h0, int h1) {
  const size_t hs = static_cast<size_t>(a.hs);
  for (int h = h0; h < h1; ++h) {
    float* att = a.att + static_cast<size_t>(h) * a.att_stride;
    const size_t kv = static_cast<size_t>(h / a.group) * hs;
    k.attn_scores(a.q + h * hs, a.keys + kv, a.stride, a.n, a.hs, a.scale, att);
    k.softmax(att, a.n);
    k.attn_values(att, a.values + kv, a.stride, a.n, a.hs, a.out + h * hs);
  }
}

void silu_mul_ref(float* gate, const float* up, int n) {
  for (int i = 0; i < n; ++i) gate[i] = mc_silu(gate[i]) * up[i];
}

namespace {
constexpr KernelSet kRef = {.name = "ref"};  // every entry defaults to the reference (kernels.h)
}  // namespace

const KernelSet& kernels_ref() { return kRef; }

}  // namespace mcullm
