// Matrix-vector kernels behind one table, with a scalar reference beside each optimized variant.
//
// The reduction-order contract (what makes every variant bit-exact with the reference):
//  * f32 / f16 dot products use 16 lanes: acc[j % 16] += a[j] * b[j] in increasing j (a product is
//    rounded, then added: no fma), then the lanes are folded as a tree: for s = 8, 4, 2, 1:
//    acc[i] += acc[i + s] for i < s. The result is acc[0].
//  * Quantized dot products (weights in blocks, activations int8 in blocks of the same size) form
//    one exact int32 sum per block, then acc[b % 8] += (float)isum_b * (d_w_b * d_x_b) in increasing
//    block order, folded as a tree for s = 4, 2, 1.
//  * Ternary weights (i2_s rows, see quant/ternary.h) times int8 activations with ONE scale for the
//    whole vector (BitLinear, quantize_bitlinear): one exact int32 sum per row, then
//    y = (float)isum * (w.scale * xs[0]). Types without an integer kernel (tq1_0, tq2_0, i2_s with f32
//    input) go through one scalar path shared by every table: rows expanded to f32, then the f32
//    16-lane order above.
// Rows are independent, so any split of rows among threads gives the same bits.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "quant/dtype.h"

namespace mcullm {

// A weight matrix stored row-major: `rows` rows of `cols` weights, `row_bytes` apart.
struct MatRef {
  DType type = DType::kF32;
  const void* data = nullptr;
  int rows = 0;
  int cols = 0;
  size_t row_bytes = 0;
  float scale = 1.0f;  // the per-tensor scale of i2_s weights (ignored by the other types)
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

struct KernelSet {
  const char* name;
  float (*dot_f32)(const float* a, const float* b, int n);
  // y[r] = (row r of w) . x, for r in [r0, r1).
  void (*matvec_f32)(const MatRef& w, const float* x, float* y, int r0, int r1);
  void (*matvec_f16)(const MatRef& w, const float* x, float* y, int r0, int r1);
  void (*matvec_q8_0)(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1);
  void (*matvec_q4_0)(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1);
  void (*matvec_q4g64)(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1);

  // Attention over one head. scores[t] = dot_f32(q, keys + t * stride, hs) / scale for t < n.
  void (*attn_scores)(const float* q, const float* keys, size_t stride, int n, int hs, float scale, float* scores);
  // out[i] = sum over t < n, in increasing t, of att[t] * values[t * stride + i], for i < hs.
  void (*attn_values)(const float* att, const float* values, size_t stride, int n, int hs, float* out);
  // In-place softmax: m = running max (x[i] > m replaces m, so NaNs are never picked unless x[0]
  // is one), x[i] = mc_expf(x[i] - m), sum in increasing i, then x[i] /= sum.
  void (*softmax)(float* x, int n);
  // gate[i] = mc_silu(gate[i]) * up[i]: the SwiGLU product.
  void (*silu_mul)(float* gate, const float* up, int n);
  // i2_s rows times int8 activations with one scale (xs[0]): see the contract above.
  void (*matvec_i2s)(const MatRef& w, const int8_t* xq, const float* xs, float* y, int r0, int r1);
  // The same for n columns: column c's int8 activations at xq + c * xq_stride, its scale xs[c], its
  // outputs at y + c * y_stride; every output has matvec_i2s's bits (integer sums are exact).
  void (*matmat_i2s)(const MatRef& w, const int8_t* xq, size_t xq_stride, const float* xs, int n, float* y,
                     size_t y_stride, int r0, int r1);
};

const KernelSet& kernels_ref();
// nullptr when not compiled in or when the CPU lacks AVX2.
const KernelSet* kernels_avx2();
// The AVX2 table with AVX-512 VNNI kernels where they pay (i2_s); nullptr when the CPU lacks
// AVX-512 F/BW/VL/VNNI (or AVX2).
const KernelSet* kernels_avx512();
// "ref", "avx2", "avx512" or "auto" (the fastest available); nullptr for an unknown or unavailable name.
const KernelSet* kernels_by_name(const char* name);
const KernelSet& kernels_best();

// Rows [r0, r1) of w times x, whatever w's type (x.q must be filled when w is quantized; for i2_s
// weights x.q with one scale selects the integer kernel, else the f32 path is taken).
void matvec(const KernelSet& k, const MatRef& w, const ActVec& x, float* y, int r0, int r1);

// Rows [r0, r1) of w times the n columns of x (batched prefill): y[c * y_stride + r] has exactly the
// bits matvec gives for column c. Each block of rows is read from memory once for all n columns
// (i2_s with one scale per column: matmat_i2s; the other types: matvec per column over row blocks
// that stay in L1).
void matmat(const KernelSet& k, const MatRef& w, const ActMat& x, int n, float* y, size_t y_stride, int r0, int r1);

}  // namespace mcullm
