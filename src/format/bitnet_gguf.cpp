#include "format/bitnet_gguf.h"

#include "format/gguf_model.h"

namespace mcullm {

bool bitnet_gguf_arch(const GgufStr& arch) { return arch.equals(kBitnetArch) || arch.equals(kBitnet25Arch); }

Status bitnet_from_gguf(const GgufFile& f, Arena& arena, BitnetModel* model) {
  static const char* const kArch[] = {kBitnetArch, kBitnet25Arch};
  int which = 0;
  MC_TRY(gguf_expect_arch(f, kArch, 2, &which));
  const bool b25 = which == 1;
  *model = BitnetModel();
  model->spec = bitnet_spec(b25);
  LlamaConfig& c = model->cfg;
  MC_TRY(gguf_read_config(f, kArch[which], &c));
  MC_TRY(gguf_embedding_head(f, c.dim, arena, &model->tok_emb, &model->output, &model->tied_output, &model->out_norm));
  MC_TRY(arena.alloc_array(static_cast<size_t>(c.n_layers), TensorClass::kOther, &model->layers));
  for (int l = 0; l < c.n_layers; ++l) {
    BitnetLayer& L = model->layers[l];
    L = BitnetLayer();
    MC_TRY(gguf_layer_matrices(f, l, arena, L));
    MC_TRY(gguf_layer_norm(f, l, "attn_norm.weight", c.dim, arena, &L.attn_norm));
    MC_TRY(gguf_layer_norm(f, l, "attn_sub_norm.weight", c.dim, arena, &L.attn_sub_norm));
    MC_TRY(gguf_layer_norm(f, l, "ffn_norm.weight", c.dim, arena, &L.ffn_norm));
    MC_TRY(gguf_layer_norm(f, l, "ffn_sub_norm.weight", c.hidden_dim, arena, &L.ffn_sub_norm));
  }
  return model->check_shapes();
}

}  // namespace mcullm
