// The byte inbox every host transport receives through, the in-process transport, and the helpers
// that send hidden states and small frames over any transport.
#include "cluster/transport_host.h"

#include <chrono>

#include "cluster/transport_inbox_host.h"

namespace mcullm::cluster {

// ---- ByteInbox ----

ByteInbox::ByteInbox(std::string name) : name_(std::move(name)), decoder_(std::make_unique<FrameDecoder>()) {}

void ByteInbox::push(const uint8_t* data, size_t n) {
  if (n == 0) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ended_ || local_closed_) return;
    if (queued_ + n > kMaxQueuedBytes) {
      ended_ = true;
      end_why_ = LinkFailure::kIo;
      end_message_ = "more than " + std::to_string(kMaxQueuedBytes >> 20) + " MB received and not read: link dropped";
    } else {
      chunks_.emplace_back(data, data + n);
      queued_ += n;
    }
  }
  cv_.notify_all();
}

void ByteInbox::end(LinkFailure why, const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ended_) return;
    ended_ = true;
    end_why_ = why;
    end_message_ = message;
  }
  cv_.notify_all();
}

void ByteInbox::close_local() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    local_closed_ = true;
    chunks_.clear();
    queued_ = 0;
  }
  cv_.notify_all();
}

bool ByteInbox::closed_locally() const {
  std::lock_guard<std::mutex> lock(mu_);
  return local_closed_;
}

Status ByteInbox::fail(LinkFailure why, LinkFailure* failure, Status st) {
  if (failure) *failure = why;
  return st.prefix("%s: ", name_.c_str());
}

Status ByteInbox::receive(Frame* out, int timeout_ms, LinkFailure* failure) {
  if (failure) *failure = LinkFailure::kNone;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
  while (true) {
    if (closed_locally()) return fail(LinkFailure::kClosed, failure, Status::Error(Code::kIo, "the link was closed"));
    // Decode what is held (the decoder may hold a whole frame even when no new bytes are given).
    DecodeEvent ev;
    const size_t used = decoder_->feed(current_.data() + current_used_, current_.size() - current_used_, &ev);
    current_used_ += used;
    if (ev == DecodeEvent::kFrame) {
      *out = decoder_->frame();
      return Status::Ok();
    }
    if (ev == DecodeEvent::kError) return fail(LinkFailure::kCorrupt, failure, decoder_->error());
    // All of current_ is in the decoder: wait for the next chunk.
    std::unique_lock<std::mutex> lock(mu_);
    const auto ready = [&] { return !chunks_.empty() || ended_ || local_closed_; };
    if (timeout_ms < 0) cv_.wait(lock, ready);
    else cv_.wait_until(lock, deadline, ready);
    if (local_closed_) continue;
    if (!chunks_.empty()) {
      current_ = std::move(chunks_.front());
      chunks_.pop_front();
      queued_ -= current_.size();
      current_used_ = 0;
      continue;
    }
    if (ended_) {
      Status st = Status::Error(Code::kIo, "%s", end_message_.c_str());
      if (decoder_->pending() > 0) st.prefix("mid-frame (%zu bytes of a frame received): ", decoder_->pending());
      return fail(end_why_, failure, st);
    }
    return fail(LinkFailure::kTimeout, failure, Status::Error(Code::kIo, "no frame within %d ms", timeout_ms));
  }
}

// ---- in-process ----

namespace {

class InprocTransport final : public Transport {
 public:
  InprocTransport(std::shared_ptr<ByteInbox> mine, std::shared_ptr<ByteInbox> peer, const char* name)
      : mine_(std::move(mine)), peer_(std::move(peer)), name_(name) {}
  ~InprocTransport() override { close(); }

  Status send(const FrameHeader& header, const uint8_t* payload, int timeout_ms, LinkFailure* failure) override {
    std::vector<uint8_t> bytes(kFrameHeaderBytes + header.payload_len);
    size_t n = 0;
    if (Status st = encode_frame(header, payload, bytes.data(), bytes.size(), &n); !st.ok()) {
      if (failure) *failure = LinkFailure::kInvalid;
      return st.prefix("%s: ", name_);
    }
    return send_bytes(bytes.data(), n, timeout_ms, failure);
  }

  Status send_bytes(const uint8_t* data, size_t n, int, LinkFailure* failure) override {
    if (failure) *failure = LinkFailure::kNone;
    if (mine_->closed_locally()) {
      if (failure) *failure = LinkFailure::kClosed;
      return Status::Error(Code::kIo, "%s: the link was closed", name_);
    }
    if (peer_->closed_locally()) {
      if (failure) *failure = LinkFailure::kClosed;
      return Status::Error(Code::kIo, "%s: the peer closed the link", name_);
    }
    peer_->push(data, n);  // never blocks: the queue has no bound
    return Status::Ok();
  }

  Status receive(Frame* out, int timeout_ms, LinkFailure* failure) override {
    return mine_->receive(out, timeout_ms, failure);
  }

  void close() override {
    mine_->close_local();
    peer_->end(LinkFailure::kClosed, "the peer closed the link");
  }

  const char* describe() const override { return name_; }

 private:
  std::shared_ptr<ByteInbox> mine_, peer_;
  const char* name_;
};

}  // namespace

void make_inproc_pair(std::unique_ptr<Transport>* a, std::unique_ptr<Transport>* b) {
  auto ia = std::make_shared<ByteInbox>("inproc a");
  auto ib = std::make_shared<ByteInbox>("inproc b");
  *a = std::make_unique<InprocTransport>(ia, ib, "inproc a");
  *b = std::make_unique<InprocTransport>(ib, ia, "inproc b");
}

// ---- helpers ----

Status send_frame(Transport& t, uint32_t* seq, FrameType type, uint32_t stream, uint32_t pos, const uint8_t* payload,
                  size_t payload_len, int timeout_ms, LinkFailure* failure) {
  FrameHeader h;
  h.type = type;
  h.seq = *seq;
  h.stream = stream;
  h.pos = pos;
  h.payload_len = static_cast<uint32_t>(payload_len > kMaxPayloadBytes ? kMaxPayloadBytes + 1 : payload_len);
  MC_TRY(t.send(h, payload, timeout_ms, failure));
  ++*seq;
  return Status::Ok();
}

Status send_hidden(Transport& t, uint32_t* seq, uint32_t stream, uint32_t pos, HiddenEncoding e, const float* x,
                   uint32_t dim, int timeout_ms, LinkFailure* failure) {
  std::vector<uint8_t> payload(kMaxPayloadBytes);
  const uint32_t frames = hidden_frame_count(e, dim);
  if (frames == 0 || dim > kMaxHiddenDim) {
    if (failure) *failure = LinkFailure::kInvalid;
    return Status::Error(Code::kInvalidArgument, "%s: cannot send a hidden state of %u values in encoding %u",
                         t.describe(), dim, static_cast<unsigned>(e));
  }
  for (uint32_t c = 0; c < frames; ++c) {
    size_t len = 0;
    if (Status st = encode_hidden_chunk(e, x, dim, c, payload.data(), payload.size(), &len); !st.ok()) {
      if (failure) *failure = LinkFailure::kInvalid;
      return st.prefix("%s: ", t.describe());
    }
    MC_TRY(send_frame(t, seq, FrameType::kHidden, stream, pos, payload.data(), len, timeout_ms, failure));
  }
  return Status::Ok();
}

}  // namespace mcullm::cluster
