#include "board/line_codec.h"

#include <stdio.h>
#include <string.h>

#include "tokenizer/pretokenizer.h"

namespace mcullm::lineproto {

namespace {

bool printable(char c) {
  const unsigned char u = static_cast<unsigned char>(c);
  return u >= 0x21 && u <= 0x7e;
}

// Fields separated by runs of spaces: next() gives them in order.
struct FieldCursor {
  const char* line;
  size_t n;
  size_t i = 0;
  bool next(const char** f, size_t* len) {
    while (i < n && line[i] == ' ') ++i;
    if (i >= n) return false;
    const size_t start = i;
    while (i < n && line[i] != ' ') ++i;
    *f = line + start;
    *len = i - start;
    return true;
  }
};

// False if the line holds anything but printable ASCII and spaces; else *count = its fields.
bool count_fields(const char* line, size_t n, size_t* count) {
  *count = 0;
  bool in_field = false;
  for (size_t i = 0; i < n; ++i) {
    if (line[i] == ' ') {
      in_field = false;
      continue;
    }
    if (!printable(line[i])) return false;
    if (!in_field) ++*count;
    in_field = true;
  }
  return true;
}

// The field as it may appear in a message: 24 bytes at most, non-printable bytes as '?'.
void excerpt(const char* s, size_t n, char out[28]) {
  size_t k = 0;
  for (; k < n && k < 24; ++k) out[k] = printable(s[k]) ? s[k] : '?';
  if (n > 24) {
    memcpy(out + k, "...", 3);
    k += 3;
  }
  out[k] = '\0';
}

Status bad(const char* what, const char* field, size_t n) {
  char ex[28];
  excerpt(field, n, ex);
  return Status::Error(Code::kInvalidArgument, "%s: '%s'", what, ex);
}

// The five numbers after a G or S: n_predict temp_x1000 top_k seed flags (fields 1 to 5 of f).
Status parse_head(char cmd, const char* const f[6], const size_t len[6], GenerateHead* g) {
  char what[64];
  auto fail = [&](const char* m, int k) {
    snprintf(what, sizeof what, "%c: %s", cmd, m);
    return bad(what, f[k], len[k]);
  };
  if (!parse_u32(f[1], len[1], kMaxNPredict, &g->n_predict)) return fail("n_predict is not a whole number in 0..1000000", 1);
  if (!parse_u32(f[2], len[2], kMaxTempX1000, &g->temp_x1000)) return fail("temp_x1000 is not a whole number in 0..100000", 2);
  if (!parse_u32(f[3], len[3], 0x7fffffffu, &g->top_k)) return fail("top_k is not a whole number in 0..2147483647", 3);
  if (!parse_u32(f[4], len[4], 0xffffffffu, &g->seed) || g->seed == 0) return fail("seed is not a whole number in 1..4294967295", 4);
  if (!parse_u32(f[5], len[5], 0xffffffffu, &g->flags)) return fail("flags is not a whole number", 5);
  if (g->flags & ~kKnownFlags)
    return Status::Error(Code::kInvalidArgument, "%c: unknown flag bits 0x%x", cmd, static_cast<unsigned>(g->flags & ~kKnownFlags));
  return Status::Ok();
}

Status parse_generate_fields(FieldCursor c, size_t n_fields, GenerateHead* g, int* ids, uint32_t cap, uint32_t* n_ids) {
  if (n_fields < 7)
    return Status::Error(Code::kInvalidArgument, "G needs n_predict temp_x1000 top_k seed flags prompt_len ids (got %zu fields)", n_fields);
  const char* f[7] = {};
  size_t len[7] = {};
  for (int k = 0; k < 7; ++k) c.next(&f[k], &len[k]);
  MC_TRY(parse_head('G', f, len, g));
  uint32_t n = 0;
  if (!parse_u32(f[6], len[6], kMaxPromptTokens, &n) || n == 0) return bad("G: prompt_len is not a whole number in 1..4096", f[6], len[6]);
  if (n_fields - 7 != n) return Status::Error(Code::kInvalidArgument, "G: prompt_len says %u ids but %zu follow", static_cast<unsigned>(n), n_fields - 7);
  if (n > cap) return Status::Error(Code::kOutOfRange, "G: %u ids do not fit the %u this reader holds", static_cast<unsigned>(n), static_cast<unsigned>(cap));
  for (uint32_t i = 0; i < n; ++i) {
    const char* s = nullptr;
    size_t l = 0;
    c.next(&s, &l);
    uint32_t id = 0;
    if (!parse_u32(s, l, 0x7fffffffu, &id)) return bad("G: a prompt id is not a whole number", s, l);
    ids[i] = static_cast<int>(id);
  }
  *n_ids = n;
  return Status::Ok();
}

// A line whose first field is the one letter `cmd` followed by a space or the end (S and U carry raw
// text bytes, so they are told apart before the printable-ASCII check of the other lines).
bool starts_with_command(const char* line, size_t n, char cmd) {
  size_t i = 0;
  while (i < n && line[i] == ' ') ++i;
  return i < n && line[i] == cmd && (i + 1 == n || line[i + 1] == ' ');
}

// `fixed` printable fields (the command letter first), then one space and the escaped text, which runs
// to the end of the line (may be empty: then no space either). Fails when a field is missing.
bool split_text_line(const char* line, size_t n, int fixed, const char** f, size_t* len, const char** text, size_t* text_len) {
  FieldCursor c{line, n};
  for (int k = 0; k < fixed; ++k) {
    if (!c.next(&f[k], &len[k])) return false;
    for (size_t j = 0; j < len[k]; ++j)
      if (!printable(f[k][j])) return false;
  }
  *text = line + c.i + (c.i < n ? 1 : 0);
  *text_len = c.i < n ? n - c.i - 1 : 0;
  return true;
}

Status parse_text_fields(const char* line, size_t n, MessageView* out) {
  const char* f[6] = {};
  size_t len[6] = {};
  if (!split_text_line(line, n, 6, f, len, &out->text, &out->text_len))
    return Status::Error(Code::kInvalidArgument, "S needs n_predict temp_x1000 top_k seed flags text");
  MC_TRY(parse_head('S', f, len, &out->generate));
  const char* why = "";
  size_t bytes = 0;
  if (!unescape_text(out->text, out->text_len, nullptr, kMaxPromptTextBytes, &bytes, &why))
    return Status::Error(Code::kInvalidArgument, "S: %s", why);
  if (bytes == 0) return Status::Error(Code::kInvalidArgument, "S: the prompt text is empty");
  return Status::Ok();
}

Status parse_piece_fields(const char* line, size_t n, MessageView* out) {
  const char* f[3] = {};
  size_t len[3] = {};
  uint32_t id = 0;
  const char* why = "";
  size_t bytes = 0;
  if (!split_text_line(line, n, 3, f, len, &out->text, &out->text_len)) return Status::Error(Code::kInvalidArgument, "U needs id us [text]");
  if (!parse_u32(f[1], len[1], 0x7fffffffu, &id)) return bad("U: id is not a whole number", f[1], len[1]);
  out->token = static_cast<int32_t>(id);
  if (!parse_u32(f[2], len[2], 0xffffffffu, &out->us)) return bad("U: us is not a whole number", f[2], len[2]);
  if (!unescape_text(out->text, out->text_len, nullptr, kMaxLineBytes, &bytes, &why)) return Status::Error(Code::kInvalidArgument, "U: %s", why);
  return Status::Ok();
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

size_t fixed2(double v, char* out, size_t cap) {
  if (!(v >= 0)) v = 0;  // NaN or negative
  if (v > 1e12) v = 1e12;
  const int k = snprintf(out, cap, "%.2f", v);
  return k > 0 ? static_cast<size_t>(k) : 0;
}

}  // namespace

bool parse_u32(const char* s, size_t n, uint32_t max, uint32_t* out) {
  if (n == 0 || n > 10) return false;
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + static_cast<uint64_t>(s[i] - '0');
  }
  if (v > max) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

// digits [ '.' digits ]: a non-negative decimal of at most 24 characters.
bool parse_decimal(const char* s, size_t n, double* out) {
  if (n == 0 || n > 24) return false;
  double v = 0, scale = 0;
  bool digits = false;
  for (size_t i = 0; i < n; ++i) {
    const char c = s[i];
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
  if (!digits || s[n - 1] == '.' || s[0] == '.') return false;
  *out = v;
  return true;
}

bool unescape_text(const char* s, size_t n, char* out, size_t cap, size_t* len, const char** why) {
  size_t k = 0;
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      *why = "a control byte in the text (escape it: \\n \\r \\t \\xHH)";
      return false;
    }
    if (c == '\\') {
      const char e = i + 1 < n ? s[++i] : '\0';
      if (e == 'n') c = '\n';
      else if (e == 'r') c = '\r';
      else if (e == 't') c = '\t';
      else if (e == '\\') c = '\\';
      else if (e == 'x' && i + 2 < n && hex_digit(s[i + 1]) >= 0 && hex_digit(s[i + 2]) >= 0) {
        c = static_cast<unsigned char>(hex_digit(s[i + 1]) * 16 + hex_digit(s[i + 2]));
        i += 2;
      } else {
        *why = "a bad escape in the text (\\\\ \\n \\r \\t \\xHH)";
        return false;
      }
    }
    if (k == cap) {
      *why = cap == kMaxPromptTextBytes ? "the text passes 4096 bytes" : "the text is too long";
      return false;
    }
    if (out) out[k] = static_cast<char>(c);
    ++k;
  }
  *len = k;
  return true;
}

size_t escape_text(const char* s, size_t n, char* out) {
  static const char kHex[] = "0123456789abcdef";
  const unsigned char* u = reinterpret_cast<const unsigned char*>(s);
  size_t k = 0;
  for (size_t i = 0; i < n;) {
    const unsigned char c = u[i];
    if (c >= 0x80) {
      size_t w = 0;
      if (utf8_decode(u + i, n - i, &w) < kInvalidCodePoint) {  // a whole well-formed character: as it is
        memcpy(out + k, s + i, w);
        k += w;
        i += w;
        continue;
      }
    }
    ++i;
    if (c == '\\' || c == '\n' || c == '\r' || c == '\t') {
      out[k++] = '\\';
      out[k++] = c == '\\' ? '\\' : c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
    } else if (c < 0x20 || c >= 0x7f) {
      out[k++] = '\\';
      out[k++] = 'x';
      out[k++] = kHex[c >> 4];
      out[k++] = kHex[c & 15];
    } else {
      out[k++] = static_cast<char>(c);
    }
  }
  return k;
}

Status parse_message(const char* line, size_t n, MessageView* out, int* ids, uint32_t cap) {
  if (n > 0 && line[n - 1] == '\r') --n;
  if (n > kMaxLineBytes) return Status::Error(Code::kInvalidArgument, "line too long (%zu bytes, at most %zu)", n, kMaxLineBytes);
  *out = MessageView();
  if (n >= 2 && line[0] == 'X' && line[1] == ' ') {  // free text, kept as is
    out->text = line + 2;
    out->text_len = n - 2;
    return Status::Ok();
  }
  if (n == 1 && line[0] == 'X') return Status::Ok();
  if (starts_with_command(line, n, 'S')) {
    out->kind = Kind::kGenerateText;
    return parse_text_fields(line, n, out);
  }
  if (starts_with_command(line, n, 'U')) {
    out->kind = Kind::kPiece;
    return parse_piece_fields(line, n, out);
  }
  size_t n_fields = 0;
  if (!count_fields(line, n, &n_fields)) return Status::Error(Code::kInvalidArgument, "line holds a byte that is not printable ASCII");
  if (n_fields == 0) return Status::Error(Code::kInvalidArgument, "empty line");
  FieldCursor c{line, n};
  const char* f[3] = {};
  size_t len[3] = {};
  c.next(&f[0], &len[0]);
  if (len[0] != 1) return bad("unknown command", f[0], len[0]);
  if (f[0][0] == 'G') {
    out->kind = Kind::kGenerate;
    return parse_generate_fields(FieldCursor{line, n}, n_fields, &out->generate, ids, cap, &out->n_ids);
  }
  for (size_t k = 1; k < 3 && k < n_fields; ++k) c.next(&f[k], &len[k]);
  switch (f[0][0]) {
    case 'P':
      out->kind = Kind::kPromptDone;
      if (n_fields != 2) return Status::Error(Code::kInvalidArgument, "P needs one field (ms), got %zu", n_fields - 1);
      if (!parse_decimal(f[1], len[1], &out->ms)) return bad("P: ms is not a decimal number", f[1], len[1]);
      return Status::Ok();
    case 'T': {
      out->kind = Kind::kToken;
      if (n_fields != 3) return Status::Error(Code::kInvalidArgument, "T needs two fields (id us), got %zu", n_fields - 1);
      uint32_t id = 0;
      if (!parse_u32(f[1], len[1], 0x7fffffffu, &id)) return bad("T: id is not a whole number", f[1], len[1]);
      out->token = static_cast<int32_t>(id);
      if (!parse_u32(f[2], len[2], 0xffffffffu, &out->us)) return bad("T: us is not a whole number", f[2], len[2]);
      return Status::Ok();
    }
    case 'E':
      out->kind = Kind::kEnd;
      if (n_fields != 3) return Status::Error(Code::kInvalidArgument, "E needs two fields (tokens ms_per_token), got %zu", n_fields - 1);
      if (!parse_u32(f[1], len[1], kMaxNPredict, &out->n_tokens)) return bad("E: tokens is not a whole number", f[1], len[1]);
      if (!parse_decimal(f[2], len[2], &out->ms)) return bad("E: ms_per_token is not a decimal number", f[2], len[2]);
      return Status::Ok();
    default:
      return bad("unknown command", f[0], len[0]);
  }
}

size_t format_prompt_done(double ms, char* out) {
  out[0] = 'P';
  out[1] = ' ';
  size_t k = 2 + fixed2(ms, out + 2, kMaxFormattedLine - 3);
  out[k++] = '\n';
  return k;
}

size_t format_token(int32_t id, uint32_t us, char* out) {
  const int k = snprintf(out, kMaxFormattedLine, "T %ld %lu\n", static_cast<long>(id), static_cast<unsigned long>(us));
  return k > 0 ? static_cast<size_t>(k) : 0;
}

size_t format_piece(int32_t id, uint32_t us, const char* piece, size_t n, char* out) {
  const int head = snprintf(out, kMaxFormattedLine, "U %ld %lu", static_cast<long>(id), static_cast<unsigned long>(us));
  size_t k = head > 0 ? static_cast<size_t>(head) : 0;
  if (n > 0) {
    out[k++] = ' ';
    k += escape_text(piece, n, out + k);
  }
  out[k++] = '\n';
  return k;
}

size_t format_end(uint32_t n_tokens, double ms_per_token, char* out) {
  int k = snprintf(out, kMaxFormattedLine, "E %lu ", static_cast<unsigned long>(n_tokens));
  size_t len = k > 0 ? static_cast<size_t>(k) : 0;
  len += fixed2(ms_per_token, out + len, kMaxFormattedLine - len - 1);
  out[len++] = '\n';
  return len;
}

size_t format_error(const char* message, size_t n, char* out) {
  out[0] = 'X';
  out[1] = ' ';
  size_t k = 2;
  for (size_t i = 0; i < n && i < kMaxErrorText; ++i) {
    const unsigned char c = static_cast<unsigned char>(message[i]);
    out[k++] = (c < 0x20 || c == 0x7f) ? ' ' : static_cast<char>(c);
  }
  out[k++] = '\n';
  return k;
}

LineSplitter::Event LineSplitter::push(char c) {
  if (done_) {
    len_ = 0;
    done_ = false;
  }
  if (c == '\n') {
    if (discarding_) {
      discarding_ = false;
      len_ = 0;
      return Event::kNone;
    }
    done_ = true;
    buf_[len_] = '\0';
    return Event::kLine;
  }
  if (discarding_) return Event::kNone;
  buf_[len_++] = c;
  // kMaxLineBytes plus room for a '\r' before the '\n'.
  if (len_ > kMaxLineBytes + 1) {
    len_ = 0;
    discarding_ = true;
    return Event::kTooLong;
  }
  return Event::kNone;
}

LineAction answer_line(const char* line, size_t n, bool too_long, GenerateHead* g, int* ids, uint32_t cap, uint32_t* n_ids,
                       char* text, char* reply, size_t* reply_len) {
  static const char kTooLong[] = "line too long (at most 16384 bytes)";
  static const char kOnlyG[] = "the board takes G and S lines only";
  if (too_long) {
    *reply_len = format_error(kTooLong, sizeof kTooLong - 1, reply);
    return LineAction::kReply;
  }
  if (n > 0 && line[n - 1] == '\r') --n;
  size_t blank = 0;
  while (blank < n && line[blank] == ' ') ++blank;
  if (blank == n) return LineAction::kIgnore;
  MessageView m;
  const Status st = parse_message(line, n, &m, ids, cap);
  if (!st.ok()) {
    *reply_len = format_error(st.message(), strlen(st.message()), reply);
    return LineAction::kReply;
  }
  if (m.kind == Kind::kGenerateText) {
    size_t len = 0;
    const char* why = "";
    unescape_text(m.text, m.text_len, text, kMaxPromptTextBytes, &len, &why);  // parse_message checked it
    *g = m.generate;
    *n_ids = static_cast<uint32_t>(len);
    return LineAction::kGenerateText;
  }
  if (m.kind != Kind::kGenerate) {
    *reply_len = format_error(kOnlyG, sizeof kOnlyG - 1, reply);
    return LineAction::kReply;
  }
  *g = m.generate;
  *n_ids = m.n_ids;
  return LineAction::kGenerate;
}

Status check_prompt(const int* ids, size_t n, int vocab_size, int ctx_len) {
  if (n == 0) return Status::Error(Code::kInvalidArgument, "the prompt has no tokens");
  for (size_t i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= vocab_size)
      return Status::Error(Code::kInvalidArgument, "token id %d is not in the vocabulary (0..%d)", ids[i], vocab_size - 1);
  if (n > static_cast<size_t>(ctx_len))
    return Status::Error(Code::kOutOfRange, "the prompt has %zu tokens, the context holds %d", n, ctx_len);
  return Status::Ok();
}

int predict_budget(int n_predict, int n_prompt, int ctx_len) {
  const int max_new = ctx_len - n_prompt + 1;
  return n_predict < 0 ? max_new : (n_predict < max_new ? n_predict : max_new);
}

}  // namespace mcullm::lineproto
