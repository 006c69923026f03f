#include "format/gguf_model.h"

#include <inttypes.h>
#include <stdio.h>

#include "quant/blocks.h"
#include "quant/ternary.h"

namespace mcullm {

void llama_tensor_name(char* out, int size, int layer, const char* suffix) {
  snprintf(out, static_cast<size_t>(size), "blk.%d.%s", layer, suffix);
}

Status gguf_expect_arch(const GgufFile& f, const char* const* accepted, int count, int* index) {
  GgufStr arch;
  MC_TRY(f.get_string("general.architecture", &arch));
  char names[160] = "";
  size_t used = 0;
  for (int i = 0; i < count; ++i) {
    if (arch.equals(accepted[i])) {
      if (index) *index = i;
      return Status::Ok();
    }
    const int w = snprintf(names + used, sizeof names - used, "%s'%s'", i == 0 ? "" : (i + 1 == count ? " and " : ", "),
                           accepted[i]);
    if (w > 0 && used + static_cast<size_t>(w) < sizeof names) used += static_cast<size_t>(w);
  }
  return Status::Error(Code::kUnsupported, "architecture '%.*s' (this loader reads %s)",
                       static_cast<int>(arch.size < 64 ? arch.size : 64), arch.data, names);
}

namespace {

Status get_dim(const GgufFile& f, const char* prefix, const char* key, bool required, int* out) {
  char full[96];
  snprintf(full, sizeof full, "%s.%s", prefix, key);
  if (!required && !f.find_kv(full)) return Status::Ok();
  uint32_t v = 0;
  MC_TRY(f.get_u32(full, &v));
  if (v == 0 || v > (1u << 30)) return Status::Error(Code::kCorrupt, "%s = %" PRIu32 " is out of range", full, v);
  *out = static_cast<int>(v);
  return Status::Ok();
}

Status get_float(const GgufFile& f, const char* prefix, const char* key, float* out) {
  char full[96];
  snprintf(full, sizeof full, "%s.%s", prefix, key);
  if (!f.find_kv(full)) return Status::Ok();
  return f.get_f32(full, out);
}

}  // namespace

Status gguf_read_config(const GgufFile& f, const char* p, LlamaConfig* out) {
  LlamaConfig c = *out;
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
  *out = c;
  return Status::Ok();
}

Status gguf_matrix(const GgufFile& f, const char* name, Arena& arena, TensorClass cls, MatRef* out) {
  const GgufTensor* t = f.find_tensor(name);
  if (!t) return Status::Error(Code::kNotFound, "tensor %s is missing", name);
  if (t->n_dims != 2 || t->ne[0] > (1 << 30) || t->ne[1] > (1 << 30))
    return Status::Error(Code::kCorrupt, "tensor %s has %" PRIu32 " dimensions, a matrix has 2", name, t->n_dims);
  out->type = t->type;
  out->data = t->data;
  out->cols = static_cast<int>(t->ne[0]);
  out->rows = static_cast<int>(t->ne[1]);
  out->row_bytes = dtype_row_bytes(t->type, t->ne[0]);
  if (t->type == DType::kI2_S) out->scale = i2s_tensor_scale(t->data, t->ne[1], t->ne[0]);  // open() checked the tail
  TlType tl;
  if (tl_dtype_type(t->type, &tl)) MC_TRY(gguf_tl_matrix(*t, name, tl, arena, out));
  arena.note_mapped(static_cast<size_t>(t->nbytes), cls);
  return Status::Ok();
}

Status gguf_tl_matrix(const GgufTensor& t, const char* name, TlType type, Arena& arena, MatRef* out) {
  // open() checked nbytes = rows * tl_file_row_bytes + the 32-byte tail against the file.
  const size_t packed = static_cast<size_t>(t.nbytes) - kTlFileTailBytes;
  TlTiling tiling;
  float scale = 0.0f;
  if (!tl_file_tail_read(t.data + packed, type, t.ne[1], t.ne[0], &scale, &tiling))
    return Status::Error(Code::kCorrupt,
                         "tensor %s: the %s tail (scale, BM, BK, bm, zeros) does not describe a tiling of %lldx%lld "
                         "(quant/ternary.h)",
                         name, tl_type_name(type), static_cast<long long>(t.ne[1]), static_cast<long long>(t.ne[0]));
  if (!(scale >= 0.0f && scale < 1e30f))
    return Status::Error(Code::kCorrupt, "tensor %s has scale %g", name, static_cast<double>(scale));
  TlTensor* tt = nullptr;
  MC_TRY(arena.alloc_array(1, TensorClass::kOther, &tt));
  *tt = TlTensor();
  if (!tl_tensor_init_packed(tt, type, t.data, packed, out->rows, out->cols, tiling, scale))
    return Status::Error(Code::kCorrupt, "tensor %s: %zu packed bytes do not hold a %s %dx%d tensor", name, packed,
                         tl_type_name(type), out->rows, out->cols);
  out->scale = scale;
  out->tl = tt;
  return Status::Ok();
}

Status gguf_norm(const GgufFile& f, const char* name, int n, Arena& arena, const float** out) {
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

Status gguf_embedding_head(const GgufFile& f, int dim, Arena& arena, MatRef* tok_emb, MatRef* output, bool* tied,
                           const float** out_norm) {
  MC_TRY(gguf_matrix(f, "token_embd.weight", arena, TensorClass::kEmbedding, tok_emb));
  *tied = f.find_tensor("output.weight") == nullptr;
  if (*tied) {
    *output = *tok_emb;
  } else {
    MC_TRY(gguf_matrix(f, "output.weight", arena, TensorClass::kHead, output));
  }
  return gguf_norm(f, "output_norm.weight", dim, arena, out_norm);
}

Status gguf_layer_matrices(const GgufFile& f, int layer, Arena& arena, MatRef* const mats[7], bool ternary) {
  static const char* const kSuffix[7] = {"attn_q.weight",   "attn_k.weight",   "attn_v.weight", "attn_output.weight",
                                         "ffn_gate.weight", "ffn_down.weight", "ffn_up.weight"};
  char name[64];
  for (int i = 0; i < 7; ++i) {
    llama_tensor_name(name, sizeof name, layer, kSuffix[i]);
    *mats[i] = MatRef();
    MC_TRY(gguf_matrix(f, name, arena, i < 4 ? TensorClass::kAttention : TensorClass::kFfn, mats[i]));
    if (!ternary) continue;
    if (mats[i]->type != DType::kI2_S && !mats[i]->tl)
      return Status::Error(Code::kUnsupported, "tensor %s is %s; expected i2_s, tl1 or tl2 (ternary)", name,
                           dtype_info(mats[i]->type)->name);
    if (!(mats[i]->scale >= 0.0f && mats[i]->scale < 1e30f))
      return Status::Error(Code::kCorrupt, "tensor %s has scale %g", name, static_cast<double>(mats[i]->scale));
  }
  return Status::Ok();
}

}  // namespace mcullm
