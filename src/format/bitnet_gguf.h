// BitNet b1.58 models from GGUF as llama.cpp / bitnet.cpp name them: architecture "bitnet"
// (bitnet.cpp's dummy models) or "bitnet-25" (microsoft's 2B-4T layout). Keys <arch>.embedding_length,
// .feed_forward_length, .block_count, .context_length, .attention.head_count, [.attention.head_count_kv],
// [.attention.layer_norm_rms_epsilon], [.rope.freq_base]. Tensors token_embd.weight, output_norm.weight,
// [output.weight] (absent: tied to the embedding), and per layer blk.N.{attn_norm, attn_sub_norm,
// ffn_norm, ffn_sub_norm}.weight and blk.N.{attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_down,
// ffn_up}.weight as i2_s (per-tensor scale in the tensor's 32-byte tail). Weights stay in the file.
#pragma once
#include "format/gguf.h"
#include "model/bitnet.h"

namespace mcullm {

constexpr const char* kBitnetArch = "bitnet";
constexpr const char* kBitnet25Arch = "bitnet-25";

// True for the architecture names this loader reads.
bool bitnet_gguf_arch(const GgufStr& arch);

Status bitnet_from_gguf(const GgufFile& file, Arena& arena, BitnetModel* model);

}  // namespace mcullm
