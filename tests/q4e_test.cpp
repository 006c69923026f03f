// esp32-ai's int4 layout (q4e): quantize / dequantize round trip, the reference kernels follow the
// kernels.h order (recomputed here from the raw bytes) and esp32-ai's int8 activation rule (one
// scale, ties to even). (Every table against the reference: kernel_conformance_test.cpp.)
#include "quant/q4e.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernel_test_data.h"
#include "kernels/kernels.h"
#include "test_support.h"

namespace mcullm {
namespace {

using Tensor = test::Q4eTensor;
constexpr auto make_tensor = test::make_q4e_tensor;

// Raw-byte decoding, written apart from quant/q4e.h.
int raw_weight(const Tensor& t, int r, int j) {
  const uint8_t* codes = t.bytes.data() + 1 + 4;
  const uint8_t b = codes[static_cast<size_t>(r) * ((t.m.cols + 1) / 2) + j / 2];
  return (j % 2 == 0 ? b & 15 : b >> 4) - 8;
}
float raw_scale(const Tensor& t, int r, int g) {
  const int ng = (t.m.cols + t.m.group - 1) / t.m.group;
  const uint8_t* s = t.bytes.data() + 1 + 4 + static_cast<size_t>(t.m.rows) * ((t.m.cols + 1) / 2) +
                     (static_cast<size_t>(r) * ng + g) * 2;
  const uint16_t h = static_cast<uint16_t>(s[0] | s[1] << 8);
  const int e = (h >> 10) & 31, m = h & 1023;
  const double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return static_cast<float>((h & 0x8000) ? -v : v);
}

TEST(Q4E, QuantizeRoundTripWithinHalfAStep) {
  for (int cols : {1, 2, 7, 64, 127, 128, 415}) {
    for (int group : {1, 5, 32, 128}) {
      std::mt19937_64 rng(cols * 131 + group);
      std::normal_distribution<float> normal(0.0f, 1.0f);
      const int rows = 3;
      std::vector<float> x(static_cast<size_t>(rows) * cols);
      for (float& v : x) v = normal(rng);
      std::vector<uint8_t> buf(q4e_tensor_bytes(rows, cols, group));
      q4e_quantize_tensor(x.data(), rows, cols, group, buf.data());
      MatRef m;
      ASSERT_TRUE(q4e_bind(buf.data(), rows, cols, &m));
      EXPECT_EQ(m.group, group);
      std::vector<float> y(cols);
      for (int r = 0; r < rows; ++r) {
        q4e_dequantize_row(m, r, y.data());
        for (int j = 0; j < cols; ++j) {
          const int q = q4e_weight(m, r, j);
          ASSERT_GE(q, -7);
          ASSERT_LE(q, 7);
          const float d = q4e_scale(m, r, j / group);
          EXPECT_LE(std::fabs(y[j] - x[static_cast<size_t>(r) * cols + j]), d * 0.5f + 1e-6f) << cols << " " << group;
        }
      }
    }
  }
}

TEST(Q4E, BindRejectsBadGroup) {
  uint8_t buf[64] = {};
  MatRef m;
  EXPECT_FALSE(q4e_bind(buf, 2, 4, &m));  // group 0
  const int32_t neg = -128;
  std::memcpy(buf, &neg, 4);
  EXPECT_FALSE(q4e_bind(buf, 2, 4, &m));
}

TEST(Q4E, ActivationsOneScaleTiesToEven) {
  const float x[] = {127.0f, 2.5f, 3.5f, -2.5f, -0.5f, 0.5f, 1.5f, -127.0f};
  int8_t q[8];
  float s = 0;
  q4e_quantize_activations(x, 8, q, &s);
  const int want[] = {127, 2, 4, -2, 0, 0, 2, -127};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(q[i], want[i]) << i;
  EXPECT_EQ(s, 127.0f / 127.0f);
  const float zero[4] = {0, 0, 0, 0};
  q4e_quantize_activations(zero, 4, q, &s);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(q[i], 0);
  EXPECT_EQ(s, 1e-8f / 127.0f);  // esp32-ai's floor on the maximum
  const float bad[3] = {NAN, 1.0f, -INFINITY};
  q4e_quantize_activations(bad, 3, q, &s);
  EXPECT_EQ(q[0], 0);
}

TEST(Q4E, ReferenceFollowsTheContractOrder) {
  for (int cols : {1, 3, 64, 129, 415}) {
    for (int group : {1, 7, 128}) {
      const int rows = 4;
      Tensor t = make_tensor(rows, cols, group, 7 + cols + group);
      std::mt19937_64 rng(cols);
      std::normal_distribution<float> normal(0.0f, 1.0f);
      std::vector<float> x(cols);
      for (float& v : x) v = normal(rng);
      std::vector<int8_t> xq(cols);
      float xs;
      q4e_quantize_activations(x.data(), cols, xq.data(), &xs);
      std::vector<float> yf(rows), yq(rows);
      matvec_q4e_f32_ref(t.m, x.data(), yf.data(), 0, rows);
      matvec_q4e_q8_ref(t.m, xq.data(), &xs, yq.data(), 0, rows);
      for (int r = 0; r < rows; ++r) {
        float acc = 0.0f, accq = 0.0f;
        double exact = 0;
        for (int g = 0; g * group < cols; ++g) {
          float sum = 0.0f;
          int32_t isum = 0;
          for (int j = g * group; j < cols && j < (g + 1) * group; ++j) {
            sum += static_cast<float>(raw_weight(t, r, j)) * x[j];
            isum += raw_weight(t, r, j) * xq[j];
            exact += static_cast<double>(raw_weight(t, r, j)) * raw_scale(t, r, g) * x[j];
          }
          acc += sum * raw_scale(t, r, g);
          accq += static_cast<float>(isum) * raw_scale(t, r, g);
        }
        EXPECT_EQ(yf[r], acc);
        EXPECT_EQ(yq[r], accq * xs);
        EXPECT_NEAR(yf[r], exact, 1e-4 * (1 + std::fabs(exact)));
      }
    }
  }
}

TEST(Q4E, RouterPicksInt8WhenQuantizedElseF32) {
  Tensor t = make_tensor(5, 40, 16, 3);
  std::vector<float> x(40, 0.25f);
  x[3] = -1.0f;
  std::vector<int8_t> xq(40);
  float xs;
  q4e_quantize_activations(x.data(), 40, xq.data(), &xs);
  std::vector<float> want_f(5), want_q(5), got(5);
  matvec_q4e_f32_ref(t.m, x.data(), want_f.data(), 0, 5);
  matvec_q4e_q8_ref(t.m, xq.data(), &xs, want_q.data(), 0, 5);
  ActVec a;
  a.f = x.data();
  matvec(kernels_best(), t.m, a, got.data(), 0, 5);
  EXPECT_EQ(got, want_f);
  a.q = xq.data();
  a.scales = &xs;
  a.block = 40;
  matvec(kernels_best(), t.m, a, got.data(), 0, 5);
  EXPECT_EQ(got, want_q);
}

}  // namespace
}  // namespace mcullm
