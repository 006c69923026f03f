#include "model/llama.h"

#include "core/fmath.h"
#include "quant/blocks.h"

namespace mcullm {

namespace {

constexpr int kMaxDim = 1 << 16;       // model width, hidden size, heads: generous but bounded
constexpr int kMaxVocab = 1 << 20;
constexpr int kMaxSeq = 1 << 20;

Status check_mat(const MatRef& m, const char* what, int layer, int rows, int cols) {
  if (!m.data) return Status::Error(Code::kNotFound, "%s (layer %d) is missing", what, layer);
  if (m.rows != rows || m.cols != cols)
    return Status::Error(Code::kCorrupt, "%s (layer %d) is %dx%d, the config implies %dx%d", what, layer, m.rows,
                         m.cols, rows, cols);
  if (!dtype_row_fits(m.type, cols) || m.row_bytes < dtype_row_bytes(m.type, cols))
    return Status::Error(Code::kCorrupt, "%s (layer %d): rows of %d weights do not fit type %u", what, layer, cols,
                         static_cast<unsigned>(m.type));
  return Status::Ok();
}

// RMSNorm: out = w * (x / sqrt(mean(x^2) + eps)); the sum of squares uses the kernels' lane order.
void rmsnorm(const KernelSet& k, float* out, const float* x, const float* w, int n, float eps) {
  float ss = k.dot_f32(x, x, n) / static_cast<float>(n) + eps;
  ss = 1.0f / mc_sqrtf(ss);
  for (int i = 0; i < n; ++i) out[i] = w[i] * (ss * x[i]);
}

}  // namespace

Status LlamaConfig::validate() const {
  if (dim <= 0 || hidden_dim <= 0 || n_layers <= 0 || n_heads <= 0 || n_kv_heads <= 0 || vocab_size <= 0 || seq_len <= 0)
    return Status::Error(Code::kCorrupt,
                         "config has a non-positive size (dim %d, hidden %d, layers %d, heads %d, kv heads %d, vocab %d, seq %d)",
                         dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len);
  if (dim > kMaxDim || hidden_dim > 4 * kMaxDim || n_layers > 1024 || n_heads > dim || vocab_size > kMaxVocab || seq_len > kMaxSeq)
    return Status::Error(Code::kUnsupported, "config sizes too large (dim %d, hidden %d, layers %d, vocab %d, seq %d)", dim,
                         hidden_dim, n_layers, vocab_size, seq_len);
  if (dim % n_heads != 0) return Status::Error(Code::kCorrupt, "dim %d is not a multiple of %d heads", dim, n_heads);
  if (n_heads % n_kv_heads != 0)
    return Status::Error(Code::kCorrupt, "%d heads are not a multiple of %d kv heads", n_heads, n_kv_heads);
  if (head_dim() % 2 != 0) return Status::Error(Code::kCorrupt, "head size %d is odd (RoPE rotates pairs)", head_dim());
  if (!(norm_eps >= 0.0f && norm_eps < 1.0f)) return Status::Error(Code::kCorrupt, "norm epsilon %g out of range", norm_eps);
  if (!(rope_theta > 1.0f && rope_theta < 1e12f)) return Status::Error(Code::kCorrupt, "rope theta %g out of range", rope_theta);
  return Status::Ok();
}

Status LlamaModel::check_shapes() const {
  MC_TRY(cfg.validate());
  const int d = cfg.dim, kv = cfg.kv_dim(), h = cfg.hidden_dim;
  MC_TRY(check_mat(tok_emb, "token embedding", -1, cfg.vocab_size, d));
  MC_TRY(check_mat(output, "output head", -1, cfg.vocab_size, d));
  if (!out_norm) return Status::Error(Code::kNotFound, "final norm is missing");
  if (!layers) return Status::Error(Code::kNotFound, "layers are missing");
  for (int l = 0; l < cfg.n_layers; ++l) {
    const LlamaLayer& L = layers[l];
    if (!L.attn_norm || !L.ffn_norm) return Status::Error(Code::kNotFound, "norm weights of layer %d are missing", l);
    MC_TRY(check_mat(L.wq, "attn_q", l, d, d));
    MC_TRY(check_mat(L.wk, "attn_k", l, kv, d));
    MC_TRY(check_mat(L.wv, "attn_v", l, kv, d));
    MC_TRY(check_mat(L.wo, "attn_output", l, d, d));
    MC_TRY(check_mat(L.w1, "ffn_gate", l, h, d));
    MC_TRY(check_mat(L.w2, "ffn_down", l, d, h));
    MC_TRY(check_mat(L.w3, "ffn_up", l, h, d));
  }
  return Status::Ok();
}

Status LlamaContext::init(const LlamaModel* model, int ctx_len, Arena& arena, ThreadPool* pool, const KernelSet* kernels) {
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
  const TensorClass act = TensorClass::kActivations;
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
  // Quantized activations: the widest input, padded to the largest block.
  act_capacity_ = (c.hidden_dim > c.dim ? c.hidden_dim : c.dim) + 64;
  MC_TRY(arena.alloc_array(act_capacity_, act, &act_q_));
  MC_TRY(arena.alloc_array(act_capacity_, act, &act_scales_));
  return Status::Ok();
}

namespace {
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
}  // namespace

namespace {
int act_block_of(const MatRef& m) {
  const DTypeInfo* info = dtype_info(m.type);
  return info ? info->act_block : 0;
}
}  // namespace

// Matrices that read the same input go out in one hand-off to the pool. Thread 0 (the caller)
// quantizes the input first when their weights are quantized; consecutive matrices that need
// different activation blocks go out separately.
void LlamaContext::run_matvecs(const MatRef* const* mats, float* const* outs, int count, const float* x, int n) {
  for (int start = 0; start < count;) {
    const int block = act_block_of(*mats[start]);
    int end = start + 1;
    while (end < count && act_block_of(*mats[end]) == block) ++end;
    act_ = ActVec();
    act_.f = x;
    if (block > 0) {
      quantize_activations(x, n, block, act_q_, act_scales_);
      act_.q = act_q_;
      act_.scales = act_scales_;
      act_.block = block;
    }
    MatvecJob job{kernels_, mats + start, outs + start, end - start, &act_};
    pool_->run(matvec_task, &job);
    start = end;
  }
}

namespace {
struct AttentionJob {
  const KernelSet* kernels;
  const LlamaConfig* cfg;
  const float* q;
  const float* key_rows;    // this layer's cache: [ctx_len, kv_dim]
  const float* value_rows;
  float* att;               // [n_heads, ctx_len]
  float* out;               // [dim]
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

}  // namespace

void LlamaContext::attention(int layer, int pos) {
  const LlamaConfig& c = model_->cfg;
  const size_t layer_off = static_cast<size_t>(layer) * static_cast<size_t>(ctx_len_) * static_cast<size_t>(c.kv_dim());
  AttentionJob job{kernels_, &c, q_, key_cache_ + layer_off, value_cache_ + layer_off, att_, att_out_, ctx_len_, pos};
  pool_->run(attention_task, &job);
}

Status LlamaContext::forward(int token, int pos, const float** logits) {
  const LlamaModel& m = *model_;
  const LlamaConfig& c = m.cfg;
  if (token < 0 || token >= c.vocab_size)
    return Status::Error(Code::kOutOfRange, "token id %d is outside the vocabulary of %d", token, c.vocab_size);
  if (pos < 0 || pos >= ctx_len_)
    return Status::Error(Code::kOutOfRange, "position %d is outside the context of %d tokens", pos, ctx_len_);
  const int dim = c.dim, hs = c.head_dim(), kv_dim = c.kv_dim(), hidden = c.hidden_dim;

  if (!dequantize_row(m.tok_emb.type, m.tok_emb.row(token), x_, dim))
    return Status::Error(Code::kUnsupported, "token embedding type %u", static_cast<unsigned>(m.tok_emb.type));

  // RoPE angles of this position, as llama2.c computes them: freq = 1 / theta^(2i / hs) in float,
  // angle = pos * freq in float, then cos / sin correctly rounded (own double routines).
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
    const LlamaLayer& L = m.layers[l];
    const size_t cache_row = (static_cast<size_t>(l) * ctx_len_ + pos) * kv_dim;
    k_ = key_cache_ + cache_row;
    v_ = value_cache_ + cache_row;

    rmsnorm(*kernels_, xb_, x_, L.attn_norm, dim, c.norm_eps);
    {
      const MatRef* mats[3] = {&L.wq, &L.wk, &L.wv};
      float* outs[3] = {q_, k_, v_};
      run_matvecs(mats, outs, 3, xb_, dim);
    }
    for (int i = 0; i < dim; i += 2) {
      const float fc = rope_cos_[(i % hs) / 2], fs = rope_sin_[(i % hs) / 2];
      const int rotations = i < kv_dim ? 2 : 1;
      for (int v = 0; v < rotations; ++v) {
        float* vec = v == 0 ? q_ : k_;
        const float v0 = vec[i], v1 = vec[i + 1];
        vec[i] = v0 * fc - v1 * fs;
        vec[i + 1] = v0 * fs + v1 * fc;
      }
    }
    attention(l, pos);
    {
      const MatRef* mats[1] = {&L.wo};
      float* outs[1] = {xb_};
      run_matvecs(mats, outs, 1, att_out_, dim);
    }
    for (int i = 0; i < dim; ++i) x_[i] += xb_[i];

    rmsnorm(*kernels_, xb_, x_, L.ffn_norm, dim, c.norm_eps);
    {
      const MatRef* mats[2] = {&L.w1, &L.w3};
      float* outs[2] = {hb_, hb2_};
      run_matvecs(mats, outs, 2, xb_, dim);
    }
    kernels_->silu_mul(hb_, hb2_, hidden);
    {
      const MatRef* mats[1] = {&L.w2};
      float* outs[1] = {xb_};
      run_matvecs(mats, outs, 1, hb_, hidden);
    }
    for (int i = 0; i < dim; ++i) x_[i] += xb_[i];
  }

  rmsnorm(*kernels_, x_, x_, m.out_norm, dim, c.norm_eps);
  {
    const MatRef* mats[1] = {&m.output};
    float* outs[1] = {logits_};
    run_matvecs(mats, outs, 1, x_, dim);
  }
  *logits = logits_;
  return Status::Ok();
}

}  // namespace mcullm
