// `mcullm bench`: llama-bench's markdown table (one row per model, thread count and test, t/s as
// avg ± stddev), comma lists, the bytes-per-token note, and clear errors.
#include <cstdint>
#include <cstdio>
#include <sstream>

#include "test_support.h"

namespace mcullm {
namespace {

using test::run_cli;

std::string tiny_model() {
  const std::string path = test::temp_dir() + "/tiny-bitnet.gguf";
  const auto r = run_cli({"dummy", "--arch", "bitnet", "--layout", "tiny", "-o", path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return path;
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(BenchCli, PrintsLlamaBenchTableForEveryThreadCountAndTest) {
  const std::string model = tiny_model();
  const auto r = run_cli({"bench", "-m", model, "-p", "16", "-n", "8,4", "-t", "1,2", "-r", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("| model"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| backend"), std::string::npos) << r.out;
  EXPECT_EQ(count(r.out, " pp16 |"), 2) << r.out;
  EXPECT_EQ(count(r.out, " tg8 |"), 2) << r.out;
  EXPECT_EQ(count(r.out, " tg4 |"), 2) << r.out;
  // A row: | bitnet <N>M I2_S+F16 | <x> MiB | <y> M | CPU <kernels>, pp batch 128 | <t> | tg8 | <avg> ± <sd> |
  std::istringstream lines(r.out);
  std::string line;
  int rows = 0;
  while (std::getline(lines, line)) {
    if (line.find(" tg8 |") == std::string::npos) continue;
    ++rows;
    EXPECT_EQ(line.rfind("| bitnet ", 0), 0u) << line;
    EXPECT_NE(line.find("M I2_S+F16 "), std::string::npos) << line;
    EXPECT_NE(line.find(" MiB |"), std::string::npos) << line;
    EXPECT_NE(line.find(", pp batch 128 "), std::string::npos) << line;
    const size_t pm = line.find(" ± ");
    ASSERT_NE(pm, std::string::npos) << line;
    const size_t bar = line.rfind('|', pm);
    EXPECT_GT(std::stod(line.substr(bar + 1, pm - bar - 1)), 0.0) << line;
  }
  EXPECT_EQ(rows, 2);
  EXPECT_NE(r.out.find("of weights read per generated token"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("pp runs as batched prefill"), std::string::npos) << r.out;
}

// The esp32-ai PLE model: its parameters and type in the label, and a bytes note that reads one PLE
// table row per token; --kv int8 shrinks the KV bytes per position (head size 32: 36 bytes for 128).
TEST(BenchCli, PleModelLabelAndBytesNote) {
  MC_REQUIRE_SHARED();
  const std::string ple = test::shared_path("models/esp32-ai-ple/ple4096_int4.bin");
  auto kib_of = [](const std::string& out) {
    const size_t at = out.find("plus ");
    return at == std::string::npos ? -1.0 : std::stod(out.substr(at + 5));
  };
  const auto a = run_cli({"bench", "-m", ple, "-p", "0", "-n", "2", "-t", "1", "-r", "1"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  // The figures derived from FACTS section 4's layout (vocab 4096, dim 128, 6 layers, ffn 415, ple_dim 64,
  // int4 tensors: i32 group, ceil(cols / 2) code bytes and ceil(cols / 128) f16 scales per row).
  const int64_t V = 4096, D = 128, L = 6, F = 415, P = 64;
  const int64_t params = V * D + L * P * D + V * L * P + L * (3 * D * D + D * D + 3 * F * D + 2 * P * D) +  // matrices
                         P + L * 3 * D + D;  // norms: ple_proj_norm, attn / ffn / ple norm per layer, out_norm
  char label[32];
  std::snprintf(label, sizeof label, " %.2f M |", static_cast<double>(params) / 1e6);
  EXPECT_NE(a.out.find("| ple 4M Q4E "), std::string::npos) << a.out;  // esp32-ai's int4
  EXPECT_NE(a.out.find(label), std::string::npos) << label << "\n" << a.out;
  auto q4 = [](int64_t rows, int64_t cols) { return 4 + rows * ((cols + 1) / 2) + rows * ((cols + 127) / 128) * 2; };
  // Per token: every matrix (the tied head reads the whole embedding) and f32 norm but the PLE table,
  // of which one row; the tolerance is the printed figure's rounding.
  const int64_t per_token = q4(V, D) + L * (q4(3 * D, D) + q4(D, D) + 2 * q4(F, D) + q4(D, F) + q4(P, D) + q4(D, P)) +
                            q4(L * P, D) + (L * P / 2 + (L * P + 127) / 128 * 2) + 4 * (P + L * 3 * D + D);
  const size_t note = a.out.find(" MiB of weights read per generated token (one PLE table row");
  ASSERT_NE(note, std::string::npos) << a.out;
  const size_t start = a.out.find_last_of(" \n", note - 1) + 1;
  EXPECT_NEAR(std::stod(a.out.substr(start, note - start)), static_cast<double>(per_token) / (1024.0 * 1024.0), 0.0051) << a.out;
  EXPECT_NE(a.out.find("(f32 cache)"), std::string::npos) << a.out;
  const auto b = run_cli({"bench", "-m", ple, "-p", "0", "-n", "2", "-t", "1", "-r", "1", "--kv", "int8"});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_NE(b.out.find("(int8 cache)"), std::string::npos) << b.out;
  EXPECT_DOUBLE_EQ(kib_of(a.out), 6.0);  // 6 layers x 2 x 128 x 4 bytes
  EXPECT_NEAR(kib_of(b.out), 6.0 * 36 / 128, 0.05);
}

TEST(BenchCli, Errors) {
  const std::string model = tiny_model();
  auto r = run_cli({"bench", "-m", model, "-p", "4096", "-n", "0"});  // tiny's context is 256
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("needs more than the model's context of 256"), std::string::npos) << r.err;
  r = run_cli({"bench", "-m", model, "-t", "1,x"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("-t: 'x' is not a number"), std::string::npos) << r.err;
  r = run_cli({"bench", "-m", model + ".missing", "-p", "1", "-n", "1"});
  EXPECT_NE(r.exit_code, 0);
}

}  // namespace
}  // namespace mcullm
