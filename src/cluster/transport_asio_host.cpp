// TCP and serial / pseudo-terminal transports on Asio (standalone, header-only; Debian libasio-dev).
// One class serves both: an Asio stream (a TCP socket or a POSIX descriptor) driven by its own
// io_context thread. The thread keeps one read in flight and pushes what arrives into a ByteInbox
// (transport_inbox_host.h); send() posts writes to that thread and waits for them with a deadline.
// A serial link can be paced to a bit rate: the sender writes small pieces no earlier than the
// time the link would have needed to clock out every bit before them, as an SPI or UART link does.
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include "cluster/transport_host.h"
#include "cluster/transport_inbox_host.h"
#include "core/serial_port_host.h"

namespace mcullm::cluster {
namespace {

using Clock = std::chrono::steady_clock;

// Errors that mean the other end is gone (not an OS failure of ours).
bool is_disconnect(const asio::error_code& ec) {
  return ec == asio::error::eof || ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == asio::error::connection_aborted || ec.value() == EIO;  // EIO: a pty whose other side closed
}

template <typename Stream>
class AsioTransport final : public Transport {
 public:
  // ctx owns stream's I/O; start() must follow once the stream is connected / open.
  AsioTransport(std::unique_ptr<asio::io_context> ctx, std::string name, uint64_t rate_bps)
      : ctx_(std::move(ctx)), stream_(*ctx_), name_(std::move(name)), rate_bps_(rate_bps),
        inbox_(std::make_shared<ByteInbox>(name_)) {}
  ~AsioTransport() override {
    close();
    if (thread_.joinable()) thread_.join();
    if (held_fd_ >= 0) ::close(held_fd_);
  }

  // Keeps fd open for as long as the transport lives (a pty slave, so that the master does not read EIO).
  void hold_fd(int fd) { held_fd_ = fd; }

  Stream& stream() { return stream_; }
  asio::io_context& context() { return *ctx_; }

  void start() {
    ctx_->restart();  // a connect may have run the context dry
    work_.emplace(ctx_->get_executor());  // keeps the thread up for writes after the reads have ended
    read_next();
    thread_ = std::thread([this] { ctx_->run(); });
  }

  Status send(const FrameHeader& header, const uint8_t* payload, int timeout_ms, LinkFailure* failure) override {
    std::vector<uint8_t> bytes(kFrameHeaderBytes + header.payload_len);
    size_t n = 0;
    if (Status st = encode_frame(header, payload, bytes.data(), bytes.size(), &n); !st.ok()) {
      if (failure) *failure = LinkFailure::kInvalid;
      return st.prefix("%s: ", name_.c_str());
    }
    return send_bytes(bytes.data(), n, timeout_ms, failure);
  }

  Status send_bytes(const uint8_t* data, size_t n, int timeout_ms, LinkFailure* failure) override {
    if (failure) *failure = LinkFailure::kNone;
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
    const bool limited = timeout_ms >= 0;
    if (rate_bps_ == 0) return write(data, n, limited, deadline, failure);
    // Paced: pieces of about 2 ms of link time, each written once the link would have sent it.
    const size_t piece = std::max<uint64_t>(1, std::min<uint64_t>(4096, rate_bps_ / 8 / 500));
    auto t = std::max(Clock::now(), link_free_);
    if (limited && t + std::chrono::nanoseconds(n * 8 * 1000000000ull / rate_bps_) > deadline)
      return timed_out(failure, timeout_ms);  // refused before a byte goes out
    for (size_t off = 0; off < n; off += piece) {
      const size_t len = std::min(piece, n - off);
      t += std::chrono::nanoseconds(len * 8 * 1000000000ull / rate_bps_);
      if (!sleep_until(t)) return closed(failure);
      MC_TRY(write(data + off, len, limited, deadline, failure));
    }
    link_free_ = t;
    return Status::Ok();
  }

  Status receive(Frame* out, int timeout_ms, LinkFailure* failure) override {
    return inbox_->receive(out, timeout_ms, failure);
  }

  void close() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) return;
      closed_ = true;
    }
    cv_.notify_all();
    inbox_->close_local();
    asio::post(*ctx_, [this] {
      asio::error_code ec;
      stream_.close(ec);
      work_.reset();  // the thread ends once the aborted operations have completed
    });
  }

  const char* describe() const override { return name_.c_str(); }

 private:
  void read_next() {
    stream_.async_read_some(asio::buffer(read_buf_), [this](const asio::error_code& ec, size_t n) {
      if (n > 0) inbox_->push(read_buf_, n);
      if (!ec) return read_next();
      if (ec == asio::error::operation_aborted) return inbox_->end(LinkFailure::kClosed, "the link was closed");
      if (is_disconnect(ec)) return inbox_->end(LinkFailure::kClosed, "the peer closed the link (" + ec.message() + ")");
      inbox_->end(LinkFailure::kIo, "read failed: " + ec.message());
    });
  }

  // Writes all of data on the I/O thread; waits for it until the deadline (if limited).
  Status write(const uint8_t* data, size_t n, bool limited, Clock::time_point deadline, LinkFailure* failure) {
    struct Pending {
      std::vector<uint8_t> bytes;
      bool done = false;
      asio::error_code ec;
    };
    auto p = std::make_shared<Pending>();
    p->bytes.assign(data, data + n);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) return closed(failure);
    }
    asio::post(*ctx_, [this, p] {
      asio::async_write(stream_, asio::buffer(p->bytes), [this, p](const asio::error_code& ec, size_t) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          p->done = true;
          p->ec = ec;
        }
        cv_.notify_all();
      });
    });
    std::unique_lock<std::mutex> lock(mu_);
    const auto ready = [&] { return p->done || closed_; };
    if (!limited) cv_.wait(lock, ready);
    else if (!cv_.wait_until(lock, deadline, ready)) {
      lock.unlock();
      close();  // part of the frame may be out; the peer is not reading: drop the link
      if (failure) *failure = LinkFailure::kTimeout;
      return Status::Error(Code::kIo, "%s: the link did not take %zu bytes in time; closed it", name_.c_str(), n);
    }
    if (!p->done) {
      lock.unlock();
      return closed(failure);
    }
    if (!p->ec) return Status::Ok();
    if (failure) *failure = is_disconnect(p->ec) ? LinkFailure::kClosed : LinkFailure::kIo;
    return Status::Error(Code::kIo, "%s: %s: %s", name_.c_str(),
                         is_disconnect(p->ec) ? "the peer closed the link" : "write failed", p->ec.message().c_str());
  }

  // Sleeps until t; false when close() came first.
  bool sleep_until(Clock::time_point t) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_until(lock, t, [&] { return closed_; });
    return !closed_;
  }

  Status closed(LinkFailure* failure) {
    if (failure) *failure = LinkFailure::kClosed;
    return Status::Error(Code::kIo, "%s: the link was closed", name_.c_str());
  }

  Status timed_out(LinkFailure* failure, int timeout_ms) {
    close();
    if (failure) *failure = LinkFailure::kTimeout;
    return Status::Error(Code::kIo, "%s: at its bit rate the frame needs longer than %d ms; closed the link",
                         name_.c_str(), timeout_ms);
  }

  std::unique_ptr<asio::io_context> ctx_;
  Stream stream_;
  const std::string name_;
  const uint64_t rate_bps_;
  std::shared_ptr<ByteInbox> inbox_;
  std::thread thread_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  uint8_t read_buf_[4096];
  Clock::time_point link_free_{};  // when the paced link has sent everything so far
  std::mutex mu_;
  std::condition_variable cv_;
  bool closed_ = false;
  int held_fd_ = -1;
};

using TcpTransport = AsioTransport<asio::ip::tcp::socket>;
using SerialTransport = AsioTransport<asio::posix::stream_descriptor>;

std::string endpoint_text(const std::string& host, uint16_t port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

// Runs ctx until done() or the deadline (none when timeout_ms < 0); true if done() came true.
template <typename Done>
bool run_until(asio::io_context& ctx, int timeout_ms, Clock::time_point deadline, Done done) {
  ctx.restart();
  while (!done()) {
    if (timeout_ms < 0) {
      if (ctx.run_one() == 0) return done();
    } else {
      const auto now = Clock::now();
      if (now >= deadline) return false;
      ctx.run_one_for(deadline - now);
    }
  }
  return true;
}

class AsioTcpListener final : public TcpListener {
 public:
  AsioTcpListener() : acceptor_(ctx_) {}

  Status open(const std::string& host, uint16_t port) {
    asio::error_code ec;
    const asio::ip::address addr = asio::ip::make_address(host, ec);
    if (ec) return Status::Error(Code::kInvalidArgument, "tcp listen: '%s' is not an IP address", host.c_str());
    const asio::ip::tcp::endpoint ep(addr, port);
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::ip::tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return Status::Error(Code::kIo, "tcp listen on %s: %s", endpoint_text(host, port).c_str(), ec.message().c_str());
    host_ = host;
    return Status::Ok();
  }

  uint16_t port() const override {
    asio::error_code ec;
    const auto ep = acceptor_.local_endpoint(ec);
    return ec ? 0 : ep.port();
  }

  Status accept(int timeout_ms, std::unique_ptr<Transport>* out, LinkFailure* failure) override {
    if (failure) *failure = LinkFailure::kNone;
    if (closed_) {
      if (failure) *failure = LinkFailure::kClosed;
      return Status::Error(Code::kIo, "tcp listener on port %u: closed", port());
    }
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
    auto ctx = std::make_unique<asio::io_context>();
    asio::io_context& peer_ctx = *ctx;
    bool done = false;
    asio::error_code result;
    asio::ip::tcp::socket socket(peer_ctx);
    acceptor_.async_accept(socket, [&](const asio::error_code& ec) {
      done = true;
      result = ec;
    });
    if (!run_until(ctx_, timeout_ms, deadline, [&] { return done; })) {
      asio::error_code ec;
      acceptor_.cancel(ec);
      run_until(ctx_, -1, deadline, [&] { return done; });
      if (result == asio::error::operation_aborted && !closed_) {  // else a connection raced in: take it
        if (failure) *failure = LinkFailure::kTimeout;
        return Status::Error(Code::kIo, "tcp listener on port %u: no connection within %d ms", port(), timeout_ms);
      }
    }
    if (result) {
      if (failure) *failure = result == asio::error::operation_aborted ? LinkFailure::kClosed : LinkFailure::kIo;
      return Status::Error(Code::kIo, "tcp listener on port %u: accept failed: %s", port(), result.message().c_str());
    }
    asio::error_code ec;
    socket.set_option(asio::ip::tcp::no_delay(true), ec);
    const auto remote = socket.remote_endpoint(ec);
    const std::string name =
        "tcp " + (ec ? std::string("?") : endpoint_text(remote.address().to_string(), remote.port())) + " (accepted)";
    const int fd = socket.release(ec);
    if (ec) return Status::Error(Code::kIo, "tcp listener: %s", ec.message().c_str());
    auto t = std::make_unique<TcpTransport>(std::move(ctx), name, 0);
    t->stream().assign(remote.protocol(), fd, ec);
    if (ec) return Status::Error(Code::kIo, "tcp listener: %s", ec.message().c_str());
    t->start();
    *out = std::move(t);
    return Status::Ok();
  }

  void close() override {
    closed_ = true;
    asio::post(ctx_, [this] {
      asio::error_code ec;
      acceptor_.close(ec);
    });
  }

 private:
  asio::io_context ctx_;
  asio::ip::tcp::acceptor acceptor_;
  std::string host_;
  std::atomic<bool> closed_{false};
};

}  // namespace

// ---- TCP ----

Status tcp_listen(const std::string& host, uint16_t port, std::unique_ptr<TcpListener>* out) {
  auto l = std::make_unique<AsioTcpListener>();
  MC_TRY(l->open(host, port));
  *out = std::move(l);
  return Status::Ok();
}

Status tcp_connect(const std::string& host, uint16_t port, int timeout_ms, std::unique_ptr<Transport>* out) {
  const std::string where = endpoint_text(host, port);
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
  auto t = std::make_unique<TcpTransport>(std::make_unique<asio::io_context>(), "tcp " + where, 0);
  asio::io_context& ctx = t->context();
  asio::error_code ec;
  asio::ip::tcp::resolver resolver(ctx);
  const auto endpoints = resolver.resolve(host, std::to_string(port), asio::ip::resolver_base::numeric_service, ec);
  if (ec) return Status::Error(Code::kIo, "tcp connect to %s: cannot resolve '%s': %s", where.c_str(), host.c_str(), ec.message().c_str());
  while (true) {
    bool done = false;
    asio::error_code result;
    asio::async_connect(t->stream(), endpoints, [&](const asio::error_code& e, const asio::ip::tcp::endpoint&) {
      done = true;
      result = e;
    });
    if (!run_until(ctx, timeout_ms, deadline, [&] { return done; })) {
      asio::error_code ignored;
      t->stream().close(ignored);
      run_until(ctx, -1, deadline, [&] { return done; });
      result = asio::error::timed_out;
    }
    if (!result) break;
    const bool retry = result == asio::error::connection_refused && (timeout_ms < 0 || Clock::now() + std::chrono::milliseconds(50) < deadline);
    if (!retry) {
      const long ms = static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count());
      return Status::Error(Code::kIo, "tcp connect to %s: %s (tried for %ld ms)", where.c_str(),
                           result == asio::error::timed_out ? "timed out" : result.message().c_str(), ms);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    asio::error_code ignored;
    t->stream().close(ignored);
  }
  t->stream().set_option(asio::ip::tcp::no_delay(true), ec);
  t->start();
  *out = std::move(t);
  return Status::Ok();
}

// ---- serial / pty ----

namespace {

// A serial transport over fd (owned); held_fd (or -1) is closed with it.
Status wrap_fd(int fd, const std::string& name, const SerialOptions& opt, int held_fd, std::unique_ptr<Transport>* out) {
  std::string desc = "serial " + name;
  if (opt.rate_bps) desc += " @ " + std::to_string(opt.rate_bps) + " bit/s";
  auto t = std::make_unique<SerialTransport>(std::make_unique<asio::io_context>(), desc, opt.rate_bps);
  t->hold_fd(held_fd);
  asio::error_code ec;
  t->stream().assign(fd, ec);
  if (ec) {
    ::close(fd);
    return Status::Error(Code::kIo, "%s: %s", desc.c_str(), ec.message().c_str());
  }
  t->start();
  *out = std::move(t);
  return Status::Ok();
}

}  // namespace

Status serial_transport_from_fd(int fd, const std::string& name, const SerialOptions& opt, std::unique_ptr<Transport>* out) {
  return wrap_fd(fd, name, opt, -1, out);
}

Status open_serial_transport(const std::string& path, const SerialOptions& opt, std::unique_ptr<Transport>* out) {
  int fd = -1;
  MC_TRY(open_serial(path, opt.baud, &fd));
  return serial_transport_from_fd(fd, path, opt, out);
}

Status open_pty(int* master_fd, std::string* slave_path) {
  const int fd = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return Status::Error(Code::kIo, "cannot open a pseudo-terminal: %s", strerror(errno));
  char name[128];
  if (::grantpt(fd) != 0 || ::unlockpt(fd) != 0 || ::ptsname_r(fd, name, sizeof name) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::Error(Code::kIo, "cannot set up a pseudo-terminal: %s", strerror(err));
  }
  termios t{};
  if (::tcgetattr(fd, &t) == 0) {  // raw on the master too: no echo, no line editing either way
    ::cfmakeraw(&t);
    ::tcsetattr(fd, TCSANOW, &t);
  }
  *master_fd = fd;
  *slave_path = name;
  return Status::Ok();
}

Status open_pty_transport(const SerialOptions& opt, std::unique_ptr<Transport>* master, std::string* slave_path) {
  int fd = -1, slave_fd = -1;
  std::string path;
  MC_TRY(open_pty(&fd, &path));
  if (Status st = open_serial(path, opt.baud, &slave_fd); !st.ok()) {  // raw from the start: no echo
    ::close(fd);
    return st;
  }
  MC_TRY(wrap_fd(fd, "pty master of " + path, opt, slave_fd, master));
  *slave_path = path;
  return Status::Ok();
}

Status make_pty_pair(const SerialOptions& opt, std::unique_ptr<Transport>* master, std::unique_ptr<Transport>* slave) {
  int fd = -1;
  std::string path;
  MC_TRY(open_pty(&fd, &path));
  std::unique_ptr<Transport> s;
  if (Status st = open_serial_transport(path, opt, &s); !st.ok()) {
    ::close(fd);
    return st;
  }
  MC_TRY(wrap_fd(fd, "pty master of " + path, opt, -1, master));
  *slave = std::move(s);
  return Status::Ok();
}

}  // namespace mcullm::cluster
