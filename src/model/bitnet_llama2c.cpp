#include "model/bitnet_llama2c.h"

#include "core/fmath.h"
#include "quant/ternary.h"

namespace mcullm {

namespace {

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
void rmsnorm_seq(float* out, const float* x, const float* w, int n, float eps) {
  float ss = 0.0f;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  ss /= static_cast<float>(n);
  ss += eps;
  ss = 1.0f / mc_sqrtf(ss);
  for (int i = 0; i < n; ++i) out[i] = w[i] * (ss * x[i]);
}

// Scalar dot product in increasing index order (the C reader's order).
float dot_seq(const float* a, const float* b, int n) {
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// One scalar code path (no kernel table), heads split across threads: scores in increasing index
// order, softmax with mc_expf_rounded (the C reader's correctly rounded expf), values summed in
// increasing position order.
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
      att[t] = mc_expf_rounded(att[t] - max);
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

// The scalar paths read f32 rows in place: they must be 4-byte aligned.
static Status check_f32_matrix(const MatRef& m, const char* what, int rows, int cols) {
  MC_TRY(check_matrix(m, what, -1, rows, cols));
  if (m.type != DType::kF32) return Status::Error(Code::kCorrupt, "%s: expected f32 rows of %d weights", what, cols);
  if (reinterpret_cast<uintptr_t>(m.data) % 4 != 0 || m.row_bytes % 4 != 0)
    return Status::Error(Code::kCorrupt, "%s is not 4-byte aligned", what);
  return Status::Ok();
}

Status BitLlama2cModel::check_shapes() const {
  MC_TRY(cfg.validate());
  const int d = cfg.dim, kv = cfg.kv_dim(), h = cfg.hidden_dim;
  MC_TRY(check_f32_matrix(tok_emb, "token embedding", cfg.vocab_size, d));
  MC_TRY(check_f32_matrix(output, "classifier", cfg.vocab_size, d));
  if (!out_norm) return Status::Error(Code::kNotFound, "final norm is missing");
  if (!layers) return Status::Error(Code::kNotFound, "layers are missing");
  for (int l = 0; l < cfg.n_layers; ++l) {
    const BitLlama2cLayer& L = layers[l];
    MC_TRY(check_ternary_matrix(L.wq, "wq", l, d, d));
    MC_TRY(check_ternary_matrix(L.wk, "wk", l, kv, d));
    MC_TRY(check_ternary_matrix(L.wv, "wv", l, kv, d));
    MC_TRY(check_ternary_matrix(L.wo, "wo", l, d, d));
    MC_TRY(check_ternary_matrix(L.w1, "w1", l, h, d));
    MC_TRY(check_ternary_matrix(L.w2, "w2", l, d, h));
    MC_TRY(check_ternary_matrix(L.w3, "w3", l, h, d));
  }
  return Status::Ok();
}

Status BitLlama2cContext::init(const BitLlama2cModel* model, int ctx_len, Arena& arena, ThreadPool* pool,
                               const KernelSet* kernels, KvType kv) {
  MC_TRY(model->check_shapes());
  const LlamaConfig& c = model->cfg;
  MC_TRY(s_.init(c, ctx_len, arena, kv));
  MC_TRY(arena.alloc_array(c.hidden_dim > c.dim ? c.hidden_dim : c.dim, TensorClass::kActivations, &normed_));
  MC_TRY(tl_lut_buffer_for_layers(model->layers, c.n_layers, 1, arena, &lut_));
  model_ = model;
  pool_ = pool;
  kernels_ = kernels;
  return Status::Ok();
}

// Thread 0 (the caller) normalises and quantizes; then every thread computes its rows.
void BitLlama2cContext::bitlinear(const MatRef* const* mats, float* const* outs, int count, const float* x, int n) {
  simple_rmsnorm(normed_, x, n);
  quantize_bitlinear(normed_, n, s_.act_q, s_.act_scales);
  if (!lut_.empty()) {
    run_ternary_q(*pool_, *kernels_, mats, outs, nullptr, count, s_.act_q, 0, s_.act_scales, 1, lut_);
    return;
  }
  ActVec act;
  act.f = normed_;
  act.q = s_.act_q;
  act.scales = s_.act_scales;
  act.block = n;
  run_matvecs(*pool_, *kernels_, mats, outs, count, act);
}

void BitLlama2cContext::attention(int layer, int pos) {
  if (s_.kv_type != KvType::kF32) return attend(*pool_, *kernels_, model_->cfg, s_, layer, pos, 1, s_.q, s_.att_out);
  AttentionJob job = attention_job(nullptr, model_->cfg, s_, layer, pos);  // no kernel table: scalar sums
  pool_->run(attention_task, &job);
}

Status BitLlama2cContext::forward(int token, int pos, const float** logits) {
  const BitLlama2cModel& m = *model_;
  const LlamaConfig& c = m.cfg;
  MC_TRY(check_token_pos(c, s_.ctx_len, token, pos));
  const int dim = c.dim, hs = c.head_dim(), kv_dim = c.kv_dim(), hidden = c.hidden_dim;
  float* x = s_.x;

  const float* emb = reinterpret_cast<const float*>(m.tok_emb.row(token));
  for (int i = 0; i < dim; ++i) x[i] = emb[i];

  for (int l = 0; l < c.n_layers; ++l) {
    const BitLlama2cLayer& L = m.layers[l];
    float* key = s_.new_keys(l, pos);
    float* value = s_.new_values(l, pos);
    {
      const MatRef* mats[3] = {&L.wq, &L.wk, &L.wv};
      float* outs[3] = {s_.q, key, value};
      bitlinear(mats, outs, 3, x, dim);
    }
    rope_rotate_batch(*pool_, RopeColumns{s_.q, dim, 0, key, kv_dim, 0}, hs, 1, s_.rope_cos_at(pos), s_.rope_sin_at(pos),
                      RopeStyle::kAdjacent);
    attention(l, pos);
    {
      const MatRef* mats[1] = {&L.wo};
      float* outs[1] = {s_.xb};
      bitlinear(mats, outs, 1, s_.att_out, dim);
    }
    for (int i = 0; i < dim; ++i) x[i] += s_.xb[i];
    {
      const MatRef* mats[2] = {&L.w1, &L.w3};
      float* outs[2] = {s_.hb, s_.hb2};
      bitlinear(mats, outs, 2, x, dim);
    }
    for (int i = 0; i < hidden; ++i) {  // SwiGLU as the C reader writes it
      float val = s_.hb[i];
      val *= 1.0f / (1.0f + mc_expf_rounded(-val));
      s_.hb[i] = val * s_.hb2[i];
    }
    {
      const MatRef* mats[1] = {&L.w2};
      float* outs[1] = {s_.xb};
      bitlinear(mats, outs, 1, s_.hb, hidden);  // the whole hidden vector (FACTS.md section 2)
    }
    for (int i = 0; i < dim; ++i) x[i] += s_.xb[i];
  }

  rmsnorm_seq(x, x, m.out_norm, dim, c.norm_eps);
  ClassifierJob job{&m.output, x, s_.logits};
  pool_->run(classifier_task, &job);
  *logits = s_.logits;
  return Status::Ok();
}

}  // namespace mcullm
