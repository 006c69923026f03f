#include "model/llama_slice.h"

#include <string.h>

#include "quant/dtype.h"

namespace mcullm {

size_t llama_slice_work_bytes(const LlamaConfig& c, const SliceRange& r, int ctx_len, KvType kv) {
  if (ctx_len <= 0) ctx_len = c.seq_len;
  LlamaConfig cache_cfg = c;
  cache_cfg.n_layers = r.end - r.first;
  const size_t widest = static_cast<size_t>(c.act_width());
  const size_t floats = 6ull * c.dim + 2ull * c.hidden_dim + static_cast<size_t>(c.n_heads) * ctx_len +
                        static_cast<size_t>(c.vocab_size) + 2 * widest + 2ull * c.kv_dim();
  return static_cast<size_t>(cache_cfg.n_layers) * static_cast<size_t>(ctx_len) * kv_bytes_per_layer_position(c, kv) +
         rope_table_bytes(cache_cfg, ctx_len) + floats * sizeof(float) + 32 * 16;  // + the arena's alignment of each array
}

namespace {

struct Fnv {
  uint64_t h = 0xcbf29ce484222325ull;
  void bytes(const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) {
      h ^= b[i];
      h *= 0x100000001b3ull;
    }
  }
  void i32(int32_t v) { bytes(&v, 4); }  // little-endian on every target
  void f32(float v) { bytes(&v, 4); }
  void floats(const float* p, int n) { bytes(p, static_cast<size_t>(n) * 4); }
  void matrix(const MatRef& m) {
    i32(static_cast<int32_t>(m.type));
    i32(m.rows);
    i32(m.cols);
    f32(m.scale);
    i32(m.group);
    const size_t row = dtype_row_bytes(m.type, m.cols);
    if (m.data)
      for (int r = 0; r < m.rows; ++r) bytes(m.row(r), row);
    if (m.scales && m.group > 0) bytes(m.scales, static_cast<size_t>(m.rows) * ((m.cols + m.group - 1) / m.group) * 2);
  }
};

}  // namespace

uint64_t slice_hash(const TransformerModel& m, int first, int end, bool embedding, bool head) {
  Fnv f;
  const LlamaConfig& c = m.cfg;
  const int fields[] = {c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size, c.seq_len, first, end,
                        embedding ? 1 : 0, head ? 1 : 0, static_cast<int>(m.spec.rope), static_cast<int>(m.spec.act),
                        m.spec.ternary ? 1 : 0, m.spec.qkv_bias ? 1 : 0, m.spec.sub_norms ? 1 : 0};
  for (int v : fields) f.i32(v);
  f.f32(c.norm_eps);
  f.f32(c.rope_theta);
  if (embedding) f.matrix(m.tok_emb);
  for (int l = first; l < end; ++l) {
    const TransformerLayer& L = m.layer(l);
    f.floats(L.attn_norm, c.dim);
    f.floats(L.ffn_norm, c.dim);
    if (m.spec.sub_norms) f.floats(L.attn_sub_norm, c.dim), f.floats(L.ffn_sub_norm, c.hidden_dim);
    if (m.spec.qkv_bias) f.floats(L.bq, c.dim), f.floats(L.bk, c.kv_dim()), f.floats(L.bv, c.kv_dim());
    const MatRef* mats[] = {&L.wq, &L.wk, &L.wv, &L.wo, &L.w1, &L.w2, &L.w3};
    for (const MatRef* mat : mats) f.matrix(*mat);
  }
  if (head) {
    f.floats(m.out_norm, c.dim);
    f.i32(m.tied_output ? 1 : 0);
    if (!(m.tied_output && embedding)) f.matrix(m.output);  // a tied head is the embedding's matrix, hashed above
  }
  return f.h;
}

uint64_t slice_hash(const TransformerModel& m, const SliceRange& r) { return slice_hash(m, r.first, r.end, r.master, r.master); }

uint64_t slice_hash(const TransformerModel& part) {
  return slice_hash(part, part.first_layer, part.end(), part.has_embedding, part.has_head);
}

}  // namespace mcullm
