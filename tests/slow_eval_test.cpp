// `mcullm eval` on the whole of tinystories_val_head794k.txt with stories260K: FACTS.md section 2
// gives 1.6082 nats/token and 1.1420 bits/byte (an independent program). Slow (390k tokens: about a
// minute in Release on an idle core), so left out of the sanitizer run.
#include "test_support.h"

namespace mcullm {
namespace {

TEST(SlowEval, Stories260KWholeFileMatchesFacts) {
  MC_REQUIRE_SHARED();
  const auto r = test::run_cli({"eval", "-m", test::shared_path("models/stories260K/stories260K.bin"), "-f",
                                test::shared_path("data/tinystories_val_head794k.txt"), "-t", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NEAR(std::stod(test::json_raw(r.out, "bits_per_byte")), 1.1420, 0.0001) << r.out;
  EXPECT_NEAR(std::stod(test::json_raw(r.out, "nats_per_token")), 1.6082, 0.0001) << r.out;
  EXPECT_EQ(test::json_raw(r.out, "chunks"), "896");
}

}  // namespace
}  // namespace mcullm
