// A llama-family model cut by layers (model/layer_slice.h): one object runs layers [first, end)
// of a loaded LlamaModel with a KV cache of those layers only, and (the master's part) the
// embedding and the head. Weights outside the range are never read, so a memory-mapped file is
// only paged in where the slice reads it. embed + run_layers of consecutive ranges + head give
// LlamaContext::forward's logits bit for bit (tests/llama_slice_test.cpp).
#pragma once
#include <stdint.h>

#include "model/layer_slice.h"
#include "model/llama.h"

namespace mcullm {

struct SliceRange {
  int first = 0;          // layers [first, end)
  int end = 0;
  bool master = false;    // embedding, final norm and head
};

// Layers inside the model, first <= end, and a non-empty slice (layers or the master's part).
Status check_slice_range(const LlamaConfig& c, const SliceRange& r);

class LlamaSlice final : public LayerSlice {
 public:
  // ctx_len as LlamaContext::init (0 = the model's seq_len); the cache holds end - first layers.
  Status init(const LlamaModel* model, const SliceRange& range, int ctx_len, Arena& arena, ThreadPool* pool,
              const KernelSet* kernels, KvType kv = KvType::kF32);
  int dim() const override { return model_->cfg.dim; }
  int vocab_size() const override { return model_->cfg.vocab_size; }
  int ctx_len() const override { return s_.ctx_len; }
  int n_layers() const override { return model_->cfg.n_layers; }
  int first_layer() const override { return range_.first; }
  int end_layer() const override { return range_.end; }
  bool has_embedding() const override { return range_.master; }
  bool has_head() const override { return range_.master; }
  Status embed(int token, float* hidden) override;
  Status run_layers(float* hidden, int pos) override;
  Status head(const float* hidden, const float** logits) override;

 private:
  const LlamaModel* model_ = nullptr;
  SliceRange range_;
  ThreadPool* pool_ = nullptr;
  const KernelSet* kernels_ = nullptr;
  DecoderState s_;
};

// Bytes a LlamaSlice::init takes from its arena (KV cache of the range's layers and activations).
size_t llama_slice_work_bytes(const LlamaConfig& c, const SliceRange& r, int ctx_len, KvType kv);

// What identifies a slice across processes: FNV-1a 64 over the config, the range and the bytes of
// every tensor the slice reads (types, shapes, scales, rows). Two nodes agree on it exactly when they
// would compute the same bits; it reads the slice's weights once (about 1 ms per MB).
uint64_t llama_slice_hash(const LlamaModel& m, const SliceRange& r);

}  // namespace mcullm
