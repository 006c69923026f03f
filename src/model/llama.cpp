#include "model/llama.h"

#include "quant/blocks.h"

namespace mcullm {

Status LlamaModel::check_shapes() const {
  MC_TRY(cfg.validate());
  const int d = cfg.dim, kv = cfg.kv_dim(), h = cfg.hidden_dim;
  MC_TRY(check_matrix(tok_emb, "token embedding", -1, cfg.vocab_size, d));
  MC_TRY(check_matrix(output, "output head", -1, cfg.vocab_size, d));
  if (!out_norm) return Status::Error(Code::kNotFound, "final norm is missing");
  if (!layers) return Status::Error(Code::kNotFound, "layers are missing");
  for (int l = 0; l < cfg.n_layers; ++l) {
    const LlamaLayer& L = layers[l];
    if (!L.attn_norm || !L.ffn_norm) return Status::Error(Code::kNotFound, "norm weights of layer %d are missing", l);
    MC_TRY(check_matrix(L.wq, "attn_q", l, d, d));
    MC_TRY(check_matrix(L.wk, "attn_k", l, kv, d));
    MC_TRY(check_matrix(L.wv, "attn_v", l, kv, d));
    MC_TRY(check_matrix(L.wo, "attn_output", l, d, d));
    MC_TRY(check_matrix(L.w1, "ffn_gate", l, h, d));
    MC_TRY(check_matrix(L.w2, "ffn_down", l, d, h));
    MC_TRY(check_matrix(L.w3, "ffn_up", l, h, d));
  }
  return Status::Ok();
}

Status LlamaContext::init(const LlamaModel* model, int ctx_len, Arena& arena, ThreadPool* pool, const KernelSet* kernels,
                          KvType kv) {
  MC_TRY(model->check_shapes());
  MC_TRY(s_.init(model->cfg, ctx_len, arena, kv));
  model_ = model;
  pool_ = pool;
  kernels_ = kernels;
  return Status::Ok();
}

Status llama_embed(const LlamaModel& m, int token, float* hidden) {
  if (!dequantize_row(m.tok_emb.type, m.tok_emb.row(token), hidden, m.cfg.dim))
    return Status::Error(Code::kUnsupported, "token embedding type %u", static_cast<unsigned>(m.tok_emb.type));
  return Status::Ok();
}

void llama_layers(const LlamaModel& m, ThreadPool& pool, const KernelSet& k, DecoderState& s, int first, int end, int pos) {
  const LlamaConfig& c = m.cfg;
  const int dim = c.dim, hs = c.head_dim(), kv_dim = c.kv_dim(), hidden = c.hidden_dim;
  // Matrices that read the same input go out in one hand-off to the pool.
  auto dense = [&](const MatRef* const* mats, float* const* outs, int count, const float* x, int n) {
    run_dense_matvecs(pool, k, mats, outs, count, x, n, s.act_q, s.act_scales);
  };
  rope_angles(c.rope_theta, hs, pos, s.rope_cos, s.rope_sin);
  for (int l = first; l < end; ++l) {
    const LlamaLayer& L = m.layers[l];
    const int cl = l - first;  // the cache holds this range's layers only
    float* key = s.new_keys(cl, pos);
    float* value = s.new_values(cl, pos);

    rmsnorm(k, s.xb, s.x, L.attn_norm, dim, c.norm_eps);
    {
      const MatRef* mats[3] = {&L.wq, &L.wk, &L.wv};
      float* outs[3] = {s.q, key, value};
      dense(mats, outs, 3, s.xb, dim);
    }
    rope_rotate(s.q, dim, hs, s.rope_cos, s.rope_sin, RopeStyle::kAdjacent);
    rope_rotate(key, kv_dim, hs, s.rope_cos, s.rope_sin, RopeStyle::kAdjacent);
    attend(pool, k, c, s, cl, pos);
    {
      const MatRef* mats[1] = {&L.wo};
      float* outs[1] = {s.xb};
      dense(mats, outs, 1, s.att_out, dim);
    }
    for (int i = 0; i < dim; ++i) s.x[i] += s.xb[i];

    rmsnorm(k, s.xb, s.x, L.ffn_norm, dim, c.norm_eps);
    {
      const MatRef* mats[2] = {&L.w1, &L.w3};
      float* outs[2] = {s.hb, s.hb2};
      dense(mats, outs, 2, s.xb, dim);
    }
    k.silu_mul(s.hb, s.hb2, hidden);
    {
      const MatRef* mats[1] = {&L.w2};
      float* outs[1] = {s.xb};
      dense(mats, outs, 1, s.hb, hidden);
    }
    for (int i = 0; i < dim; ++i) s.x[i] += s.xb[i];
  }
}

void llama_head(const LlamaModel& m, ThreadPool& pool, const KernelSet& k, DecoderState& s) {
  rmsnorm(k, s.x, s.x, m.out_norm, m.cfg.dim, m.cfg.norm_eps);
  const MatRef* mats[1] = {&m.output};
  float* outs[1] = {s.logits};
  run_dense_matvecs(pool, k, mats, outs, 1, s.x, m.cfg.dim, s.act_q, s.act_scales);
}

Status LlamaContext::forward(int token, int pos, const float** logits) {
  const LlamaModel& m = *model_;
  MC_TRY(check_token_pos(m.cfg, s_.ctx_len, token, pos));
  MC_TRY(llama_embed(m, token, s_.x));
  llama_layers(m, *pool_, *kernels_, s_, 0, m.cfg.n_layers, pos);
  llama_head(m, *pool_, *kernels_, s_);
  *logits = s_.logits;
  return Status::Ok();
}

Status LlamaContext::enable_batch(int cap, Arena& arena) {
  MC_TRY(b_.init(model_->cfg, cap, arena));
  return s_.reserve_stage(cap, arena);
}

// forward() for n tokens at once, step for step in the same order per token (see decoder.h).
Status LlamaContext::prefill(const int* tokens, int n, int pos0, const float** logits) {
  const LlamaModel& m = *model_;
  const LlamaConfig& c = m.cfg;
  MC_TRY(check_batch(c, s_, b_, tokens, n, pos0));
  const int dim = c.dim, kv_dim = c.kv_dim(), hidden = c.hidden_dim;
  const size_t D = static_cast<size_t>(dim), H = static_cast<size_t>(hidden);
  ThreadPool& pool = *pool_;
  const KernelSet& k = *kernels_;
  auto dense = [&](const MatRef* const* mats, float* const* outs, const size_t* strides, int count, const float* x,
                   size_t x_stride, int n_vals) { run_dense_matmats(pool, k, mats, outs, strides, count, x, x_stride, n_vals, n, b_); };
  for (int i = 0; i < n; ++i)
    if (!dequantize_row(m.tok_emb.type, m.tok_emb.row(tokens[i]), b_.x + i * D, dim))
      return Status::Error(Code::kUnsupported, "token embedding type %u", static_cast<unsigned>(m.tok_emb.type));

  for (int l = 0; l < c.n_layers; ++l) {
    const LlamaLayer& L = m.layers[l];
    for (int i = 0; i < n; ++i) rmsnorm(k, b_.xb + i * D, b_.x + i * D, L.attn_norm, dim, c.norm_eps);
    {
      const MatRef* mats[3] = {&L.wq, &L.wk, &L.wv};
      float* outs[3] = {b_.q, s_.new_keys(l, pos0), s_.new_values(l, pos0)};
      const size_t strides[3] = {D, static_cast<size_t>(kv_dim), static_cast<size_t>(kv_dim)};
      dense(mats, outs, strides, 3, b_.xb, D, dim);
    }
    rope_batch(c, s_, b_, l, pos0, n, RopeStyle::kAdjacent);
    attend_batch(pool, k, c, s_, l, pos0, n, b_.q, b_.att_out);
    {
      const MatRef* mats[1] = {&L.wo};
      float* outs[1] = {b_.xb};
      const size_t strides[1] = {D};
      dense(mats, outs, strides, 1, b_.att_out, D, dim);
    }
    for (size_t i = 0; i < n * D; ++i) b_.x[i] += b_.xb[i];

    for (int i = 0; i < n; ++i) rmsnorm(k, b_.xb + i * D, b_.x + i * D, L.ffn_norm, dim, c.norm_eps);
    {
      const MatRef* mats[2] = {&L.w1, &L.w3};
      float* outs[2] = {b_.hb, b_.hb2};
      const size_t strides[2] = {H, H};
      dense(mats, outs, strides, 2, b_.xb, D, dim);
    }
    for (int i = 0; i < n; ++i) k.silu_mul(b_.hb + i * H, b_.hb2 + i * H, hidden);
    {
      const MatRef* mats[1] = {&L.w2};
      float* outs[1] = {b_.xb};
      const size_t strides[1] = {D};
      dense(mats, outs, strides, 1, b_.hb, H, hidden);
    }
    for (size_t i = 0; i < n * D; ++i) b_.x[i] += b_.xb[i];
  }
  if (logits) {
    head_batch(pool, k, c, m.out_norm, m.output, b_, n);
    *logits = b_.logits;
  }
  return Status::Ok();
}

}  // namespace mcullm
