#include "format/llama_gguf.h"

namespace mcullm {

Status llama_from_gguf(const GgufFile& f, Arena& arena, LlamaModel* model) {
  static const char* const kArch[] = {"llama"};
  MC_TRY(gguf_expect_arch(f, kArch, 1, nullptr));
  *model = LlamaModel();
  model->spec = llama_spec();
  LlamaConfig& c = model->cfg;
  MC_TRY(gguf_read_config(f, "llama", &c));
  if (f.find_kv(kLlamaFfnKey)) {
    GgufStr act{"", 0};
    MC_TRY(f.get_string(kLlamaFfnKey, &act));
    if (act.equals("relu"))
      model->spec.act = FfnAct::kRelu;
    else if (!act.equals("silu") && !act.equals("swiglu"))
      return Status::Error(Code::kUnsupported, "%s \"%.*s\": only relu and silu FFNs exist", kLlamaFfnKey,
                           act.size > 32 ? 32 : static_cast<int>(act.size), act.data);
  }
  MC_TRY(gguf_embedding_head(f, c.dim, arena, &model->tok_emb, &model->output, &model->tied_output, &model->out_norm));
  MC_TRY(arena.alloc_array(static_cast<size_t>(c.n_layers), TensorClass::kOther, &model->layers));
  for (int l = 0; l < c.n_layers; ++l) {
    LlamaLayer& L = model->layers[l];
    L = LlamaLayer();
    MC_TRY(gguf_layer_matrices(f, l, arena, L));
    MC_TRY(gguf_layer_norm(f, l, "attn_norm.weight", c.dim, arena, &L.attn_norm));
    MC_TRY(gguf_layer_norm(f, l, "ffn_norm.weight", c.dim, arena, &L.ffn_norm));
  }
  MC_TRY(model->check_shapes());
  return llama_build_sparse_ffn(model, arena);
}

}  // namespace mcullm
