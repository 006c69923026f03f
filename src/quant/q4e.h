// esp32-ai's int4 tensor layout (FACTS.md section 4), read in place from its model files.
// A tensor is: i32 group, then rows * ceil(cols / 2) code bytes, then rows * n_groups f16 scales
// (little-endian, possibly unaligned). Symmetric groups along the input: q in [-7, 7], code = q + 8,
// column j of a row in byte j / 2 (even column low nibble), scale = amax / 7. A MatRef of type kQ4E
// points `data` at the codes (row_bytes = ceil(cols / 2)) and `scales` at the scale bytes.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "quant/mat_ref.h"

namespace mcullm {

static inline int q4e_groups(int cols, int group) { return (cols + group - 1) / group; }
static inline size_t q4e_code_bytes(int64_t rows, int64_t cols) { return static_cast<size_t>(rows) * static_cast<size_t>((cols + 1) / 2); }
static inline size_t q4e_scale_bytes(int64_t rows, int64_t cols, int group) {
  return static_cast<size_t>(rows) * static_cast<size_t>((cols + group - 1) / group) * 2;
}
// Bytes of a whole stored tensor, its i32 group prefix included.
static inline size_t q4e_tensor_bytes(int64_t rows, int64_t cols, int group) {
  return 4 + q4e_code_bytes(rows, cols) + q4e_scale_bytes(rows, cols, group);
}

// Integer weight (code - 8) of column j of row r.
static inline int q4e_weight(const MatRef& w, int r, int j) {
  const uint8_t byte = w.row(r)[j >> 1];
  return ((j & 1) ? (byte >> 4) : (byte & 0x0F)) - 8;
}
// Scale of group g of row r (read bytewise: the scales may be unaligned).
float q4e_scale(const MatRef& w, int r, int g);

// A MatRef over a stored tensor at `p` (its i32 group first); false when the group is not positive.
bool q4e_bind(const uint8_t* p, int rows, int cols, MatRef* out);
// Row r as floats: (code - 8) * scale.
void q4e_dequantize_row(const MatRef& w, int r, float* out);
// Columns [c0, c1) of row r into out[0, c1 - c0) (each value as q4e_dequantize_row gives it).
void q4e_dequantize_cols(const MatRef& w, int r, int c0, int c1, float* out);
// Quantizes rows x cols floats into the stored form (group prefix, codes, scales): `out` holds
// q4e_tensor_bytes. Scale = amax / 7 as f16, q = round-half-away(x / scale) clamped to [-7, 7].
void q4e_quantize_tensor(const float* x, int rows, int cols, int group, uint8_t* out);

// esp32-ai's int8 activations: ONE scale for the whole vector, xmax = max(1e-8, max |x|),
// q = round-half-even(x * (127 / xmax)) clamped to [-127, 127], scale = xmax / 127.
void q4e_quantize_activations(const float* x, int n, int8_t* q, float* scale);
// Its two halves, so that the second can be split over threads: the vector's xmax, then q of any
// stretch of it given that xmax (the same bits as the whole call).
// (The max starts at this floor, and q = x * q4e_activation_inv(xmax) rounded: shared by every table's
// version of the two halves, so they keep one definition of the bits.)
constexpr float kQ4eActivationMaxFloor = 1e-8f;
inline float q4e_activation_inv(float xmax) { return 127.0f / xmax; }
float q4e_activations_max(const float* x, int n);
void q4e_quantize_activations_with(const float* x, int n, float xmax, int8_t* q);

}  // namespace mcullm
