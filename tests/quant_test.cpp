// Quantization: f16 conversion (exhaustive and against a double-precision reference), block
// round trips and rules, the packed layouts dtype.h documents, row geometry, int8 activations and
// round_half_away.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "quant/blocks.h"
#include "quant/dtype.h"
#include "quant/f16.h"
#include "test_support.h"

namespace mcullm {
namespace {

uint32_t bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
float from_bits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
bool half_is_nan(uint16_t h) { return (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0; }

// Independent IEEE half decode: exact in double for every finite half.
double half_value(uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  const double v = e == 0 ? std::ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : std::ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}

// Reference float -> half: the nearest half by exact double distances, ties to the even pattern.
// Non-negative half patterns are ordered like their values; 0x7C00 (inf) counts as 65536 for rounding.
uint16_t ref_to_half(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(f));
  auto value = [](int h) { return h == 0x7C00 ? 65536.0 : half_value(static_cast<uint16_t>(h)); };
  if (a >= 65536.0) return sign | 0x7C00;
  int lo = 0, hi = 0x7C00;  // value(lo) <= a < value(hi)
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    (value(mid) <= a ? lo : hi) = mid;
  }
  const double dlo = a - value(lo), dhi = value(hi) - a;
  const int pick = dlo < dhi ? lo : dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi);
  return static_cast<uint16_t>(sign | pick);
}

// ---- f16 ---------------------------------------------------------------------------------------

TEST(QuantF16, EveryHalfConvertsToItsValueAndBack) {
  int bad_value = 0, bad_back = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t in = static_cast<uint16_t>(h);
    const float f = f16_to_f32(in);
    const double want = half_value(in);
    if (std::isnan(want)) {
      if (!std::isnan(f) || std::signbit(f) != ((in & 0x8000) != 0)) ++bad_value;
      const uint16_t back = f32_to_f16(f);
      if (!half_is_nan(back) || (back & 0x8000) != (in & 0x8000)) ++bad_back;
      continue;
    }
    if (static_cast<double>(f) != want || std::signbit(f) != ((in & 0x8000) != 0)) {
      if (++bad_value <= 5) ADD_FAILURE() << "half 0x" << std::hex << h << " -> " << f << ", want " << want;
    }
    if (f32_to_f16(f) != in && ++bad_back <= 5) ADD_FAILURE() << "half 0x" << std::hex << h << " back to 0x" << f32_to_f16(f);
  }
  EXPECT_EQ(bad_value, 0);
  EXPECT_EQ(bad_back, 0);
}

TEST(QuantF16, KnownConversions) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xC000);
  EXPECT_EQ(f32_to_f16(0.0f), 0x0000);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7BFF);                            // largest finite
  EXPECT_EQ(f32_to_f16(std::nextafter(65520.0f, 0.0f)), 0x7BFF);      // just below the overflow tie
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);                            // tie: to even = inf
  EXPECT_EQ(f32_to_f16(1e30f), 0x7C00);
  EXPECT_EQ(f32_to_f16(-INFINITY), 0xFC00);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -14)), 0x0400);                // smallest normal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);                // smallest subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);                // tie: to even = 0
  EXPECT_EQ(f32_to_f16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);                // 1.5 ulp: tie to even = 2
  EXPECT_EQ(f32_to_f16(std::ldexp(1023.5f, -24)), 0x0400);             // subnormal rounds up into normal
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);         // tie between 1 and 1+2^-10: even
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(3.0f, -11)), 0x3C02);         // tie: to even (upward)
  EXPECT_TRUE(half_is_nan(f32_to_f16(NAN)));
  EXPECT_TRUE(half_is_nan(f32_to_f16(from_bits(0x7F800001u))));         // signalling NaN stays NaN
  EXPECT_TRUE(half_is_nan(f32_to_f16(from_bits(0xFFFFFFFFu))));
}

TEST(QuantF16, RoundingMatchesDoubleReference) {
  int bad = 0, checked = 0;
  auto check = [&](float f) {
    if (std::isnan(f)) return;
    ++checked;
    const uint16_t got = f32_to_f16(f), want = ref_to_half(f);
    if (got != want && ++bad <= 8)
      ADD_FAILURE() << "float 0x" << std::hex << bits(f) << " (" << f << "): got 0x" << got << " want 0x" << want;
  };
  // Every sign/exponent/top-mantissa pattern with the dropped bits at zero, just off a tie, on a
  // tie, just past it, and all ones.
  for (uint32_t top = 0; top < (1u << 19); ++top)
    for (uint32_t low : {0x0000u, 0x0001u, 0x0FFFu, 0x1000u, 0x1001u, 0x1FFFu}) check(from_bits(top << 13 | low));
  // Subnormal halves: exact ties k + 1/2 (in units of 2^-24) and their neighbours.
  for (int k = 0; k < 1024; ++k)
    for (float s : {1.0f, -1.0f}) {
      const float t = s * std::ldexp(static_cast<float>(k) + 0.5f, -24);
      check(t);
      check(std::nextafter(t, 0.0f));
      check(std::nextafter(t, s * INFINITY));
    }
  // Random floats: any bits, and magnitudes from below the subnormals to beyond the overflow.
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  for (int i = 0; i < 1000000; ++i) check(from_bits(static_cast<uint32_t>(rng())));
  for (int i = 0; i < 1000000; ++i) {
    const float v = std::ldexp(mant(rng), static_cast<int>(rng() % 48) - 30);  // 2^-30 .. 2^18
    check((rng() & 1) ? -v : v);
  }
  EXPECT_EQ(bad, 0) << "of " << checked;
}

// ---- block round trips --------------------------------------------------------------------------

std::vector<float> random_row(std::mt19937_64& rng, int cols, float scale) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(cols));
  for (float& x : v) x = (rng() % 9 == 0) ? 0.0f : normal(rng) * scale;
  if (cols > 3) v[rng() % cols] = -0.0f;
  return v;
}

uint16_t block_d(const uint8_t* blk) { uint16_t d; std::memcpy(&d, blk, 2); return d; }

float amax_of(const float* x, int n) {
  float m = 0;
  for (int i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

const float kScales[] = {1.0f, 1e-3f, 1e-6f, 250.0f, 2e4f};  // 1e-6: the f16 scale is subnormal

TEST(QuantQ8_0, RoundTripWithinHalfAStep) {
  std::mt19937_64 rng(1);
  int bad = 0;
  for (float scale : kScales) {
    for (int cols : {32, 64, 96, 320}) {
      const std::vector<float> x = random_row(rng, cols, scale);
      std::vector<uint8_t> row(dtype_row_bytes(DType::kQ8_0, cols));
      ASSERT_TRUE(quantize_row(DType::kQ8_0, x.data(), row.data(), cols));
      std::vector<float> y(static_cast<size_t>(cols));
      ASSERT_TRUE(dequantize_row(DType::kQ8_0, row.data(), y.data(), cols));
      for (int b = 0; b < cols / 32; ++b) {
        const uint8_t* blk = row.data() + 34 * b;
        const float d = amax_of(&x[32 * b], 32) / 127.0f;
        ASSERT_EQ(block_d(blk), f32_to_f16(d)) << "scale " << scale;
        const double dh = half_value(block_d(blk));
        int max_code = 0;
        for (int j = 0; j < 32; ++j) {
          const int code = static_cast<int8_t>(blk[2 + j]);
          max_code = std::max(max_code, std::abs(code));
          EXPECT_EQ(static_cast<double>(y[32 * b + j]), code * dh);  // dequantize: code * d
          // |x - q d_h| <= |x - q d| + |q| |d - d_h|, with d/2 for the rounding of x / d.
          const double bound = d * (0.5 + 1e-5) + 127.0 * std::fabs(d - dh) + std::fabs(x[32 * b + j]) * 1e-6;
          if (!(std::fabs(x[32 * b + j] - y[32 * b + j]) <= bound) && ++bad <= 5)
            ADD_FAILURE() << "scale " << scale << " x " << x[32 * b + j] << " -> " << y[32 * b + j] << " d " << d;
        }
        EXPECT_EQ(max_code, d > 0 ? 127 : 0) << "the largest magnitude maps to +-127";
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

// llama.cpp's quantize_row_q4_0_ref, written out: d = max / -8 (max: the signed value of largest
// magnitude, first on ties), code = min(15, (int8)(x / d + 8.5)).
void llama_q4_0(const float* x, uint16_t* d_out, int codes[32]) {
  float amax = 0, max = 0;
  for (int j = 0; j < 32; ++j)
    if (amax < std::fabs(x[j])) { amax = std::fabs(x[j]); max = x[j]; }
  const float d = max / -8;
  const float id = d ? 1.0f / d : 0.0f;
  *d_out = f32_to_f16(d);
  for (int j = 0; j < 32; ++j) codes[j] = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
}

int q4_code(const uint8_t* blk, int j, int half) { return j < half ? (blk[2 + j] & 15) : (blk[2 + j - half] >> 4); }

TEST(QuantQ4_0, FollowsTheLlamaCppRule) {
  std::mt19937_64 rng(2);
  int bad = 0;
  for (float scale : kScales) {
    for (int trial = 0; trial < 20; ++trial) {
      const int cols = 32 * (1 + trial % 4);
      std::vector<float> x = random_row(rng, cols, scale);
      if (trial % 3 == 0) {  // both extremes present: the opposite one clamps to 15
        x[3] = 5.0f * scale;
        x[20] = -5.0f * scale;
      }
      std::vector<uint8_t> row(dtype_row_bytes(DType::kQ4_0, cols));
      ASSERT_TRUE(quantize_row(DType::kQ4_0, x.data(), row.data(), cols));
      std::vector<float> y(static_cast<size_t>(cols));
      ASSERT_TRUE(dequantize_row(DType::kQ4_0, row.data(), y.data(), cols));
      for (int b = 0; b < cols / 32; ++b) {
        const uint8_t* blk = row.data() + 18 * b;
        uint16_t want_d;
        int want[32];
        llama_q4_0(&x[32 * b], &want_d, want);
        EXPECT_EQ(block_d(blk), want_d);
        const double dh = std::fabs(half_value(block_d(blk)));
        const float d = std::fabs(amax_of(&x[32 * b], 32) / 8.0f);
        for (int j = 0; j < 32; ++j) {
          const int code = q4_code(blk, j, 16);
          if (code != want[j] && ++bad <= 5) ADD_FAILURE() << "block " << b << " weight " << j << ": code " << code << " want " << want[j];
          EXPECT_EQ(static_cast<double>(y[32 * b + j]), (code - 8) * half_value(block_d(blk)));
          const double step = code == 15 && want[j] == 15 && std::fabs(x[32 * b + j]) > 7 * d ? 1.0 : 0.5;
          const double bound = d * (step + 1e-5) + 8.0 * std::fabs(d - dh) + std::fabs(x[32 * b + j]) * 1e-6;
          if (!(std::fabs(x[32 * b + j] - y[32 * b + j]) <= bound) && ++bad <= 5)
            ADD_FAILURE() << "x " << x[32 * b + j] << " -> " << y[32 * b + j] << " d " << d;
        }
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST(QuantQ4G64, RoundTripAnyColumnCount) {
  std::mt19937_64 rng(3);
  int bad = 0;
  for (float scale : kScales) {
    for (int cols : {1, 7, 31, 32, 33, 63, 64, 65, 100, 128, 200}) {
      const std::vector<float> x = random_row(rng, cols, scale);
      ASSERT_TRUE(dtype_row_fits(DType::kQ4G64, cols));
      std::vector<uint8_t> row(dtype_row_bytes(DType::kQ4G64, cols), 0xEE);
      ASSERT_TRUE(quantize_row(DType::kQ4G64, x.data(), row.data(), cols));
      std::vector<float> y(static_cast<size_t>(cols) + 1, 777.0f);
      ASSERT_TRUE(dequantize_row(DType::kQ4G64, row.data(), y.data(), cols));
      EXPECT_EQ(y[cols], 777.0f) << "wrote past cols";
      for (int b = 0; b * 64 < cols; ++b) {
        const uint8_t* blk = row.data() + 34 * b;
        const int n = std::min(64, cols - 64 * b);
        const float d = amax_of(&x[64 * b], n) / 7.0f;
        EXPECT_EQ(block_d(blk), f32_to_f16(d));
        const double dh = half_value(block_d(blk));
        int max_q = 0;
        for (int j = 0; j < 64; ++j) {
          const int code = q4_code(blk, j, 32);
          EXPECT_TRUE(code >= 1 && code <= 15) << "symmetric codes: q in [-7, 7], code " << code;
          if (j >= n) {
            EXPECT_EQ(code, 8) << "padding weight " << j << " is not zero";
            continue;
          }
          max_q = std::max(max_q, std::abs(code - 8));
          EXPECT_EQ(static_cast<double>(y[64 * b + j]), (code - 8) * dh);
          const double bound = d * (0.5 + 1e-5) + 7.0 * std::fabs(d - dh) + std::fabs(x[64 * b + j]) * 1e-6;
          if (!(std::fabs(x[64 * b + j] - y[64 * b + j]) <= bound) && ++bad <= 5)
            ADD_FAILURE() << "cols " << cols << " x " << x[64 * b + j] << " -> " << y[64 * b + j] << " d " << d;
        }
        EXPECT_EQ(max_q, d > 0 ? 7 : 0);
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

// ---- layouts by hand ----------------------------------------------------------------------------

TEST(QuantLayout, HandBuiltBlocksDequantize) {
  BlockQ8_0 q8;
  q8.d = 0x4000;  // 2.0
  for (int j = 0; j < 32; ++j) q8.qs[j] = static_cast<int8_t>(j - 16);
  float y[64];
  ASSERT_TRUE(dequantize_row(DType::kQ8_0, &q8, y, 32));
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 2.0f * (j - 16)) << j;

  BlockQ4_0 q4;
  q4.d = 0x3800;  // 0.5
  for (int j = 0; j < 16; ++j) q4.qs[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  ASSERT_TRUE(dequantize_row(DType::kQ4_0, &q4, y, 32));
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * (j - 8)) << "low nibble of byte " << j << " is weight " << j;
    EXPECT_EQ(y[j + 16], 0.5f * (7 - j)) << "high nibble of byte " << j << " is weight " << j + 16;
  }

  BlockQ4G64 g;
  g.d = 0xC400;  // -4.0
  for (int j = 0; j < 32; ++j) g.qs[j] = static_cast<uint8_t>((j % 16) | ((j * 7) % 16) << 4);
  for (int cols : {64, 40}) {
    std::fill(y, y + 64, 99.0f);
    ASSERT_TRUE(dequantize_row(DType::kQ4G64, &g, y, cols));
    for (int j = 0; j < 32 && j < cols; ++j) EXPECT_EQ(y[j], -4.0f * (j % 16 - 8)) << j;
    for (int j = 32; j < cols; ++j) EXPECT_EQ(y[j], -4.0f * ((j - 32) * 7 % 16 - 8)) << "high nibble of byte " << j - 32;
    for (int j = cols; j < 64; ++j) EXPECT_EQ(y[j], 99.0f);
  }
}

TEST(QuantLayout, QuantizeWritesTheDocumentedBytes) {
  // Integer inputs whose scale comes out exactly 1: the codes are the inputs themselves.
  float x[64];
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>((j * 5) % 15 - 7);  // -7..7
  x[5] = -8.0f;  // q4_0: the largest magnitude, negative, so d = -8 / -8 = 1
  BlockQ4_0 q4;
  ASSERT_TRUE(quantize_row(DType::kQ4_0, x, &q4, 32));
  EXPECT_EQ(q4.d, 0x3C00);
  for (int j = 0; j < 16; ++j)
    EXPECT_EQ(q4.qs[j], static_cast<uint8_t>((static_cast<int>(x[j]) + 8) | (static_cast<int>(x[j + 16]) + 8) << 4)) << j;

  for (int j = 0; j < 64; ++j) x[j] = static_cast<float>((j * 3) % 15 - 7);
  BlockQ4G64 g;
  ASSERT_TRUE(quantize_row(DType::kQ4G64, x, &g, 64));
  EXPECT_EQ(g.d, 0x3C00);
  for (int j = 0; j < 32; ++j)
    EXPECT_EQ(g.qs[j], static_cast<uint8_t>((static_cast<int>(x[j]) + 8) | (static_cast<int>(x[j + 32]) + 8) << 4)) << j;

  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j * 8 - 127);  // -127 .. 121
  x[31] = 127.0f;
  BlockQ8_0 q8;
  ASSERT_TRUE(quantize_row(DType::kQ8_0, x, &q8, 32));
  EXPECT_EQ(q8.d, 0x3C00);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(q8.qs[j], static_cast<int8_t>(x[j])) << j;
}

TEST(QuantLayout, F16AndF32Rows) {
  const float x[5] = {1.0f, -2.5f, 65504.0f, 1e-7f, 0.333333f};
  uint16_t h[5];
  ASSERT_TRUE(quantize_row(DType::kF16, x, h, 5));
  for (int j = 0; j < 5; ++j) EXPECT_EQ(h[j], f32_to_f16(x[j]));
  float y[5];
  ASSERT_TRUE(dequantize_row(DType::kF16, h, y, 5));
  for (int j = 0; j < 5; ++j) EXPECT_EQ(y[j], f16_to_f32(h[j]));
  float f[5];
  ASSERT_TRUE(quantize_row(DType::kF32, x, f, 5));
  EXPECT_EQ(std::memcmp(f, x, sizeof(x)), 0);
}

// ---- geometry -----------------------------------------------------------------------------------

TEST(QuantDType, InfoTable) {
  struct Want { DType type; const char* name; int block, bytes; bool pads; int act; };
  const Want wants[] = {{DType::kF32, "f32", 1, 4, false, 0},     {DType::kF16, "f16", 1, 2, false, 0},
                        {DType::kQ4_0, "q4_0", 32, 18, false, 32}, {DType::kQ8_0, "q8_0", 32, 34, false, 32},
                        {DType::kQ4G64, "q4g64", 64, 34, true, 64}};
  for (const Want& w : wants) {
    const DTypeInfo* info = dtype_info(w.type);
    ASSERT_NE(info, nullptr) << w.name;
    EXPECT_STREQ(info->name, w.name);
    EXPECT_EQ(info->block, w.block);
    EXPECT_EQ(info->block_bytes, w.bytes);
    EXPECT_EQ(info->pads_rows, w.pads);
    EXPECT_EQ(info->act_block, w.act);
    EXPECT_EQ(dtype_info_by_name(w.name), info);
    EXPECT_EQ(dtype_info_by_id(static_cast<uint32_t>(w.type)), info);
  }
  EXPECT_EQ(static_cast<uint32_t>(DType::kQ4_0), 2u);  // GGUF ids shared with llama.cpp
  EXPECT_EQ(static_cast<uint32_t>(DType::kQ8_0), 8u);
  EXPECT_EQ(dtype_info_by_id(3), nullptr);
  EXPECT_EQ(dtype_info_by_id(0xFFFFFFFFu), nullptr);
  EXPECT_EQ(dtype_info_by_name("q4_1"), nullptr);
  EXPECT_EQ(dtype_info_by_name(""), nullptr);
  EXPECT_EQ(dtype_info(static_cast<DType>(7)), nullptr);
}

TEST(QuantDType, RowFitsAndBytes) {
  EXPECT_TRUE(dtype_row_fits(DType::kF32, 1));
  EXPECT_EQ(dtype_row_bytes(DType::kF32, 5), 20u);
  EXPECT_EQ(dtype_row_bytes(DType::kF16, 5), 10u);
  EXPECT_TRUE(dtype_row_fits(DType::kQ8_0, 64));
  EXPECT_FALSE(dtype_row_fits(DType::kQ8_0, 33));
  EXPECT_FALSE(dtype_row_fits(DType::kQ8_0, 16));
  EXPECT_EQ(dtype_row_bytes(DType::kQ8_0, 64), 68u);
  EXPECT_TRUE(dtype_row_fits(DType::kQ4_0, 4096));
  EXPECT_FALSE(dtype_row_fits(DType::kQ4_0, 4095));
  EXPECT_EQ(dtype_row_bytes(DType::kQ4_0, 32), 18u);
  EXPECT_EQ(dtype_row_bytes(DType::kQ4_0, 4096), 128u * 18u);
  for (int64_t cols : {1, 63, 64, 65, 129}) EXPECT_TRUE(dtype_row_fits(DType::kQ4G64, cols)) << cols;
  EXPECT_EQ(dtype_row_bytes(DType::kQ4G64, 1), 34u);
  EXPECT_EQ(dtype_row_bytes(DType::kQ4G64, 64), 34u);
  EXPECT_EQ(dtype_row_bytes(DType::kQ4G64, 65), 68u);
  EXPECT_EQ(dtype_row_bytes(DType::kQ4G64, 172), 3u * 34u);
  EXPECT_EQ(dtype_row_bytes(DType::kF32, int64_t{1} << 32), (size_t{1} << 34));  // no int overflow
  for (DType t : {DType::kF32, DType::kF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4G64}) {
    for (int64_t cols : {int64_t{0}, int64_t{-1}, int64_t{-64}, INT64_MIN}) {
      EXPECT_FALSE(dtype_row_fits(t, cols)) << static_cast<int>(t) << " cols " << cols;
      EXPECT_EQ(dtype_row_bytes(t, cols), 0u) << static_cast<int>(t) << " cols " << cols;
    }
  }
  EXPECT_FALSE(dtype_row_fits(static_cast<DType>(7), 32));
  EXPECT_EQ(dtype_row_bytes(static_cast<DType>(7), 32), 0u);
  // quantize_row / dequantize_row refuse rows the type cannot hold, and write nothing.
  float x[48] = {1.0f};
  uint8_t out[64];
  std::memset(out, 0xAB, sizeof(out));
  EXPECT_FALSE(quantize_row(DType::kQ8_0, x, out, 48));
  EXPECT_FALSE(quantize_row(DType::kQ4_0, x, out, 0));
  EXPECT_FALSE(dequantize_row(DType::kQ8_0, out, x, 40));
  EXPECT_FALSE(quantize_row(static_cast<DType>(7), x, out, 32));
  for (uint8_t b : out) EXPECT_EQ(b, 0xAB);
}

// ---- activations and rounding -------------------------------------------------------------------

TEST(QuantActivations, ScaleRoundingAndPadding) {
  std::mt19937_64 rng(4);
  for (int block : {32, 64}) {
    for (int n : {1, 5, 31, 32, 33, 64, 100, 257}) {
      const std::vector<float> x = random_row(rng, n, n % 2 ? 3.0f : 1e-3f);
      const int nb = (n + block - 1) / block;
      std::vector<int8_t> q(static_cast<size_t>(nb) * block, 0x55);
      std::vector<float> s(static_cast<size_t>(nb), -1.0f);
      quantize_activations(x.data(), n, block, q.data(), s.data());
      for (int b = 0; b < nb; ++b) {
        const int len = std::min(block, n - b * block);
        const float d = amax_of(&x[b * block], len) / 127.0f;
        EXPECT_EQ(bits(s[b]), bits(d)) << "block " << b << " of n=" << n;
        for (int j = 0; j < len; ++j) {
          const float v = x[b * block + j] * (d != 0.0f ? 1.0f / d : 0.0f);
          const int want = static_cast<int>(std::round(v));  // C's round: half away from zero
          EXPECT_EQ(q[b * block + j], want) << "n=" << n << " j=" << b * block + j << " v=" << v;
          EXPECT_LE(std::abs(static_cast<int>(q[b * block + j])), 127);  // never -128 (AVX2 kernels rely on it)
          EXPECT_LE(std::fabs(q[b * block + j] * d - x[b * block + j]), d * 0.50001f);
        }
        for (int j = len; j < block; ++j) EXPECT_EQ(q[b * block + j], 0) << "padding " << j << " of n=" << n;
      }
    }
  }
}

TEST(QuantActivations, HalvesRoundAwayFromZero) {
  // amax = 127 gives d = 1 exactly: each x is x / d.
  float x[32] = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 126.5f, -126.5f, 0.49999997f, -0.49999997f, 3.4999998f, -0.0f};
  int8_t q[32];
  float s;
  quantize_activations(x, 32, 32, q, &s);
  EXPECT_EQ(s, 1.0f);
  const int want[12] = {127, 1, 2, 3, -1, -3, 127, -127, 0, 0, 3, 0};
  for (int j = 0; j < 12; ++j) EXPECT_EQ(q[j], want[j]) << "x = " << x[j];
}

TEST(QuantActivations, AllZeroInput) {
  float x[40] = {};
  x[7] = -0.0f;
  int8_t q[64];
  float s[2] = {-1.0f, -1.0f};
  std::memset(q, 0x55, sizeof(q));
  quantize_activations(x, 40, 32, q, s);
  EXPECT_EQ(s[0], 0.0f);
  EXPECT_EQ(s[1], 0.0f);
  for (int8_t v : q) EXPECT_EQ(v, 0);
}

// A hostile file can hold nan / inf weights, which reach the activations: quantizing them must give
// defined values (nan -> 0, saturation), never a float-to-int conversion out of range (UB; found by
// fuzz/model_file_fuzz). The sanitizer build checks the "no UB" half.
TEST(QuantActivations, NanAndInfGiveDefinedCodes) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  float x[64];
  for (int i = 0; i < 64; ++i) x[i] = 0.25f * static_cast<float>(i - 30);
  x[3] = nan;  // block 0: a nan among finite values
  x[40] = inf;  // block 1: an infinity makes the scale inf and every code 0
  int8_t q[64];
  float s[2];
  quantize_activations(x, 64, 32, q, s);
  EXPECT_EQ(q[3], 0);
  for (int i = 32; i < 64; ++i) EXPECT_EQ(q[i], 0) << i;
  for (const int8_t v : q) EXPECT_GE(v, -127);
  for (const DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ4G64}) {
    std::vector<uint8_t> row(dtype_row_bytes(t, 64));
    ASSERT_TRUE(quantize_row(t, x, row.data(), 64));
    float back[64];
    ASSERT_TRUE(dequantize_row(t, row.data(), back, 64));
    if (t != DType::kQ4G64) EXPECT_NEAR(back[0], x[0], 0.6f) << dtype_info(t)->name;  // the nan's block stays usable
  }
}

TEST(QuantRound, HalfAwayFromZero) {
  struct Case { float in, out; };
  const Case cases[] = {
      {0.5f, 1.0f}, {1.5f, 2.0f}, {2.5f, 3.0f}, {-0.5f, -1.0f}, {-2.5f, -3.0f}, {-1.5f, -2.0f},
      {0.49999997f, 0.0f}, {-0.49999997f, 0.0f}, {std::nextafter(1.5f, 0.0f), 1.0f}, {std::nextafter(2.5f, 9.0f), 3.0f},
      {0.0f, 0.0f}, {1e-40f, 0.0f}, {0.7f, 1.0f}, {-0.7f, -1.0f},
      {4194303.5f, 4194304.0f}, {4194303.25f, 4194303.0f}, {4194303.75f, 4194304.0f},
      {8388607.5f, 8388608.0f}, {-8388607.5f, -8388608.0f}, {8388608.0f, 8388608.0f}, {8388609.0f, 8388609.0f},
      {16777216.0f, 16777216.0f}, {1e30f, 1e30f}, {-1e30f, -1e30f}, {INFINITY, INFINITY}, {-INFINITY, -INFINITY},
  };
  for (const Case& c : cases) EXPECT_EQ(round_half_away(c.in), c.out) << "round_half_away(" << c.in << ")";
  EXPECT_TRUE(std::isnan(round_half_away(NAN)));
  EXPECT_TRUE(std::isnan(round_half_away(-NAN)));
  EXPECT_TRUE(std::signbit(round_half_away(-0.3f))) << "a negative value rounding to zero keeps its sign, as roundf";
}

TEST(QuantRound, MatchesRoundfOnRandomAndNearHalfValues) {
  std::mt19937_64 rng(5);
  int bad = 0;
  auto check = [&](float v) {
    if (round_half_away(v) != std::round(v) && ++bad <= 5)
      ADD_FAILURE() << "v = " << v << " (0x" << std::hex << bits(v) << "): got " << round_half_away(v) << " want " << std::round(v);
  };
  for (int i = 0; i < 1000000; ++i) {
    const float v = from_bits(static_cast<uint32_t>(rng()));
    if (!std::isnan(v)) check(v);
  }
  for (int i = 0; i < 300000; ++i) {
    const float k = static_cast<float>(rng() % (1u << 23));
    const float h = (rng() & 1) ? -(k + 0.5f) : k + 0.5f;  // exact halves up to 2^23
    check(h);
    check(std::nextafter(h, 0.0f));
    check(std::nextafter(h, h * 2.0f));
    const float small = std::ldexp(static_cast<float>(rng() % 4096) + 0.5f, -static_cast<int>(rng() % 12));
    check(small);
    check(std::nextafter(small, 0.0f));
    check(std::nextafter(small, 1e9f));
  }
  EXPECT_EQ(bad, 0);
}

}  // namespace
}  // namespace mcullm
