// Attention, softmax and SwiGLU: the reference computes the definitions (every table against the
// reference bit for bit: kernel_conformance_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/fmath.h"
#include "kernel_test_data.h"
#include "kernels/kernels.h"

namespace mcullm {
namespace {

using test::Rng;

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
  for (int n : {1, 7, 8, 9, 172, 1000}) {
    std::vector<float> g, u;
    test::swiglu_inputs(rng, n, &g, &u);
    std::vector<float> a = g;
    kernels_ref().silu_mul(a.data(), u.data(), n);
    for (int i = 0; i < n; ++i) {
      if (!std::isfinite(g[i]) || std::fabs(g[i]) >= 80) continue;
      EXPECT_NEAR(a[i], g[i] / (1 + std::exp(-static_cast<double>(g[i]))) * u[i], 1e-5 * (1 + std::fabs(g[i] * u[i])));
    }
  }
}

// The reference SwiGLU is mc_silu(g) * up on a sweep of floats, the specials included.
TEST(AttentionKernels, SwiGluIsScalarSiluEverywhere) {
  const std::vector<float> g = test::float_sweep(4093 * 977);
  std::vector<float> ones(g.size(), 1.0f), a = g;
  kernels_ref().silu_mul(a.data(), ones.data(), static_cast<int>(g.size()));
  for (size_t i = 0; i < g.size(); ++i) {
    const float want = mc_silu(g[i]) * 1.0f;
    EXPECT_EQ(std::memcmp(&a[i], &want, 4), 0) << g[i];
  }
}

}  // namespace
}  // namespace mcullm
