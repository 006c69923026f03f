#include "cluster/master_host.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "cluster/transport_host.h"

namespace mcullm::cluster {

namespace {
using Clock = std::chrono::steady_clock;
constexpr int kRxPollMs = 100;
std::string range_text(const SliceRange& r) { return std::to_string(r.first) + ":" + std::to_string(r.end); }
}  // namespace

Status even_plan(int n_layers, int nodes, int max_layers, std::vector<SliceRange>* out) {
  out->clear();
  if (nodes <= 0) return Status::Error(Code::kInvalidArgument, "no nodes to run %d layers on", n_layers);
  const int used = nodes < n_layers ? nodes : n_layers;
  const int base = n_layers / used, extra = n_layers % used;
  if (max_layers > 0 && base + (extra ? 1 : 0) > max_layers)
    return Status::Error(Code::kOutOfRange, "%d layers do not fit on %d node%s of at most %d layers each", n_layers, nodes,
                         nodes == 1 ? "" : "s", max_layers);
  int first = 0;
  for (int i = 0; i < used; ++i) {
    const int n = base + (i < extra ? 1 : 0);
    out->push_back({first, first + n, false});
    first += n;
  }
  return Status::Ok();
}

ClusterMaster::ClusterMaster(SliceSource* source, ThreadPool* pool, const KernelSet* kernels, const MasterOptions& opt)
    : source_(source), pool_(pool), kernels_(kernels), opt_(opt) {
  if (!opt_.log) opt_.log = [](const std::string& m) { std::fprintf(stderr, "mcullm cluster: %s\n", m.c_str()); };
}

ClusterMaster::~ClusterMaster() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
  if (rejoin_.joinable()) rejoin_.join();
  for (auto& l : links_)
    if (l->t) l->t->close();
  for (auto& l : links_)
    if (l->rx.joinable()) l->rx.join();
}

std::string ClusterMaster::who(const Link& l) const {
  return "node " + std::to_string(l.index + 1) + " (" + l.ep.name + ", layers " + range_text(l.range) + ")";
}

void ClusterMaster::fail(Link& l, const std::string& why) {
  bool was_alive;
  {
    std::lock_guard<std::mutex> lk(mu_);
    was_alive = l.alive && !stopping_;  // links closing because the master stops are no news
    if (l.alive) {
      l.alive = false;
      l.failure = why;
    }
  }
  if (was_alive) {
    opt_.log(who(l) + ": " + why);
    if (l.t) l.t->close();
  }
  cv_.notify_all();
}

void ClusterMaster::rx_loop(Link* l) {
  Transport* t = l->t.get();
  for (;;) {
    Frame f;
    LinkFailure why = LinkFailure::kNone;
    Status st = t->receive(&f, kRxPollMs, &why);
    if (st.ok()) {
      RxFrame rf;
      rf.h = f.header;
      rf.payload.assign(f.payload, f.payload + f.header.payload_len);
      if (f.header.type == FrameType::kError) {
        Status remote;
        const Status dec = decode_error(rf.payload.data(), rf.payload.size(), &remote);
        fail(*l, std::string("reports an error: ") + (dec.ok() ? remote.message() : dec.message()));
        return;
      }
      {
        std::lock_guard<std::mutex> lk(mu_);
        l->last_seen = Clock::now();
        if (f.header.type != FrameType::kHeartbeat) {
          const bool control = f.header.type == FrameType::kHello || f.header.type == FrameType::kReady;
          l->inbox[control ? kControl : f.header.stream].push_back(std::move(rf));
        }
      }
      cv_.notify_all();
      continue;
    }
    if (why == LinkFailure::kTimeout) {
      std::lock_guard<std::mutex> lk(mu_);
      if (stopping_ || !l->alive) return;
      continue;
    }
    if (why == LinkFailure::kCorrupt) {
      fail(*l, std::string("sent a corrupt frame: ") + st.message());
      return;
    }
    fail(*l, why == LinkFailure::kClosed ? std::string("the link closed (the node died or quit): ") + st.message()
                                         : std::string("link error: ") + st.message());
    return;
  }
}

void ClusterMaster::heartbeat_loop() {
  std::unique_lock<std::mutex> lk(mu_);
  while (!stopping_) {
    // One round a period: cv_ wakes on every frame received, which must not become a heartbeat storm.
    const Clock::time_point next = Clock::now() + std::chrono::milliseconds(opt_.heartbeat_ms);
    while (!stopping_ && cv_.wait_until(lk, next) == std::cv_status::no_timeout) {
    }
    if (stopping_) break;
    std::vector<Link*> beat, late;
    const Clock::time_point now = Clock::now();
    for (auto& l : links_) {
      if (!l->alive) continue;
      if (now - l->last_seen > std::chrono::milliseconds(opt_.timeout_ms))
        late.push_back(l.get());
      else
        beat.push_back(l.get());
    }
    lk.unlock();
    for (Link* l : late) fail(*l, "answered no heartbeat for " + std::to_string(opt_.timeout_ms) + " ms (hung or stopped?)");
    for (Link* l : beat) {
      FrameHeader h;
      h.type = FrameType::kHeartbeat;
      send(*l, h, nullptr);  // a failure shows up in the receiver
    }
    lk.lock();
  }
}

Status ClusterMaster::send(Link& l, const FrameHeader& hdr, const uint8_t* payload) {
  std::lock_guard<std::mutex> lk(l.send_mu);
  Status st = send_frame(*l.t, &l.seq, hdr.type, hdr.stream, hdr.pos, payload, hdr.payload_len, opt_.timeout_ms, nullptr);
  if (st.ok()) return st;
  fail(l, std::string("cannot send: ") + st.message());
  return Status::Error(Code::kIo, "%s failed: cannot send: %s", who(l).c_str(), st.message());  // kIo: a link fault
}

Status ClusterMaster::await(Link& l, uint32_t key, FrameType type, uint32_t pos, int frames, std::vector<RxFrame>* out) {
  out->clear();
  // A node is waited for while it shows it is alive: it fails when nothing at all (not even a
  // heartbeat answer, which a node computing a long frame still sends) came for timeout_ms, or after
  // busy_ms in all.
  const Clock::time_point started = Clock::now();
  const Clock::time_point hard = started + std::chrono::milliseconds(std::max(opt_.timeout_ms, opt_.busy_ms));
  std::unique_lock<std::mutex> lk(mu_);
  while (static_cast<int>(out->size()) < frames) {
    auto& q = l.inbox[key];
    while (!q.empty() && static_cast<int>(out->size()) < frames) {
      RxFrame f = std::move(q.front());
      q.pop_front();
      if (f.h.type == type && (type != FrameType::kHidden || f.h.pos == pos)) out->push_back(std::move(f));
      // else: an answer to a step abandoned before a re-plan
    }
    if (static_cast<int>(out->size()) == frames) break;
    if (!l.alive) return Status::Error(Code::kIo, "%s failed: %s", who(l).c_str(), l.failure.c_str());
    if (stopping_) return Status::Error(Code::kIo, "the master is stopping");
    auto quiet = [&] { return std::max(l.last_seen, started) + std::chrono::milliseconds(opt_.timeout_ms); };
    cv_.wait_until(lk, std::min(quiet(), hard));
    if (q.empty() && Clock::now() >= std::min(quiet(), hard)) {  // (last_seen may have moved meanwhile)
      const bool busy = quiet() > hard;
      lk.unlock();
      const std::string what = std::string(frame_type_name(type)) +
                               (key != kControl ? " (stream " + std::to_string(key) + ", position " + std::to_string(pos) + ")" : "");
      const std::string why = busy ? "answered heartbeats but no " + what + " within " + std::to_string(std::max(opt_.timeout_ms, opt_.busy_ms)) + " ms"
                                   : "did not answer " + what + " within " + std::to_string(opt_.timeout_ms) + " ms";
      fail(l, why);
      return Status::Error(Code::kIo, "%s failed: %s", who(l).c_str(), why.c_str());
    }
  }
  return Status::Ok();
}

Status ClusterMaster::connect_link(Link& l) {
  std::unique_ptr<Transport> t;
  MC_TRY(l.ep.connect(&t));
  if (l.rx.joinable()) l.rx.join();  // the old receiver ended when the old link failed
  {
    std::lock_guard<std::mutex> send_lock(l.send_mu);  // the heartbeat thread may be sending on the old link
    std::lock_guard<std::mutex> lk(mu_);
    l.t.swap(t);
    l.seq = 0;
    l.alive = true;
    l.failure.clear();
    l.inbox.clear();
    l.last_seen = Clock::now();
  }
  l.rx = std::thread(&ClusterMaster::rx_loop, this, &l);
  return Status::Ok();
}

Status ClusterMaster::hello(Link& l, const SliceRange& r) {
  const LlamaConfig& c = source_->config();
  const Hello h = slice_hello(NodeRole::kMaster, c, r, opt_.ctx_len);
  uint8_t buf[kHelloBytes];
  size_t len = 0;
  MC_TRY(encode_hello(h, buf, sizeof buf, &len));
  {
    std::lock_guard<std::mutex> lk(mu_);
    l.range = r;
    l.inbox.clear();  // answers to abandoned steps
  }
  FrameHeader fh;
  fh.type = FrameType::kHello;
  fh.payload_len = static_cast<uint32_t>(len);
  MC_TRY(send(l, fh, buf));
  std::vector<RxFrame> got;
  MC_TRY(await(l, kControl, FrameType::kHello, 0, 1, &got));
  Hello in;
  if (Status st = decode_hello(got[0].payload.data(), got[0].payload.size(), &in); !st.ok()) {
    fail(l, std::string("sent a bad hello: ") + st.message());
    return st;
  }
  const uint64_t want = source_->hash(r);  // from the master's own copy of the model
  std::string why;
  if (static_cast<int>(in.first_layer) != r.first || static_cast<int>(in.end_layer) != r.end)
    why = "holds layers " + std::to_string(in.first_layer) + ":" + std::to_string(in.end_layer) + ", not the " + range_text(r) + " assigned";
  else if (in.slice_hash != want) {
    char b[160];
    std::snprintf(b, sizeof b, "slice hash %016llx differs from the master's %016llx for layers %s (another model file?): refused",
                  static_cast<unsigned long long>(in.slice_hash), static_cast<unsigned long long>(want), range_text(r).c_str());
    why = b;
  } else if ((in.capabilities & capability_bit(opt_.encoding)) == 0)
    why = std::string("does not take ") + hidden_encoding_name(opt_.encoding) + " hidden states";
  if (!why.empty()) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      l.refused = true;
    }
    fail(l, why);
    return Status::Error(Code::kCorrupt, "%s: %s", who(l).c_str(), why.c_str());
  }
  return Status::Ok();
}

Status ClusterMaster::plan_layers(int nodes, std::vector<SliceRange>* plan) const {
  const int n_layers = source_->config().n_layers;
  if (!opt_.split) return even_plan(n_layers, nodes, opt_.max_layers, plan);
  MC_TRY(opt_.split(nodes, plan));
  MC_TRY(check_layer_split(plan->data(), static_cast<int>(plan->size()), n_layers, Code::kInvalidArgument));
  if (static_cast<int>(plan->size()) > nodes)
    return Status::Error(Code::kInvalidArgument, "the split has %zu ranges for %d nodes", plan->size(), nodes);
  for (const SliceRange& r : *plan)
    if (opt_.max_layers > 0 && r.end - r.first > opt_.max_layers)
      return Status::Error(Code::kOutOfRange, "the split gives layers %s to one node, more than %d layers (--max-layers): %d layers do not fit",
                           range_text(r).c_str(), opt_.max_layers, n_layers);
  return Status::Ok();
}

Status ClusterMaster::assign(const std::vector<Link*>& links, const std::vector<SliceRange>& plan) {
  for (size_t i = 0; i < plan.size(); ++i) MC_TRY(hello(*links[i], plan[i]));
  std::vector<Link*> chain(links.begin(), links.begin() + static_cast<long>(plan.size()));
  std::lock_guard<std::mutex> lk(mu_);
  plan_ = chain;
  ++epoch_;
  return Status::Ok();
}

Status ClusterMaster::start(const std::vector<NodeEndpoint>& nodes) {
  for (size_t i = 0; i < nodes.size(); ++i) {
    links_.push_back(std::make_unique<Link>());
    links_.back()->index = static_cast<int>(i);
    links_.back()->ep = nodes[i];
  }
  std::vector<Link*> all;
  for (auto& l : links_) {
    if (Status st = connect_link(*l); !st.ok())
      return Status::Error(st.code(), "node %d (%s): %s", l->index + 1, l->ep.name.c_str(), st.message());
    all.push_back(l.get());
  }
  std::vector<SliceRange> plan;
  MC_TRY(plan_layers(static_cast<int>(all.size()), &plan));
  MC_TRY(assign(all, plan));
  heartbeat_ = std::thread(&ClusterMaster::heartbeat_loop, this);
  if (opt_.readmit || opt_.rejoin_ms > 0) rejoin_ = std::thread(&ClusterMaster::rejoin_loop, this);
  return Status::Ok();
}

std::string ClusterMaster::plan_text() {
  std::lock_guard<std::mutex> lk(mu_);
  std::string s;
  for (Link* l : plan_) s += (s.empty() ? "" : ", ") + who(*l);
  return s;
}

void ClusterMaster::rejoin_loop() {
  std::unique_lock<std::mutex> lk(mu_);
  while (!stopping_) {
    const Clock::time_point next = Clock::now() + std::chrono::milliseconds(opt_.heartbeat_ms);
    while (!stopping_ && cv_.wait_until(lk, next) == std::cv_status::no_timeout) {
    }
    if (stopping_) break;
    // Failed nodes no step can be using: out of the plan, or the plan being remade.
    std::vector<Link*> gone;
    for (auto& l : links_)
      if (!l->alive && !l->refused && (recovering_ || std::find(plan_.begin(), plan_.end(), l.get()) == plan_.end())) {
        l->checking = true;
        gone.push_back(l.get());
      }
    lk.unlock();
    for (Link* l : gone) {
      SliceRange last;
      {
        std::lock_guard<std::mutex> g(mu_);
        last = l->range;
      }
      // Its slice is checked now, so that a token boundary waits for no node that answers nothing
      // (a stopped process still accepts connections) and takes no node with other weights.
      const bool ok = connect_link(*l).ok() && hello(*l, last).ok();  // else not back yet, or failed again (logged)
      if (ok) opt_.log(who(*l) + ": reconnected, its slice checks out: re-admitted at the next token boundary");
      {
        std::lock_guard<std::mutex> g(mu_);
        l->checking = false;
        l->back = l->back || ok;
        readmit_pending_ = readmit_pending_ || ok;
      }
      cv_.notify_all();
    }
    lk.lock();
  }
}

Status ClusterMaster::replan_live() {
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(opt_.rejoin_ms);
  for (;;) {
    std::vector<Link*> alive, returned;
    std::string failures;
    bool can_return = false;
    {
      std::lock_guard<std::mutex> lk(mu_);
      readmit_pending_ = false;
      for (auto& l : links_) {
        if (l->alive && !l->checking) {
          alive.push_back(l.get());
          if (l->back) returned.push_back(l.get());
        } else {
          if (!l->alive) failures += (failures.empty() ? "" : "; ") + who(*l) + ": " + l->failure;
          can_return = can_return || !l->refused;  // (a checking one may be back in a moment)
        }
      }
    }
    std::vector<SliceRange> plan;
    Status fits = plan_layers(static_cast<int>(alive.size()), &plan);
    if (!fits.ok()) {
      if (opt_.rejoin_ms > 0 && can_return) {
        // Until a failed node is back (the rejoin thread checked its slice), none can come back any
        // more (all refused), or the deadline.
        std::unique_lock<std::mutex> lk(mu_);
        const bool woke = cv_.wait_until(lk, deadline, [&] {
          if (readmit_pending_ || stopping_) return true;
          for (auto& l : links_)
            if ((!l->alive || l->checking) && !l->refused) return false;
          return true;
        });
        if (woke && !stopping_) continue;
      }
      return Status::Error(Code::kIo, "%s; the %zu node%s left cannot take over: %s", failures.c_str(), alive.size(),
                           alive.size() == 1 ? "" : "s", fits.message());
    }
    opt_.log("re-planning the layers onto " + std::to_string(alive.size()) + " node" + (alive.size() == 1 ? "" : "s"));
    if (Status st = assign(alive, plan); !st.ok()) continue;  // another node failed meanwhile (or was refused): plan again
    for (Link* l : returned) {
      opt_.log(who(*l) + ": admitted again");
      std::lock_guard<std::mutex> lk(mu_);
      l->back = false;
    }
    ++replans_;
    opt_.log("new plan: " + plan_text());
    return Status::Ok();
  }
}

Status ClusterMaster::recover(uint64_t seen_epoch) {
  std::unique_lock<std::shared_mutex> ex(step_mu_);
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (epoch_ != seen_epoch) return Status::Ok();  // another stream re-planned already
    recovering_ = true;
  }
  const Status st = replan_live();
  std::lock_guard<std::mutex> lk(mu_);
  recovering_ = false;
  return st;
}

Status ClusterMaster::readmit() {
  std::unique_lock<std::shared_mutex> ex(step_mu_);  // every step in flight is done: a token boundary
  {
    std::lock_guard<std::mutex> lk(mu_);
    bool back = false;
    for (auto& l : links_) back = back || (l->alive && !l->checking && l->back);
    readmit_pending_ = false;
    if (!back) return Status::Ok();  // another stream took it in already, or it failed again
    recovering_ = true;
  }
  opt_.log("a failed node is back: re-planning at this token boundary");
  const Status st = replan_live();
  std::lock_guard<std::mutex> lk(mu_);
  recovering_ = false;
  return st;
}

Status ClusterMaster::open_stream(std::unique_ptr<ClusterStream>* out) {
  auto s = std::unique_ptr<ClusterStream>(new ClusterStream());
  s->master_ = this;
  {
    std::lock_guard<std::mutex> lk(mu_);
    s->id_ = next_stream_++;
    s->epoch_ = epoch_;
  }
  MC_TRY(source_->make({0, 0, true}, opt_.ctx_len, pool_, kernels_, &s->local_));
  s->hidden_.resize(static_cast<size_t>(source_->config().dim));
  *out = std::move(s);
  return Status::Ok();
}

Status ClusterMaster::run_chain(ClusterStream& s, int token, int pos, const float** logits) {
  const uint32_t dim = static_cast<uint32_t>(source_->config().dim);
  {
    std::lock_guard<std::mutex> lk(compute_mu_);
    MC_TRY(s.local_->slice().embed(token, s.hidden_.data()));
  }
  const uint32_t n_frames = hidden_frame_count(opt_.encoding, dim);
  std::vector<std::vector<uint8_t>> payloads(n_frames);
  for (uint32_t c = 0; c < n_frames; ++c) {
    payloads[c].resize(kMaxPayloadBytes);
    size_t len = 0;
    MC_TRY(encode_hidden_chunk(opt_.encoding, s.hidden_.data(), dim, c, payloads[c].data(), payloads[c].size(), &len));
    payloads[c].resize(len);
  }
  std::vector<Link*> chain;
  {
    std::lock_guard<std::mutex> lk(mu_);
    chain = plan_;
  }
  std::vector<RxFrame> got;
  for (Link* l : chain) {
    for (const auto& p : payloads) {
      FrameHeader h;
      h.type = FrameType::kHidden;
      h.stream = s.id_;
      h.pos = static_cast<uint32_t>(pos);
      h.payload_len = static_cast<uint32_t>(p.size());
      MC_TRY(send(*l, h, p.data()));
    }
    MC_TRY(await(*l, s.id_, FrameType::kHidden, static_cast<uint32_t>(pos), static_cast<int>(n_frames), &got));
    for (uint32_t c = 0; c < n_frames; ++c) payloads[c] = std::move(got[c].payload);  // relayed as they came
  }
  if (!logits) return Status::Ok();
  HiddenAssembler as;
  as.start(s.hidden_.data(), dim);
  for (uint32_t c = 0; c < n_frames; ++c) {
    Frame f;
    f.header.type = FrameType::kHidden;
    f.header.stream = s.id_;
    f.header.pos = static_cast<uint32_t>(pos);
    f.header.payload_len = static_cast<uint32_t>(payloads[c].size());
    f.payload = payloads[c].data();
    if (Status st = as.add(f); !st.ok()) {
      fail(*chain.back(), std::string("sent a bad hidden state: ") + st.message());
      return Status::Error(Code::kIo, "%s sent a bad hidden state: %s", who(*chain.back()).c_str(), st.message());
    }
  }
  std::lock_guard<std::mutex> lk(compute_mu_);
  return s.local_->slice().head(s.hidden_.data(), logits);
}

void ClusterMaster::close_stream(uint32_t id) {
  std::vector<Link*> chain;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_) return;
    for (Link* l : plan_)
      if (l->alive) chain.push_back(l);
  }
  FrameHeader h;
  h.type = FrameType::kReset;
  h.stream = id;
  for (Link* l : chain) send(*l, h, nullptr);  // the nodes' "ready" answers are not waited for
}

ClusterStream::~ClusterStream() {
  if (master_) master_->close_stream(id_);
}

int ClusterStream::vocab_size() const { return master_->source_->config().vocab_size; }
int ClusterStream::ctx_len() const { return local_->slice().ctx_len(); }

Status ClusterStream::forward(int token, int pos, const float** logits) {
  ClusterMaster& m = *master_;
  if (pos < 0 || pos > static_cast<int>(tokens_.size()) || pos >= ctx_len())
    return Status::Error(Code::kOutOfRange, "position %d: positions come in order from 0 inside the context of %d", pos, ctx_len());
  tokens_.resize(static_cast<size_t>(pos));
  bool back;
  {
    std::lock_guard<std::mutex> lk(m.mu_);
    back = m.readmit_pending_;
  }
  if (back) MC_TRY(m.readmit());
  Status last;
  for (int attempt = 0; attempt <= static_cast<int>(m.links_.size()); ++attempt) {
    uint64_t epoch;
    {
      std::shared_lock<std::shared_mutex> step(m.step_mu_);
      {
        std::lock_guard<std::mutex> lk(m.mu_);
        epoch = m.epoch_;
      }
      last = Status::Ok();
      if (epoch_ != epoch) {  // re-planned: rebuild this stream's caches on the new chain
        for (int p = 0; p < pos && last.ok(); ++p) last = m.run_chain(*this, tokens_[static_cast<size_t>(p)], p, nullptr);
        if (last.ok()) epoch_ = epoch;
      }
      if (last.ok()) last = m.run_chain(*this, token, pos, logits);
      if (last.ok()) {
        tokens_.push_back(token);
        return Status::Ok();
      }
    }
    if (last.code() != Code::kIo) return last;  // not a link fault: nothing to recover
    MC_TRY(m.recover(epoch));
  }
  return last;
}

}  // namespace mcullm::cluster
