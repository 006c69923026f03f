// Quality of the bitllama2.c ternary models on held-out text, against the figures in
// ../shared/FACTS.md section 2 (first 20 chunks of tinystories_val_head794k.txt): 1M 1.008 and
// 3M 0.894 bits per byte. Slow (about 20 s in Release), so left out of the sanitizer run.
#include <cstdlib>

#include "test_support.h"

namespace mcullm {
namespace {

double eval_bits_per_byte(const std::string& model) {
  const auto r = test::run_cli({"eval", "-m", test::shared_path("models/bitnet-tinystories/" + model), "-z",
                                test::shared_path("models/stories260K/tok512.bin"), "-f",
                                test::shared_path("data/tinystories_val_head794k.txt"), "--chunks", "20", "-t", "1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const size_t at = r.out.find("bits/byte ");
  EXPECT_NE(at, std::string::npos) << r.out;
  return at == std::string::npos ? 0.0 : std::strtod(r.out.c_str() + at + 10, nullptr);
}

TEST(SlowBitnetEval, BitsPerByteMatchFacts) {
  MC_REQUIRE_SHARED();
  EXPECT_NEAR(eval_bits_per_byte("bit1M_msb.bin"), 1.008, 0.001);
  EXPECT_NEAR(eval_bits_per_byte("bit3M_msb.bin"), 0.894, 0.001);
}

}  // namespace
}  // namespace mcullm
