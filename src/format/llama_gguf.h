// A llama-architecture model from a GGUF file, with llama.cpp's key and tensor names:
// llama.embedding_length, llama.block_count, ...; token_embd.weight, blk.N.attn_q.weight, ...
// Weights stay in the file's bytes; only tables (and norms stored as f16) go into the arena.
#pragma once
#include "format/gguf.h"
#include "format/gguf_model.h"
#include "model/llama.h"

namespace mcullm {

Status llama_from_gguf(const GgufFile& file, Arena& arena, LlamaModel* model);

}  // namespace mcullm
