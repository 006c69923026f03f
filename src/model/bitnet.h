// BitNet b1.58 as llama.cpp / bitnet.cpp name it in GGUF, as configurations of the transformer
// runner (model/transformer_runner.h): architecture `bitnet` (bitnet.cpp's dummy models, the
// 0.7B-3B research models) and `bitnet-25` (microsoft's 2B-4T model). Ternary linear layers and the
// two sub-norms (attn_sub_norm before wo, ffn_sub_norm over the hidden width before down).
// act = SiLU for `bitnet`, squared ReLU (max(0, g)^2) for `bitnet-25`. RoPE: `bitnet` rotates the
// pairs (i, i + head_dim/2) of each head (llama.cpp's NEOX mode); `bitnet-25` adjacent pairs
// (llama.cpp's NORM mode, as our llama model; not checked against a real 2B-4T file here).
//
// Every ternary matrix is i2_s, tl1 or tl2 with its per-tensor scale; its input is quantized as bitnet.cpp's
// I2_S path does (quantize_i8s: one scale 127 / max|x| per token). The matvec is the exact integer
// kernel (matvec_i2s, or the LUT kernels for tl1 / tl2 weights: model/ternary_lut.h, the same bits as
// i2_s), so the result is the same bits for any kernel table, packing and thread count; float
// parts (norms, attention, head) follow kernels.h's reduction order. The int32 sum is scaled as
// isum * (w_scale * (1 / s)), where bitnet.cpp computes isum / s * w_scale: results can differ from
// bitnet.cpp's in the last bits.
#pragma once
#include "model/transformer_runner.h"

namespace mcullm {

using BitnetLayer = TransformerLayer;
using BitnetModel = TransformerModel;
using BitnetContext = TransformerContext;

// `bitnet` (b25 false) or `bitnet-25`.
constexpr BlockSpec bitnet_spec(bool b25) {
  BlockSpec s;
  s.rope = b25 ? RopeStyle::kAdjacent : RopeStyle::kNeox;
  s.act = b25 ? FfnAct::kReluSqr : FfnAct::kSilu;
  s.ternary = true;
  s.sub_norms = true;
  return s;
}

}  // namespace mcullm
