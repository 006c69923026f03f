#include "format/llama_gguf.h"

#include <stdio.h>

#include "quant/blocks.h"
#include "quant/f16.h"
#include "quant/ternary.h"

namespace mcullm {

void llama_tensor_name(char* out, int size, int layer, const char* suffix) {
  snprintf(out, static_cast<size_t>(size), "blk.%d.%s", layer, suffix);
}

namespace {

Status get_dim(const GgufFile& f, const char* key, int* out) {
  uint32_t v = 0;
  Status st = f.get_u32(key, &v);
  if (!st.ok()) return st;
  if (v == 0 || v > (1u << 30)) return Status::Error(Code::kCorrupt, "%s = %u is out of range", key, v);
  *out = static_cast<int>(v);
  return Status::Ok();
}

Status matrix(const GgufFile& f, const char* name, Arena& arena, TensorClass cls, MatRef* out) {
  const GgufTensor* t = f.find_tensor(name);
  if (!t) return Status::Error(Code::kNotFound, "tensor %s is missing", name);
  if (t->n_dims != 2) return Status::Error(Code::kCorrupt, "tensor %s has %u dimensions, a matrix has 2", name, t->n_dims);
  out->type = t->type;
  out->data = t->data;
  out->cols = static_cast<int>(t->ne[0]);
  out->rows = static_cast<int>(t->ne[1]);
  out->row_bytes = dtype_row_bytes(t->type, t->ne[0]);
  if (t->type == DType::kI2_S) out->scale = i2s_tensor_scale(t->data, t->ne[1], t->ne[0]);  // after the rows
  arena.note_mapped(static_cast<size_t>(t->nbytes), cls);
  return Status::Ok();
}

// Norm weights as f32: used in place when stored as f32 (and aligned), else converted into the arena.
Status vector(const GgufFile& f, const char* name, int n, Arena& arena, const float** out) {
  const GgufTensor* t = f.find_tensor(name);
  if (!t) return Status::Error(Code::kNotFound, "tensor %s is missing", name);
  if (t->n_dims != 1 || t->ne[0] != n)
    return Status::Error(Code::kCorrupt, "tensor %s should be a vector of %d values", name, n);
  if (t->type == DType::kF32 && reinterpret_cast<uintptr_t>(t->data) % 4 == 0) {
    *out = reinterpret_cast<const float*>(t->data);
    arena.note_mapped(static_cast<size_t>(t->nbytes), TensorClass::kNorm);
    return Status::Ok();
  }
  float* v = nullptr;
  MC_TRY(arena.alloc_array(static_cast<size_t>(n), TensorClass::kNorm, &v));
  if (!dequantize_row_any(t->type, t->data, v, n))
    return Status::Error(Code::kUnsupported, "tensor %s: norm weights of this type", name);
  *out = v;
  return Status::Ok();
}

}  // namespace

Status llama_from_gguf(const GgufFile& f, Arena& arena, LlamaModel* model) {
  GgufStr arch;
  MC_TRY(f.get_string("general.architecture", &arch));
  if (!arch.equals("llama"))
    return Status::Error(Code::kUnsupported, "architecture '%.*s' (this loader reads 'llama')", static_cast<int>(arch.size < 64 ? arch.size : 64), arch.data);
  *model = LlamaModel();
  LlamaConfig& c = model->cfg;
  MC_TRY(get_dim(f, "llama.embedding_length", &c.dim));
  MC_TRY(get_dim(f, "llama.feed_forward_length", &c.hidden_dim));
  MC_TRY(get_dim(f, "llama.block_count", &c.n_layers));
  MC_TRY(get_dim(f, "llama.attention.head_count", &c.n_heads));
  MC_TRY(get_dim(f, "llama.context_length", &c.seq_len));
  c.n_kv_heads = c.n_heads;
  if (f.find_kv("llama.attention.head_count_kv")) MC_TRY(get_dim(f, "llama.attention.head_count_kv", &c.n_kv_heads));
  if (f.find_kv("llama.attention.layer_norm_rms_epsilon")) MC_TRY(f.get_f32("llama.attention.layer_norm_rms_epsilon", &c.norm_eps));
  if (f.find_kv("llama.rope.freq_base")) MC_TRY(f.get_f32("llama.rope.freq_base", &c.rope_theta));
  const GgufTensor* emb = f.find_tensor("token_embd.weight");
  if (!emb) return Status::Error(Code::kNotFound, "tensor token_embd.weight is missing");
  if (emb->n_dims != 2 || emb->ne[1] <= 0 || emb->ne[1] > (1 << 30))
    return Status::Error(Code::kCorrupt, "token_embd.weight should be a [vocab, dim] matrix");
  c.vocab_size = static_cast<int>(emb->ne[1]);
  MC_TRY(c.validate());

  MC_TRY(matrix(f, "token_embd.weight", arena, TensorClass::kEmbedding, &model->tok_emb));
  model->tied_output = f.find_tensor("output.weight") == nullptr;
  if (model->tied_output) {
    model->output = model->tok_emb;
  } else {
    MC_TRY(matrix(f, "output.weight", arena, TensorClass::kHead, &model->output));
  }
  MC_TRY(vector(f, "output_norm.weight", c.dim, arena, &model->out_norm));
  MC_TRY(arena.alloc_array(static_cast<size_t>(c.n_layers), TensorClass::kOther, &model->layers));
  char name[64];
  for (int l = 0; l < c.n_layers; ++l) {
    LlamaLayer& L = model->layers[l];
    L = LlamaLayer();
    struct { const char* suffix; MatRef* m; TensorClass cls; } mats[] = {
        {"attn_q.weight", &L.wq, TensorClass::kAttention},   {"attn_k.weight", &L.wk, TensorClass::kAttention},
        {"attn_v.weight", &L.wv, TensorClass::kAttention},   {"attn_output.weight", &L.wo, TensorClass::kAttention},
        {"ffn_gate.weight", &L.w1, TensorClass::kFfn},       {"ffn_down.weight", &L.w2, TensorClass::kFfn},
        {"ffn_up.weight", &L.w3, TensorClass::kFfn},
    };
    for (auto& m : mats) {
      llama_tensor_name(name, sizeof name, l, m.suffix);
      MC_TRY(matrix(f, name, arena, m.cls, m.m));
    }
    llama_tensor_name(name, sizeof name, l, "attn_norm.weight");
    MC_TRY(vector(f, name, c.dim, arena, &L.attn_norm));
    llama_tensor_name(name, sizeof name, l, "ffn_norm.weight");
    MC_TRY(vector(f, name, c.dim, arena, &L.ffn_norm));
  }
  return model->check_shapes();
}

}  // namespace mcullm
