// A llama-architecture model from a GGUF file, with llama.cpp's key and tensor names:
// llama.embedding_length, llama.block_count, ...; token_embd.weight, blk.N.attn_q.weight, ...
// Weights stay in the file's bytes; only tables (and norms stored as f16) go into the arena.
#pragma once
#include "format/gguf.h"
#include "model/llama.h"

namespace mcullm {

Status llama_from_gguf(const GgufFile& file, Arena& arena, LlamaModel* model);

// The tensor names llama.cpp uses for layer `layer` (buffer of at least 64 bytes).
void llama_tensor_name(char* out, int size, int layer, const char* suffix);

}  // namespace mcullm
