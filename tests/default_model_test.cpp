// The model README's first command runs (models/tinystories-q4.gguf, trained by train/): it loads
// from the repository alone and writes text, and the end-of-story token it samples is not printed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "test_support.h"

namespace mcullm {
namespace {

std::string default_model() { return std::string(MCULLM_SOURCE_DIR) + "/models/tinystories-q4.gguf"; }

// Runs counted by the "eval time" line (tokens sampled after the first).
int eval_runs(const std::string& err) {
  const size_t at = err.find("eval time");
  if (at == std::string::npos) return -1;
  const size_t slash = err.find('/', at);
  return slash == std::string::npos ? -1 : std::atoi(err.c_str() + slash + 1);
}

TEST(DefaultModel, WritesPlainTextFromThePrompt) {
  const auto r = test::run_cli({"run", "-m", default_model(), "-p", "Once upon a time", "-n", "64", "--temp", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.out.rfind("Once upon a time", 0), 0u) << r.out;
  EXPECT_GT(r.out.size(), std::string("Once upon a time").size() + 40) << r.out;
  for (unsigned char c : r.out) EXPECT_TRUE(c == '\n' || (c >= 0x20 && c < 0x7f)) << "byte " << int(c) << " in " << r.out;
}

TEST(DefaultModel, AStoryThatEndsDoesNotPrintItsEndToken) {
  bool some_ended = false;
  for (const char* seed : {"1", "2", "3", "4"}) {
    const auto r = test::run_cli({"run", "-m", default_model(), "-p", "Once upon a time", "-n", "300", "--temp", "1", "--seed", seed});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.find("<s>"), std::string::npos) << "seed " << seed << ": " << r.out;
    EXPECT_EQ(r.out.find("</s>"), std::string::npos) << "seed " << seed << ": " << r.out;
    const int runs = eval_runs(r.err);
    ASSERT_GT(runs, 0) << r.err;
    if (runs < 299) some_ended = true;
  }
  EXPECT_TRUE(some_ended) << "no story ended within 300 tokens: the stop token was never sampled, so nothing was checked";
}

}  // namespace
}  // namespace mcullm
