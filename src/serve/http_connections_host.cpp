#include "serve/http_connections_host.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mcullm::serve {

namespace {

using Clock = std::chrono::steady_clock;

// Per connection thread (handlers run on it too).
thread_local bool t_refuse = false;       // the pool hands over a connection it refuses
thread_local bool t_timed_out = false;    // the current request missed its deadline
thread_local bool t_close_after = false;  // close the connection after the current reply

// A thread per connection, created when none is idle, up to `cap` connections; the connection over
// the cap runs on the accept thread with t_refuse set (GuardedServer answers 503 and closes it).
class ConnectionPool final : public httplib::TaskQueue {
 public:
  ConnectionPool(int cap, ConnectionCounters& counters) : cap_(cap), counters_(counters) {}

  void enqueue(std::function<void()> fn) override {
    std::unique_lock<std::mutex> l(mu_);
    if (counters_.open.load() >= cap_) {
      l.unlock();
      ++counters_.refused;
      t_refuse = true;
      fn();
      t_refuse = false;
      return;
    }
    ++counters_.open;
    jobs_.push_back(std::move(fn));
    if (idle_ < jobs_.size()) threads_.emplace_back([this] { work(); });
    cv_.notify_one();
  }

  void shutdown() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

 private:
  void work() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      ++idle_;
      cv_.wait(l, [this] { return stopping_ || !jobs_.empty(); });
      --idle_;
      if (jobs_.empty()) return;  // stopping, and every connection served
      std::function<void()> fn = std::move(jobs_.front());
      jobs_.pop_front();
      l.unlock();
      fn();
      l.lock();
      --counters_.open;
    }
  }

  const int cap_;
  ConnectionCounters& counters_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool stopping_ = false;
};

void endpoint(socket_t fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  const int r = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) : getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (r == 0 && getnameinfo(reinterpret_cast<sockaddr*>(&a), len, host, sizeof host, serv, sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
    ip = host;
    port = std::atoi(serv);
  }
}

// One connection's socket, for httplib's request parser and response writer: reads are buffered
// (the parser reads its lines byte by byte) and fail once the request's deadline has passed, however
// the bytes trickle in; each wait also ends when the server stops (its listening socket closed).
class ConnStream final : public httplib::Stream {
 public:
  ConnStream(socket_t fd, const std::atomic<socket_t>& listener, int read_timeout_ms, int write_timeout_ms)
      : fd_(fd), listener_(listener), read_timeout_ms_(read_timeout_ms), write_timeout_ms_(write_timeout_ms) {}

  void set_deadline(Clock::time_point d) { deadline_ = d; }

  // A kept-alive connection: waits up to `ms` for the next request's first byte.
  bool wait_next_request(int ms) { return off_ < len_ || wait(POLLIN, Clock::now() + std::chrono::milliseconds(ms), true); }

  bool is_readable() const override {
    if (off_ < len_) return true;
    const Clock::time_point silence = Clock::now() + std::chrono::milliseconds(read_timeout_ms_);
    if (deadline_ <= silence) {
      const bool ok = wait(POLLIN, deadline_, true);
      if (!ok && Clock::now() >= deadline_) t_timed_out = true;
      return ok;
    }
    return wait(POLLIN, silence, true);
  }

  bool is_writable() const override {
    if (!wait(POLLOUT, Clock::now() + std::chrono::milliseconds(write_timeout_ms_), false)) return false;
    // Gone if readable with nothing to read (httplib's is_socket_alive): a streamed reply stops.
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 0) == 0) return true;
    char c;
    return ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
  }

  ssize_t read(char* ptr, size_t size) override {
    if (off_ == len_) {
      if (!is_readable()) return -1;
      ssize_t n;
      do n = ::recv(fd_, buf_, sizeof buf_, 0);
      while (n < 0 && errno == EINTR);
      if (n <= 0) return n < 0 ? -1 : 0;
      off_ = 0;
      len_ = static_cast<size_t>(n);
    }
    const size_t k = std::min(size, len_ - off_);
    std::memcpy(ptr, buf_ + off_, k);
    off_ += k;
    return static_cast<ssize_t>(k);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    ssize_t n;
    do n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { endpoint(fd_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { endpoint(fd_, false, ip, port); }
  socket_t socket() const override { return fd_; }

 private:
  // Polls in short steps until `events`, `until`, or (stop_with_server) the server stopping.
  bool wait(short events, Clock::time_point until, bool stop_with_server) const {
    for (;;) {
      if (stop_with_server && listener_.load() == INVALID_SOCKET) return false;
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{fd_, events, 0};
      const int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 100)));
      if (r > 0) return true;  // hang-ups and errors too: the recv or send that follows reports them
      if (r < 0 && errno != EINTR) return false;
    }
  }

  const socket_t fd_;
  const std::atomic<socket_t>& listener_;
  const int read_timeout_ms_, write_timeout_ms_;
  Clock::time_point deadline_ = Clock::time_point::max();
  char buf_[4096];
  size_t off_ = 0, len_ = 0;
};

}  // namespace

GuardedServer::GuardedServer(ConnectionCounters& counters, int max_connections, int header_timeout_ms, std::string refusal)
    : counters_(counters), max_connections_(max_connections), header_timeout_ms_(header_timeout_ms), refusal_(std::move(refusal)) {
  new_task_queue = [this] { return new ConnectionPool(max_connections_, counters_); };
}

bool GuardedServer::request_timed_out() { return t_timed_out; }

void GuardedServer::close_after_reply(httplib::Response& res) {
  t_close_after = true;
  res.set_header("Connection", "close");
}

// A lingering close: after the reply, what the client still sends (the rest of a refused body, a
// trickling header) is read and dropped until it closes, for at most ~2 s. Closing with unread bytes
// would answer them with a reset, which can destroy the reply before the client has read it.
void GuardedServer::linger_and_close(socket_t sock) const {
  ::shutdown(sock, SHUT_WR);
  char buf[4096];
  for (int i = 0; i < 20 && svr_sock_ != INVALID_SOCKET; ++i) {
    pollfd p{sock, POLLIN, 0};
    if (::poll(&p, 1, 100) == 0) continue;
    if (::recv(sock, buf, sizeof buf, MSG_DONTWAIT) <= 0) break;
  }
  ::close(sock);
}

bool GuardedServer::process_and_close_socket(socket_t sock) {
  bool ret = false;
  if (t_refuse) {
    // On the accept thread: never block it (a full socket buffer just loses the reply).
    (void)!::send(sock, refusal_.data(), refusal_.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  } else {
    const auto ms = [](time_t s, time_t us) { return static_cast<int>(s * 1000 + us / 1000); };
    ConnStream strm(sock, svr_sock_, ms(read_timeout_sec_, read_timeout_usec_), ms(write_timeout_sec_, write_timeout_usec_));
    Clock::time_point start = Clock::now();  // the first request: from the accept
    for (size_t left = keep_alive_max_count_; left > 0 && svr_sock_ != INVALID_SOCKET; --left) {
      if (left != keep_alive_max_count_) {  // later ones: from their first byte
        if (!strm.wait_next_request(static_cast<int>(keep_alive_timeout_sec_ * 1000))) break;
        start = Clock::now();
      }
      strm.set_deadline(start + std::chrono::milliseconds(header_timeout_ms_));
      t_timed_out = t_close_after = false;
      bool closed = false;
      ret = process_request(strm, left == 1, closed, nullptr);
      if (t_timed_out) ++counters_.timed_out;
      if (!ret || closed || t_timed_out || t_close_after) break;
    }
    pollfd p{sock, POLLIN, 0};
    if (t_timed_out || t_close_after || ::poll(&p, 1, 0) > 0) {
      linger_and_close(sock);
      return ret;
    }
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ret;
}

}  // namespace mcullm::serve
