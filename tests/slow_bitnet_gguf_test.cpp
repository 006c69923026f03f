// bitnet.cpp's dummy 125M I2_S model with the scalar reference kernels (slow: left out of the
// sanitizer run): the same fingerprint as the fast table, 1 and 2 threads, through the CLI.
#include "kernels/kernels.h"
#include "test_support.h"

namespace mcullm {
namespace {

TEST(Bitnet125MSlow, ReferenceAndFastKernelsGiveTheSameFingerprint) {
  MC_REQUIRE_SHARED();
  const std::string model = test::shared_path("models/bitnet-dummy/dummy-bitnet-125m.i2_s.gguf");
  std::string first;
  for (const char* kernels : {"ref", "avx2"}) {
    if (std::string(kernels) == "avx2" && !kernels_avx2()) continue;
    for (const char* threads : {"1", "2"}) {
      const auto r = test::run_cli({"run", "-m", model, "--prompt-ids", "1,15043,3186", "-n", "6", "--temp", "0", "-c", "64",
                                    "--kernels", kernels, "-t", threads, "--fingerprint", "-q"});
      ASSERT_EQ(r.exit_code, 0) << r.err;
      if (first.empty()) first = r.out;
      EXPECT_EQ(r.out, first) << kernels << " " << threads;
    }
  }
}

}  // namespace
}  // namespace mcullm
