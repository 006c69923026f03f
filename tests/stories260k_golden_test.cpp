// stories260K (llama2.c f32) against llama2.c run.c's own outputs in ../shared/models/stories260K/ref.
#include <cmath>
#include <fstream>
#include <sstream>

#include "core/thread_pool_host.h"
#include "format/llama2c.h"
#include "test_support.h"

namespace mcullm {
namespace {

struct RefSteps {
  std::vector<int> prompt;
  std::vector<int> next;  // the token chosen at each step
};

RefSteps read_tokens(const std::string& path) {
  RefSteps r;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream ss(line);
    std::string tag;
    ss >> tag;
    if (tag == "PROMPT") {
      int id;
      while (ss >> id) r.prompt.push_back(id);
    } else if (tag == "TOK") {
      int pos, tok, next;
      ss >> pos >> tok >> next;
      r.next.push_back(next);
    }
  }
  return r;
}

class Stories260K : public ::testing::TestWithParam<std::tuple<const char*, int>> {};

TEST_P(Stories260K, GreedyMatchesRunCTokensAndLogits) {
  MC_REQUIRE_SHARED();
  const auto [kernel_name, threads] = GetParam();
  const KernelSet* kernels = kernels_by_name(kernel_name);
  if (!kernels) MCULLM_SKIP_OR_FAIL(kernel_name, kernel_name << " kernels are not available on this CPU");
  const std::vector<uint8_t> bytes = test::read_file(test::shared_path("models/stories260K/stories260K.bin"));
  const RefSteps ref = read_tokens(test::shared_path("models/stories260K/ref/greedy_noprompt.tokens"));
  const std::vector<uint8_t> ref_logits_bytes = test::read_file(test::shared_path("models/stories260K/ref/greedy_noprompt.logits.f32"));
  ASSERT_EQ(ref.next.size(), 256u);
  ASSERT_EQ(ref_logits_bytes.size(), 256u * 512u * 4u);
  const float* ref_logits = reinterpret_cast<const float*>(ref_logits_bytes.data());

  std::vector<uint8_t> mem(16 << 20);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  LlamaModel model;
  ASSERT_TRUE(llama2c_load(bytes.data(), bytes.size(), arena, &model).ok());
  HostThreadPool pool(threads);
  LlamaContext ctx;
  ASSERT_TRUE(ctx.init(&model, 0, arena, &pool, kernels).ok());

  int token = ref.prompt.at(0);
  double worst = 0;
  for (int pos = 0; pos < 256; ++pos) {
    const float* logits = nullptr;
    ASSERT_TRUE(ctx.forward(token, pos, &logits).ok());
    int best = 0;
    for (int i = 0; i < 512; ++i) {
      worst = std::max(worst, std::fabs(static_cast<double>(logits[i]) - ref_logits[pos * 512 + i]));
      if (logits[i] > logits[best]) best = i;
    }
    ASSERT_EQ(best, ref.next[pos]) << "step " << pos;
    token = best;
  }
  EXPECT_LT(worst, 1e-4) << "largest logit difference from run.c";
}

INSTANTIATE_TEST_SUITE_P(Kernels, Stories260K,
                         ::testing::Combine(::testing::Values("ref", "avx2"), ::testing::Values(1, 2)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)) + "_" + std::to_string(std::get<1>(info.param)) + "threads";
                         });

}  // namespace
}  // namespace mcullm
