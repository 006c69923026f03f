// The hello a master or node sends about a slice (freestanding: the PC's master and node and the
// board's both send it).
#pragma once
#include "cluster/frame.h"
#include "model/llama_slice.h"

namespace mcullm {

// The hello a master or node sends about range r of a model of config c: its layers, the model's
// size, ctx_len (<= 0: the model's own) and every capability; the caller adds what only one side says
// (a node's max_streams and slice hash).
cluster::Hello slice_hello(cluster::NodeRole role, const LlamaConfig& c, const SliceRange& r, int ctx_len);

}  // namespace mcullm
