// A llama-architecture model from a GGUF file, with llama.cpp's key and tensor names:
// llama.embedding_length, llama.block_count, ...; token_embd.weight, blk.N.attn_q.weight, ...
// Weights stay in the file's bytes; only tables (and norms stored as f16) go into the arena.
#pragma once
#include "format/gguf.h"
#include "format/gguf_model.h"
#include "model/llama.h"

namespace mcullm {

// The FFN activation (FfnAct): "relu" or "silu"; absent: SwiGLU. A ReLU model
// whose down matrices are f32 gets their transposed copies in `arena` (the sparse FFN).
constexpr const char* kLlamaFfnKey = "mcullm.ffn_activation";

Status llama_from_gguf(const GgufFile& file, Arena& arena, LlamaModel* model);

}  // namespace mcullm
