// NEON f32, quantized-block and i2_s kernels (aarch64), bit-exact with the reference (kernels.h):
//  * f32: four float32x4 accumulators are the contract's 16 lanes (a product rounded, then added:
//    the build has -ffp-contract=off, so vmulq + vaddq never fuse); the tail and the fold are the
//    scalar reference's (dot_order.h).
//  * blocks (q8_0, q4_0, q4g64), i2_s and q4e with int8 activations: the integer sums are exact in any order (int8 x int8
//    products widened to int16, pairs to int32), the float steps are the reference's, in its order.
#include <arm_neon.h>

#include "kernels/arm/neon_kernels.h"
#include "kernels/ref/dot_order.h"
#include "quant/blocks.h"
#include "quant/f16.h"
#include "quant/q4e.h"

namespace mcullm::neon {

float dot_f32(const float* a, const float* b, int n) {
  float32x4_t l0 = vdupq_n_f32(0.0f), l1 = l0, l2 = l0, l3 = l0;  // lanes 0-3, 4-7, 8-11, 12-15
  int j = 0;
  for (; j + 16 <= n; j += 16) {
    l0 = vaddq_f32(l0, vmulq_f32(vld1q_f32(a + j), vld1q_f32(b + j)));
    l1 = vaddq_f32(l1, vmulq_f32(vld1q_f32(a + j + 4), vld1q_f32(b + j + 4)));
    l2 = vaddq_f32(l2, vmulq_f32(vld1q_f32(a + j + 8), vld1q_f32(b + j + 8)));
    l3 = vaddq_f32(l3, vmulq_f32(vld1q_f32(a + j + 12), vld1q_f32(b + j + 12)));
  }
  float acc[kF32Lanes];
  vst1q_f32(acc, l0);
  vst1q_f32(acc + 4, l1);
  vst1q_f32(acc + 8, l2);
  vst1q_f32(acc + 12, l3);
  for (; j < n; ++j) acc[j % kF32Lanes] += a[j] * b[j];
  return fold_lanes16(acc);
}

void matvec_f32(const MatRef& w, const float* x, float* y, int r0, int r1) {
  for (int r = r0; r < r1; ++r) y[r] = dot_f32(reinterpret_cast<const float*>(w.row(r)), x, w.cols);
}

void attn_scores(const float* q, const float* keys, size_t stride, int n, int hs, float scale, float* scores) {
  for (int t = 0; t < n; ++t) scores[t] = dot_f32(q, keys + static_cast<size_t>(t) * stride, hs) / scale;
}

// Each output element is its own sum over t (in increasing t), so vectorising over i keeps the bits.
void attn_values(const float* att, const float* values, size_t stride, int n, int hs, float* out) {
  int i = 0;
  for (; i + 4 <= hs; i += 4) {
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (int t = 0; t < n; ++t)
      acc = vaddq_f32(acc, vmulq_f32(vdupq_n_f32(att[t]), vld1q_f32(values + static_cast<size_t>(t) * stride + i)));
    vst1q_f32(out + i, acc);
  }
  for (; i < hs; ++i) {
    float acc = 0.0f;
    for (int t = 0; t < n; ++t) acc += att[t] * values[static_cast<size_t>(t) * stride + i];
    out[i] = acc;
  }
}

namespace {

// Sum of w[j] * x[j] for 16 int8 pairs, added pairwise into four int32 lanes (exact).
inline int32x4_t dot16_s8(int32x4_t acc, int8x16_t w, int8x16_t x) {
  acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(w), vget_low_s8(x)));
  return vpadalq_s16(acc, vmull_high_s8(w, x));
}

// The exact int32 dot product of one block's weights with its activations (kBlock of each).
inline int32_t block_isum(const BlockQ8_0& b, const int8_t* x) {
  int32x4_t acc = dot16_s8(vdupq_n_s32(0), vld1q_s8(b.qs), vld1q_s8(x));
  return vaddvq_s32(dot16_s8(acc, vld1q_s8(b.qs + 16), vld1q_s8(x + 16)));
}

// Nibbles of 16 bytes as int8 weights (nibble - 8): low nibbles, then high nibbles.
inline int8x16_t low_nibbles(uint8x16_t q) { return vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0F))), vdupq_n_s8(8)); }
inline int8x16_t high_nibbles(uint8x16_t q) { return vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), vdupq_n_s8(8)); }

inline int32_t block_isum(const BlockQ4_0& b, const int8_t* x) {  // weight j: low nibble of qs[j], j + 16: high
  const uint8x16_t q = vld1q_u8(b.qs);
  const int32x4_t acc = dot16_s8(vdupq_n_s32(0), low_nibbles(q), vld1q_s8(x));
  return vaddvq_s32(dot16_s8(acc, high_nibbles(q), vld1q_s8(x + 16)));
}

inline int32_t block_isum(const BlockQ4G64& b, const int8_t* x) {  // weight j: low nibble of qs[j], j + 32: high
  const uint8x16_t q0 = vld1q_u8(b.qs), q1 = vld1q_u8(b.qs + 16);
  int32x4_t acc = dot16_s8(vdupq_n_s32(0), low_nibbles(q0), vld1q_s8(x));
  acc = dot16_s8(acc, low_nibbles(q1), vld1q_s8(x + 16));
  acc = dot16_s8(acc, high_nibbles(q0), vld1q_s8(x + 32));
  return vaddvq_s32(dot16_s8(acc, high_nibbles(q1), vld1q_s8(x + 48)));
}

// The quantized-block order of kernels.h: acc[b % 8] += (float)isum_b * (d_w * d_x), folded as a tree.
template <typename Block, int kBlock>
void matvec_blocks(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1) {
  const int nb = (w.cols + kBlock - 1) / kBlock;
  for (int r = r0; r < r1; ++r) {
    const Block* blocks = reinterpret_cast<const Block*>(w.row(r));
    float acc[kBlockLanes] = {};
    for (int b = 0; b < nb; ++b)
      acc[b % kBlockLanes] += static_cast<float>(block_isum(blocks[b], xq + b * kBlock)) * (f16_to_f32(blocks[b].d) * xs[b]);
    y[r] = fold_lanes8(acc);
  }
}

}  // namespace

void matvec_q8_0(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1) {
  matvec_blocks<BlockQ8_0, 32>(w, xq, xs, y, r0, r1);
}
void matvec_q4_0(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1) {
  matvec_blocks<BlockQ4_0, 32>(w, xq, xs, y, r0, r1);
}
void matvec_q4g64(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1) {
  matvec_blocks<BlockQ4G64, 64>(w, xq, xs, y, r0, r1);
}

// i2_s (quant/ternary.h): per 128 weights 32 bytes; byte b holds weight b + 32k at bits 7-6 (k = 0)
// .. 1-0 (k = 3), code = w + 1. One exact int32 sum per row, then y = (float)isum * (w.scale * xs[0]).
void matvec_i2s(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1) {
  const float scale = w.scale * xs[0];
  const uint8x16_t m3 = vdupq_n_u8(3);
  const int8x16_t one = vdupq_n_s8(1);
  for (int r = r0; r < r1; ++r) {
    const uint8_t* row = w.row(r);
    int32x4_t acc = vdupq_n_s32(0);
    for (int g = 0; g < w.cols / 128; ++g) {
      const uint8x16_t b0 = vld1q_u8(row + 32 * g), b1 = vld1q_u8(row + 32 * g + 16);
      const int8_t* x = xq + 128 * g;
      const int8x16_t c[8] = {
          vreinterpretq_s8_u8(vshrq_n_u8(b0, 6)), vreinterpretq_s8_u8(vshrq_n_u8(b1, 6)),
          vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(b0, 4), m3)), vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(b1, 4), m3)),
          vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(b0, 2), m3)), vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(b1, 2), m3)),
          vreinterpretq_s8_u8(vandq_u8(b0, m3)), vreinterpretq_s8_u8(vandq_u8(b1, m3))};
      for (int k = 0; k < 8; ++k) acc = dot16_s8(acc, vsubq_s8(c[k], one), vld1q_s8(x + 16 * k));
    }
    y[r] = static_cast<float>(vaddvq_s32(acc)) * scale;
  }
}

// esp32-ai int4 (q4e) with int8 activations: one exact int32 sum per group (32 columns at a time
// where the group starts on a byte: even columns in the low nibbles, odd in the high, against the
// activations de-interleaved by vld2q_s8; the rest scalar), then the reference's float order.
void matvec_q4e_q8(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1) {
  const int ng = q4e_groups(w.cols, w.group);
  for (int r = r0; r < r1; ++r) {
    const uint8_t* row = w.row(r);
    float acc = 0.0f;
    for (int g = 0; g < ng; ++g) {
      const int begin = g * w.group, end = begin + w.group < w.cols ? begin + w.group : w.cols;
      int j = begin;
      int32x4_t vsum = vdupq_n_s32(0);
      if ((j & 1) == 0)
        for (; j + 32 <= end; j += 32) {
          const uint8x16_t q = vld1q_u8(row + (j >> 1));
          const int8x16x2_t x = vld2q_s8(xq + j);
          vsum = dot16_s8(dot16_s8(vsum, low_nibbles(q), x.val[0]), high_nibbles(q), x.val[1]);
        }
      int32_t isum = vaddvq_s32(vsum);
      for (; j < end; ++j) isum += q4e_weight(w, r, j) * xq[j];
      acc += static_cast<float>(isum) * q4e_scale(w, r, g);
    }
    y[r] = acc * xs[0];
  }
}

}  // namespace mcullm::neon
