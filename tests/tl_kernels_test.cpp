// TL1 / TL2 LUT kernels (kernels.h "LUT kernels"): the reference against a plain integer dot product
// of the unpacked weights, and every registered table with its own LUT kernels (avx2, avx512, neon) bit for bit
// against the reference on a shape sweep (pair tails, K below one block, odd tile counts, each TL1 bm),
// 1 and 2 threads, batch 1 and > 1, per-token and per-tensor activation scales. Also the per-tensor
// cache, the applicability rule, the workspace size and activation quantization.
// Uses only the core library, the host thread pool and gtest, so that the aarch64 cross build
// (tests/cross) runs it under qemu-aarch64 too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/thread_pool_host.h"
#include "kernel_test_data.h"
#include "kernels/kernels.h"
#include "test_support.h"

namespace mcullm {
namespace {

struct Shape {
  TlType type;
  int M, K, BM, BK, bm;
};

const Shape kShapes[] = {
    {TlType::kTL2, 32, 24, 32, 24, 32},     {TlType::kTL2, 64, 80, 32, 48, 32},    // 48 triples + 32 pairs
    {TlType::kTL2, 96, 32, 96, 48, 32},     {TlType::kTL2, 96, 64, 32, 96, 32},    // pairs only
    {TlType::kTL2, 288, 768, 96, 96, 32},   {TlType::kTL2, 160, 1056, 160, 240, 32},
    {TlType::kTL2, 256, 2560, 128, 192, 32}, {TlType::kTL2, 192, 120, 64, 24, 32},
    {TlType::kTL1, 16, 16, 16, 16, 16},     {TlType::kTL1, 96, 72, 32, 8, 32},     {TlType::kTL1, 192, 256, 64, 64, 64},
    {TlType::kTL1, 768, 768, 256, 128, 32}, {TlType::kTL1, 192, 96, 64, 32, 16},   {TlType::kTL1, 64, 512, 64, 256, 64},
};

// The registered tables this CPU runs, once per distinct pair of LUT kernels (avxvnni and amx have
// avx2's and avx512's; a table with the reference's is left out).
std::vector<const KernelSet*> variants() {
  std::vector<const KernelSet*> v;
  for (const KernelSet* k : test::runnable_tables()) {
    bool seen = k->tl_lut_build == kernels_ref().tl_lut_build && k->tl_matmul == kernels_ref().tl_matmul;
    for (const KernelSet* o : v) seen = seen || (k->tl_lut_build == o->tl_lut_build && k->tl_matmul == o->tl_matmul);
    if (!seen) v.push_back(k);
  }
  return v;
}

// A packed tensor (+ scale) built from random weights; zero_share of them 0.
struct Packed {
  std::vector<int8_t> w;
  std::vector<uint8_t> bytes;
  TlTensor t;
};

Packed make(const Shape& s, uint32_t seed, float scale = 0.75f) {
  Packed p;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-1, 1);
  p.w.resize(static_cast<size_t>(s.M) * s.K);
  for (auto& v : p.w) v = static_cast<int8_t>(d(rng));
  TlTiling t;
  t.BM = s.BM;
  t.BK = s.BK;
  t.bm = s.bm;
  p.bytes.assign(tl_tensor_bytes(s.type, s.M, s.K, t), 0);
  EXPECT_TRUE(tl_pack(s.type, t, p.w.data(), s.M, s.K, p.bytes.data()));
  std::memcpy(p.bytes.data() + tl_scale_offset(s.type, s.M, s.K, t), &scale, 4);
  EXPECT_TRUE(tl_tensor_init(&p.t, s.type, p.bytes.data(), p.bytes.size(), s.M, s.K, t));
  return p;
}

std::vector<float> activations(int n, int K, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n) * K);
  for (auto& v : x) v = d(rng);
  if (n > 1) x[K + 3] = 40.0f;  // one outlier token: per-tensor and per-token scales differ
  return x;
}

std::vector<float> run(const KernelSet& k, const TlTensor& t, const std::vector<float>& x, int n, int threads,
                       TlActQuant mode) {
  std::vector<float> y(static_cast<size_t>(n) * t.rows, -999.0f);
  std::vector<uint8_t> work(tl_workspace_bytes(t, n));
  HostThreadPool pool(threads);
  EXPECT_TRUE(tl_mul_mat(k, t, x.data(), n, y.data(), work.data(), work.size(), &pool, mode));
  return y;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(TlKernels, ReferenceEqualsIntegerDotOfUnpackedWeights) {
  uint32_t seed = 10;
  for (const Shape& s : kShapes) {
    const Packed p = make(s, seed++);
    for (int n : {1, 3}) {
      for (TlActQuant mode : {TlActQuant::kPerToken, TlActQuant::kPerTensor}) {
        const std::vector<float> x = activations(n, s.K, seed++);
        std::vector<int8_t> q(static_cast<size_t>(n) * s.K);
        std::vector<float> inv(n);
        tl_quantize_activations(x.data(), n, s.K, mode, q.data(), s.K, inv.data());
        const std::vector<float> y = run(kernels_ref(), p.t, x, n, 1, mode);
        for (int t = 0; t < n; ++t)
          for (int r = 0; r < s.M; ++r) {
            int64_t isum = 0;
            for (int j = 0; j < s.K; ++j) isum += p.w[static_cast<size_t>(r) * s.K + j] * q[static_cast<size_t>(t) * s.K + j];
            const float want = static_cast<float>(isum) * (p.t.scale * inv[t]);
            ASSERT_EQ(y[static_cast<size_t>(t) * s.M + r], want)
                << tl_type_name(s.type) << " " << s.M << "x" << s.K << " token " << t << " row " << r;
          }
      }
    }
  }
}

// matvec() on a TL MatRef (the scalar weight-by-weight fallback, any row range): tl_mul_mat's bits
// with int8 input; tl_weight agrees with tl_unpack.
TEST(TlKernels, MatvecFallbackEqualsLutKernels) {
  uint32_t seed = 50;
  for (const Shape& s : kShapes) {
    const Packed p = make(s, seed++);
    for (int r = 0; r < s.M; r += 7)
      for (int c = 0; c < s.K; c += 5)
        ASSERT_EQ(tl_weight(s.type, p.t.tiling, p.bytes.data(), s.M, s.K, r, c), p.w[static_cast<size_t>(r) * s.K + c]);
    const std::vector<float> x = activations(1, s.K, seed++);
    const std::vector<float> want = run(kernels_best(), p.t, x, 1, 1, TlActQuant::kPerToken);
    std::vector<int8_t> q(static_cast<size_t>(s.K));
    float inv = 0;
    tl_quantize_activations(x.data(), 1, s.K, TlActQuant::kPerToken, q.data(), s.K, &inv);
    MatRef m;
    m.type = s.type == TlType::kTL1 ? DType::kTL1 : DType::kTL2;
    m.data = p.bytes.data();
    m.rows = s.M;
    m.cols = s.K;
    m.scale = p.t.scale;
    m.tl = &p.t;
    ActVec a;
    a.q = q.data();
    a.scales = &inv;
    std::vector<float> y(static_cast<size_t>(s.M), -999.0f);
    matvec(kernels_ref(), m, a, y.data(), 0, s.M / 2);
    matvec(kernels_best(), m, a, y.data(), s.M / 2, s.M);
    EXPECT_TRUE(same_bits(y, want)) << tl_type_name(s.type) << " " << s.M << "x" << s.K;
  }
}

TEST(TlKernels, EveryVariantEqualsReferenceBitForBit) {
#if defined(__aarch64__)
  ASSERT_NE(kernels_neon(), nullptr) << "the aarch64 build must carry the NEON kernel";
  EXPECT_EQ(&kernels_best(), kernels_neon());
#endif
  const auto vs = variants();
  if (vs.empty()) MCULLM_SKIP_OR_FAIL("AVX2", "no SIMD LUT kernel on this CPU/build");
  uint32_t seed = 100;
  for (const Shape& s : kShapes) {
    const Packed p = make(s, seed++);
    for (int n : {1, 2, 5}) {
      const std::vector<float> x = activations(n, s.K, seed++);
      for (TlActQuant mode : {TlActQuant::kPerToken, TlActQuant::kPerTensor}) {
        const std::vector<float> want = run(kernels_ref(), p.t, x, n, 1, mode);
        for (const KernelSet* k : vs)
          for (int threads : {1, 2})
            EXPECT_TRUE(same_bits(run(*k, p.t, x, n, threads, mode), want))
                << k->name << " " << tl_type_name(s.type) << " " << s.M << "x" << s.K << " BM " << s.BM << " BK " << s.BK
                << " bm " << s.bm << " n " << n << " threads " << threads;
      }
    }
  }
}

TEST(TlKernels, EveryVariantBuildsTheReferenceLut) {
  uint32_t seed = 300;
  for (const Shape& s : kShapes) {
    const Packed p = make(s, seed++);
    const std::vector<float> x = activations(1, s.K, seed++);
    std::vector<int8_t> q(s.K);
    float inv = 0;
    tl_quantize_activations(x.data(), 1, s.K, TlActQuant::kPerToken, q.data(), s.K, &inv);
    q[0] = -128;  // the int8 extreme too (the per-tensor rule never makes it, a caller might)
    std::vector<uint8_t> want(tl_lut_bytes(p.t)), got(want.size());
    kernels_ref().tl_lut_build(p.t, q.data(), want.data());
    for (const KernelSet* k : variants()) {
      std::fill(got.begin(), got.end(), 0xCD);
      k->tl_lut_build(p.t, q.data(), got.data());
      EXPECT_EQ(got, want) << k->name << " " << tl_type_name(s.type) << " " << s.M << "x" << s.K;
    }
  }
}

TEST(TlKernels, ExtremeActivationsStayExact) {
  // All weights -1 and activations at +-127: the largest int16 block sums the tilings allow.
  for (const Shape& s : kShapes) {
    Packed p = make(s, 1);
    std::fill(p.w.begin(), p.w.end(), static_cast<int8_t>(-1));
    ASSERT_TRUE(tl_pack(s.type, p.t.tiling, p.w.data(), s.M, s.K, p.bytes.data()));
    std::vector<float> x(s.K, -3.0f);
    const std::vector<float> want = run(kernels_ref(), p.t, x, 1, 1, TlActQuant::kPerToken);
    const float act_scale = static_cast<float>(127.0 / 3.0);
    const float inv = static_cast<float>(1.0 / static_cast<double>(act_scale));
    EXPECT_EQ(want[0], static_cast<float>(127 * s.K) * (p.t.scale * inv));
    for (const KernelSet* k : variants())
      EXPECT_TRUE(same_bits(run(*k, p.t, x, 1, 2, TlActQuant::kPerToken), want)) << k->name << " " << s.M << "x" << s.K;
  }
}

TEST(TlKernels, ActivationQuantization) {
  const float x[6] = {0.5f, -1.0f, 0.25f, 2.0f, -4.0f, 1.0f};
  int8_t q[6];
  float inv[2];
  tl_quantize_activations(x, 2, 3, TlActQuant::kPerToken, q, 3, inv);
  EXPECT_EQ(q[0], 64);   // 0.5 * 127 = 63.5 -> 64 (half away from zero)
  EXPECT_EQ(q[1], -127);
  EXPECT_EQ(q[4], -127);
  EXPECT_EQ(q[3], 64);
  EXPECT_EQ(inv[0], static_cast<float>(1.0 / static_cast<double>(static_cast<float>(127.0))));
  tl_quantize_activations(x, 2, 3, TlActQuant::kPerTensor, q, 3, inv);
  EXPECT_EQ(q[1], -32);  // -1 * 127 / 4 = -31.75
  EXPECT_EQ(q[4], -127);
  EXPECT_EQ(inv[0], inv[1]);
  const float bad[4] = {1.0f, NAN, 0.0f, 0.0f};
  int8_t qb[4] = {9, 9, 9, 9};
  tl_quantize_activations(bad, 2, 2, TlActQuant::kPerToken, qb, 2, inv);
  EXPECT_EQ(qb[0], 0);
  EXPECT_EQ(inv[0], 0.0f);
  EXPECT_EQ(qb[2], 0);  // zeros: max |x| floored at 1e-5, finite scale
  EXPECT_GT(inv[1], 0.0f);
  tl_quantize_activations(bad, 2, 2, TlActQuant::kPerTensor, qb, 2, inv);
  EXPECT_EQ(inv[1], 0.0f);  // one non-finite value poisons the shared scale
}

TEST(TlKernels, TensorCacheApplicabilityAndWorkspace) {
  const Shape s = {TlType::kTL2, 64, 80, 32, 48, 32};
  Packed p = make(s, 5);
  TlTensor t = p.t;
  EXPECT_TRUE(t.ready);
  EXPECT_EQ(t.scale, 0.75f);
  EXPECT_EQ(t.three_k, 48);
  EXPECT_NE(t.pairs, nullptr);
  // Idempotent init; another tensor on a ready cache is refused; free is idempotent.
  EXPECT_TRUE(tl_tensor_init(&t, s.type, p.bytes.data(), p.bytes.size(), s.M, s.K, p.t.tiling));
  EXPECT_TRUE(tl_tensor_init(&t, s.type, p.bytes.data(), p.bytes.size() + 64, s.M, s.K, p.t.tiling));
  EXPECT_FALSE(tl_tensor_init(&t, s.type, p.bytes.data() + 1, p.bytes.size() - 1, s.M, s.K, p.t.tiling));
  tl_tensor_free(&t);
  tl_tensor_free(&t);
  EXPECT_FALSE(t.ready);
  EXPECT_FALSE(tl_tensor_init(&t, s.type, p.bytes.data(), p.bytes.size() - 1, s.M, s.K, p.t.tiling));  // truncated
  EXPECT_FALSE(tl_tensor_init(&t, s.type, nullptr, p.bytes.size(), s.M, s.K, p.t.tiling));
  EXPECT_FALSE(tl_tensor_init(&t, s.type, p.bytes.data(), p.bytes.size(), s.M + 1, s.K, p.t.tiling));
  EXPECT_FALSE(tl_tensor_init(nullptr, s.type, p.bytes.data(), p.bytes.size(), s.M, s.K, p.t.tiling));
  EXPECT_FALSE(t.ready);
  EXPECT_EQ(tl_workspace_bytes(t, 1), 0u);  // not ready
  // Workspace: rounded to 64, grows with tokens, a smaller buffer is refused.
  const size_t w1 = tl_workspace_bytes(p.t, 1), w3 = tl_workspace_bytes(p.t, 3);
  EXPECT_EQ(w1 % 64, 0u);
  EXPECT_EQ(w3 % 64, 0u);
  EXPECT_GE(w1, 80u + tl_lut_bytes(p.t) + 4);
  EXPECT_GT(w3, w1);
  EXPECT_EQ(tl_lut_bytes(p.t), (48u / 3 + 32 / 2) * 32);
  std::vector<uint8_t> work(w1 - 1);
  std::vector<float> x(s.K, 1.0f), y(s.M, 5.0f);
  EXPECT_FALSE(tl_mul_mat(kernels_ref(), p.t, x.data(), 1, y.data(), work.data(), work.size(), nullptr));
  EXPECT_EQ(y[0], 5.0f);
  EXPECT_FALSE(tl_mul_mat(kernels_ref(), t, x.data(), 1, y.data(), work.data(), work.size(), nullptr));
  // bitnet.cpp's rule: f32 in and out; TL1 one column only.
  EXPECT_TRUE(tl_applicable(TlType::kTL2, DType::kF32, DType::kF32, 8));
  EXPECT_TRUE(tl_applicable(TlType::kTL1, DType::kF32, DType::kF32, 1));
  EXPECT_FALSE(tl_applicable(TlType::kTL1, DType::kF32, DType::kF32, 2));
  EXPECT_FALSE(tl_applicable(TlType::kTL2, DType::kF16, DType::kF32, 1));
  EXPECT_FALSE(tl_applicable(TlType::kTL2, DType::kF32, DType::kF16, 1));
  EXPECT_FALSE(tl_applicable(TlType::kTL2, DType::kF32, DType::kF32, 0));
}

}  // namespace
}  // namespace mcullm
