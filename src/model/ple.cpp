#include "model/ple.h"

#include <string.h>

#include "core/fmath.h"
#include "quant/q4e.h"

namespace mcullm {

namespace {

Status check_q4e(const MatRef& m, const char* what, int layer, int rows, int cols) {
  if (!m.data || !m.scales) return Status::Error(Code::kNotFound, "%s (layer %d) is missing", what, layer);
  if (m.type != DType::kQ4E || m.group <= 0)
    return Status::Error(Code::kUnsupported, "%s (layer %d): the PLE model reads esp32-ai int4 tensors", what, layer);
  if (m.rows != rows || m.cols != cols)
    return Status::Error(Code::kCorrupt, "%s (layer %d) is %dx%d, the config implies %dx%d", what, layer, m.rows, m.cols,
                         rows, cols);
  return Status::Ok();
}

// esp32-ai's RMSNorm, in its order: sum of squares in increasing i, out = (w * x) * (1 / sqrt(ss / n + eps)).
void rmsnorm_seq(float* out, const float* x, const float* w, int n, float eps) {
  float ss = 0.0f;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / mc_sqrtf(ss / static_cast<float>(n) + eps);
  for (int i = 0; i < n; ++i) out[i] = w[i] * x[i] * inv;
}

// Split-half RoPE: pairs (i, i + hs / 2) of every head.
void rope_split_half(float* v, int n_heads, int hs, const float* cs, const float* sn) {
  const int half = hs / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* p = v + h * hs;
    for (int i = 0; i < half; ++i) {
      const float a = p[i], b = p[i + half];
      p[i] = a * cs[i] - b * sn[i];
      p[i + half] = b * cs[i] + a * sn[i];
    }
  }
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
    MC_TRY(check_q4e(L.attn_proj, "attn_proj", l, D, D));
    MC_TRY(check_q4e(L.gate, "gate", l, F, D));
    MC_TRY(check_q4e(L.up, "up", l, F, D));
    MC_TRY(check_q4e(L.down, "down", l, D, F));
    MC_TRY(check_q4e(L.ple_gate, "ple_gate", l, P, D));
    MC_TRY(check_q4e(L.ple_proj, "ple_proj", l, D, P));
  }
  return Status::Ok();
}

Status PleContext::init(const PleModel* model, int ctx_len, Arena& arena, ThreadPool* pool, const KernelSet* kernels,
                        bool f32_activations) {
  MC_TRY(model->check_shapes());
  const PleConfig& c = model->cfg;
  if (ctx_len <= 0) ctx_len = c.seq_len;
  if (ctx_len > c.seq_len)
    return Status::Error(Code::kOutOfRange, "context %d is longer than the model's %d positions", ctx_len, c.seq_len);
  model_ = model;
  pool_ = pool;
  kernels_ = kernels;
  f32_act_ = f32_activations;
  ctx_len_ = ctx_len;
  const int D = c.dim, F = c.ffn, LP = c.n_layers * c.ple_dim, P = c.ple_dim;
  const int wide = F > D ? F : D;
  const TensorClass act = TensorClass::kActivations;
  const size_t kv = static_cast<size_t>(c.n_layers) * static_cast<size_t>(ctx_len) * static_cast<size_t>(D);
  MC_TRY(arena.alloc_array(D, act, &x_));
  MC_TRY(arena.alloc_array(wide, act, &h_));
  MC_TRY(arena.alloc_array(3 * D, act, &qkv_));
  MC_TRY(arena.alloc_array(D, act, &att_out_));
  MC_TRY(arena.alloc_array(F, act, &g1_));
  MC_TRY(arena.alloc_array(F > P ? F : P, act, &g2_));
  MC_TRY(arena.alloc_array(LP, act, &ple_));
  MC_TRY(arena.alloc_array(LP, act, &row_));
  MC_TRY(arena.alloc_array(c.head_dim() / 2, act, &rope_cos_));
  MC_TRY(arena.alloc_array(c.head_dim() / 2, act, &rope_sin_));
  MC_TRY(arena.alloc_array(static_cast<size_t>(c.n_heads) * static_cast<size_t>(ctx_len), act, &att_));
  MC_TRY(arena.alloc_array(c.output_vocab, act, &logits_));
  MC_TRY(arena.alloc_array(kv, TensorClass::kKvCache, &key_cache_));
  MC_TRY(arena.alloc_array(kv, TensorClass::kKvCache, &value_cache_));
  MC_TRY(arena.alloc_array(wide > P ? wide : P, act, &act_q_));
  return Status::Ok();
}

namespace {
struct PleMatvecJob {
  const KernelSet* kernels;
  const MatRef* mats[2];
  float* outs[2];
  int count;
  const ActVec* act;
};

void ple_matvec_task(void* p, int ith, int nth) {
  const PleMatvecJob& job = *static_cast<const PleMatvecJob*>(p);
  for (int m = 0; m < job.count; ++m) {
    int r0, r1;
    slice(job.mats[m]->rows, ith, nth, &r0, &r1);
    matvec(*job.kernels, *job.mats[m], *job.act, job.outs[m], r0, r1);
  }
}
}  // namespace

// One or two matrices reading the same input, split by rows among the pool's threads.
void PleContext::run_matvec2(const MatRef& a, const MatRef& b, const float* x, float* ya, float* yb) {
  ActVec act;
  act.f = x;
  if (!f32_act_) {
    q4e_quantize_activations(x, a.cols, act_q_, &act_scale_);
    act.q = act_q_;
    act.scales = &act_scale_;
    act.block = a.cols;
  }
  PleMatvecJob job{kernels_, {&a, &b}, {ya, yb}, yb ? 2 : 1, &act};
  pool_->run(ple_matvec_task, &job);
}

void PleContext::run_matvec(const MatRef& w, const float* x, float* y) { run_matvec2(w, w, x, y, nullptr); }

namespace {
struct PleAttentionJob {
  const KernelSet* kernels;
  const float* q;
  const float* keys;    // this layer's cache [ctx_len, dim]
  const float* values;
  float* att;
  float* out;
  int n_heads, hs, dim, ctx_len, pos;
};

void ple_attention_task(void* p, int ith, int nth) {
  const PleAttentionJob& j = *static_cast<const PleAttentionJob*>(p);
  const float scale = mc_sqrtf(static_cast<float>(j.hs));
  int h0, h1;
  slice(j.n_heads, ith, nth, &h0, &h1);
  for (int h = h0; h < h1; ++h) {
    float* att = j.att + static_cast<size_t>(h) * j.ctx_len;
    j.kernels->attn_scores(j.q + h * j.hs, j.keys + h * j.hs, static_cast<size_t>(j.dim), j.pos + 1, j.hs, scale, att);
    j.kernels->softmax(att, j.pos + 1);
    j.kernels->attn_values(att, j.values + h * j.hs, static_cast<size_t>(j.dim), j.pos + 1, j.hs, j.out + h * j.hs);
  }
}
}  // namespace

void PleContext::attention(int layer, int pos) {
  const PleConfig& c = model_->cfg;
  const size_t off = static_cast<size_t>(layer) * static_cast<size_t>(ctx_len_) * static_cast<size_t>(c.dim);
  PleAttentionJob job{kernels_, qkv_, key_cache_ + off, value_cache_ + off, att_, att_out_, c.n_heads, c.head_dim(),
                      c.dim, ctx_len_, pos};
  pool_->run(ple_attention_task, &job);
}

Status PleContext::forward(int token, int pos, const float** logits) {
  const PleModel& m = *model_;
  const PleConfig& c = m.cfg;
  if (token < 0 || token >= c.input_vocab)
    return Status::Error(Code::kOutOfRange, "token id %d is outside the vocabulary of %d", token, c.input_vocab);
  if (pos < 0 || pos >= ctx_len_)
    return Status::Error(Code::kOutOfRange, "position %d is outside the context of %d tokens", pos, ctx_len_);
  const int D = c.dim, L = c.n_layers, P = c.ple_dim, F = c.ffn, hs = c.head_dim();

  q4e_dequantize_row(m.tok_emb, token, x_);

  // Per-layer inputs: (RMSNorm(proj(x) / sqrt(D)) + table[token] * sqrt(P)) / sqrt(2).
  run_matvec(m.ple_model_proj, x_, ple_);
  const float dscale = 1.0f / mc_sqrtf(static_cast<float>(D));
  for (int i = 0; i < L * P; ++i) ple_[i] *= dscale;
  for (int l = 0; l < L; ++l) rmsnorm_seq(ple_ + l * P, ple_ + l * P, m.ple_proj_norm, P, c.norm_eps);
  q4e_dequantize_row(m.ple_table, token, row_);  // the one table row this token reads
  const float sp = mc_sqrtf(static_cast<float>(P)), inv2 = 0.70710678f;
  for (int i = 0; i < L * P; ++i) ple_[i] = (ple_[i] + row_[i] * sp) * inv2;

  // RoPE angles: freq = theta^(-2i / hs) rounded to float, angle = pos * freq in float.
  const double log_theta = mc_log(static_cast<double>(c.rope_theta));
  for (int i = 0; i < hs / 2; ++i) {
    const float e = -2.0f * static_cast<float>(i) / static_cast<float>(hs);
    const float freq = static_cast<float>(mc_exp(log_theta * static_cast<double>(e)));
    double s, co;
    mc_sincos(static_cast<double>(static_cast<float>(pos) * freq), &s, &co);
    rope_cos_[i] = static_cast<float>(co);
    rope_sin_[i] = static_cast<float>(s);
  }

  for (int l = 0; l < L; ++l) {
    const PleLayer& Ly = m.layers[l];
    rmsnorm_seq(h_, x_, Ly.attn_norm, D, c.norm_eps);
    run_matvec(Ly.qkv, h_, qkv_);
    float* q = qkv_;
    float* k = qkv_ + D;
    const float* v = qkv_ + 2 * D;
    rope_split_half(q, c.n_heads, hs, rope_cos_, rope_sin_);
    rope_split_half(k, c.n_heads, hs, rope_cos_, rope_sin_);
    const size_t row = (static_cast<size_t>(l) * static_cast<size_t>(ctx_len_) + static_cast<size_t>(pos)) * static_cast<size_t>(D);
    memcpy(key_cache_ + row, k, static_cast<size_t>(D) * 4);
    memcpy(value_cache_ + row, v, static_cast<size_t>(D) * 4);
    attention(l, pos);
    run_matvec(Ly.attn_proj, att_out_, h_);
    for (int i = 0; i < D; ++i) x_[i] += h_[i];

    rmsnorm_seq(h_, x_, Ly.ffn_norm, D, c.norm_eps);
    run_matvec2(Ly.gate, Ly.up, h_, g1_, g2_);
    kernels_->silu_mul(g1_, g2_, F);
    run_matvec(Ly.down, g1_, h_);
    for (int i = 0; i < D; ++i) x_[i] += h_[i];

    // PLE gate: x += RMSNorm(ple_proj(gelu(ple_gate(x)) * ple_l)).
    run_matvec(Ly.ple_gate, x_, g2_);
    for (int i = 0; i < P; ++i) g2_[i] = mc_gelu_erf(g2_[i]) * ple_[l * P + i];
    run_matvec(Ly.ple_proj, g2_, h_);
    rmsnorm_seq(h_, h_, Ly.ple_norm, D, c.norm_eps);
    for (int i = 0; i < D; ++i) x_[i] += h_[i];
  }

  rmsnorm_seq(x_, x_, m.out_norm, D, c.norm_eps);
  run_matvec(m.output, x_, logits_);
  *logits = logits_;
  return Status::Ok();
}

}  // namespace mcullm
