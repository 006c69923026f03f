// Attention, softmax and SwiGLU kernels: the AVX2 table equals the reference bit for bit.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/fmath.h"
#include "kernels/kernels.h"
#include "test_support.h"

namespace mcullm {
namespace {

struct Rng {
  uint64_t s = 0x9E3779B97F4A7C15ull;
  float uniform(float lo, float hi) {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    return lo + (hi - lo) * static_cast<float>(s >> 40) / static_cast<float>(1ull << 24);
  }
};

const KernelSet* avx2_or_skip() { return kernels_avx2(); }

::testing::AssertionResult same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < a.size(); ++i) {
    uint32_t x, y;
    std::memcpy(&x, &a[i], 4);
    std::memcpy(&y, &b[i], 4);
    if (x != y) return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << b[i];
  }
  return ::testing::AssertionSuccess();
}

TEST(AttentionKernels, ScoresAndValuesMatchReferenceOverHeadSizesAndLengths) {
  const KernelSet* avx2 = avx2_or_skip();
  if (!avx2) MCULLM_SKIP_OR_FAIL("AVX2", "no AVX2 on this CPU");
  Rng rng;
  for (int hs : {1, 2, 3, 4, 6, 7, 8, 9, 12, 15, 16, 17, 24, 31, 32, 33, 64, 80, 128}) {
    for (int n : {1, 2, 5, 17, 64}) {
      const size_t stride = static_cast<size_t>(hs) * 3 + 5;  // GQA-like rows with other heads between
      std::vector<float> keys(stride * n), values(stride * n), q(hs);
      for (float& v : keys) v = rng.uniform(-3, 3);
      for (float& v : values) v = rng.uniform(-3, 3);
      for (float& v : q) v = rng.uniform(-3, 3);
      keys[0] = -0.0f;
      std::vector<float> s_ref(n), s_avx(n);
      kernels_ref().attn_scores(q.data(), keys.data() + 2, stride, n, hs, std::sqrt(static_cast<float>(hs)), s_ref.data());
      avx2->attn_scores(q.data(), keys.data() + 2, stride, n, hs, std::sqrt(static_cast<float>(hs)), s_avx.data());
      ASSERT_TRUE(same_bits(s_ref, s_avx)) << "hs " << hs << " n " << n;
      // scores equal the plain dot product definition
      for (int t = 0; t < n; ++t) {
        double want = 0;
        for (int i = 0; i < hs; ++i) want += static_cast<double>(q[i]) * keys[2 + t * stride + i];
        EXPECT_NEAR(s_ref[t], want / std::sqrt(static_cast<double>(hs)), 1e-4 * (1 + std::fabs(want)));
      }
      std::vector<float> att(n);
      for (float& v : att) v = rng.uniform(0, 1);
      std::vector<float> o_ref(hs), o_avx(hs);
      kernels_ref().attn_values(att.data(), values.data() + 1, stride, n, hs, o_ref.data());
      avx2->attn_values(att.data(), values.data() + 1, stride, n, hs, o_avx.data());
      ASSERT_TRUE(same_bits(o_ref, o_avx)) << "hs " << hs << " n " << n;
    }
  }
}

TEST(AttentionKernels, SoftmaxMatchesReferenceIncludingExtremes) {
  const KernelSet* avx2 = avx2_or_skip();
  if (!avx2) MCULLM_SKIP_OR_FAIL("AVX2", "no AVX2 on this CPU");
  Rng rng;
  for (int n : {1, 2, 7, 8, 9, 15, 16, 17, 100, 512, 1000}) {
    for (float spread : {0.1f, 10.0f, 200.0f}) {
      std::vector<float> a(n);
      for (float& v : a) v = rng.uniform(-spread, spread);
      if (n > 3) { a[1] = -0.0f; a[2] = 0.0f; a[3] = -std::numeric_limits<float>::infinity(); }
      std::vector<float> b = a;
      kernels_ref().softmax(a.data(), n);
      avx2->softmax(b.data(), n);
      ASSERT_TRUE(same_bits(a, b)) << "n " << n << " spread " << spread;
      double sum = 0;
      for (float v : a) sum += v;
      EXPECT_NEAR(sum, 1.0, 1e-5);
    }
  }
}

TEST(AttentionKernels, SwiGluMatchesReferenceAndDefinition) {
  const KernelSet* avx2 = avx2_or_skip();
  if (!avx2) MCULLM_SKIP_OR_FAIL("AVX2", "no AVX2 on this CPU");
  Rng rng;
  const float inf = std::numeric_limits<float>::infinity();
  for (int n : {1, 7, 8, 9, 172, 1000}) {
    std::vector<float> g(n), u(n);
    for (float& v : g) v = rng.uniform(-120, 120);
    for (float& v : u) v = rng.uniform(-2, 2);
    if (n > 4) { g[0] = -0.0f; g[1] = 89.0f; g[2] = -105.0f; g[3] = inf; g[4] = 1e-40f; }
    std::vector<float> a = g, b = g;
    kernels_ref().silu_mul(a.data(), u.data(), n);
    avx2->silu_mul(b.data(), u.data(), n);
    ASSERT_TRUE(same_bits(a, b)) << "n " << n;
    for (int i = 0; i < n; ++i)
      if (std::isfinite(g[i]) && std::fabs(g[i]) < 80)
        EXPECT_NEAR(a[i], g[i] / (1 + std::exp(-static_cast<double>(g[i]))) * u[i], 1e-5 * (1 + std::fabs(g[i] * u[i])));
  }
}

// The vector exp inside softmax equals mc_expf on every float of a dense sweep, the specials included.
TEST(AttentionKernels, VectorExpEqualsScalarExpEverywhere) {
  const KernelSet* avx2 = avx2_or_skip();
  if (!avx2) MCULLM_SKIP_OR_FAIL("AVX2", "no AVX2 on this CPU");
  // softmax of [x, -inf...] puts exp(x - x) = 1 in lane 0; use exp via silu instead: silu(g) * 1 =
  // g / (1 + exp(-g)); equal bits of silu over a sweep pin down the vector exp's bits.
  std::vector<float> g;
  for (uint32_t bits = 0; bits < 0xFFFFFFFFu - 4093; bits += 4093) {
    float f;
    std::memcpy(&f, &bits, 4);
    if (!std::isnan(f)) g.push_back(f);
  }
  std::vector<float> ones(g.size(), 1.0f), a = g, b = g;
  kernels_ref().silu_mul(a.data(), ones.data(), static_cast<int>(g.size()));
  avx2->silu_mul(b.data(), ones.data(), static_cast<int>(g.size()));
  EXPECT_TRUE(same_bits(a, b));
  for (size_t i = 0; i < g.size(); i += 977) EXPECT_EQ(a[i], mc_silu(g[i]) * 1.0f);
}

}  // namespace
}  // namespace mcullm
