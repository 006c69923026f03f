// ReLU feed-forward, gate first (issue 5, item 4): y = down . (relu(gate . x) * (up . x)), reading
// the up rows and the down columns only for live neurons (gate > 0).
//
// Exact: equals the dense computation (ffn_relu_dense) bit for bit. Dead neurons add a product
// +-0 * w to the dense result's lanes, and a kernels.h lane sum that starts at +0 is never -0, so
// adding +-0 never changes it (weights must be finite: inf * 0 would be a NaN in the dense result).
// The down matrix is stored transposed (one f32 row of `dim` weights per neuron) so that a dead
// neuron's weights are one skipped row; the sparse sum keeps the dense lane of each neuron (i % 16)
// and the increasing order within each lane.
//
// Quantized down matrices (q8_0 / q4_0 / q4g64, ffn_relu_sparse_q): the down input h is quantized per
// block over the whole hidden vector as in the dense path (dead neurons are exact zeros in h, so the
// block scales are the dense ones), then the down product reads only the columns whose int8 value is
// non-zero (kernels.h matvec_down_cols on a column-stored copy, DownCols), which gives the dense
// block matvec's bits: a skipped column adds 0 to its block's int32 sum, a block with no column left
// adds (float)0 * (d_w * d_x) = +-0 to a lane that is never -0 (every d_w finite: build_down_cols
// checks). The gate and up products are the dense kernels' rows, so g, u and h are the dense bits.
// q4e down matrices (the PLE / combo models, int8 activations): h is quantized with one scale as
// the dense path does (q4e_quantize_activations; dead zeros do not change max |h|), and the dense
// q4e matvec's order is one accumulator from +0 with acc += (float)isum_g * d_g per group: a skipped
// column adds 0 to its group's int32 sum, a group with no column left adds +-0 to an accumulator that
// is never -0, and y = acc * xs[0] follows. The same argument holds for odd groups that start
// mid-byte and a shorter last group (only which columns belong to a group matters).
// i2_s down matrices (ternary models, whose gate and up are i2_s too): x and h are quantized as
// run_ternary_matmats quantizes them (k.quantize_i8s, one scale; dead zeros do not change max |h|),
// the gate and the live up rows are matvec_i2s's rows, and the dense i2_s matvec is one exact int32
// sum per row times (scale * xs[0]): a skipped column adds 0 to that sum, so the column kernel's
// (float)isum * (scale * xs[0]) is the same expression on the same integer.
#pragma once
#include "core/arena.h"
#include "core/thread_pool.h"
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
  int skipped = 0;        // neurons whose up row and down weights were not read (0 when it ran dense)
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

// The column-stored copy of a q8_0 / q4_0 / q4g64 / q4e / i2_s down matrix [rows, cols] (kernels.h
// DownCols) in `arena`. Ok with out->type == kF32 (not built; the dense path runs) for other types,
// rows % 32 != 0, cols % block != 0 (not for q4e; i2_s: cols % 128), or a block scale that is not
// finite (i2_s: its one scale is copied as it is; the dense sum times it gives the same bits anyway).
Status build_down_cols(const MatRef& down, Arena& arena, DownCols* out);
// Whether ffn_relu_sparse_q takes this down matrix (row-major): the types build_down_cols stores.
bool gate_first_down_type(DType t);

// Default of ReluFfnQ::max_live_permille: on Zen 3 (AVX2, 2 threads) a random-weight q4g64 ReLU dummy
// with about 50% live neurons ran at 0.5-0.7x with the column kernel; the break-even is not measured.
// i2_s (Zen 5, avx512, weights from DRAM, bench/sparse_ffn_bench): the FFN gate first at 25% live
// 1.1-1.8x dense, at 50% 0.5-1.4x: the break-even is near 40% live; the same default is kept.
constexpr int kSparseFfnMaxLivePermille = 250;

struct ReluFfnQ {
  MatRef gate;    // [ffn, dim], any dense type (with x.q filled when quantized)
  MatRef up;      // [ffn, dim], same
  // [dim, ffn] q8_0 / q4_0 / q4g64 / q4e / i2_s, column-stored; or not built (w null): the down
  // product reads the row-major matrix whole, and only the up rows of dead neurons are skipped (where
  // the column kernel is slower than the row kernels, as on the ESP32-S3 with PIE; no copy needed).
  DownCols down;
  MatRef down_rows;  // the same matrix row-major (the dense fallback), of a type build_down_cols takes
  // Above this share of live neurons (per mille) the token runs dense after the gate (the same bits):
  // the column kernel does more integer work per weight than the row kernels, so it pays only when
  // enough neurons are dead. 1000: always sparse.
  int max_live_permille = kSparseFfnMaxLivePermille;
};
struct FfnScratchQ {
  float* g;       // [ffn]
  float* u;       // [ffn]
  float* h;       // [ffn]
  int8_t* hq;     // [ffn] h quantized (may be x.q: read only before h is quantized)
  float* hs;      // [ffn / block] (q4e, i2_s: [1])
  int32_t* live;  // [ffn]
};
// Gate first with a quantized down matrix: g = gate . x (all rows, on the pool); when at most
// max_live_permille of the neurons are live: up rows of live neurons only (g > 0), h = relu(g) * u with dead neurons +0, h quantized per block (k.quantize_blocks; q4e: one scale; i2_s: k.quantize_i8s),
// y = down . h from the non-zero columns only (k.matvec_down_cols, rows split in 32-row chunks), or
// without a column copy the row-major down matvec over the same quantized h:
// y has the bits of the dense path's matvec of the row-major down matrix. Else the dense rest: up for
// every row, relu_mul, h quantized, the row-major down matvec (the same bits by construction).
void ffn_relu_sparse_q(ThreadPool& pool, const KernelSet& k, const ReluFfnQ& f, const ActVec& x, const FfnScratchQ& s,
                       float* y, FfnStats* stats);

}  // namespace mcullm
