#include "model/bitnet.h"

#include "quant/blocks.h"
#include "quant/ternary.h"

namespace mcullm {

namespace {
// gate = act(gate) * up: SiLU (SwiGLU) or squared ReLU (bitnet-25).
void ffn_activation(const KernelSet& k, BitnetFfn ffn, float* gate, const float* up, int hidden) {
  if (ffn == BitnetFfn::kSilu) {
    k.silu_mul(gate, up, hidden);
    return;
  }
  for (int i = 0; i < hidden; ++i) {
    const float g = gate[i] > 0.0f ? gate[i] : 0.0f;
    gate[i] = (g * g) * up[i];
  }
}
}  // namespace

Status BitnetModel::check_shapes() const {
  const LlamaConfig& c = cfg.base;
  MC_TRY(c.validate());
  if (cfg.ffn != BitnetFfn::kSilu && cfg.ffn != BitnetFfn::kReluSqr) return Status::Error(Code::kUnsupported, "unknown FFN activation");
  if (cfg.rope != RopeStyle::kNeox && cfg.rope != RopeStyle::kAdjacent) return Status::Error(Code::kUnsupported, "unknown RoPE style");
  const int d = c.dim, kv = c.kv_dim(), h = c.hidden_dim;
  MC_TRY(check_dense_matrix(tok_emb, "token embedding", -1, c.vocab_size, d));
  MC_TRY(check_dense_matrix(output, "output head", -1, c.vocab_size, d));
  if (!out_norm) return Status::Error(Code::kNotFound, "final norm is missing");
  if (!layers) return Status::Error(Code::kNotFound, "layers are missing");
  for (int l = 0; l < c.n_layers; ++l) {
    const BitnetLayer& L = layers[l];
    if (!L.attn_norm || !L.attn_sub_norm || !L.ffn_norm || !L.ffn_sub_norm)
      return Status::Error(Code::kNotFound, "norm weights of layer %d are missing", l);
    MC_TRY(check_ternary_matrix(L.wq, "attn_q", l, d, d));
    MC_TRY(check_ternary_matrix(L.wk, "attn_k", l, kv, d));
    MC_TRY(check_ternary_matrix(L.wv, "attn_v", l, kv, d));
    MC_TRY(check_ternary_matrix(L.wo, "attn_output", l, d, d));
    MC_TRY(check_ternary_matrix(L.w1, "ffn_gate", l, h, d));
    MC_TRY(check_ternary_matrix(L.w2, "ffn_down", l, d, h));
    MC_TRY(check_ternary_matrix(L.w3, "ffn_up", l, h, d));
  }
  return Status::Ok();
}

Status BitnetContext::init(const BitnetModel* model, int ctx_len, Arena& arena, ThreadPool* pool, const KernelSet* kernels,
                           KvType kv) {
  MC_TRY(model->check_shapes());
  MC_TRY(s_.init(model->cfg.base, ctx_len, arena, kv));
  MC_TRY(tl_lut_buffer_for_layers(model->layers, model->cfg.base.n_layers, 1, arena, &lut_));
  model_ = model;
  pool_ = pool;
  kernels_ = kernels;
  return Status::Ok();
}

void BitnetContext::ternary(const MatRef* const* mats, float* const* outs, int count, const float* x, int n) {
  run_ternary_matvecs(*pool_, *kernels_, mats, outs, count, x, n, s_, lut_);
}

Status BitnetContext::forward(int token, int pos, const float** logits) {
  const BitnetModel& m = *model_;
  const LlamaConfig& c = m.cfg.base;
  MC_TRY(check_token_pos(c, s_.ctx_len, token, pos));
  const int dim = c.dim, hs = c.head_dim(), kv_dim = c.kv_dim(), hidden = c.hidden_dim;
  const KernelSet& k = *kernels_;

  if (!dequantize_row_any(m.tok_emb.type, m.tok_emb.row(token), s_.x, dim))
    return Status::Error(Code::kUnsupported, "token embedding type %u", static_cast<unsigned>(m.tok_emb.type));
  rope_angles(c.rope_theta, hs, pos, s_.rope_cos, s_.rope_sin);

  for (int l = 0; l < c.n_layers; ++l) {
    const BitnetLayer& L = m.layers[l];
    float* key = s_.new_keys(l, pos);
    float* value = s_.new_values(l, pos);

    rmsnorm(k, s_.xb, s_.x, L.attn_norm, dim, c.norm_eps);
    {
      const MatRef* mats[3] = {&L.wq, &L.wk, &L.wv};
      float* outs[3] = {s_.q, key, value};
      ternary(mats, outs, 3, s_.xb, dim);
    }
    rope_rotate(s_.q, dim, hs, s_.rope_cos, s_.rope_sin, m.cfg.rope);
    rope_rotate(key, kv_dim, hs, s_.rope_cos, s_.rope_sin, m.cfg.rope);
    attend(*pool_, k, c, s_, l, pos);
    rmsnorm(k, s_.att_out, s_.att_out, L.attn_sub_norm, dim, c.norm_eps);
    {
      const MatRef* mats[1] = {&L.wo};
      float* outs[1] = {s_.xb};
      ternary(mats, outs, 1, s_.att_out, dim);
    }
    for (int i = 0; i < dim; ++i) s_.x[i] += s_.xb[i];

    rmsnorm(k, s_.xb, s_.x, L.ffn_norm, dim, c.norm_eps);
    {
      const MatRef* mats[2] = {&L.w1, &L.w3};
      float* outs[2] = {s_.hb, s_.hb2};
      ternary(mats, outs, 2, s_.xb, dim);
    }
    ffn_activation(k, m.cfg.ffn, s_.hb, s_.hb2, hidden);
    rmsnorm(k, s_.hb, s_.hb, L.ffn_sub_norm, hidden, c.norm_eps);
    {
      const MatRef* mats[1] = {&L.w2};
      float* outs[1] = {s_.xb};
      ternary(mats, outs, 1, s_.hb, hidden);
    }
    for (int i = 0; i < dim; ++i) s_.x[i] += s_.xb[i];
  }

  rmsnorm(k, s_.x, s_.x, m.out_norm, dim, c.norm_eps);
  const MatRef* mats[1] = {&m.output};
  float* outs[1] = {s_.logits};
  run_dense_matvecs(*pool_, k, mats, outs, 1, s_.x, dim, s_.act_q, s_.act_scales);
  *logits = s_.logits;
  return Status::Ok();
}

Status BitnetContext::enable_batch(int cap, Arena& arena) {
  MC_TRY(b_.init(model_->cfg.base, cap, arena));
  MC_TRY(s_.reserve_stage(cap, arena));
  return tl_lut_buffer_for_layers(model_->layers, model_->cfg.base.n_layers, cap, arena, &lut_batch_);
}

// forward() for n tokens at once, step for step in the same order per token (see decoder.h).
Status BitnetContext::prefill(const int* tokens, int n, int pos0, const float** logits) {
  const BitnetModel& m = *model_;
  const LlamaConfig& c = m.cfg.base;
  MC_TRY(check_batch(c, s_, b_, tokens, n, pos0));
  const int dim = c.dim, kv_dim = c.kv_dim(), hidden = c.hidden_dim;
  const size_t D = static_cast<size_t>(dim), H = static_cast<size_t>(hidden);
  const KernelSet& k = *kernels_;
  ThreadPool& pool = *pool_;
  for (int i = 0; i < n; ++i)
    if (!dequantize_row_any(m.tok_emb.type, m.tok_emb.row(tokens[i]), b_.x + i * D, dim))
      return Status::Error(Code::kUnsupported, "token embedding type %u", static_cast<unsigned>(m.tok_emb.type));
  auto norm_all = [&](float* out, const float* x, const float* w, int width) {
    for (int i = 0; i < n; ++i) rmsnorm(k, out + i * static_cast<size_t>(width), x + i * static_cast<size_t>(width), w, width, c.norm_eps);
  };

  for (int l = 0; l < c.n_layers; ++l) {
    const BitnetLayer& L = m.layers[l];
    norm_all(b_.xb, b_.x, L.attn_norm, dim);
    {
      const MatRef* mats[3] = {&L.wq, &L.wk, &L.wv};
      float* outs[3] = {b_.q, s_.new_keys(l, pos0), s_.new_values(l, pos0)};
      const size_t strides[3] = {D, static_cast<size_t>(kv_dim), static_cast<size_t>(kv_dim)};
      run_ternary_matmats(pool, k, mats, outs, strides, 3, b_.xb, D, dim, n, b_, &lut_batch_);
    }
    rope_batch(c, s_, b_, l, pos0, n, m.cfg.rope);
    attend_batch(pool, k, c, s_, l, pos0, n, b_.q, b_.att_out);
    norm_all(b_.att_out, b_.att_out, L.attn_sub_norm, dim);
    {
      const MatRef* mats[1] = {&L.wo};
      float* outs[1] = {b_.xb};
      const size_t strides[1] = {D};
      run_ternary_matmats(pool, k, mats, outs, strides, 1, b_.att_out, D, dim, n, b_, &lut_batch_);
    }
    for (size_t i = 0; i < n * D; ++i) b_.x[i] += b_.xb[i];

    norm_all(b_.xb, b_.x, L.ffn_norm, dim);
    {
      const MatRef* mats[2] = {&L.w1, &L.w3};
      float* outs[2] = {b_.hb, b_.hb2};
      const size_t strides[2] = {H, H};
      run_ternary_matmats(pool, k, mats, outs, strides, 2, b_.xb, D, dim, n, b_, &lut_batch_);
    }
    for (int i = 0; i < n; ++i) ffn_activation(k, m.cfg.ffn, b_.hb + i * H, b_.hb2 + i * H, hidden);
    norm_all(b_.hb, b_.hb, L.ffn_sub_norm, hidden);
    {
      const MatRef* mats[1] = {&L.w2};
      float* outs[1] = {b_.xb};
      const size_t strides[1] = {D};
      run_ternary_matmats(pool, k, mats, outs, strides, 1, b_.hb, H, hidden, n, b_, &lut_batch_);
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
