#include "cluster/node_server_host.h"

#include "cluster/transport_host.h"

#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <thread>

namespace mcullm::cluster {

namespace {
constexpr int kSendTimeoutMs = 10000;  // a master that does not read for this long is gone
constexpr int kPollMs = 200;           // how often serve() looks at stop()
}  // namespace

NodeServer::NodeServer(SliceSource* source, const NodeOptions& opt, ThreadPool* pool, const KernelSet* kernels)
    : source_(source), opt_(opt), pool_(pool), kernels_(kernels) {}

Status NodeServer::init() { return load(opt_.range); }

Status NodeServer::load(const SliceRange& r) {
  MC_TRY(check_slice_range(source_->config(), r));
  if (r.master) return Status::Error(Code::kInvalidArgument, "a node does not hold the embedding and head");
  if (opt_.max_layers > 0 && r.end - r.first > opt_.max_layers)
    return Status::Error(Code::kOutOfRange, "layers %d:%d are %d layers, this node holds at most %d (--max-layers)", r.first,
                         r.end, r.end - r.first, opt_.max_layers);
  streams_.clear();
  MC_TRY(source_->hold(r));
  range_ = r;
  hash_ = source_->hash(r);
  hidden_.assign(static_cast<size_t>(source_->config().dim), 0.0f);
  assembling_ = false;
  return Status::Ok();
}

Status NodeServer::send(Transport& link, FrameType type, uint32_t stream, uint32_t pos, const uint8_t* payload, size_t len) {
  std::lock_guard<std::mutex> lk(send_mu_);
  return send_frame(link, &seq_, type, stream, pos, payload, len, kSendTimeoutMs, &send_failure_);
}

Status NodeServer::reply_error(Transport& link, const FrameHeader& about, const Status& why) {
  uint8_t buf[kMaxPayloadBytes];
  size_t len = 0;
  MC_TRY(encode_error(why, buf, sizeof buf, &len));
  return send(link, FrameType::kError, about.stream, about.pos, buf, len);
}

Status NodeServer::send_hidden(Transport& link, HiddenEncoding e, uint32_t stream, uint32_t pos, const float* x) {
  const uint32_t dim = static_cast<uint32_t>(source_->config().dim);
  std::lock_guard<std::mutex> lk(send_mu_);
  if (opt_.fault != "flip" || served_ != opt_.fault_after)
    return cluster::send_hidden(link, &seq_, stream, pos, e, x, dim, kSendTimeoutMs, &send_failure_);
  // The flip fault: the first frame goes out with one payload bit flipped (only the CRC can tell).
  uint8_t buf[kMaxFrameBytes];
  for (uint32_t c = 0; c < hidden_frame_count(e, dim); ++c) {
    size_t len = 0, n = 0;
    MC_TRY(encode_hidden_chunk(e, x, dim, c, buf + kFrameHeaderBytes, kMaxPayloadBytes, &len));
    FrameHeader h;
    h.type = FrameType::kHidden;
    h.seq = seq_++;
    h.stream = stream;
    h.pos = pos;
    h.payload_len = static_cast<uint32_t>(len);
    MC_TRY(encode_frame(h, buf + kFrameHeaderBytes, buf, sizeof buf, &n));
    if (c == 0) buf[kFrameHeaderBytes + len / 2] ^= 0x10;
    MC_TRY(link.send_bytes(buf, n, kSendTimeoutMs, &send_failure_));
  }
  return Status::Ok();
}

Status NodeServer::on_hidden(Transport& link, const Frame& f) {
  if (!assembling_) {
    assembler_.start(hidden_.data(), static_cast<uint32_t>(hidden_.size()));
    assembling_ = true;
  }
  if (Status st = assembler_.add(f); !st.ok()) {
    assembling_ = false;
    return reply_error(link, f.header, st);
  }
  if (!assembler_.complete()) return Status::Ok();
  assembling_ = false;
  const uint32_t stream = assembler_.stream(), pos = assembler_.pos();
  auto it = streams_.find(stream);
  if (it == streams_.end()) {
    if (static_cast<int>(streams_.size()) >= opt_.max_streams)
      return reply_error(link, f.header,
                         Status::Error(Code::kOutOfRange, "stream %u: this node keeps at most %d streams (reset one first)",
                                       stream, opt_.max_streams));
    std::unique_ptr<SliceInstance> inst;
    if (Status st = source_->make(range_, opt_.ctx_len, pool_, kernels_, &inst); !st.ok()) return reply_error(link, f.header, st);
    it = streams_.emplace(stream, std::move(inst)).first;
  }
  if (Status st = it->second->slice().run_layers(hidden_.data(), static_cast<int>(pos)); !st.ok())
    return reply_error(link, f.header, st);
  if (opt_.fault == "slow" && served_ == opt_.fault_after) {  // busy, but its reader answers heartbeats
    const int from = beats_;
    while (beats_ - from < opt_.slow_beats && !stop_ && !reader_done_) usleep(1000);
  }
  if (opt_.fault == "kill" && served_ == opt_.fault_after) raise(SIGKILL);
  if (opt_.fault == "stop" && served_ == opt_.fault_after) raise(SIGSTOP);
  if (opt_.fault == "hang" && served_ == opt_.fault_after) {  // alive but silent, as a stopped process
    silent_ = true;
    while (!stop_) usleep(10000);
    return Status::Ok();
  }
  if (opt_.fault == "exit" && served_ == opt_.fault_after) {
    link.close();
    return Status::Ok();
  }
  MC_TRY(send_hidden(link, assembler_.encoding(), stream, pos, hidden_.data()));
  ++served_;
  return Status::Ok();
}

Status NodeServer::on_frame(Transport& link, const Frame& f) {
  const FrameHeader& h = f.header;
  switch (h.type) {
    case FrameType::kHidden:
      return on_hidden(link, f);
    case FrameType::kHeartbeat:  // answered by the reader; none reaches here
      return Status::Ok();
    case FrameType::kReset:
      if (h.stream == kAllStreams)
        streams_.clear();
      else
        streams_.erase(h.stream);
      return send(link, FrameType::kReady, h.stream, 0, nullptr, 0);
    case FrameType::kHello: {
      Hello in;
      if (Status st = decode_hello(f.payload, h.payload_len, &in); !st.ok()) return reply_error(link, h, st);
      if (in.role != NodeRole::kMaster) return reply_error(link, h, Status::Error(Code::kInvalidArgument, "hello from a node, not a master"));
      const LlamaConfig c = source_->config();  // a copy: load() below may replace the weights it lives in
      if (static_cast<int>(in.n_layers) != c.n_layers || static_cast<int>(in.dim) != c.dim)
        return reply_error(link, h, Status::Error(Code::kInvalidArgument,
                                                  "the master's model has %u layers of width %u, this node's %d of %d",
                                                  in.n_layers, in.dim, c.n_layers, c.dim));
      const SliceRange want{static_cast<int>(in.first_layer), static_cast<int>(in.end_layer), false};
      if (want.first != range_.first || want.end != range_.end)
        if (Status st = load(want); !st.ok()) return reply_error(link, h, st);
      if (in.ctx_len > 0 && static_cast<int>(in.ctx_len) != opt_.ctx_len) {
        if (static_cast<int>(in.ctx_len) > c.seq_len)
          return reply_error(link, h, Status::Error(Code::kOutOfRange, "context %u is longer than the model's %d", in.ctx_len, c.seq_len));
        opt_.ctx_len = static_cast<int>(in.ctx_len);
        streams_.clear();
      }
      Hello out = slice_hello(NodeRole::kNode, c, range_, opt_.ctx_len);
      out.max_streams = static_cast<uint32_t>(opt_.max_streams);
      out.slice_hash = hash_;
      uint8_t buf[kHelloBytes];
      size_t len = 0;
      MC_TRY(encode_hello(out, buf, sizeof buf, &len));
      return send(link, FrameType::kHello, 0, 0, buf, len);
    }
    case FrameType::kReady:
    case FrameType::kAck:
      return Status::Ok();
    case FrameType::kError: {
      Status remote;
      if (decode_error(f.payload, h.payload_len, &remote).ok())
        std::fprintf(stderr, "mcullm node: the master reports: %s\n", remote.message());
      return Status::Ok();
    }
  }
  return reply_error(link, h, Status::Error(Code::kInvalidArgument, "unexpected frame type %u", static_cast<unsigned>(h.type)));
}

void NodeServer::read_loop(Transport& link) {
  while (!reader_done_) {
    Frame f;
    Event e;
    Status st = link.receive(&f, kPollMs, &e.why);
    if (st.ok() && f.header.type == FrameType::kHeartbeat) {
      if (silent_) continue;
      LinkFailure ignored;  // a link that broke shows up in the next receive
      std::lock_guard<std::mutex> lk(send_mu_);
      if (send_frame(link, &seq_, FrameType::kHeartbeat, f.header.stream, f.header.pos, nullptr, 0, kSendTimeoutMs, &ignored).ok()) ++beats_;
      continue;
    }
    if (!st.ok() && e.why == LinkFailure::kTimeout) continue;
    const bool last = !st.ok() && e.why != LinkFailure::kCorrupt;  // closed or broken: nothing more comes
    if (st.ok()) {
      e.h = f.header;
      e.payload.assign(f.payload, f.payload + f.header.payload_len);
    } else {
      e.status = st;
    }
    {
      std::lock_guard<std::mutex> lk(in_mu_);
      inbox_.push_back(std::move(e));
      if (last) reader_done_ = true;
    }
    in_cv_.notify_all();
  }
}

Status NodeServer::serve(Transport& link) {
  streams_.clear();  // a new master: nothing of the last one's streams is kept
  assembling_ = false;
  inbox_.clear();
  reader_done_ = false;
  std::thread reader(&NodeServer::read_loop, this, std::ref(link));
  Status result = Status::Ok();
  while (!stop_) {
    Event e;
    {
      std::unique_lock<std::mutex> lk(in_mu_);
      if (!in_cv_.wait_for(lk, std::chrono::milliseconds(kPollMs), [&] { return !inbox_.empty(); })) continue;
      e = std::move(inbox_.front());
      inbox_.pop_front();
    }
    if (e.status.ok()) {
      Frame f;
      f.header = e.h;
      f.payload = e.payload.data();
      send_failure_ = LinkFailure::kNone;
      Status st = on_frame(link, f);
      // A master that finished (or gave up on us) and closed the link while we answered: the end
      // of its session, as a close seen on receive is; not an error.
      if (!st.ok() && send_failure_ == LinkFailure::kClosed) break;
      if (!st.ok()) {
        result = st;
        break;
      }
      continue;
    }
    if (e.why == LinkFailure::kClosed) break;
    if (e.why == LinkFailure::kCorrupt) {  // tell the master; it decides what a lost frame means
      assembling_ = false;
      result = reply_error(link, FrameHeader{}, Status::Error(Code::kCorrupt, "node received a corrupt frame: %s", e.status.message()));
      if (!result.ok()) break;
      continue;
    }
    result = e.status;
    break;
  }
  reader_done_ = true;
  reader.join();
  return result;
}

}  // namespace mcullm::cluster
