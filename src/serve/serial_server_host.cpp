#include "serve/serial_server_host.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include <cmath>

#include "serve/line_protocol_host.h"

namespace mcullm::serve {

namespace {

// Runs one G command (with `pieces`, an S command's: U lines); false when the output is gone.
bool run_generate(Engine& engine, const lineproto::GenerateHead& g, const int* ids, uint32_t n_ids, int out_fd,
                  const std::atomic<bool>& stop, bool pieces = false) {
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
  int prev = n_ids > 0 ? ids[n_ids - 1] : -1;  // U: each token's bytes after the one before it
  const Engine::PromptDoneFn on_prompt = [&](double ms) {
    prompt_sent = true;
    out_ok = out_ok && write_all(out_fd, lineproto::format_prompt_done(ms));
  };
  const Engine::TokenFn on_token = [&](const TokenEvent& ev) {
    if (ev.id >= 0) {
      const double us = std::round(ev.us);
      const uint32_t whole = us > 4e9 ? 4000000000u : static_cast<uint32_t>(us);
      if (pieces) {
        out_ok = out_ok && write_all(out_fd, lineproto::format_piece(ev.id, whole, engine.tokenizer().decode_step(prev, ev.id)));
        prev = ev.id;
      } else {
        out_ok = out_ok && write_all(out_fd, lineproto::format_token(ev.id, whole));
      }
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

// Runs one S command: the text encoded by the engine's tokenizer as the board's tokenizer image encodes it.
bool run_text(Engine& engine, const lineproto::GenerateHead& g, std::string_view text, int out_fd, const std::atomic<bool>& stop) {
  std::vector<int> ids;
  EncodeOptions eo;
  eo.add_bos = engine.tokenizer().wants_bos();
  if (Status st = engine.tokenizer().encode(text, eo, &ids); !st.ok()) return write_all(out_fd, lineproto::format_error(st.message()));
  return run_generate(engine, g, ids.data(), static_cast<uint32_t>(ids.size()), out_fd, stop, true);
}

}  // namespace

Status serve_lines(Engine& engine, int in_fd, int out_fd, const std::atomic<bool>& stop) {
  lineproto::LineReader reader;
  std::vector<lineproto::LineReader::Line> lines;
  std::vector<int> ids(lineproto::kMaxPromptTokens);
  std::vector<char> text(lineproto::kMaxPromptTextBytes);
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
                                     &n_ids, text.data(), reply, &reply_len)) {
        case lineproto::LineAction::kIgnore: break;
        case lineproto::LineAction::kReply: ok = write_all(out_fd, std::string(reply, reply_len)); break;
        case lineproto::LineAction::kGenerate: ok = run_generate(engine, head, ids.data(), n_ids, out_fd, stop); break;
        case lineproto::LineAction::kGenerateText: ok = run_text(engine, head, std::string_view(text.data(), n_ids), out_fd, stop); break;
      }
      if (!ok) return Status::Ok();  // the other end is gone
    }
  }
  return Status::Ok();
}

}  // namespace mcullm::serve
