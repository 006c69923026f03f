// The llama architecture as a configuration of the transformer runner (model/transformer_runner.h):
// RoPE on adjacent pairs (llama2.c, llama.cpp's NORM mode), dense linear layers, SwiGLU or a
// ReLU-gated FFN (h = relu(gate x) * (up x), run gate first by model/sparse_ffn.h when down has an
// f32 transposed copy: llama_build_sparse_ffn), tied or separate head.
#pragma once
#include "model/transformer_runner.h"

namespace mcullm {

using LlamaLayer = TransformerLayer;
using LlamaModel = TransformerModel;
using LlamaContext = TransformerContext;

constexpr BlockSpec llama_spec(FfnAct act = FfnAct::kSilu) {
  BlockSpec s;
  s.rope = RopeStyle::kAdjacent;
  s.act = act;
  return s;
}

inline Status llama_build_sparse_ffn(LlamaModel* m, Arena& arena) { return build_sparse_ffn(m, arena); }

}  // namespace mcullm
