// A llama model cut by layers (model/layer_slice.h) is a TransformerSlice over layers [first, end)
// of the loaded model: embed + run_layers of consecutive ranges + head give LlamaContext::forward's
// logits bit for bit (tests/llama_slice_test.cpp). Here: its arena size and its identity.
#pragma once
#include <stdint.h>

#include "model/layer_slice.h"
#include "model/llama.h"

namespace mcullm {

using LlamaSlice = TransformerSlice;

// Bytes a LlamaSlice::init over a model without w2_t takes from its arena (KV cache of the range's layers and activations).
size_t llama_slice_work_bytes(const LlamaConfig& c, const SliceRange& r, int ctx_len, KvType kv);

// What identifies a slice across processes: FNV-1a 64 over the config, the range and the bytes of
// every tensor the slice reads (types, shapes, scales, rows). Two nodes agree on it exactly when they
// would compute the same bits; it reads the slice's weights once (about 1 ms per MB).
uint64_t llama_slice_hash(const LlamaModel& m, const SliceRange& r);

}  // namespace mcullm
