// The serial line protocol's core (docs/protocol.md), freestanding: parsing, formatting, the line
// splitter and the board's answer to one input line. `mcullm serve --serial` (serve/serial_server_host.h,
// through serve/line_protocol_host.h's std::string wrappers) and the firmware (board/line_server.h) both
// run this code, so their bytes cannot drift apart. No heap: lines and ids live in caller buffers.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "mcullm/status.h"

namespace mcullm::lineproto {

constexpr size_t kMaxLineBytes = 16384;       // without the terminating '\n'
constexpr uint32_t kMaxPromptTokens = 4096;
constexpr uint32_t kMaxNPredict = 1000000;
constexpr uint32_t kMaxTempX1000 = 100000;    // temperature 100
constexpr uint32_t kFlagIgnoreEos = 1u << 0;  // do not stop at the end tokens (BOS / EOS)
constexpr uint32_t kKnownFlags = kFlagIgnoreEos;
constexpr size_t kMaxErrorText = 200;         // an X line's text is cut to this
constexpr size_t kMaxFormattedLine = 2 + kMaxErrorText + 1;  // the longest line a format_* writes (X; U: plus its piece)
constexpr size_t kMaxPromptTextBytes = 4096;  // an S line's text after unescaping
constexpr size_t kTextIdsCapacity = kMaxPromptTextBytes + 3;  // ids its encoding may need (tokenizer_image.h: n + 3)

enum class Kind { kGenerate, kPromptDone, kToken, kEnd, kError, kGenerateText, kPiece };

// Text in S and U lines is escaped so that it stays one line: backslash as \\, newline \n, carriage
// return \r, tab \t, any other byte as \xHH (two hex digits). Readers take raw bytes >= 0x80 and
// printable ASCII as they are and refuse other control bytes; writers escape every byte below 0x20, 0x7f
// and bytes >= 0x80 that are not part of a complete UTF-8 character within the text.
// Unescapes s[0, n) into out (may be null: only checks and counts); false (and *why) on a bad escape
// or a raw control byte, or when the result passes `cap` bytes.
bool unescape_text(const char* s, size_t n, char* out, size_t cap, size_t* len, const char** why);
// Escapes s[0, n) into out (at least 4 * n bytes) and returns the length.
size_t escape_text(const char* s, size_t n, char* out);

// A G line's settings (the prompt ids go to a caller array).
struct GenerateHead {
  uint32_t n_predict = 0;
  uint32_t temp_x1000 = 0;
  uint32_t top_k = 0;
  uint32_t seed = 1;
  uint32_t flags = 0;
};

// One parsed line of either direction; text points into the parsed line.
struct MessageView {
  Kind kind = Kind::kError;
  GenerateHead generate;  // G (ids: the caller's array, n_ids of them), S
  uint32_t n_ids = 0;
  double ms = 0;          // P: prompt time in ms; E: ms per generated token
  int32_t token = 0;      // T, U
  uint32_t us = 0;        // T, U: the token's time in microseconds
  uint32_t n_tokens = 0;  // E
  const char* text = "";  // X: as it is; S: the prompt, U: the piece, both still escaped (checked: unescape_text)
  size_t text_len = 0;
};

// Parses one line (without '\n'; a trailing '\r' is accepted). A G line's ids go to ids[cap]
// (cap >= kMaxPromptTokens takes any valid line). Fails with kInvalidArgument and a message fit for
// an X line.
Status parse_message(const char* line, size_t n, MessageView* out, int* ids, uint32_t cap);

// Number fields as the protocol writes them (exposed for the host wrappers and the tests).
bool parse_u32(const char* s, size_t n, uint32_t max, uint32_t* out);
bool parse_decimal(const char* s, size_t n, double* out);

// Each writes one line including its '\n' to out (at least kMaxFormattedLine bytes) and returns
// its length. Times: two decimals, negative or NaN as 0.
size_t format_prompt_done(double ms, char* out);
size_t format_token(int32_t id, uint32_t us, char* out);
// U id us [' ' escaped piece]: a token of an S request with the bytes it stands for (decode_step);
// out holds at least kMaxFormattedLine + 4 * n bytes.
size_t format_piece(int32_t id, uint32_t us, const char* piece, size_t n, char* out);
size_t format_end(uint32_t n_tokens, double ms_per_token, char* out);
// Control characters become spaces and the text is cut to kMaxErrorText bytes: one line.
size_t format_error(const char* message, size_t n, char* out);

// Splits a byte stream into lines, one byte at a time, in a fixed buffer. A line longer than
// kMaxLineBytes (plus a '\r') is reported once as too long and its bytes up to the next '\n' are
// dropped, so a hostile peer cannot grow memory.
class LineSplitter {
 public:
  enum class Event { kNone, kLine, kTooLong };
  // kLine: line() / size() hold the line (without '\n') until the next push.
  Event push(char c);
  const char* line() const { return buf_; }
  size_t size() const { return len_; }
  size_t pending() const { return discarding_ || done_ ? 0 : len_; }

 private:
  char buf_[kMaxLineBytes + 2];
  size_t len_ = 0;
  bool discarding_ = false;
  bool done_ = false;  // the last push returned a line: start afresh on the next byte
};

// What a board does with one input line (the same for `serve --serial` and the firmware).
enum class LineAction {
  kIgnore,        // a blank line
  kReply,         // reply[0, *reply_len) is the X line to send
  kGenerate,      // *g and ids[0, *n_ids) are a G command to run
  kGenerateText,  // *g and text[0, *n_ids) (unescaped, 1..kMaxPromptTextBytes bytes) are an S command to run
};
// text: kMaxPromptTextBytes bytes, or null (an S line's text is then checked but not kept).
LineAction answer_line(const char* line, size_t n, bool too_long, GenerateHead* g, int* ids, uint32_t cap, uint32_t* n_ids,
                       char* text, char* reply, size_t* reply_len);

// The checks of a prompt before a generation (the same messages on the PC and on a board).
Status check_prompt(const int* ids, size_t n, int vocab_size, int ctx_len);
// New tokens a request may get: n_predict (< 0: unlimited), capped by the context (the prompt's last
// step samples one).
int predict_budget(int n_predict, int n_prompt, int ctx_len);

}  // namespace mcullm::lineproto
