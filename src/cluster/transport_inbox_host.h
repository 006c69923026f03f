// The receiving half every host transport shares: byte chunks pushed by whatever reads the link (the
// peer's send() in-process, Asio's read loop for TCP and serial), turned into frames by one
// FrameDecoder on the thread that calls receive().
#pragma once
#include <stdint.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cluster/transport.h"

namespace mcullm::cluster {

class ByteInbox {
 public:
  // Bytes received but not yet taken by receive(): past this the link is ended (kIo) rather than
  // letting a peer that floods a receiver that does not read grow memory without bound.
  static constexpr size_t kMaxQueuedBytes = size_t{16} << 20;

  explicit ByteInbox(std::string name);
  // Producer side (any thread).
  void push(const uint8_t* data, size_t n);
  // No more bytes will come: the peer is gone (kClosed) or the OS failed (kIo). Bytes already
  // pushed are still delivered; the first end reported wins.
  void end(LinkFailure why, const std::string& message);
  // close() of the local transport: receive() fails at once with kClosed, dropping what is queued.
  void close_local();
  bool closed_locally() const;

  // Consumer side (one thread): the next frame, see Transport::receive.
  Status receive(Frame* out, int timeout_ms, LinkFailure* failure);
  const std::string& name() const { return name_; }

 private:
  Status fail(LinkFailure why, LinkFailure* failure, Status st);

  const std::string name_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::vector<uint8_t>> chunks_;
  size_t queued_ = 0;
  bool ended_ = false;
  bool local_closed_ = false;
  LinkFailure end_why_ = LinkFailure::kNone;
  std::string end_message_;
  // receiver thread only
  std::unique_ptr<FrameDecoder> decoder_;
  std::vector<uint8_t> current_;
  size_t current_used_ = 0;
};

}  // namespace mcullm::cluster
