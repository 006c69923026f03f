#include "quant/blocks.h"

#include <string.h>

#include "quant/f16.h"
#include "quant/ternary.h"

namespace mcullm {

float abs_max(const float* x, int n) {
  float m = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float a = x[i] < 0 ? -x[i] : x[i];
    if (a > m) m = a;
  }
  return m;
}

namespace {

void quantize_q8_0(const float* x, BlockQ8_0* out, int cols) {
  for (int b = 0; b < cols / 32; ++b, x += 32) {
    const float d = abs_max(x, 32) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = f32_to_f16(d);
    for (int j = 0; j < 32; ++j) out[b].qs[j] = round_to_int8(x[j] * id);
  }
}

// llama.cpp's q4_0 rule: the value of largest magnitude maps to -8, so d = max / -8.
void quantize_q4_0(const float* x, BlockQ4_0* out, int cols) {
  for (int b = 0; b < cols / 32; ++b, x += 32) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; ++j) {
      const float a = x[j] < 0 ? -x[j] : x[j];
      if (a > amax) { amax = a; max = x[j]; }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = f32_to_f16(d);
    for (int j = 0; j < 16; ++j) {
      const int lo = saturate_to_int(x[j] * id + 8.5f, 0, 15, 8);
      const int hi = saturate_to_int(x[j + 16] * id + 8.5f, 0, 15, 8);
      out[b].qs[j] = static_cast<uint8_t>(lo | hi << 4);
    }
  }
}

// Symmetric 4-bit groups (esp32-ai's rule): d = amax / 7, q = round(x / d) in [-7, 7].
void quantize_q4g64(const float* x, BlockQ4G64* out, int cols) {
  for (int b = 0; b * 64 < cols; ++b) {
    float v[64];
    const int n = cols - b * 64 < 64 ? cols - b * 64 : 64;
    for (int j = 0; j < 64; ++j) v[j] = j < n ? x[b * 64 + j] : 0.0f;
    const float d = abs_max(v, 64) / 7.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = f32_to_f16(d);
    for (int j = 0; j < 32; ++j) {
      const int lo = saturate_to_int(round_half_away(v[j] * id), -7, 7, 0);
      const int hi = saturate_to_int(round_half_away(v[j + 32] * id), -7, 7, 0);
      out[b].qs[j] = static_cast<uint8_t>((lo + 8) | (hi + 8) << 4);
    }
  }
}

}  // namespace

bool quantize_row(DType type, const float* src, void* dst, int cols) {
  if (!dtype_row_fits(type, cols)) return false;
  switch (type) {
    case DType::kF32: memcpy(dst, src, static_cast<size_t>(cols) * 4); return true;
    case DType::kF16: {
      uint16_t* h = static_cast<uint16_t*>(dst);
      for (int i = 0; i < cols; ++i) h[i] = f32_to_f16(src[i]);
      return true;
    }
    case DType::kQ8_0: quantize_q8_0(src, static_cast<BlockQ8_0*>(dst), cols); return true;
    case DType::kQ4_0: quantize_q4_0(src, static_cast<BlockQ4_0*>(dst), cols); return true;
    case DType::kQ4G64: quantize_q4g64(src, static_cast<BlockQ4G64*>(dst), cols); return true;
    case DType::kTQ1_0:
    case DType::kTQ2_0: return ternary_quantize_tq_row(type, src, dst, cols);
    case DType::kI2_S: return false;  // one scale per tensor: quant/ternary.h packs whole tensors
    case DType::kQ4E: return false;   // scales stored apart: quant/q4e.h
    case DType::kTL1:
    case DType::kTL2: return false;  // tiled whole tensors: quant/ternary.h
  }
  return false;
}

bool dequantize_row(DType type, const void* src, float* dst, int cols) {
  if (!dtype_row_fits(type, cols)) return false;
  switch (type) {
    case DType::kF32: memcpy(dst, src, static_cast<size_t>(cols) * 4); return true;
    case DType::kF16: {
      const uint16_t* h = static_cast<const uint16_t*>(src);
      for (int i = 0; i < cols; ++i) dst[i] = f16_to_f32(h[i]);
      return true;
    }
    case DType::kQ8_0: {
      const BlockQ8_0* blk = static_cast<const BlockQ8_0*>(src);
      for (int i = 0; i < cols; ++i) dst[i] = blk[i / 32].qs[i % 32] * f16_to_f32(blk[i / 32].d);
      return true;
    }
    case DType::kQ4_0: {
      const BlockQ4_0* blk = static_cast<const BlockQ4_0*>(src);
      for (int i = 0; i < cols; ++i) {
        const int j = i % 32;
        const uint8_t byte = blk[i / 32].qs[j % 16];
        const int code = j < 16 ? (byte & 0x0F) : (byte >> 4);
        dst[i] = static_cast<float>(code - 8) * f16_to_f32(blk[i / 32].d);
      }
      return true;
    }
    case DType::kQ4G64: {
      const BlockQ4G64* blk = static_cast<const BlockQ4G64*>(src);
      for (int i = 0; i < cols; ++i) {
        const int j = i % 64;
        const uint8_t byte = blk[i / 64].qs[j % 32];
        const int code = j < 32 ? (byte & 0x0F) : (byte >> 4);
        dst[i] = static_cast<float>(code - 8) * f16_to_f32(blk[i / 64].d);
      }
      return true;
    }
    case DType::kTQ1_0:
    case DType::kTQ2_0: return ternary_dequantize_tq_row(type, src, dst, cols);
    case DType::kI2_S: return false;  // needs the tensor's scale: i2s_dequantize_row
    case DType::kQ4E: return false;   // needs the group scales: q4e_dequantize_row
    case DType::kTL1:
    case DType::kTL2: return false;  // tiled whole tensors: quant/ternary.h
  }
  return false;
}

bool dequantize_row_any(DType type, const void* src, float* dst, int cols) {
  if (!dtype_row_fits(type, cols)) return false;
  if (type == DType::kF32) {
    memcpy(dst, src, static_cast<size_t>(cols) * 4);
    return true;
  }
  // The ternary layouts read bytes and memcpy their scales: any alignment.
  if (type == DType::kTQ1_0 || type == DType::kTQ2_0) return ternary_dequantize_tq_row(type, src, dst, cols);
  if (type == DType::kI2_S || type == DType::kQ4E) return false;
  // Every other layout is read byte- or u16-wise; copy u16 values through memcpy when unaligned.
  if (reinterpret_cast<uintptr_t>(src) % 2 == 0) return dequantize_row(type, src, dst, cols);
  const size_t bytes = dtype_row_bytes(type, cols);
  uint16_t chunk[512];  // 1 KiB at a time, aligned
  if (type == DType::kF16) {
    const uint8_t* p = static_cast<const uint8_t*>(src);
    for (int i = 0; i < cols;) {
      const int n = cols - i < 512 ? cols - i : 512;
      memcpy(chunk, p + static_cast<size_t>(i) * 2, static_cast<size_t>(n) * 2);
      for (int j = 0; j < n; ++j) dst[i + j] = f16_to_f32(chunk[j]);
      i += n;
    }
    return true;
  }
  const DTypeInfo* info = dtype_info(type);
  const uint8_t* p = static_cast<const uint8_t*>(src);
  for (size_t off = 0, col = 0; off < bytes; off += static_cast<size_t>(info->block_bytes), col += static_cast<size_t>(info->block)) {
    memcpy(chunk, p + off, static_cast<size_t>(info->block_bytes));
    const int n = cols - static_cast<int>(col) < info->block ? cols - static_cast<int>(col) : info->block;
    float tmp[64];
    dequantize_row(type, chunk, tmp, info->pads_rows ? info->block : n);
    memcpy(dst + col, tmp, static_cast<size_t>(n) * 4);
  }
  return true;
}

void quantize_activations(const float* x, int n, int block, int8_t* q, float* scales) {
  quantize_blocks_by(x, n, block, q, scales, [](const float* v, int len, float id, int8_t* out) {
    for (int j = 0; j < len; ++j) out[j] = round_to_int8(v[j] * id);
  });
}

}  // namespace mcullm
