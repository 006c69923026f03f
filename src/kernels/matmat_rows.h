// Batched products built from a matvec kernel: rows in blocks small enough to stay in L1 while every
// column passes over them, so the weights are read from memory once and each output keeps the
// matvec's bits.
#pragma once
#include "kernels/kernels.h"

namespace mcullm {

// Rows per block: about 16 KiB of weights, a multiple of 4 rows (the optimized kernels' row step).
static inline int matmat_row_block(const MatRef& w) {
  const size_t rb = w.row_bytes ? 16384 / w.row_bytes : 1;
  return rb < 4 ? 4 : static_cast<int>(rb > 1024 ? 1024 : rb / 4 * 4);
}

// Calls f(c, rb0, rb1) for every block [rb0, rb1) of rows [r0, r1) and every column c < n, columns inner.
template <typename F>
inline void for_row_blocks(const MatRef& w, int n, int r0, int r1, F&& f) {
  const int rb = matmat_row_block(w);
  for (int r = r0; r < r1; r += rb) {
    const int re = r1 - r < rb ? r1 : r + rb;
    for (int c = 0; c < n; ++c) f(c, r, re);
  }
}

template <void (*Matvec)(const MatRef&, const int8_t*, const float*, float*, int, int)>
void matmat_i2s_by_rows(const MatRef& w, const int8_t* xq, size_t xq_stride, const float* xs, int n, float* y,
                        size_t y_stride, int r0, int r1) {
  for_row_blocks(w, n, r0, r1, [&](int c, int rb0, int rb1) {
    Matvec(w, xq + static_cast<size_t>(c) * xq_stride, xs + c, y + static_cast<size_t>(c) * y_stride, rb0, rb1);
  });
}

// The listed rows one matvec call each (tables without a kernel that shares work between them).
template <void (*Matvec)(const MatRef&, const int8_t*, const float*, float*, int, int)>
void matvec_rows_by_row(const MatRef& w, const int8_t* xq, const float* xs, const int32_t* rows, int n, float* y) {
  for (int i = 0; i < n; ++i) Matvec(w, xq, xs, y, rows[i], rows[i] + 1);
}

}  // namespace mcullm
