// `mcullm serve`'s HTTP side (cpp-httplib): OpenAI- and llama-server-shaped endpoints over an Engine.
// See docs/protocol.md for the endpoints, the error shapes and the queue's behaviour.
#pragma once
#include <memory>
#include <string>

#include "serve/engine_host.h"

namespace mcullm::serve {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;             // 0 = any free port (port() tells which)
  std::string api_key;         // empty = no authentication
  int read_timeout_s = 10;     // a client that sends nothing for this long is dropped
  int write_timeout_s = 10;    // a reader that takes nothing for this long is dropped (its generation stops)
  // A request (line, headers and body) must arrive whole within this, however its bytes trickle in
  // (408, connection closed); a new connection's clock starts at its accept.
  int header_timeout_s = 5;
  // Open client connections (each has a thread); one more is answered 503 and closed at once. Must
  // exceed the engine's parallel + queue: every admitted request holds a connection.
  int max_connections = 256;
  size_t max_body_bytes = 1 << 20;  // whatever the Content-Type (413 above)
  // Files under /vendor/ come from this directory when set (the page's flashing panel loads
  // esptool-js from /vendor/esptool-js/bundle.js: `npm ci` in web/flash, then web/flash/node_modules).
  std::string vendor_dir;
};

class HttpServer {
 public:
  HttpServer(Engine& engine, const HttpOptions& options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the socket; port() is valid afterwards.
  Status bind();
  int port() const;
  // Serves until stop() (blocks). bind() first.
  Status run();
  // bind() + run() on a background thread (tests).
  Status start();
  // Stops accepting, makes running generations stop at their next token, joins the background thread.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mcullm::serve
