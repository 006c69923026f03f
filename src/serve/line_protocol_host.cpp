#include "serve/line_protocol_host.h"

#include <cstring>

namespace mcullm::lineproto {

Status parse_generate(std::string_view line, GenerateCommand* out) {
  Message m;
  MC_TRY(parse_line(line, &m));
  if (m.kind != Kind::kGenerate) return Status::Error(Code::kInvalidArgument, "expected a G line");
  *out = std::move(m.generate);
  return Status::Ok();
}

Status parse_line(std::string_view line, Message* out) {
  *out = Message();
  std::vector<int> ids(kMaxPromptTokens);
  MessageView v;
  MC_TRY(parse_message(line.data(), line.size(), &v, ids.data(), kMaxPromptTokens));
  out->kind = v.kind;
  out->generate.n_predict = v.generate.n_predict;
  out->generate.temp_x1000 = v.generate.temp_x1000;
  out->generate.top_k = v.generate.top_k;
  out->generate.seed = v.generate.seed;
  out->generate.flags = v.generate.flags;
  out->generate.prompt.assign(ids.begin(), ids.begin() + v.n_ids);
  out->ms = v.ms;
  out->token = v.token;
  out->us = v.us;
  out->n_tokens = v.n_tokens;
  if (v.kind == Kind::kGenerateText || v.kind == Kind::kPiece) {  // unescaped (parse_message checked the escapes)
    out->text.resize(v.text_len);
    size_t len = 0;
    const char* why = "";
    unescape_text(v.text, v.text_len, out->text.data(), v.text_len, &len, &why);
    out->text.resize(len);
  } else {
    out->text.assign(v.text, v.text_len);
  }
  return Status::Ok();
}

std::string format_text_request(const GenerateCommand& g, std::string_view text) {
  std::string s = "S";
  for (const uint32_t v : {g.n_predict, g.temp_x1000, g.top_k, g.seed, g.flags}) {
    s += ' ';
    s += std::to_string(v);
  }
  std::string esc(4 * text.size(), '\0');
  esc.resize(escape_text(text.data(), text.size(), esc.data()));
  if (!esc.empty()) s += ' ' + esc;
  s += '\n';
  return s;
}

std::string format_piece(int32_t id, uint32_t us, std::string_view piece) {
  std::string buf(kMaxFormattedLine + 4 * piece.size(), '\0');
  buf.resize(format_piece(id, us, piece.data(), piece.size(), buf.data()));
  return buf;
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

std::string format_prompt_done(double ms) {
  char buf[kMaxFormattedLine];
  return std::string(buf, format_prompt_done(ms, buf));
}

std::string format_token(int32_t id, uint32_t us) {
  char buf[kMaxFormattedLine];
  return std::string(buf, format_token(id, us, buf));
}

std::string format_end(uint32_t n_tokens, double ms_per_token) {
  char buf[kMaxFormattedLine];
  return std::string(buf, format_end(n_tokens, ms_per_token, buf));
}

std::string format_error(std::string_view message) {
  char buf[kMaxFormattedLine];
  return std::string(buf, format_error(message.data(), message.size(), buf));
}

void LineReader::push(std::string_view bytes, std::vector<Line>* lines) {
  for (const char c : bytes) {
    switch (splitter_.push(c)) {
      case LineSplitter::Event::kLine: lines->push_back(Line{std::string(splitter_.line(), splitter_.size()), false}); break;
      case LineSplitter::Event::kTooLong: lines->push_back(Line{std::string(), true}); break;
      case LineSplitter::Event::kNone: break;
    }
  }
}

}  // namespace mcullm::lineproto
