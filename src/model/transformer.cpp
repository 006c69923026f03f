#include "model/transformer.h"

#include "core/fmath.h"
#include "quant/blocks.h"

namespace mcullm {

namespace {
constexpr int kMaxDim = 1 << 16;  // model width, hidden size, heads: generous but bounded
constexpr int kMaxVocab = 1 << 20;
constexpr int kMaxSeq = 1 << 20;
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

Status check_matrix(const MatRef& m, const char* what, int layer, int rows, int cols) {
  if (!m.data) return Status::Error(Code::kNotFound, "%s (layer %d) is missing", what, layer);
  if (m.rows != rows || m.cols != cols)
    return Status::Error(Code::kCorrupt, "%s (layer %d) is %dx%d, the config implies %dx%d", what, layer, m.rows, m.cols,
                         rows, cols);
  if (!dtype_row_fits(m.type, cols) || m.row_bytes < dtype_row_bytes(m.type, cols))
    return Status::Error(Code::kCorrupt, "%s (layer %d): rows of %d weights do not fit type %u", what, layer, cols,
                         static_cast<unsigned>(m.type));
  return Status::Ok();
}

Status check_dense_matrix(const MatRef& m, const char* what, int layer, int rows, int cols) {
  MC_TRY(check_matrix(m, what, layer, rows, cols));
  const bool dense = m.type == DType::kF32 || m.type == DType::kF16 || m.type == DType::kQ8_0 || m.type == DType::kQ4_0 ||
                     m.type == DType::kQ4G64;
  if (!dense) {
    const DTypeInfo* info = dtype_info(m.type);
    return Status::Error(Code::kUnsupported, "%s: type %s is not read here (f32, f16, q8_0, q4_0, q4g64)", what,
                         info ? info->name : "?");
  }
  return Status::Ok();
}

Status check_ternary_matrix(const MatRef& m, const char* what, int layer, int rows, int cols) {
  if (m.data && m.rows == rows && m.cols == cols && m.type != DType::kI2_S)
    return Status::Error(Code::kUnsupported, "%s (layer %d): expected i2_s rows of %d weights (a multiple of 128)", what,
                         layer, cols);
  MC_TRY(check_matrix(m, what, layer, rows, cols));
  if (!(m.scale >= 0.0f && m.scale < 1e30f))
    return Status::Error(Code::kCorrupt, "%s (layer %d) has scale %g", what, layer, static_cast<double>(m.scale));
  return Status::Ok();
}

Status DecoderState::init(const LlamaConfig& c, int ctx, Arena& arena) {
  if (ctx <= 0) ctx = c.seq_len;
  if (ctx > c.seq_len)
    return Status::Error(Code::kOutOfRange, "context %d is longer than the model's %d positions", ctx, c.seq_len);
  ctx_len = ctx;
  kv_dim = c.kv_dim();
  const size_t kv_elems = static_cast<size_t>(c.n_layers) * static_cast<size_t>(ctx) * static_cast<size_t>(kv_dim);
  const TensorClass act = TensorClass::kActivations;
  const int widest = (c.hidden_dim > c.dim ? c.hidden_dim : c.dim) + 64;  // padded to the largest block
  MC_TRY(arena.alloc_array(c.dim, act, &x));
  MC_TRY(arena.alloc_array(c.dim, act, &xb));
  MC_TRY(arena.alloc_array(c.dim, act, &q));
  MC_TRY(arena.alloc_array(c.dim, act, &att_out));
  MC_TRY(arena.alloc_array(c.hidden_dim, act, &hb));
  MC_TRY(arena.alloc_array(c.hidden_dim, act, &hb2));
  MC_TRY(arena.alloc_array(static_cast<size_t>(c.n_heads) * static_cast<size_t>(ctx), act, &att));
  MC_TRY(arena.alloc_array(c.head_dim() / 2, act, &rope_cos));
  MC_TRY(arena.alloc_array(c.head_dim() / 2, act, &rope_sin));
  MC_TRY(arena.alloc_array(c.vocab_size, act, &logits));
  MC_TRY(arena.alloc_array(kv_elems, TensorClass::kKvCache, &key_cache));
  MC_TRY(arena.alloc_array(kv_elems, TensorClass::kKvCache, &value_cache));
  MC_TRY(arena.alloc_array(widest, act, &act_q));
  MC_TRY(arena.alloc_array(widest, act, &act_scales));
  return Status::Ok();
}

Status check_token_pos(const LlamaConfig& c, int ctx_len, int token, int pos) {
  if (token < 0 || token >= c.vocab_size)
    return Status::Error(Code::kOutOfRange, "token id %d is outside the vocabulary of %d", token, c.vocab_size);
  if (pos < 0 || pos >= ctx_len)
    return Status::Error(Code::kOutOfRange, "position %d is outside the context of %d tokens", pos, ctx_len);
  return Status::Ok();
}

void rmsnorm(const KernelSet& k, float* out, const float* x, const float* w, int n, float eps) {
  float ss = k.dot_f32(x, x, n) / static_cast<float>(n) + eps;
  ss = 1.0f / mc_sqrtf(ss);
  for (int i = 0; i < n; ++i) out[i] = w[i] * (ss * x[i]);
}

void rope_angles(float theta, int hs, int pos, float* cos_out, float* sin_out) {
  const double log_theta = mc_log(static_cast<double>(theta));
  for (int i = 0; i < hs / 2; ++i) {
    const float e = static_cast<float>(2 * i) / static_cast<float>(hs);
    const float freq = 1.0f / static_cast<float>(mc_exp(log_theta * static_cast<double>(e)));
    const float angle = static_cast<float>(pos) * freq;
    double s, co;
    mc_sincos(static_cast<double>(angle), &s, &co);
    cos_out[i] = static_cast<float>(co);
    sin_out[i] = static_cast<float>(s);
  }
}

void rope_rotate(float* vec, int n, int hs, const float* cos_, const float* sin_, RopeStyle style) {
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

int act_block_of(const MatRef& m) {
  const DTypeInfo* info = dtype_info(m.type);
  return info ? info->act_block : 0;
}

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

void run_matvecs(ThreadPool& pool, const KernelSet& k, const MatRef* const* mats, float* const* outs, int count,
                 const ActVec& act) {
  MatvecJob job{&k, mats, outs, count, &act};
  pool.run(matvec_task, &job);
}

void run_dense_matvecs(ThreadPool& pool, const KernelSet& k, const MatRef* const* mats, float* const* outs, int count,
                       const float* x, int n, int8_t* q, float* scales) {
  for (int start = 0; start < count;) {
    const int block = act_block_of(*mats[start]);
    int end = start + 1;
    while (end < count && act_block_of(*mats[end]) == block) ++end;
    ActVec act;
    act.f = x;
    if (block > 0) {
      quantize_activations(x, n, block, q, scales);
      act.q = q;
      act.scales = scales;
      act.block = block;
    }
    run_matvecs(pool, k, mats + start, outs + start, end - start, act);
    start = end;
  }
}

AttentionJob attention_job(const KernelSet* k, const LlamaConfig& c, DecoderState& s, int layer, int pos) {
  return AttentionJob{k, &c, s.q, s.key_row(layer, 0), s.value_row(layer, 0), s.att, s.att_out, s.ctx_len, pos};
}

void attend(ThreadPool& pool, const KernelSet& k, const LlamaConfig& c, DecoderState& s, int layer, int pos) {
  AttentionJob job = attention_job(&k, c, s, layer, pos);
  pool.run(attention_task, &job);
}

}  // namespace mcullm
