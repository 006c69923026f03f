#include "format/bitnet_gguf.h"

#include <stdio.h>

#include "format/llama_gguf.h"
#include "quant/blocks.h"
#include "quant/ternary.h"

namespace mcullm {

bool bitnet_gguf_arch(const GgufStr& arch) { return arch.equals(kBitnetArch) || arch.equals(kBitnet25Arch); }

namespace {

Status get_dim(const GgufFile& f, const char* prefix, const char* key, bool required, int* out) {
  char full[96];
  snprintf(full, sizeof full, "%s.%s", prefix, key);
  if (!required && !f.find_kv(full)) return Status::Ok();
  uint32_t v = 0;
  MC_TRY(f.get_u32(full, &v));
  if (v == 0 || v > (1u << 30)) return Status::Error(Code::kCorrupt, "%s = %u is out of range", full, v);
  *out = static_cast<int>(v);
  return Status::Ok();
}

Status get_float(const GgufFile& f, const char* prefix, const char* key, float* out) {
  char full[96];
  snprintf(full, sizeof full, "%s.%s", prefix, key);
  if (!f.find_kv(full)) return Status::Ok();
  return f.get_f32(full, out);
}

Status matrix(const GgufFile& f, const char* name, Arena& arena, TensorClass cls, MatRef* out) {
  const GgufTensor* t = f.find_tensor(name);
  if (!t) return Status::Error(Code::kNotFound, "tensor %s is missing", name);
  if (t->n_dims != 2 || t->ne[0] > (1 << 30) || t->ne[1] > (1 << 30))
    return Status::Error(Code::kCorrupt, "tensor %s has %u dimensions, a matrix has 2", name, t->n_dims);
  out->type = t->type;
  out->data = t->data;
  out->cols = static_cast<int>(t->ne[0]);
  out->rows = static_cast<int>(t->ne[1]);
  out->row_bytes = dtype_row_bytes(t->type, t->ne[0]);
  if (t->type == DType::kI2_S) out->scale = i2s_tensor_scale(t->data, t->ne[1], t->ne[0]);  // open() checked the tail
  arena.note_mapped(static_cast<size_t>(t->nbytes), cls);
  return Status::Ok();
}

// Norm weights as f32: in place when stored as aligned f32, else converted into the arena.
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

Status bitnet_from_gguf(const GgufFile& f, Arena& arena, BitnetModel* model) {
  GgufStr arch;
  MC_TRY(f.get_string("general.architecture", &arch));
  if (!bitnet_gguf_arch(arch))
    return Status::Error(Code::kUnsupported, "architecture '%.*s' (this loader reads 'bitnet' and 'bitnet-25')",
                         static_cast<int>(arch.size < 64 ? arch.size : 64), arch.data);
  const bool b25 = arch.equals(kBitnet25Arch);
  const char* p = b25 ? kBitnet25Arch : kBitnetArch;
  *model = BitnetModel();
  model->cfg.ffn = b25 ? BitnetFfn::kReluSqr : BitnetFfn::kSilu;
  model->cfg.rope = b25 ? RopeStyle::kAdjacent : RopeStyle::kNeox;
  LlamaConfig& c = model->cfg.base;
  MC_TRY(get_dim(f, p, "embedding_length", true, &c.dim));
  MC_TRY(get_dim(f, p, "feed_forward_length", true, &c.hidden_dim));
  MC_TRY(get_dim(f, p, "block_count", true, &c.n_layers));
  MC_TRY(get_dim(f, p, "attention.head_count", true, &c.n_heads));
  MC_TRY(get_dim(f, p, "context_length", true, &c.seq_len));
  c.n_kv_heads = c.n_heads;
  MC_TRY(get_dim(f, p, "attention.head_count_kv", false, &c.n_kv_heads));
  MC_TRY(get_float(f, p, "attention.layer_norm_rms_epsilon", &c.norm_eps));
  MC_TRY(get_float(f, p, "rope.freq_base", &c.rope_theta));
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
    BitnetLayer& L = model->layers[l];
    L = BitnetLayer();
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
    struct { const char* suffix; const float** v; int n; } norms[] = {
        {"attn_norm.weight", &L.attn_norm, c.dim},
        {"attn_sub_norm.weight", &L.attn_sub_norm, c.dim},
        {"ffn_norm.weight", &L.ffn_norm, c.dim},
        {"ffn_sub_norm.weight", &L.ffn_sub_norm, c.hidden_dim},
    };
    for (auto& n : norms) {
      llama_tensor_name(name, sizeof name, l, n.suffix);
      MC_TRY(vector(f, name, n.n, arena, n.v));
    }
  }
  return model->check_shapes();
}

}  // namespace mcullm
