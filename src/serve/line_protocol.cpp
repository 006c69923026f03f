#include "serve/line_protocol.h"

#include <cstdio>

namespace mcullm::lineproto {

namespace {

// Splits on runs of spaces; returns false if the line holds anything but printable ASCII.
bool split_fields(std::string_view line, std::vector<std::string_view>* fields) {
  fields->clear();
  size_t i = 0;
  while (i < line.size()) {
    const unsigned char c = static_cast<unsigned char>(line[i]);
    if (c == ' ') {
      ++i;
      continue;
    }
    if (c < 0x21 || c > 0x7e) return false;
    size_t j = i;
    while (j < line.size() && line[j] != ' ') {
      const unsigned char d = static_cast<unsigned char>(line[j]);
      if (d < 0x21 || d > 0x7e) return false;
      ++j;
    }
    fields->push_back(line.substr(i, j - i));
    i = j;
  }
  return true;
}

// Decimal digits only (no sign, no spaces), at most 10 digits, value <= max.
bool parse_u32(std::string_view s, uint32_t max, uint32_t* out) {
  if (s.empty() || s.size() > 10) return false;
  uint64_t v = 0;
  for (const char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > max) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

// digits [ '.' digits ]: a non-negative decimal of at most 24 characters.
bool parse_decimal(std::string_view s, double* out) {
  if (s.empty() || s.size() > 24) return false;
  double v = 0, scale = 0;
  bool digits = false;
  for (const char c : s) {
    if (c == '.') {
      if (scale != 0) return false;
      scale = 1;
      continue;
    }
    if (c < '0' || c > '9') return false;
    digits = true;
    if (scale == 0) {
      v = v * 10 + (c - '0');
    } else {
      scale /= 10;
      v += (c - '0') * scale;
    }
  }
  if (!digits || s.back() == '.' || s.front() == '.') return false;
  *out = v;
  return true;
}

std::string excerpt(std::string_view s) {
  std::string out;
  for (const char c : s.substr(0, 24)) out += (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) ? '?' : c;
  if (s.size() > 24) out += "...";
  return out;
}

Status bad(const char* what, std::string_view field) {
  return Status::Error(Code::kInvalidArgument, "%s: '%s'", what, excerpt(field).c_str());
}

std::string_view strip_cr(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

Status parse_generate_fields(const std::vector<std::string_view>& f, GenerateCommand* g) {
  if (f.size() < 7)
    return Status::Error(Code::kInvalidArgument, "G needs n_predict temp_x1000 top_k seed flags prompt_len ids (got %zu fields)", f.size());
  if (!parse_u32(f[1], kMaxNPredict, &g->n_predict)) return bad("G: n_predict is not a whole number in 0..1000000", f[1]);
  if (!parse_u32(f[2], kMaxTempX1000, &g->temp_x1000)) return bad("G: temp_x1000 is not a whole number in 0..100000", f[2]);
  if (!parse_u32(f[3], 0x7fffffffu, &g->top_k)) return bad("G: top_k is not a whole number in 0..2147483647", f[3]);
  if (!parse_u32(f[4], 0xffffffffu, &g->seed) || g->seed == 0) return bad("G: seed is not a whole number in 1..4294967295", f[4]);
  if (!parse_u32(f[5], 0xffffffffu, &g->flags)) return bad("G: flags is not a whole number", f[5]);
  if (g->flags & ~kKnownFlags) return Status::Error(Code::kInvalidArgument, "G: unknown flag bits 0x%x", g->flags & ~kKnownFlags);
  uint32_t n = 0;
  if (!parse_u32(f[6], kMaxPromptTokens, &n) || n == 0) return bad("G: prompt_len is not a whole number in 1..4096", f[6]);
  if (f.size() - 7 != n)
    return Status::Error(Code::kInvalidArgument, "G: prompt_len says %u ids but %zu follow", n, f.size() - 7);
  g->prompt.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t id = 0;
    if (!parse_u32(f[7 + i], 0x7fffffffu, &id)) return bad("G: a prompt id is not a whole number", f[7 + i]);
    g->prompt[i] = static_cast<int32_t>(id);
  }
  return Status::Ok();
}

}  // namespace

Status parse_generate(std::string_view line, GenerateCommand* out) {
  Message m;
  MC_TRY(parse_line(line, &m));
  if (m.kind != Kind::kGenerate) return Status::Error(Code::kInvalidArgument, "expected a G line");
  *out = std::move(m.generate);
  return Status::Ok();
}

Status parse_line(std::string_view line, Message* out) {
  line = strip_cr(line);
  if (line.size() > kMaxLineBytes) return Status::Error(Code::kInvalidArgument, "line too long (%zu bytes, at most %zu)", line.size(), kMaxLineBytes);
  *out = Message();
  if (line.size() >= 2 && line[0] == 'X' && line[1] == ' ') {  // free text, kept as is
    out->kind = Kind::kError;
    out->text = std::string(line.substr(2));
    return Status::Ok();
  }
  if (line == "X") {
    out->kind = Kind::kError;
    return Status::Ok();
  }
  std::vector<std::string_view> f;
  if (!split_fields(line, &f)) return Status::Error(Code::kInvalidArgument, "line holds a byte that is not printable ASCII");
  if (f.empty()) return Status::Error(Code::kInvalidArgument, "empty line");
  if (f[0].size() != 1) return bad("unknown command", f[0]);
  switch (f[0][0]) {
    case 'G':
      out->kind = Kind::kGenerate;
      return parse_generate_fields(f, &out->generate);
    case 'P':
      out->kind = Kind::kPromptDone;
      if (f.size() != 2) return Status::Error(Code::kInvalidArgument, "P needs one field (ms), got %zu", f.size() - 1);
      if (!parse_decimal(f[1], &out->ms)) return bad("P: ms is not a decimal number", f[1]);
      return Status::Ok();
    case 'T': {
      out->kind = Kind::kToken;
      if (f.size() != 3) return Status::Error(Code::kInvalidArgument, "T needs two fields (id us), got %zu", f.size() - 1);
      uint32_t id = 0;
      if (!parse_u32(f[1], 0x7fffffffu, &id)) return bad("T: id is not a whole number", f[1]);
      out->token = static_cast<int32_t>(id);
      if (!parse_u32(f[2], 0xffffffffu, &out->us)) return bad("T: us is not a whole number", f[2]);
      return Status::Ok();
    }
    case 'E':
      out->kind = Kind::kEnd;
      if (f.size() != 3) return Status::Error(Code::kInvalidArgument, "E needs two fields (tokens ms_per_token), got %zu", f.size() - 1);
      if (!parse_u32(f[1], kMaxNPredict, &out->n_tokens)) return bad("E: tokens is not a whole number", f[1]);
      if (!parse_decimal(f[2], &out->ms)) return bad("E: ms_per_token is not a decimal number", f[2]);
      return Status::Ok();
    default:
      return bad("unknown command", f[0]);
  }
}

std::string format_generate(const GenerateCommand& g) {
  std::string s = "G";
  for (const uint32_t v : {g.n_predict, g.temp_x1000, g.top_k, g.seed, g.flags, static_cast<uint32_t>(g.prompt.size())}) {
    s += ' ';
    s += std::to_string(v);
  }
  for (const int32_t id : g.prompt) {
    s += ' ';
    s += std::to_string(id);
  }
  s += '\n';
  return s;
}

namespace {
std::string fixed2(double v) {
  if (!(v >= 0)) v = 0;  // NaN or negative
  if (v > 1e12) v = 1e12;
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}
}  // namespace

std::string format_prompt_done(double ms) { return "P " + fixed2(ms) + "\n"; }
std::string format_token(int32_t id, uint32_t us) { return "T " + std::to_string(id) + " " + std::to_string(us) + "\n"; }
std::string format_end(uint32_t n_tokens, double ms_per_token) { return "E " + std::to_string(n_tokens) + " " + fixed2(ms_per_token) + "\n"; }

std::string format_error(std::string_view message) {
  std::string s = "X ";
  for (const char c : message.substr(0, 200)) s += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? ' ' : c;
  return s + "\n";
}

void LineReader::push(std::string_view bytes, std::vector<Line>* lines) {
  for (const char c : bytes) {
    if (c == '\n') {
      if (discarding_) {
        discarding_ = false;
      } else {
        lines->push_back(Line{std::move(buf_), false});
      }
      buf_.clear();
      continue;
    }
    if (discarding_) continue;
    buf_ += c;
    // kMaxLineBytes plus room for a '\r' before the '\n'.
    if (buf_.size() > kMaxLineBytes + 1) {
      lines->push_back(Line{std::string(), true});
      buf_.clear();
      discarding_ = true;
    }
  }
}

}  // namespace mcullm::lineproto
