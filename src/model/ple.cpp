#include "model/ple.h"

#include <string.h>

#include "core/fmath.h"
#include "model/sparse_ffn.h"
#include "quant/q4e.h"

namespace mcullm {

namespace {

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
  const int LP = c.n_layers * c.ple_dim;
  int widest = c.dim > c.ffn ? c.dim : c.ffn;
  widest = widest > c.ple_dim ? widest : c.ple_dim;
  MC_TRY(arena.alloc_array(c.ple_dim, TensorClass::kActivations, &gate_));
  MC_TRY(arena.alloc_array(LP, TensorClass::kActivations, &ple_));
  MC_TRY(arena.alloc_array(LP, TensorClass::kActivations, &row_));
  MC_TRY(arena.alloc_array(widest, TensorClass::kActivations, &act_q_));
  ffn_h_ = nullptr;
  ffn_live_ = nullptr;
  bool any_cols = false;  // a layer whose down matrix could not be column-stored runs dense
  for (int l = 0; l < c.n_layers; ++l) any_cols = any_cols || model->layers[l].down_cols.w;
  if (c.relu_ffn && any_cols) {
    MC_TRY(arena.alloc_array(c.ffn, TensorClass::kActivations, &ffn_h_));
    MC_TRY(arena.alloc_array(c.ffn, TensorClass::kActivations, &ffn_live_));
  }
  ffn_ = FfnCounts();
  return Status::Ok();
}

Status PleContext::set_head(const HeadChoice& c, Arena& arena) {
  return apply_head_choice(c, model_->output, arena, &head_rows_, &head_);
}

bool PleContext::ffn_counts(FfnCounts* counts) const {
  if (!model_->cfg.relu_ffn) return false;
  *counts = ffn_;
  return true;
}

void PleContext::run(const MatRef* const* mats, float* const* outs, int count, const float* x, int n) {
  ActVec act;
  act.f = x;
  if (!f32_act_) {
    q4e_quantize_activations(x, n, act_q_, &act_scale_);
    act.q = act_q_;
    act.scales = &act_scale_;
    act.block = n;
  }
  run_matvecs(*pool_, *kernels_, mats, outs, count, act);
}

Status PleContext::forward(int token, int pos, const float** logits) {
  const PleModel& m = *model_;
  const PleConfig& c = m.cfg;
  if (token < 0 || token >= c.input_vocab)
    return Status::Error(Code::kOutOfRange, "token id %d is outside the vocabulary of %d", token, c.input_vocab);
  MC_TRY(check_token_pos(base_, s_.ctx_len, 0, pos));
  const int D = c.dim, L = c.n_layers, P = c.ple_dim, F = c.ffn, hs = c.head_dim();
  const KernelSet& k = *kernels_;

  q4e_dequantize_row(m.tok_emb, token, s_.x);

  // Per-layer inputs: (RMSNorm(proj(x) / sqrt(D)) + table[token] * sqrt(P)) / sqrt(2).
  {
    const MatRef* mats[1] = {&m.ple_model_proj};
    float* outs[1] = {ple_};
    run(mats, outs, 1, s_.x, D);
  }
  const float dscale = 1.0f / mc_sqrtf(static_cast<float>(D));
  for (int i = 0; i < L * P; ++i) ple_[i] *= dscale;
  for (int l = 0; l < L; ++l) rmsnorm(k, ple_ + l * P, ple_ + l * P, m.ple_proj_norm, P, c.norm_eps);
  q4e_dequantize_row(m.ple_table, token, row_);  // the one table row this token reads
  const float sp = mc_sqrtf(static_cast<float>(P)), inv2 = 0.70710678f;
  for (int i = 0; i < L * P; ++i) ple_[i] = (ple_[i] + row_[i] * sp) * inv2;

  rope_angles(c.rope_theta, hs, pos, s_.rope_cos, s_.rope_sin);
  for (int l = 0; l < L; ++l) {
    const PleLayer& Ly = m.layers[l];
    float* key = s_.new_keys(l, pos);
    float* value = s_.new_values(l, pos);
    rmsnorm(k, s_.xb, s_.x, Ly.attn_norm, D, c.norm_eps);
    {
      const MatRef* mats[3] = {&Ly.wq, &Ly.wk, &Ly.wv};  // the fused QKV, one hand-off
      float* outs[3] = {s_.q, key, value};
      run(mats, outs, 3, s_.xb, D);
    }
    rope_rotate(s_.q, D, hs, s_.rope_cos, s_.rope_sin, RopeStyle::kNeox);  // split-half pairs
    rope_rotate(key, D, hs, s_.rope_cos, s_.rope_sin, RopeStyle::kNeox);
    attend(*pool_, k, base_, s_, l, pos, 1, s_.q, s_.att_out);
    {
      const MatRef* mats[1] = {&Ly.attn_proj};
      float* outs[1] = {s_.xb};
      run(mats, outs, 1, s_.att_out, D);
    }
    for (int i = 0; i < D; ++i) s_.x[i] += s_.xb[i];

    rmsnorm(k, s_.xb, s_.x, Ly.ffn_norm, D, c.norm_eps);
    if (c.relu_ffn && sparse_on_ && !f32_act_ && Ly.down_cols.w && ffn_h_) {
      // Gate first: x quantized once (as run() does) for gate and up; the FFN output lands in xb.
      ActVec act;
      act.f = s_.xb;
      q4e_quantize_activations(s_.xb, D, act_q_, &act_scale_);
      act.q = act_q_;
      act.scales = &act_scale_;
      act.block = D;
      const ReluFfnQ f{Ly.gate, Ly.up, Ly.down_cols, Ly.down, sparse_max_live_};
      // act_q_ / act_scale_ hold x until the gate and up rows are done; h's go to the same buffers after.
      const FfnScratchQ sc{s_.hb, s_.hb2, ffn_h_, act_q_, &act_scale_, ffn_live_};
      FfnStats st;
      ffn_relu_sparse_q(*pool_, k, f, act, sc, s_.xb, &st);
      ffn_.neurons += static_cast<unsigned long long>(st.neurons);
      ffn_.live += static_cast<unsigned long long>(st.live);
      ffn_.skipped += static_cast<unsigned long long>(st.skipped);
    } else {
      const MatRef* mats[2] = {&Ly.gate, &Ly.up};
      float* outs[2] = {s_.hb, s_.hb2};
      run(mats, outs, 2, s_.xb, D);
      if (c.relu_ffn) {
        ffn_.live += static_cast<unsigned long long>(relu_mul(s_.hb, s_.hb2, s_.hb, F));
        ffn_.neurons += static_cast<unsigned long long>(F);
      } else {
        k.silu_mul(s_.hb, s_.hb2, F);
      }
      const MatRef* down[1] = {&Ly.down};
      float* dout[1] = {s_.xb};
      run(down, dout, 1, s_.hb, F);
    }
    for (int i = 0; i < D; ++i) s_.x[i] += s_.xb[i];

    // PLE gate: x += RMSNorm(ple_proj(gelu(ple_gate(x)) * ple_l)).
    {
      const MatRef* mats[1] = {&Ly.ple_gate};
      float* outs[1] = {gate_};
      run(mats, outs, 1, s_.x, D);
    }
    for (int i = 0; i < P; ++i) gate_[i] = mc_gelu_erf(gate_[i]) * ple_[l * P + i];
    {
      const MatRef* mats[1] = {&Ly.ple_proj};
      float* outs[1] = {s_.xb};
      run(mats, outs, 1, gate_, P);
    }
    rmsnorm(k, s_.xb, s_.xb, Ly.ple_norm, D, c.norm_eps);
    for (int i = 0; i < D; ++i) s_.x[i] += s_.xb[i];
  }

  rmsnorm(k, s_.x, s_.x, m.out_norm, D, c.norm_eps);
  if (head_.grouped()) {
    grouped_head_logits(k, head_, s_.x, D, f32_act_, act_q_, &act_scale_, head_rows_, s_.logits);
  } else {
    const MatRef* mats[1] = {&m.output};
    float* outs[1] = {s_.logits};
    run(mats, outs, 1, s_.x, D);
  }
  *logits = s_.logits;
  return Status::Ok();
}

}  // namespace mcullm
