// The one definition of each block packing (f16, q8_0, q4_0, q4g64) and of int8 activations.
// Kernels read these layouts; converters write them; tests round-trip them.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "quant/dtype.h"

namespace mcullm {

struct BlockQ8_0 { uint16_t d; int8_t qs[32]; };
struct BlockQ4_0 { uint16_t d; uint8_t qs[16]; };   // qs[j]: weight j low nibble, weight j+16 high
struct BlockQ4G64 { uint16_t d; uint8_t qs[32]; };  // qs[j]: weight j low nibble, weight j+32 high
static_assert(sizeof(BlockQ8_0) == 34, "q8_0 block");
static_assert(sizeof(BlockQ4_0) == 18, "q4_0 block");
static_assert(sizeof(BlockQ4G64) == 34, "q4g64 block");

// Quantize one row of `cols` floats into `dst` (dtype_row_bytes(type, cols) bytes).
// False when the type cannot hold such a row (dtype_row_fits).
bool quantize_row(DType type, const float* src, void* dst, int cols);
// Expand one stored row back to floats (src aligned for its type: 4 bytes for f32, 2 otherwise).
bool dequantize_row(DType type, const void* src, float* dst, int cols);
// Same for a source of any alignment (file bytes); slower, for load-time use.
bool dequantize_row_any(DType type, const void* src, float* dst, int cols);

// Symmetric int8 activations, one f32 scale per `block` values (the last block may be short):
// d = amax / 127, q = round-half-away(x / d) computed as x * (1 / d). One definition for all kernels.
// q is never -128: the AVX2 integer kernels negate activations (sign trick), which -128 would break.
void quantize_activations(const float* x, int n, int block, int8_t* q, float* scales);
// max |x[i]| over n values (0 for none; NaNs are skipped: a > m is false).
float abs_max(const float* x, int n);
// quantize_activations' walk over the blocks, each block's rounding by round_row(x, len, id, q)
// (q[j] = round_to_int8(x[j] * id)): the reference's, or a kernel table's loop.
template <typename RoundRow>
void quantize_blocks_by(const float* x, int n, int block, int8_t* q, float* scales, RoundRow round_row) {
  for (int b = 0; b * block < n; ++b) {
    const int start = b * block;
    const int len = n - start < block ? n - start : block;
    const float d = abs_max(x + start, len) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    scales[b] = d;
    round_row(x + start, len, id, q + start);
    for (int j = len; j < block; ++j) q[start + j] = 0;  // pad so kernels may read whole blocks
  }
}

// Round half away from zero, as C's roundf, without libm.
static inline float round_half_away(float v) {
  const float a = v < 0 ? -v : v;
  if (!(a < 8388608.0f)) return v;  // already an integer (or nan / inf)
  float r = static_cast<float>(static_cast<int32_t>(a + 0.5f));
  // a + 0.5f rounds up when a is just below k + 0.5 (0.49999997f -> 1); r - 0.5f is exact here,
  // so this comparison (unlike r - a > 0.5f, itself rounded) catches every such case.
  if (a < r - 0.5f) r -= 1.0f;
  return v < 0 ? -r : r;
}

// An integer in [lo, hi] from v, which a hostile file can make nan or +-inf (a plain cast would be
// undefined): nan gives `if_nan`, everything else saturates, then truncates toward zero.
static inline int saturate_to_int(float v, int lo, int hi, int if_nan) {
  if (!(v == v)) return if_nan;
  if (v <= static_cast<float>(lo)) return lo;
  if (v >= static_cast<float>(hi)) return hi;
  return static_cast<int>(v);
}
// round_half_away(v) as an int8 in [-127, 127] (nan: 0).
static inline int8_t round_to_int8(float v) {
  return static_cast<int8_t>(saturate_to_int(round_half_away(v), -127, 127, 0));
}

}  // namespace mcullm
