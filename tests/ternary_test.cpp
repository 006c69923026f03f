// Ternary packings (quant/ternary.h): known bytes of every layout, round trips and conversions on
// random and adversarial matrices, invalid codes, the GGUF types (incl. bitnet.cpp's I2_S dummy
// file), BitLinear activation quantization, and the i2_s kernels (AVX2 == reference, exactly).
#include "quant/ternary.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "format/gguf.h"
#include "format/gguf_writer_host.h"
#include "load/mapped_file_host.h"
#include "kernels/kernels.h"
#include "quant/blocks.h"
#include "quant/f16.h"
#include "test_support.h"

namespace mcullm {
namespace {

const TernaryLayout kAll[] = {TernaryLayout::kBitllama2cMsb, TernaryLayout::kBitllama2cLsb, TernaryLayout::kCluster2,
                              TernaryLayout::kI2S,           TernaryLayout::kTQ2_0,         TernaryLayout::kTQ1_0};

std::vector<int8_t> random_ternary(size_t n, uint32_t seed, int zero_weight = 1) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-1, 1 + zero_weight - 1);
  std::vector<int8_t> w(n);
  for (auto& v : w) {
    const int r = d(rng);
    v = static_cast<int8_t>(r > 1 ? 0 : r);
  }
  return w;
}

std::vector<uint8_t> pack(TernaryLayout l, const std::vector<int8_t>& w, int cols, const uint16_t* d = nullptr) {
  const size_t rows = w.size() / static_cast<size_t>(cols);
  const size_t rb = ternary_row_bytes(l, cols);
  std::vector<uint8_t> out(rows * rb, 0xEE);
  for (size_t r = 0; r < rows; ++r)
    EXPECT_TRUE(ternary_pack_row(l, w.data() + r * cols, cols, out.data() + r * rb, d)) << ternary_layout_name(l);
  return out;
}

std::vector<int8_t> unpack(TernaryLayout l, const std::vector<uint8_t>& bytes, int rows, int cols) {
  const size_t rb = ternary_row_bytes(l, cols);
  std::vector<int8_t> w(static_cast<size_t>(rows) * cols, 99);
  for (int r = 0; r < rows; ++r)
    EXPECT_TRUE(ternary_unpack_row(l, bytes.data() + r * rb, cols, w.data() + static_cast<size_t>(r) * cols))
        << ternary_layout_name(l);
  return w;
}

TEST(Ternary, Geometry) {
  EXPECT_EQ(ternary_row_bytes(TernaryLayout::kBitllama2cMsb, 128), 32u);
  EXPECT_EQ(ternary_row_bytes(TernaryLayout::kCluster2, 896), 224u);
  EXPECT_EQ(ternary_row_bytes(TernaryLayout::kI2S, 768), 192u);
  EXPECT_EQ(ternary_row_bytes(TernaryLayout::kTQ2_0, 512), 132u);
  EXPECT_EQ(ternary_row_bytes(TernaryLayout::kTQ1_0, 768), 162u);
  for (TernaryLayout l : kAll) {
    EXPECT_FALSE(ternary_row_fits(l, 0)) << ternary_layout_name(l);
    EXPECT_FALSE(ternary_row_fits(l, -4));
    EXPECT_FALSE(ternary_row_fits(l, 6));  // odd shapes are refused, not truncated
    EXPECT_EQ(ternary_row_bytes(l, 6), 0u);
    TernaryLayout back;
    ASSERT_TRUE(ternary_layout_by_name(ternary_layout_name(l), &back));
    EXPECT_EQ(back, l);
  }
  EXPECT_FALSE(ternary_row_fits(TernaryLayout::kI2S, 64));
  EXPECT_FALSE(ternary_row_fits(TernaryLayout::kTQ2_0, 128));
  TernaryLayout l;
  EXPECT_FALSE(ternary_layout_by_name("tl2", &l));
  EXPECT_EQ(ternary_row_scales(TernaryLayout::kTQ1_0, 768), 3);
  EXPECT_EQ(ternary_row_scales(TernaryLayout::kI2S, 768), 0);
}

TEST(Ternary, DTypesHaveGgufIdsAndGeometry) {
  EXPECT_EQ(static_cast<uint32_t>(DType::kTQ1_0), 34u);
  EXPECT_EQ(static_cast<uint32_t>(DType::kTQ2_0), 35u);
  EXPECT_EQ(static_cast<uint32_t>(DType::kI2_S), 36u);
  for (TernaryLayout l : {TernaryLayout::kI2S, TernaryLayout::kTQ2_0, TernaryLayout::kTQ1_0}) {
    DType t;
    ASSERT_TRUE(ternary_layout_dtype(l, &t));
    const DTypeInfo* info = dtype_info(t);
    ASSERT_NE(info, nullptr);
    EXPECT_STREQ(info->name, ternary_layout_name(l));
    EXPECT_EQ(info->block, ternary_unit_weights(l));
    EXPECT_EQ(info->block_bytes, ternary_unit_bytes(l));
    EXPECT_EQ(dtype_row_bytes(t, 768), ternary_row_bytes(l, 768));
    TernaryLayout back;
    ASSERT_TRUE(ternary_dtype_layout(t, &back));
    EXPECT_EQ(back, l);
  }
  EXPECT_EQ(dtype_tensor_bytes(DType::kI2_S, 3072, 768), 3072u * 192 + 32);
  EXPECT_EQ(dtype_tensor_bytes(DType::kTQ2_0, 2, 256), 132u);
  EXPECT_EQ(dtype_tensor_bytes(DType::kI2_S, 2, 100), 0u);
  DType t;
  EXPECT_FALSE(ternary_layout_dtype(TernaryLayout::kBitllama2cMsb, &t));
}

// Known bytes, worked out by hand from each layout's definition.
TEST(Ternary, KnownBytes) {
  const int8_t w4[4] = {1, 0, -1, 0};
  uint8_t b = 0;
  ASSERT_TRUE(ternary_pack_row(TernaryLayout::kBitllama2cMsb, w4, 4, &b));
  EXPECT_EQ(b, 0x4C);  // 01 00 11 00
  ASSERT_TRUE(ternary_pack_row(TernaryLayout::kBitllama2cLsb, w4, 4, &b));
  EXPECT_EQ(b, 0x31);  // 00 11 00 01
  ASSERT_TRUE(ternary_pack_row(TernaryLayout::kCluster2, w4, 4, &b));
  EXPECT_EQ(b, 0x21);  // 00 10 00 01

  std::vector<int8_t> w(256, 0);
  w[0] = 1;
  w[33] = -1;
  std::vector<uint8_t> i2s(64);
  ASSERT_TRUE(ternary_pack_row(TernaryLayout::kI2S, w.data(), 256, i2s.data()));
  EXPECT_EQ(i2s[0], 0x95);  // w0 = +1 -> 10 at bits 7-6, w32, w64, w96 = 0 -> 01
  EXPECT_EQ(i2s[1], 0x45);  // byte 1 holds w1, w33, w65, w97: w33 = -1 -> 00 at bits 5-4
  EXPECT_EQ(i2s[2], 0x55);
  std::vector<uint8_t> tq2(66);
  const uint16_t d = 0x3800;  // 0.5
  ASSERT_TRUE(ternary_pack_row(TernaryLayout::kTQ2_0, w.data(), 256, tq2.data(), &d));
  EXPECT_EQ(tq2[0], 0x56);  // w0 = +1 -> 10 at bits 1-0
  EXPECT_EQ(tq2[1], 0x51);  // byte 1 holds w1, w33, w65, w97: w33 = -1 -> 00 at bits 3-2
  EXPECT_EQ(tq2[2], 0x55);
  EXPECT_EQ(tq2[64] | tq2[65] << 8, 0x3800);
  std::vector<int8_t> zeros(256, 0);
  std::vector<uint8_t> tq1(54);
  ASSERT_TRUE(ternary_pack_row(TernaryLayout::kTQ1_0, zeros.data(), 256, tq1.data()));
  EXPECT_EQ(tq1[0], 128);   // 11111 in base 3 = 121 -> ceil(121 * 256 / 243)
  EXPECT_EQ(tq1[47], 128);
  EXPECT_EQ(tq1[48], 127);  // 1111 -> 40, shifted one trit: 120 -> ceil(120 * 256 / 243)
  EXPECT_EQ(tq1[52] | tq1[53] << 8, 0x3C00);  // default scale 1.0
}

TEST(Ternary, RoundTripsRandomAndAdversarialMatrices) {
  for (TernaryLayout l : kAll) {
    const int unit = ternary_unit_weights(l);
    for (int cols : {unit, 2 * unit, 3 * unit, 768 / unit * unit == 768 ? 768 : 5 * unit}) {
      for (int rows : {1, 3, 7}) {
        const size_t n = static_cast<size_t>(rows) * cols;
        std::vector<std::vector<int8_t>> cases = {random_ternary(n, 1u + cols + rows), random_ternary(n, 7u, 8),
                                                  std::vector<int8_t>(n, 0), std::vector<int8_t>(n, -1),
                                                  std::vector<int8_t>(n, 1)};
        std::vector<int8_t> alt(n);
        for (size_t i = 0; i < n; ++i) alt[i] = static_cast<int8_t>(i % 3 == 0 ? -1 : i % 3 == 1 ? 1 : 0);
        cases.push_back(alt);
        for (const auto& w : cases) {
          const auto bytes = pack(l, w, cols);
          EXPECT_EQ(unpack(l, bytes, rows, cols), w) << ternary_layout_name(l) << " " << rows << "x" << cols;
        }
      }
    }
  }
}

TEST(Ternary, TqBlockScalesRoundTrip) {
  const auto w = random_ternary(512, 5);
  const uint16_t d[2] = {0x3555, 0xBC00};
  for (TernaryLayout l : {TernaryLayout::kTQ1_0, TernaryLayout::kTQ2_0}) {
    std::vector<uint8_t> bytes(ternary_row_bytes(l, 512));
    ASSERT_TRUE(ternary_pack_row(l, w.data(), 512, bytes.data(), d));
    std::vector<int8_t> back(512);
    uint16_t d2[2] = {};
    ASSERT_TRUE(ternary_unpack_row(l, bytes.data(), 512, back.data(), d2));
    EXPECT_EQ(back, w);
    EXPECT_EQ(d2[0], d[0]);
    EXPECT_EQ(d2[1], d[1]);
    DType t;
    ASSERT_TRUE(ternary_layout_dtype(l, &t));
    std::vector<float> f(512);
    ASSERT_TRUE(dequantize_row(t, bytes.data(), f.data(), 512));
    for (int j = 0; j < 512; ++j) EXPECT_EQ(f[j], w[j] * f16_to_f32(d[j / 256])) << j;
    // Unaligned source bytes.
    std::vector<uint8_t> shifted(bytes.size() + 1);
    std::memcpy(shifted.data() + 1, bytes.data(), bytes.size());
    std::vector<float> g(512);
    ASSERT_TRUE(dequantize_row_any(t, shifted.data() + 1, g.data(), 512));
    EXPECT_EQ(f, g);
  }
}

TEST(Ternary, ConvertsBetweenEveryPairOfLayouts) {
  const int cols = 768, rows = 3;
  const auto w = random_ternary(static_cast<size_t>(rows) * cols, 11);
  std::vector<int8_t> scratch(cols);
  for (TernaryLayout from : kAll)
    for (TernaryLayout to : kAll) {
      const auto src = pack(from, w, cols);
      const size_t fb = ternary_row_bytes(from, cols), tb = ternary_row_bytes(to, cols);
      std::vector<uint8_t> dst(rows * tb);
      for (int r = 0; r < rows; ++r)
        ASSERT_TRUE(ternary_convert_row(from, src.data() + r * fb, to, dst.data() + r * tb, cols, scratch.data()));
      EXPECT_EQ(dst, pack(to, w, cols)) << ternary_layout_name(from) << " -> " << ternary_layout_name(to);
    }
  // tq scales survive tq1_0 <-> tq2_0.
  const uint16_t d[3] = {0x3000, 0x3400, 0x3800};
  const auto tq2 = pack(TernaryLayout::kTQ2_0, std::vector<int8_t>(w.begin(), w.begin() + cols), cols, d);
  std::vector<uint8_t> tq1(ternary_row_bytes(TernaryLayout::kTQ1_0, cols));
  ASSERT_TRUE(ternary_convert_row(TernaryLayout::kTQ2_0, tq2.data(), TernaryLayout::kTQ1_0, tq1.data(), cols, scratch.data()));
  EXPECT_EQ(tq1, pack(TernaryLayout::kTQ1_0, std::vector<int8_t>(w.begin(), w.begin() + cols), cols, d));
  // Odd shapes are refused.
  EXPECT_FALSE(ternary_convert_row(TernaryLayout::kCluster2, tq2.data(), TernaryLayout::kI2S, tq1.data(), 132,
                                   scratch.data()));
}

TEST(Ternary, InvalidCodesAndValuesAreRefused) {
  int8_t w[128];
  const uint8_t msb_bad = 0x80, lsb_bad = 0x02, cluster_bad = 0x03;
  EXPECT_FALSE(ternary_unpack_row(TernaryLayout::kBitllama2cMsb, &msb_bad, 4, w));
  EXPECT_FALSE(ternary_unpack_row(TernaryLayout::kBitllama2cLsb, &lsb_bad, 4, w));
  EXPECT_FALSE(ternary_unpack_row(TernaryLayout::kCluster2, &cluster_bad, 4, w));
  std::vector<uint8_t> ff(66, 0xFF);
  EXPECT_FALSE(ternary_unpack_row(TernaryLayout::kI2S, ff.data(), 128, w));
  int8_t w256[256];
  EXPECT_FALSE(ternary_unpack_row(TernaryLayout::kTQ2_0, ff.data(), 256, w256));
  EXPECT_TRUE(ternary_unpack_row(TernaryLayout::kTQ1_0, ff.data(), 256, w256));  // every tq1_0 byte decodes
  for (int8_t v : w256) EXPECT_TRUE(v >= -1 && v <= 1);
  int8_t two[4] = {0, 2, 0, 0};
  uint8_t out;
  for (TernaryLayout l : {TernaryLayout::kBitllama2cMsb, TernaryLayout::kCluster2})
    EXPECT_FALSE(ternary_pack_row(l, two, 4, &out));
}

TEST(Ternary, TqQuantizerFollowsLlamaCppRule) {
  std::vector<float> x(256);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto& v : x) v = nd(rng);
  x[17] = 4.0f;  // amax: d = 4, so only |x| >= 2 become +-1
  for (DType t : {DType::kTQ1_0, DType::kTQ2_0}) {
    std::vector<uint8_t> q(dtype_row_bytes(t, 256));
    ASSERT_TRUE(quantize_row(t, x.data(), q.data(), 256));
    std::vector<float> y(256);
    ASSERT_TRUE(dequantize_row(t, q.data(), y.data(), 256));
    for (int j = 0; j < 256; ++j) {
      const float want = std::fabs(x[j]) >= 2.0f ? (x[j] > 0 ? 4.0f : -4.0f) : 0.0f;
      EXPECT_EQ(y[j], want) << j << " x=" << x[j];
    }
  }
}

TEST(Ternary, BitLinearActivationQuantization) {
  std::vector<float> x = {0.5f, -1.27f, 0.3f, 0.0f, 1.0f, -0.005f};
  int8_t q[6];
  float s = 0;
  quantize_bitlinear(x.data(), 6, q, &s);
  const float want_s = static_cast<float>(1.27 / 127.0);  // 1.27f widened, divided in double
  EXPECT_EQ(s, static_cast<float>(static_cast<double>(1.27f) / 127.0));
  EXPECT_NEAR(s, want_s, 1e-9);
  const float inv = static_cast<float>(1.0 / static_cast<double>(s));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(q[i], static_cast<int8_t>(std::round(x[i] * inv))) << i;
  EXPECT_EQ(q[1], -127);
  // Half-way cases round away from zero: max 127 -> scale 1, x = 2.5 -> 3, -0.5 -> -1.
  std::vector<float> h = {127.0f, 2.5f, -0.5f, 0.49999997f};
  quantize_bitlinear(h.data(), 4, q, &s);
  EXPECT_EQ(s, 1.0f);
  EXPECT_EQ(q[0], 127);
  EXPECT_EQ(q[1], 3);
  EXPECT_EQ(q[2], -1);
  EXPECT_EQ(q[3], 0);
  // A zero vector, and one with an infinity, give zeros instead of undefined casts.
  std::vector<float> z(5, 0.0f);
  quantize_bitlinear(z.data(), 5, q, &s);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(q[i], 0);
  EXPECT_EQ(s, 0.0f);
  z[2] = INFINITY;
  quantize_bitlinear(z.data(), 5, q, &s);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(q[i], 0);
}

// ---- kernels --------------------------------------------------------------------------------------

TEST(TernaryKernels, I2sAvx2EqualsReferenceAndExactSums) {
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> xd(-128, 127);
  for (int cols : {128, 256, 384, 1024, 3072}) {
    for (int rows : {1, 2, 3, 5, 8}) {
      for (int variant = 0; variant < 4; ++variant) {
        const size_t n = static_cast<size_t>(rows) * cols;
        std::vector<int8_t> w = variant == 0 ? random_ternary(n, cols * 7u + rows)
                                : variant == 1 ? std::vector<int8_t>(n, -1)
                                : variant == 2 ? std::vector<int8_t>(n, 1)
                                               : std::vector<int8_t>(n, 0);
        const auto packed = pack(TernaryLayout::kI2S, w, cols);
        std::vector<int8_t> x(cols);
        for (auto& v : x) v = static_cast<int8_t>(variant == 1 ? -128 : xd(rng));
        MatRef m{DType::kI2_S, packed.data(), rows, cols, ternary_row_bytes(TernaryLayout::kI2S, cols)};
        m.scale = 0.0371f;
        const float xs = 0.0123f;
        std::vector<float> ref(rows, NAN), fast(rows, NAN);
        kernels_ref().matvec_i2s(m, x.data(), &xs, ref.data(), 0, rows);
        for (int r = 0; r < rows; ++r) {
          int64_t isum = 0;
          for (int j = 0; j < cols; ++j) isum += w[static_cast<size_t>(r) * cols + j] * x[j];
          EXPECT_EQ(ref[r], static_cast<float>(isum) * (m.scale * xs)) << cols << " row " << r;
        }
        for (const KernelSet* k : {kernels_avx2(), kernels_avx512(), kernels_amx()}) {
          if (!k) continue;
          // Row ranges that start and end anywhere.
          k->matvec_i2s(m, x.data(), &xs, fast.data(), 0, rows);
          EXPECT_EQ(std::memcmp(ref.data(), fast.data(), rows * sizeof(float)), 0) << k->name << " " << cols << "x" << rows;
          if (rows > 2) {
            std::vector<float> part(rows, NAN);
            k->matvec_i2s(m, x.data(), &xs, part.data(), 1, rows - 1);
            for (int r = 1; r < rows - 1; ++r) EXPECT_EQ(part[r], ref[r]);
            EXPECT_TRUE(std::isnan(part[0]));
          }
        }
      }
    }
  }
}

// Batched i2_s (prefill): every table's matmat_i2s, and matmat() routing to it, give per column the
// reference matvec's bits, for column counts around the 4-column step and the AMX 16 / 32-token
// tiles, odd group counts, rows around the 32-row AMX block, row ranges that start anywhere (as the
// second thread's slice) and rows past one L1 block; rows longer than the AMX kernel's stack
// layout (8192) take its VNNI fallback.
TEST(TernaryKernels, MatmatI2sEqualsMatvecPerColumn) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> xd(-128, 127);
  std::uniform_real_distribution<float> sd(0.001f, 0.1f);
  struct Case {
    int cols;
    std::vector<int> rows, ns;
  };
  const Case cases[] = {{128, {1, 5, 33}, {1, 3, 4, 5, 9, 16, 17, 32, 33, 70}},
                        {384, {1, 5, 90}, {1, 4, 9, 15, 31, 48}},
                        {768, {1, 5, 32, 90}, {1, 3, 4, 5, 9, 17, 32, 33}},
                        {8320, {3, 34}, {2, 17}}};
  for (const Case& cs : cases) {
    const int cols = cs.cols;
    for (int rows : cs.rows) {
      const auto w = random_ternary(static_cast<size_t>(rows) * cols, cols + rows);
      const auto packed = pack(TernaryLayout::kI2S, w, cols);
      MatRef m{DType::kI2_S, packed.data(), rows, cols, ternary_row_bytes(TernaryLayout::kI2S, cols)};
      m.scale = 0.0371f;
      for (int n : cs.ns) {
        const size_t xstride = static_cast<size_t>(cols) + 32, ystride = static_cast<size_t>(rows) + 3;
        std::vector<int8_t> x(xstride * n);
        for (auto& v : x) v = static_cast<int8_t>(xd(rng));
        std::vector<float> xs(n);
        for (auto& v : xs) v = sd(rng);
        std::vector<float> want(ystride * n, NAN);
        for (int c = 0; c < n; ++c) kernels_ref().matvec_i2s(m, x.data() + c * xstride, &xs[c], want.data() + c * ystride, 0, rows);
        const int r0 = rows > 2 ? 1 : 0;
        for (const KernelSet* k : {&kernels_ref(), kernels_avx2(), kernels_avx512(), kernels_amx()}) {
          if (!k) continue;
          std::vector<float> got(ystride * n, NAN);
          const int mid = (r0 + rows) / 2;  // two threads' slices
          k->matmat_i2s(m, x.data(), xstride, xs.data(), n, got.data(), ystride, r0, mid);
          k->matmat_i2s(m, x.data(), xstride, xs.data(), n, got.data(), ystride, mid, rows);
          ActMat a;
          a.q = x.data();
          a.q_stride = xstride;
          a.scales = xs.data();
          a.s_stride = 1;
          a.block = cols;
          std::vector<float> routed(ystride * n, NAN);
          matmat(*k, m, a, n, routed.data(), ystride, r0, rows);
          for (int c = 0; c < n; ++c)
            for (int r = 0; r < rows; ++r) {
              const size_t i = c * ystride + r;
              if (r < r0) {
                EXPECT_TRUE(std::isnan(got[i]) && std::isnan(routed[i])) << "row outside the range was written";
                continue;
              }
              EXPECT_EQ(std::memcmp(&got[i], &want[i], 4), 0) << k->name << " " << cols << "x" << rows << " n " << n << " c " << c << " r " << r;
              EXPECT_EQ(std::memcmp(&routed[i], &want[i], 4), 0) << k->name << " routed, c " << c << " r " << r;
            }
        }
      }
    }
  }
}

// Every table's quantize_i8s equals the reference (quant/ternary.h) bit for bit: random vectors of
// odd lengths (SIMD tails), ties at k + 0.5 after scaling, values past the clamp, zeros, denormal-
// sized maxima, and inf / nan anywhere (all-zero output, scale 0).
TEST(TernaryKernels, QuantizeI8sEqualsReference) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> d(-3.0f, 3.0f);
  std::vector<std::vector<float>> cases;
  for (int n : {1, 7, 8, 31, 32, 33, 64, 100, 768, 3072, 3075}) {
    std::vector<float> x(n);
    for (auto& v : x) v = d(rng);
    cases.push_back(x);
  }
  std::vector<float> ties(96);
  for (int i = 0; i < 96; ++i) ties[i] = (i % 2 ? -1.0f : 1.0f) * (static_cast<float>(i) + 0.5f);
  ties[5] = 127.0f;  // scale exactly 1: every other value a tie
  cases.push_back(ties);
  std::vector<float> near(64);
  for (int i = 0; i < 64; ++i) near[i] = std::nextafter(static_cast<float>(i % 9) + 0.5f, i % 3 ? 0.0f : 100.0f) * (i % 2 ? -1.f : 1.f);
  near[1] = 127.0f;
  cases.push_back(near);
  cases.push_back(std::vector<float>(40, 0.0f));
  cases.push_back(std::vector<float>(40, -0.0f));
  std::vector<float> tiny(48, 1e-7f);
  tiny[3] = -3e-6f;
  cases.push_back(tiny);
  for (float bad : {INFINITY, -INFINITY, NAN}) {
    for (int at : {0, 13, 39}) {
      std::vector<float> x(40, 0.5f);
      x[at] = bad;
      cases.push_back(x);
    }
  }
  for (const auto& x : cases) {
    const int n = static_cast<int>(x.size());
    std::vector<int8_t> want(n + 8, 0x55);
    float want_s = -1.0f;
    kernels_ref().quantize_i8s(x.data(), n, want.data(), &want_s);
    for (const KernelSet* k : {kernels_avx2(), kernels_avx512(), kernels_amx()}) {
      if (!k) continue;
      std::vector<int8_t> got(n + 8, 0x55);
      float got_s = -2.0f;
      k->quantize_i8s(x.data(), n, got.data(), &got_s);
      EXPECT_EQ(std::memcmp(&got_s, &want_s, 4), 0) << k->name << " n " << n;
      EXPECT_EQ(got, want) << k->name << " n " << n;  // the bytes past n stay untouched too
    }
  }
}

TEST(TernaryKernels, MatvecRoutesTernaryTypes) {
  const int cols = 512, rows = 4;
  const auto w = random_ternary(static_cast<size_t>(rows) * cols, 9);
  std::vector<float> x(cols);
  for (int j = 0; j < cols; ++j) x[j] = std::sin(0.37f * j);
  for (TernaryLayout l : {TernaryLayout::kI2S, TernaryLayout::kTQ2_0, TernaryLayout::kTQ1_0}) {
    DType t;
    ASSERT_TRUE(ternary_layout_dtype(l, &t));
    const uint16_t d[2] = {0x3800, 0x3C00};
    const auto packed = pack(l, w, cols, d);
    MatRef m{t, packed.data(), rows, cols, ternary_row_bytes(l, cols)};
    m.scale = 0.5f;
    ActVec a;
    a.f = x.data();
    for (const KernelSet* k : {&kernels_ref(), kernels_avx2(), kernels_avx512(), kernels_amx()}) {
      if (!k) continue;
      std::vector<float> y(rows);
      matvec(*k, m, a, y.data(), 0, rows);
      for (int r = 0; r < rows; ++r) {
        // The f32 path: expanded weights, the 16-lane order.
        float acc[16] = {};
        for (int j = 0; j < cols; ++j) {
          const float wf = w[r * cols + j] * (l == TernaryLayout::kI2S ? 0.5f : f16_to_f32(d[j / 256]));
          acc[j % 16] += wf * x[j];
        }
        for (int s = 8; s > 0; s /= 2)
          for (int i = 0; i < s; ++i) acc[i] += acc[i + s];
        EXPECT_EQ(y[r], acc[0]) << ternary_layout_name(l) << " " << k->name << " row " << r;
      }
    }
    if (l == TernaryLayout::kI2S) {  // with int8 activations: the integer kernel
      std::vector<int8_t> q(cols);
      float s;
      quantize_bitlinear(x.data(), cols, q.data(), &s);
      ActVec aq;
      aq.f = x.data();
      aq.q = q.data();
      aq.scales = &s;
      aq.block = cols;
      std::vector<float> y(rows), want(rows);
      matvec(kernels_ref(), m, aq, y.data(), 0, rows);
      kernels_ref().matvec_i2s(m, q.data(), &s, want.data(), 0, rows);
      EXPECT_EQ(y, want);
    }
  }
}

// ---- GGUF -----------------------------------------------------------------------------------------

TEST(TernaryGguf, WriterAndReaderRoundTripTernaryTensors) {
  const int cols = 256, rows = 3;
  const auto w = random_ternary(static_cast<size_t>(rows) * cols, 21);
  GgufWriter wr;
  std::vector<std::vector<uint8_t>> blobs;
  for (TernaryLayout l : {TernaryLayout::kI2S, TernaryLayout::kTQ2_0, TernaryLayout::kTQ1_0}) {
    DType t;
    ASSERT_TRUE(ternary_layout_dtype(l, &t));
    auto bytes = pack(l, w, cols);
    if (t == DType::kI2_S) {
      bytes.resize(bytes.size() + kI2STensorTailBytes, 0);
      const float scale = 0.75f;
      std::memcpy(bytes.data() + rows * ternary_row_bytes(l, cols), &scale, 4);
      EXPECT_FALSE(wr.add_tensor("short", t, {cols, rows}, bytes.data(), bytes.size() - 32).ok());  // no tail
    }
    ASSERT_TRUE(wr.add_tensor(ternary_layout_name(l), t, {cols, rows}, bytes.data(), bytes.size()).ok());
    blobs.push_back(bytes);
  }
  const std::string path = test::temp_dir() + "/t.gguf";
  ASSERT_TRUE(wr.write_file(path).ok());
  const auto file = test::read_file(path);
  std::vector<uint8_t> mem(1 << 16);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  GgufFile g;
  ASSERT_TRUE(g.open(file.data(), file.size(), arena).ok());
  int i = 0;
  for (TernaryLayout l : {TernaryLayout::kI2S, TernaryLayout::kTQ2_0, TernaryLayout::kTQ1_0}) {
    const GgufTensor* t = g.find_tensor(ternary_layout_name(l));
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->nbytes, blobs[i].size());
    EXPECT_EQ(std::memcmp(t->data, blobs[i].data(), blobs[i].size()), 0);
    if (l == TernaryLayout::kI2S) {
      EXPECT_EQ(i2s_tensor_scale(t->data, rows, cols), 0.75f);
    }
    ++i;
  }
  // Cutting off the i2_s scale (the last tensor is tq1_0, so move i2_s last by truncating the file
  // inside the first tensor's data) is refused.
  GgufFile cut;
  EXPECT_FALSE(cut.open(file.data(), g.data_offset() + 100, arena).ok());
}

TEST(TernaryGguf, BitnetCppDummyI2sFileOpens) {
  MC_REQUIRE_SHARED();
  MappedFile f;
  ASSERT_TRUE(f.open(test::shared_path("models/bitnet-dummy/dummy-bitnet-125m.i2_s.gguf")).ok());
  std::vector<uint8_t> mem(8 << 20);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  GgufFile g;
  const Status st = g.open(f.data(), f.size(), arena);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(g.tensor_count(), 123u);
  int i2s = 0;
  for (uint64_t i = 0; i < g.tensor_count(); ++i) {
    const GgufTensor* t = g.tensor(i);
    if (t->type != DType::kI2_S) continue;
    ++i2s;
    EXPECT_EQ(t->nbytes, static_cast<uint64_t>(t->ne[0] * t->ne[1] / 4 + 32));
    const float s = i2s_tensor_scale(t->data, t->ne[1], t->ne[0]);
    EXPECT_TRUE(s > 0.0f && std::isfinite(s)) << s;
  }
  EXPECT_EQ(i2s, 77);  // 7 matrices x 11 layers
  // Every code of the first layer's ffn_down is a valid ternary code, and all three values occur.
  const GgufTensor* t = g.find_tensor("blk.0.ffn_down.weight");
  ASSERT_NE(t, nullptr);
  const int cols = static_cast<int>(t->ne[0]);
  std::vector<int8_t> w(cols);
  int seen[3] = {};
  for (int64_t r = 0; r < t->ne[1]; ++r) {
    ASSERT_TRUE(ternary_unpack_row(TernaryLayout::kI2S, t->data + r * (cols / 4), cols, w.data())) << r;
    for (int8_t v : w) ++seen[v + 1];
  }
  EXPECT_GT(seen[0], 0);
  EXPECT_GT(seen[1], 0);
  EXPECT_GT(seen[2], 0);
}

}  // namespace
}  // namespace mcullm
