// ReLU feed-forward, gate first (issue 5, item 4): y = down . (relu(gate . x) * (up . x)), reading
// the up rows and the down columns only for live neurons (gate > 0).
//
// Exact: equals the dense computation (ffn_relu_dense) bit for bit. Dead neurons add a product
// +-0 * w to the dense result's lanes, and a kernels.h lane sum that starts at +0 is never -0, so
// adding +-0 never changes it (weights must be finite: inf * 0 would be a NaN in the dense result).
// The down matrix is stored transposed (one f32 row of `dim` weights per neuron) so that a dead
// neuron's weights are one skipped row; the sparse sum keeps the dense lane of each neuron (i % 16)
// and the increasing order within each lane.
#pragma once
#include "kernels/kernels.h"
#include "mcullm/status.h"

namespace mcullm {

struct ReluFfn {
  MatRef gate;    // [ffn, dim], any dense type (with x.q filled when quantized)
  MatRef up;      // [ffn, dim], same
  MatRef down;    // [dim, ffn] f32 (dense path)
  const float* down_t = nullptr;  // [ffn, dim] f32: down transposed (sparse path)
};

struct FfnStats {
  int neurons = 0;
  int live = 0;
  size_t bytes_read = 0;  // weight bytes of gate, up and down read
};

// h = relu(g) * u for n neurons (h may be g); returns the live ones (g > 0). The one definition the
// dense reference and the llama model's dense ReLU path share.
int relu_mul(const float* g, const float* u, float* h, int n);

// Dense reference: g = gate . x, u = up . x, h = relu(g) * u, y = down . h (h: [ffn] scratch).
void ffn_relu_dense(const KernelSet& k, const ReluFfn& f, const ActVec& x, float* g, float* u, float* h, float* y,
                    FfnStats* stats);
// Gate first: g for every neuron, then up rows and down rows only where g > 0. lanes: [dim * 16] scratch.
void ffn_relu_sparse(const KernelSet& k, const ReluFfn& f, const ActVec& x, float* g, float* u, float* h, float* y,
                     float* lanes, FfnStats* stats);

}  // namespace mcullm
