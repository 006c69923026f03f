#include "model/sparse_ffn.h"

#include "kernels/ref/dot_order.h"

namespace mcullm {

int relu_mul(const float* g, const float* u, float* h, int n) {
  int live = 0;
  for (int i = 0; i < n; ++i) {
    live += g[i] > 0.0f;  // counted before h is written: h may be g
    h[i] = (g[i] > 0.0f ? g[i] : 0.0f) * u[i];
  }
  return live;
}

void ffn_relu_dense(const KernelSet& k, const ReluFfn& f, const ActVec& x, float* g, float* u, float* h, float* y,
                    FfnStats* stats) {
  const int ffn = f.gate.rows;
  matvec(k, f.gate, x, g, 0, ffn);
  matvec(k, f.up, x, u, 0, ffn);
  const int live = relu_mul(g, u, h, ffn);
  k.matvec_f32(f.down, h, y, 0, f.down.rows);
  stats->neurons = ffn;
  stats->live = live;
  stats->bytes_read = static_cast<size_t>(ffn) * (f.gate.row_bytes + f.up.row_bytes) + static_cast<size_t>(f.down.rows) * f.down.row_bytes;
}

void ffn_relu_sparse(const KernelSet& k, const ReluFfn& f, const ActVec& x, float* g, float* u, float* h, float* y,
                     float* lanes, FfnStats* stats) {
  const int ffn = f.gate.rows, dim = f.down.rows;
  matvec(k, f.gate, x, g, 0, ffn);
  for (int j = 0; j < dim * kF32Lanes; ++j) lanes[j] = 0.0f;
  int live = 0;
  for (int i = 0; i < ffn; ++i) {
    if (!(g[i] > 0.0f)) continue;  // dead: its up row and down row are never read
    ++live;
    matvec(k, f.up, x, u, i, i + 1);
    h[i] = g[i] * u[i];
    const float* w = f.down_t + static_cast<size_t>(i) * static_cast<size_t>(dim);
    const int lane = i % kF32Lanes;
    for (int d = 0; d < dim; ++d) lanes[d * kF32Lanes + lane] += w[d] * h[i];
  }
  for (int d = 0; d < dim; ++d) y[d] = fold_lanes16(lanes + d * kF32Lanes);
  stats->neurons = ffn;
  stats->live = live;
  stats->bytes_read = static_cast<size_t>(ffn) * f.gate.row_bytes + static_cast<size_t>(live) * (f.up.row_bytes + static_cast<size_t>(dim) * 4);
}

}  // namespace mcullm
