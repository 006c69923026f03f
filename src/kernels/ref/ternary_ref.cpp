#include "kernels/kernels.h"
#include "kernels/matmat_rows.h"

namespace mcullm {

void matvec_i2s_ref(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1) {
  const float scale = w.scale * xs[0];
  for (int r = r0; r < r1; ++r) {
    const uint8_t* row = w.row(r);
    int32_t isum = 0;
    // Per 128 weights, byte b holds weights b + 32k at bits 7-6 (k = 0) .. 1-0 (k = 3); code = w + 1.
    for (int g = 0; g < w.cols / 128; ++g)
      for (int k = 0; k < 4; ++k)
        for (int b = 0; b < 32; ++b) {
          const int code = (row[32 * g + b] >> (6 - 2 * k)) & 3;
          isum += (code - 1) * xq[128 * g + 32 * k + b];
        }
    y[r] = static_cast<float>(isum) * scale;
  }
}

void matvec_i2s_rows_ref(const MatRef& w, const int8_t* xq, const float* xs, const int32_t* rows, int n, float* y) {
  matvec_rows_by_row<matvec_i2s_ref>(w, xq, xs, rows, n, y);
}

}  // namespace mcullm
