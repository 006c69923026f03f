// A model file opened for the cluster: the master and every node cut their slices (model/layer_slice.h)
// out of it. Layers outside a slice are never read (the file is memory-mapped), so a node holding
// layers 8:12 of a 24-layer model pages in those four layers only. One SliceInstance is one
// sequence's KV cache over the shared weights (a node makes one per stream).
#pragma once
#include <stdint.h>

#include <map>
#include <memory>
#include <string>

#include "cluster/frame.h"
#include "cluster/slice_hello.h"
#include "core/thread_pool.h"
#include "load/layer_slice_loader_host.h"
#include "load/model_loader_host.h"
#include "model/layer_slice.h"
#include "model/llama_slice.h"

namespace mcullm {

class SliceInstance {
 public:
  virtual ~SliceInstance() = default;
  virtual LayerSlice& slice() = 0;
};

class SliceSource {
 public:
  // The model at `path`: llama (llama2.c files and llama GGUFs, e.g. stories260K and `mcullm dummy`)
  // or qwen2 (`mcullm dummy --arch qwen2`); other architectures are refused with a message that says so.
  static Status open(const std::string& path, const LoadOptions& opt, std::unique_ptr<SliceSource>* out);
  // A node's source: the same, except that a qwen2 file is read one range at a time (hold(); only
  // that range's tensors are copied out of the file). A llama file is mapped whole as above: its
  // other layers' pages are mapped but never read.
  static Status open_node(const std::string& path, const LoadOptions& opt, const SliceRange& first,
                          std::unique_ptr<SliceSource>* out);
  // Makes r the range make() and hash() serve (a node's source reloads a qwen2 range; else nothing).
  Status hold(const SliceRange& r);

  const LlamaConfig& config() const { return part_ ? part_->model.cfg : lm_->model.cfg; }
  // The whole model (open(), not open_node()).
  const LoadedModel& loaded() const { return *lm_; }
  // What identifies the range's weights: slice_hash (model/llama_slice.h), the same whether the range
  // was read alone (open_node) or is part of the whole model, and the same as a board image's.
  // Remembered per range.
  uint64_t hash(const SliceRange& r);
  // A slice with its own arena (KV cache of ctx_len positions, 0 = the model's).
  Status make(const SliceRange& r, int ctx_len, ThreadPool* pool, const KernelSet* kernels, std::unique_ptr<SliceInstance>* out) const;

 private:
  // Sliced by ranges (ArchSlices::kRanges, qwen2), else mapped whole (kMapped, llama).
  bool qwen2() const { return part_ || lm_->arch->slices == ArchSlices::kRanges; }
  // The range of the whole qwen2 model as a part holding only it (pointers into the whole model).
  Qwen2Model qwen2_part(const SliceRange& r) const;

  std::unique_ptr<LoadedModel> lm_;        // the whole model, or
  std::unique_ptr<SliceWeights> part_;      // one qwen2 range (open_node)
  std::string path_;
  KvType kv_ = KvType::kF32;
  std::map<std::pair<int, int>, uint64_t> hashes_;  // by (first, end); master slices keyed (-1, -1)
};

// "A:B" -> layers [A, B); an error naming `what` otherwise.
Status parse_layer_range(const std::string& text, const char* what, SliceRange* out);

}  // namespace mcullm
