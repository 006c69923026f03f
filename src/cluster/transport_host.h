// The PC transports behind cluster::Transport (transport.h):
//   in-process  a connected pair of thread-safe byte queues (tests, a cluster in one process)
//   TCP         Asio (standalone, Debian libasio-dev): a listener that accepts, a connector with a timeout
//   serial      a serial device or pseudo-terminal in raw mode (core/serial_port_host.h),
//               with an optional bit rate that paces the sender like an SPI or UART link would
// Each carries bytes; frames are encoded and decoded by frame.h's codec on both ends.
#pragma once
#include <stdint.h>

#include <memory>
#include <string>
#include <vector>

#include "cluster/transport.h"

namespace mcullm::cluster {

// ---- in-process ----
// Two connected ends: what one sends, the other receives. Closing one end closes the link for both.
void make_inproc_pair(std::unique_ptr<Transport>* a, std::unique_ptr<Transport>* b);

// ---- TCP ----
class TcpListener {
 public:
  virtual ~TcpListener() = default;
  // The port actually bound (useful after listening on port 0).
  virtual uint16_t port() const = 0;
  // Waits at most timeout_ms (< 0: no limit) for one connection. kTimeout: nobody came.
  virtual Status accept(int timeout_ms, std::unique_ptr<Transport>* out, LinkFailure* failure) = 0;
  // Stops listening; wakes a blocked accept().
  virtual void close() = 0;
};

// Listens on host:port ("127.0.0.1", "0.0.0.0", "::"; port 0 picks a free one).
Status tcp_listen(const std::string& host, uint16_t port, std::unique_ptr<TcpListener>* out);

// Connects to host:port, retrying while the connection is refused (a node still starting) until
// timeout_ms has passed; then the error says where, how long it tried and why (e.g. "connection refused").
Status tcp_connect(const std::string& host, uint16_t port, int timeout_ms, std::unique_ptr<Transport>* out);

// ---- serial / pseudo-terminal ----
struct SerialOptions {
  int baud = 115200;      // the device's line speed (a pty ignores it)
  uint64_t rate_bps = 0;  // 0: as fast as the device goes; else the sender paces itself to this many bits/s
};

// Opens a serial device or pty slave (raw mode, via open_serial) as a transport.
Status open_serial_transport(const std::string& path, const SerialOptions& opt, std::unique_ptr<Transport>* out);
// Wraps an open file descriptor (e.g. a pty master); the transport owns and closes it.
Status serial_transport_from_fd(int fd, const std::string& name, const SerialOptions& opt,
                                std::unique_ptr<Transport>* out);
// A new pseudo-terminal: *master_fd (raw, close-on-exec) and the path of its slave (open it with
// open_serial_transport, possibly in another process).
Status open_pty(int* master_fd, std::string* slave_path);
// A new pty whose master end is a transport, for a peer in another process that opens *slave_path
// (open_serial_transport). The transport also holds the slave open (raw mode), so its reads wait for
// that peer instead of failing with EIO before it opens the slave or between two of its lives; as on
// a real serial line, a peer that dies is then found by heartbeat timeouts, not by the transport,
// and bytes sent while no peer has the slave open wait there for the next one.
Status open_pty_transport(const SerialOptions& opt, std::unique_ptr<Transport>* master, std::string* slave_path);
// Both ends of a new pty as transports (tests, a link emulated in one process).
Status make_pty_pair(const SerialOptions& opt, std::unique_ptr<Transport>* master, std::unique_ptr<Transport>* slave);

// ---- helpers over any transport ----
// Sends the hidden state x[dim] as hidden frames (hidden_frame_count of them) for stream / pos;
// *seq is the sender's counter (the first frame gets *seq, and it is advanced by the frames sent).
Status send_hidden(Transport& t, uint32_t* seq, uint32_t stream, uint32_t pos, HiddenEncoding e, const float* x,
                   uint32_t dim, int timeout_ms, LinkFailure* failure);
// Sends a frame with a small payload built by the caller (hello, ack, error...) with the next seq.
Status send_frame(Transport& t, uint32_t* seq, FrameType type, uint32_t stream, uint32_t pos,
                  const uint8_t* payload, size_t payload_len, int timeout_ms, LinkFailure* failure);

}  // namespace mcullm::cluster
