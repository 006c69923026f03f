#include "cluster/ring_master_host.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace mcullm::cluster {

using State = board::AwaitedAnswer::State;

struct RingMaster::Wired {
  std::unique_ptr<board::TransportSpiLink> spi;
  std::vector<uint8_t> mem;  // the frame link's buffers, the master's embedding / head work and hidden state
  Arena arena;
  board::FrameLink link;
  board::Master master;
};

namespace {

// Bytes of a master part (embedding, head, no KV cache) and `extra_floats` more, with the arena's slack.
size_t master_part_bytes(const LlamaConfig& c, int ctx_len, size_t extra_floats) {
  return llama_slice_work_bytes(c, SliceRange{0, 0, true}, ctx_len, KvType::kF32) + extra_floats * sizeof(float) + 4096;
}

}  // namespace

RingMaster::RingMaster(const LlamaModel* model, ThreadPool* pool, const KernelSet* kernels, RingOptions opt)
    : model_(model), pool_(pool), kernels_(kernels), opt_(std::move(opt)) {
  opt_.master.nodes = static_cast<int>(opt_.ranges.size());
  opt_.master.node_ranges = opt_.ranges.data();
}

RingMaster::~RingMaster() { stop_receiving(); }

int RingMaster::ctx_len() const { return opt_.master.ctx_len > 0 ? opt_.master.ctx_len : model_->cfg.seq_len; }

int RingMaster::rebuilds() const {
  std::lock_guard<std::mutex> lk(mu_);
  return rebuilds_;
}

std::string RingMaster::plan_text() const {
  std::string s = "ring master";
  for (size_t k = 0; k < opt_.ranges.size(); ++k)
    s += " -> node " + std::to_string(k + 1) + " (layers " + std::to_string(opt_.ranges[k].first) + ":" + std::to_string(opt_.ranges[k].end) + ")";
  return s + " -> master";
}

void RingMaster::stop_receiving() {
  stop_receiving_ = true;
  if (receiver_.joinable()) receiver_.join();
  stop_receiving_ = false;
}

void RingMaster::receive_loop(Wired* ring) {
  const int n = static_cast<int>(awaited_.size());
  while (!stop_receiving_) {
    cluster::Frame f;
    bool got = false;
    const Status st = ring->link.receive(&f, &got, 50);
    if (st.ok() && !got) continue;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (st.ok() && f.header.type == FrameType::kReset) resets_back_.push_back(f.header.stream);
      else if (st.ok()) board::route_answer(f, awaited_.data(), n);
      else if (st.code() == Code::kCorrupt) board::route_corrupt(st, awaited_.data(), n);
      else broken_ = st;
    }
    cv_.notify_all();
    if (!st.ok() && st.code() != Code::kCorrupt) return;  // the ring is broken: a step rebuilds it
  }
}

Status RingMaster::build() {
  stop_receiving();
  ring_.reset();  // closes the old ring's links first
  std::unique_ptr<Transport> to_first, from_last;
  MC_TRY(opt_.wire(&to_first, &from_last));
  auto w = std::make_unique<Wired>();
  w->spi = std::make_unique<board::TransportSpiLink>(std::move(to_first), std::move(from_last));
  w->mem.resize(2 * kMaxFrameBytes + master_part_bytes(model_->cfg, ctx_len(), static_cast<size_t>(model_->cfg.dim)));
  w->arena.reset(Tier::kHost, w->mem.data(), w->mem.size());
  MC_TRY(w->link.init(*w->spi, w->arena));
  MC_TRY(w->master.init(model_, w->link, w->arena, pool_, kernels_, opt_.master));
  MC_TRY(w->master.connect());
  ring_ = std::move(w);
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (board::AwaitedAnswer& a : awaited_) a.state = State::kIdle;
    resets_back_.clear();
    broken_ = Status::Ok();
  }
  receiver_ = std::thread(&RingMaster::receive_loop, this, ring_.get());
  return Status::Ok();
}

Status RingMaster::start() {
  if (opt_.master.streams < 1 || opt_.master.streams > kMaxStreams)
    return Status::Error(Code::kInvalidArgument, "%d streams: a ring takes 1..%d", opt_.master.streams, kMaxStreams);
  awaited_.assign(static_cast<size_t>(opt_.master.streams), board::AwaitedAnswer());
  slot_open_.assign(awaited_.size(), false);
  return build();
}

Status RingMaster::open_stream(std::unique_ptr<RingStream>* out) {
  auto s = std::unique_ptr<RingStream>(new RingStream());
  {
    std::lock_guard<std::mutex> lk(mu_);
    size_t slot = 0;
    while (slot < slot_open_.size() && slot_open_[slot]) ++slot;
    if (slot == slot_open_.size())
      return Status::Error(Code::kInvalidArgument, "%zu streams are open: the ring was started for %d", slot_open_.size(),
                           opt_.master.streams);
    slot_open_[slot] = true;
    s->master_ = this;
    s->slot_ = static_cast<int>(slot);
    s->id_ = next_stream_++;
    s->epoch_ = epoch_;
  }
  const size_t dim = static_cast<size_t>(model_->cfg.dim);
  s->mem_.resize(master_part_bytes(model_->cfg, ctx_len(), 2 * dim));
  s->arena_.reset(Tier::kHost, s->mem_.data(), s->mem_.size());
  MC_TRY(s->local_.init(model_, SliceRange{0, 0, true}, ctx_len(), s->arena_, pool_, kernels_));
  MC_TRY(s->arena_.alloc_array(dim, TensorClass::kActivations, &s->sent_));
  MC_TRY(s->arena_.alloc_array(dim, TensorClass::kActivations, &s->answer_));
  *out = std::move(s);
  return Status::Ok();
}

void RingMaster::close_stream(RingStream& s) {
  std::unique_lock<std::mutex> lk(mu_);
  slot_open_[static_cast<size_t>(s.slot_)] = false;
  cv_.wait(lk, [&] { return !rebuilding_; });
  if (!ring_ || !broken_.ok() || s.tokens_.empty()) return;
  ++active_;
  lk.unlock();
  Status sent;
  {  // frees the stream's cache slot on every node; a broken ring frees them anyway
    std::lock_guard<std::mutex> send(send_mu_);
    sent = ring_->link.send(FrameType::kReset, s.id_, 0, nullptr, 0, opt_.master.timeout_ms);
  }
  lk.lock();
  // Until the reset is back round: every node has freed the slot, and none is still passing it on
  // when the master closes the ring.
  auto back = [&] { return std::find(resets_back_.begin(), resets_back_.end(), s.id_); };
  if (sent.ok())
    cv_.wait_for(lk, std::chrono::milliseconds(opt_.master.timeout_ms), [&] { return back() != resets_back_.end() || !broken_.ok(); });
  if (back() != resets_back_.end()) resets_back_.erase(back());
  --active_;
  cv_.notify_all();
}

Status RingMaster::exchange(RingStream& s, int token, int pos, const float** logits) {
  {
    std::lock_guard<std::mutex> lk(compute_mu_);
    MC_TRY(s.local_.embed(token, s.sent_));
  }
  board::AwaitedAnswer& a = awaited_[static_cast<size_t>(s.slot_)];
  const int retries = ring_->master.retries(), timeout_ms = ring_->master.timeout_ms();
  Status last;
  for (int attempt = 0; attempt <= retries; ++attempt) {
    if (attempt > 0) ++resends_;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (!broken_.ok()) return broken_;
      a.expect(s.id_, static_cast<uint32_t>(pos), s.answer_, static_cast<uint32_t>(model_->cfg.dim));
    }
    Status sent;
    {
      std::lock_guard<std::mutex> lk(send_mu_);
      sent = ring_->master.send_hidden(s.id_, pos, s.sent_);
    }
    std::unique_lock<std::mutex> lk(mu_);
    if (sent.ok())
      cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms), [&] { return a.state != State::kWaiting || !broken_.ok(); });
    const State got = a.state;
    a.state = State::kIdle;  // a late answer is stale from now on
    if (!sent.ok()) return sent;
    if (got == State::kDone) {
      lk.unlock();
      if (!logits) return Status::Ok();
      std::lock_guard<std::mutex> compute(compute_mu_);
      return s.local_.head(s.answer_, logits);
    }
    if (got == State::kSendAgain) {
      last = a.why;
      continue;
    }
    if (!broken_.ok()) return broken_;
    return Status::Error(Code::kOutOfRange, "the ring did not answer within %d ms (stream %u at pos %d)", timeout_ms,
                         static_cast<unsigned>(s.id_), pos);
  }
  return last.prefix("token at pos %d: ", pos);
}

Status RingMaster::rebuild(uint64_t seen_epoch, const RingStream& s, int pos, const Status& why) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return !rebuilding_; });
  if (epoch_ != seen_epoch) return Status::Ok();  // another stream rebuilt it meanwhile
  rebuilding_ = true;
  cv_.wait(lk, [&] { return active_ == 0; });  // every step in flight has ended (failed: the ring is broken)
  Status st = why;
  while (!st.ok()) {
    if (rebuilds_ >= opt_.max_rebuilds) {
      st.prefix("the ring failed %d times (giving up): ", rebuilds_ + 1);
      break;
    }
    ++rebuilds_;
    if (opt_.log)
      opt_.log("the ring is broken at position " + std::to_string(pos) + " of stream " + std::to_string(s.id()) + " (" + st.message() +
               "; a ring cannot tell which node: every node is replaced): rebuilding the ring");
    lk.unlock();
    st = build();
    lk.lock();
  }
  if (st.ok()) {
    ++epoch_;
    if (opt_.log)
      opt_.log("the ring was rebuilt (" + std::to_string(opt_.ranges.size()) + " nodes); each stream replays its story into it");
  }
  rebuilding_ = false;
  cv_.notify_all();
  return st;
}

Status RingMaster::step(RingStream& s, int token, int pos, const float** logits) {
  // Checked here, not by a node: a bad position is the caller's error, not a broken ring.
  if (pos < 0 || pos >= ctx_len()) return Status::Error(Code::kInvalidArgument, "position %d is outside the context of %d", pos, ctx_len());
  if (pos > static_cast<int>(s.tokens_.size()))
    return Status::Error(Code::kInvalidArgument, "position %d: the stream's story has %zu positions", pos, s.tokens_.size());
  s.tokens_.resize(static_cast<size_t>(pos));
  for (;;) {
    uint64_t epoch = 0;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return !rebuilding_; });
      if (!ring_) return Status::Error(Code::kInvalidArgument, "the ring is not connected (start() failed or was not called)");
      ++active_;
      epoch = epoch_;
    }
    Status st;
    const bool replay = s.epoch_ != epoch;  // a rebuilt ring: this stream's caches are not on its nodes yet
    for (int p = 0; replay && st.ok() && p < pos; ++p) st = exchange(s, s.tokens_[static_cast<size_t>(p)], p, nullptr);
    if (st.ok()) st = exchange(s, token, pos, logits);
    {
      std::lock_guard<std::mutex> lk(mu_);
      --active_;
    }
    cv_.notify_all();
    if (st.ok()) {
      if (replay && opt_.log)
        opt_.log("stream " + std::to_string(s.id_) + ": " + std::to_string(pos) +
                 " position(s) replayed into the new ring; continuing at position " + std::to_string(pos));
      s.epoch_ = epoch;
      s.tokens_.push_back(token);
      return Status::Ok();
    }
    if (!opt_.rebuild || st.code() == Code::kInvalidArgument)
      return st.prefix("ring (%s): ", opt_.rebuild ? "rebuilding did not help" : "a silent or closed ring could be any node");
    if (Status rb = rebuild(epoch, s, pos, st); !rb.ok()) return rb.prefix("ring (rebuilding did not help): ");
  }
}

RingStream::~RingStream() {
  if (master_) master_->close_stream(*this);
}

int RingStream::vocab_size() const { return master_->model_->cfg.vocab_size; }

int RingStream::ctx_len() const { return master_->ctx_len(); }

}  // namespace mcullm::cluster
