// `mcullm tokenize` / `mcullm detokenize`: ids and pieces, round trips through files (invalid UTF-8
// included), and bad input: missing files, ids out of range or not numbers, corrupt tokenizers.
#include <string>
#include <vector>

#include "test_support.h"

namespace mcullm {
namespace {

using test::read_file;
using test::run_cli;
using test::shared_path;
using test::temp_dir;
using test::write_file;

std::string qwen() { return shared_path("tokenizers/qwen/tokenizer.json"); }
std::string gpt2() { return shared_path("tokenizers/vocab-gguf/ggml-vocab-gpt-2.gguf"); }

TEST(CliTokenize, IdsMatchTheTestVectors) {
  MC_REQUIRE_SHARED();
  // Case 32 of ggml-vocab-qwen2: "Hello, y'all! How are you 😁 ?我想在apple工作1314151天～"
  const auto r = run_cli({"tokenize", "-m", qwen(), "-p", "Hello, y'all! How are you 😁 ?我想在apple工作1314151天～", "--ids"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "9707 11 379 64848 0 2585 525 498 26525 223 937 104100 18493 22377 99257 16 18 16 19 16 20 16 35727 21216\n");
  EXPECT_NE(r.err.find("pre-tokenizer qwen2"), std::string::npos) << r.err;
}

TEST(CliTokenize, PrintsPiecesAndParsesSpecialTokens) {
  MC_REQUIRE_SHARED();
  const auto r = run_cli({"tokenize", "-m", qwen(), "-p", "<|im_start|>Hi\n"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "151644 -> '<|im_start|>'\n 13048 -> 'Hi'\n   198 -> '\\n'\n");
  const auto plain = run_cli({"tokenize", "-m", qwen(), "-p", "<|im_start|>", "--ids", "--no-parse-special"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.out.find("151644"), std::string::npos) << plain.out;
}

TEST(CliTokenize, RoundTripsAFileWithInvalidUtf8) {
  MC_REQUIRE_SHARED();
  const std::string dir = temp_dir();
  std::vector<uint8_t> bytes;
  const std::string text = "Once upon a time, 我想 🦙\n\tend";
  bytes.assign(text.begin(), text.end());
  bytes.insert(bytes.begin() + 5, {0xE6, 0x88});  // a cut character
  bytes.push_back(0x80);                           // a stray continuation byte
  write_file(dir + "/in.txt", bytes);
  for (const std::string& tok : {gpt2(), qwen(), shared_path("models/stories260K/tok512.bin")}) {
    const auto t = run_cli({"tokenize", "-m", tok, "-f", dir + "/in.txt", "--ids"});
    ASSERT_EQ(t.exit_code, 0) << t.err;
    EXPECT_NE(t.err.find("not valid UTF-8 (byte 0xE6 at offset 5)"), std::string::npos) << t.err;
    write_file(dir + "/ids.txt", std::vector<uint8_t>(t.out.begin(), t.out.end()));
    const auto d = run_cli({"detokenize", "-m", tok, "-f", dir + "/ids.txt"});
    ASSERT_EQ(d.exit_code, 0) << d.err;
    std::vector<uint8_t> back(d.out.begin(), d.out.end());
    if (tok.find("tok512") != std::string::npos) {  // SentencePiece's dummy-prefix space
      ASSERT_FALSE(back.empty());
      EXPECT_EQ(back[0], ' ');
      back.erase(back.begin());
    }
    EXPECT_EQ(back, bytes) << tok;
  }
}

TEST(CliTokenize, FindsAModelsTokenizer) {
  MC_REQUIRE_SHARED();
  const auto r = run_cli({"tokenize", "-m", shared_path("models/stories260K/stories260K.bin"), "-p", "Once upon a time", "--ids"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("tok512.bin"), std::string::npos) << r.err;
  const auto d = run_cli({"detokenize", "-m", shared_path("models/stories260K/stories260K.bin"), "-p", r.out});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_EQ(d.out, " Once upon a time");
}

TEST(CliTokenize, BadInputGetsClearErrors) {
  MC_REQUIRE_SHARED();
  const std::string dir = temp_dir();
  auto r = run_cli({"tokenize", "-m", dir + "/missing.json", "-p", "x"});
  EXPECT_EQ(r.exit_code, 4);  // I/O (docs/cli.md)
  EXPECT_NE(r.err.find("cannot open"), std::string::npos) << r.err;
  r = run_cli({"tokenize", "-m", gpt2(), "-f", dir + "/missing.txt"});
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_NE(r.err.find("cannot open"), std::string::npos) << r.err;
  r = run_cli({"tokenize", "-m", gpt2()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("-p TEXT or -f FILE"), std::string::npos) << r.err;
  r = run_cli({"detokenize", "-m", gpt2(), "-p", "15496 50257"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("token id 50257 (item 2) is outside the vocabulary of 50257"), std::string::npos) << r.err;
  r = run_cli({"detokenize", "-m", gpt2(), "-p", "-3"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("outside the vocabulary"), std::string::npos) << r.err;
  r = run_cli({"detokenize", "-m", gpt2(), "-p", "99999999999999999999999"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("outside the vocabulary"), std::string::npos) << r.err;
  r = run_cli({"detokenize", "-m", gpt2(), "-p", "15496, 1e5"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'1e5' (item 2) is not a token id"), std::string::npos) << r.err;
  // Ids in brackets and with commas are fine.
  r = run_cli({"detokenize", "-m", gpt2(), "-p", "[15496, 995]"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Hello world");
  // Files that are no tokenizer.
  write_file(dir + "/junk.bin", {1, 2, 3, 4, 5, 6, 7, 8, 9});
  r = run_cli({"tokenize", "-m", dir + "/junk.bin", "-p", "x"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("neither a tokenizer"), std::string::npos) << r.err;
  write_file(dir + "/t.json", {'{', '"', 'a'});
  r = run_cli({"tokenize", "-m", dir + "/t.json", "-p", "x"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("not valid JSON"), std::string::npos) << r.err;
  r = run_cli({"tokenize", "-m", shared_path("tokenizers/vocab-gguf/ggml-vocab-bert-bge.gguf"), "-p", "Hello world", "--ids"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "7592 2088\n");
}

// `mcullm run` takes its tokenizer through the same interface: a tokenizer.json is read, and a
// vocabulary larger than the model's is refused with a clear error.
TEST(CliRunTokenizer, RefusesATokenizerLargerThanTheModel) {
  MC_REQUIRE_SHARED();
  const auto r = run_cli({"run", "-m", shared_path("models/stories260K/stories260K.bin"), "-z", qwen(), "-n", "4"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("has 151669 tokens, the model 512"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace mcullm
