// `mcullm run` on esp32-ai's PLE model: the format is recognised, 1 vs 2 threads and every kernel
// table give the same fingerprint in both activation modes, a cut file is refused, and the greedy
// streams (f32 and int8 activations) equal esp32-ai's C core (its reference streams in ../shared).
#include <cstdio>
#include <fstream>

#include "test_support.h"

namespace mcullm {
namespace {

using test::run_cli;

std::string fixture() { return test::shared_path("models/esp32-ai-ple/ple4096_int4.bin"); }

std::string fingerprint_of(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"run", "-m", fixture(), "--prompt-ids", "1,337,805", "-q", "--temp", "0", "-n", "24", "--fingerprint"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = run_cli(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("esp32-ai v0"), std::string::npos) << r.err;
  return r.out;
}

TEST(CliPle, FingerprintIndependentOfThreadsAndKernels) {
  MC_REQUIRE_SHARED();
  for (const char* mode : {"", "--f32-activations"}) {
    std::vector<std::string> m;
    if (*mode) m.push_back(mode);
    const std::string base = fingerprint_of(m);
    ASSERT_NE(base.find("fingerprint"), std::string::npos);
    for (const auto& extra : std::vector<std::vector<std::string>>{{"-t", "2"}, {"--kernels", "ref"}, {"--kernels", "ref", "-t", "2"}}) {
      std::vector<std::string> args = m;
      args.insert(args.end(), extra.begin(), extra.end());
      EXPECT_EQ(fingerprint_of(args), base) << mode;
    }
  }
  // the two activation modes differ (int8 rounding reaches the logits)
  EXPECT_NE(fingerprint_of({}), fingerprint_of({"--f32-activations"}));
}

// The bytes of each class as FACTS section 4 lays the file out (not mcullm's own output): every int4
// tensor is an i32 group, rows * ceil(cols / 2) code bytes and rows * ceil(cols / 128) f16 scales.
std::string expected_weights_line() {
  const int64_t V = 4096, D = 128, L = 6, F = 415, P = 64;
  auto q4 = [](int64_t rows, int64_t cols) { return 4 + rows * ((cols + 1) / 2) + rows * ((cols + 127) / 128) * 2; };
  const int64_t embedding = q4(V, D);
  const int64_t attention = L * (q4(3 * D, D) + q4(D, D));                   // fused qkv, attn_proj
  const int64_t ffn = L * (2 * q4(F, D) + q4(D, F));                         // gate, up, down
  const int64_t other = q4(L * P, D) + q4(V, L * P) + L * (q4(P, D) + q4(D, P));  // ple_model_proj, ple_table, ple_gate/proj
  auto mib = [](int64_t b) {
    char s[32];
    std::snprintf(s, sizeof s, "%.2f MiB", static_cast<double>(b) / (1024.0 * 1024.0));
    return std::string(s);
  };
  return "weights in place  = " + mib(embedding + attention + ffn + other) + " (embedding " + mib(embedding) +
         ", attention " + mib(attention) + ", ffn " + mib(ffn) + ", other " + mib(other) + ")";
}

// The weights are read in place (not copied): the loader reports them by class, the same for the
// esp32-ai file and its GGUF form; the PLE table and projections are "other" (the f32 norms are copied).
TEST(CliPle, ReportsWeightsInPlace) {
  MC_REQUIRE_SHARED();
  const std::string gguf = test::temp_dir() + "/ple.gguf";
  ASSERT_EQ(run_cli({"convert", fixture(), "-o", gguf}).exit_code, 0);
  auto line_of = [](const std::string& model) {
    const auto r = run_cli({"run", "-m", model, "--prompt-ids", "1", "-q", "-n", "2"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const size_t at = r.err.find("weights in place");
    return at == std::string::npos ? std::string() : r.err.substr(at, r.err.find('\n', at) - at);
  };
  const std::string native = line_of(fixture());
  EXPECT_EQ(native, expected_weights_line());
  EXPECT_EQ(line_of(gguf), native);
}

TEST(CliPle, TruncatedFileIsRefused) {
  MC_REQUIRE_SHARED();
  std::vector<uint8_t> bytes = test::read_file(fixture());
  bytes.resize(bytes.size() - 100);
  const std::string cut = test::temp_dir() + "/cut.bin";
  test::write_file(cut, bytes);
  const auto r = run_cli({"run", "-m", cut, "--prompt-ids", "1", "-q", "-n", "2"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("run past the file"), std::string::npos) << r.err;
}

// esp32-ai -> GGUF -> esp32-ai gives the fixture back byte for byte; the GGUF runs to the same fingerprint.
TEST(CliPle, ConvertToGgufAndBackIsLossless) {
  MC_REQUIRE_SHARED();
  const std::string dir = test::temp_dir(), gguf = dir + "/ple.gguf", back = dir + "/back.bin";
  auto r = run_cli({"convert", fixture(), "-o", gguf});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_cli({"convert", gguf, "-o", back, "--format", "esp32ai"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(test::read_file(back) == test::read_file(fixture()));
  const auto a = run_cli({"run", "-m", gguf, "--prompt-ids", "1,337,805", "-q", "--temp", "0", "-n", "24", "--fingerprint"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, fingerprint_of({}));
  std::vector<uint8_t> cut = test::read_file(gguf);
  cut.resize(cut.size() - 50);
  test::write_file(dir + "/cut.gguf", cut);
  EXPECT_NE(run_cli({"run", "-m", dir + "/cut.gguf", "--prompt-ids", "1", "-q", "-n", "2"}).exit_code, 0);
  // flags that do not apply to PLE models
  EXPECT_NE(run_cli({"convert", fixture(), "-o", dir + "/x.gguf", "--type", "q8_0"}).exit_code, 0);
  const auto s = test::shared_path("models/stories260K/stories260K.bin");
  const auto bad = run_cli({"convert", s, "-o", dir + "/y.bin", "--format", "esp32ai"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("esp32ai"), std::string::npos) << bad.err;
}

// f32: esp32-ai's default build; int8: its -DLLM_INT8_ACT build (one activation scale per matvec).
TEST(CliPle, GreedyStreamsEqualEsp32aiCCore) {
  MC_REQUIRE_SHARED();
  for (const char* mode : {"f32", "int8"}) {
    const std::string ref = test::shared_dir() + "/models/esp32-ai-ple/ref/greedy_bos1_" + mode + ".tokens";
    ASSERT_TRUE(std::ifstream(ref).good()) << ref << " is missing: esp32-ai's C-core reference streams are part of ../shared";
    const std::string dump = test::temp_dir() + "/greedy.tokens";
    std::vector<std::string> args = {"run", "-m", fixture(), "--prompt-ids", "1", "-q", "--temp", "0", "-n", "256", "--dump-tokens", dump};
    if (std::string(mode) == "f32") args.push_back("--f32-activations");
    const auto r = run_cli(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(test::read_text(dump), test::read_text(ref)) << mode;
  }
}

}  // namespace
}  // namespace mcullm
