// Qwen2 (llama.cpp's `qwen2` architecture) as a configuration of the transformer runner
// (model/transformer_runner.h): biases on the q, k and v projections, RoPE on the pairs
// (i, i + head_dim/2) of each head (llama.cpp's NEOX mode), SwiGLU, a tied or separate head.
// The seven linear matrices of every layer are either all ternary (as model/bitnet.h) or all dense
// (as model/llama.h), so that small models can be checked against a float reference. A model may
// hold only some of its layers (a cluster node's slice, TransformerSlice).
#pragma once
#include "model/transformer_runner.h"

namespace mcullm {

using Qwen2Layer = TransformerLayer;
using Qwen2Model = TransformerModel;
using Qwen2Context = TransformerContext;
using Qwen2Slice = TransformerSlice;

constexpr BlockSpec qwen2_spec(bool ternary) {
  BlockSpec s;
  s.rope = RopeStyle::kNeox;
  s.ternary = ternary;
  s.qkv_bias = true;
  return s;
}

}  // namespace mcullm
