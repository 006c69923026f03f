// The serial line protocol's codec (docs/protocol.md): the seed's example lines, exact formatting,
// and hostile input (too long, bad numbers, counts that disagree, random bytes) that must give an
// error and never a crash.
#include <random>

#include "serve/line_protocol_host.h"
#include "test_support.h"

namespace mcullm::lineproto {
namespace {

TEST(LineProtocol, ParsesTheSeedsExampleLines) {
  Message m;
  ASSERT_TRUE(parse_line("G 120 700 40 12345 0 7 433 447 259 405 1 2 3", &m).ok());
  EXPECT_EQ(m.kind, Kind::kGenerate);
  EXPECT_EQ(m.generate.n_predict, 120u);
  EXPECT_EQ(m.generate.temp_x1000, 700u);
  EXPECT_EQ(m.generate.top_k, 40u);
  EXPECT_EQ(m.generate.seed, 12345u);
  EXPECT_EQ(m.generate.flags, 0u);
  EXPECT_EQ(m.generate.prompt, (std::vector<int32_t>{433, 447, 259, 405, 1, 2, 3}));
  ASSERT_TRUE(parse_line("P 29.6", &m).ok());
  EXPECT_EQ(m.kind, Kind::kPromptDone);
  EXPECT_DOUBLE_EQ(m.ms, 29.6);
  ASSERT_TRUE(parse_line("T 11 10320", &m).ok());
  EXPECT_EQ(m.kind, Kind::kToken);
  EXPECT_EQ(m.token, 11);
  EXPECT_EQ(m.us, 10320u);
  ASSERT_TRUE(parse_line("E 120 10.32\r", &m).ok());
  EXPECT_EQ(m.kind, Kind::kEnd);
  EXPECT_EQ(m.n_tokens, 120u);
  EXPECT_DOUBLE_EQ(m.ms, 10.32);
  ASSERT_TRUE(parse_line("X the prompt has 600 tokens", &m).ok());
  EXPECT_EQ(m.kind, Kind::kError);
  EXPECT_EQ(m.text, "the prompt has 600 tokens");
}

// S text requests and U piece lines: escapes decoded, exact formatting, and escape -> unescape gives
// back any bytes (whole UTF-8 characters stay raw, everything else non-printable is escaped).
TEST(LineProtocol, TextRequestsAndPiecesRoundTrip) {
  Message m;
  ASSERT_OK(parse_line("S 50 700 40 9 1  Hi\\n\\t\\\\ caf\xc3\xa9 \\x41\\xc3\\xA9", &m));
  EXPECT_EQ(m.kind, Kind::kGenerateText);
  EXPECT_EQ(m.generate.n_predict, 50u);
  EXPECT_EQ(m.generate.flags, 1u);
  EXPECT_EQ(m.text, " Hi\n\t\\ caf\xc3\xa9 A\xc3\xa9");
  GenerateCommand g;
  g.n_predict = 50;
  g.temp_x1000 = 700;
  g.top_k = 40;
  g.seed = 9;
  g.flags = 1;
  EXPECT_EQ(format_text_request(g, " Hi\n\t\\ caf\xc3\xa9\x01\xff"), "S 50 700 40 9 1  Hi\\n\\t\\\\ caf\xc3\xa9\\x01\\xff\n");
  EXPECT_EQ(format_piece(7, 1234, " dog"), "U 7 1234  dog\n");
  EXPECT_EQ(format_piece(3, 0, ""), "U 3 0\n");
  EXPECT_EQ(format_piece(9, 5, "\xe2\x82"), "U 9 5 \\xe2\\x82\n");  // half a character: escaped
  ASSERT_OK(parse_line("U 7 1234  dog", &m));
  EXPECT_EQ(m.kind, Kind::kPiece);
  EXPECT_EQ(m.token, 7);
  EXPECT_EQ(m.us, 1234u);
  EXPECT_EQ(m.text, " dog");
  ASSERT_OK(parse_line("U 3 0", &m));
  EXPECT_EQ(m.text, "");
  std::mt19937 rng(11);
  for (int i = 0; i < 2000; ++i) {
    std::string bytes(rng() % 40, '\0');
    for (char& c : bytes) c = static_cast<char>(rng() % 4 ? 0x20 + rng() % 0x60 : rng());
    if (i % 3 == 0) bytes += "\xe2\x98\x83\xf0\x9f\x98\x80";  // whole characters
    const std::string line = format_piece(1, 2, bytes);
    ASSERT_EQ(line.find('\n'), line.size() - 1);
    ASSERT_OK(parse_line(std::string_view(line).substr(0, line.size() - 1), &m));
    ASSERT_EQ(m.text, bytes);
    if (i % 3 == 0) {
      EXPECT_NE(line.find("\xe2\x98\x83\xf0\x9f\x98\x80"), std::string::npos) << line;
    }
  }
}

TEST(LineProtocol, TextRequestsRefuseBadTextWithClearMessages) {
  Message m;
  const struct {
    const char* line;
    const char* message;
  } cases[] = {
      {"S 5 0 0 1 0", "S: the prompt text is empty"},
      {"S 5 0 0 1 0 ", "S: the prompt text is empty"},
      {"S 5 0 0 1", "S needs n_predict temp_x1000 top_k seed flags text"},
      {"S 5 0 0 1 0 a\\qb", "S: a bad escape in the text"},
      {"S 5 0 0 1 0 a\\", "S: a bad escape in the text"},
      {"S 5 0 0 1 0 a\\x4", "S: a bad escape in the text"},
      {"S 5 0 0 1 0 a\\xg1", "S: a bad escape in the text"},
      {"S 5 0 0 1 0 a\x01" "b", "S: a control byte in the text"},
      {"S 5 0 0 1 0 a\x7f", "S: a control byte in the text"},
      {"S x 0 0 1 0 text", "S: n_predict is not a whole number in 0..1000000: 'x'"},
      {"S 5 0 0 1 2 text", "S: unknown flag bits 0x2"},
      {"U x 1 a", "U: id is not a whole number"},
      {"U 1 2 a\\z", "U: a bad escape in the text"},
  };
  for (const auto& c : cases) {
    const Status st = parse_line(c.line, &m);
    EXPECT_FALSE(st.ok()) << c.line;
    EXPECT_NE(std::string(st.message()).find(c.message), std::string::npos) << c.line << ": " << st.message();
  }
  EXPECT_OK(parse_line("S 5 0 0 1 0 " + std::string(4096, 'a'), &m));
  const Status st = parse_line("S 5 0 0 1 0 " + std::string(4097, 'a'), &m);
  EXPECT_NE(std::string(st.message()).find("S: the text passes 4096 bytes"), std::string::npos) << st.message();
  std::string escaped;  // the limit is on the text's bytes, not the line's: 4000 escapes of 4 characters
  for (int i = 0; i < 4000; ++i) escaped += "\\x41";
  ASSERT_OK(parse_line("S 5 0 0 1 0 " + escaped, &m));
  EXPECT_EQ(m.text, std::string(4000, 'A'));
}

TEST(LineProtocol, FormatsExactly) {
  GenerateCommand g;
  g.n_predict = 120;
  g.temp_x1000 = 700;
  g.top_k = 40;
  g.seed = 42;
  g.flags = 1;
  g.prompt = {1, 403, 407};
  EXPECT_EQ(format_generate(g), "G 120 700 40 42 1 3 1 403 407\n");
  EXPECT_EQ(format_prompt_done(29.6), "P 29.60\n");
  EXPECT_EQ(format_token(11, 10320), "T 11 10320\n");
  EXPECT_EQ(format_end(120, 10.324), "E 120 10.32\n");
  EXPECT_EQ(format_end(0, -1), "E 0 0.00\n");
  EXPECT_EQ(format_error("bad\nthing\r"), "X bad thing \n");
  EXPECT_EQ(format_error(std::string(500, 'a')).size(), 2u + 200u + 1u);
  GenerateCommand back;
  ASSERT_TRUE(parse_generate(format_generate(g).substr(0, format_generate(g).size() - 1), &back).ok());
  EXPECT_EQ(back.prompt, g.prompt);
  EXPECT_EQ(back.flags, 1u);
}

TEST(LineProtocol, SpacesAreSeparatorsButNothingElseIs) {
  Message m;
  EXPECT_TRUE(parse_line("  G  5 0 40   1 0 1 7  ", &m).ok());
  EXPECT_FALSE(parse_line("G\t5 0 40 1 0 1 7", &m).ok());
  EXPECT_FALSE(parse_line("G 5 0 40 1 0 1 7\n", &m).ok());
  EXPECT_FALSE(parse_line("G 5 0 40 1 0 1 \xc3\xa9", &m).ok());
  EXPECT_FALSE(parse_line("", &m).ok());
  EXPECT_FALSE(parse_line("   ", &m).ok());
}

TEST(LineProtocol, RejectsBadNumbersWithClearMessages) {
  const char* bad[] = {
      "G -1 0 40 1 0 1 7",        "G +1 0 40 1 0 1 7",          "G 1e3 0 40 1 0 1 7",       "G 0x10 0 40 1 0 1 7",
      "G 5 0 40 0 0 1 7",         "G 5 0 40 4294967296 0 1 7",  "G 5 100001 40 1 0 1 7",    "G 5 0 40 1 2 1 7",
      "G 5 0 40 1 0 0",           "G 5 0 40 1 0 2 7",           "G 5 0 40 1 0 1 7 8",       "G 5 0 40 1 0 4097",
      "G 5 0 40 1 0 1 -7",        "G 5 0 40 1 0 1 2147483648",  "G 1000001 0 40 1 0 1 7",  "G 99999999999 0 40 1 0 1 7",
      "G 5 0 40 1 0",             "G",                          "P",                        "P 1.2.3",
      "P .5",                     "P 5.",                       "P -3",                     "P 1 2",
      "T 11",                     "T 11 -5",                    "T x 5",                    "E 5",
      "E 5 1e2",                  "Q 1 2",                      "g 5 0 40 1 0 1 7",         "GG 5 0 40 1 0 1 7",
  };
  for (const char* line : bad) {
    Message m;
    const Status st = parse_line(line, &m);
    EXPECT_FALSE(st.ok()) << line;
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << line;
    EXPECT_GT(std::string(st.message()).size(), 5u) << line;
  }
  Message m;
  const Status st = parse_line("G 5 0 40 1 0 3 7 8", &m);
  EXPECT_NE(std::string(st.message()).find("prompt_len says 3 ids but 2 follow"), std::string::npos) << st.message();
}

TEST(LineProtocol, RejectsLinesThatAreTooLong) {
  std::string line = "G 5 0 40 1 0 1 7";
  line += std::string(kMaxLineBytes, ' ');
  Message m;
  const Status st = parse_line(line, &m);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("too long"), std::string::npos);
}

TEST(LineProtocol, LineReaderSplitsStreamsAndDropsOverlongLinesOnce) {
  LineReader r;
  std::vector<LineReader::Line> lines;
  r.push("G 1 0 4", &lines);
  EXPECT_TRUE(lines.empty());
  r.push("0 1 0 1 7\r\nP 1.5\nT", &lines);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].text, "G 1 0 40 1 0 1 7\r");
  EXPECT_EQ(lines[1].text, "P 1.5");
  lines.clear();
  const std::string huge(3 * kMaxLineBytes, 'x');
  r.push(huge, &lines);
  r.push(huge, &lines);
  EXPECT_LE(r.pending(), kMaxLineBytes + 2);  // memory stays bounded
  r.push("\nE 3 1.00\n", &lines);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(lines[0].too_long);
  EXPECT_FALSE(lines[1].too_long);
  EXPECT_EQ(lines[1].text, "E 3 1.00");
}

// Random and mutated lines: every result is either a well-formed message (which formats back to a
// line that parses to the same thing) or an error with a message. Never a crash (ASan checks too).
TEST(LineProtocol, SurvivesRandomAndMutatedLines) {
  std::mt19937 rng(1234);
  const std::string alphabet = "GPTEX0123456789 .-+\r\t\x01\xff" "abc";
  const std::vector<std::string> seeds = {"G 120 700 40 12345 0 7 433 447 259 405 1 2 3", "P 29.6", "T 11 10320", "E 120 10.32",
                                          "G 4294967295 1 2147483647 4294967295 1 1 2147483647"};
  int ok = 0, errors = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string line;
    if (i % 2 == 0) {
      const size_t n = rng() % 64;
      for (size_t k = 0; k < n; ++k) line += alphabet[rng() % alphabet.size()];
    } else {
      line = seeds[rng() % seeds.size()];
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits && !line.empty(); ++e) {
        const size_t at = rng() % line.size();
        switch (rng() % 3) {
          case 0: line[at] = alphabet[rng() % alphabet.size()]; break;
          case 1: line.erase(at, 1); break;
          default: line.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
        }
      }
    }
    Message m;
    const Status st = parse_line(line, &m);
    if (!st.ok()) {
      ++errors;
      EXPECT_NE(st.message()[0], '\0') << line;
      continue;
    }
    ++ok;
    if (m.kind == Kind::kGenerate) {
      GenerateCommand back;
      std::string again = format_generate(m.generate);
      again.pop_back();
      ASSERT_TRUE(parse_generate(again, &back).ok()) << again;
      EXPECT_EQ(back.prompt, m.generate.prompt);
      EXPECT_EQ(back.seed, m.generate.seed);
    }
  }
  EXPECT_GT(ok, 100);
  EXPECT_GT(errors, 1000);
}

}  // namespace
}  // namespace mcullm::lineproto
