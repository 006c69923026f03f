#include "format/qwen2_gguf.h"

#include "format/gguf_model.h"

namespace mcullm {

Status qwen2_from_gguf(const GgufFile& f, Arena& arena, Qwen2Model* model) {
  return qwen2_part_from_gguf(f, arena, 0, -1, true, true, model);
}

Status qwen2_part_from_gguf(const GgufFile& f, Arena& arena, int first, int end, bool embedding, bool head,
                            Qwen2Model* model) {
  MC_TRY(gguf_expect_arch(f, &kQwen2Arch, 1, nullptr));
  *model = Qwen2Model();
  LlamaConfig& c = model->cfg;
  // Qwen2's defaults when the file leaves them out (its configs: rms_norm_eps 1e-6, rope_theta 1e6).
  const bool has_eps = f.find_kv("qwen2.attention.layer_norm_rms_epsilon") != nullptr;
  const bool has_theta = f.find_kv("qwen2.rope.freq_base") != nullptr;
  MC_TRY(gguf_read_config(f, kQwen2Arch, &c));
  if (!has_eps) c.norm_eps = 1e-6f;
  if (!has_theta) c.rope_theta = 1e6f;
  if (end < 0) end = c.n_layers;
  if (first < 0 || end < first || end > c.n_layers)
    return Status::Error(Code::kInvalidArgument, "layer range [%d, %d) is not inside the model's %d layers", first, end,
                         c.n_layers);
  model->first_layer = first;
  model->end_layer = end;
  model->has_embedding = embedding;
  model->has_head = head;
  MatRef emb;
  if (embedding || head) {
    // The embedding is read only when asked for, or for a tied head.
    const bool tied = f.find_tensor("output.weight") == nullptr;
    if (embedding || tied) MC_TRY(gguf_matrix(f, "token_embd.weight", arena, TensorClass::kEmbedding, &emb));
    if (embedding) model->tok_emb = emb;
    if (head) {
      model->tied_output = tied;
      if (tied)
        model->output = emb;
      else
        MC_TRY(gguf_matrix(f, "output.weight", arena, TensorClass::kHead, &model->output));
      MC_TRY(gguf_norm(f, "output_norm.weight", c.dim, arena, &model->out_norm));
    }
  }
  const int n = end - first;
  if (n > 0) MC_TRY(arena.alloc_array(static_cast<size_t>(n), TensorClass::kOther, &model->layers));
  for (int l = first; l < end; ++l) {
    Qwen2Layer& L = model->layers[l - first];
    L = Qwen2Layer();
    MC_TRY(gguf_layer_matrices(f, l, arena, L));
    MC_TRY(gguf_layer_norm(f, l, "attn_norm.weight", c.dim, arena, &L.attn_norm));
    MC_TRY(gguf_layer_norm(f, l, "ffn_norm.weight", c.dim, arena, &L.ffn_norm));
    MC_TRY(gguf_layer_norm(f, l, "attn_q.bias", c.dim, arena, &L.bq));
    MC_TRY(gguf_layer_norm(f, l, "attn_k.bias", c.kv_dim(), arena, &L.bk));
    MC_TRY(gguf_layer_norm(f, l, "attn_v.bias", c.kv_dim(), arena, &L.bv));
  }
  // The kind of the linear layers: that of the first held layer's wq (check_shapes wants them all alike).
  const DType t0 = n > 0 ? model->layers[0].wq.type : DType::kI2_S;
  model->spec = qwen2_spec(t0 == DType::kI2_S || t0 == DType::kTL1 || t0 == DType::kTL2);
  return model->check_shapes();
}

}  // namespace mcullm
