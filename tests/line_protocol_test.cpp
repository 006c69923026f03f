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
