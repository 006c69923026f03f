// Byte-level BPE and the tokenizer loader: round trips on the shared texts for every tokenizer,
// the heap merge against the linear one, special tokens, streaming decode, invalid UTF-8, and
// hostile files (truncated or corrupt GGUF / tokenizer.json) that must give a clear error.
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "test_support.h"
#include "format/gguf_writer_host.h"
#include "tokenizer/bpe_tokenizer_host.h"
#include "tokenizer/wordpiece_tokenizer_host.h"
#include "tokenizer/llama2c_tokenizer_host.h"
#include "load/tokenizer_loader_host.h"

namespace mcullm {
namespace {

using test::read_file;
using test::read_text;
using test::shared_path;

#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kTextLimit = 60000;  // bounded time in the sanitizer run
#else
constexpr size_t kTextLimit = size_t{1} << 30;
#endif

const char* const kTokenizers[] = {
    "tokenizers/qwen/tokenizer.json",
    "tokenizers/llama2-32k/tokenizer.bin",
    "models/stories260K/tok512.bin",
    "tokenizers/vocab-gguf/ggml-vocab-gpt-2.gguf",
    "tokenizers/vocab-gguf/ggml-vocab-falcon.gguf",
    "tokenizers/vocab-gguf/ggml-vocab-mpt.gguf",
    "tokenizers/vocab-gguf/ggml-vocab-gpt-neox.gguf",
    "tokenizers/vocab-gguf/ggml-vocab-starcoder.gguf",
    "tokenizers/vocab-gguf/ggml-vocab-refact.gguf",
    "tokenizers/vocab-gguf/ggml-vocab-deepseek-llm.gguf",
    "tokenizers/vocab-gguf/ggml-vocab-deepseek-coder.gguf",
};

const Tokenizer& load(const std::string& relative) {
  static std::vector<std::pair<std::string, std::unique_ptr<Tokenizer>>> cache;
  for (auto& [name, tok] : cache)
    if (name == relative) return *tok;
  std::unique_ptr<Tokenizer> tok;
  const Status st = load_tokenizer_file(shared_path(relative), &tok);
  EXPECT_TRUE(st.ok()) << st.message();
  return *cache.emplace_back(relative, std::move(tok)).second;
}

const BpeTokenizer& qwen() { return static_cast<const BpeTokenizer&>(load("tokenizers/qwen/tokenizer.json")); }

std::vector<int> enc(const Tokenizer& t, std::string_view text, bool parse_special = false) {
  std::vector<int> ids;
  EncodeOptions o;
  o.parse_special = parse_special;
  const Status st = t.encode(text, o, &ids);
  EXPECT_TRUE(st.ok()) << st.message();
  return ids;
}

// SentencePiece adds a dummy-prefix space that decode keeps: compare without it.
std::string round_trip(const Tokenizer& t, const std::string& text) {
  std::string back = t.decode(enc(t, text));
  if (std::string(t.kind()) == "llama2c-spm" && !back.empty() && back[0] == ' ') back.erase(0, 1);
  return back;
}

class EveryTokenizer : public testing::TestWithParam<const char*> {};

TEST_P(EveryTokenizer, RoundTripsTinyStoriesAndShakespeare) {
  MC_REQUIRE_SHARED();
  const Tokenizer& t = load(GetParam());
  ASSERT_GT(t.vocab_size(), 0);
  for (const char* file : {"data/tinystories_val_head794k.txt", "data/tinyshakespeare.txt"}) {
    std::string text = read_text(shared_path(file));
    if (text.size() > kTextLimit) text.resize(kTextLimit);
    const std::vector<int> ids = enc(t, text);
    for (const int id : ids) ASSERT_TRUE(id >= 0 && id < t.vocab_size());
    std::string back = t.decode(ids);
    if (std::string(t.kind()) == "llama2c-spm") {
      ASSERT_FALSE(back.empty());
      EXPECT_EQ(back[0], ' ');
      back.erase(0, 1);
    }
    EXPECT_TRUE(back == text) << GetParam() << " on " << file << ": " << back.size() << " bytes back for " << text.size();
    std::printf("%s: %s -> %zu tokens (%.2f bytes/token)\n", GetParam(), file, ids.size(),
                static_cast<double>(text.size()) / static_cast<double>(ids.size()));
  }
}

TEST_P(EveryTokenizer, RoundTripsInvalidUtf8AndControlBytes) {
  MC_REQUIRE_SHARED();
  const Tokenizer& t = load(GetParam());
  // Every single byte encodes and comes back, or (a vocabulary without that byte's token, like
  // Falcon's for bytes that never occur in UTF-8) is refused with a clear error: never lost.
  std::vector<uint8_t> bytes;
  for (int b = 0; b < 256; ++b) {
    const std::string one(1, static_cast<char>(b));
    std::vector<int> ids;
    const Status st = t.encode(one, EncodeOptions{}, &ids);
    if (st.ok()) {
      bytes.push_back(static_cast<uint8_t>(b));
      EXPECT_EQ(round_trip(t, one), one) << GetParam() << " byte " << b;
    } else {
      EXPECT_EQ(st.code(), Code::kUnsupported) << st.message();
      EXPECT_NE(std::string(st.message()).find("no token for byte"), std::string::npos) << st.message();
    }
  }
  // Falcon lacks 28 byte tokens, DeepSeek the bytes that never occur in UTF-8 (C0, C1, F5-FF).
  EXPECT_GE(bytes.size(), 228u) << GetParam();
  std::printf("%s: %zu of 256 bytes have a token\n", GetParam(), bytes.size());
  std::mt19937 rng(42);
  for (int round = 0; round < 200; ++round) {
    std::string s;
    const int n = 1 + static_cast<int>(rng() % 32);
    for (int i = 0; i < n; ++i) {
      if (rng() % 3 == 0) s += "é漢🦙 \n'";
      s.push_back(static_cast<char>(bytes[rng() % bytes.size()]));
    }
    ASSERT_EQ(round_trip(t, s), s) << GetParam() << " round " << round;
  }
  EXPECT_EQ(enc(t, "").size(), 0u);
}

TEST_P(EveryTokenizer, DecodeSkipsIdsOutOfRange) {
  MC_REQUIRE_SHARED();
  const Tokenizer& t = load(GetParam());
  EXPECT_EQ(t.decode_step(-1, -5), "");
  EXPECT_EQ(t.decode_step(-1, t.vocab_size()), "");
  EXPECT_EQ(t.decode_step(-1, 1 << 30), "");
  EXPECT_EQ(t.token_text(t.vocab_size()), "");
  const std::vector<int> ids = enc(t, "Hello world");
  std::vector<int> noisy = {-1};
  for (const int id : ids) {
    noisy.push_back(id);
    noisy.push_back(t.vocab_size() + 7);
  }
  std::string a = t.decode(ids), b = t.decode(noisy);
  EXPECT_EQ(a, b);
}

TEST_P(EveryTokenizer, StreamingDecodeNeverSplitsACharacter) {
  MC_REQUIRE_SHARED();
  const Tokenizer& t = load(GetParam());
  const std::string text = "Cửa Việt 我想在apple工作1314151天～ 🚀 (normal) 😶‍🌫️ нещо на Български ﷽";
  const std::vector<int> ids = enc(t, text);
  Utf8StreamDecoder stream;
  std::string out;
  int prev = -1;
  for (const int id : ids) {
    const std::string chunk = stream.push(t.decode_step(prev, id));
    EXPECT_TRUE(utf8_valid(reinterpret_cast<const uint8_t*>(chunk.data()), chunk.size())) << GetParam();
    out += chunk;
    prev = id;
  }
  out += stream.finish();
  if (std::string(t.kind()) == "llama2c-spm") out.erase(0, 1);
  EXPECT_EQ(out, text) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Shared, EveryTokenizer, testing::ValuesIn(kTokenizers),
                         [](const testing::TestParamInfo<const char*>& info) {
                           std::string n = info.param;
                           n = n.substr(n.find_last_of('/') + 1);
                           for (char& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

TEST(BpeTokenizer, HeapMergeEqualsLinearMerge) {
  MC_REQUIRE_SHARED();
  // A private copy so that the threshold change does not leak into other tests.
  std::unique_ptr<Tokenizer> a, b;
  const std::string path = shared_path("tokenizers/vocab-gguf/ggml-vocab-gpt-2.gguf");
  ASSERT_TRUE(load_tokenizer_file(path, &a).ok());
  ASSERT_TRUE(load_tokenizer_file(path, &b).ok());
  static_cast<BpeTokenizer*>(b.get())->set_heap_threshold(0);  // every piece through the heap
  std::string text = read_text(shared_path("data/tinyshakespeare.txt")).substr(0, 100000);
  // Long pieces: a 3000-letter word, 5000 spaces, digits, punctuation runs.
  text += " " + std::string(3000, 'a') + "abracadabra" + std::string(5000, ' ') + "x" + std::string(700, '9') +
          std::string(900, '!') + "?!";
  EXPECT_EQ(enc(*a, text), enc(*b, text));
}

TEST(BpeTokenizer, SpecialTokensAreParsedOnlyWhenAsked) {
  MC_REQUIRE_SHARED();
  const BpeTokenizer& q = qwen();
  EXPECT_EQ(q.eos_id(), 151643);  // <|endoftext|>
  EXPECT_EQ(q.eot_id(), 151645);  // <|im_end|>
  EXPECT_EQ(q.bos_id(), -1);
  EXPECT_FALSE(q.wants_bos());
  EXPECT_TRUE(q.is_control(151644));
  EXPECT_FALSE(q.is_control(1000));
  EXPECT_TRUE(q.is_end_of_generation(151645));
  const std::string chat = "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n";
  const std::vector<int> special = enc(q, chat, true);
  ASSERT_GE(special.size(), 6u);
  EXPECT_EQ(special.front(), 151644);
  EXPECT_EQ(special.back(), 198);  // "\n"
  int count = 0;
  for (const int id : special) count += id == 151644 || id == 151645;
  EXPECT_EQ(count, 3);
  const std::vector<int> plain = enc(q, chat, false);
  for (const int id : plain) EXPECT_LT(id, 151643);
  EXPECT_EQ(q.decode(special), chat);
  EXPECT_EQ(q.decode(plain), chat);
  EXPECT_EQ(q.token_text(151644), "<|im_start|>");
  EXPECT_EQ(q.token_text(9707), "Hello");
  EXPECT_EQ(q.token_text(1879), "Ġworld");
  // Non-special added tokens (<think>) are matched even without parse_special.
  const std::vector<int> think = enc(q, "a<think>b", false);
  ASSERT_EQ(think.size(), 3u);
  EXPECT_EQ(q.token_text(think[1]), "<think>");
  // BOS / EOS on request.
  std::vector<int> ids;
  EncodeOptions o;
  o.add_eos = true;
  ASSERT_TRUE(q.encode("Hi", o, &ids).ok());
  EXPECT_EQ(ids.back(), 151643);
  o.add_bos = true;
  const Status st = q.encode("Hi", o, &ids);
  EXPECT_EQ(st.code(), Code::kUnsupported) << "Qwen has no BOS token";
}

TEST(BpeTokenizer, ByteLevelMapRoundTrips) {
  std::string all, text, back;
  for (int b = 0; b < 256; ++b) {
    text.push_back(static_cast<char>(b));
    byte_level_append(static_cast<uint8_t>(b), &all);
  }
  ASSERT_TRUE(byte_level_decode(all, &back));
  EXPECT_EQ(back, text);
  std::string sp;
  byte_level_append(' ', &sp);
  EXPECT_EQ(sp, "Ġ");
  byte_level_append('\n', &(sp = ""));
  EXPECT_EQ(sp, "Ċ");
  EXPECT_FALSE(byte_level_decode("漢", &back));
}

TEST(TokenizerLoader, PicksTheRightKind) {
  MC_REQUIRE_SHARED();
  std::unique_ptr<Tokenizer> t;
  std::string source;
  ASSERT_TRUE(load_tokenizer_file(shared_path("models/stories260K/tok512.bin"), &t, &source).ok());
  EXPECT_STREQ(t->kind(), "llama2c-spm");
  EXPECT_EQ(t->vocab_size(), 512);
  EXPECT_EQ(source, "llama2.c tokenizer.bin");
  ASSERT_TRUE(load_tokenizer_file(shared_path("tokenizers/qwen/tokenizer.json"), &t, &source).ok());
  EXPECT_STREQ(t->kind(), "bpe");
  EXPECT_EQ(t->vocab_size(), 151669);
  // A llama GGUF vocabulary (Llama-2 SentencePiece, embedded in bitnet.cpp's dummy model).
  const Status st = load_tokenizer_file(shared_path("models/bitnet-dummy/dummy-bitnet-125m.i2_s.gguf"), &t, &source);
  if (st.ok()) {
    EXPECT_STREQ(t->kind(), "llama2c-spm");
    EXPECT_EQ(t->vocab_size(), 32002);  // Llama-2's 32000 and the two pad tokens bitnet.cpp's dummy adds
    EXPECT_EQ(t->token_text(32001), "[PAD2]");
    EXPECT_EQ(enc(*t, "Hello world"), (std::vector<int>{15043, 3186}));
  }
  // A model: its tokenizer beside it.
  ASSERT_TRUE(load_tokenizer_for(shared_path("models/stories260K/stories260K.bin"), &t, &source).ok());
  EXPECT_EQ(t->vocab_size(), 512);
  EXPECT_NE(source.find("tok512.bin"), std::string::npos) << source;
  ASSERT_TRUE(load_tokenizer_file(shared_path("tokenizers/vocab-gguf/ggml-vocab-bert-bge.gguf"), &t).ok());
  EXPECT_STREQ(t->kind(), "wordpiece");
  EXPECT_EQ(t->bos_id(), 101);  // [CLS]
  EXPECT_EQ(t->eos_id(), 102);  // [SEP]
  // A vocabulary kind we do not read: a clear error, not a crash.
  GgufWriter w;
  w.set_string("tokenizer.ggml.model", "rwkv");
  w.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
  const std::vector<uint8_t> rwkv = w.to_bytes();
  const Status other = load_tokenizer_bytes(rwkv.data(), rwkv.size(), &t);
  EXPECT_EQ(other.code(), Code::kUnsupported) << other.message();
  EXPECT_NE(std::string(other.message()).find("'rwkv' is not supported"), std::string::npos) << other.message();
  const Status missing = load_tokenizer_file("/nonexistent/tokenizer.json", &t);
  EXPECT_FALSE(missing.ok());
}

TEST(TokenizerLoaderHostile, TruncatedGgufIsRefused) {
  MC_REQUIRE_SHARED();
  const std::vector<uint8_t> bytes = read_file(shared_path("tokenizers/vocab-gguf/ggml-vocab-gpt-2.gguf"));
  ASSERT_GT(bytes.size(), 100000u);
  std::mt19937 rng(1);
  std::vector<size_t> cuts = {0, 3, 4, 8, 16, 24, 100, 1000, bytes.size() - 1};
  for (int i = 0; i < 30; ++i) cuts.push_back(rng() % bytes.size());
  for (const size_t cut : cuts) {
    std::unique_ptr<Tokenizer> t;
    const Status st = load_tokenizer_bytes(bytes.data(), cut, &t);
    EXPECT_FALSE(st.ok()) << "cut at " << cut;
  }
}

TEST(TokenizerLoaderHostile, CorruptGgufNeverCrashes) {
  MC_REQUIRE_SHARED();
  const std::vector<uint8_t> good = read_file(shared_path("tokenizers/vocab-gguf/ggml-vocab-deepseek-coder.gguf"));
  std::mt19937 rng(2);
  int refused = 0;
#if defined(__SANITIZE_ADDRESS__)
  const int rounds = 15;
#else
  const int rounds = 60;
#endif
  for (int round = 0; round < rounds; ++round) {
    std::vector<uint8_t> bad = good;
    // Mostly the header and the first strings, where lengths and types live.
    for (int k = 0; k < 4; ++k) {
      const size_t at = rng() % 2 ? rng() % 4096 : rng() % bad.size();
      bad[at] = static_cast<uint8_t>(rng());
    }
    std::unique_ptr<Tokenizer> t;
    const Status st = load_tokenizer_bytes(bad.data(), bad.size(), &t);
    if (!st.ok()) {
      ++refused;
      EXPECT_GT(std::strlen(st.message()), 0u);
    } else {
      // Accepted: it must still work.
      std::vector<int> ids;
      EXPECT_TRUE(t->encode("Hello world, 123!", EncodeOptions{}, &ids).ok());
      (void)t->decode(ids);
    }
  }
  std::printf("corrupt GGUF: %d of %d refused\n", refused, rounds);
}

const char* kTinyJson = R"({
  "version": "1.0",
  "added_tokens": [{"id": 7, "content": "<|end|>", "special": true}],
  "normalizer": null,
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
  "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3, "Ġab": 4, "c": 5, "abc": 6},
            "merges": ["a b", ["Ġ", "ab"], "ab c"]}
})";

TEST(TokenizerLoader, ReadsAMinimalTokenizerJson) {
  std::unique_ptr<Tokenizer> t;
  const Status st = tokenizer_from_hf_json(kTinyJson, &t);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(t->vocab_size(), 8);
  EXPECT_EQ(t->eos_id(), -1);
  EXPECT_EQ(enc(*t, "ab abc<|end|>", true), (std::vector<int>{2, 4, 5, 7}));
  // "abc" is only reached by "ab c" after "Ġ ab", so " abc" is [Ġab, c]; "abc" alone merges fully.
  EXPECT_EQ(enc(*t, "abc"), (std::vector<int>{6}));
  std::vector<int> ids;
  EXPECT_EQ(t->encode("x", EncodeOptions{}, &ids).code(), Code::kUnsupported) << "no token for byte 'x'";
}

TEST(TokenizerLoaderHostile, BrokenTokenizerJsonGivesClearErrors) {
  const std::string good = kTinyJson;
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  const std::vector<std::pair<std::string, Code>> cases = {
      {"", Code::kCorrupt},
      {"[1, 2]", Code::kCorrupt},
      {"{}", Code::kCorrupt},
      {good.substr(0, good.size() / 2), Code::kCorrupt},
      {replaced("\"BPE\"", "\"WordPiece\""), Code::kUnsupported},
      {replaced("\"a b\"", "\"a zz\""), Code::kCorrupt},
      {replaced("\"a b\"", "\"ab\""), Code::kCorrupt},
      {replaced("\"a b\"", "17"), Code::kCorrupt},
      {replaced("\"b\": 1", "\"b\": 0"), Code::kCorrupt},
      {replaced("\"b\": 1", "\"b\": -4"), Code::kCorrupt},
      {replaced("\"b\": 1", "\"b\": \"one\""), Code::kCorrupt},
      {replaced("\"b\": 1", "\"b\": 99999999999"), Code::kCorrupt},
      // Found by the fuzzer: a float id must not be converted to an integer (UB for 2.2e80).
      {replaced("\"b\": 1", "\"b\": 2.2e80"), Code::kCorrupt},
      {replaced("\"b\": 1", "\"b\": 1.0"), Code::kCorrupt},
      {replaced("\"b\": 1", "\"b\": 18446744073709551615"), Code::kCorrupt},
      {replaced("{\"id\": 7,", "{\"id\": 7e300,"), Code::kCorrupt},
      {replaced("{\"id\": 7,", "{"), Code::kCorrupt},
      // A few bytes must not make a vocabulary of millions of unused tokens (a fuzzer timeout).
      {replaced("\"abc\": 6", "\"abc\": 16000000"), Code::kCorrupt},
      {replaced("\"normalizer\": null", "\"normalizer\": {\"type\": \"Lowercase\"}"), Code::kUnsupported},
      {replaced("\"use_regex\": true", "\"use_regex\": false"), Code::kUnsupported},
      {replaced("\"type\": \"ByteLevel\", \"add_prefix_space\": false", "\"type\": \"Whitespace\", \"add_prefix_space\": false"),
       Code::kUnsupported},
  };
  for (const auto& [text, code] : cases) {
    std::unique_ptr<Tokenizer> t;
    const Status st = tokenizer_from_hf_json(text, &t);
    EXPECT_EQ(st.code(), code) << st.message() << "\n for: " << text.substr(0, 200);
    EXPECT_GT(std::strlen(st.message()), 0u);
  }
  // Random byte corruption: an error or a working tokenizer, never a crash.
  std::mt19937 rng(3);
  for (int round = 0; round < 500; ++round) {
    std::string bad = good;
    for (int k = 0; k < 3; ++k) bad[rng() % bad.size()] = static_cast<char>(rng());
    std::unique_ptr<Tokenizer> t;
    if (tokenizer_from_hf_json(bad, &t).ok()) {
      std::vector<int> ids;
      (void)t->encode("ab abc", EncodeOptions{}, &ids);
      (void)t->decode(ids);
    }
  }
}

// Uncased WordPiece is lossy (case, accents, spaces around punctuation): instead of a round trip,
// decoding and encoding again must give the same ids, and the shared texts need almost no [UNK].
TEST(WordPiece, ReencodingTheDecodedTextGivesTheSameIds) {
  MC_REQUIRE_SHARED();
  const Tokenizer& t = load("tokenizers/vocab-gguf/ggml-vocab-bert-bge.gguf");
  ASSERT_STREQ(t.kind(), "wordpiece");
  for (const char* file : {"data/tinystories_val_head794k.txt", "data/tinyshakespeare.txt"}) {
    std::string text = read_text(shared_path(file));
    if (text.size() > kTextLimit) text.resize(kTextLimit);
    const std::vector<int> ids = enc(t, text);
    int unk = 0;
    for (const int id : ids) unk += id == 100;
    EXPECT_LE(unk, 5) << file << ": BERT's vocabulary lacks a few rare characters (emoji), not words";
    EXPECT_EQ(enc(t, t.decode(ids), true), ids) << file;
  }
  EXPECT_EQ(t.decode(enc(t, "Äpfel, Hello WORLD!")), " apfel , hello world !");
  EXPECT_EQ(enc(t, "[CLS] hi [SEP]", true), (std::vector<int>{101, 7632, 102}));
  EXPECT_EQ(enc(t, std::string(150, 'a')), (std::vector<int>{100})) << "a word over 100 characters is [UNK]";
  // Invalid UTF-8, controls, NUL: dropped like BERT's clean-up, never a crash.
  EXPECT_EQ(enc(t, std::string("a\xff\x01\0b", 5)), enc(t, "ab"));
}

// Qwen's tokenizer.json normalizes to NFC: decomposed input gives the ids of the composed text. The
// expected ids are what Hugging Face's tokenizers.js 0.2.0 gives for the same strings.
TEST(BpeTokenizer, QwenNormalizesToNfc) {
  MC_REQUIRE_SHARED();
  const BpeTokenizer& q = qwen();
  EXPECT_EQ(enc(q, "Cafe\u0301 Caf\u00e9"), (std::vector<int>{34, 2577, 963, 65671}));
  EXPECT_EQ(enc(q, "\u1100\u1161\u11A8 \uD55C"), (std::vector<int>{126317, 61298}));
  EXPECT_EQ(enc(q, "A\u030A\u212B \u00C5"), (std::vector<int>{144044, 144044, 79252}));
  EXPECT_EQ(enc(q, "e\u0301\u0302x"), (std::vector<int>{963, 136, 224, 87}));
  // Invalid bytes around a decomposed character are kept as they are.
  const std::string bad = "\xff" "e\u0301" "\xc3";
  EXPECT_EQ(q.decode(enc(q, bad)), "\xff\u00e9\xc3");
}

}  // namespace
}  // namespace mcullm
