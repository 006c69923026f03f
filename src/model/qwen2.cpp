#include "model/qwen2.h"

#include "quant/blocks.h"

namespace mcullm {

namespace {

bool is_ternary_type(const MatRef& m) { return m.type == DType::kI2_S || m.type == DType::kTL1 || m.type == DType::kTL2; }

Status check_vector(const float* v, const char* what, int layer) {
  if (!v) return Status::Error(Code::kNotFound, "%s of layer %d is missing", what, layer);
  return Status::Ok();
}

void add_bias(float* x, const float* b, int n) {
  for (int i = 0; i < n; ++i) x[i] += b[i];
}

Status check_pos(int ctx_len, int pos0, int n) {
  if (pos0 < 0 || n < 1 || pos0 > ctx_len - n)
    return Status::Error(Code::kOutOfRange, "positions %d..%d are outside the context of %d tokens", pos0, pos0 + n - 1,
                         ctx_len);
  return Status::Ok();
}

}  // namespace

Status Qwen2Model::check_shapes() const {
  const LlamaConfig& c = cfg;
  MC_TRY(c.validate());
  if (first_layer < 0 || end_layer < first_layer || end_layer > c.n_layers)
    return Status::Error(Code::kInvalidArgument, "layer range [%d, %d) is not inside the model's %d layers", first_layer,
                         end_layer, c.n_layers);
  const int d = c.dim, kv = c.kv_dim(), h = c.hidden_dim;
  if (has_embedding) MC_TRY(check_dense_matrix(tok_emb, "token embedding", -1, c.vocab_size, d));
  if (has_head) {
    MC_TRY(check_dense_matrix(output, "output head", -1, c.vocab_size, d));
    if (!out_norm) return Status::Error(Code::kNotFound, "final norm is missing");
  }
  if (end_layer > first_layer && !layers) return Status::Error(Code::kNotFound, "layers are missing");
  for (int l = first_layer; l < end_layer; ++l) {
    const Qwen2Layer& L = layer(l);
    MC_TRY(check_vector(L.attn_norm, "attn_norm", l));
    MC_TRY(check_vector(L.ffn_norm, "ffn_norm", l));
    MC_TRY(check_vector(L.bq, "attn_q bias", l));
    MC_TRY(check_vector(L.bk, "attn_k bias", l));
    MC_TRY(check_vector(L.bv, "attn_v bias", l));
    const MatRef* mats[7] = {&L.wq, &L.wk, &L.wv, &L.wo, &L.w1, &L.w2, &L.w3};
    const char* names[7] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_down", "ffn_up"};
    const int rows[7] = {d, kv, kv, d, h, d, h};
    const int cols[7] = {d, d, d, d, d, h, d};
    for (int i = 0; i < 7; ++i) {
      if (ternary) {
        MC_TRY(check_ternary_matrix(*mats[i], names[i], l, rows[i], cols[i]));
      } else {
        if (is_ternary_type(*mats[i]))
          return Status::Error(Code::kUnsupported, "%s (layer %d) is ternary and the other linear layers dense", names[i], l);
        MC_TRY(check_dense_matrix(*mats[i], names[i], l, rows[i], cols[i]));
      }
    }
  }
  return Status::Ok();
}

// ---- Qwen2Runner ----

Status Qwen2Runner::init(const Qwen2Model* model, int ctx_len, Arena& arena, ThreadPool* pool, const KernelSet* kernels,
                         KvType kv) {
  MC_TRY(model->check_shapes());
  cache_cfg_ = model->cfg;
  cache_cfg_.n_layers = model->end_layer - model->first_layer;
  MC_TRY(s_.init(cache_cfg_, ctx_len, arena, kv));
  MC_TRY(tl_lut_buffer_for_layers(model->layers, cache_cfg_.n_layers, 1, arena, &lut_));
  model_ = model;
  pool_ = pool;
  kernels_ = kernels;
  return Status::Ok();
}

Status Qwen2Runner::enable_batch(int cap, Arena& arena) {
  MC_TRY(b_.init(model_->cfg, cap, arena));
  MC_TRY(s_.reserve_stage(cap, arena));
  return tl_lut_buffer_for_layers(model_->layers, cache_cfg_.n_layers, cap, arena, &lut_batch_);
}

void Qwen2Runner::linear(const MatRef* const* mats, float* const* outs, int count, const float* x, int n) {
  if (model_->ternary)
    run_ternary_matvecs(*pool_, *kernels_, mats, outs, count, x, n, s_, lut_);
  else
    run_dense_matvecs(*pool_, *kernels_, mats, outs, count, x, n, s_.act_q, s_.act_scales);
}

void Qwen2Runner::linear_batch(const MatRef* const* mats, float* const* outs, const size_t* strides, int count,
                               const float* x, size_t x_stride, int n_vals, int n) {
  if (model_->ternary)
    run_ternary_matmats(*pool_, *kernels_, mats, outs, strides, count, x, x_stride, n_vals, n, b_, &lut_batch_);
  else
    run_dense_matmats(*pool_, *kernels_, mats, outs, strides, count, x, x_stride, n_vals, n, b_);
}

Status Qwen2Runner::embed(int token) {
  const Qwen2Model& m = *model_;
  if (!m.has_embedding) return Status::Error(Code::kInvalidArgument, "this slice holds no token embedding");
  MC_TRY(check_token_pos(m.cfg, s_.ctx_len, token, 0));
  if (!dequantize_row_any(m.tok_emb.type, m.tok_emb.row(token), s_.x, m.cfg.dim))
    return Status::Error(Code::kUnsupported, "token embedding type %u", static_cast<unsigned>(m.tok_emb.type));
  return Status::Ok();
}

Status Qwen2Runner::layers(int l0, int l1, int pos) {
  const Qwen2Model& m = *model_;
  const LlamaConfig& c = m.cfg;
  if (l0 < m.first_layer || l1 > m.end_layer || l0 > l1)
    return Status::Error(Code::kInvalidArgument, "layers [%d, %d) are not held (this part holds [%d, %d))", l0, l1,
                         m.first_layer, m.end_layer);
  MC_TRY(check_pos(s_.ctx_len, pos, 1));
  const int dim = c.dim, hs = c.head_dim(), kv_dim = c.kv_dim(), hidden = c.hidden_dim;
  const KernelSet& k = *kernels_;
  rope_angles(c.rope_theta, hs, pos, s_.rope_cos, s_.rope_sin);
  for (int l = l0; l < l1; ++l) {
    const Qwen2Layer& L = m.layer(l);
    const int cl = l - m.first_layer;  // the layer's place in this part's KV cache
    float* key = s_.new_keys(cl, pos);
    float* value = s_.new_values(cl, pos);

    rmsnorm(k, s_.xb, s_.x, L.attn_norm, dim, c.norm_eps);
    {
      const MatRef* mats[3] = {&L.wq, &L.wk, &L.wv};
      float* outs[3] = {s_.q, key, value};
      linear(mats, outs, 3, s_.xb, dim);
    }
    add_bias(s_.q, L.bq, dim);
    add_bias(key, L.bk, kv_dim);
    add_bias(value, L.bv, kv_dim);
    rope_rotate(s_.q, dim, hs, s_.rope_cos, s_.rope_sin, RopeStyle::kNeox);
    rope_rotate(key, kv_dim, hs, s_.rope_cos, s_.rope_sin, RopeStyle::kNeox);
    attend(*pool_, k, cache_cfg_, s_, cl, pos);
    {
      const MatRef* mats[1] = {&L.wo};
      float* outs[1] = {s_.xb};
      linear(mats, outs, 1, s_.att_out, dim);
    }
    for (int i = 0; i < dim; ++i) s_.x[i] += s_.xb[i];

    rmsnorm(k, s_.xb, s_.x, L.ffn_norm, dim, c.norm_eps);
    {
      const MatRef* mats[2] = {&L.w1, &L.w3};
      float* outs[2] = {s_.hb, s_.hb2};
      linear(mats, outs, 2, s_.xb, dim);
    }
    k.silu_mul(s_.hb, s_.hb2, hidden);
    {
      const MatRef* mats[1] = {&L.w2};
      float* outs[1] = {s_.xb};
      linear(mats, outs, 1, s_.hb, hidden);
    }
    for (int i = 0; i < dim; ++i) s_.x[i] += s_.xb[i];
  }
  return Status::Ok();
}

void Qwen2Runner::head() {
  const Qwen2Model& m = *model_;
  rmsnorm(*kernels_, s_.x, s_.x, m.out_norm, m.cfg.dim, m.cfg.norm_eps);
  const MatRef* mats[1] = {&m.output};
  float* outs[1] = {s_.logits};
  run_dense_matvecs(*pool_, *kernels_, mats, outs, 1, s_.x, m.cfg.dim, s_.act_q, s_.act_scales);
}

Status Qwen2Runner::embed_batch(const int* tokens, int n) {
  const Qwen2Model& m = *model_;
  if (!m.has_embedding) return Status::Error(Code::kInvalidArgument, "this slice holds no token embedding");
  if (n < 1 || n > b_.cap) return Status::Error(Code::kInvalidArgument, "a batch of %d tokens (this decoder takes 1..%d)", n, max_batch());
  const size_t D = static_cast<size_t>(m.cfg.dim);
  for (int i = 0; i < n; ++i) {
    MC_TRY(check_token_pos(m.cfg, s_.ctx_len, tokens[i], 0));
    if (!dequantize_row_any(m.tok_emb.type, m.tok_emb.row(tokens[i]), b_.x + i * D, m.cfg.dim))
      return Status::Error(Code::kUnsupported, "token embedding type %u", static_cast<unsigned>(m.tok_emb.type));
  }
  return Status::Ok();
}

// layers() for n positions at once, step for step in the same order per position (decoder.h).
Status Qwen2Runner::layers_batch(int l0, int l1, int pos0, int n) {
  const Qwen2Model& m = *model_;
  const LlamaConfig& c = m.cfg;
  if (l0 < m.first_layer || l1 > m.end_layer || l0 > l1)
    return Status::Error(Code::kInvalidArgument, "layers [%d, %d) are not held (this part holds [%d, %d))", l0, l1,
                         m.first_layer, m.end_layer);
  if (n < 1 || n > b_.cap) return Status::Error(Code::kInvalidArgument, "a batch of %d tokens (this decoder takes 1..%d)", n, max_batch());
  MC_TRY(check_pos(s_.ctx_len, pos0, n));
  const int dim = c.dim, kv_dim = c.kv_dim(), hidden = c.hidden_dim;
  const size_t D = static_cast<size_t>(dim), H = static_cast<size_t>(hidden), KV = static_cast<size_t>(kv_dim);
  const KernelSet& k = *kernels_;
  for (int l = l0; l < l1; ++l) {
    const Qwen2Layer& L = m.layer(l);
    const int cl = l - m.first_layer;
    for (int i = 0; i < n; ++i) rmsnorm(k, b_.xb + i * D, b_.x + i * D, L.attn_norm, dim, c.norm_eps);
    float* keys = s_.new_keys(cl, pos0);
    float* values = s_.new_values(cl, pos0);
    {
      const MatRef* mats[3] = {&L.wq, &L.wk, &L.wv};
      float* outs[3] = {b_.q, keys, values};
      const size_t strides[3] = {D, KV, KV};
      linear_batch(mats, outs, strides, 3, b_.xb, D, dim, n);
    }
    for (int i = 0; i < n; ++i) {
      add_bias(b_.q + i * D, L.bq, dim);
      add_bias(keys + i * KV, L.bk, kv_dim);
      add_bias(values + i * KV, L.bv, kv_dim);
    }
    rope_batch(cache_cfg_, s_, b_, cl, pos0, n, RopeStyle::kNeox);
    attend_batch(*pool_, k, cache_cfg_, s_, cl, pos0, n, b_.q, b_.att_out);
    {
      const MatRef* mats[1] = {&L.wo};
      float* outs[1] = {b_.xb};
      const size_t strides[1] = {D};
      linear_batch(mats, outs, strides, 1, b_.att_out, D, dim, n);
    }
    for (size_t i = 0; i < n * D; ++i) b_.x[i] += b_.xb[i];

    for (int i = 0; i < n; ++i) rmsnorm(k, b_.xb + i * D, b_.x + i * D, L.ffn_norm, dim, c.norm_eps);
    {
      const MatRef* mats[2] = {&L.w1, &L.w3};
      float* outs[2] = {b_.hb, b_.hb2};
      const size_t strides[2] = {H, H};
      linear_batch(mats, outs, strides, 2, b_.xb, D, dim, n);
    }
    for (int i = 0; i < n; ++i) k.silu_mul(b_.hb + i * H, b_.hb2 + i * H, hidden);
    {
      const MatRef* mats[1] = {&L.w2};
      float* outs[1] = {b_.xb};
      const size_t strides[1] = {D};
      linear_batch(mats, outs, strides, 1, b_.hb, H, hidden, n);
    }
    for (size_t i = 0; i < n * D; ++i) b_.x[i] += b_.xb[i];
  }
  return Status::Ok();
}

void Qwen2Runner::head_batch(int n) {
  mcullm::head_batch(*pool_, *kernels_, model_->cfg, model_->out_norm, model_->output, b_, n);
}

// ---- Qwen2Context ----

Status Qwen2Context::init(const Qwen2Model* model, int ctx_len, Arena& arena, ThreadPool* pool, const KernelSet* kernels,
                          KvType kv) {
  if (!model->whole())
    return Status::Error(Code::kInvalidArgument, "a decoder needs the whole model (this one holds layers [%d, %d)%s%s)",
                         model->first_layer, model->end_layer, model->has_embedding ? "" : ", no embedding",
                         model->has_head ? "" : ", no head");
  return r_.init(model, ctx_len, arena, pool, kernels, kv);
}

Status Qwen2Context::forward(int token, int pos, const float** logits) {
  MC_TRY(check_token_pos(r_.model().cfg, r_.ctx_len(), token, pos));
  MC_TRY(r_.embed(token));
  MC_TRY(r_.layers(0, r_.model().cfg.n_layers, pos));
  r_.head();
  *logits = r_.s().logits;
  return Status::Ok();
}

Status Qwen2Context::prefill(const int* tokens, int n, int pos0, const float** logits) {
  if (r_.b().cap == 0) return Decoder::prefill(tokens, n, pos0, logits);  // no batch buffers: one token
  MC_TRY(check_batch(r_.model().cfg, r_.s(), r_.b(), tokens, n, pos0));
  MC_TRY(r_.embed_batch(tokens, n));
  MC_TRY(r_.layers_batch(0, r_.model().cfg.n_layers, pos0, n));
  if (logits) {
    r_.head_batch(n);
    *logits = r_.b().logits;
  }
  return Status::Ok();
}

// ---- Qwen2Slice ----

Status Qwen2Slice::init(const Qwen2Model* model, int ctx_len, Arena& arena, ThreadPool* pool, const KernelSet* kernels,
                        KvType kv) {
  return r_.init(model, ctx_len, arena, pool, kernels, kv);
}

Status Qwen2Slice::embed(int token, float* hidden) {
  MC_TRY(r_.embed(token));
  const float* x = r_.s().x;
  for (int i = 0; i < dim(); ++i) hidden[i] = x[i];
  return Status::Ok();
}

Status Qwen2Slice::run_layers(float* hidden, int pos) {
  float* x = r_.s().x;
  for (int i = 0; i < dim(); ++i) x[i] = hidden[i];
  MC_TRY(r_.layers(first_layer(), end_layer(), pos));
  for (int i = 0; i < dim(); ++i) hidden[i] = x[i];
  return Status::Ok();
}

Status Qwen2Slice::run_layers_batch(float* hidden, int n, int pos0) {
  if (n < 1 || n > max_batch())
    return Status::Error(Code::kInvalidArgument, "a batch of %d positions (this slice takes 1..%d)", n, max_batch());
  if (n == 1) return run_layers(hidden, pos0);  // the batch path gives the same bits (tests check it)
  const size_t total = static_cast<size_t>(n) * static_cast<size_t>(dim());
  float* x = r_.b().x;
  for (size_t i = 0; i < total; ++i) x[i] = hidden[i];
  MC_TRY(r_.layers_batch(first_layer(), end_layer(), pos0, n));
  for (size_t i = 0; i < total; ++i) hidden[i] = x[i];
  return Status::Ok();
}

Status Qwen2Slice::head(const float* hidden, const float** logits) {
  if (!has_head()) return Status::Error(Code::kInvalidArgument, "this slice holds no output head");
  float* x = r_.s().x;
  for (int i = 0; i < dim(); ++i) x[i] = hidden[i];
  r_.head();
  *logits = r_.s().logits;
  return Status::Ok();
}

}  // namespace mcullm
