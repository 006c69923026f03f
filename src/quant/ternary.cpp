#include "quant/ternary.h"

#include <string.h>

#include "quant/blocks.h"
#include "quant/f16.h"

namespace mcullm {

namespace {

constexpr uint16_t kF16One = 0x3C00;

struct LayoutInfo {
  TernaryLayout layout;
  const char* name;
  int unit_weights;
  int unit_bytes;
};

const LayoutInfo kLayouts[kTernaryLayoutCount] = {
    {TernaryLayout::kBitllama2cMsb, "bitllama2c-msb", 4, 1},
    {TernaryLayout::kBitllama2cLsb, "bitllama2c-lsb", 4, 1},
    {TernaryLayout::kCluster2, "cluster2", 4, 1},
    {TernaryLayout::kI2S, "i2_s", 128, 32},
    {TernaryLayout::kTQ2_0, "tq2_0", 256, 66},
    {TernaryLayout::kTQ1_0, "tq1_0", 256, 54},
};

const LayoutInfo* info_of(TernaryLayout layout) {
  const int i = static_cast<int>(layout);
  return i >= 0 && i < kTernaryLayoutCount ? &kLayouts[i] : nullptr;
}

// 2-bit codes of the byte layouts (4 weights a byte).
inline int bitllama2c_code(int w) { return w == 0 ? 0 : w == 1 ? 1 : 3; }
inline int cluster_code(int w) { return w == 0 ? 0 : w == 1 ? 1 : 2; }
inline int offset_value(int code, bool* ok) {  // code = w + 1 (i2_s, tq2_0)
  if (code == 3) *ok = false;
  return code - 1;
}

// Byte position (shift) of weight j (0..3) of a byte.
inline int byte_shift(TernaryLayout layout, int j) { return layout == TernaryLayout::kBitllama2cMsb ? 6 - 2 * j : 2 * j; }

void pack_bytes(TernaryLayout layout, const int8_t* w, int cols, uint8_t* dst) {
  for (int i = 0; i < cols / 4; ++i) {
    uint8_t b = 0;
    for (int j = 0; j < 4; ++j) {
      const int v = w[4 * i + j];
      const int code = layout == TernaryLayout::kCluster2 ? cluster_code(v) : bitllama2c_code(v);
      b = static_cast<uint8_t>(b | code << byte_shift(layout, j));
    }
    dst[i] = b;
  }
}

// Values of the four 2-bit codes of each byte layout (2 marks an invalid code).
constexpr int8_t kBitllama2cValues[4] = {0, 1, 2, -1};
constexpr int8_t kClusterValues[4] = {0, 1, -1, 2};

bool unpack_bytes(TernaryLayout layout, const uint8_t* src, int cols, int8_t* w) {
  const int8_t* values = layout == TernaryLayout::kCluster2 ? kClusterValues : kBitllama2cValues;
  const int s0 = byte_shift(layout, 0), s1 = byte_shift(layout, 1), s2 = byte_shift(layout, 2), s3 = byte_shift(layout, 3);
  int bad = 0;
  for (int i = 0; i < cols / 4; ++i) {
    const unsigned b = src[i];
    const int8_t v0 = values[(b >> s0) & 3], v1 = values[(b >> s1) & 3], v2 = values[(b >> s2) & 3], v3 = values[(b >> s3) & 3];
    bad |= (v0 == 2) | (v1 == 2) | (v2 == 2) | (v3 == 2);
    w[4 * i] = v0;
    w[4 * i + 1] = v1;
    w[4 * i + 2] = v2;
    w[4 * i + 3] = v3;
  }
  return bad == 0;  // (w is unspecified when false)
}

// i2_s: per 128 weights, byte b holds weights b + 32k at bits 7-6 (k = 0) down to 1-0 (k = 3).
void pack_i2s(const int8_t* w, int cols, uint8_t* dst) {
  for (int g = 0; g < cols / 128; ++g)
    for (int b = 0; b < 32; ++b) {
      uint8_t byte = 0;
      for (int k = 0; k < 4; ++k) byte = static_cast<uint8_t>(byte | (w[128 * g + 32 * k + b] + 1) << (6 - 2 * k));
      dst[32 * g + b] = byte;
    }
}

bool unpack_i2s(const uint8_t* src, int cols, int8_t* w) {
  bool ok = true;
  for (int g = 0; g < cols / 128; ++g)
    for (int b = 0; b < 32; ++b)
      for (int k = 0; k < 4; ++k)
        w[128 * g + 32 * k + b] = static_cast<int8_t>(offset_value((src[32 * g + b] >> (6 - 2 * k)) & 3, &ok));
  return ok;
}

// tq2_0 block: qs[64] then f16 d. Chunk c (32 bytes) covers weights 128c..128c+127; byte m of the
// chunk holds weights m + 32n at bits 2n..2n+1.
void pack_tq2_block(const int8_t* w, uint16_t d, uint8_t* blk) {
  for (int c = 0; c < 2; ++c)
    for (int m = 0; m < 32; ++m) {
      uint8_t byte = 0;
      for (int n = 0; n < 4; ++n) byte = static_cast<uint8_t>(byte | (w[128 * c + 32 * n + m] + 1) << (2 * n));
      blk[32 * c + m] = byte;
    }
  memcpy(blk + 64, &d, 2);
}

bool unpack_tq2_block(const uint8_t* blk, int8_t* w, uint16_t* d) {
  bool ok = true;
  for (int c = 0; c < 2; ++c)
    for (int n = 0; n < 4; ++n)
      for (int m = 0; m < 32; ++m)
        w[128 * c + 32 * n + m] = static_cast<int8_t>(offset_value((blk[32 * c + m] >> (2 * n)) & 3, &ok));
  if (d) memcpy(d, blk + 64, 2);
  return ok;
}

// tq1_0 block: qs[48] (bytes 0-31: 5 trits each, weights m + 32n; bytes 32-47: 5 trits each,
// weights 160 + m + 16n), qh[4] (4 trits each, weights 240 + j + 4n), then f16 d. A byte holds the
// base-3 number v of its trits (first trit most significant; qh's v is shifted up one trit) stored
// as ceil(v * 256 / 243), so trit n comes back as ((uint8_t)(byte * 3^n) * 3) >> 8.
inline uint8_t tq1_store(int v) { return static_cast<uint8_t>((v * 256 + 242) / 243); }
inline int tq1_trit(uint8_t byte, int n) {
  static const uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  const uint8_t q = static_cast<uint8_t>(byte * kPow3[n]);
  return (static_cast<uint16_t>(q) * 3) >> 8;
}

void pack_tq1_block(const int8_t* w, uint16_t d, uint8_t* blk) {
  for (int m = 0; m < 32; ++m) {
    int v = 0;
    for (int n = 0; n < 5; ++n) v = v * 3 + (w[m + 32 * n] + 1);
    blk[m] = tq1_store(v);
  }
  for (int m = 0; m < 16; ++m) {
    int v = 0;
    for (int n = 0; n < 5; ++n) v = v * 3 + (w[160 + m + 16 * n] + 1);
    blk[32 + m] = tq1_store(v);
  }
  for (int j = 0; j < 4; ++j) {
    int v = 0;
    for (int n = 0; n < 4; ++n) v = v * 3 + (w[240 + j + 4 * n] + 1);
    blk[48 + j] = tq1_store(v * 3);
  }
  memcpy(blk + 52, &d, 2);
}

void unpack_tq1_block(const uint8_t* blk, int8_t* w, uint16_t* d) {
  for (int n = 0; n < 5; ++n)
    for (int m = 0; m < 32; ++m) w[m + 32 * n] = static_cast<int8_t>(tq1_trit(blk[m], n) - 1);
  for (int n = 0; n < 5; ++n)
    for (int m = 0; m < 16; ++m) w[160 + m + 16 * n] = static_cast<int8_t>(tq1_trit(blk[32 + m], n) - 1);
  for (int n = 0; n < 4; ++n)
    for (int j = 0; j < 4; ++j) w[240 + j + 4 * n] = static_cast<int8_t>(tq1_trit(blk[48 + j], n) - 1);
  if (d) memcpy(d, blk + 52, 2);
}

bool all_ternary(const int8_t* w, int n) {
  for (int i = 0; i < n; ++i)
    if (w[i] < -1 || w[i] > 1) return false;
  return true;
}

}  // namespace

const char* ternary_layout_name(TernaryLayout layout) {
  const LayoutInfo* info = info_of(layout);
  return info ? info->name : "?";
}

bool ternary_layout_by_name(const char* name, TernaryLayout* out) {
  for (const LayoutInfo& info : kLayouts)
    if (name && strcmp(info.name, name) == 0) {
      *out = info.layout;
      return true;
    }
  return false;
}

int ternary_unit_weights(TernaryLayout layout) {
  const LayoutInfo* info = info_of(layout);
  return info ? info->unit_weights : 0;
}

int ternary_unit_bytes(TernaryLayout layout) {
  const LayoutInfo* info = info_of(layout);
  return info ? info->unit_bytes : 0;
}

bool ternary_row_fits(TernaryLayout layout, int64_t cols) {
  const LayoutInfo* info = info_of(layout);
  return info && cols > 0 && cols <= INT32_MAX && cols % info->unit_weights == 0;
}

size_t ternary_row_bytes(TernaryLayout layout, int64_t cols) {
  if (!ternary_row_fits(layout, cols)) return 0;
  const LayoutInfo* info = info_of(layout);
  return static_cast<size_t>(cols / info->unit_weights) * static_cast<size_t>(info->unit_bytes);
}

bool ternary_has_block_scales(TernaryLayout layout) {
  return layout == TernaryLayout::kTQ1_0 || layout == TernaryLayout::kTQ2_0;
}

int ternary_row_scales(TernaryLayout layout, int64_t cols) {
  return ternary_has_block_scales(layout) && ternary_row_fits(layout, cols) ? static_cast<int>(cols / 256) : 0;
}

bool ternary_pack_row(TernaryLayout layout, const int8_t* w, int cols, void* dst, const uint16_t* d) {
  if (!ternary_row_fits(layout, cols) || !all_ternary(w, cols)) return false;
  uint8_t* out = static_cast<uint8_t*>(dst);
  switch (layout) {
    case TernaryLayout::kBitllama2cMsb:
    case TernaryLayout::kBitllama2cLsb:
    case TernaryLayout::kCluster2: pack_bytes(layout, w, cols, out); return true;
    case TernaryLayout::kI2S: pack_i2s(w, cols, out); return true;
    case TernaryLayout::kTQ2_0:
      for (int b = 0; b < cols / 256; ++b) pack_tq2_block(w + 256 * b, d ? d[b] : kF16One, out + 66 * b);
      return true;
    case TernaryLayout::kTQ1_0:
      for (int b = 0; b < cols / 256; ++b) pack_tq1_block(w + 256 * b, d ? d[b] : kF16One, out + 54 * b);
      return true;
    case TernaryLayout::kCount: break;
  }
  return false;
}

bool ternary_unpack_row(TernaryLayout layout, const void* src, int cols, int8_t* w, uint16_t* d) {
  if (!ternary_row_fits(layout, cols)) return false;
  const uint8_t* in = static_cast<const uint8_t*>(src);
  switch (layout) {
    case TernaryLayout::kBitllama2cMsb:
    case TernaryLayout::kBitllama2cLsb:
    case TernaryLayout::kCluster2: return unpack_bytes(layout, in, cols, w);
    case TernaryLayout::kI2S: return unpack_i2s(in, cols, w);
    case TernaryLayout::kTQ2_0: {
      bool ok = true;
      for (int b = 0; b < cols / 256; ++b) ok = unpack_tq2_block(in + 66 * b, w + 256 * b, d ? d + b : nullptr) && ok;
      return ok;
    }
    case TernaryLayout::kTQ1_0:
      for (int b = 0; b < cols / 256; ++b) unpack_tq1_block(in + 54 * b, w + 256 * b, d ? d + b : nullptr);
      return true;
    case TernaryLayout::kCount: break;
  }
  return false;
}

bool ternary_convert_row(TernaryLayout from, const void* src, TernaryLayout to, void* dst, int cols, int8_t* scratch) {
  if (!ternary_row_fits(from, cols) || !ternary_row_fits(to, cols)) return false;
  // Block scales travel in chunks of 256 weights (one tq block each) so no array is needed.
  const bool scales = ternary_has_block_scales(from) && ternary_has_block_scales(to);
  if (!scales) return ternary_unpack_row(from, src, cols, scratch) && ternary_pack_row(to, scratch, cols, dst);
  const uint8_t* in = static_cast<const uint8_t*>(src);
  uint8_t* out = static_cast<uint8_t*>(dst);
  const int in_bytes = ternary_unit_bytes(from), out_bytes = ternary_unit_bytes(to);
  for (int b = 0; b < cols / 256; ++b) {
    uint16_t d = 0;
    if (!ternary_unpack_row(from, in + static_cast<size_t>(b) * in_bytes, 256, scratch + 256 * b, &d)) return false;
    if (!ternary_pack_row(to, scratch + 256 * b, 256, out + static_cast<size_t>(b) * out_bytes, &d)) return false;
  }
  return true;
}

bool ternary_layout_dtype(TernaryLayout layout, DType* out) {
  switch (layout) {
    case TernaryLayout::kI2S: *out = DType::kI2_S; return true;
    case TernaryLayout::kTQ2_0: *out = DType::kTQ2_0; return true;
    case TernaryLayout::kTQ1_0: *out = DType::kTQ1_0; return true;
    default: break;
  }
  return false;
}

bool ternary_dtype_layout(DType type, TernaryLayout* out) {
  switch (type) {
    case DType::kI2_S: *out = TernaryLayout::kI2S; return true;
    case DType::kTQ2_0: *out = TernaryLayout::kTQ2_0; return true;
    case DType::kTQ1_0: *out = TernaryLayout::kTQ1_0; return true;
    default: break;
  }
  return false;
}

bool ternary_dequantize_tq_row(DType type, const void* src, float* dst, int cols) {
  TernaryLayout layout;
  if ((type != DType::kTQ1_0 && type != DType::kTQ2_0) || !ternary_dtype_layout(type, &layout) ||
      !ternary_row_fits(layout, cols))
    return false;
  const uint8_t* in = static_cast<const uint8_t*>(src);
  const int bytes = ternary_unit_bytes(layout);
  bool ok = true;
  for (int b = 0; b < cols / 256; ++b) {
    int8_t w[256];
    uint16_t d = 0;
    ok = ternary_unpack_row(layout, in + static_cast<size_t>(b) * bytes, 256, w, &d) && ok;
    const float scale = f16_to_f32(d);
    for (int j = 0; j < 256; ++j) dst[256 * b + j] = static_cast<float>(w[j]) * scale;
  }
  return ok;
}

bool i2s_dequantize_row(const void* src, float* dst, int cols, float scale) {
  if (!ternary_row_fits(TernaryLayout::kI2S, cols)) return false;
  const uint8_t* in = static_cast<const uint8_t*>(src);
  bool ok = true;
  for (int g = 0; g < cols / 128; ++g) {
    int8_t w[128];
    ok = unpack_i2s(in + 32 * g, 128, w) && ok;
    for (int j = 0; j < 128; ++j) dst[128 * g + j] = static_cast<float>(w[j]) * scale;
  }
  return ok;
}

bool ternary_quantize_tq_row(DType type, const float* src, void* dst, int cols) {
  TernaryLayout layout;
  if ((type != DType::kTQ1_0 && type != DType::kTQ2_0) || !ternary_dtype_layout(type, &layout) ||
      !ternary_row_fits(layout, cols))
    return false;
  uint8_t* out = static_cast<uint8_t*>(dst);
  const int bytes = ternary_unit_bytes(layout);
  for (int b = 0; b < cols / 256; ++b) {
    const float* x = src + 256 * b;
    float amax = 0.0f;
    for (int j = 0; j < 256; ++j) {
      const float a = x[j] < 0 ? -x[j] : x[j];
      if (a > amax) amax = a;
    }
    const float id = amax != 0.0f ? 1.0f / amax : 0.0f;
    int8_t w[256];
    for (int j = 0; j < 256; ++j) {
      const float r = round_half_away(x[j] * id);
      w[j] = static_cast<int8_t>(r > 0.0f ? 1 : r < 0.0f ? -1 : 0);
    }
    const uint16_t d = f32_to_f16(amax);
    ternary_pack_row(layout, w, 256, out + static_cast<size_t>(b) * bytes, &d);
  }
  return true;
}

size_t i2s_tensor_bytes(int64_t rows, int64_t cols) {
  const size_t row = ternary_row_bytes(TernaryLayout::kI2S, cols);
  if (row == 0 || rows <= 0) return 0;
  return static_cast<size_t>(rows) * row + kI2STensorTailBytes;
}

float i2s_tensor_scale(const void* tensor, int64_t rows, int64_t cols) {
  const size_t at = static_cast<size_t>(rows) * ternary_row_bytes(TernaryLayout::kI2S, cols);
  float s;
  memcpy(&s, static_cast<const uint8_t*>(tensor) + at, 4);
  return s;
}

void quantize_bitlinear(const float* x, int n, int8_t* q, float* scale) {
  float amax = -1.0f;
  for (int i = 0; i < n; ++i) {
    const float a = x[i] < 0 ? -x[i] : x[i];
    if (a > amax) amax = a;
  }
  const float s = static_cast<float>(static_cast<double>(amax) / 127.0);
  *scale = s;
  if (!(s > 0.0f) || s - s != 0.0f) {  // zero vector (or all nan), or an infinite value
    for (int i = 0; i < n; ++i) q[i] = 0;
    *scale = 0.0f;
    return;
  }
  const float inv = static_cast<float>(1.0 / static_cast<double>(s));
  for (int i = 0; i < n; ++i) {
    const float r = round_half_away(x[i] * inv);
    q[i] = static_cast<int8_t>(saturate_to_int(r, -127, 127, 0));
  }
}

float i8s_scale(float amax) {
  if (!(amax - amax == 0.0f)) return 0.0f;  // inf or nan
  const double m = amax > 1e-5f ? static_cast<double>(amax) : 1e-5;
  return static_cast<float>(127.0 / m);
}

void quantize_i8s_with(const float* x, int n, float s, int8_t* q) {
  for (int i = 0; i < n; ++i) {
    const float r = round_half_away(x[i] * s);
    q[i] = static_cast<int8_t>(saturate_to_int(r, -128, 127, 0));
  }
}

void quantize_i8s(const float* x, int n, int8_t* q, float* inv_scale) {
  float amax = 0.0f;
  bool finite = true;
  for (int i = 0; i < n; ++i) {
    const float a = x[i] < 0 ? -x[i] : x[i];
    if (!(a - a == 0.0f)) finite = false;  // inf or nan
    if (a > amax) amax = a;
  }
  const float s = finite ? i8s_scale(amax) : 0.0f;
  if (s == 0.0f) {
    for (int i = 0; i < n; ++i) q[i] = 0;
    *inv_scale = 0.0f;
    return;
  }
  *inv_scale = static_cast<float>(1.0 / static_cast<double>(s));
  quantize_i8s_with(x, n, s, q);
}

}  // namespace mcullm
