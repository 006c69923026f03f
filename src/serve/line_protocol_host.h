// The single board's serial line protocol (docs/protocol.md): a codec that parses and formats lines.
// Parsing never trusts its input: every line is length-limited, every number range-checked, every
// count compared with what follows; a bad line gives a Status with a one-line message, never a crash.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include <string>
#include <string_view>
#include <vector>

#include "board/line_codec.h"
#include "mcullm/status.h"

namespace mcullm::lineproto {

// The limits and the codec's core are in board/line_codec.h (shared with the firmware); these are
// the PC's std::string / std::vector wrappers around it.

// PC -> board: G n_predict temp_x1000 top_k seed flags prompt_len id_1 ... id_prompt_len
struct GenerateCommand {
  uint32_t n_predict = 0;
  uint32_t temp_x1000 = 0;
  uint32_t top_k = 0;
  uint32_t seed = 1;
  uint32_t flags = 0;
  std::vector<int32_t> prompt;
};

// One parsed line of either direction.
struct Message {
  Kind kind = Kind::kError;
  GenerateCommand generate;  // G
  double ms = 0;             // P: prompt time in ms; E: ms per generated token
  int32_t token = 0;         // T
  uint32_t us = 0;           // T: the token's time in microseconds
  uint32_t n_tokens = 0;     // E
  std::string text;          // X; S: the prompt text, U: the token's bytes (both unescaped)
};

// Parses one line (without '\n'; a trailing '\r' is accepted). Fields are separated by one or more
// spaces. Fails with kInvalidArgument and a message fit for an X line.
Status parse_line(std::string_view line, Message* out);
Status parse_generate(std::string_view line, GenerateCommand* out);

// Each returns one line including its '\n'.
std::string format_generate(const GenerateCommand& g);
// S n_predict temp_x1000 top_k seed flags text (g.prompt unused; the text escaped).
std::string format_text_request(const GenerateCommand& g, std::string_view text);
// U id us [piece escaped].
std::string format_piece(int32_t id, uint32_t us, std::string_view piece);
std::string format_prompt_done(double ms);
std::string format_token(int32_t id, uint32_t us);
std::string format_end(uint32_t n_tokens, double ms_per_token);
// Control characters become spaces and the text is cut to 200 bytes, so that it stays one line.
std::string format_error(std::string_view message);

// Splits a byte stream into lines (LineSplitter). A line longer than kMaxLineBytes is reported once as too long
// (its bytes up to the next '\n' are dropped), so a hostile peer cannot grow memory without bound.
class LineReader {
 public:
  struct Line {
    std::string text;
    bool too_long = false;
  };
  // Appends bytes and moves every completed line to *lines.
  void push(std::string_view bytes, std::vector<Line>* lines);
  size_t pending() const { return splitter_.pending(); }

 private:
  LineSplitter splitter_;
};

}  // namespace mcullm::lineproto
