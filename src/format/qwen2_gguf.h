// Qwen2 models from GGUF as llama.cpp names them: architecture "qwen2", keys qwen2.embedding_length,
// .feed_forward_length, .block_count, .context_length, .attention.head_count, [.attention.head_count_kv],
// [.attention.layer_norm_rms_epsilon] (default 1e-6), [.rope.freq_base] (default 1e6); tensors
// token_embd.weight, output_norm.weight, [output.weight] (absent: tied to the embedding), and per
// layer blk.N.{attn_norm, ffn_norm}.weight, blk.N.{attn_q, attn_k, attn_v}.{weight, bias},
// blk.N.{attn_output, ffn_gate, ffn_down, ffn_up}.weight: all ternary (i2_s / tl1 / tl2) or all
// dense. Weights stay in the file's bytes.
#pragma once
#include "format/gguf.h"
#include "model/qwen2.h"

namespace mcullm {

constexpr const char* kQwen2Arch = "qwen2";

// The whole model.
Status qwen2_from_gguf(const GgufFile& file, Arena& arena, Qwen2Model* model);

// Only layers [first, end) and, when asked, the embedding and / or the final norm and head: the
// other tensors are not looked at (a tied head reads token_embd.weight). end < 0: the last layer. `layers` (end - first
// entries) comes from `arena`.
Status qwen2_part_from_gguf(const GgufFile& file, Arena& arena, int first, int end, bool embedding, bool head,
                            Qwen2Model* model);

}  // namespace mcullm
