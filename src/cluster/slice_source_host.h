// A model file opened for the cluster: the master and every node cut their slices (model/layer_slice.h)
// out of it. Layers outside a slice are never read (the file is memory-mapped), so a node holding
// layers 8:12 of a 24-layer model pages in those four layers only. One SliceInstance is one
// sequence's KV cache over the shared weights (a node makes one per stream).
#pragma once
#include <stdint.h>

#include <memory>
#include <string>

#include "core/thread_pool.h"
#include "host/model_loader.h"
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
  // The model at `path` (llama-family models today: llama2.c files and llama GGUFs, e.g. stories260K
  // and `mcullm dummy`); other architectures are refused with a message that says so.
  static Status open(const std::string& path, const LoadOptions& opt, std::unique_ptr<SliceSource>* out);

  const LlamaConfig& config() const { return lm_->model.cfg; }
  const LoadedModel& loaded() const { return *lm_; }
  // llama_slice_hash of the range (computed once per range, then remembered).
  uint64_t hash(const SliceRange& r);
  // A slice with its own arena (KV cache of ctx_len positions, 0 = the model's).
  Status make(const SliceRange& r, int ctx_len, ThreadPool* pool, const KernelSet* kernels, std::unique_ptr<SliceInstance>* out) const;

 private:
  std::unique_ptr<LoadedModel> lm_;
  SliceRange hashed_;
  uint64_t hash_ = 0;
  bool have_hash_ = false;
};

// "A:B" -> layers [A, B); an error naming `what` otherwise.
Status parse_layer_range(const std::string& text, const char* what, SliceRange* out);

}  // namespace mcullm
