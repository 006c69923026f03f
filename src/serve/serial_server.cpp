#include "serve/serial_server.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include <cmath>

#include "serve/line_protocol.h"

namespace mcullm::serve {

namespace {

speed_t baud_constant(int baud) {
  switch (baud) {
    case 9600: return B9600;
    case 19200: return B19200;
    case 38400: return B38400;
    case 57600: return B57600;
    case 115200: return B115200;
    case 230400: return B230400;
    case 460800: return B460800;
    case 921600: return B921600;
    default: return 0;
  }
}

}  // namespace

bool write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, 1000) < 0 && errno != EINTR) return false;
    } else {
      return false;
    }
  }
  return true;
}

Status open_serial(const std::string& path, int baud, int* fd) {
  const speed_t speed = baud_constant(baud);
  if (!speed) return Status::Error(Code::kInvalidArgument, "--baud %d is not one of 9600 19200 38400 57600 115200 230400 460800 921600", baud);
  const int f = ::open(path.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (f < 0) return Status::Error(Code::kIo, "cannot open serial device %s: %s", path.c_str(), strerror(errno));
  if (::isatty(f)) {
    termios t{};
    if (::tcgetattr(f, &t) != 0) {
      ::close(f);
      return Status::Error(Code::kIo, "%s: cannot read its terminal settings: %s", path.c_str(), strerror(errno));
    }
    ::cfmakeraw(&t);
    t.c_cflag |= CLOCAL | CREAD;
    t.c_cc[VMIN] = 1;
    t.c_cc[VTIME] = 0;
    ::cfsetispeed(&t, speed);
    ::cfsetospeed(&t, speed);
    if (::tcsetattr(f, TCSANOW, &t) != 0) {
      ::close(f);
      return Status::Error(Code::kIo, "%s: cannot set raw mode: %s", path.c_str(), strerror(errno));
    }
  }
  *fd = f;
  return Status::Ok();
}

namespace {

// Runs one G command; false when the output is gone.
bool run_generate(Engine& engine, const lineproto::GenerateHead& g, const int* ids, uint32_t n_ids, int out_fd,
                  const std::atomic<bool>& stop) {
  CompletionParams p;
  p.prompt.assign(ids, ids + n_ids);
  if (Status st = engine.check_prompt(p.prompt); !st.ok()) return write_all(out_fd, lineproto::format_error(st.message()));
  p.n_predict = static_cast<int>(g.n_predict);
  p.sampler.temperature = static_cast<float>(g.temp_x1000) / 1000.0f;
  p.sampler.top_k = static_cast<int>(g.top_k);
  p.sampler.top_p = 1.0f;  // the board's sampler: temperature and top-k only
  p.sampler.min_p = 0.0f;
  p.sampler.repeat_penalty = 1.0f;
  p.sampler.seed = g.seed;
  p.ignore_eos = (g.flags & lineproto::kFlagIgnoreEos) != 0;

  std::unique_ptr<Admission> adm = engine.admit();
  if (!adm) return write_all(out_fd, lineproto::format_error("busy"));
  bool out_ok = true, prompt_sent = false;
  const Engine::PromptDoneFn on_prompt = [&](double ms) {
    prompt_sent = true;
    out_ok = out_ok && write_all(out_fd, lineproto::format_prompt_done(ms));
  };
  const Engine::TokenFn on_token = [&](const TokenEvent& ev) {
    if (ev.id >= 0) {
      const double us = std::round(ev.us);
      out_ok = out_ok && write_all(out_fd, lineproto::format_token(ev.id, us > 4e9 ? 4000000000u : static_cast<uint32_t>(us)));
    }
    return out_ok && !stop.load();
  };
  CompletionResult r;
  const Status st = engine.complete(*adm, p, on_prompt, on_token, &r);
  if (!out_ok) return false;
  if (!st.ok()) return write_all(out_fd, lineproto::format_error(st.message()));
  if (!prompt_sent && !write_all(out_fd, lineproto::format_prompt_done(r.prompt_ms))) return false;
  const double ms_per_token = r.n_predicted > 0 ? r.predicted_ms / r.n_predicted : 0.0;
  return write_all(out_fd, lineproto::format_end(static_cast<uint32_t>(r.n_predicted), ms_per_token));
}

}  // namespace

Status serve_lines(Engine& engine, int in_fd, int out_fd, const std::atomic<bool>& stop) {
  lineproto::LineReader reader;
  std::vector<lineproto::LineReader::Line> lines;
  std::vector<int> ids(lineproto::kMaxPromptTokens);
  char buf[4096];
  while (!stop.load()) {
    pollfd p{in_fd, POLLIN, 0};
    const int pr = ::poll(&p, 1, 100);
    if (pr < 0) {
      if (errno == EINTR) continue;
      return Status::Error(Code::kIo, "serial: poll failed: %s", strerror(errno));
    }
    if (pr == 0) continue;
    const ssize_t n = ::read(in_fd, buf, sizeof buf);
    if (n == 0 || (n < 0 && errno == EIO)) return Status::Ok();  // hung up
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return Status::Error(Code::kIo, "serial: read failed: %s", strerror(errno));
    }
    lines.clear();
    reader.push(std::string_view(buf, static_cast<size_t>(n)), &lines);
    for (const auto& line : lines) {
      if (stop.load()) break;
      bool ok = true;
      // The answer to a line is board/line_codec.h's, as on a board.
      lineproto::GenerateHead head;
      uint32_t n_ids = 0;
      char reply[lineproto::kMaxFormattedLine];
      size_t reply_len = 0;
      switch (lineproto::answer_line(line.text.data(), line.text.size(), line.too_long, &head, ids.data(), lineproto::kMaxPromptTokens,
                                     &n_ids, reply, &reply_len)) {
        case lineproto::LineAction::kIgnore: break;
        case lineproto::LineAction::kReply: ok = write_all(out_fd, std::string(reply, reply_len)); break;
        case lineproto::LineAction::kGenerate: ok = run_generate(engine, head, ids.data(), n_ids, out_fd, stop); break;
      }
      if (!ok) return Status::Ok();  // the other end is gone
    }
  }
  return Status::Ok();
}

}  // namespace mcullm::serve
