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

}  // namespace
}  // namespace mcullm
