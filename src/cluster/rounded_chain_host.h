// The cluster's arithmetic in one process, without links: embed, then each layer range in turn
// with the hidden state rounded through the link encoding (f32 / f16 / int8, as frames carry it)
// after the embedding and after every range, then the head. With f32 it is Decoder::forward bit
// for bit; with f16 / int8 it is what a cluster of the same cuts must give (`mcullm cluster --simulate`).
#pragma once
#include <memory>
#include <vector>

#include "cluster/hidden_codec.h"
#include "cluster/slice_source_host.h"
#include "model/decoder.h"

namespace mcullm::cluster {

// x[dim] encoded as the hidden frames of e would carry it and decoded again.
Status round_hidden(HiddenEncoding e, float* x, uint32_t dim);

class RoundedChain final : public Decoder {
 public:
  // ranges: consecutive layer ranges covering the model (e.g. even_plan's).
  Status init(SliceSource* source, const std::vector<SliceRange>& ranges, HiddenEncoding e, int ctx_len, ThreadPool* pool,
              const KernelSet* kernels);
  Status forward(int token, int pos, const float** logits) override;
  int vocab_size() const override { return master_->slice().vocab_size(); }
  int ctx_len() const override { return master_->slice().ctx_len(); }

 private:
  HiddenEncoding enc_ = HiddenEncoding::kF32;
  std::unique_ptr<SliceInstance> master_;
  std::vector<std::unique_ptr<SliceInstance>> ranges_;
  std::vector<float> hidden_;
};

}  // namespace mcullm::cluster
