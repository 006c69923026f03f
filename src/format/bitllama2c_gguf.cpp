#include "format/bitllama2c_gguf.h"

#include "format/gguf_model.h"

namespace mcullm {

Status bitllama2c_from_gguf(const GgufFile& f, Arena& arena, BitLlama2cModel* model) {
  static const char* const kArch[] = {kBitLlama2cArch};
  MC_TRY(gguf_expect_arch(f, kArch, 1, nullptr));
  *model = BitLlama2cModel();
  LlamaConfig& c = model->cfg;
  MC_TRY(gguf_read_config(f, kBitLlama2cArch, &c));
  bool tied = true;  // the writer stores no output.weight: the classifier is the embedding
  MC_TRY(gguf_embedding_head(f, c.dim, arena, &model->tok_emb, &model->output, &tied, &model->out_norm));
  MC_TRY(arena.alloc_array(static_cast<size_t>(c.n_layers), TensorClass::kOther, &model->layers));
  for (int l = 0; l < c.n_layers; ++l) {
    model->layers[l] = BitLlama2cLayer();
    MC_TRY(gguf_layer_matrices(f, l, arena, model->layers[l], /*ternary=*/true));
  }
  return model->check_shapes();  // f32 embedding, i2_s BitLinear matrices
}

}  // namespace mcullm
