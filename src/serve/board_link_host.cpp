#include "serve/board_link_host.h"

#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cmath>

#include "serve/serial_server_host.h"

namespace mcullm::serve {

namespace {
using Clock = std::chrono::steady_clock;
int ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}
}  // namespace

BoardLink::BoardLink(int fd, bool owns, int timeout_ms) : fd_(fd), owns_(owns), timeout_ms_(timeout_ms) {}

BoardLink::~BoardLink() {
  if (owns_ && fd_ >= 0) ::close(fd_);
}

lineproto::GenerateCommand BoardLink::command_for(const CompletionParams& p, int n_predict) {
  lineproto::GenerateCommand g;
  g.n_predict = static_cast<uint32_t>(std::max(0, n_predict));
  const double t = std::round(static_cast<double>(p.sampler.temperature) * 1000.0);
  g.temp_x1000 = static_cast<uint32_t>(std::clamp(t, 0.0, static_cast<double>(lineproto::kMaxTempX1000)));
  g.top_k = static_cast<uint32_t>(std::max(0, p.sampler.top_k));
  uint64_t seed = p.sampler.seed;
  if (seed > 0xFFFFFFFFu) seed = (seed ^ (seed >> 32)) & 0xFFFFFFFFu;
  g.seed = seed == 0 ? 1u : static_cast<uint32_t>(seed);
  g.flags = p.ignore_eos ? lineproto::kFlagIgnoreEos : 0u;
  g.prompt.assign(p.prompt.begin(), p.prompt.end());
  return g;
}

BoardLink::Got BoardLink::next_line(lineproto::LineReader::Line* line) {
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeout_ms_);
  char buf[4096];
  while (lines_.empty()) {
    if (stop_.load()) return Got::kStopped;
    const int left = ms_left(deadline);
    if (left == 0) return Got::kTimeout;
    pollfd p{fd_, POLLIN, 0};
    const int pr = ::poll(&p, 1, std::min(left, 100));
    if (pr < 0 && errno != EINTR) return Got::kHangUp;
    if (pr <= 0) continue;
    const ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) return Got::kHangUp;  // a pty gives EIO
    if (n < 0) continue;
    std::vector<lineproto::LineReader::Line> got;
    reader_.push(std::string_view(buf, static_cast<size_t>(n)), &got);
    for (auto& l : got) lines_.push_back(std::move(l));
  }
  *line = std::move(lines_.front());
  lines_.pop_front();
  return Got::kLine;
}

void BoardLink::drain(int quiet_ms) {
  reader_ = lineproto::LineReader();
  lines_.clear();
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeout_ms_);
  char buf[4096];
  while (!stop_.load()) {
    pollfd p{fd_, POLLIN, 0};
    const int wait = std::min(quiet_ms, ms_left(deadline));
    if (::poll(&p, 1, wait) <= 0) return;
    if (::read(fd_, buf, sizeof buf) <= 0 || ms_left(deadline) == 0) return;
  }
}

Status BoardLink::generate(const CompletionParams& p, int n_predict, int vocab_size, const PromptDoneFn& on_prompt_done,
                           const TokenFn& on_token) {
  std::lock_guard<std::mutex> lock(mu_);
  if (p.prompt.size() > lineproto::kMaxPromptTokens)
    return Status::Error(Code::kInvalidArgument, "the line protocol carries at most %u prompt tokens; this prompt has %zu",
                         lineproto::kMaxPromptTokens, p.prompt.size());
  const std::string g = lineproto::format_generate(command_for(p, n_predict));
  if (g.size() - 1 > lineproto::kMaxLineBytes)
    return Status::Error(Code::kInvalidArgument, "the prompt's G line would be %zu bytes; the line protocol allows %zu", g.size() - 1,
                         lineproto::kMaxLineBytes);
  // Anything the board sent since its last reply is stale; after a broken reply, wait until it is quiet.
  drain(out_of_sync_ ? 200 : 0);
  out_of_sync_ = false;
  if (!write_all(fd_, g)) {
    out_of_sync_ = true;
    return Status::Error(Code::kCorrupt, "cannot write to the board (its serial line is gone)");
  }

  // A protocol fault does not end the reply: the rest is read (and dropped) up to its E or X line,
  // so that the next request starts in step. A reply holds at most n_predict + 2 lines; a board
  // that sends many more (blank lines included) is cut off.
  Status fault = Status::Ok();
  const auto fail = [&fault](Status st) {
    if (fault.ok()) fault = st;
  };
  bool prompt_done = false, passing = true;
  uint32_t n_tokens = 0;
  const uint64_t max_lines = static_cast<uint64_t>(n_predict) + 16;
  for (uint64_t lines = 0;; ++lines) {
    if (lines > max_lines) {
      out_of_sync_ = true;
      fail(Status::Error(Code::kCorrupt, "the board sent more than %llu lines for one reply", static_cast<unsigned long long>(max_lines)));
      return fault;
    }
    lineproto::LineReader::Line line;
    const Got got = next_line(&line);
    if (got != Got::kLine) {
      out_of_sync_ = true;
      if (got == Got::kStopped) return Status::Error(Code::kUnsupported, "the server is shutting down");
      if (got == Got::kHangUp) return Status::Error(Code::kCorrupt, "the board hung up (its serial line closed)");
      if (!fault.ok()) return fault;
      return Status::Error(Code::kIo, "the board timed out: nothing for %d ms %s", timeout_ms_,
                           prompt_done ? "after its last token" : "after the G line");
    }
    if (line.too_long) {
      fail(Status::Error(Code::kCorrupt, "the board sent a line longer than %zu bytes", lineproto::kMaxLineBytes));
      continue;
    }
    std::string_view text = line.text;
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    if (text.find_first_not_of(' ') == std::string_view::npos) continue;
    lineproto::Message m;
    if (Status st = lineproto::parse_line(text, &m); !st.ok()) {
      fail(Status::Error(Code::kCorrupt, "the board sent a malformed line: %s", st.message()));
      continue;
    }
    switch (m.kind) {
      case lineproto::Kind::kError:  // the reply's end, whatever came before
        if (!fault.ok()) return fault;
        return Status::Error(Code::kCorrupt, "the board refused: %s", m.text.c_str());
      case lineproto::Kind::kEnd:
        if (!fault.ok()) return fault;
        if (!prompt_done) return Status::Error(Code::kCorrupt, "the board sent E before P");
        if (m.n_tokens != n_tokens)
          return Status::Error(Code::kCorrupt, "the board's E line counts %u tokens but it sent %u", m.n_tokens, n_tokens);
        return Status::Ok();
      case lineproto::Kind::kPromptDone:
        if (prompt_done) {
          fail(Status::Error(Code::kCorrupt, "the board sent a second P line"));
        } else {
          prompt_done = true;
          if (fault.ok() && on_prompt_done) on_prompt_done(m.ms);
        }
        break;
      case lineproto::Kind::kToken:
        if (!prompt_done) {
          fail(Status::Error(Code::kCorrupt, "the board sent a T line before P"));
        } else if (m.token < 0 || m.token >= vocab_size) {
          fail(Status::Error(Code::kCorrupt, "the board sent token id %d, outside the vocabulary (0..%d)", m.token, vocab_size - 1));
        } else if (n_tokens >= static_cast<uint32_t>(n_predict)) {
          fail(Status::Error(Code::kCorrupt, "the board sent more than the %d tokens asked for", n_predict));
        } else {
          ++n_tokens;
          if (fault.ok() && passing && on_token) passing = on_token(m.token, m.us);
        }
        break;
      case lineproto::Kind::kGenerate:
        fail(Status::Error(Code::kCorrupt, "the board sent a G line"));
        break;
      case lineproto::Kind::kGenerateText:
        fail(Status::Error(Code::kCorrupt, "the board sent an S line"));
        break;
      case lineproto::Kind::kPiece:  // the answer to an S line; the bridge sends G lines
        fail(Status::Error(Code::kCorrupt, "the board sent a U line to a G request"));
        break;
    }
  }
}

}  // namespace mcullm::serve
