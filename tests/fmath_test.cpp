#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/fmath.h"
#include "test_support.h"

namespace mcullm {
namespace {

// Distance in units in the last place between two finite floats.
int64_t ulp_distance(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  if (ia < 0) ia = INT32_MIN - ia;
  if (ib < 0) ib = INT32_MIN - ib;
  return std::llabs(static_cast<int64_t>(ia) - ib);
}

TEST(Fmath, ExpMatchesLibmWithinTwoUlp) {
  int64_t worst = 0;
  for (float x = -103.0f; x < 88.7f; x += 0.0137f) {
    const float want = static_cast<float>(std::exp(static_cast<double>(x)));
    if (want < 1.2e-38f) continue;  // subnormal results: checked separately
    worst = std::max(worst, ulp_distance(mc_expf(x), want));
  }
  EXPECT_LE(worst, 2);
}

TEST(Fmath, ExpEdges) {
  EXPECT_EQ(mc_expf(0.0f), 1.0f);
  EXPECT_TRUE(std::isinf(mc_expf(89.0f)));
  EXPECT_EQ(mc_expf(-104.0f), 0.0f);
  EXPECT_TRUE(std::isnan(mc_expf(NAN)));
  EXPECT_NEAR(mc_expf(-100.0f), std::exp(-100.0), 1e-44);  // subnormal result
  EXPECT_EQ(mc_expf(-INFINITY), 0.0f);
}

TEST(Fmath, LogMatchesLibm) {
  int64_t worst = 0;
  for (float x = 1e-30f; x < 1e30f; x *= 1.0173f) worst = std::max(worst, ulp_distance(mc_logf(x), std::log(static_cast<double>(x))));
  EXPECT_LE(worst, 1);
  EXPECT_TRUE(std::isinf(mc_logf(0.0f)));
  EXPECT_TRUE(std::isnan(mc_logf(-1.0f)));
  EXPECT_NEAR(mc_log(1e-310), std::log(1e-310), 1e-12);
}

TEST(Fmath, DoubleExpAndSinCos) {
  for (double x = -700; x < 700; x += 0.731) EXPECT_NEAR(mc_exp(x) / std::exp(x), 1.0, 1e-15) << x;
  for (double x = -5000; x < 5000; x += 0.377) {
    double s, c;
    mc_sincos(x, &s, &c);
    EXPECT_NEAR(s, std::sin(x), 1e-15) << x;
    EXPECT_NEAR(c, std::cos(x), 1e-15) << x;
  }
}

TEST(Fmath, ActivationsMatchTheirDefinitions) {
  for (float x = -20.0f; x < 20.0f; x += 0.01f) {
    EXPECT_NEAR(mc_silu(x), x / (1.0 + std::exp(-static_cast<double>(x))), 1e-6 * (1 + std::fabs(x)));
    EXPECT_NEAR(mc_erff(x), std::erf(static_cast<double>(x)), 2e-7);
    EXPECT_NEAR(mc_tanhf(x), std::tanh(static_cast<double>(x)), 2e-7);
    EXPECT_NEAR(mc_gelu_erf(x), 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))), 1e-6 * (1 + std::fabs(x)));
  }
}

}  // namespace
}  // namespace mcullm
