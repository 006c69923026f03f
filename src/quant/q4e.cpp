#include "quant/q4e.h"

#include <float.h>
#include <string.h>

#include "quant/blocks.h"
#include "quant/f16.h"

namespace mcullm {

float q4e_scale(const MatRef& w, int r, int g) {
  const uint8_t* p = w.scales + (static_cast<size_t>(r) * static_cast<size_t>(q4e_groups(w.cols, w.group)) + static_cast<size_t>(g)) * 2;
  return f16_to_f32(static_cast<uint16_t>(p[0] | p[1] << 8));
}

bool q4e_bind(const uint8_t* p, int rows, int cols, MatRef* out) {
  int32_t group;
  memcpy(&group, p, 4);
  if (group <= 0 || rows <= 0 || cols <= 0) return false;
  MatRef m;
  m.type = DType::kQ4E;
  m.data = p + 4;
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = static_cast<size_t>((cols + 1) / 2);
  m.group = group;
  m.scales = p + 4 + q4e_code_bytes(rows, cols);
  *out = m;
  return true;
}

void q4e_dequantize_cols(const MatRef& w, int r, int c0, int c1, float* out) {
  for (int j = c0; j < c1; ++j) out[j - c0] = static_cast<float>(q4e_weight(w, r, j)) * q4e_scale(w, r, j / w.group);
}

void q4e_dequantize_row(const MatRef& w, int r, float* out) { q4e_dequantize_cols(w, r, 0, w.cols, out); }

void q4e_quantize_tensor(const float* x, int rows, int cols, int group, uint8_t* out) {
  const int32_t g32 = group;
  memcpy(out, &g32, 4);
  uint8_t* codes = out + 4;
  uint8_t* scales = codes + q4e_code_bytes(rows, cols);
  const int ng = q4e_groups(cols, group);
  const size_t row_bytes = static_cast<size_t>((cols + 1) / 2);
  memset(codes, 0, q4e_code_bytes(rows, cols));
  for (int r = 0; r < rows; ++r) {
    const float* row = x + static_cast<size_t>(r) * static_cast<size_t>(cols);
    for (int g = 0; g < ng; ++g) {
      const int begin = g * group, end = begin + group < cols ? begin + group : cols;
      float amax = 0.0f;
      for (int j = begin; j < end; ++j) amax = row[j] < 0 ? (-row[j] > amax ? -row[j] : amax) : (row[j] > amax ? row[j] : amax);
      const uint16_t h = f32_to_f16(amax / 7.0f);
      const float d = f16_to_f32(h);
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      uint8_t* s = scales + (static_cast<size_t>(r) * static_cast<size_t>(ng) + static_cast<size_t>(g)) * 2;
      s[0] = static_cast<uint8_t>(h & 0xFF);
      s[1] = static_cast<uint8_t>(h >> 8);
      for (int j = begin; j < end; ++j) {
        const int q = saturate_to_int(round_half_away(row[j] * id), -7, 7, 0);
        codes[static_cast<size_t>(r) * row_bytes + static_cast<size_t>(j >> 1)] |= static_cast<uint8_t>((q + 8) << ((j & 1) * 4));
      }
    }
  }
}

namespace {
// Round to nearest, ties to even (lrintf in the default mode) for |v| < 2^22.
float round_half_even(float v) {
  const float magic = 12582912.0f;  // 1.5 * 2^23
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0
  const float t = v + magic;  // rounded to float here: every target we build evaluates floats as floats
#else
  volatile float t = v + magic;  // excess precision (x87): the store does the rounding
#endif
  return t - magic;
}
}  // namespace

float q4e_activations_max(const float* x, int n) {
  float xmax = kQ4eActivationMaxFloor;
  for (int j = 0; j < n; ++j) {
    const float a = x[j] < 0 ? -x[j] : x[j];
    if (a > xmax) xmax = a;
  }
  return xmax;
}

void q4e_quantize_activations_with(const float* x, int n, float xmax, int8_t* q) {
  const float inv = q4e_activation_inv(xmax);
  for (int j = 0; j < n; ++j) {
    const float v = x[j] * inv;
    // |v| <= 127 unless x holds inf / nan: those clamp like lrintf's out-of-range results would.
    q[j] = static_cast<int8_t>(saturate_to_int(round_half_even(v), -127, 127, 0));
  }
}

void q4e_quantize_activations(const float* x, int n, int8_t* q, float* scale) {
  const float xmax = q4e_activations_max(x, n);
  q4e_quantize_activations_with(x, n, xmax, q);
  *scale = xmax / 127.0f;
}

}  // namespace mcullm
