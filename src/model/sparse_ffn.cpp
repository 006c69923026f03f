#include "model/sparse_ffn.h"

#include "kernels/ref/dot_order.h"
#include "model/transformer.h"
#include "quant/blocks.h"
#include "quant/f16.h"
#include "quant/q4e.h"

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
  stats->skipped = ffn - live;
  stats->bytes_read = static_cast<size_t>(ffn) * f.gate.row_bytes + static_cast<size_t>(live) * (f.up.row_bytes + static_cast<size_t>(dim) * 4);
}

namespace {

struct UpJob {
  const KernelSet* k;
  const MatRef* up;
  const ActVec* x;
  const int32_t* live;
  int n_live;
  float* u;
};
void up_task(void* ctx, int ith, int nth) {
  const UpJob& j = *static_cast<const UpJob*>(ctx);
  int b = 0, e = 0;
  slice(j.n_live, ith, nth, &b, &e);
  if (j.up->type == DType::kI2_S && j.x->q && j.x->scales) {  // matvec()'s choice for i2_s, all rows in one call
    j.k->matvec_i2s_rows(*j.up, j.x->q, j.x->scales, j.live + b, e - b, j.u);
    return;
  }
  if (j.up->type == DType::kQ4E && j.x->q && j.x->scales) {  // the same for q4e (a PLE model's up rows)
    j.k->matvec_q4e_q8_rows(*j.up, j.x->q, j.x->scales, j.live + b, e - b, j.u);
    return;
  }
  for (int i = b; i < e; ++i) matvec(*j.k, *j.up, *j.x, j.u, j.live[i], j.live[i] + 1);
}

struct DownJob {
  const KernelSet* k;
  const DownCols* w;
  const int8_t* q;
  const float* s;
  const int32_t* cols;
  int n_cols;
  float* y;
};
void down_task(void* ctx, int ith, int nth) {
  const DownJob& j = *static_cast<const DownJob*>(ctx);
  int b = 0, e = 0;
  slice(j.w->rows / 32, ith, nth, &b, &e);
  if (e > b) j.k->matvec_down_cols(*j.w, j.q, j.s, j.cols, j.n_cols, j.y, b * 32, e * 32);
}

// Block size and integer weight of element i of a row-major block row.
int block_of(const MatRef& m) { return m.type == DType::kQ4E ? m.group : m.type == DType::kQ4G64 ? 64 : 32; }
// Integer weight of element (r, i) and the scale of its block as f32.
int weight_at(const MatRef& m, int r, int i, float* d) {
  const uint8_t* row = m.row(r);
  const DType t = m.type;
  if (t == DType::kQ4E) {
    *d = q4e_scale(m, r, i / m.group);
    return q4e_weight(m, r, i);
  }
  if (t == DType::kQ8_0) {
    const BlockQ8_0& b = reinterpret_cast<const BlockQ8_0*>(row)[i / 32];
    *d = f16_to_f32(b.d);
    return b.qs[i % 32];
  }
  if (t == DType::kQ4_0) {
    const BlockQ4_0& b = reinterpret_cast<const BlockQ4_0*>(row)[i / 32];
    *d = f16_to_f32(b.d);
    const int j = i % 32;
    return (j < 16 ? (b.qs[j] & 0x0F) : (b.qs[j - 16] >> 4)) - 8;
  }
  const BlockQ4G64& b = reinterpret_cast<const BlockQ4G64*>(row)[i / 64];
  *d = f16_to_f32(b.d);
  const int j = i % 64;
  return (j < 32 ? (b.qs[j] & 0x0F) : (b.qs[j - 32] >> 4)) - 8;
}

// An i2_s matrix's columns with their codes as stored (kernels.h DownCols: row 32c + 8k + i at byte
// 8c + i, bits 6 - 2k; the row-major i2_s row holds weight 128g + 32k + b at byte 32g + b, bits 6 - 2k).
Status build_i2s_down_cols(const MatRef& down, Arena& arena, DownCols* out) {
  const int rows = down.rows, cols = down.cols;
  if (rows <= 0 || cols <= 0 || rows % 32 != 0 || cols % 128 != 0) return Status::Ok();
  const size_t col_bytes = static_cast<size_t>(rows) / 4;
  uint8_t* w = nullptr;
  float* scale = nullptr;
  MC_TRY(arena.alloc_array(col_bytes * static_cast<size_t>(cols), TensorClass::kFfn, &w));
  MC_TRY(arena.alloc_array(1, TensorClass::kFfn, &scale));
  for (size_t i = 0; i < col_bytes * static_cast<size_t>(cols); ++i) w[i] = 0;
  for (int r = 0; r < rows; ++r) {
    const uint8_t* row = down.row(r);
    const int to = 6 - 2 * ((r % 32) / 8);
    uint8_t* at = w + (r / 32) * 8 + r % 8;
    for (int i = 0; i < cols / 4; ++i)  // byte i: columns 128 (i / 32) + 32k + i % 32, bits 6 - 2k
      for (int k = 0; k < 4; ++k) {
        const size_t j = static_cast<size_t>(128 * (i / 32) + 32 * k + i % 32);
        at[j * col_bytes] |= static_cast<uint8_t>(((row[i] >> (6 - 2 * k)) & 3) << to);
      }
  }
  *scale = down.scale;
  *out = DownCols{DType::kI2_S, rows, cols, cols, col_bytes, w, scale};
  return Status::Ok();
}
}  // namespace

bool gate_first_down_type(DType t) {
  return t == DType::kQ8_0 || t == DType::kQ4_0 || t == DType::kQ4G64 || t == DType::kQ4E || t == DType::kI2_S;
}

Status build_down_cols(const MatRef& down, Arena& arena, DownCols* out) {
  *out = DownCols();
  const DType t = down.type;
  if (t == DType::kI2_S) return build_i2s_down_cols(down, arena, out);
  if (!gate_first_down_type(t)) return Status::Ok();
  const int rows = down.rows, cols = down.cols, block = block_of(down);
  if (rows <= 0 || cols <= 0 || block <= 0 || rows % 32 != 0 || (t != DType::kQ4E && cols % block != 0))
    return Status::Ok();
  const int nb = (cols + block - 1) / block;  // q4e: its last group may be shorter
  for (int r = 0; r < rows; ++r)
    for (int b = 0; b < nb; ++b) {
      float f = 0.0f;
      weight_at(down, r, b * block, &f);
      if (!(f - f == 0.0f)) return Status::Ok();  // inf or nan: 0 * d would not be +-0
    }
  const size_t col_bytes = t == DType::kQ8_0 ? static_cast<size_t>(rows) : static_cast<size_t>(rows) / 2;
  uint8_t* w = nullptr;
  float* scales = nullptr;
  MC_TRY(arena.alloc_array(col_bytes * static_cast<size_t>(cols), TensorClass::kFfn, &w));
  MC_TRY(arena.alloc_array(static_cast<size_t>(nb) * static_cast<size_t>(rows), TensorClass::kFfn, &scales));
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < cols; ++j) {
      float d = 0.0f;
      const int v = weight_at(down, r, j, &d);
      uint8_t* col = w + static_cast<size_t>(j) * col_bytes;
      if (t == DType::kQ8_0) {
        col[r] = static_cast<uint8_t>(static_cast<int8_t>(v));
      } else {
        uint8_t& byte = col[(r / 32) * 16 + (r % 16)];
        const uint8_t code = static_cast<uint8_t>(v + 8);
        byte = (r % 32) < 16 ? static_cast<uint8_t>((byte & 0xF0) | code) : static_cast<uint8_t>((byte & 0x0F) | (code << 4));
      }
      if (j % block == 0) scales[static_cast<size_t>(j / block) * rows + r] = d;
    }
  }
  *out = DownCols{t, rows, cols, block, col_bytes, w, scales};
  return Status::Ok();
}

namespace {
// h quantized as the dense path quantizes the down matrix's input: per block, or (q4e) with one
// scale for the whole vector (q4e_quantize_activations). Dead neurons are zeros (+-0), which change
// neither a block's scale nor the one scale.
ActVec quantize_h(const KernelSet& k, const MatRef& down, const FfnScratchQ& s, int ffn) {
  ActVec hx;
  hx.f = s.h;
  hx.q = s.hq;
  hx.scales = s.hs;
  if (down.type == DType::kQ4E) {
    q4e_quantize_activations(k, s.h, ffn, s.hq, s.hs);
    hx.block = ffn;
  } else if (down.type == DType::kI2_S) {  // run_ternary_matmats's BitLinear input (bitnet.cpp's I8_S)
    k.quantize_i8s(s.h, ffn, s.hq, s.hs);
    hx.block = ffn;
  } else {
    hx.block = block_of(down);
    k.quantize_blocks(s.h, ffn, hx.block, s.hq, s.hs);
  }
  return hx;
}
}  // namespace

void ffn_relu_sparse_q(ThreadPool& pool, const KernelSet& k, const ReluFfnQ& f, const ActVec& x, const FfnScratchQ& s,
                       float* y, FfnStats* stats) {
  const int ffn = f.gate.rows, dim = f.gate.cols;
  {
    const MatRef* mats[1] = {&f.gate};
    float* outs[1] = {s.g};
    run_matvecs(pool, k, mats, outs, 1, x);
  }
  int live = 0;
  for (int i = 0; i < ffn; ++i)
    if (s.g[i] > 0.0f) s.live[live++] = i;
  stats->neurons = ffn;
  stats->live = live;
  const bool dense = static_cast<long long>(live) * 1000 > static_cast<long long>(f.max_live_permille) * ffn;
  if (dense) {
    const MatRef* up[1] = {&f.up};
    float* uo[1] = {s.u};
    run_matvecs(pool, k, up, uo, 1, x);
    relu_mul(s.g, s.u, s.h, ffn);
  } else {
    UpJob up{&k, &f.up, &x, s.live, live, s.u};
    pool.run_sized(up_task, &up, static_cast<size_t>(live) * static_cast<size_t>(dim));
    for (int i = 0; i < ffn; ++i) s.h[i] = 0.0f;
    for (int n = 0; n < live; ++n) s.h[s.live[n]] = s.g[s.live[n]] * s.u[s.live[n]];  // relu_mul's bits
    stats->skipped = ffn - live;
  }
  const ActVec hx = quantize_h(k, f.down_rows, s, ffn);
  const size_t gate_up_bytes =
      static_cast<size_t>(ffn) * f.gate.row_bytes + static_cast<size_t>(dense ? ffn : live) * f.up.row_bytes;
  if (dense || !f.down.w) {  // the row-major down matrix, all of it (the dense bits: the same hq)
    const MatRef* dn[1] = {&f.down_rows};
    run_matvecs(pool, k, dn, &y, 1, hx);
    stats->bytes_read = gate_up_bytes + static_cast<size_t>(f.down_rows.rows) * f.down_rows.row_bytes;
    return;
  }
  int n_cols = 0;
  for (int i = 0; i < ffn; ++i)
    if (s.hq[i] != 0) s.live[n_cols++] = i;
  DownJob down{&k, &f.down, s.hq, s.hs, s.live, n_cols, y};
  pool.run_sized(down_task, &down, static_cast<size_t>(n_cols) * static_cast<size_t>(f.down.rows));
  int blocks = 0;  // block scales read (i2_s: its one tensor scale, counted as none)
  for (int n = 0; n < n_cols && f.down.type != DType::kI2_S; ++n)
    blocks += n == 0 || s.live[n] / f.down.block != s.live[n - 1] / f.down.block;
  stats->bytes_read = gate_up_bytes + static_cast<size_t>(n_cols) * f.down.col_bytes +
                      static_cast<size_t>(blocks) * static_cast<size_t>(f.down.rows) * 2;  // f16 scales as stored
}

}  // namespace mcullm
