// Loading one slice of a model for a cluster node or master (model/layer_slice.h, docs/cluster.md):
// layers [first, end) and, when asked, the token embedding and / or the final norm and head. Only
// those tensors are read from the file: they are copied into memory the slice owns and the file is
// unmapped again, so the other layers' weights are never read, kept or counted. The KV cache covers
// the slice's layers only. Qwen2 models today.
//
//   std::unique_ptr<LoadedSlice> s;
//   SliceOptions o;            // ctx_len, kv type, batch, threads, kernels
//   MC_TRY(load_layer_slice("model.gguf", 4, 8, false, false, o, &s));
//   s->slice().run_layers(hidden, pos);   // the LayerSlice interface
//   s->weights().hash                     // what a master compares (slice_hash)
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "core/arena.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "model/arch.h"
#include "model/layer_slice.h"
#include "model/qwen2.h"

namespace mcullm {

// The slice's weights, owned, shared by every stream of a node.
struct SliceWeights {
  std::string path;
  const ArchInfo* arch = nullptr;         // its row (model/arch.h): qwen2, the ArchSlices::kRanges one
  std::unique_ptr<uint8_t[]> memory;      // backs `arena`: the copied tensors and the layer table
  Arena arena;                            // by class: embedding, attention, ffn, norm, head; other = tables
  Qwen2Model model;                       // holds [first, end) (+ embedding / head), points into `arena`
  uint64_t hash = 0;                      // slice_hash of this slice (model/llama_slice.h)
  size_t tensor_bytes = 0;                // bytes copied from the file
};

// One sequence's state over shared weights: the KV cache of the slice's layers and activations.
struct SliceStream {
  std::unique_ptr<uint8_t[]> memory;
  Arena work;  // kv_cache and activations
  Qwen2Slice qwen2;
  LayerSlice& slice() { return qwen2; }
};

struct SliceOptions {
  int ctx_len = 0;               // KV cache positions (0: the model's context)
  KvType kv = KvType::kF32;
  int batch = 0;                 // > 0: Qwen2Slice::run_layers_batch takes up to this many positions
  int threads = 1;               // of the pool a LoadedSlice owns
  const KernelSet* kernels = nullptr;  // nullptr: kernels_best()
};

// Reads the slice's tensors (checked as the whole-model loader checks them: shapes, types, biases,
// norms) and hashes them. Errors name the file; a range outside the model is kInvalidArgument.
Status load_slice_weights(const std::string& path, int first, int end, bool embedding, bool head,
                          std::unique_ptr<SliceWeights>* out);
// A stream over `w` (which must outlive it) running on `pool` with `kernels`.
Status make_slice_stream(const SliceWeights& w, const SliceOptions& opt, ThreadPool* pool, const KernelSet* kernels,
                         std::unique_ptr<SliceStream>* out);

// Weights, one stream and the pool it runs on: what a node serving one sequence needs.
class LoadedSlice {
 public:
  SliceWeights& weights() { return *weights_; }
  SliceStream& stream() { return *stream_; }
  LayerSlice& slice() { return stream_->slice(); }
  Qwen2Slice& qwen2() { return stream_->qwen2; }
  ThreadPool& pool() { return *pool_; }

 private:
  friend Status load_layer_slice(const std::string&, int, int, bool, bool, const SliceOptions&,
                                 std::unique_ptr<LoadedSlice>*);
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<SliceWeights> weights_;
  std::unique_ptr<SliceStream> stream_;
};

Status load_layer_slice(const std::string& path, int first, int end, bool embedding, bool head, const SliceOptions& opt,
                        std::unique_ptr<LoadedSlice>* out);

}  // namespace mcullm
