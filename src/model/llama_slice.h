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

// What identifies a slice across processes and machines (a node's hello, a per-node board image, a
// master's node plan): FNV-1a 64 over the config, the block spec, the range and its two flags, then
// every tensor the slice reads (type, shape, scale, group, rows, group scales) in model order:
// embedding, layers (norms, biases, the seven matrices), final norm and head (the embedding's matrix
// again when tied). The one definition for every architecture, PC and board: two nodes agree on it
// exactly when they would compute the same bits. It reads the weights once (about 1 ms per MB).
uint64_t slice_hash(const TransformerModel& m, int first, int end, bool embedding, bool head);
// A cluster range of a whole (or covering) model: the master's part is embedding + head.
uint64_t slice_hash(const TransformerModel& m, const SliceRange& r);
// Everything a part model holds ([first_layer, end()), its embedding and head flags).
uint64_t slice_hash(const TransformerModel& part);

}  // namespace mcullm
