#include "model/bitnet_llama2c.h"

#include "core/fmath.h"
#include "quant/ternary.h"

namespace mcullm {

namespace {

Status check_matrix(const MatRef& m, const char* what, int layer, int rows, int cols, DType type) {
  if (!m.data) return Status::Error(Code::kNotFound, "%s (layer %d) is missing", what, layer);
  if (m.rows != rows || m.cols != cols)
    return Status::Error(Code::kCorrupt, "%s (layer %d) is %dx%d, the config implies %dx%d", what, layer, m.rows, m.cols,
                         rows, cols);
  if (m.type != type || !dtype_row_fits(type, cols) || m.row_bytes < dtype_row_bytes(type, cols))
    return Status::Error(Code::kCorrupt, "%s (layer %d): expected %s rows of %d weights", what, layer,
                         dtype_info(type) ? dtype_info(type)->name : "?", cols);
  return Status::Ok();
}

// SimpleRMSNorm as the family's C reader computes it: scale = 1 / sqrt(sum / n), then scale / n.
void simple_rmsnorm(float* out, const float* x, int n) {
  float ss = 0.0f;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  ss /= static_cast<float>(n);
  float scale = 1.0f / mc_sqrtf(ss);
  scale /= static_cast<float>(n);
  for (int i = 0; i < n; ++i) out[i] = x[i] * scale;
}

// The learned final RMSNorm, same order of operations.
void rmsnorm(float* out, const float* x, const float* w, int n, float eps) {
  float ss = 0.0f;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  ss /= static_cast<float>(n);
  ss += eps;
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

// exp in single precision, correctly rounded but for ties closer than 2^-50 (a double exp rounded
// to float): the value the family's C reader gets from a correctly rounded expf.
float expf_rounded(float x) { return static_cast<float>(mc_exp(static_cast<double>(x))); }

// Scalar dot product in increasing index order (the C reader's order).
float dot_seq(const float* a, const float* b, int n) {
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

struct AttentionJob {
  const LlamaConfig* cfg;
  const float* q;
  const float* key_rows;    // this layer's cache: [ctx_len, kv_dim]
  const float* value_rows;
  float* att;               // [n_heads, ctx_len]
  float* out;               // [dim]
  int ctx_len;
  int pos;
};

// One scalar code path (no kernel table), heads split across threads: scores in increasing index
// order, softmax with expf_rounded, values summed in increasing position order.
void attention_task(void* p, int ith, int nth) {
  const AttentionJob& j = *static_cast<const AttentionJob*>(p);
  const int hs = j.cfg->head_dim(), kv_dim = j.cfg->kv_dim();
  const int group = j.cfg->n_heads / j.cfg->n_kv_heads;
  const float scale = mc_sqrtf(static_cast<float>(hs));
  const int n = j.pos + 1;
  int h0, h1;
  slice(j.cfg->n_heads, ith, nth, &h0, &h1);
  for (int h = h0; h < h1; ++h) {
    float* att = j.att + static_cast<size_t>(h) * j.ctx_len;
    const int kv_off = (h / group) * hs;
    const float* q = j.q + h * hs;
    for (int t = 0; t < n; ++t) att[t] = dot_seq(q, j.key_rows + static_cast<size_t>(t) * kv_dim + kv_off, hs) / scale;
    float max = att[0];
    for (int t = 1; t < n; ++t) max = att[t] > max ? att[t] : max;
    float sum = 0.0f;
    for (int t = 0; t < n; ++t) {
      att[t] = expf_rounded(att[t] - max);
      sum += att[t];
    }
    for (int t = 0; t < n; ++t) att[t] /= sum;
    float* out = j.out + h * hs;
    for (int i = 0; i < hs; ++i) out[i] = 0.0f;
    for (int t = 0; t < n; ++t) {
      const float* v = j.value_rows + static_cast<size_t>(t) * kv_dim + kv_off;
      for (int i = 0; i < hs; ++i) out[i] += att[t] * v[i];
    }
  }
}

// The f32 classifier, rows split across threads, each row in increasing index order.
struct ClassifierJob {
  const MatRef* w;
  const float* x;
  float* y;
};

void classifier_task(void* p, int ith, int nth) {
  const ClassifierJob& j = *static_cast<const ClassifierJob*>(p);
  int r0, r1;
  slice(j.w->rows, ith, nth, &r0, &r1);
  for (int r = r0; r < r1; ++r) j.y[r] = dot_seq(reinterpret_cast<const float*>(j.w->row(r)), j.x, j.w->cols);
}

}  // namespace

Status BitLlama2cModel::check_shapes() const {
  MC_TRY(cfg.validate());
  const int d = cfg.dim, kv = cfg.kv_dim(), h = cfg.hidden_dim;
  MC_TRY(check_matrix(tok_emb, "token embedding", -1, cfg.vocab_size, d, DType::kF32));
  MC_TRY(check_matrix(output, "classifier", -1, cfg.vocab_size, d, DType::kF32));
  if (!out_norm) return Status::Error(Code::kNotFound, "final norm is missing");
  if (!layers) return Status::Error(Code::kNotFound, "layers are missing");
  for (int l = 0; l < cfg.n_layers; ++l) {
    const BitLlama2cLayer& L = layers[l];
    MC_TRY(check_matrix(L.wq, "wq", l, d, d, DType::kI2_S));
    MC_TRY(check_matrix(L.wk, "wk", l, kv, d, DType::kI2_S));
    MC_TRY(check_matrix(L.wv, "wv", l, kv, d, DType::kI2_S));
    MC_TRY(check_matrix(L.wo, "wo", l, d, d, DType::kI2_S));
    MC_TRY(check_matrix(L.w1, "w1", l, h, d, DType::kI2_S));
    MC_TRY(check_matrix(L.w2, "w2", l, d, h, DType::kI2_S));
    MC_TRY(check_matrix(L.w3, "w3", l, h, d, DType::kI2_S));
  }
  return Status::Ok();
}

Status BitLlama2cContext::init(const BitLlama2cModel* model, int ctx_len, Arena& arena, ThreadPool* pool,
                               const KernelSet* kernels) {
  MC_TRY(model->check_shapes());
  const LlamaConfig& c = model->cfg;
  if (ctx_len <= 0) ctx_len = c.seq_len;
  if (ctx_len > c.seq_len)
    return Status::Error(Code::kOutOfRange, "context %d is longer than the model's %d positions", ctx_len, c.seq_len);
  model_ = model;
  pool_ = pool;
  kernels_ = kernels;
  ctx_len_ = ctx_len;
  const size_t kv_elems = static_cast<size_t>(c.n_layers) * static_cast<size_t>(ctx_len) * static_cast<size_t>(c.kv_dim());
  const int widest = c.hidden_dim > c.dim ? c.hidden_dim : c.dim;
  const TensorClass act = TensorClass::kActivations;
  MC_TRY(arena.alloc_array(c.dim, act, &x_));
  MC_TRY(arena.alloc_array(c.dim, act, &xb_));
  MC_TRY(arena.alloc_array(c.dim, act, &q_));
  MC_TRY(arena.alloc_array(c.dim, act, &att_out_));
  MC_TRY(arena.alloc_array(c.hidden_dim, act, &hb_));
  MC_TRY(arena.alloc_array(c.hidden_dim, act, &hb2_));
  MC_TRY(arena.alloc_array(widest, act, &normed_));
  MC_TRY(arena.alloc_array(static_cast<size_t>(c.n_heads) * static_cast<size_t>(ctx_len), act, &att_));
  MC_TRY(arena.alloc_array(c.head_dim() / 2, act, &rope_cos_));
  MC_TRY(arena.alloc_array(c.head_dim() / 2, act, &rope_sin_));
  MC_TRY(arena.alloc_array(c.vocab_size, act, &logits_));
  MC_TRY(arena.alloc_array(kv_elems, TensorClass::kKvCache, &key_cache_));
  MC_TRY(arena.alloc_array(kv_elems, TensorClass::kKvCache, &value_cache_));
  MC_TRY(arena.alloc_array(widest, act, &act_q_));
  return Status::Ok();
}

void BitLlama2cContext::run(const MatRef* const* mats, float* const* outs, int count, const ActVec& act) {
  MatvecJob job{kernels_, mats, outs, count, &act};
  pool_->run(matvec_task, &job);
}

// Thread 0 (the caller) normalises and quantizes; then every thread computes its rows.
void BitLlama2cContext::bitlinear(const MatRef* const* mats, float* const* outs, int count, const float* x, int n) {
  simple_rmsnorm(normed_, x, n);
  quantize_bitlinear(normed_, n, act_q_, &act_scale_);
  ActVec act;
  act.f = normed_;
  act.q = act_q_;
  act.scales = &act_scale_;
  act.block = n;
  run(mats, outs, count, act);
}

void BitLlama2cContext::attention(int layer, int pos) {
  const LlamaConfig& c = model_->cfg;
  const size_t layer_off = static_cast<size_t>(layer) * static_cast<size_t>(ctx_len_) * static_cast<size_t>(c.kv_dim());
  AttentionJob job{&c, q_, key_cache_ + layer_off, value_cache_ + layer_off, att_, att_out_, ctx_len_, pos};
  pool_->run(attention_task, &job);
}

Status BitLlama2cContext::forward(int token, int pos, const float** logits) {
  const BitLlama2cModel& m = *model_;
  const LlamaConfig& c = m.cfg;
  if (token < 0 || token >= c.vocab_size)
    return Status::Error(Code::kOutOfRange, "token id %d is outside the vocabulary of %d", token, c.vocab_size);
  if (pos < 0 || pos >= ctx_len_)
    return Status::Error(Code::kOutOfRange, "position %d is outside the context of %d tokens", pos, ctx_len_);
  const int dim = c.dim, hs = c.head_dim(), kv_dim = c.kv_dim(), hidden = c.hidden_dim;

  const float* emb = reinterpret_cast<const float*>(m.tok_emb.row(token));
  for (int i = 0; i < dim; ++i) x_[i] = emb[i];

  // RoPE angles of this position (as LlamaContext: llama2.c's formula with the project's own functions).
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
    const BitLlama2cLayer& L = m.layers[l];
    const size_t cache_row = (static_cast<size_t>(l) * ctx_len_ + pos) * kv_dim;
    float* k = key_cache_ + cache_row;
    float* v = value_cache_ + cache_row;
    {
      const MatRef* mats[3] = {&L.wq, &L.wk, &L.wv};
      float* outs[3] = {q_, k, v};
      bitlinear(mats, outs, 3, x_, dim);
    }
    for (int i = 0; i < dim; i += 2) {
      const float fc = rope_cos_[(i % hs) / 2], fs = rope_sin_[(i % hs) / 2];
      const int rotations = i < kv_dim ? 2 : 1;
      for (int r = 0; r < rotations; ++r) {
        float* vec = r == 0 ? q_ : k;
        const float v0 = vec[i], v1 = vec[i + 1];
        vec[i] = v0 * fc - v1 * fs;
        vec[i + 1] = v0 * fs + v1 * fc;
      }
    }
    attention(l, pos);
    {
      const MatRef* mats[1] = {&L.wo};
      float* outs[1] = {xb_};
      bitlinear(mats, outs, 1, att_out_, dim);
    }
    for (int i = 0; i < dim; ++i) x_[i] += xb_[i];
    {
      const MatRef* mats[2] = {&L.w1, &L.w3};
      float* outs[2] = {hb_, hb2_};
      bitlinear(mats, outs, 2, x_, dim);
    }
    for (int i = 0; i < hidden; ++i) {  // SwiGLU as the C reader writes it
      float val = hb_[i];
      val *= 1.0f / (1.0f + expf_rounded(-val));
      hb_[i] = val * hb2_[i];
    }
    {
      const MatRef* mats[1] = {&L.w2};
      float* outs[1] = {xb_};
      bitlinear(mats, outs, 1, hb_, hidden);  // the whole hidden vector (FACTS.md section 2)
    }
    for (int i = 0; i < dim; ++i) x_[i] += xb_[i];
  }

  rmsnorm(x_, x_, m.out_norm, dim, c.norm_eps);
  ClassifierJob job{&m.output, x_, logits_};
  pool_->run(classifier_task, &job);
  *logits = logits_;
  return Status::Ok();
}

}  // namespace mcullm
