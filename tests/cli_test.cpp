// The mcullm CLI end to end: run.c's references, determinism, and clear errors for bad flags.
#include <cmath>

#include "test_support.h"

namespace mcullm {
namespace {

using test::run_cli;

std::string stories(const std::string& f) { return test::shared_path("models/stories260K/" + f); }

TEST(CliRun, GreedyReproducesRunCReference) {
  MC_REQUIRE_SHARED();
  const std::string dump = test::temp_dir() + "/greedy.tokens";
  const auto r = run_cli({"run", "-m", stories("stories260K.bin"), "--temp", "0", "-n", "256", "--dump-tokens", dump, "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test::read_text(dump), test::read_text(stories("ref/greedy_noprompt.tokens")));
}

TEST(CliRun, GreedyLogitsWithin1e4OfRunC) {
  MC_REQUIRE_SHARED();
  const std::string dump = test::temp_dir() + "/greedy.logits";
  const auto r = run_cli({"run", "-m", stories("stories260K.bin"), "--temp", "0", "-n", "256", "--dump-logits", dump, "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto ours = test::read_file(dump), ref = test::read_file(stories("ref/greedy_noprompt.logits.f32"));
  ASSERT_EQ(ours.size(), ref.size());
  const float* a = reinterpret_cast<const float*>(ours.data());
  const float* b = reinterpret_cast<const float*>(ref.data());
  double worst = 0;
  for (size_t i = 0; i < ours.size() / 4; ++i) worst = std::max(worst, static_cast<double>(std::fabs(a[i] - b[i])));
  EXPECT_LT(worst, 1e-4);
}

TEST(CliRun, SeededLlama2cSamplerReproducesRunCReference) {
  MC_REQUIRE_SHARED();
  const std::string dump = test::temp_dir() + "/sample.tokens";
  const auto r = run_cli({"run", "-m", stories("stories260K.bin"), "--temp", "1", "--top-p", "0.9", "-s", "133742",
                          "--sampler", "llama2c", "-n", "256", "--dump-tokens", dump});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test::read_text(dump), test::read_text(stories("ref/sample_t1_p09_s133742.tokens")));
  // The streamed text is run.c's printed text (which ends with a newline, as ours does).
  EXPECT_EQ(r.out, test::read_text(stories("ref/sample_t1_p09_s133742.txt")));
}

TEST(CliRun, SeedSpellingTempAliasAndPromptIds) {
  MC_REQUIRE_SHARED();
  const auto a = run_cli({"run", "-m", stories("stories260K.bin"), "-temp", "0", "-n", "20", "--fingerprint", "-q"});
  const auto b = run_cli({"run", "-m", stories("stories260K.bin"), "--temp", "0", "-n", "20", "--fingerprint", "-q",
                          "--prompt-ids", "1"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_NE(a.out.find("fingerprint "), std::string::npos);
  EXPECT_EQ(a.out, b.out);  // BOS-only prompt either way
}

TEST(CliRun, FingerprintIndependentOfKernelsAndThreads) {
  MC_REQUIRE_SHARED();
  std::string first;
  for (const char* kernels : {"ref", "auto"})
    for (const char* threads : {"1", "2"}) {
      const auto r = run_cli({"run", "-m", stories("stories260K.bin"), "-p", "Once upon a time", "-n", "64", "-s", "7",
                              "--kernels", kernels, "-t", threads, "--fingerprint", "-q"});
      ASSERT_EQ(r.exit_code, 0) << r.err;
      if (first.empty()) first = r.out;
      EXPECT_EQ(r.out, first) << kernels << " kernels, " << threads << " threads";
    }
}

TEST(CliRun, PrintsSpeedFigures) {
  MC_REQUIRE_SHARED();
  const auto r = run_cli({"run", "-m", stories("stories260K.bin"), "-n", "16"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("prompt eval time"), std::string::npos);
  EXPECT_NE(r.err.find("tokens per second"), std::string::npos);
  EXPECT_NE(r.err.find("load time"), std::string::npos);
}

TEST(CliDummy, IsDeterministicAndRuns) {
  const std::string dir = test::temp_dir();
  ASSERT_EQ(run_cli({"dummy", "-o", dir + "/a.gguf"}).exit_code, 0);
  ASSERT_EQ(run_cli({"dummy", "-o", dir + "/b.gguf"}).exit_code, 0);
  ASSERT_EQ(run_cli({"dummy", "-o", dir + "/c.gguf", "--seed", "99"}).exit_code, 0);
  const auto a = test::read_file(dir + "/a.gguf");
  EXPECT_GT(a.size(), 100000u);
  EXPECT_EQ(a, test::read_file(dir + "/b.gguf"));
  EXPECT_NE(a, test::read_file(dir + "/c.gguf"));
  const auto r1 = run_cli({"run", "-m", dir + "/a.gguf", "-p", "Once upon a time", "-n", "32", "--fingerprint", "-t", "1", "-s", "42"});
  const auto r2 = run_cli({"run", "-m", dir + "/a.gguf", "-p", "Once upon a time", "-n", "32", "--fingerprint", "-t", "2", "--kernels", "ref", "-s", "42"});
  ASSERT_EQ(r1.exit_code, 0) << r1.err;
  EXPECT_EQ(r1.out, r2.out);
  EXPECT_NE(r1.out.find("Once upon a time"), std::string::npos);
}

TEST(CliDummy, QuantizedTypesRunWithTheSameFingerprintOnEveryKernel) {
  const std::string dir = test::temp_dir();
  for (const char* type : {"q8_0", "q4_0", "q4g64"}) {
    // dim 64 and hidden 192 fill whole 32-blocks, so every matrix takes the type
    const std::string f = dir + "/" + type + ".gguf";
    ASSERT_EQ(run_cli({"dummy", "-o", f, "--type", type, "--hidden", "192"}).exit_code, 0);
    const auto a = run_cli({"run", "-m", f, "-n", "24", "--fingerprint", "-q", "--kernels", "ref", "-t", "1", "-s", "42"});
    const auto b = run_cli({"run", "-m", f, "-n", "24", "--fingerprint", "-q", "--kernels", "auto", "-t", "2", "-s", "42"});
    ASSERT_EQ(a.exit_code, 0) << a.err;
    EXPECT_EQ(a.out, b.out) << type;
  }
}

struct BadFlags {
  std::vector<std::string> args;
  const char* expect;  // a piece of the error message
};

TEST(CliErrors, BadFlagsGiveClearErrors) {
  MC_REQUIRE_SHARED();
  const std::string model = stories("stories260K.bin");
  const std::string big_tok = test::shared_path("tokenizers/llama2-32k/tokenizer.bin");
  const std::vector<BadFlags> cases = {
      {{}, "subcommand"},
      {{"run"}, "--model"},
      {{"run", "-m", "/nonexistent/model.bin"}, "not exist"},
      {{"run", "-m", model, "--temp", "-1"}, "--temp"},
      {{"run", "-m", model, "--top-p", "1.5"}, "--top-p"},
      {{"run", "-m", model, "-n", "abc"}, "-n"},
      {{"run", "-m", model, "-t", "0"}, "--threads"},
      {{"run", "-m", model, "--kernels", "neon"}, "--kernels"},
      {{"run", "-m", model, "--sampler", "magic"}, "--sampler"},
      {{"run", "-m", model, "--prompt-ids", "1,99999"}, "not a token id"},
      {{"run", "-m", model, "--prompt-ids", "1,x"}, "not a token id"},
      {{"run", "-m", model, "--prompt-ids", ","}, "empty"},
      {{"run", "-m", model, "--prompt-ids", "1", "-p", "hi"}, "not both"},
      {{"run", "-m", model, "-c", "4096"}, "longer than the model"},
      {{"run", "-m", model, "-c", "4", "-p", "Once upon a time there was a girl"}, "context holds"},
      {{"run", "-m", model, "-z", big_tok}, "tokens"},
      {{"run", "-m", model, "--no-bos", "-p", ""}, "empty"},
      {{"convert", model}, "--output"},
      {{"convert", model, "-o", "/nonexistent-dir/x.gguf"}, "nonexistent-dir"},
      {{"convert", model, "-o", "x.gguf", "--type", "q3_k"}, "--type"},
      {{"dummy", "-o", "x.gguf", "--dim", "63", "--heads", "8"}, "multiple"},
  };
  for (const BadFlags& c : cases) {
    const auto r = run_cli(c.args);
    std::string joined;
    for (const auto& a : c.args) joined += a + " ";
    EXPECT_NE(r.exit_code, 0) << joined;
    EXPECT_LT(r.exit_code, 128) << "crashed: " << joined;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << joined << "\nstderr: " << r.err;
  }
}

TEST(CliErrors, TruncatedAndCorruptModelsAreRefused) {
  MC_REQUIRE_SHARED();
  const auto bytes = test::read_file(stories("stories260K.bin"));
  const std::string dir = test::temp_dir();
  for (size_t cut : {size_t{0}, size_t{3}, size_t{27}, size_t{28}, size_t{1000}, bytes.size() / 2, bytes.size() - 1}) {
    const std::string f = dir + "/cut.bin";
    test::write_file(f, std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<long>(cut)));
    const auto r = run_cli({"run", "-m", f, "-z", stories("tok512.bin"), "-n", "4"});
    EXPECT_EQ(r.exit_code, 1) << cut << ": " << r.err;
    EXPECT_NE(r.err.find("mcullm: error:"), std::string::npos) << cut;
  }
  // A GGUF cut short.
  const std::string gguf = dir + "/m.gguf";
  ASSERT_EQ(run_cli({"convert", stories("stories260K.bin"), "-o", gguf}).exit_code, 0);
  auto g = test::read_file(gguf);
  test::write_file(gguf, std::vector<uint8_t>(g.begin(), g.begin() + static_cast<long>(g.size() - 100)));
  const auto r = run_cli({"run", "-m", gguf, "-n", "4"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("mcullm: error:"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace mcullm
