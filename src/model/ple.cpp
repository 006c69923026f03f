#include "model/ple.h"

#include <string.h>

#include "core/fmath.h"
#include "model/sparse_ffn.h"
#include "quant/q4e.h"

namespace mcullm {

namespace {

// Slices of 16 values whose maxima the split scale pass keeps (inputs up to 16 x this wide).
constexpr int kQuantMaxParts = 512;
// Cost weight for run_slices (multiply-add equivalents) of one dequantized q4e value and its glue.
constexpr size_t kDequantWork = 4;

Status check_q4e(const MatRef& m, const char* what, int layer, int rows, int cols) {
  MC_TRY(check_matrix(m, what, layer, rows, cols));
  if (m.type != DType::kQ4E || m.group <= 0 || !m.scales)
    return Status::Error(Code::kUnsupported, "%s (layer %d): the PLE model reads esp32-ai int4 tensors", what, layer);
  return Status::Ok();
}

// Rows [r0, r0 + n) of a q4e matrix as a matrix of their own.
MatRef q4e_rows(const MatRef& m, int r0, int n) {
  MatRef v = m;
  v.data = m.row(r0);
  v.scales = m.scales + static_cast<size_t>(r0) * static_cast<size_t>(q4e_groups(m.cols, m.group)) * 2;
  v.rows = n;
  return v;
}

}  // namespace

Status PleConfig::validate() const {
  if (input_vocab <= 0 || output_vocab <= 0 || dim <= 0 || n_layers <= 0 || n_heads <= 0 || ffn <= 0 || ple_dim <= 0 ||
      seq_len <= 0)
    return Status::Error(Code::kCorrupt,
                         "PLE config has a non-positive size (vocab %d/%d, dim %d, layers %d, heads %d, ffn %d, ple %d, seq %d)",
                         input_vocab, output_vocab, dim, n_layers, n_heads, ffn, ple_dim, seq_len);
  if (dim > (1 << 16) || ffn > (1 << 18) || ple_dim > (1 << 16) || n_layers > 256 || input_vocab > (1 << 20) ||
      output_vocab > (1 << 20) || seq_len > (1 << 20) || static_cast<int64_t>(n_layers) * ple_dim > (1 << 20))
    return Status::Error(Code::kUnsupported, "PLE config sizes too large (dim %d, ffn %d, ple %d, layers %d, vocab %d, seq %d)",
                         dim, ffn, ple_dim, n_layers, input_vocab, seq_len);
  if (dim % n_heads != 0) return Status::Error(Code::kCorrupt, "dim %d is not a multiple of %d heads", dim, n_heads);
  if (head_dim() % 2 != 0) return Status::Error(Code::kCorrupt, "head size %d is odd (RoPE rotates pairs)", head_dim());
  if (tied_head && output_vocab > input_vocab)
    return Status::Error(Code::kCorrupt, "tied head of %d rows reads an embedding of %d", output_vocab, input_vocab);
  if (!(rope_theta > 1.0f && rope_theta < 1e12f)) return Status::Error(Code::kCorrupt, "rope theta %g out of range", rope_theta);
  return Status::Ok();
}

LlamaConfig PleConfig::base() const {
  LlamaConfig c;
  c.dim = dim;
  c.hidden_dim = ffn;
  c.n_layers = n_layers;
  c.n_heads = c.n_kv_heads = n_heads;
  c.vocab_size = output_vocab;
  c.seq_len = seq_len;
  c.norm_eps = norm_eps;
  c.rope_theta = rope_theta;
  return c;
}

void PleModel::split_qkv() {
  for (int l = 0; l < cfg.n_layers; ++l) {
    PleLayer& L = layers[l];
    L.wq = q4e_rows(L.qkv, 0, cfg.dim);
    L.wk = q4e_rows(L.qkv, cfg.dim, cfg.dim);
    L.wv = q4e_rows(L.qkv, 2 * cfg.dim, cfg.dim);
  }
}

Status PleModel::check_shapes() const {
  MC_TRY(cfg.validate());
  const int V = cfg.input_vocab, D = cfg.dim, LP = cfg.n_layers * cfg.ple_dim, P = cfg.ple_dim, F = cfg.ffn;
  MC_TRY(check_q4e(tok_emb, "tok_emb", -1, V, D));
  MC_TRY(check_q4e(ple_model_proj, "ple_model_proj", -1, LP, D));
  MC_TRY(check_q4e(ple_table, "ple_table", -1, V, LP));
  MC_TRY(check_q4e(output, "head", -1, cfg.output_vocab, D));
  if (!ple_proj_norm || !out_norm || !layers) return Status::Error(Code::kNotFound, "PLE model tables are missing");
  for (int l = 0; l < cfg.n_layers; ++l) {
    const PleLayer& L = layers[l];
    if (!L.attn_norm || !L.ffn_norm || !L.ple_norm) return Status::Error(Code::kNotFound, "norms of layer %d are missing", l);
    MC_TRY(check_q4e(L.qkv, "qkv", l, 3 * D, D));
    if (L.wq.data != L.qkv.data || L.wv.rows != D) return Status::Error(Code::kInternal, "qkv of layer %d is not split", l);
    MC_TRY(check_q4e(L.attn_proj, "attn_proj", l, D, D));
    MC_TRY(check_q4e(L.gate, "gate", l, F, D));
    MC_TRY(check_q4e(L.up, "up", l, F, D));
    MC_TRY(check_q4e(L.down, "down", l, D, F));
    MC_TRY(check_q4e(L.ple_gate, "ple_gate", l, P, D));
    MC_TRY(check_q4e(L.ple_proj, "ple_proj", l, D, P));
  }
  return Status::Ok();
}

Status ple_build_sparse_ffn(PleModel* m, Arena& arena) {
  if (!m->cfg.relu_ffn) return Status::Ok();
  for (int l = 0; l < m->cfg.n_layers; ++l) MC_TRY(build_down_cols(m->layers[l].down, arena, &m->layers[l].down_cols));
  return Status::Ok();
}

Status PleContext::init(const PleModel* model, int ctx_len, Arena& arena, ThreadPool* pool, const KernelSet* kernels,
                        bool f32_activations, KvType kv) {
  MC_TRY(model->check_shapes());
  const PleConfig& c = model->cfg;
  model_ = model;
  base_ = c.base();
  pool_ = pool;
  kernels_ = kernels;
  f32_act_ = f32_activations;
  MC_TRY(s_.init(base_, ctx_len, arena, kv));
  b_.view(base_, s_);
  widest_ = c.dim + 64 > c.ffn ? c.dim + 64 : c.ffn;
  widest_ = widest_ > c.ple_dim ? widest_ : c.ple_dim;
  MC_TRY(arena.alloc_array(c.n_layers * c.ple_dim, TensorClass::kActivations, &row_));
  MC_TRY(alloc_columns(1, arena));
  ffn_h_ = nullptr;
  ffn_live_ = nullptr;
  if (c.relu_ffn) {  // gate first (the down columns where built, else the down rows)
    MC_TRY(arena.alloc_array(c.ffn, TensorClass::kActivations, &ffn_h_));
    MC_TRY(arena.alloc_array(c.ffn, TensorClass::kActivations, &ffn_live_));
  }
  ffn_ = FfnCounts();
  return Status::Ok();
}

Status PleContext::alloc_columns(int cap, Arena& arena) {
  const PleConfig& c = model_->cfg;
  const size_t n = static_cast<size_t>(cap);
  const TensorClass act = TensorClass::kActivations;
  MC_TRY(arena.alloc_array(n * static_cast<size_t>(c.ple_dim), act, &gate_));
  MC_TRY(arena.alloc_array(n * static_cast<size_t>(c.n_layers * c.ple_dim), act, &ple_));
  MC_TRY(arena.alloc_array(n * static_cast<size_t>(widest_), act, &act_q_));
  return arena.alloc_array(n + static_cast<size_t>(widest_), act, &act_scales_);
}

Status PleContext::enable_batch(int cap, Arena& arena) {
  MC_TRY(b_.init(base_, cap, arena));
  MC_TRY(s_.reserve_stage(cap, arena));
  return alloc_columns(cap, arena);
}

Status PleContext::set_head(const HeadChoice& c, Arena& arena) {
  return apply_head_choice(c, model_->output, arena, &head_rows_, &head_);
}

bool PleContext::ffn_counts(FfnCounts* counts) const {
  if (!model_->cfg.relu_ffn) return false;
  *counts = ffn_;
  return true;
}

void PleContext::run(const MatRef* const* mats, float* const* outs, const size_t* strides, int count, const float* x,
                     size_t x_stride, int n_vals, int n) {
  ActMat act;
  act.f = x;
  act.f_stride = x_stride;
  if (!f32_act_) {
    const size_t w = static_cast<size_t>(widest_);
    const size_t work = static_cast<size_t>(n_vals) * kElementWork;
    for (int i = 0; i < n; ++i) {  // each column's scale, then its int8 values, both split over the pool
      const float* xi = x + i * x_stride;
      int8_t* qi = act_q_ + i * w;
      // The max of each slice at its first granule (the others stay 0: |x| >= 0, and the max of
      // maxima is the max, exactly), then the largest of them on this thread.
      float part[kQuantMaxParts];
      float xmax = kQ4eActivationMaxFloor;
      if (n_vals <= 16 * kQuantMaxParts) {
        const int parts = (n_vals + 15) / 16;
        for (int p = 0; p < parts; ++p) part[p] = 0.0f;
        run_slices(*pool_, n_vals, 16, work, [&](int b, int e) { part[b / 16] = kernels_->q4e_activations_max(xi + b, e - b); });
        for (int p = 0; p < parts; ++p) xmax = part[p] > xmax ? part[p] : xmax;
      } else {
        xmax = kernels_->q4e_activations_max(xi, n_vals);
      }
      act_scales_[i] = xmax / 127.0f;
      run_slices(*pool_, n_vals, 16, work, [&](int b, int e) { kernels_->q4e_quantize_with(xi + b, e - b, xmax, qi + b); });
    }
    act.q = act_q_;
    act.q_stride = w;
    act.scales = act_scales_;
    act.s_stride = 1;
    act.block = n_vals;
  }
  run_matmats(*pool_, *kernels_, mats, outs, strides, count, act, n);
}

// One token's FFN gate first (model/sparse_ffn.h), its output added to x; false where it cannot run.
bool PleContext::sparse_ffn(const PleLayer& Ly) {
  if (!model_->cfg.relu_ffn || !sparse_on_ || f32_act_ || !gate_first_down_type(Ly.down.type) || !ffn_h_) return false;
  const int D = model_->cfg.dim;
  // x quantized once (as run() does) for gate and up; h's quantization goes to the same buffers after.
  ActVec act;
  act.f = b_.xb;
  q4e_quantize_activations(*kernels_, b_.xb, D, act_q_, act_scales_);
  act.q = act_q_;
  act.scales = act_scales_;
  act.block = D;
  const ReluFfnQ f{Ly.gate, Ly.up, Ly.down_cols, Ly.down, sparse_max_live_};
  const FfnScratchQ sc{b_.hb, b_.hb2, ffn_h_, act_q_, act_scales_, ffn_live_};
  FfnStats st;
  ffn_relu_sparse_q(*pool_, *kernels_, f, act, sc, b_.xb, &st);
  ffn_.neurons += static_cast<unsigned long long>(st.neurons);
  ffn_.live += static_cast<unsigned long long>(st.live);
  ffn_.skipped += static_cast<unsigned long long>(st.skipped);
  for (int i = 0; i < D; ++i) b_.x[i] += b_.xb[i];
  return true;
}

Status PleContext::forward(int token, int pos, const float** logits) { return prefill(&token, 1, pos, logits); }

// The one layer loop, for any n: per column the same float operations in the same order.
Status PleContext::prefill(const int* tokens, int n, int pos0, const float** logits) {
  const PleModel& m = *model_;
  const PleConfig& c = m.cfg;
  if (n < 1 || n > max_batch())
    return Status::Error(Code::kInvalidArgument, "a batch of %d tokens (this decoder takes 1..%d)", n, max_batch());
  for (int i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= c.input_vocab)
      return Status::Error(Code::kOutOfRange, "token id %d is outside the vocabulary of %d", tokens[i], c.input_vocab);
  }
  if (pos0 < 0 || pos0 > s_.ctx_len - n)
    return Status::Error(Code::kOutOfRange, "positions %d..%d are outside the context of %d tokens", pos0, pos0 + n - 1,
                         s_.ctx_len);
  const int D = c.dim, L = c.n_layers, P = c.ple_dim, F = c.ffn, hs = c.head_dim();
  const size_t Dz = static_cast<size_t>(D), Fz = static_cast<size_t>(F), Pz = static_cast<size_t>(P);
  const size_t LP = static_cast<size_t>(L) * Pz;
  const size_t nD = static_cast<size_t>(n) * Dz;
  const KernelSet& k = *kernels_;
  float *const x = b_.x, *const xb = b_.xb;

  for (int i = 0; i < n; ++i)  // the embedding row, split by columns
    run_slices(*pool_, D, 16, Dz * kDequantWork, [&](int b, int e) { q4e_dequantize_cols(m.tok_emb, tokens[i], b, e, x + i * Dz + b); });

  // Per-layer inputs: (RMSNorm(proj(x) / sqrt(D)) + table[token] * sqrt(P)) / sqrt(2).
  run1(m.ple_model_proj, ple_, LP, x, Dz, D, n);
  const float dscale = 1.0f / mc_sqrtf(static_cast<float>(D));
  const float sp = mc_sqrtf(static_cast<float>(P)), inv2 = 0.70710678f;
  for (int i = 0; i < n; ++i) {  // layer by layer, split over the pool: each layer's P values are on their own
    float* ple = ple_ + i * LP;
    run_slices(*pool_, L, 1, LP * kDequantWork, [&](int b, int e) {
      for (int l = b; l < e; ++l) {
        float *const p = ple + l * Pz, *const row = row_ + l * Pz;
        for (size_t j = 0; j < Pz; ++j) p[j] *= dscale;
        rmsnorm(k, p, p, m.ple_proj_norm, P, c.norm_eps);
        q4e_dequantize_cols(m.ple_table, tokens[i], l * P, (l + 1) * P, row);  // this layer's part of the token's table row
        for (size_t j = 0; j < Pz; ++j) p[j] = (p[j] + row[j] * sp) * inv2;
      }
    });
  }

  auto norm = [&](float* out, const float* in, const float* w) {
    for (int i = 0; i < n; ++i) rmsnorm(k, out + i * Dz, in + i * Dz, w, D, c.norm_eps);
  };
  for (int l = 0; l < L; ++l) {
    const PleLayer& Ly = m.layers[l];
    float* keys = s_.new_keys(l, pos0);
    float* values = s_.new_values(l, pos0);
    norm(xb, x, Ly.attn_norm);
    {
      const MatRef* mats[3] = {&Ly.wq, &Ly.wk, &Ly.wv};  // the fused QKV, one hand-off
      float* outs[3] = {b_.q, keys, values};
      const size_t strides[3] = {Dz, Dz, Dz};
      run(mats, outs, strides, 3, xb, Dz, D, n);
    }
    rope_rotate_batch(*pool_, RopeColumns{b_.q, D, Dz, keys, D, Dz}, hs, n, s_.rope_cos_at(pos0), s_.rope_sin_at(pos0),
                      RopeStyle::kNeox);  // split-half pairs
    attend(*pool_, k, base_, s_, l, pos0, n, b_.q, b_.att_out);
    run1(Ly.attn_proj, xb, Dz, b_.att_out, Dz, D, n);
    for (size_t i = 0; i < nD; ++i) x[i] += xb[i];

    norm(xb, x, Ly.ffn_norm);
    if (n > 1 || !sparse_ffn(Ly)) {
      {
        const MatRef* mats[2] = {&Ly.gate, &Ly.up};
        float* outs[2] = {b_.hb, b_.hb2};
        const size_t strides[2] = {Fz, Fz};
        run(mats, outs, strides, 2, xb, Dz, D, n);
      }
      if (c.relu_ffn) {
        for (int i = 0; i < n; ++i) {
          float *g = b_.hb + i * Fz, *u = b_.hb2 + i * Fz;
          ffn_.live += static_cast<unsigned long long>(relu_mul(g, u, g, F));
          ffn_.neurons += static_cast<unsigned long long>(F);
        }
      } else {  // the n columns are contiguous: one split of n * F values
        float *g = b_.hb, *u = b_.hb2;
        run_slices(*pool_, n * F, 16, static_cast<size_t>(n) * Fz * kElementWork,
                   [&](int b, int e) { k.silu_mul(g + b, u + b, e - b); });
      }
      run1(Ly.down, xb, Dz, b_.hb, Fz, F, n);
      for (size_t i = 0; i < nD; ++i) x[i] += xb[i];
    }

    // PLE gate: x += RMSNorm(ple_proj(gelu(ple_gate(x)) * ple_l)).
    run1(Ly.ple_gate, gate_, Pz, x, Dz, D, n);
    run_slices(*pool_, n * P, 16, static_cast<size_t>(n) * Pz * kElementWork, [&](int b, int e) {
      for (int t = b; t < e; ++t) {
        const int i = t / P, j = t % P;
        gate_[t] = mc_gelu_erf(gate_[t]) * ple_[i * LP + l * Pz + static_cast<size_t>(j)];
      }
    });
    run1(Ly.ple_proj, xb, Dz, gate_, Pz, P, n);
    norm(xb, xb, Ly.ple_norm);
    for (size_t i = 0; i < nD; ++i) x[i] += xb[i];
  }
  if (!logits) return Status::Ok();

  norm(x, x, m.out_norm);
  const size_t V = static_cast<size_t>(c.output_vocab);
  head_visit_.n = -1;
  if (head_.grouped()) {
    for (int i = 0; i < n; ++i)  // column by column: each the bits of a single token's head
      grouped_head_logits(*pool_, k, head_, x + i * Dz, D, f32_act_, act_q_, act_scales_, head_rows_, b_.logits + i * V,
                          &head_visit_);
  } else {
    run1(m.output, b_.logits, V, x, Dz, D, n);
  }
  *logits = b_.logits;
  return Status::Ok();
}

}  // namespace mcullm
