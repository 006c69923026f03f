// `mcullm bench`: llama-bench's markdown table (one row per model, thread count and test, t/s as
// avg ± stddev), comma lists, the bytes-per-token note, and clear errors.
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
  // A row: | bitnet <N>M I2_S+F16 | <x> MiB | <y> M | CPU <kernels>, pp batch 32 | <t> | tg8 | <avg> ± <sd> |
  std::istringstream lines(r.out);
  std::string line;
  int rows = 0;
  while (std::getline(lines, line)) {
    if (line.find(" tg8 |") == std::string::npos) continue;
    ++rows;
    EXPECT_EQ(line.rfind("| bitnet ", 0), 0u) << line;
    EXPECT_NE(line.find("M I2_S+F16 "), std::string::npos) << line;
    EXPECT_NE(line.find(" MiB |"), std::string::npos) << line;
    EXPECT_NE(line.find(", pp batch 32 "), std::string::npos) << line;
    const size_t pm = line.find(" ± ");
    ASSERT_NE(pm, std::string::npos) << line;
    const size_t bar = line.rfind('|', pm);
    EXPECT_GT(std::stod(line.substr(bar + 1, pm - bar - 1)), 0.0) << line;
  }
  EXPECT_EQ(rows, 2);
  EXPECT_NE(r.out.find("of weights read per generated token"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("pp runs as batched prefill"), std::string::npos) << r.out;
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
