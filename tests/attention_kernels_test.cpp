// Attention, softmax and SwiGLU: the reference computes the definitions (every table against the
// reference bit for bit: kernel_conformance_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/fmath.h"
#include "kernels/kernels.h"

namespace mcullm {
namespace {

struct Rng {
  uint64_t s = 0x9E3779B97F4A7C15ull;
  float uniform(float lo, float hi) {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    return lo + (hi - lo) * static_cast<float>(s >> 40) / static_cast<float>(1ull << 24);
  }
};

TEST(AttentionKernels, ScoresAreTheScaledDotProduct) {
  Rng rng;
  for (int hs : {1, 2, 3, 4, 6, 7, 8, 9, 12, 15, 16, 17, 24, 31, 32, 33, 64, 80, 128}) {
    for (int n : {1, 2, 5, 17, 64}) {
      const size_t stride = static_cast<size_t>(hs) * 3 + 5;  // GQA-like rows with other heads between
      std::vector<float> keys(stride * n), q(hs);
      for (float& v : keys) v = rng.uniform(-3, 3);
      for (float& v : q) v = rng.uniform(-3, 3);
      keys[0] = -0.0f;
      std::vector<float> s_ref(n);
      kernels_ref().attn_scores(q.data(), keys.data() + 2, stride, n, hs, std::sqrt(static_cast<float>(hs)), s_ref.data());
      for (int t = 0; t < n; ++t) {
        double want = 0;
        for (int i = 0; i < hs; ++i) want += static_cast<double>(q[i]) * keys[2 + t * stride + i];
        EXPECT_NEAR(s_ref[t], want / std::sqrt(static_cast<double>(hs)), 1e-4 * (1 + std::fabs(want)));
      }
    }
  }
}

TEST(AttentionKernels, SoftmaxSumsToOneIncludingExtremes) {
  Rng rng;
  for (int n : {1, 2, 7, 8, 9, 15, 16, 17, 100, 512, 1000}) {
    for (float spread : {0.1f, 10.0f, 200.0f}) {
      std::vector<float> a(n);
      for (float& v : a) v = rng.uniform(-spread, spread);
      if (n > 3) { a[1] = -0.0f; a[2] = 0.0f; a[3] = -std::numeric_limits<float>::infinity(); }
      kernels_ref().softmax(a.data(), n);
      double sum = 0;
      for (float v : a) sum += v;
      EXPECT_NEAR(sum, 1.0, 1e-5) << "n " << n << " spread " << spread;
    }
  }
}

TEST(AttentionKernels, SwiGluFollowsTheDefinition) {
  Rng rng;
  const float inf = std::numeric_limits<float>::infinity();
  for (int n : {1, 7, 8, 9, 172, 1000}) {
    std::vector<float> g(n), u(n);
    for (float& v : g) v = rng.uniform(-120, 120);
    for (float& v : u) v = rng.uniform(-2, 2);
    if (n > 4) { g[0] = -0.0f; g[1] = 89.0f; g[2] = -105.0f; g[3] = inf; g[4] = 1e-40f; }
    std::vector<float> a = g;
    kernels_ref().silu_mul(a.data(), u.data(), n);
    for (int i = 0; i < n; ++i)
      if (std::isfinite(g[i]) && std::fabs(g[i]) < 80)
        EXPECT_NEAR(a[i], g[i] / (1 + std::exp(-static_cast<double>(g[i]))) * u[i], 1e-5 * (1 + std::fabs(g[i] * u[i])));
  }
}

// The reference SwiGLU is mc_silu(g) * up on a sweep of floats, the specials included.
TEST(AttentionKernels, SwiGluIsScalarSiluEverywhere) {
  std::vector<float> g;
  const uint32_t step = 4093 * 977;
  for (uint32_t bits = 0; bits < 0xFFFFFFFFu - step; bits += step) {
    float f;
    std::memcpy(&f, &bits, 4);
    if (!std::isnan(f)) g.push_back(f);
  }
  std::vector<float> ones(g.size(), 1.0f), a = g;
  kernels_ref().silu_mul(a.data(), ones.data(), static_cast<int>(g.size()));
  for (size_t i = 0; i < g.size(); ++i) {
    const float want = mc_silu(g[i]) * 1.0f;
    EXPECT_EQ(std::memcmp(&a[i], &want, 4), 0) << g[i];
  }
}

}  // namespace
}  // namespace mcullm
