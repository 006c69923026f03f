#include "kernels/kernels.h"
#include "kernels/matmat_rows.h"

#include "quant/q4e.h"

namespace mcullm {

void matvec_q4e_f32_ref(const MatRef& w, const float* x, float* y, int r0, int r1) {
  const int ng = q4e_groups(w.cols, w.group);
  for (int r = r0; r < r1; ++r) {
    const uint8_t* row = w.row(r);
    float acc = 0.0f;
    for (int g = 0; g < ng; ++g) {
      const int begin = g * w.group, end = begin + w.group < w.cols ? begin + w.group : w.cols;
      float sum = 0.0f;
      int j = begin;
      if ((j & 1) && j < end) {  // a group starting mid-byte (odd group size)
        sum += static_cast<float>((row[j >> 1] >> 4) - 8) * x[j];
        ++j;
      }
      for (; j + 1 < end; j += 2) {
        const uint8_t byte = row[j >> 1];
        sum += static_cast<float>((byte & 0x0F) - 8) * x[j];
        sum += static_cast<float>((byte >> 4) - 8) * x[j + 1];
      }
      if (j < end) sum += static_cast<float>((row[j >> 1] & 0x0F) - 8) * x[j];
      acc += sum * q4e_scale(w, r, g);
    }
    y[r] = acc;
  }
}

void matvec_q4e_q8_ref(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1) {
  const int ng = q4e_groups(w.cols, w.group);
  for (int r = r0; r < r1; ++r) {
    float acc = 0.0f;
    for (int g = 0; g < ng; ++g) {
      const int begin = g * w.group, end = begin + w.group < w.cols ? begin + w.group : w.cols;
      int32_t isum = 0;
      for (int j = begin; j < end; ++j) isum += q4e_weight(w, r, j) * xq[j];
      acc += static_cast<float>(isum) * q4e_scale(w, r, g);
    }
    y[r] = acc * xs[0];
  }
}

void matvec_q4e_q8_rows_ref(const MatRef& w, const int8_t* xq, const float* xs, const int32_t* rows, int n, float* y) {
  matvec_rows_by_row<matvec_q4e_q8_ref>(w, xq, xs, rows, n, y);
}

}  // namespace mcullm
