#include "format/bitllama2c_gguf.h"

#include "format/llama_gguf.h"
#include "quant/ternary.h"

namespace mcullm {

namespace {

Status get_dim(const GgufFile& f, const char* key, int* out) {
  uint32_t v = 0;
  MC_TRY(f.get_u32(key, &v));
  if (v == 0 || v > (1u << 30)) return Status::Error(Code::kCorrupt, "%s = %u is out of range", key, v);
  *out = static_cast<int>(v);
  return Status::Ok();
}

Status tensor_2d(const GgufFile& f, const char* name, const GgufTensor** out) {
  const GgufTensor* t = f.find_tensor(name);
  if (!t) return Status::Error(Code::kNotFound, "tensor %s is missing", name);
  if (t->n_dims != 2 || t->ne[0] > (1 << 30) || t->ne[1] > (1 << 30))
    return Status::Error(Code::kCorrupt, "tensor %s should be a matrix", name);
  *out = t;
  return Status::Ok();
}

Status ternary_matrix(const GgufFile& f, const char* name, Arena& arena, TensorClass cls, MatRef* out) {
  const GgufTensor* t = nullptr;
  MC_TRY(tensor_2d(f, name, &t));
  if (t->type != DType::kI2_S)
    return Status::Error(Code::kUnsupported, "tensor %s is %s; BitLinear layers read i2_s", name, dtype_info(t->type)->name);
  out->type = t->type;
  out->data = t->data;
  out->cols = static_cast<int>(t->ne[0]);
  out->rows = static_cast<int>(t->ne[1]);
  out->row_bytes = dtype_row_bytes(t->type, t->ne[0]);
  out->scale = i2s_tensor_scale(t->data, t->ne[1], t->ne[0]);  // open() checked the tail is in the file
  if (!(out->scale >= 0.0f && out->scale < 1e30f))
    return Status::Error(Code::kCorrupt, "tensor %s has scale %g", name, out->scale);
  arena.note_mapped(static_cast<size_t>(t->nbytes), cls);
  return Status::Ok();
}

Status f32_data(const GgufTensor* t, const char* name, const float** out) {
  if (t->type != DType::kF32) return Status::Error(Code::kUnsupported, "tensor %s is %s, expected f32", name, dtype_info(t->type)->name);
  if (reinterpret_cast<uintptr_t>(t->data) % 4 != 0) return Status::Error(Code::kCorrupt, "tensor %s is not 4-byte aligned", name);
  *out = reinterpret_cast<const float*>(t->data);
  return Status::Ok();
}

}  // namespace

Status bitllama2c_from_gguf(const GgufFile& f, Arena& arena, BitLlama2cModel* model) {
  GgufStr arch;
  MC_TRY(f.get_string("general.architecture", &arch));
  if (!arch.equals(kBitLlama2cArch))
    return Status::Error(Code::kUnsupported, "architecture '%.*s' (this loader reads '%s')",
                         static_cast<int>(arch.size < 64 ? arch.size : 64), arch.data, kBitLlama2cArch);
  *model = BitLlama2cModel();
  LlamaConfig& c = model->cfg;
  MC_TRY(get_dim(f, "bitllama2c.embedding_length", &c.dim));
  MC_TRY(get_dim(f, "bitllama2c.feed_forward_length", &c.hidden_dim));
  MC_TRY(get_dim(f, "bitllama2c.block_count", &c.n_layers));
  MC_TRY(get_dim(f, "bitllama2c.attention.head_count", &c.n_heads));
  MC_TRY(get_dim(f, "bitllama2c.attention.head_count_kv", &c.n_kv_heads));
  MC_TRY(get_dim(f, "bitllama2c.context_length", &c.seq_len));
  MC_TRY(f.get_f32("bitllama2c.attention.layer_norm_rms_epsilon", &c.norm_eps));
  MC_TRY(f.get_f32("bitllama2c.rope.freq_base", &c.rope_theta));
  const GgufTensor* emb = nullptr;
  MC_TRY(tensor_2d(f, "token_embd.weight", &emb));
  c.vocab_size = static_cast<int>(emb->ne[1]);
  MC_TRY(c.validate());

  const float* e = nullptr;
  MC_TRY(f32_data(emb, "token_embd.weight", &e));
  if (emb->ne[0] != c.dim) return Status::Error(Code::kCorrupt, "token_embd.weight has %lld columns, dim is %d",
                                                static_cast<long long>(emb->ne[0]), c.dim);
  model->tok_emb = f32_matrix(e, c.vocab_size, c.dim);
  model->output = model->tok_emb;
  arena.note_mapped(static_cast<size_t>(emb->nbytes), TensorClass::kEmbedding);
  const GgufTensor* norm = f.find_tensor("output_norm.weight");
  if (!norm) return Status::Error(Code::kNotFound, "tensor output_norm.weight is missing");
  if (norm->n_dims != 1 || norm->ne[0] != c.dim)
    return Status::Error(Code::kCorrupt, "tensor output_norm.weight should be a vector of %d values", c.dim);
  MC_TRY(f32_data(norm, "output_norm.weight", &model->out_norm));
  arena.note_mapped(static_cast<size_t>(norm->nbytes), TensorClass::kNorm);

  MC_TRY(arena.alloc_array(static_cast<size_t>(c.n_layers), TensorClass::kOther, &model->layers));
  char name[64];
  for (int l = 0; l < c.n_layers; ++l) {
    BitLlama2cLayer& L = model->layers[l];
    L = BitLlama2cLayer();
    struct { const char* suffix; MatRef* m; TensorClass cls; } mats[] = {
        {"attn_q.weight", &L.wq, TensorClass::kAttention}, {"attn_k.weight", &L.wk, TensorClass::kAttention},
        {"attn_v.weight", &L.wv, TensorClass::kAttention}, {"attn_output.weight", &L.wo, TensorClass::kAttention},
        {"ffn_gate.weight", &L.w1, TensorClass::kFfn},     {"ffn_down.weight", &L.w2, TensorClass::kFfn},
        {"ffn_up.weight", &L.w3, TensorClass::kFfn},
    };
    for (auto& m : mats) {
      llama_tensor_name(name, sizeof name, l, m.suffix);
      MC_TRY(ternary_matrix(f, name, arena, m.cls, m.m));
    }
  }
  return model->check_shapes();
}

}  // namespace mcullm
