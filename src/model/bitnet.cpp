#include "model/bitnet.h"

#include "core/fmath.h"
#include "quant/blocks.h"
#include "quant/ternary.h"

namespace mcullm {

namespace {

Status check_ternary(const MatRef& m, const char* what, int layer, int rows, int cols) {
  if (!m.data) return Status::Error(Code::kNotFound, "%s (layer %d) is missing", what, layer);
  if (m.rows != rows || m.cols != cols)
    return Status::Error(Code::kCorrupt, "%s (layer %d) is %dx%d, the config implies %dx%d", what, layer, m.rows, m.cols,
                         rows, cols);
  if (m.type != DType::kI2_S || !dtype_row_fits(m.type, cols) || m.row_bytes < dtype_row_bytes(m.type, cols))
    return Status::Error(Code::kUnsupported, "%s (layer %d): expected i2_s rows of %d weights (a multiple of 128)", what,
                         layer, cols);
  if (!(m.scale >= 0.0f && m.scale < 1e30f))
    return Status::Error(Code::kCorrupt, "%s (layer %d) has scale %g", what, layer, static_cast<double>(m.scale));
  return Status::Ok();
}

Status check_dense(const MatRef& m, const char* what, int rows, int cols) {
  if (!m.data) return Status::Error(Code::kNotFound, "%s is missing", what);
  if (m.rows != rows || m.cols != cols)
    return Status::Error(Code::kCorrupt, "%s is %dx%d, the config implies %dx%d", what, m.rows, m.cols, rows, cols);
  const DTypeInfo* info = dtype_info(m.type);
  const bool dense = m.type == DType::kF32 || m.type == DType::kF16 || m.type == DType::kQ8_0 || m.type == DType::kQ4_0 ||
                     m.type == DType::kQ4G64;
  if (!info || !dense || !dtype_row_fits(m.type, cols) || m.row_bytes < dtype_row_bytes(m.type, cols))
    return Status::Error(Code::kUnsupported, "%s: type %s is not read here (f32, f16, q8_0, q4_0, q4g64)", what,
                         info ? info->name : "?");
  return Status::Ok();
}

// RMSNorm with a learned weight: out = w * (x * (1 / sqrt(mean(x^2) + eps))), the sum in kernels.h's order.
void rmsnorm(const KernelSet& k, float* out, const float* x, const float* w, int n, float eps) {
  float ss = k.dot_f32(x, x, n) / static_cast<float>(n) + eps;
  ss = 1.0f / mc_sqrtf(ss);
  for (int i = 0; i < n; ++i) out[i] = w[i] * (ss * x[i]);
}

struct MatvecJob {
  const KernelSet* kernels;
  const MatRef* const* mats;
  float* const* outs;
  int count;
  const ActVec* act;
};

void matvec_task(void* p, int ith, int nth) {
  const MatvecJob& job = *static_cast<const MatvecJob*>(p);
  for (int m = 0; m < job.count; ++m) {
    int r0, r1;
    slice(job.mats[m]->rows, ith, nth, &r0, &r1);
    matvec(*job.kernels, *job.mats[m], *job.act, job.outs[m], r0, r1);
  }
}

struct AttentionJob {
  const KernelSet* kernels;
  const LlamaConfig* cfg;
  const float* q;
  const float* key_rows;  // this layer's cache: [ctx_len, kv_dim]
  const float* value_rows;
  float* att;             // [n_heads, ctx_len]
  float* out;             // [dim]
  int ctx_len;
  int pos;
};

void attention_task(void* p, int ith, int nth) {
  const AttentionJob& j = *static_cast<const AttentionJob*>(p);
  const int hs = j.cfg->head_dim(), kv_dim = j.cfg->kv_dim();
  const int group = j.cfg->n_heads / j.cfg->n_kv_heads;
  const float scale = mc_sqrtf(static_cast<float>(hs));
  int h0, h1;
  slice(j.cfg->n_heads, ith, nth, &h0, &h1);
  for (int h = h0; h < h1; ++h) {
    float* att = j.att + static_cast<size_t>(h) * j.ctx_len;
    const int kv_off = (h / group) * hs;
    j.kernels->attn_scores(j.q + h * hs, j.key_rows + kv_off, static_cast<size_t>(kv_dim), j.pos + 1, hs, scale, att);
    j.kernels->softmax(att, j.pos + 1);
    j.kernels->attn_values(att, j.value_rows + kv_off, static_cast<size_t>(kv_dim), j.pos + 1, hs, j.out + h * hs);
  }
}

// Rotates vec (n values, heads of hs) by the angles of this position.
void rope(float* vec, int n, int hs, const float* cos_, const float* sin_, RopeStyle style) {
  const int half = hs / 2;
  for (int h0 = 0; h0 < n; h0 += hs) {
    float* v = vec + h0;
    for (int i = 0; i < half; ++i) {
      const int a = style == RopeStyle::kNeox ? i : 2 * i;
      const int b = style == RopeStyle::kNeox ? i + half : 2 * i + 1;
      const float v0 = v[a], v1 = v[b];
      v[a] = v0 * cos_[i] - v1 * sin_[i];
      v[b] = v0 * sin_[i] + v1 * cos_[i];
    }
  }
}

}  // namespace

Status BitnetModel::check_shapes() const {
  const LlamaConfig& c = cfg.base;
  MC_TRY(c.validate());
  if (cfg.ffn != BitnetFfn::kSilu && cfg.ffn != BitnetFfn::kReluSqr) return Status::Error(Code::kUnsupported, "unknown FFN activation");
  if (cfg.rope != RopeStyle::kNeox && cfg.rope != RopeStyle::kAdjacent) return Status::Error(Code::kUnsupported, "unknown RoPE style");
  const int d = c.dim, kv = c.kv_dim(), h = c.hidden_dim;
  MC_TRY(check_dense(tok_emb, "token embedding", c.vocab_size, d));
  MC_TRY(check_dense(output, "output head", c.vocab_size, d));
  if (!out_norm) return Status::Error(Code::kNotFound, "final norm is missing");
  if (!layers) return Status::Error(Code::kNotFound, "layers are missing");
  for (int l = 0; l < c.n_layers; ++l) {
    const BitnetLayer& L = layers[l];
    if (!L.attn_norm || !L.attn_sub_norm || !L.ffn_norm || !L.ffn_sub_norm)
      return Status::Error(Code::kNotFound, "norm weights of layer %d are missing", l);
    MC_TRY(check_ternary(L.wq, "attn_q", l, d, d));
    MC_TRY(check_ternary(L.wk, "attn_k", l, kv, d));
    MC_TRY(check_ternary(L.wv, "attn_v", l, kv, d));
    MC_TRY(check_ternary(L.wo, "attn_output", l, d, d));
    MC_TRY(check_ternary(L.w1, "ffn_gate", l, h, d));
    MC_TRY(check_ternary(L.w2, "ffn_down", l, d, h));
    MC_TRY(check_ternary(L.w3, "ffn_up", l, h, d));
  }
  return Status::Ok();
}

Status BitnetContext::init(const BitnetModel* model, int ctx_len, Arena& arena, ThreadPool* pool, const KernelSet* kernels) {
  MC_TRY(model->check_shapes());
  const LlamaConfig& c = model->cfg.base;
  if (ctx_len <= 0) ctx_len = c.seq_len;
  if (ctx_len > c.seq_len)
    return Status::Error(Code::kOutOfRange, "context %d is longer than the model's %d positions", ctx_len, c.seq_len);
  model_ = model;
  pool_ = pool;
  kernels_ = kernels;
  ctx_len_ = ctx_len;
  const size_t kv_elems = static_cast<size_t>(c.n_layers) * static_cast<size_t>(ctx_len) * static_cast<size_t>(c.kv_dim());
  const TensorClass act = TensorClass::kActivations;
  const int widest = c.hidden_dim > c.dim ? c.hidden_dim : c.dim;
  MC_TRY(arena.alloc_array(c.dim, act, &x_));
  MC_TRY(arena.alloc_array(c.dim, act, &xb_));
  MC_TRY(arena.alloc_array(c.dim, act, &q_));
  MC_TRY(arena.alloc_array(c.dim, act, &att_out_));
  MC_TRY(arena.alloc_array(c.hidden_dim, act, &hb_));
  MC_TRY(arena.alloc_array(c.hidden_dim, act, &hb2_));
  MC_TRY(arena.alloc_array(static_cast<size_t>(c.n_heads) * static_cast<size_t>(ctx_len), act, &att_));
  MC_TRY(arena.alloc_array(c.head_dim() / 2, act, &rope_cos_));
  MC_TRY(arena.alloc_array(c.head_dim() / 2, act, &rope_sin_));
  MC_TRY(arena.alloc_array(c.vocab_size, act, &logits_));
  MC_TRY(arena.alloc_array(kv_elems, TensorClass::kKvCache, &key_cache_));
  MC_TRY(arena.alloc_array(kv_elems, TensorClass::kKvCache, &value_cache_));
  MC_TRY(arena.alloc_array(widest, act, &act_q_));
  MC_TRY(arena.alloc_array(c.dim + 64, act, &head_q_));
  MC_TRY(arena.alloc_array(c.dim + 64, act, &head_scales_));
  return Status::Ok();
}

void BitnetContext::ternary(const MatRef* const* mats, float* const* outs, int count, const float* x, int n) {
  quantize_i8s(x, n, act_q_, &act_scale_);
  ActVec a;
  a.f = x;
  a.q = act_q_;
  a.scales = &act_scale_;
  MatvecJob job{kernels_, mats, outs, count, &a};
  pool_->run(matvec_task, &job);
}

void BitnetContext::attention(int layer, int pos) {
  const LlamaConfig& c = model_->cfg.base;
  const size_t layer_off = static_cast<size_t>(layer) * static_cast<size_t>(ctx_len_) * static_cast<size_t>(c.kv_dim());
  AttentionJob job{kernels_, &c, q_, key_cache_ + layer_off, value_cache_ + layer_off, att_, att_out_, ctx_len_, pos};
  pool_->run(attention_task, &job);
}

Status BitnetContext::forward(int token, int pos, const float** logits) {
  const BitnetModel& m = *model_;
  const LlamaConfig& c = m.cfg.base;
  if (token < 0 || token >= c.vocab_size)
    return Status::Error(Code::kOutOfRange, "token id %d is outside the vocabulary of %d", token, c.vocab_size);
  if (pos < 0 || pos >= ctx_len_)
    return Status::Error(Code::kOutOfRange, "position %d is outside the context of %d tokens", pos, ctx_len_);
  const int dim = c.dim, hs = c.head_dim(), kv_dim = c.kv_dim(), hidden = c.hidden_dim;

  if (!dequantize_row_any(m.tok_emb.type, m.tok_emb.row(token), x_, dim))
    return Status::Error(Code::kUnsupported, "token embedding type %u", static_cast<unsigned>(m.tok_emb.type));

  // RoPE angles: freq_i = 1 / theta^(2i / hs), the same computation as the llama model.
  const double log_theta = mc_log(static_cast<double>(c.rope_theta));
  for (int i = 0; i < hs / 2; ++i) {
    const float e = static_cast<float>(2 * i) / static_cast<float>(hs);
    const float freq = 1.0f / static_cast<float>(mc_exp(log_theta * static_cast<double>(e)));
    const float angle = static_cast<float>(pos) * freq;
    double s, co;
    mc_sincos(static_cast<double>(angle), &s, &co);
    rope_cos_[i] = static_cast<float>(co);
    rope_sin_[i] = static_cast<float>(s);
  }

  for (int l = 0; l < c.n_layers; ++l) {
    const BitnetLayer& L = m.layers[l];
    const size_t cache_row = (static_cast<size_t>(l) * ctx_len_ + pos) * kv_dim;
    float* k = key_cache_ + cache_row;
    float* v = value_cache_ + cache_row;

    rmsnorm(*kernels_, xb_, x_, L.attn_norm, dim, c.norm_eps);
    {
      const MatRef* mats[3] = {&L.wq, &L.wk, &L.wv};
      float* outs[3] = {q_, k, v};
      ternary(mats, outs, 3, xb_, dim);
    }
    rope(q_, dim, hs, rope_cos_, rope_sin_, m.cfg.rope);
    rope(k, kv_dim, hs, rope_cos_, rope_sin_, m.cfg.rope);
    attention(l, pos);
    rmsnorm(*kernels_, att_out_, att_out_, L.attn_sub_norm, dim, c.norm_eps);
    {
      const MatRef* mats[1] = {&L.wo};
      float* outs[1] = {xb_};
      ternary(mats, outs, 1, att_out_, dim);
    }
    for (int i = 0; i < dim; ++i) x_[i] += xb_[i];

    rmsnorm(*kernels_, xb_, x_, L.ffn_norm, dim, c.norm_eps);
    {
      const MatRef* mats[2] = {&L.w1, &L.w3};
      float* outs[2] = {hb_, hb2_};
      ternary(mats, outs, 2, xb_, dim);
    }
    if (m.cfg.ffn == BitnetFfn::kSilu) {
      kernels_->silu_mul(hb_, hb2_, hidden);
    } else {
      for (int i = 0; i < hidden; ++i) {
        const float g = hb_[i] > 0.0f ? hb_[i] : 0.0f;
        hb_[i] = (g * g) * hb2_[i];
      }
    }
    rmsnorm(*kernels_, hb_, hb_, L.ffn_sub_norm, hidden, c.norm_eps);
    {
      const MatRef* mats[1] = {&L.w2};
      float* outs[1] = {xb_};
      ternary(mats, outs, 1, hb_, hidden);
    }
    for (int i = 0; i < dim; ++i) x_[i] += xb_[i];
  }

  rmsnorm(*kernels_, x_, x_, m.out_norm, dim, c.norm_eps);
  ActVec a;
  a.f = x_;
  const DTypeInfo* info = dtype_info(m.output.type);
  if (info && info->act_block > 0) {
    quantize_activations(x_, dim, info->act_block, head_q_, head_scales_);
    a.q = head_q_;
    a.scales = head_scales_;
    a.block = info->act_block;
  }
  const MatRef* mats[1] = {&m.output};
  float* outs[1] = {logits_};
  MatvecJob job{kernels_, mats, outs, 1, &a};
  pool_->run(matvec_task, &job);
  *logits = logits_;
  return Status::Ok();
}

}  // namespace mcullm
