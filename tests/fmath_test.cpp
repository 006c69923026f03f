#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <vector>

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

// The single-precision paths against the double code that defines their values, bit for bit: fixed-seed random
// bit patterns (every magnitude), random values where the models use them, and the floats around each edge of
// the fast paths. tools/check_fmath_exhaustive.cpp checks all 2^32 inputs.
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

std::vector<float> sampled_inputs(float lo, float hi, std::initializer_list<float> edges) {
  std::vector<float> xs;
  uint64_t state = 0x9E3779B97F4A7C15ull;
  const auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(state >> 32);
  };
  for (int i = 0; i < 3000000; ++i) xs.push_back(from_bits(next()));
  for (int i = 0; i < 3000000; ++i) xs.push_back(lo + (hi - lo) * static_cast<float>(next() >> 8) * 0x1p-24f);
  for (float e : edges)
    for (float s : {e, -e})
      for (int32_t d = -20000; d <= 20000; ++d) xs.push_back(from_bits(bits(s) + static_cast<uint32_t>(d)));
  for (uint32_t u = 0; u < 20000; ++u) {  // zeros and subnormals
    xs.push_back(from_bits(u));
    xs.push_back(from_bits(u | 0x80000000u));
  }
  for (float x : {INFINITY, -INFINITY, NAN, -NAN, 0.0f, -0.0f}) xs.push_back(x);
  return xs;
}

template <typename Fn, typename Ref>
void expect_same_bits(const std::vector<float>& xs, Fn fn, Ref ref) {
  int64_t mismatches = 0;
  for (float x : xs) {
    const float got = fn(x), want = ref(x);
    const bool same = x != x ? got != got : bits(got) == bits(want);
    if (!same && ++mismatches <= 10) ADD_FAILURE() << std::hexfloat << x << ": " << got << ", want " << want;
  }
  EXPECT_EQ(mismatches, 0) << "of " << xs.size();
}

TEST(Fmath, ExpfRoundedIsTheDoubleExpRounded) {
  const auto xs = sampled_inputs(-110.0f, 90.0f, {1.0f, 0x1p-25f, 0x1p-24f, 87.0f, 87.33654f, 88.0f, 88.72284f,
                                                   89.0f, 103.97208f, 104.0f, 0.6931472f, 0.0054152f});
  expect_same_bits(xs, mc_expf_rounded, [](float x) { return static_cast<float>(mc_exp(static_cast<double>(x))); });
}

TEST(Fmath, ErffIsItsDoubleDefinition) {
  const auto xs = sampled_inputs(-5.0f, 5.0f, {0x1.a00002p-49f, 2.66e-8f, 0x1p-13f, 0.01f, 0.5f, 1.0f, 2.0f,
                                                3.5f, 0x1.f5a88ap1f});
  expect_same_bits(xs, mc_erff, mc_erff_double);
}

}  // namespace
}  // namespace mcullm
