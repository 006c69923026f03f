// The connection layer under `mcullm serve`'s HTTP server. Debian's cpp-httplib (0.11) restarts its
// read timeout at every byte, so a client trickling header bytes held a worker for ever, and it queues
// accepted connections without bound behind a fixed thread pool. GuardedServer keeps httplib's
// request parsing and routing, and replaces what is around them:
//  - a thread per open connection, up to a cap; a connection beyond it is answered 503 and closed by
//    the accept loop itself (never queued behind the others);
//  - every request (line, headers, body) must arrive whole by a deadline (a new connection's clock
//    starts at its accept); reads past it fail, the reply is 408 and the connection closes.
#pragma once
#include <httplib.h>

#include <atomic>
#include <cstdint>
#include <string>

namespace mcullm::serve {

struct ConnectionCounters {
  std::atomic<int> open{0};                // connections with a thread now
  std::atomic<uint64_t> refused{0};        // over the cap: 503 and closed
  std::atomic<uint64_t> timed_out{0};      // requests that missed their deadline
};

class GuardedServer : public httplib::Server {
 public:
  // refusal: the complete HTTP reply sent (best effort, never blocking) to a connection over the cap.
  GuardedServer(ConnectionCounters& counters, int max_connections, int header_timeout_ms, std::string refusal);

  // For handlers, on the connection's thread: whether the request being served ran out of time while
  // it was read, and a way to close the connection after the reply (its framing is lost).
  static bool request_timed_out();
  static void close_after_reply(httplib::Response& res);

 private:
  bool process_and_close_socket(socket_t sock) override;
  void linger_and_close(socket_t sock) const;

  ConnectionCounters& counters_;
  const int max_connections_, header_timeout_ms_;
  const std::string refusal_;
};

}  // namespace mcullm::serve
