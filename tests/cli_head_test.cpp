// `mcullm head`: runs on stories260K and the esp32-ai fixture (the pruned head must agree 100%,
// else the command fails), and refuses bad flags clearly.
#include "test_support.h"

namespace mcullm {
namespace {

using test::run_cli;

TEST(CliHead, PrunedHeadAgreesOnBothModels) {
  MC_REQUIRE_SHARED();
  for (const char* m : {"models/stories260K/stories260K.bin", "models/esp32-ai-ple/ple4096_int4.bin"}) {
    const auto r = run_cli({"head", "-m", test::shared_path(m), "-n", "40", "--groups", "32", "--top", "1,32"});
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    EXPECT_NE(r.out.find("pruned greedy (exact)      100.0%"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("two-stage top 32           100.0%"), std::string::npos) << r.out;  // every group read
  }
}

TEST(CliHead, BadFlagsAreRefused) {
  MC_REQUIRE_SHARED();
  const std::string m = test::shared_path("models/stories260K/stories260K.bin");
  for (const char* top : {"0", "257", "x", "1,,2", "-3"}) {
    const auto r = run_cli({"head", "-m", m, "--top", top});
    EXPECT_NE(r.exit_code, 0) << top;
    EXPECT_NE(r.err.find("--top"), std::string::npos) << r.err;
  }
  EXPECT_NE(run_cli({"head", "-m", m, "--groups", "0"}).exit_code, 0);
  EXPECT_NE(run_cli({"head", "-m", m, "--groups", "300"}).exit_code, 0);
  const auto none = run_cli({"head", "-m", "/nonexistent.bin"});
  EXPECT_NE(none.exit_code, 0);
}

// `run --head`: head groups stored with a default by `head --write --default-head`; the pruned head
// writes the full head's greedy text, two-stage over every group too; sampling never takes a pruned
// head silently; a model without groups refuses the grouped heads.
TEST(CliHead, RunWithAStoredHeadWritesTheFullHeadsGreedyText) {
  const std::string base = std::string(MCULLM_SOURCE_DIR) + "/models/tinystories-q4.gguf";
  const std::string grouped = test::temp_dir() + "/grouped.gguf";
  const auto w = run_cli({"head", "-m", base, "-n", "4", "--groups", "16", "--iters", "4", "--write", grouped,
                          "--default-head", "pruned"});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  const std::vector<std::string> greedy = {"run", "-n", "40", "--temp", "0", "-p", "Once upon a time", "-s", "3"};
  auto with = [](std::vector<std::string> a, const std::string& m, std::vector<std::string> more = {}) {
    a.insert(a.begin() + 1, {"-m", m});
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  const auto full = run_cli(with(greedy, base));
  ASSERT_EQ(full.exit_code, 0) << full.err;
  const auto pruned = run_cli(with(greedy, grouped));  // --head auto: the file's default
  ASSERT_EQ(pruned.exit_code, 0) << pruned.err;
  EXPECT_EQ(pruned.out, full.out);
  EXPECT_NE(pruned.err.find("head: pruned"), std::string::npos) << pruned.err;
  const auto all = run_cli(with(greedy, grouped, {"--head", "two-stage", "--head-top", "16"}));
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ(all.out, full.out);
  EXPECT_NE(all.err.find("head: two-stage, the rows of the best 16 of 16 groups"), std::string::npos) << all.err;

  const std::vector<std::string> sampled = {"run", "-n", "40", "--temp", "0.8", "-p", "Once upon a time", "-s", "3"};
  const auto sampled_full = run_cli(with(sampled, base));
  const auto sampled_auto = run_cli(with(sampled, grouped));  // auto: a pruned default falls back to full
  ASSERT_EQ(sampled_auto.exit_code, 0) << sampled_auto.err;
  EXPECT_EQ(sampled_auto.out, sampled_full.out);
  EXPECT_EQ(sampled_auto.err.find("head: pruned"), std::string::npos) << sampled_auto.err;
  const auto refused = run_cli(with(sampled, grouped, {"--head", "pruned"}));
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("exact for greedy decoding only"), std::string::npos) << refused.err;

  const auto no_groups = run_cli(with(greedy, base, {"--head", "two-stage"}));
  EXPECT_NE(no_groups.exit_code, 0);
  EXPECT_NE(no_groups.err.find("mcullm head --write"), std::string::npos) << no_groups.err;
  const auto too_many = run_cli(with(greedy, grouped, {"--head", "two-stage", "--head-top", "17"}));
  EXPECT_NE(too_many.exit_code, 0);
  EXPECT_NE(too_many.err.find("16 groups"), std::string::npos) << too_many.err;
  const auto stray = run_cli({"head", "-m", base, "-n", "2", "--default-head", "pruned"});
  EXPECT_NE(stray.exit_code, 0);
  EXPECT_NE(stray.err.find("stored by --write"), std::string::npos) << stray.err;
}

// A router fitted on calibration text and groups in the logit metric (`head --calib-text
// --logit-metric`): stored with the model, read back, and a two-stage head over every group still
// writes the full head's greedy text; the flags refuse what they cannot do.
TEST(CliHead, RouterAndLogitMetricGroupsFromCalibrationText) {
  const std::string base = std::string(MCULLM_SOURCE_DIR) + "/models/tinystories-q4.gguf", dir = test::temp_dir();
  std::string text;
  for (int i = 0; i < 12; ++i)
    text += "Once upon a time, there was a little dog named Max. Max liked to run in the park with his friend Lily. "
            "One day, they found a big red ball under a tree. \"Can we play with it?\" Lily asked. Max wagged his tail.\n";
  test::write_file(dir + "/calib.txt", std::vector<uint8_t>(text.begin(), text.end()));
  const std::string grouped = dir + "/routed.gguf";
  const auto w = run_cli({"head", "-m", base, "-n", "4", "--groups", "16", "--calib-text", dir + "/calib.txt", "--logit-metric",
                          "--write", grouped, "--default-head", "two-stage", "--default-top", "16"});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  EXPECT_NE(w.out.find("16 groups (k-means in the logit metric, routed by the router"), std::string::npos) << w.out;
  const auto stored = run_cli({"head", "-m", grouped, "-n", "4"});
  ASSERT_EQ(stored.exit_code, 0) << stored.err;
  EXPECT_NE(stored.out.find("16 groups (stored in the file, routed by the router)"), std::string::npos) << stored.out;
  const std::vector<std::string> greedy = {"run", "-n", "30", "--temp", "0", "-p", "Once upon a time", "-s", "3", "-m"};
  auto run = [&](const std::string& m) {
    std::vector<std::string> a = greedy;
    a.push_back(m);
    const auto r = run_cli(a);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  };
  EXPECT_EQ(run(grouped), run(base));  // the file's default: two-stage over all 16 groups
  const auto no_calib = run_cli({"head", "-m", base, "-n", "2", "--groups", "8", "--logit-metric"});
  EXPECT_NE(no_calib.exit_code, 0);
  EXPECT_NE(no_calib.err.find("--logit-metric"), std::string::npos) << no_calib.err;
  const auto missing = run_cli({"head", "-m", base, "-n", "2", "--calib-text", dir + "/none.txt"});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("none.txt"), std::string::npos) << missing.err;
}

TEST(CliHead, CalibrationTextNeedsATokenizer) {
  MC_REQUIRE_SHARED();  // the esp32-ai fixture has none: --calib-sampled is its way
  const std::string ple = test::shared_path("models/esp32-ai-ple/ple4096_int4.bin"), dir = test::temp_dir();
  test::write_file(dir + "/c.txt", std::vector<uint8_t>{'h', 'i'});
  const auto r = run_cli({"head", "-m", ple, "-n", "2", "--groups", "8", "--calib-text", dir + "/c.txt"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("tokenizer"), std::string::npos) << r.err;
  const auto ok = run_cli({"head", "-m", ple, "-n", "4", "--groups", "8", "--top", "8", "--calib-sampled", "200"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("two-stage top 8            100.0%"), std::string::npos) << ok.out;
}

}  // namespace
}  // namespace mcullm
