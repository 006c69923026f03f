// The views the kernels take: a weight matrix (MatRef) and its inputs (ActVec, ActMat). Below the
// kernels, so that every packing in quant/ can name them.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "quant/dtype.h"

namespace mcullm {

struct TlTensor;

// A weight matrix stored row-major: `rows` rows of `cols` weights, `row_bytes` apart (tl1 / tl2:
// tiled, not row-major; `tl` is the LUT kernels' view of it and row() means nothing).
struct MatRef {
  DType type = DType::kF32;
  const void* data = nullptr;
  int rows = 0;
  int cols = 0;
  size_t row_bytes = 0;
  float scale = 1.0f;  // the per-tensor scale of i2_s weights (ignored by the other types)
  const uint8_t* scales = nullptr;  // q4e: the f16 group scales, rows * ceil(cols / group), any alignment
  int group = 0;                    // q4e: weights per scale group
  const TlTensor* tl = nullptr;     // tl1 / tl2: the ready tensor (tl_tensor_init_packed)
  const uint8_t* row(int r) const { return static_cast<const uint8_t*>(data) + static_cast<size_t>(r) * row_bytes; }
};

// A dense row-major f32 matrix.
static inline MatRef f32_matrix(const float* data, int rows, int cols) {
  MatRef m;
  m.type = DType::kF32;
  m.data = data;
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = static_cast<size_t>(cols) * 4;
  return m;
}

// An input vector in the forms the kernels read: f32 always; int8 blocks when quantized weights need them.
struct ActVec {
  const float* f = nullptr;
  const int8_t* q = nullptr;     // padded to whole blocks
  const float* scales = nullptr;
  int block = 0;                 // block size of q (0: not quantized)
};

// n input vectors (columns) in the same forms, column c at f + c * f_stride, q + c * q_stride and
// scales + c * s_stride.
struct ActMat {
  const float* f = nullptr;
  size_t f_stride = 0;
  const int8_t* q = nullptr;
  size_t q_stride = 0;
  const float* scales = nullptr;
  size_t s_stride = 0;
  int block = 0;
  ActVec col(int c) const {
    ActVec v;
    v.f = f ? f + static_cast<size_t>(c) * f_stride : nullptr;
    v.q = q ? q + static_cast<size_t>(c) * q_stride : nullptr;
    v.scales = scales ? scales + static_cast<size_t>(c) * s_stride : nullptr;
    v.block = block;
    return v;
  }
};

}  // namespace mcullm
