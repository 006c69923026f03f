#include "model/transformer.h"

#include <string.h>

#include "model/ternary_lut.h"

#include "core/fmath.h"
#include "quant/blocks.h"
#include "quant/ternary.h"

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
  const bool tl = (m.type == DType::kTL1 || m.type == DType::kTL2) && m.tl && m.tl->ready;
  if (m.data && m.rows == rows && m.cols == cols && m.type != DType::kI2_S && !tl)
    return Status::Error(Code::kUnsupported,
                         "%s (layer %d): expected i2_s rows of %d weights (a multiple of 128), or tl1 / tl2", what,
                         layer, cols);
  if (tl && (m.tl->rows != rows || m.tl->cols != cols || m.tl->scale != m.scale))
    return Status::Error(Code::kCorrupt, "%s (layer %d): its LUT view does not match it", what, layer);
  MC_TRY(check_matrix(m, what, layer, rows, cols));
  if (!(m.scale >= 0.0f && m.scale < 1e30f))
    return Status::Error(Code::kCorrupt, "%s (layer %d) has scale %g", what, layer, static_cast<double>(m.scale));
  return Status::Ok();
}

bool parse_kv_type(const char* name, KvType* out) {
  const KvType types[2] = {KvType::kF32, KvType::kInt8};
  for (KvType t : types) {
    if (name && strcmp(name, kv_type_name(t)) == 0) {
      *out = t;
      return true;
    }
  }
  return false;
}

const char* kv_type_name(KvType t) { return t == KvType::kInt8 ? "int8" : "f32"; }

size_t kv_bytes_per_layer_position(const LlamaConfig& c, KvType t) {
  const size_t kv = static_cast<size_t>(c.kv_dim());
  if (t == KvType::kF32) return 2 * kv * sizeof(float);
  return 2 * (kv + static_cast<size_t>(c.n_kv_heads) * sizeof(float));
}

Status DecoderState::init(const LlamaConfig& c, int ctx, Arena& arena, KvType kv) {
  if (ctx <= 0) ctx = c.seq_len;
  if (ctx > c.seq_len)
    return Status::Error(Code::kOutOfRange, "context %d is longer than the model's %d positions", ctx, c.seq_len);
  ctx_len = ctx;
  kv_dim = c.kv_dim();
  head_dim = c.head_dim();
  n_kv_heads = c.n_kv_heads;
  kv_type = kv;
  const size_t kv_elems = static_cast<size_t>(c.n_layers) * static_cast<size_t>(ctx) * static_cast<size_t>(kv_dim);
  const TensorClass act = TensorClass::kActivations;
  const int widest = c.act_width();
  MC_TRY(arena.alloc_array(c.dim, act, &x));
  MC_TRY(arena.alloc_array(c.dim, act, &xb));
  MC_TRY(arena.alloc_array(c.dim, act, &q));
  MC_TRY(arena.alloc_array(c.dim, act, &att_out));
  MC_TRY(arena.alloc_array(c.hidden_dim, act, &hb));
  MC_TRY(arena.alloc_array(c.hidden_dim, act, &hb2));
  MC_TRY(arena.alloc_array(static_cast<size_t>(c.n_heads) * static_cast<size_t>(ctx), act, &att));
  rope_cos = rope_sin = nullptr;
  if (c.n_layers > 0) {
    const size_t angles = static_cast<size_t>(ctx) * static_cast<size_t>(c.head_dim() / 2);
    MC_TRY(arena.alloc_array(angles, act, &rope_cos));
    MC_TRY(arena.alloc_array(angles, act, &rope_sin));
  }
  MC_TRY(arena.alloc_array(c.vocab_size, act, &logits));
  if (kv == KvType::kF32) {
    MC_TRY(arena.alloc_array(kv_elems, TensorClass::kKvCache, &key_cache));
    MC_TRY(arena.alloc_array(kv_elems, TensorClass::kKvCache, &value_cache));
  } else {
    const size_t scale_elems = static_cast<size_t>(c.n_layers) * static_cast<size_t>(ctx) * static_cast<size_t>(c.n_kv_heads);
    MC_TRY(arena.alloc_array(kv_elems, TensorClass::kKvCache, &key_q));
    MC_TRY(arena.alloc_array(kv_elems, TensorClass::kKvCache, &value_q));
    MC_TRY(arena.alloc_array(scale_elems, TensorClass::kKvCache, &key_s));
    MC_TRY(arena.alloc_array(scale_elems, TensorClass::kKvCache, &value_s));
    MC_TRY(arena.alloc_array(static_cast<size_t>(c.dim), act, &q_q));
    MC_TRY(reserve_stage(1, arena));
  }
  MC_TRY(arena.alloc_array(widest, act, &act_q));
  MC_TRY(arena.alloc_array(widest, act, &act_scales));
  if (rope_cos) rope_angles(c.rope_theta, c.head_dim(), ctx, rope_cos, rope_sin);  // once everything fits
  return Status::Ok();
}

Status DecoderState::reserve_stage(int rows, Arena& arena) {
  if (kv_type == KvType::kF32 || rows <= stage_rows) return Status::Ok();
  const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(kv_dim);
  MC_TRY(arena.alloc_array(n, TensorClass::kActivations, &key_new));
  MC_TRY(arena.alloc_array(n, TensorClass::kActivations, &value_new));
  stage_rows = rows;
  return Status::Ok();
}

void DecoderState::store_kv(ThreadPool& pool, const KernelSet& k, int layer, int pos0, int n) {
  if (kv_type == KvType::kF32) return;
  const int heads = n_kv_heads;  // one scale per head: each head quantized on its own
  run_slices(pool, n * heads, 1, static_cast<size_t>(n) * kv_dim * 2 * kElementWork, [&](int b, int e) {
    for (int t = b; t < e; ++t) {
      const int i = t / heads, h = t % heads;
      const size_t at = cache_index(layer, pos0 + i), off = static_cast<size_t>(h) * head_dim;
      const size_t row = static_cast<size_t>(i) * kv_dim + off, cached = at * kv_dim + off, scale = at * n_kv_heads + h;
      k.quantize_blocks(key_new + row, head_dim, head_dim, key_q + cached, key_s + scale);
      k.quantize_blocks(value_new + row, head_dim, head_dim, value_q + cached, value_s + scale);
    }
  });
}

Status BatchState::init(const LlamaConfig& c, int n, Arena& arena) {
  if (n < 1 || n > 4096) return Status::Error(Code::kInvalidArgument, "batch of %d tokens (1..4096)", n);
  cap = n;
  widest = (c.act_width() + 15) / 16 * 16;  // every column's int8 copy 16-byte aligned, as the PIE kernels need
  const TensorClass act = TensorClass::kActivations;
  const size_t cn = static_cast<size_t>(n);
  MC_TRY(arena.alloc_array(cn * c.dim, act, &x));
  MC_TRY(arena.alloc_array(cn * c.dim, act, &xb));
  MC_TRY(arena.alloc_array(cn * c.dim, act, &q));
  MC_TRY(arena.alloc_array(cn * c.dim, act, &att_out));
  MC_TRY(arena.alloc_array(cn * c.hidden_dim, act, &hb));
  MC_TRY(arena.alloc_array(cn * c.hidden_dim, act, &hb2));
  MC_TRY(arena.alloc_array(cn * c.vocab_size, act, &logits));
  MC_TRY(arena.alloc_array(cn * widest, act, &act_q));
  return arena.alloc_array(cn * widest, act, &act_scales);
}

void BatchState::view(const LlamaConfig& c, const DecoderState& s) {
  *this = BatchState{1, c.act_width(), s.x, s.xb, s.q, s.att_out, s.hb, s.hb2, s.logits, s.act_q, s.act_scales};
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

namespace {
void rotate_head(float* v, int hs, const float* cos_, const float* sin_, RopeStyle style) {
  const int half = hs / 2;
  for (int i = 0; i < half; ++i) {
    const int a = style == RopeStyle::kNeox ? i : 2 * i;
    const int b = style == RopeStyle::kNeox ? i + half : 2 * i + 1;
    const float v0 = v[a], v1 = v[b];
    v[a] = v0 * cos_[i] - v1 * sin_[i];
    v[b] = v0 * sin_[i] + v1 * cos_[i];
  }
}
}  // namespace

// Cost weight for run_sized (multiply-add equivalents) of rotating one head.
constexpr size_t kRopeHeadWork = 4;

size_t rope_table_bytes(const LlamaConfig& c, int ctx_len) {
  return c.n_layers > 0 ? 2 * static_cast<size_t>(ctx_len) * static_cast<size_t>(c.head_dim() / 2) * sizeof(float) : 0;
}

void rope_angles(float theta, int hs, int n, float* cos_, float* sin_) {
  const double log_theta = mc_log(static_cast<double>(theta));
  const int half = hs / 2;
  for (int i = 0; i < half; ++i) {  // angle i of every position: its frequency once
    const float e = static_cast<float>(2 * i) / static_cast<float>(hs);
    const float freq = 1.0f / static_cast<float>(mc_exp(log_theta * static_cast<double>(e)));
    for (int pos = 0; pos < n; ++pos) {
      const float angle = static_cast<float>(pos) * freq;
      double s, co;
      mc_sincos(static_cast<double>(angle), &s, &co);
      cos_[static_cast<size_t>(pos) * half + i] = static_cast<float>(co);
      sin_[static_cast<size_t>(pos) * half + i] = static_cast<float>(s);
    }
  }
}

void rope_rotate_batch(ThreadPool& pool, const RopeColumns& c, int hs, int n, const float* cos_, const float* sin_,
                       RopeStyle style) {
  const int qh = c.q_width / hs, kh = c.k_width / hs, per = qh + kh, half = hs / 2;
  run_slices(pool, n * per, 1, static_cast<size_t>(n) * static_cast<size_t>(c.q_width + c.k_width) * kRopeHeadWork,
             [&](int b, int e) {
               for (int t = b; t < e; ++t) {
                 const int i = t / per, h = t % per;
                 float* v = h < qh ? c.q + i * c.q_stride + static_cast<size_t>(h) * hs
                                   : c.keys + i * c.k_stride + static_cast<size_t>(h - qh) * hs;
                 rotate_head(v, hs, cos_ + i * half, sin_ + i * half, style);
               }
             });
}

namespace {

// Multiply-adds of n positions' attention from pos: scores and values over pos + n keys per head.
size_t attention_work(const LlamaConfig& c, int pos, int n) {
  return 2 * static_cast<size_t>(c.n_heads) * static_cast<size_t>(c.head_dim()) * static_cast<size_t>(pos + n) *
         static_cast<size_t>(n);
}

int act_block_of(const MatRef& m) {
  const DTypeInfo* info = dtype_info(m.type);
  return info ? info->act_block : 0;
}

// Heads [h0, h1) of one position.
void attend_heads(const AttentionJob& j, int h0, int h1) {
  const int hs = j.cfg->head_dim(), kv_dim = j.cfg->kv_dim();
  const int group = j.cfg->n_heads / j.cfg->n_kv_heads;
  const float scale = mc_sqrtf(static_cast<float>(hs));
  const size_t kvs = static_cast<size_t>(kv_dim), n_kv = static_cast<size_t>(j.cfg->n_kv_heads);
  if (!j.key_q) {
    const AttnHeads a{j.q, j.key_rows, j.value_rows, kvs, j.att, static_cast<size_t>(j.ctx_len), j.out, j.pos + 1, hs,
                      group, scale};
    j.kernels->attn_heads(*j.kernels, a, h0, h1);
    return;
  }
  for (int h = h0; h < h1; ++h) {
    float* att = j.att + static_cast<size_t>(h) * j.ctx_len;
    const int kv_off = (h / group) * hs;
    int8_t* qh = j.q_q + h * hs;
    float qs = 0.0f;
    j.kernels->quantize_blocks(j.q + h * hs, hs, hs, qh, &qs);
    j.kernels->attn_scores_q8(qh, qs, j.key_q + kv_off, j.key_s + h / group, kvs, n_kv, j.pos + 1, hs, scale, att);
    j.kernels->softmax(att, j.pos + 1);
    j.kernels->attn_values_q8(att, j.value_q + kv_off, j.value_s + h / group, kvs, n_kv, j.pos + 1, hs, j.out + h * hs);
  }
}

// n positions, each thread its heads (a head's score row is reused position after position).
struct BatchAttentionJob {
  AttentionJob first;  // position pos0: q and out of column 0
  int n;
};

void attention_task(void* p, int ith, int nth) {
  const BatchAttentionJob& b = *static_cast<const BatchAttentionJob*>(p);
  int h0, h1;
  slice(b.first.cfg->n_heads, ith, nth, &h0, &h1);
  const size_t dim = static_cast<size_t>(b.first.cfg->dim);
  for (int i = 0; i < b.n; ++i) {
    AttentionJob j = b.first;
    j.q += i * dim;
    j.out += i * dim;
    j.pos += i;
    attend_heads(j, h0, h1);
  }
}

struct MatmatJob {
  const KernelSet* kernels;
  const MatRef* const* mats;
  float* const* outs;
  const size_t* out_strides;
  int count;
  const ActMat* act;
  int n;
};

// One column runs the matvec kernels (matmat's bits, without its batched tiles).
void matmat_task(void* p, int ith, int nth) {
  const MatmatJob& job = *static_cast<const MatmatJob*>(p);
  for (int m = 0; m < job.count; ++m) {
    int r0, r1;
    slice(job.mats[m]->rows, ith, nth, &r0, &r1);
    if (job.n == 1) matvec(*job.kernels, *job.mats[m], job.act->col(0), job.outs[m], r0, r1);
    else matmat(*job.kernels, *job.mats[m], *job.act, job.n, job.outs[m], job.out_strides[m], r0, r1);
  }
}

}  // namespace

size_t mats_work(const MatRef* const* mats, int count, int n) {
  size_t w = 0;
  for (int m = 0; m < count; ++m) w += static_cast<size_t>(mats[m]->rows) * static_cast<size_t>(mats[m]->cols);
  return w * static_cast<size_t>(n);
}

void run_matvecs(ThreadPool& pool, const KernelSet& k, const MatRef* const* mats, float* const* outs, int count,
                 const ActVec& act) {
  ActMat a;
  a.f = act.f;
  a.q = act.q;
  a.scales = act.scales;
  a.block = act.block;
  run_matmats(pool, k, mats, outs, nullptr, count, a, 1);
}

void run_matmats(ThreadPool& pool, const KernelSet& k, const MatRef* const* mats, float* const* outs,
                 const size_t* out_strides, int count, const ActMat& act, int n) {
  MatmatJob job{&k, mats, outs, out_strides, count, &act, n};
  pool.run_sized(matmat_task, &job, mats_work(mats, count, n));
}

AttentionJob attention_job(const KernelSet* k, const LlamaConfig& c, DecoderState& s, int layer, int pos) {
  AttentionJob j{};
  j.kernels = k;
  j.cfg = &c;
  j.q = s.q;
  const size_t at = s.cache_index(layer, 0);
  if (s.kv_type == KvType::kF32) {
    j.key_rows = s.key_cache + at * s.kv_dim;
    j.value_rows = s.value_cache + at * s.kv_dim;
  } else {
    j.key_q = s.key_q + at * s.kv_dim;
    j.value_q = s.value_q + at * s.kv_dim;
    j.key_s = s.key_s + at * s.n_kv_heads;
    j.value_s = s.value_s + at * s.n_kv_heads;
    j.q_q = s.q_q;
  }
  j.att = s.att;
  j.out = s.att_out;
  j.ctx_len = s.ctx_len;
  j.pos = pos;
  return j;
}

void attend(ThreadPool& pool, const KernelSet& k, const LlamaConfig& c, DecoderState& s, int layer, int pos0, int n,
            const float* q, float* out) {
  s.store_kv(pool, k, layer, pos0, n);
  BatchAttentionJob job{attention_job(&k, c, s, layer, pos0), n};
  job.first.q = q;
  job.first.out = out;
  pool.run_sized(attention_task, &job, attention_work(c, pos0, n));
}

void run_ternary_matmats(ThreadPool& pool, const KernelSet& k, const MatRef* const* mats, float* const* outs,
                         const size_t* out_strides, int count, const float* x, size_t x_stride, int n_vals, int n,
                         BatchState& b, const TlLutBuffer* lut) {
  const size_t qs = static_cast<size_t>(b.widest);
  for (int i = 0; i < n; ++i) k.quantize_i8s(x + i * x_stride, n_vals, b.act_q + i * qs, b.act_scales + i);
  if (lut && !lut->empty()) {
    run_ternary_q(pool, k, mats, outs, out_strides, count, b.act_q, qs, b.act_scales, n, *lut);
    return;
  }
  ActMat a;
  a.f = x;
  a.f_stride = x_stride;
  a.q = b.act_q;
  a.q_stride = qs;
  a.scales = b.act_scales;
  a.s_stride = 1;
  a.block = n_vals;
  run_matmats(pool, k, mats, outs, out_strides, count, a, n);
}

void run_dense_matmats(ThreadPool& pool, const KernelSet& k, const MatRef* const* mats, float* const* outs,
                       const size_t* out_strides, int count, const float* x, size_t x_stride, int n_vals, int n,
                       BatchState& b) {
  const size_t qs = static_cast<size_t>(b.widest);
  for (int start = 0; start < count;) {
    const int block = act_block_of(*mats[start]);
    int end = start + 1;
    while (end < count && act_block_of(*mats[end]) == block) ++end;
    ActMat a;
    a.f = x;
    a.f_stride = x_stride;
    if (block > 0) {  // every block has its own scale: the blocks of all n columns split over the pool
      const int per = (n_vals + block - 1) / block;
      run_slices(pool, n * per, 1, static_cast<size_t>(n) * static_cast<size_t>(n_vals) * kElementWork, [&](int s, int e) {
        for (int t = s; t < e; ++t) {
          const int i = t / per, j = t % per, at = j * block, len = n_vals - at < block ? n_vals - at : block;
          k.quantize_blocks(x + i * x_stride + at, len, block, b.act_q + i * qs + at, b.act_scales + i * qs + j);
        }
      });
      a.q = b.act_q;
      a.q_stride = qs;
      a.scales = b.act_scales;
      a.s_stride = qs;
      a.block = block;
    }
    run_matmats(pool, k, mats + start, outs + start, out_strides + start, end - start, a, n);
    start = end;
  }
}

}  // namespace mcullm
