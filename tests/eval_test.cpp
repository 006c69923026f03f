// `mcullm eval`: the golden figure of FACTS.md section 2, the chunk rules, and its errors.
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "format/transformer_gguf_writer_host.h"
#include "load/model_loader_host.h"
#include "kernels/kernels.h"
#include "test_support.h"

namespace mcullm {
namespace {

const char* kModel = "models/stories260K/stories260K.bin";
const char* kText = "data/tinystories_val_head794k.txt";

// The number after "key": in the one-line JSON object that `eval --json` prints; NaN when absent.
double json_number(const std::string& json, const std::string& key) {
  const std::string tag = "\"" + key + "\": ";
  const size_t at = json.find(tag);
  if (at == std::string::npos) return std::nan("");
  return std::strtod(json.c_str() + at + tag.size(), nullptr);
}

test::CommandResult eval_json(std::vector<std::string> extra) {
  std::vector<std::string> args = {"eval", "-m", test::shared_path(kModel), "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  return test::run_cli(args);
}

std::string write_text(const std::string& name, const std::string& text) {
  const std::string path = test::temp_dir() + "/" + name;
  test::write_file(path, std::vector<uint8_t>(text.begin(), text.end()));
  return path;
}

// The bytes of the first n chunks, worked out line by line (a second reading of the rule in
// cmd_eval.cpp): paragraphs are runs of non-empty lines, packed greedily while the chunk
// (paragraphs joined by a blank line) and the blank line after it take at most `limit` bytes.
long long expected_bytes(const std::string& text, size_t limit, size_t n_chunks) {
  std::vector<size_t> paragraphs;  // sizes, including the single "\n" between lines of a paragraph
  size_t cur = 0;
  bool open = false;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    const size_t len = eol - pos;
    if (len == 0) {
      if (open) paragraphs.push_back(cur);
      open = false;
    } else {
      cur = open ? cur + 1 + len : len;
      open = true;
    }
    pos = eol + 1;
  }
  if (open) paragraphs.push_back(cur);
  std::vector<size_t> chunks;
  for (size_t p : paragraphs) {
    if (!chunks.empty() && chunks.back() + 2 + p + 2 <= limit) chunks.back() += 2 + p;
    else chunks.push_back(p);
  }
  long long total = 0;
  for (size_t i = 0; i < n_chunks && i < chunks.size(); ++i) total += static_cast<long long>(chunks[i]);
  return total;
}

TEST(EvalGolden, Stories260KFirst20ChunksGive0956BitsPerByte) {
  MC_REQUIRE_SHARED();
  const test::CommandResult r = eval_json({"-f", test::shared_path(kText), "--chunks", "20"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // FACTS.md section 2, measured by an independent program: 0.956 bits/byte.
  const double bpb = json_number(r.out, "bits_per_byte");
  EXPECT_NEAR(bpb, 0.956, 0.0006) << r.out;
  EXPECT_EQ(json_number(r.out, "chunks"), 20);
  EXPECT_EQ(json_number(r.out, "truncated_chunks"), 0);
  const std::string text = test::read_text(test::shared_path(kText));
  EXPECT_EQ(json_number(r.out, "bytes"), expected_bytes(text, 1000, 20));
  EXPECT_GT(json_number(r.out, "chunks_in_text"), 800);
  // The figures hang together: bits/byte = nats / ln 2 / bytes, perplexity = exp(nats/token).
  const double nats = json_number(r.out, "nats");
  EXPECT_NEAR(json_number(r.out, "nats_per_token"), nats / json_number(r.out, "tokens"), 1e-12);
  EXPECT_NEAR(bpb, nats / std::log(2.0) / json_number(r.out, "bytes"), 1e-12);
  EXPECT_NEAR(json_number(r.out, "perplexity"), std::exp(json_number(r.out, "nats_per_token")), 1e-9);
  // With --json the human summary goes to stderr and says the same.
  EXPECT_NE(r.err.find("bits/byte 0.956"), std::string::npos) << r.err;
}

TEST(EvalGolden, SummaryOnStdoutWithoutJson) {
  MC_REQUIRE_SHARED();
  const test::CommandResult r =
      test::run_cli({"eval", "-m", test::shared_path(kModel), "-f", test::shared_path(kText), "--chunks", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* word : {"chunks", "tokens scored", "bytes", "nats/token", "bits/byte", "perplexity", "time"})
    EXPECT_NE(r.out.find(word), std::string::npos) << word << " missing from\n" << r.out;
  EXPECT_EQ(r.out.find('{'), std::string::npos) << "no JSON without --json";
  EXPECT_EQ(r.out.find("ReLU"), std::string::npos) << "a SwiGLU model has no ReLU line";
}

// stories260K's weights run as a ReLU-gated FFN (mcullm.ffn_activation = "relu"): eval scores it
// (other figures than SwiGLU's, the same bits with either kernel table and thread count) and prints
// the share of neurons the sparse FFN skips.
TEST(EvalRelu, PrintsTheShareOfNeuronsSkipped) {
  MC_REQUIRE_SHARED();
  std::unique_ptr<LoadedModel> lm;
  ASSERT_TRUE(load_model(test::shared_path(kModel), &lm).ok());
  lm->model.spec.act = FfnAct::kRelu;
  GgufWriter w;
  GgufExportOptions opt;
  GgufExportReport rep;
  ASSERT_TRUE(export_transformer_gguf(lm->model, nullptr, opt, &w, &rep).ok());
  const std::vector<uint8_t> bytes = w.to_bytes();
  const std::string path = test::temp_dir() + "/relu260k.gguf";
  test::write_file(path, bytes);
  const std::string tok = test::shared_path("models/stories260K/tok512.bin");
  const auto a = test::run_cli({"eval", "-m", path, "-z", tok, "-f", test::shared_path(kText), "--chunks", "2", "--json"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const size_t at = a.err.find("eval: ReLU FFN: ");
  ASSERT_NE(at, std::string::npos) << a.err;
  const double skipped = std::strtod(a.err.c_str() + at + 16, nullptr);
  EXPECT_GT(skipped, 5.0) << a.err;
  EXPECT_LT(skipped, 95.0) << a.err;
  const auto b = test::run_cli({"eval", "-m", path, "-z", tok, "-f", test::shared_path(kText), "--chunks", "2", "--json",
                                "--kernels", "ref", "-t", "2"});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(test::json_raw(a.out, "nats"), test::json_raw(b.out, "nats"));
  const auto swiglu = eval_json({"-f", test::shared_path(kText), "--chunks", "2"});
  ASSERT_EQ(swiglu.exit_code, 0) << swiglu.err;
  EXPECT_NE(test::json_raw(a.out, "nats"), test::json_raw(swiglu.out, "nats"));
}

TEST(EvalGolden, SameBitsWithRefAndSimdKernelsAndTwoThreads) {
  MC_REQUIRE_SHARED();
  const std::string simd = kernels_avx2() ? "avx2" : "auto";
  const test::CommandResult a = eval_json({"-f", test::shared_path(kText), "--chunks", "3", "--kernels", "ref", "-t", "1"});
  const test::CommandResult b = eval_json({"-f", test::shared_path(kText), "--chunks", "3", "--kernels", simd, "-t", "2"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_FALSE(test::json_raw(a.out, "nats").empty());
  EXPECT_EQ(test::json_raw(a.out, "nats"), test::json_raw(b.out, "nats"));
  EXPECT_EQ(test::json_raw(a.out, "tokens"), test::json_raw(b.out, "tokens"));
}

TEST(EvalChunks, ParagraphsArePackedGreedilyAndALongOneStandsAlone) {
  MC_REQUIRE_SHARED();
  // Paragraphs of 4, 4 and 10 bytes; the file's leading, doubled and trailing blank lines add none.
  // A chunk with its closing "\n\n" must fit the limit: "aaaa\n\nbbbb\n\n" takes 12 bytes.
  const std::string path = write_text("p.txt", "\n\naaaa\n\n\n\nbbbb\n\ncccccccccc\n\n");
  struct Case { const char* limit; double chunks, bytes; };
  for (const Case& c : {Case{"12", 2, 20}, Case{"11", 3, 18}, Case{"1", 3, 18}, Case{"24", 1, 22}, Case{"23", 2, 20}}) {
    const test::CommandResult r = eval_json({"-f", path, "--max-chunk-bytes", c.limit});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(json_number(r.out, "chunks_in_text"), c.chunks) << "limit " << c.limit << "\n" << r.out;
    EXPECT_EQ(json_number(r.out, "chunks"), c.chunks) << "limit " << c.limit;
    EXPECT_EQ(json_number(r.out, "bytes"), c.bytes) << "limit " << c.limit;
    EXPECT_GT(json_number(r.out, "tokens"), 0) << "limit " << c.limit;
  }
}

TEST(EvalChunks, MoreChunksAskedThanTheTextHasScoresThemAll) {
  MC_REQUIRE_SHARED();
  const std::string path = write_text("p.txt", "One day.\n\nThe cat sat.\n\nThe end.\n");
  const test::CommandResult r = eval_json({"-f", path, "--chunks", "100", "--max-chunk-bytes", "14"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json_number(r.out, "chunks"), 3);
  EXPECT_EQ(json_number(r.out, "chunks_in_text"), 3);
  EXPECT_EQ(json_number(r.out, "bytes"), 8 + 12 + 9) << "the last paragraph keeps the file's final newline";
}

TEST(EvalChunks, AChunkLongerThanTheContextIsCutAndSaysSo) {
  MC_REQUIRE_SHARED();
  const test::CommandResult r = eval_json({"-f", test::shared_path(kText), "--chunks", "2", "--max-chunk-bytes", "4000"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json_number(r.out, "truncated_chunks"), 2);
  // stories260K's context holds 512 tokens, BOS included: 511 predictions per chunk.
  EXPECT_EQ(json_number(r.out, "tokens"), 2 * 511);
  // A cut chunk still counts all its bytes (as the program behind FACTS.md's figures does).
  EXPECT_EQ(json_number(r.out, "bytes"), expected_bytes(test::read_text(test::shared_path(kText)), 4000, 2));
  EXPECT_GT(json_number(r.out, "bytes"), 2 * 3000);
  EXPECT_NE(r.err.find("2 chunks were longer than the context of 512 tokens"), std::string::npos) << r.err;
}

// A failure that is reported, not a crash: exit code 1..127, a message on stderr, nothing on stdout.
void expect_clean_error(const test::CommandResult& r, const std::string& says) {
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(r.exit_code, 128) << "killed by a signal";
  EXPECT_NE(r.err.find(says), std::string::npos) << "stderr lacks '" << says << "':\n" << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(EvalErrors, MissingEmptyAndBlankTextFiles) {
  MC_REQUIRE_SHARED();
  expect_clean_error(eval_json({"-f", test::temp_dir() + "/no-such-file.txt"}), "no-such-file.txt does not exist");
  expect_clean_error(eval_json({"-f", write_text("empty.txt", "")}), "no text to score");
  expect_clean_error(eval_json({"-f", write_text("blank.txt", "\n\n\n\n")}), "no text to score");
  expect_clean_error(eval_json({"-f", test::temp_dir()}), "is not a regular file");
}

TEST(EvalErrors, ChunkFlagsOutOfRange) {
  MC_REQUIRE_SHARED();
  const std::string text = test::shared_path(kText);
  expect_clean_error(eval_json({"-f", text, "--chunks", "0"}), "--chunks must be at least 1");
  expect_clean_error(eval_json({"-f", text, "--chunks=-3"}), "--chunks must be at least 1");
  expect_clean_error(eval_json({"-f", text, "--chunks", "many"}), "chunks");
  expect_clean_error(eval_json({"-f", text, "--max-chunk-bytes", "0"}), "--max-chunk-bytes must be at least 1");
  expect_clean_error(eval_json({"-f", text, "--max-chunk-bytes=-1000"}), "--max-chunk-bytes must be at least 1");
  expect_clean_error(eval_json({"-f", text, "--max-chunk-bytes", "1e3"}), "max-chunk-bytes");
}

TEST(EvalErrors, MissingRequiredFlagsAndBadKernels) {
  MC_REQUIRE_SHARED();
  expect_clean_error(test::run_cli({"eval", "-m", test::shared_path(kModel)}), "--file");
  expect_clean_error(test::run_cli({"eval", "-f", test::shared_path(kText)}), "--model");
  expect_clean_error(eval_json({"-f", test::shared_path(kText), "--kernels", "gpu"}), "kernels");
  expect_clean_error(eval_json({"-f", test::shared_path(kText), "-t", "0"}), "threads");
}

}  // namespace
}  // namespace mcullm

namespace mcullm {
namespace {

// The int8 KV cache costs little: on the first 20 chunks 0.9571 bits/byte against the f32 cache's 0.9561.
TEST(EvalKv, Int8CacheStaysCloseToF32) {
  MC_REQUIRE_SHARED();
  const test::CommandResult f = eval_json({"-f", test::shared_path(kText), "--chunks", "20"});
  const test::CommandResult q = eval_json({"-f", test::shared_path(kText), "--chunks", "20", "--kv", "int8"});
  ASSERT_EQ(q.exit_code, 0) << q.err;
  const double a = json_number(f.out, "bits_per_byte"), b = json_number(q.out, "bits_per_byte");
  EXPECT_NE(a, b);
  EXPECT_NEAR(b, a, 0.003) << "f32 " << a << " int8 " << b;
  EXPECT_NE(q.err.find("int8 KV cache"), std::string::npos) << q.err;
}

// The esp32-ai PLE fixture ships without its tokenizer: eval says so, and scores with any explicit
// tokenizer whose ids fit its 4096 (here stories260K's 512: the figure exercises the model, it is
// not its quality), the same bits with either kernel table and thread count.
TEST(EvalPle, ScoresWithAnyFittingTokenizer) {
  MC_REQUIRE_SHARED();
  const std::string ple = test::shared_path("models/esp32-ai-ple/ple4096_int4.bin");
  const std::string tok = test::shared_path("models/stories260K/tok512.bin");
  const std::string text = test::shared_path(kText);
  auto r = test::run_cli({"eval", "-m", ple, "-f", text, "--chunks", "1"});
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("no tokenizer for"), std::string::npos) << r.err;
  const auto a = test::run_cli({"eval", "-m", ple, "-z", tok, "-f", text, "--chunks", "1", "--json"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_NE(a.err.find("the tokenizer has 512 tokens, the model 4096"), std::string::npos) << a.err;
  const double bpb = json_number(a.out, "bits_per_byte");
  EXPECT_GT(bpb, 0.5);
  EXPECT_LT(bpb, 20.0);
  const auto b = test::run_cli({"eval", "-m", ple, "-z", tok, "-f", text, "--chunks", "1", "--json", "--kernels", "ref", "-t", "2"});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(test::json_raw(a.out, "nats"), test::json_raw(b.out, "nats"));
  // A tokenizer with more ids than the model's vocabulary is refused.
  r = test::run_cli({"eval", "-m", test::shared_path(kModel), "-z", test::shared_path("tokenizers/llama2-32k/tokenizer.bin"),
                     "-f", text, "--chunks", "1"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("the tokenizer has 32000 tokens, the model 512"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace mcullm
