#include "model/llama.h"

#include "kernels/ref/dot_order.h"
#include "model/sparse_ffn.h"
#include "quant/blocks.h"

namespace mcullm {

namespace {

bool name_is(const char* name, size_t len, const char* want) {
  size_t n = 0;
  while (want[n] != '\0') ++n;
  if (n != len) return false;
  for (size_t i = 0; i < n; ++i)
    if (name[i] != want[i]) return false;
  return true;
}

int act_block(const MatRef& m) {
  const DTypeInfo* info = dtype_info(m.type);
  return info ? info->act_block : 0;
}

}  // namespace

bool parse_llama_ffn(const char* name, size_t len, LlamaFfn* out) {
  if (name_is(name, len, "silu") || name_is(name, len, "swiglu")) {
    *out = LlamaFfn::kSwiglu;
    return true;
  }
  if (name_is(name, len, "relu")) {
    *out = LlamaFfn::kRelu;
    return true;
  }
  return false;
}

const char* llama_ffn_name(LlamaFfn f) { return f == LlamaFfn::kRelu ? "relu" : "silu"; }

Status llama_build_sparse_ffn(LlamaModel* m, Arena& arena) {
  if (m->ffn != LlamaFfn::kRelu) return Status::Ok();
  const int dim = m->cfg.dim, hidden = m->cfg.hidden_dim;
  for (int l = 0; l < m->cfg.n_layers; ++l) {
    LlamaLayer& L = m->layers[l];
    // The sparse FFN reads gate and up with one quantized input, and the down rows as f32.
    if (L.w2.type != DType::kF32 || L.w1.type != L.w3.type || L.w2.rows != dim || L.w2.cols != hidden) continue;
    float* t = nullptr;
    MC_TRY(arena.alloc_array(static_cast<size_t>(dim) * static_cast<size_t>(hidden), TensorClass::kFfn, &t));
    for (int d = 0; d < dim; ++d) {
      const float* row = reinterpret_cast<const float*>(L.w2.row(d));
      for (int i = 0; i < hidden; ++i) t[static_cast<size_t>(i) * dim + d] = row[i];
    }
    L.w2_t = t;
  }
  return Status::Ok();
}

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
  ffn_ = LlamaSparseFfn();
  if (model->ffn == LlamaFfn::kRelu) {
    MC_TRY(arena.alloc_array(static_cast<size_t>(model->cfg.dim) * kF32Lanes, TensorClass::kActivations, &ffn_.lanes));
    MC_TRY(arena.alloc_array(static_cast<size_t>(model->cfg.hidden_dim), TensorClass::kActivations, &ffn_.h));
    MC_TRY(arena.alloc_array(static_cast<size_t>(model->cfg.dim), TensorClass::kActivations, &ffn_.y));
  }
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

bool LlamaContext::ffn_counts(unsigned long long* neurons, unsigned long long* live) const {
  if (model_->ffn != LlamaFfn::kRelu) return false;
  *neurons = ffn_.neurons;
  *live = ffn_.live;
  return true;
}

void llama_layers(const LlamaModel& m, ThreadPool& pool, const KernelSet& k, DecoderState& s, int first, int end, int pos,
                  LlamaSparseFfn* sparse) {
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
    if (m.ffn == LlamaFfn::kRelu && sparse && sparse->enabled && sparse->lanes && L.w2_t) {
      ActVec act;
      act.f = s.xb;
      if (const int block = act_block(L.w1); block > 0) {
        quantize_activations(s.xb, dim, block, s.act_q, s.act_scales);
        act.q = s.act_q;
        act.scales = s.act_scales;
        act.block = block;
      }
      const ReluFfn f{L.w1, L.w3, L.w2, L.w2_t};
      FfnStats st;
      ffn_relu_sparse(k, f, act, s.hb, s.hb2, sparse->h, sparse->y, sparse->lanes, &st);
      sparse->neurons += static_cast<unsigned long long>(st.neurons);
      sparse->live += static_cast<unsigned long long>(st.live);
      for (int i = 0; i < dim; ++i) s.x[i] += sparse->y[i];
      continue;
    }
    {
      const MatRef* mats[2] = {&L.w1, &L.w3};
      float* outs[2] = {s.hb, s.hb2};
      dense(mats, outs, 2, s.xb, dim);
    }
    if (m.ffn == LlamaFfn::kRelu) {
      const int live = relu_mul(s.hb, s.hb2, s.hb, hidden);
      if (sparse) {
        sparse->neurons += static_cast<unsigned long long>(hidden);
        sparse->live += static_cast<unsigned long long>(live);
      }
    } else {
      k.silu_mul(s.hb, s.hb2, hidden);
    }
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
  llama_layers(m, *pool_, *kernels_, s_, 0, m.cfg.n_layers, pos, &ffn_);
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
    for (int i = 0; i < n; ++i) {
      if (m.ffn == LlamaFfn::kRelu) {
        ffn_.neurons += static_cast<unsigned long long>(hidden);
        ffn_.live += static_cast<unsigned long long>(relu_mul(b_.hb + i * H, b_.hb2 + i * H, b_.hb + i * H, hidden));
      } else {
        k.silu_mul(b_.hb + i * H, b_.hb2 + i * H, hidden);
      }
    }
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
