#include "format/llama2c.h"

#include <inttypes.h>
#include <string.h>

namespace mcullm {

namespace {

int32_t read_i32(const uint8_t* p) {
  int32_t v;
  memcpy(&v, p, 4);
  return v;
}

constexpr size_t kV1HeaderBytes = 256;
constexpr size_t kLegacyHeaderBytes = 28;

// Element counts of the tensors, in the order each version stores them.
struct Counts {
  uint64_t dim, hidden, layers, vocab, kv_dim, seq, head;
};

Counts counts_of(const LlamaConfig& c) {
  return Counts{static_cast<uint64_t>(c.dim), static_cast<uint64_t>(c.hidden_dim), static_cast<uint64_t>(c.n_layers),
                static_cast<uint64_t>(c.vocab_size), static_cast<uint64_t>(c.kv_dim()), static_cast<uint64_t>(c.seq_len),
                static_cast<uint64_t>(c.head_dim())};
}

// Weights of all layers of the seven matrices, in elements.
uint64_t matrix_elems(const Counts& n) {
  return n.layers * (n.dim * n.dim * 2 + n.kv_dim * n.dim * 2 + n.hidden * n.dim * 3);
}

// A cursor over the file that hands out tensors and never reads past the end.
struct Cursor {
  const uint8_t* data;
  size_t size;
  size_t pos;
  Status take(uint64_t bytes, const uint8_t** out, const char* what) {
    if (bytes > size - pos)
      return Status::Error(Code::kCorrupt, "%s at byte %zu needs %llu bytes, the file has %zu left", what, pos,
                           static_cast<unsigned long long>(bytes), size - pos);
    *out = data + pos;
    pos += static_cast<size_t>(bytes);
    return Status::Ok();
  }
  Status take_f32(uint64_t elems, const float** out, const char* what) {
    const uint8_t* p = nullptr;
    MC_TRY(take(elems * 4, &p, what));
    *out = reinterpret_cast<const float*>(p);
    return Status::Ok();
  }
};

// Per-layer matrices stored back to back for all layers: hand out layer l's slice.
const float* layer_slice(const float* all, int l, int rows, int cols) {
  return all + static_cast<size_t>(l) * static_cast<size_t>(rows) * static_cast<size_t>(cols);
}

// Version 2: int8 weights of a whole tensor then its f32 scales, one per group; expanded to f32.
Status take_int8_tensor(Cursor& cur, Arena& arena, uint64_t elems, int group, TensorClass cls, const float** out,
                        const char* what) {
  const uint8_t* q = nullptr;
  const uint8_t* s = nullptr;
  MC_TRY(cur.take(elems, &q, what));
  MC_TRY(cur.take(elems / static_cast<uint64_t>(group) * 4, &s, what));
  float* w = nullptr;
  MC_TRY(arena.alloc_array(static_cast<size_t>(elems), cls, &w));
  for (uint64_t i = 0; i < elems; ++i) {
    float scale;
    memcpy(&scale, s + (i / static_cast<uint64_t>(group)) * 4, 4);
    w[i] = static_cast<float>(static_cast<int8_t>(q[i])) * scale;
  }
  *out = w;
  return Status::Ok();
}

}  // namespace

Status llama2c_read_header(const uint8_t* data, size_t size, Llama2cInfo* info) {
  *info = Llama2cInfo();
  if (size < kLegacyHeaderBytes)
    return Status::Error(Code::kCorrupt, "file of %zu bytes is too short for a llama2.c header", size);
  uint32_t magic;
  memcpy(&magic, data, 4);
  const uint8_t* params;
  if (magic == kLlama2cMagic) {
    if (size < kV1HeaderBytes) return Status::Error(Code::kCorrupt, "ak42 header needs 256 bytes, the file has %zu", size);
    const int32_t version = read_i32(data + 4);
    if (version != 1 && version != 2)
      return Status::Error(Code::kUnsupported, "ak42 version %" PRId32 " (this reader knows 1 and 2)", version);
    info->version = version == 1 ? Llama2cVersion::kV1F32 : Llama2cVersion::kV2Int8;
    params = data + 8;
    info->shared_classifier = data[36] != 0;
    if (data[36] > 1) return Status::Error(Code::kCorrupt, "shared_classifier flag is %u (0 or 1)", data[36]);
    if (version == 2) info->group_size = read_i32(data + 37);
  } else {
    params = data;
  }
  LlamaConfig& c = info->cfg;
  c.dim = read_i32(params);
  c.hidden_dim = read_i32(params + 4);
  c.n_layers = read_i32(params + 8);
  c.n_heads = read_i32(params + 12);
  c.n_kv_heads = read_i32(params + 16);
  c.vocab_size = read_i32(params + 20);
  c.seq_len = read_i32(params + 24);
  if (info->version == Llama2cVersion::kLegacy) {
    if (c.vocab_size < 0 && c.vocab_size != INT32_MIN) {
      info->shared_classifier = false;
      c.vocab_size = -c.vocab_size;
    }
  }
  Status st = c.validate();
  if (!st.ok()) return st.prefix("llama2.c header: ");

  const Counts n = counts_of(c);
  const uint64_t norms = n.layers * n.dim * 2 + n.dim;
  const uint64_t emb = n.vocab * n.dim;
  const uint64_t mats = matrix_elems(n);
  const uint64_t cls = info->shared_classifier ? 0 : emb;
  switch (info->version) {
    case Llama2cVersion::kLegacy:
      info->expected_size = kLegacyHeaderBytes + 4 * (norms + emb + mats + n.seq * n.head + cls);
      break;
    case Llama2cVersion::kV1F32:
      info->expected_size = kV1HeaderBytes + 4 * (norms + emb + mats + cls);
      break;
    case Llama2cVersion::kV2Int8: {
      const int g = info->group_size;
      if (g <= 0 || c.dim % g != 0 || c.hidden_dim % g != 0)
        return Status::Error(Code::kCorrupt, "ak42 v2 group size %d does not divide dim %d and hidden %d", g, c.dim,
                             c.hidden_dim);
      const uint64_t q = emb + mats + cls;
      info->expected_size = kV1HeaderBytes + 4 * norms + q + 4 * (q / static_cast<uint64_t>(g));
      break;
    }
  }
  if (info->expected_size != size) {
    const char* hint = info->version == Llama2cVersion::kV1F32
                           ? " (an ak42 v1 file of another size may be a bitllama2.c ternary export)"
                           : "";
    return Status::Error(Code::kCorrupt, "llama2.c file has %zu bytes, its header implies %llu%s", size,
                         static_cast<unsigned long long>(info->expected_size), hint);
  }
  return Status::Ok();
}

Status llama2c_load(const uint8_t* data, size_t size, Arena& arena, LlamaModel* model) {
  Llama2cInfo info;
  MC_TRY(llama2c_read_header(data, size, &info));
  const LlamaConfig& c = info.cfg;
  *model = LlamaModel();
  model->cfg = c;
  model->tied_output = info.shared_classifier;
  MC_TRY(arena.alloc_array(static_cast<size_t>(c.n_layers), TensorClass::kOther, &model->layers));
  for (int l = 0; l < c.n_layers; ++l) model->layers[l] = LlamaLayer();

  const Counts n = counts_of(c);
  const int d = c.dim, kv = c.kv_dim(), h = c.hidden_dim, L = c.n_layers, V = c.vocab_size;
  Cursor cur{data, size, info.version == Llama2cVersion::kLegacy ? kLegacyHeaderBytes : kV1HeaderBytes};
  const float *emb = nullptr, *att_norm = nullptr, *ffn_norm = nullptr, *out_norm = nullptr, *cls = nullptr;
  const float *wq, *wk, *wv, *wo, *w1, *w2, *w3;

  if (info.version == Llama2cVersion::kLegacy) {
    const float* freq;
    MC_TRY(cur.take_f32(n.vocab * n.dim, &emb, "token embedding"));
    MC_TRY(cur.take_f32(n.layers * n.dim, &att_norm, "attention norms"));
    MC_TRY(cur.take_f32(n.layers * n.dim * n.dim, &wq, "wq"));
    MC_TRY(cur.take_f32(n.layers * n.kv_dim * n.dim, &wk, "wk"));
    MC_TRY(cur.take_f32(n.layers * n.kv_dim * n.dim, &wv, "wv"));
    MC_TRY(cur.take_f32(n.layers * n.dim * n.dim, &wo, "wo"));
    MC_TRY(cur.take_f32(n.layers * n.dim, &ffn_norm, "ffn norms"));
    MC_TRY(cur.take_f32(n.layers * n.hidden * n.dim, &w1, "w1"));
    MC_TRY(cur.take_f32(n.layers * n.dim * n.hidden, &w2, "w2"));
    MC_TRY(cur.take_f32(n.layers * n.hidden * n.dim, &w3, "w3"));
    MC_TRY(cur.take_f32(n.dim, &out_norm, "final norm"));
    MC_TRY(cur.take_f32(n.seq * n.head, &freq, "rope tables (unused)"));
    if (!info.shared_classifier) MC_TRY(cur.take_f32(n.vocab * n.dim, &cls, "classifier"));
  } else {
    MC_TRY(cur.take_f32(n.layers * n.dim, &att_norm, "attention norms"));
    MC_TRY(cur.take_f32(n.layers * n.dim, &ffn_norm, "ffn norms"));
    MC_TRY(cur.take_f32(n.dim, &out_norm, "final norm"));
    if (info.version == Llama2cVersion::kV1F32) {
      MC_TRY(cur.take_f32(n.vocab * n.dim, &emb, "token embedding"));
      MC_TRY(cur.take_f32(n.layers * n.dim * n.dim, &wq, "wq"));
      MC_TRY(cur.take_f32(n.layers * n.kv_dim * n.dim, &wk, "wk"));
      MC_TRY(cur.take_f32(n.layers * n.kv_dim * n.dim, &wv, "wv"));
      MC_TRY(cur.take_f32(n.layers * n.dim * n.dim, &wo, "wo"));
      MC_TRY(cur.take_f32(n.layers * n.hidden * n.dim, &w1, "w1"));
      MC_TRY(cur.take_f32(n.layers * n.dim * n.hidden, &w2, "w2"));
      MC_TRY(cur.take_f32(n.layers * n.hidden * n.dim, &w3, "w3"));
      if (!info.shared_classifier) MC_TRY(cur.take_f32(n.vocab * n.dim, &cls, "classifier"));
    } else {
      const int g = info.group_size;
      MC_TRY(take_int8_tensor(cur, arena, n.vocab * n.dim, g, TensorClass::kEmbedding, &emb, "token embedding"));
      MC_TRY(take_int8_tensor(cur, arena, n.layers * n.dim * n.dim, g, TensorClass::kAttention, &wq, "wq"));
      MC_TRY(take_int8_tensor(cur, arena, n.layers * n.kv_dim * n.dim, g, TensorClass::kAttention, &wk, "wk"));
      MC_TRY(take_int8_tensor(cur, arena, n.layers * n.kv_dim * n.dim, g, TensorClass::kAttention, &wv, "wv"));
      MC_TRY(take_int8_tensor(cur, arena, n.layers * n.dim * n.dim, g, TensorClass::kAttention, &wo, "wo"));
      MC_TRY(take_int8_tensor(cur, arena, n.layers * n.hidden * n.dim, g, TensorClass::kFfn, &w1, "w1"));
      MC_TRY(take_int8_tensor(cur, arena, n.layers * n.dim * n.hidden, g, TensorClass::kFfn, &w2, "w2"));
      MC_TRY(take_int8_tensor(cur, arena, n.layers * n.hidden * n.dim, g, TensorClass::kFfn, &w3, "w3"));
      if (!info.shared_classifier)
        MC_TRY(take_int8_tensor(cur, arena, n.vocab * n.dim, g, TensorClass::kHead, &cls, "classifier"));
    }
  }
  if (info.version != Llama2cVersion::kV2Int8) {
    arena.note_mapped(4 * n.vocab * n.dim, TensorClass::kEmbedding);
    arena.note_mapped(4 * n.layers * (2 * n.dim * n.dim + 2 * n.kv_dim * n.dim), TensorClass::kAttention);
    arena.note_mapped(4 * n.layers * 3 * n.hidden * n.dim, TensorClass::kFfn);
    if (cls) arena.note_mapped(4 * n.vocab * n.dim, TensorClass::kHead);
  }
  arena.note_mapped(4 * (n.layers * n.dim * 2 + n.dim), TensorClass::kNorm);

  model->tok_emb = f32_matrix(emb, V, d);
  model->output = cls ? f32_matrix(cls, V, d) : model->tok_emb;
  model->out_norm = out_norm;
  for (int l = 0; l < L; ++l) {
    LlamaLayer& ly = model->layers[l];
    ly.attn_norm = att_norm + static_cast<size_t>(l) * d;
    ly.ffn_norm = ffn_norm + static_cast<size_t>(l) * d;
    ly.wq = f32_matrix(layer_slice(wq, l, d, d), d, d);
    ly.wk = f32_matrix(layer_slice(wk, l, kv, d), kv, d);
    ly.wv = f32_matrix(layer_slice(wv, l, kv, d), kv, d);
    ly.wo = f32_matrix(layer_slice(wo, l, d, d), d, d);
    ly.w1 = f32_matrix(layer_slice(w1, l, h, d), h, d);
    ly.w2 = f32_matrix(layer_slice(w2, l, d, h), d, h);
    ly.w3 = f32_matrix(layer_slice(w3, l, h, d), h, d);
  }
  return model->check_shapes();
}

}  // namespace mcullm
