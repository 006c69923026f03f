// One interface for every cluster link (issue 6): a bidirectional, ordered byte stream carrying
// frames (frame.h). Implementations: in-process, TCP (Asio) and serial / pseudo-terminal with an
// optional bit-rate limit, all in transport_host.h; a board's SPI link implements the same calls.
// Every implementation encodes and decodes with the one codec (frame.h), so a corrupt frame, a
// truncated frame or garbage on the line is met the same way whatever carries the bytes.
//
// Threads: send() and receive() may run at the same time on two threads; neither may be called
// from two threads at once. close() may be called from any thread at any time: it wakes a blocked
// send() or receive(), which then fail with LinkFailure::kClosed.
// Never a hang: a peer that disconnects is reported as kClosed as soon as the transport sees it,
// and every wait has a timeout.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "cluster/frame.h"
#include "mcullm/status.h"

namespace mcullm::cluster {

// Why send() or receive() failed (the Status says it in words).
enum class LinkFailure : uint8_t {
  kNone = 0,
  kTimeout,  // nothing (or not all of it) within the timeout; the link is still usable
  kClosed,   // the peer disconnected (message says so, and whether it was mid-frame), or close() was called
  kCorrupt,  // receive: a corrupt frame or garbage was skipped; the link is still usable (call again)
  kInvalid,  // send: the frame itself is invalid (encode_frame refused it)
  kIo,       // the OS refused (other than a disconnect); the link should be dropped
};
const char* link_failure_name(LinkFailure f);

class Transport {
 public:
  virtual ~Transport() = default;

  // Encodes and sends one frame (payload: header.payload_len bytes), waiting at most timeout_ms
  // (< 0: no limit) for the link to take it. *failure (may be nullptr) says why it failed. After a
  // kTimeout part of the frame may be out: the transport then closes itself (a peer that does not
  // read is dropped; the receiver's decoder discards the partial frame).
  virtual Status send(const FrameHeader& header, const uint8_t* payload, int timeout_ms, LinkFailure* failure) = 0;

  // Sends bytes as they are, not checked: for fault injection in tests (a flipped bit, half a frame).
  virtual Status send_bytes(const uint8_t* data, size_t n, int timeout_ms, LinkFailure* failure) = 0;

  // Waits at most timeout_ms (< 0: no limit; 0: only what has arrived) for the next frame.
  // *out (header and payload) stays valid until the next receive() or close() of this transport.
  virtual Status receive(Frame* out, int timeout_ms, LinkFailure* failure) = 0;

  // Closes the link (the peer then sees kClosed); idempotent; wakes blocked calls.
  virtual void close() = 0;

  // What the link is, for messages: "inproc", "tcp 127.0.0.1:7000", "serial /dev/pts/3 @ 10000000 bit/s".
  virtual const char* describe() const = 0;
};

}  // namespace mcullm::cluster
