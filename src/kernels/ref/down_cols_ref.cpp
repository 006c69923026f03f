// The sparse ReLU FFN's down product over live columns (kernels.h DownCols): the reference.
#include "kernels/kernels.h"
#include "kernels/ref/dot_order.h"

namespace mcullm {

namespace {
// Integer weight of row r in a column (the layout of kernels.h DownCols).
inline int down_cols_weight(DType type, const uint8_t* col, int r) {
  if (type == DType::kQ8_0) return static_cast<int8_t>(col[r]);
  const uint8_t byte = col[(r / 32) * 16 + (r % 16)];
  return ((r % 32) < 16 ? (byte & 0x0F) : (byte >> 4)) - 8;
}
}  // namespace

void matvec_down_cols_ref(const DownCols& w, const int8_t* xq, const float* xs, const int32_t* live, int n_live,
                          float* y, int r0, int r1) {
  if (w.type == DType::kI2_S) {  // matvec_i2s_ref's order: one int32 sum per row, one float step
    const float scale = w.scales[0] * xs[0];
    for (int r = r0; r < r1; ++r) {
      int32_t isum = 0;
      for (int k = 0; k < n_live; ++k) {
        const uint8_t byte = w.w[static_cast<size_t>(live[k]) * w.col_bytes + (r / 32) * 8 + r % 8];
        isum += (((byte >> (6 - 2 * ((r % 32) / 8))) & 3) - 1) * xq[live[k]];
      }
      y[r] = static_cast<float>(isum) * scale;
    }
    return;
  }
  if (w.type == DType::kQ4E) {  // one accumulator, groups in increasing order, one scale at the end
    for (int r = r0; r < r1; ++r) {
      float acc = 0.0f;
      for (int k = 0; k < n_live;) {
        const int g = live[k] / w.block;
        int32_t isum = 0;
        for (; k < n_live && live[k] / w.block == g; ++k)
          isum += down_cols_weight(w.type, w.w + static_cast<size_t>(live[k]) * w.col_bytes, r) * xq[live[k]];
        acc += static_cast<float>(isum) * w.scales[static_cast<size_t>(g) * w.rows + r];
      }
      y[r] = acc * xs[0];
    }
    return;
  }
  for (int r = r0; r < r1; ++r) {
    float acc[kBlockLanes] = {};
    for (int k = 0; k < n_live;) {
      const int b = live[k] / w.block;
      int32_t isum = 0;
      for (; k < n_live && live[k] / w.block == b; ++k) {
        const uint8_t* col = w.w + static_cast<size_t>(live[k]) * w.col_bytes;
        isum += down_cols_weight(w.type, col, r) * xq[live[k]];
      }
      acc[b % kBlockLanes] += static_cast<float>(isum) * (w.scales[static_cast<size_t>(b) * w.rows + r] * xs[b]);
    }
    y[r] = fold_lanes8(acc);
  }
}

}  // namespace mcullm
