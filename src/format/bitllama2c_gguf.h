// The bitllama2.c BitLinear model in GGUF (what `mcullm convert` writes for it): architecture
// "bitllama2c" with llama.cpp-style names. Keys bitllama2c.embedding_length, .feed_forward_length,
// .block_count, .context_length, .attention.head_count, .attention.head_count_kv,
// .attention.layer_norm_rms_epsilon (the final norm's), .rope.freq_base. Tensors token_embd.weight
// (f32 [dim, vocab], also the classifier), output_norm.weight (f32 [dim]) and per layer
// blk.N.{attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_down, ffn_up}.weight as i2_s, each with
// its f32 scale in the tensor's tail (quant/ternary.h). No attention / FFN norm weights exist.
// Weights stay in the file's bytes.
#pragma once
#include "format/gguf.h"
#include "model/bitnet_llama2c.h"

namespace mcullm {

constexpr const char* kBitLlama2cArch = "bitllama2c";

Status bitllama2c_from_gguf(const GgufFile& file, Arena& arena, BitLlama2cModel* model);

}  // namespace mcullm
