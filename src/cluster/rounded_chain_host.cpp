#include "cluster/rounded_chain_host.h"

#include "cluster/frame.h"

namespace mcullm::cluster {

Status round_hidden(HiddenEncoding e, float* x, uint32_t dim) {
  uint8_t buf[kMaxPayloadBytes];
  const uint32_t frames = hidden_frame_count(e, dim);
  std::vector<float> out(dim);
  for (uint32_t c = 0; c < frames; ++c) {
    size_t len = 0;
    MC_TRY(encode_hidden_chunk(e, x, dim, c, buf, sizeof buf, &len));
    HiddenChunk h;
    MC_TRY(parse_hidden_chunk(buf, len, &h));
    MC_TRY(decode_hidden(h.encoding, h.data, h.data_bytes, h.count, out.data() + h.offset));
  }
  for (uint32_t i = 0; i < dim; ++i) x[i] = out[i];
  return Status::Ok();
}

Status RoundedChain::init(SliceSource* source, const std::vector<SliceRange>& ranges, HiddenEncoding e, int ctx_len,
                          ThreadPool* pool, const KernelSet* kernels) {
  enc_ = e;
  int next = 0;
  for (const SliceRange& r : ranges) {
    if (r.first != next) return Status::Error(Code::kInvalidArgument, "layer ranges must follow each other from 0 (%d:%d)", r.first, r.end);
    next = r.end;
    ranges_.emplace_back();
    MC_TRY(source->make(r, ctx_len, pool, kernels, &ranges_.back()));
  }
  if (next != source->config().n_layers)
    return Status::Error(Code::kInvalidArgument, "the layer ranges end at %d, the model has %d layers", next, source->config().n_layers);
  MC_TRY(source->make({0, 0, true}, ctx_len, pool, kernels, &master_));
  hidden_.resize(static_cast<size_t>(source->config().dim));
  return Status::Ok();
}

Status RoundedChain::forward(int token, int pos, const float** logits) {
  const uint32_t dim = static_cast<uint32_t>(hidden_.size());
  MC_TRY(master_->slice().embed(token, hidden_.data()));
  MC_TRY(round_hidden(enc_, hidden_.data(), dim));
  for (auto& r : ranges_) {
    MC_TRY(r->slice().run_layers(hidden_.data(), pos));
    MC_TRY(round_hidden(enc_, hidden_.data(), dim));
  }
  return master_->slice().head(hidden_.data(), logits);
}

}  // namespace mcullm::cluster
