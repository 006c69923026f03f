#include "tokenizer/llama2c_tokenizer_host.h"

#include <cctype>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "test_support.h"

namespace mcullm {
namespace {

using test::read_file;
using test::read_text;
using test::shared_path;

const Llama2cTokenizer& tok512() {
  static Llama2cTokenizer* t = [] {
    auto* tk = new Llama2cTokenizer;
    const Status s = tk->load_file(shared_path("models/stories260K/tok512.bin"), 512);
    EXPECT_TRUE(s.ok()) << s.message();
    return tk;
  }();
  return *t;
}

const Llama2cTokenizer& tok32k() {
  static Llama2cTokenizer* t = [] {
    auto* tk = new Llama2cTokenizer;
    const Status s = tk->load_file(shared_path("tokenizers/llama2-32k/tokenizer.bin"), 32000);
    EXPECT_TRUE(s.ok()) << s.message();
    return tk;
  }();
  return *t;
}

std::vector<int> encode(const Llama2cTokenizer& t, std::string_view text, bool bos = false, bool eos = false) {
  std::vector<int> ids;
  const Status s = t.encode(text, bos, eos, &ids);
  EXPECT_TRUE(s.ok()) << s.message();
  return ids;
}

// run.c's encode written the slow, literal way (rescan every pair after each merge): the oracle
// for the heap-based merge in the library.
std::vector<int> naive_encode(const Llama2cTokenizer& t, std::string_view text, bool bos) {
  std::vector<int> v;
  if (bos) v.push_back(1);
  if (!text.empty()) v.push_back(t.lookup(" "));
  size_t i = 0;
  while (i < text.size()) {
    std::string cp(1, text[i]);
    size_t j = i + 1;
    for (; j < text.size() && cp.size() < 4 && (static_cast<uint8_t>(text[j]) & 0xC0) == 0x80; ++j) cp += text[j];
    const int id = t.lookup(cp);
    if (id != -1) {
      v.push_back(id);
    } else {
      for (const char c : cp) v.push_back(static_cast<uint8_t>(c) + 3);
    }
    i = j;
  }
  for (;;) {
    float best_score = -1e10f;
    int best_id = -1;
    size_t best_at = 0;
    for (size_t k = 0; k + 1 < v.size(); ++k) {
      const int id = t.lookup(t.piece(v[k]) + t.piece(v[k + 1]));
      if (id != -1 && t.score(id) > best_score) {
        best_score = t.score(id);
        best_id = id;
        best_at = k;
      }
    }
    if (best_id == -1) break;
    v[best_at] = best_id;
    v.erase(v.begin() + static_cast<std::ptrdiff_t>(best_at) + 1);
  }
  return v;
}

// What run.c prints for a prompt: decode_step from BOS on, i.e. without the dummy-prefix space.
std::string decode_after_bos(const Llama2cTokenizer& t, const std::vector<int>& ids_with_bos) {
  std::string out;
  for (size_t i = 1; i < ids_with_bos.size(); ++i) out += t.decode_step(ids_with_bos[i - 1], ids_with_bos[i]);
  return out;
}

std::vector<std::string> paragraphs(const std::string& text, size_t max_bytes) {
  std::vector<std::string> out;
  size_t pos = 0, total = 0;
  while (pos < text.size() && total < max_bytes) {
    size_t end = text.find("\n\n", pos);
    if (end == std::string::npos) end = text.size();
    if (end > pos) {
      out.push_back(text.substr(pos, end - pos));
      total += end - pos;
    }
    pos = end + 2;
  }
  return out;
}

// Round trip, defined precisely: for non-empty x, decode(encode(x)) == " " + x (the dummy prefix
// shows up as a leading space), and decoding from BOS on (run.c's printing) gives back exactly x.
void expect_round_trip(const Llama2cTokenizer& t, const std::string& x) {
  const std::vector<int> ids = encode(t, x);
  ASSERT_EQ(t.decode(ids), x.empty() ? x : " " + x) << "text: " << x;
  const std::vector<int> with_bos = encode(t, x, true, false);
  ASSERT_EQ(with_bos.size(), ids.size() + 1);
  ASSERT_EQ(decode_after_bos(t, with_bos), x) << "text: " << x;
}

TEST(Llama2cTokenizer, LoadsTok512) {
  MC_REQUIRE_SHARED();
  const Llama2cTokenizer& t = tok512();
  ASSERT_EQ(t.vocab_size(), 512);
  EXPECT_EQ(t.piece(0), "<unk>");
  EXPECT_EQ(t.piece(1), "\n<s>\n");
  EXPECT_EQ(t.piece(2), "\n</s>\n");
  for (int b = 0; b < 256; ++b) {
    char want[8];
    snprintf(want, sizeof want, "<0x%02X>", b);
    EXPECT_EQ(t.piece(b + 3), want);
    EXPECT_EQ(t.decode_step(-1, b + 3), std::string(1, static_cast<char>(b)));
  }
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.eos_id(), 2);
  EXPECT_EQ(t.piece(512), "");
  EXPECT_EQ(t.piece(-1), "");

  Llama2cTokenizer all;  // vocab_size 0: read to the end
  ASSERT_TRUE(all.load_file(shared_path("models/stories260K/tok512.bin"), 0).ok());
  EXPECT_EQ(all.vocab_size(), 512);
}

TEST(Llama2cTokenizer, Loads32k) {
  MC_REQUIRE_SHARED();
  const Llama2cTokenizer& t = tok32k();
  ASSERT_EQ(t.vocab_size(), 32000);
  EXPECT_EQ(t.lookup(" "), 29871);
  EXPECT_EQ(encode(t, "Hello world"), (std::vector<int>{15043, 3186}));
  EXPECT_EQ(encode(t, "Hello world", true, true), (std::vector<int>{1, 15043, 3186, 2}));
  EXPECT_TRUE(encode(t, "").empty());
  EXPECT_EQ(encode(t, "", true, true), (std::vector<int>{1, 2}));
}

TEST(Llama2cTokenizer, VocabSizeMustMatch) {
  MC_REQUIRE_SHARED();
  const std::string path = shared_path("models/stories260K/tok512.bin");
  Llama2cTokenizer t;
  Status s = t.load_file(path, 511);
  EXPECT_EQ(s.code(), Code::kCorrupt);
  EXPECT_NE(std::string(s.message()).find("after its 511 tokens"), std::string::npos) << s.message();
  s = t.load_file(path, 513);
  EXPECT_EQ(s.code(), Code::kCorrupt);
  EXPECT_NE(std::string(s.message()).find("token 512"), std::string::npos) << s.message();
  EXPECT_EQ(t.vocab_size(), 0);  // a failed load leaves nothing half-loaded
  EXPECT_EQ(t.load_file(path, -1).code(), Code::kInvalidArgument);
  EXPECT_EQ(t.load_file(test::temp_dir() + "/missing.bin", 0).code(), Code::kNotFound);
  std::vector<int> ids;
  EXPECT_FALSE(t.encode("x", false, false, &ids).ok());
}

TEST(Llama2cTokenizer, HeapMergeEqualsRunCsLiteralLoop) {
  MC_REQUIRE_SHARED();
  uint64_t rng = 12345;
  auto next = [&rng] {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<uint32_t>(rng >> 33);
  };
  for (const Llama2cTokenizer* t : {&tok512(), &tok32k()}) {
    for (int c = 0; c < 300; ++c) {
      std::string s;
      const int parts = 1 + static_cast<int>(next() % 30);
      for (int p = 0; p < parts; ++p) {
        if (next() % 8 == 0) {
          s += static_cast<char>(next() & 0xFF);  // any byte, valid UTF-8 or not
        } else {
          s += t->piece(3 + 256 + static_cast<int>(next() % static_cast<uint32_t>(t->vocab_size() - 259)));
        }
      }
      const bool bos = c % 2;
      ASSERT_EQ(encode(*t, s, bos), naive_encode(*t, s, bos)) << "text: " << s;
    }
  }
  // A vocabulary made of ties, so that only the leftmost-pair rule decides.
  std::vector<std::string> pieces = {"<unk>", "\n<s>\n", "\n</s>\n"};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    snprintf(buf, sizeof buf, "<0x%02X>", b);
    pieces.push_back(buf);
  }
  std::vector<std::string> extra = {" ", "a", "b", "aa", "ab", "ba", "bb", "aaa", "aab", "abab", " a", " b", "  ",
                                    "bab", "baa", " aa", "abba", "bbb"};
  std::vector<float> scores(pieces.size(), 0.0f);
  for (size_t i = 0; i < extra.size(); ++i) {
    pieces.push_back(extra[i]);
    scores.push_back(static_cast<float>(-static_cast<int>(i % 3)));
  }
  Llama2cTokenizer ties;
  ASSERT_TRUE(ties.load_vocab(pieces, scores).ok());
  for (int c = 0; c < 2000; ++c) {
    std::string s;
    const int len = static_cast<int>(next() % 24);
    for (int k = 0; k < len; ++k) s += "ab "[next() % 3];
    ASSERT_EQ(encode(ties, s), naive_encode(ties, s, false)) << "text: [" << s << "]";
  }
}

TEST(Llama2cTokenizer, RoundTripsTinyStoriesAndShakespeare) {
  MC_REQUIRE_SHARED();
  // Both files whole: about 2 s in Release. Under the sanitizers (about 10x slower) a prefix.
#if defined(__SANITIZE_ADDRESS__)
  const size_t kBytes = 200000;
#else
  const size_t kBytes = 2000000;
#endif
  size_t count = 0;
  for (const char* file : {"data/tinystories_val_head794k.txt", "data/tinyshakespeare.txt"}) {
    const std::string text = read_text(shared_path(file));
    ASSERT_FALSE(text.empty()) << file;
    for (const std::string& p : paragraphs(text, kBytes)) {
      expect_round_trip(tok32k(), p);
      expect_round_trip(tok512(), p);
      ++count;
    }
  }
  EXPECT_GT(count, 1500u);
}

TEST(Llama2cTokenizer, RoundTripsEmojiCjkAndInvalidUtf8) {
  MC_REQUIRE_SHARED();
  const std::vector<std::string> texts = {
      "😀 (normal) 😶‍🌫️ emoji ✅",
      "東京は日本の首都です。中文测试，한국어",
      "raw \xff\xfe bytes \x80 stray continuation \xe2\x82 cut sequence \xc0\xaf overlong",
      std::string("embedded\0nul", 12),
      "\xf0\x9f\x98\x80\x80\x80\x80 five continuation bytes",
      "\t\n\r\v\f control \x01\x02\x7f",
      " leading space",
      "   ",
      "trailing space ",
      "<0x41> <unk> literal",
  };
  for (const std::string& x : texts) {
    expect_round_trip(tok32k(), x);
    expect_round_trip(tok512(), x);
  }
  // Byte fallback keeps every byte, one token each, when the codepoint is not a piece.
  const std::vector<int> ids = encode(tok512(), "\xff");
  EXPECT_EQ(ids, (std::vector<int>{tok512().lookup(" "), 0xff + 3}));
}

TEST(Llama2cTokenizer, DecodeSkipsIdsOutOfRange) {
  MC_REQUIRE_SHARED();
  const Llama2cTokenizer& t = tok512();
  EXPECT_EQ(t.decode_step(-1, -7), "");
  EXPECT_EQ(t.decode_step(1, 512), "");
  const int a = t.lookup("a");
  ASSERT_GE(a, 0);
  EXPECT_EQ(t.decode({-1, a, 100000, a}), "aa");
  // After BOS the leading space goes; elsewhere it stays.
  const int the = t.lookup(" the");
  ASSERT_GE(the, 0);
  EXPECT_EQ(t.decode_step(1, the), "the");
  EXPECT_EQ(t.decode_step(a, the), " the");
}

struct RefStep {
  int token, next;
};

std::vector<RefStep> read_reference_tokens(const std::string& path, std::vector<int>* prompt) {
  std::istringstream in(read_text(path));
  std::string word;
  std::vector<RefStep> steps;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    ls >> word;
    if (word == "PROMPT") {
      int id;
      while (ls >> id) prompt->push_back(id);
    } else if (word == "TOK") {
      int pos;
      RefStep s;
      ls >> pos >> s.token >> s.next;
      EXPECT_EQ(pos, static_cast<int>(steps.size()));
      steps.push_back(s);
    }
  }
  return steps;
}

// run.c's generation printout: decode_step(token, next), then safe_printf, which drops an empty piece
// and a one-byte piece that is neither printable nor whitespace (C locale), then a final "\n".
void check_run_c_printout(const std::string& stem) {
  const Llama2cTokenizer& t = tok512();
  std::vector<int> prompt;
  const std::vector<RefStep> steps = read_reference_tokens(shared_path(stem + ".tokens"), &prompt);
  ASSERT_EQ(prompt, std::vector<int>{1});
  ASSERT_EQ(steps.size(), 256u);
  std::string printed, raw;
  int dropped = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (i > 0) {
      ASSERT_EQ(steps[i].token, steps[i - 1].next);
    }
    ASSERT_NE(steps[i].next, 1);  // run.c stops before printing a BOS
    const std::string piece = t.decode_step(steps[i].token, steps[i].next);
    raw += piece;
    if (piece.size() == 1) {
      const unsigned char c = static_cast<unsigned char>(piece[0]);
      if (!(c >= 0x20 && c < 0x7f) && !std::isspace(c)) {
        ++dropped;
        continue;
      }
    }
    printed += piece;
  }
  printed += "\n";
  EXPECT_EQ(printed, read_text(shared_path(stem + ".txt")));
  // Honest accounting: in these references safe_printf dropped nothing, so our decode is the same text.
  EXPECT_EQ(dropped, 0);
  EXPECT_EQ(raw + "\n", printed);
  std::vector<int> ids = {steps[0].token};
  for (const RefStep& s : steps) ids.push_back(s.next);
  EXPECT_EQ(t.decode(ids), t.piece(1) + raw);  // decode() keeps the BOS piece itself
}

TEST(Llama2cTokenizer, DecodesRunCReferenceOutputs) {
  MC_REQUIRE_SHARED();
  check_run_c_printout("models/stories260K/ref/greedy_noprompt");
  check_run_c_printout("models/stories260K/ref/sample_t1_p09_s133742");
}

std::vector<std::string> split(const std::string& s, const std::string& sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  for (;;) {
    const size_t at = s.find(sep, pos);
    if (at == std::string::npos) {
      out.push_back(s.substr(pos));
      return out;
    }
    out.push_back(s.substr(pos, at - pos));
    pos = at + sep.size();
  }
}

// llama.cpp's SentencePiece vectors: .inp holds the inputs, each followed by "\n__ggml_vocab_test__\n"
// (so splitting leaves one empty piece at the end); .out has one line per input of " id id ..."
// without BOS but with the dummy-prefix token.
TEST(Llama2cTokenizer, MatchesLlamaCppSpmVectors) {
  MC_REQUIRE_SHARED();
  std::vector<std::string> inputs =
      split(read_text(shared_path("tokenizers/vectors/ggml-vocab-llama-spm.gguf.inp")), "\n__ggml_vocab_test__\n");
  ASSERT_FALSE(inputs.empty());
  ASSERT_EQ(inputs.back(), "");
  inputs.pop_back();
  std::vector<std::string> lines = split(read_text(shared_path("tokenizers/vectors/ggml-vocab-llama-spm.gguf.out")), "\n");
  ASSERT_EQ(lines.back(), "");
  lines.pop_back();
  ASSERT_EQ(inputs.size(), lines.size());
  ASSERT_EQ(inputs.size(), 46u);
  int passed = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<int> want;
    std::istringstream ls(lines[i]);
    int id;
    while (ls >> id) want.push_back(id);
    const std::vector<int> got = encode(tok32k(), inputs[i]);
    EXPECT_EQ(got, want) << "case " << i << ": [" << inputs[i] << "]";
    passed += got == want;
  }
  std::printf("llama-spm vectors: %d of %zu pass\n", passed, inputs.size());
}

TEST(Llama2cTokenizerHostile, EveryTruncationIsRefused) {
  MC_REQUIRE_SHARED();
  const std::vector<uint8_t> bytes = read_file(shared_path("models/stories260K/tok512.bin"));
  ASSERT_GT(bytes.size(), 4000u);
  // Offsets where a token ends: a cut exactly there is a shorter but well-formed file.
  std::vector<size_t> ends;
  for (size_t off = 4; off < bytes.size();) {
    int32_t len;
    std::memcpy(&len, bytes.data() + off + 4, 4);
    off += 8 + static_cast<size_t>(len);
    ends.push_back(off);
  }
  ASSERT_EQ(ends.size(), 512u);
  Llama2cTokenizer t;
  for (size_t n = 0; n < bytes.size(); ++n) {
    const Status s = t.load_bytes(bytes.data(), n, 512);
    ASSERT_FALSE(s.ok()) << "accepted a cut at " << n;
    ASSERT_EQ(s.code(), Code::kCorrupt) << s.message();
    ASSERT_EQ(t.vocab_size(), 0);
    // Without a vocab size, only cuts at token boundaries (with >= 3 tokens) are acceptable.
    const Status any = t.load_bytes(bytes.data(), n, 0);
    size_t complete = 0;
    bool at_boundary = n == 4;
    for (size_t e : ends) {
      if (e <= n) ++complete;
      if (e == n) at_boundary = true;
    }
    ASSERT_EQ(any.ok(), at_boundary && complete >= 3) << "cut at " << n << ": " << any.message();
    if (any.ok()) {
      ASSERT_EQ(t.vocab_size(), static_cast<int>(complete));
    }
  }
  ASSERT_TRUE(t.load_bytes(bytes.data(), bytes.size(), 512).ok());
}

TEST(Llama2cTokenizerHostile, AbsurdLengthsAreRefused) {
  MC_REQUIRE_SHARED();
  const std::vector<uint8_t> good = read_file(shared_path("models/stories260K/tok512.bin"));
  auto with_i32 = [&](size_t off, int32_t v) {
    std::vector<uint8_t> b = good;
    std::memcpy(b.data() + off, &v, 4);
    return b;
  };
  Llama2cTokenizer t;
  for (const int32_t max_len : {0, -1, INT32_MIN}) {
    const std::vector<uint8_t> b = with_i32(0, max_len);
    const Status s = t.load_bytes(b.data(), b.size(), 512);
    EXPECT_EQ(s.code(), Code::kCorrupt);
    EXPECT_NE(std::string(s.message()).find("max_token_length"), std::string::npos) << s.message();
  }
  // Token 0's length field is at offset 8.
  for (const int32_t len : {-1, INT32_MIN, INT32_MAX, 1 << 20, 8}) {
    const std::vector<uint8_t> b = with_i32(8, len);
    const Status s = t.load_bytes(b.data(), b.size(), 512);
    EXPECT_EQ(s.code(), Code::kCorrupt) << len;
    EXPECT_NE(std::string(s.message()).find("token 0"), std::string::npos) << s.message();
  }
  EXPECT_EQ(t.load_bytes(nullptr, 0, 0).code(), Code::kCorrupt);
  std::vector<std::string> two = {"a", "b"};
  EXPECT_FALSE(t.load_vocab(two, {0.0f, 0.0f}).ok());
  EXPECT_EQ(t.load_vocab({"a", "b", "c"}, {0.0f}).code(), Code::kInvalidArgument);
}

TEST(Llama2cTokenizerHostile, RandomCorruptionNeverCrashes) {
  MC_REQUIRE_SHARED();
  const std::vector<uint8_t> good = read_file(shared_path("models/stories260K/tok512.bin"));
  uint64_t rng = 0x9E3779B97F4A7C15ULL;
  auto next = [&rng] {
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return static_cast<uint32_t>((rng * 0x2545F4914F6CDD1DULL) >> 32);
  };
  int loaded = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    std::vector<uint8_t> b = good;
    const int flips = 1 + static_cast<int>(next() % 8);
    for (int f = 0; f < flips; ++f) b[next() % b.size()] = static_cast<uint8_t>(next());
    if (iter % 5 == 0) b.resize(next() % b.size());
    Llama2cTokenizer t;
    const Status s = t.load_bytes(b.data(), b.size(), iter % 2 ? 512 : 0);
    if (!s.ok()) {
      EXPECT_GT(std::strlen(s.message()), 0u);
      continue;
    }
    ++loaded;
    std::vector<int> ids;
    if (t.encode("Once upon a time \xe4\xb8\xad \xff", true, true, &ids).ok()) {
      for (const int id : ids) ASSERT_TRUE(id >= 0 && id < t.vocab_size());
      (void)t.decode(ids);
    }
  }
  EXPECT_GT(loaded, 0);
}

// --- Utf8StreamDecoder ---------------------------------------------------------------------------------

bool is_complete_utf8(const std::string& s) {
  Utf8StreamDecoder d;
  return d.push(s) == s && d.finish().empty();
}

TEST(Llama2cTokenizerUtf8Stream, EverySplitPointOfMultiByteSequences) {
  const std::vector<std::string> texts = {"é", "€", "😀", "a€b😀c中", "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"};
  for (const std::string& s : texts) {
    for (size_t cut = 0; cut <= s.size(); ++cut) {
      Utf8StreamDecoder d;
      const std::string first = d.push(std::string_view(s).substr(0, cut));
      // What comes out first is a prefix ending on a character boundary.
      ASSERT_EQ(first, s.substr(0, first.size()));
      ASSERT_TRUE(is_complete_utf8(first));
      ASSERT_GE(first.size() + 3, cut);
      const std::string second = d.push(std::string_view(s).substr(cut));
      ASSERT_EQ(first + second, s) << "cut " << cut;
      ASSERT_EQ(d.finish(), "");
    }
    // One byte at a time.
    Utf8StreamDecoder d;
    std::string out;
    for (const char c : s) {
      const std::string part = d.push(std::string_view(&c, 1));
      ASSERT_TRUE(part.empty() || is_complete_utf8(part));
      out += part;
    }
    out += d.finish();
    EXPECT_EQ(out, s);
  }
}

TEST(Llama2cTokenizerUtf8Stream, InvalidBytesComeOutRaw) {
  const std::vector<std::string> texts = {
      "\xff", "\x80", "a\x80\x80z", "\xe2\x82" "A", "\xed\xa0\x80", "\xc0\xaf", "\xf4\x90\x80\x80", "\xf5",
      "ok \xe2\x82\xac \xe2",  // the last byte is a valid start that never completes
  };
  for (const std::string& s : texts) {
    for (size_t cut = 0; cut <= s.size(); ++cut) {
      Utf8StreamDecoder d;
      std::string out = d.push(std::string_view(s).substr(0, cut));
      out += d.push(std::string_view(s).substr(cut));
      out += d.finish();
      ASSERT_EQ(out, s) << "cut " << cut;
    }
  }
  Utf8StreamDecoder d;
  EXPECT_EQ(d.push("\xff" "ab"), "\xff" "ab");  // invalid bytes are not held back
  EXPECT_EQ(d.push("x\xe2\x82"), "x");          // a valid but cut sequence is held...
  EXPECT_EQ(d.push("\xac!"), "\xe2\x82\xac!");  // ...until it completes
  EXPECT_EQ(d.push("\xf0\x9f"), "");
  EXPECT_EQ(d.finish(), "\xf0\x9f");  // ...or the stream ends
  EXPECT_EQ(d.finish(), "");
}

TEST(Llama2cTokenizerUtf8Stream, StreamsDecodedTokens) {
  MC_REQUIRE_SHARED();
  // tok512 spells most non-ASCII characters with byte tokens: the stream must hold the halves back.
  const std::string text = "Tom said: \xe2\x80\x9cOK \xf0\x9f\x98\x80\xe2\x80\x9d";
  const std::vector<int> ids = encode(tok512(), text, true, false);
  Utf8StreamDecoder d;
  std::string out;
  for (size_t i = 1; i < ids.size(); ++i) {
    const std::string part = d.push(tok512().decode_step(ids[i - 1], ids[i]));
    ASSERT_TRUE(part.empty() || is_complete_utf8(part));
    out += part;
  }
  out += d.finish();
  EXPECT_EQ(out, text);
}

}  // namespace
}  // namespace mcullm
