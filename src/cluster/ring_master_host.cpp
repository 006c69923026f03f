#include "cluster/ring_master_host.h"

#include <cstdio>

namespace mcullm::cluster {

struct RingMaster::Wired {
  std::unique_ptr<board::TransportSpiLink> spi;
  std::vector<uint8_t> mem;  // the frame link's buffers, the master's embedding / head work and hidden state
  Arena arena;
  board::FrameLink link;
  board::Master master;
};

RingMaster::RingMaster(const LlamaModel* model, ThreadPool* pool, const KernelSet* kernels, RingOptions opt)
    : model_(model), pool_(pool), kernels_(kernels), opt_(std::move(opt)) {
  opt_.master.nodes = static_cast<int>(opt_.ranges.size());
  opt_.master.node_ranges = opt_.ranges.data();
}

RingMaster::~RingMaster() = default;

int RingMaster::ctx_len() const { return opt_.master.ctx_len > 0 ? opt_.master.ctx_len : model_->cfg.seq_len; }

uint32_t RingMaster::resends() const { return old_resends_ + (ring_ ? ring_->master.resends() : 0); }

std::string RingMaster::plan_text() const {
  std::string s = "ring master";
  for (size_t k = 0; k < opt_.ranges.size(); ++k)
    s += " -> node " + std::to_string(k + 1) + " (layers " + std::to_string(opt_.ranges[k].first) + ":" + std::to_string(opt_.ranges[k].end) + ")";
  return s + " -> master";
}

Status RingMaster::build() {
  if (ring_) old_resends_ += ring_->master.resends();
  ring_.reset();  // closes the old ring's links first
  std::unique_ptr<Transport> to_first, from_last;
  MC_TRY(opt_.wire(&to_first, &from_last));
  auto w = std::make_unique<Wired>();
  w->spi = std::make_unique<board::TransportSpiLink>(std::move(to_first), std::move(from_last));
  const size_t bytes = 2 * kMaxFrameBytes + llama_slice_work_bytes(model_->cfg, SliceRange{0, 0, true}, ctx_len(), KvType::kF32) +
                       static_cast<size_t>(model_->cfg.dim) * sizeof(float) + 4096;
  w->mem.resize(bytes);
  w->arena.reset(Tier::kHost, w->mem.data(), w->mem.size());
  MC_TRY(w->link.init(*w->spi, w->arena));
  MC_TRY(w->master.init(model_, w->link, w->arena, pool_, kernels_, opt_.master));
  MC_TRY(w->master.connect());
  ring_ = std::move(w);
  return Status::Ok();
}

Status RingMaster::start() { return build(); }

Status RingMaster::forward(int token, int pos, const float** logits) {
  if (!ring_) return Status::Error(Code::kInvalidArgument, "the ring is not connected (start() failed or was not called)");
  // Checked here, not by a node: a bad position is the caller's error, not a broken ring.
  if (pos < 0 || pos >= ctx_len()) return Status::Error(Code::kInvalidArgument, "position %d is outside the context of %d", pos, ctx_len());
  if (pos > static_cast<int>(history_.size()))
    return Status::Error(Code::kInvalidArgument, "position %d: the ring's story has %zu positions", pos, history_.size());
  history_.resize(static_cast<size_t>(pos));
  Status st = ring_->master.forward(token, pos, logits);
  while (!st.ok() && opt_.rebuild && st.code() != Code::kInvalidArgument) {
    if (rebuilds_ >= opt_.max_rebuilds)
      return st.prefix("the ring failed %d times (giving up): ", rebuilds_ + 1);
    ++rebuilds_;
    const std::string why = st.message();
    if (opt_.log)
      opt_.log("the ring is broken at position " + std::to_string(pos) + " (" + why +
               "; a ring cannot tell which node: every node is replaced): rebuilding the ring");
    st = build();
    const float* ignored = nullptr;
    for (int p = 0; st.ok() && p < pos; ++p) st = ring_->master.forward(history_[static_cast<size_t>(p)], p, &ignored);
    if (st.ok()) {
      if (opt_.log)
        opt_.log("the ring was rebuilt (" + std::to_string(opt_.ranges.size()) + " nodes), " + std::to_string(pos) +
                 " position(s) replayed; continuing at position " + std::to_string(pos));
      st = ring_->master.forward(token, pos, logits);
    }
  }
  if (!st.ok()) return st.prefix("ring (%s): ", opt_.rebuild ? "rebuilding did not help" : "a silent or closed ring could be any node");
  history_.push_back(token);
  return Status::Ok();
}

}  // namespace mcullm::cluster
