// The kernel conformance suite: the same tests for every registered kernel table this build holds
// (kernels.h kernel_tables: pie, amx, avx512, avxvnni, avx2, neon, whichever are compiled in), each
// against the reference bit for bit: dot / matvec of every dense type on a sweep of shapes, row
// ranges and nasty data, the order-sensitive f32 cases, both activation quantizers, attention
// (f32 and int8 KV cache), softmax, SwiGLU (and the vector exp behind them over a dense sweep of
// floats), i2_s matvec / matmat and q4e. A table the CPU cannot run shows up as skipped with the
// reason (CI's allow-list, tests/allowed_skips.txt, names the ones its CPU may lack). A new table is
// tested here by its registry line alone.
// Core library and gtest only: tests/cross runs it under qemu-aarch64 for the NEON table.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/fmath.h"
#include "kernel_test_data.h"
#include "kernels/kernels.h"
#include "model/sparse_ffn.h"
#include "quant/blocks.h"
#include "quant/f16.h"
#include "quant/q4e.h"
#include "test_support.h"

namespace mcullm {
namespace {

using namespace mcullm::test;

class KernelConformance : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    k_ = kernels_by_name(GetParam().c_str());
    if (k_ == nullptr)
      MCULLM_SKIP_OR_FAIL(GetParam(), "the " << GetParam() << " table is not available on this CPU: its kernels are not tested here");
  }
  const KernelSet& k() const { return *k_; }
  const KernelSet& ref() const { return kernels_ref(); }

 private:
  const KernelSet* k_ = nullptr;
};

::testing::AssertionResult same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < a.size(); ++i)
    if (bits(a[i]) != bits(b[i])) return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << b[i];
  return ::testing::AssertionSuccess();
}

TEST_P(KernelConformance, RegisteredUnderItsName) {
  EXPECT_STREQ(k().name, GetParam().c_str());
  EXPECT_NE(&k(), &ref());
  // Every entry is filled (a table with an empty entry would crash only when that kernel is first called).
  static_assert(sizeof(KernelSet) % sizeof(void*) == 0, "KernelSet holds a name and function pointers");
  const size_t words = sizeof(KernelSet) / sizeof(void*);
  for (size_t i = 0; i < words; ++i) {
    void* entry = nullptr;
    std::memcpy(&entry, reinterpret_cast<const char*>(&k()) + i * sizeof(void*), sizeof entry);
    EXPECT_NE(entry, nullptr) << "entry " << i << " of " << words << " is empty";
  }
}

// ---- dot / matvec of the dense types ----------------------------------------------------------

// The sweep for one type: counts shapes checked, reports the first mismatches in detail.
void sweep_type(const KernelSet& k, DType type) {
  const DTypeInfo* info = dtype_info(type);
  std::mt19937_64 rng(0x5EED0000u + static_cast<uint32_t>(type));
  int shapes = 0, failures = 0, outputs = 0, finite_nonzero = 0;
  for (int cols : sweep_cols()) {
    if (!dtype_row_fits(type, cols)) continue;
    for (int rows : kSweepRows) {
      const size_t extra = (rows % 2) ? 8 : 0;
      const Matrix m = make_matrix(rng, type, rows, cols, extra);
      const Kind xkind = static_cast<Kind>((cols + rows) % kKindCount);
      const Act x = make_act(rng, cols, info->act_block, xkind, info->act_block > 0);
      for (const auto& [r0, r1] : row_ranges(rows)) {
        const std::vector<float> want = run_kernel(kernels_ref(), m.ref, x, r0, r1);
        const std::vector<float> got = run_kernel(k, m.ref, x, r0, r1);
        ++shapes;
        for (int r = 0; r < rows; ++r) {
          const bool inside = r >= r0 && r < r1;
          if (inside) {
            ++outputs;
            finite_nonzero += std::isfinite(want[r]) && want[r] != 0.0f;
          }
          const bool ok = std::memcmp(&want[r], &got[r], 4) == 0 && (bits(got[r]) == kSentinel) != inside;
          if (!ok && ++failures <= 5)
            ADD_FAILURE() << info->name << " rows=" << rows << " cols=" << cols << " range=[" << r0 << "," << r1
                          << ") row " << r << ": ref 0x" << std::hex << bits(want[r]) << " " << k.name << " 0x"
                          << bits(got[r]) << std::dec << " (" << want[r] << " vs " << got[r] << ")";
        }
      }
    }
  }
  EXPECT_EQ(failures, 0) << "mismatching rows in " << shapes << " (shape, range) cases";
  EXPECT_GT(shapes, 100);
  // The data is nasty on purpose, but most outputs must still be ordinary numbers worth comparing.
  EXPECT_GT(finite_nonzero, outputs / 2) << "of " << outputs << " outputs";
}

TEST_P(KernelConformance, MatvecF32) { sweep_type(k(), DType::kF32); }
TEST_P(KernelConformance, MatvecF16) { sweep_type(k(), DType::kF16); }
TEST_P(KernelConformance, MatvecQ8_0) { sweep_type(k(), DType::kQ8_0); }
TEST_P(KernelConformance, MatvecQ4_0) { sweep_type(k(), DType::kQ4_0); }
TEST_P(KernelConformance, MatvecQ4G64) { sweep_type(k(), DType::kQ4G64); }

TEST_P(KernelConformance, DotF32) {
  std::mt19937_64 rng(7);
  int failures = 0, cases = 0;
  for (int n : sweep_cols()) {
    for (int kind = 0; kind < kKindCount; ++kind) {
      for (int offset : {0, 1, 3}) {  // unaligned starts too
        std::vector<float> a(static_cast<size_t>(n + offset)), b(static_cast<size_t>(n + offset));
        for (float& v : a) v = gen_value(rng, static_cast<Kind>(kind));
        for (float& v : b) v = gen_value(rng, static_cast<Kind>((kind + offset) % kKindCount));
        const float want = ref().dot_f32(a.data() + offset, b.data() + offset, n);
        const float got = k().dot_f32(a.data() + offset, b.data() + offset, n);
        ++cases;
        if (std::memcmp(&want, &got, 4) != 0 && ++failures <= 5)
          ADD_FAILURE() << "n=" << n << " kind=" << kind << " offset=" << offset << ": ref 0x" << std::hex << bits(want)
                        << " got 0x" << bits(got);
      }
    }
  }
  EXPECT_EQ(failures, 0) << "of " << cases;
  // n = 0 is an empty sum.
  EXPECT_EQ(bits(k().dot_f32(nullptr, nullptr, 0)), 0u);
}

// Hand-picked exact cases where a wrong order, an FMA or a lost lane shows up in the bits.
void expect_f32_order_cases(const KernelSet& k) {
  // Lane 0 gets 1e8 then -1e8, lane 1 gets 1: the contract gives exactly 1 + (1e8 - 1e8) = 1.
  std::vector<float> a(33, 0.0f), b(33, 1.0f);
  a[0] = 1e8f; a[16] = -1e8f; a[1] = 1.0f;
  EXPECT_EQ(k.dot_f32(a.data(), b.data(), 33), 1.0f) << k.name;
  // Sequential summation would lose the 1 (1e8 + 1 - 1e8 = 0): with 16 lanes a[1] is its own lane.
  a.assign(33, 0.0f);
  a[0] = 1e8f; a[1] = 1.0f; a[2] = -1e8f;
  EXPECT_EQ(k.dot_f32(a.data(), b.data(), 3), 1.0f) << k.name;
  // No FMA: lane 0 holds -(1 + 2^-11), then adds (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24, which rounds
  // (tie to even) to 1 + 2^-11 as a product: the sum is exactly 0. A fused multiply-add gives 2^-24.
  const float e = 1.0f + std::ldexp(1.0f, -12);
  float p[17] = {-(1.0f + std::ldexp(1.0f, -11))}, q[17] = {1.0f};
  p[16] = e;
  q[16] = e;
  EXPECT_EQ(bits(k.dot_f32(p, q, 17)), 0u) << k.name << " (an fma would leave 2^-24)";
}
TEST_P(KernelConformance, F32OrderSensitiveCases) { expect_f32_order_cases(k()); }
TEST(KernelConformanceRef, F32OrderSensitiveCases) { expect_f32_order_cases(kernels_ref()); }

// ---- activation quantizers ---------------------------------------------------------------------

// quantize_blocks equals quant/blocks.h's quantize_activations byte for byte (codes, padding and
// scales): block sizes with and without a SIMD path, short last blocks, and data with nan, +-inf,
// -0, huge, tiny (subnormal scales) and ordinary values.
TEST_P(KernelConformance, QuantizeBlocks) {
  std::mt19937_64 rng(31);
  int failures = 0, cases = 0;
  for (int block : {32, 64, 8, 24, 16, 7, 48, 128}) {
    for (int n : {1, 5, 8, 31, 32, 33, 64, 100, 768, 2053}) {
      for (int kind = 0; kind < kKindCount + 2; ++kind) {
        std::vector<float> x(static_cast<size_t>(n));
        for (float& v : x) v = gen_value(rng, static_cast<Kind>(kind % kKindCount));
        if (kind == kKindCount) {  // non-finite values in some blocks
          for (int i = 0; i < n; i += 7) x[i] = (i / 7) % 3 == 0 ? NAN : (i / 7) % 3 == 1 ? INFINITY : -INFINITY;
        } else if (kind == kKindCount + 1) {  // a lone nan in a block of tiny values
          for (float& v : x) v = gen_value(rng, kTiny);
          x[n / 2] = NAN;
        }
        const int nb = (n + block - 1) / block;
        std::vector<int8_t> want_q(static_cast<size_t>(nb) * block, 0x55), got_q(want_q);
        std::vector<float> want_s(nb, -1.0f), got_s(want_s);
        quantize_activations(x.data(), n, block, want_q.data(), want_s.data());
        k().quantize_blocks(x.data(), n, block, got_q.data(), got_s.data());
        ++cases;
        const bool ok = want_q == got_q && std::memcmp(want_s.data(), got_s.data(), want_s.size() * 4) == 0;
        if (!ok && ++failures <= 5) ADD_FAILURE() << "block " << block << " n " << n << " kind " << kind;
      }
    }
  }
  EXPECT_EQ(failures, 0) << "in " << cases << " cases";
}

// ---- attention, softmax, SwiGLU ----------------------------------------------------------------

TEST_P(KernelConformance, AttentionScoresAndValues) {
  Rng rng;
  for (int hs : {1, 2, 3, 4, 6, 7, 8, 9, 12, 15, 16, 17, 24, 31, 32, 33, 48, 64, 80, 128}) {
    for (int n : {1, 2, 5, 17, 40, 64}) {
      for (int kind = 0; kind < 3; ++kind) {  // ordinary values; huge (sums overflow); tiny (subnormal products)
        const float mag = kind == 0 ? 1.0f : kind == 1 ? 1e19f : 1e-21f;
        const size_t stride = static_cast<size_t>(hs) * 3 + 5;  // GQA-like rows with other heads between
        std::vector<float> keys(stride * n), values(stride * n), q(hs);
        for (float& v : keys) v = rng.uniform(-3, 3) * mag;
        for (float& v : values) v = rng.uniform(-3, 3) * mag;
        for (float& v : q) v = rng.uniform(-3, 3) * mag;
        keys[0] = -0.0f;
        std::vector<float> s_ref(n), s_got(n);
        const float scale = std::sqrt(static_cast<float>(hs));
        ref().attn_scores(q.data(), keys.data() + 2, stride, n, hs, scale, s_ref.data());
        k().attn_scores(q.data(), keys.data() + 2, stride, n, hs, scale, s_got.data());
        ASSERT_TRUE(same_bits(s_ref, s_got)) << "hs " << hs << " n " << n << " kind " << kind;
        std::vector<float> att(n);
        for (float& v : att) v = rng.uniform(0, 1);
        std::vector<float> o_ref(hs), o_got(hs);
        ref().attn_values(att.data(), values.data() + 1, stride, n, hs, o_ref.data());
        k().attn_values(att.data(), values.data() + 1, stride, n, hs, o_got.data());
        ASSERT_TRUE(same_bits(o_ref, o_got)) << "hs " << hs << " n " << n << " kind " << kind;
      }
    }
  }
}

// Several heads of one position at once (attn_heads): the scores, weights and outputs of every head
// in the range equal the reference's per-head kernels', for head sizes with and without full
// eight-lane slices, GQA groups of 1-4 (and a range that cuts a group, as a thread's share does),
// position counts around the eight-position blocks, ordinary, huge and tiny data and the odd -inf
// score; heads outside the range are left alone.
TEST_P(KernelConformance, AttentionHeads) {
  Rng rng;
  struct Shape { int heads, kv_heads, h0, h1; };
  const Shape shapes[] = {{1, 1, 0, 1}, {8, 4, 0, 8}, {8, 4, 3, 7}, {8, 8, 0, 8}, {3, 1, 0, 3},
                          {12, 4, 0, 12}, {10, 5, 1, 10}, {16, 2, 0, 16}, {2, 1, 1, 2}};
  for (int hs : {1, 3, 7, 8, 9, 12, 16, 17, 24, 32, 33, 64}) {
    for (const Shape& sh : shapes) {
      for (int n : {1, 2, 7, 8, 9, 16, 17, 40, 65}) {
        for (int kind = 0; kind < 3; ++kind) {  // ordinary values; huge (sums overflow); tiny (subnormal products)
          const float mag = kind == 0 ? 1.0f : kind == 1 ? 1e19f : 1e-21f;
          const size_t stride = static_cast<size_t>(hs) * sh.kv_heads + 3;  // rows a little longer than kv_dim
          const size_t att_stride = static_cast<size_t>(n) + 5;
          std::vector<float> keys(stride * n + 8), values(stride * n + 8), q(static_cast<size_t>(hs) * sh.heads);
          for (float& v : keys) v = rng.uniform(-3, 3) * mag;
          for (float& v : values) v = rng.uniform(-3, 3) * mag;
          for (float& v : q) v = rng.uniform(-3, 3) * mag;
          keys[1] = -0.0f;
          if (n > 3) keys[2 * stride + 1] = -std::numeric_limits<float>::infinity();
          std::vector<float> att_ref(att_stride * sh.heads, 7.0f), out_ref(q.size(), 7.0f);
          std::vector<float> att_got = att_ref, out_got = out_ref;
          AttnHeads a{q.data(), keys.data() + 1, values.data() + 2, stride, att_ref.data(), att_stride,
                      out_ref.data(), n, hs, sh.heads / sh.kv_heads, std::sqrt(static_cast<float>(hs))};
          ref().attn_heads(ref(), a, sh.h0, sh.h1);
          a.att = att_got.data();
          a.out = out_got.data();
          k().attn_heads(k(), a, sh.h0, sh.h1);
          ASSERT_TRUE(same_bits(att_ref, att_got)) << "att, hs " << hs << " heads " << sh.heads << "/" << sh.kv_heads
                                                   << " [" << sh.h0 << ", " << sh.h1 << ") n " << n << " kind " << kind;
          ASSERT_TRUE(same_bits(out_ref, out_got)) << "out, hs " << hs << " heads " << sh.heads << "/" << sh.kv_heads
                                                   << " [" << sh.h0 << ", " << sh.h1 << ") n " << n << " kind " << kind;
        }
      }
    }
  }
}

TEST_P(KernelConformance, Softmax) {
  Rng rng;
  for (int n : {1, 2, 7, 8, 9, 15, 16, 17, 100, 512, 1000}) {
    for (float spread : {0.1f, 10.0f, 200.0f}) {
      std::vector<float> a(n);
      for (float& v : a) v = rng.uniform(-spread, spread);
      if (n > 3) { a[1] = -0.0f; a[2] = 0.0f; a[3] = -std::numeric_limits<float>::infinity(); }
      std::vector<float> b = a;
      ref().softmax(a.data(), n);
      k().softmax(b.data(), n);
      ASSERT_TRUE(same_bits(a, b)) << "n " << n << " spread " << spread;
    }
  }
}

TEST_P(KernelConformance, SwiGlu) {
  Rng rng;
  for (int n : {1, 7, 8, 9, 172, 1000}) {
    std::vector<float> g, u;
    swiglu_inputs(rng, n, &g, &u);
    std::vector<float> a = g, b = g;
    ref().silu_mul(a.data(), u.data(), n);
    k().silu_mul(b.data(), u.data(), n);
    ASSERT_TRUE(same_bits(a, b)) << "n " << n;
  }
}

// A vector exp inside softmax / SwiGLU equals mc_expf on every float of a dense sweep, the specials
// included: silu(g) * 1 = g / (1 + exp(-g)), so equal bits of silu over the sweep pin down the exp.
TEST_P(KernelConformance, VectorExpEqualsScalarExpEverywhere) {
  const std::vector<float> g = float_sweep(4093);
  std::vector<float> ones(g.size(), 1.0f), a = g, b = g;
  ref().silu_mul(a.data(), ones.data(), static_cast<int>(g.size()));
  k().silu_mul(b.data(), ones.data(), static_cast<int>(g.size()));
  EXPECT_TRUE(same_bits(a, b));
}

// ---- ternary (i2_s) and esp32-ai int4 (q4e) ----------------------------------------------------

// Random codes (all four i2_s codes, the invalid one included) times random or extreme int8
// activations, and the largest sums (every code the invalid 3, every activation -128: the int16
// steps of the AVX2 kernels at their bound); matvec over a row range, matmat over six columns (a
// whole group of four and a rest).
TEST_P(KernelConformance, I2sMatvecAndMatmat) {
  std::mt19937 rng(14);
  for (int cols : {128, 256, 640, 2048, 4224})
    for (int extreme = 0; extreme < 3; ++extreme) {
      const int rows = 9, n = 6;
      std::vector<uint8_t> w(static_cast<size_t>(rows) * cols / 4);
      for (auto& b : w) b = extreme == 2 ? 0xFF : static_cast<uint8_t>(rng());
      std::vector<int8_t> xq(static_cast<size_t>(n) * cols);
      for (auto& v : xq) v = extreme == 2 ? -128 : extreme ? ((rng() & 1) ? 127 : -128) : static_cast<int8_t>(rng());
      const float xs[n] = {0.013f, -0.5f, 3e-3f, 1.0f, -7e-5f, 0.25f};
      MatRef m;
      m.type = DType::kI2_S;
      m.data = w.data();
      m.rows = rows;
      m.cols = cols;
      m.row_bytes = static_cast<size_t>(cols) / 4;
      m.scale = 0.37f;
      std::vector<float> yk(static_cast<size_t>(n) * rows), yr(yk.size());
      k().matvec_i2s(m, xq.data(), xs, yk.data(), 2, rows);
      ref().matvec_i2s(m, xq.data(), xs, yr.data(), 2, rows);
      ASSERT_TRUE(same_bits(yk, yr)) << "matvec_i2s cols " << cols;
      k().matmat_i2s(m, xq.data(), cols, xs, n, yk.data(), rows, 0, rows);
      ref().matmat_i2s(m, xq.data(), cols, xs, n, yr.data(), rows, 0, rows);
      ASSERT_TRUE(same_bits(yk, yr)) << "matmat_i2s cols " << cols;
    }
}

// q4e with int8 and with f32 activations: odd widths, group sizes that start groups mid-byte or
// exceed the row, scales at unaligned addresses, f32 input with signed zeros and huge values.
TEST_P(KernelConformance, Q4e) {
  for (int cols : {1, 2, 31, 32, 33, 63, 64, 65, 95, 127, 128, 129, 415, 1000, 4099}) {
    for (int group : {1, 3, 7, 32, 33, 48, 64, 128, 100000}) {
      const int rows = 17;
      Q4eTensor t = make_q4e_tensor(rows, cols, group, 100 + cols * 7 + group);
      std::mt19937_64 rng(cols + group);
      uint8_t* codes = t.bytes.data() + 1 + 4;  // every third code byte random: codes 0 and 15 too
      for (size_t i = 0; i < q4e_code_bytes(rows, cols); i += 3) codes[i] = static_cast<uint8_t>(rng());
      std::vector<int8_t> xq(cols);
      // int8 activations as q4e_quantize_activations gives them: [-127, 127] (the avx2 kernel's
      // contract; -128 would not match the reference there)
      for (auto& v : xq) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
      const float xs = 0.013f;
      std::vector<float> a(rows, -1.0f), b(rows, -1.0f);
      ref().matvec_q4e_q8(t.m, xq.data(), &xs, a.data(), 1, rows);
      k().matvec_q4e_q8(t.m, xq.data(), &xs, b.data(), 1, rows);
      ASSERT_TRUE(same_bits(a, b)) << "int8 cols " << cols << " group " << group;
      // The listed rows (the gate-first FFN's live up rows: distinct, any order, runs and gaps): the
      // matvec's bits at those rows, the others untouched.
      const int32_t listed[] = {16, 3, 4, 5, 9, 0, 12, 13};
      std::vector<float> want(rows, -1.0f), got(rows, -1.0f);
      ref().matvec_q4e_q8(t.m, xq.data(), &xs, want.data(), 0, rows);
      for (int r : {1, 2, 6, 7, 8, 10, 11, 14, 15}) want[r] = -1.0f;
      k().matvec_q4e_q8_rows(t.m, xq.data(), &xs, listed, 8, got.data());
      ASSERT_TRUE(same_bits(want, got)) << "listed rows, cols " << cols << " group " << group;
      // f32 activations with signed zeros, tiny and huge values: rows 0..8 and 1..9 (8-row blocks + tails)
      std::vector<float> x(cols);
      std::normal_distribution<float> normal(0.0f, 1.0f);
      for (int j = 0; j < cols; ++j) x[j] = j % 11 == 3 ? -0.0f : j % 13 == 5 ? normal(rng) * 1e30f : normal(rng);
      for (int start : {0, 1}) {
        std::vector<float> fa(rows, -1.0f), fb(rows, -1.0f);
        ref().matvec_q4e_f32(t.m, x.data(), fa.data(), start, rows);
        k().matvec_q4e_f32(t.m, x.data(), fb.data(), start, rows);
        ASSERT_TRUE(same_bits(fa, fb)) << "f32 cols " << cols << " group " << group << " start " << start;
      }
    }
  }
}

// Every registered table but ref (the oracle), named by the registry: a table added to
// ---- the sparse ReLU FFN's down product (matvec_down_cols) ----------------------------------------

// k.matvec_down_cols over the non-zero columns of h (quantized per block as the dense path does)
// equals the reference's row-major block matvec bit for bit, for h with random live neurons, none,
// all, one per block, and the first and last of each block; weights of the full int range (q8_0: -128
// too) and scales +-0, subnormal and large (finite: build_down_cols refuses others).
void expect_down_cols_equal_dense(const KernelSet& k) {
  std::mt19937_64 rng(0xD0C01u);
  int cases = 0;
  for (DType type : {DType::kQ8_0, DType::kQ4_0, DType::kQ4G64}) {
    const int block = type == DType::kQ4G64 ? 64 : 32;
    for (int rows : {32, 64, 96, 160}) {
      for (int cols : {64, 128, 320}) {
        if (cols % block) continue;
        const size_t rb = dtype_row_bytes(type, cols);
        std::vector<uint8_t> bytes(rb * rows);
        for (auto& b : bytes) b = static_cast<uint8_t>(rng());
        const size_t bsize = type == DType::kQ4_0 ? 18 : 34;
        const uint16_t specials[] = {0x0000, 0x8000, 0x0001, 0x7BFF, 0xFBFF, 0x3C00};
        for (size_t o = 0; o < bytes.size(); o += bsize) {  // every block scale finite
          uint16_t d = static_cast<uint16_t>(rng() % 4 == 0 ? specials[rng() % 6] : (rng() & 0x33FF) | 0x0400);
          std::memcpy(&bytes[o], &d, 2);
        }
        MatRef w;
        w.type = type;
        w.rows = rows;
        w.cols = cols;
        w.row_bytes = rb;
        w.data = bytes.data();
        std::vector<uint8_t> mem(1 << 20);
        Arena arena(Tier::kHost, mem.data(), mem.size());
        DownCols dc;
        ASSERT_TRUE(build_down_cols(w, arena, &dc).ok());
        ASSERT_EQ(dc.type, type);
        for (int pattern = 0; pattern < 6; ++pattern) {
          std::vector<float> h(cols, 0.0f);
          for (int i = 0; i < cols; ++i) {
            const bool live = pattern == 0 ? rng() % 3 == 0 : pattern == 1 ? false : pattern == 2 ? true
                              : pattern == 3 ? i % block == static_cast<int>(rng() % block)
                              : pattern == 4 ? (i % block == 0 || i % block == block - 1) : (i / block) % 2 == 1;
            if (live) h[i] = std::ldexp(static_cast<float>(rng() % 2000) + 1.0f, static_cast<int>(rng() % 20) - 10);
            if (live && rng() % 2) h[i] = -h[i];
          }
          std::vector<int8_t> q(cols);
          std::vector<float> xs(cols / block);
          quantize_activations(h.data(), cols, block, q.data(), xs.data());
          std::vector<int32_t> live;
          for (int i = 0; i < cols; ++i)
            if (q[i] != 0) live.push_back(i);
          std::vector<float> want(rows), got(rows, -1.0f);
          if (type == DType::kQ8_0) matvec_q8_0_ref(w, q.data(), xs.data(), want.data(), 0, rows);
          if (type == DType::kQ4_0) matvec_q4_0_ref(w, q.data(), xs.data(), want.data(), 0, rows);
          if (type == DType::kQ4G64) matvec_q4g64_ref(w, q.data(), xs.data(), want.data(), 0, rows);
          // in two row ranges, as threads split them
          const int mid = (rows / 64) * 32;
          k.matvec_down_cols(dc, q.data(), xs.data(), live.data(), static_cast<int>(live.size()), got.data(), 0, mid);
          k.matvec_down_cols(dc, q.data(), xs.data(), live.data(), static_cast<int>(live.size()), got.data(), mid, rows);
          EXPECT_TRUE(same_bits(want, got)) << dtype_info(type)->name << " rows " << rows << " cols " << cols
                                            << " pattern " << pattern;
          ++cases;
        }
      }
    }
  }
  EXPECT_GT(cases, 100);
}

TEST_P(KernelConformance, SparseDownColumnsEqualDense) { expect_down_cols_equal_dense(k()); }
TEST(KernelConformanceRef, SparseDownColumnsEqualDense) { expect_down_cols_equal_dense(kernels_ref()); }

// The same for a q4e down matrix (esp32-ai's layout, the PLE models' FFN): k.matvec_down_cols over the
// non-zero columns of h quantized with one scale (q4e_quantize_activations, as the dense path) equals
// matvec_q4e_q8_ref bit for bit. Groups of 1, odd sizes (starting mid-byte), 32, 64 and one group per
// row, with a shorter last group; codes 0..15; scales +-0, subnormal, the f16 maximum and negative;
// columns of zero weights that are live; h with none, all, random, one per group, the ends of each
// group and every other group live.
void expect_q4e_down_cols_equal_dense(const KernelSet& k) {
  std::mt19937_64 rng(0xD0C4Eu);
  int cases = 0;
  for (int rows : {32, 64, 96}) {
    for (int cols : {63, 64, 100, 257}) {
      for (int group : {1, 7, 32, 33, 64, 100000}) {
        Q4eTensor t = make_q4e_tensor(rows, cols, group, rng());
        uint8_t* codes = t.bytes.data() + 1 + 4;
        for (size_t i = 0; i < q4e_code_bytes(rows, cols); i += 3) codes[i] = static_cast<uint8_t>(rng());
        const int zero_col = static_cast<int>(rng() % cols);  // every row's weight 0 in this column
        for (int r = 0; r < rows; ++r) {
          uint8_t& b = codes[static_cast<size_t>(r) * ((cols + 1) / 2) + zero_col / 2];
          b = zero_col % 2 ? static_cast<uint8_t>((b & 0x0F) | 0x80) : static_cast<uint8_t>((b & 0xF0) | 0x08);
        }
        uint8_t* sc = codes + q4e_code_bytes(rows, cols);
        const uint16_t specials[] = {0x0000, 0x8000, 0x0001, 0x83FF, 0x7BFF, 0xFBFF};
        for (size_t i = 0; i < q4e_scale_bytes(rows, cols, group); i += 2)
          if (rng() % 4 == 0) {
            const uint16_t d = specials[rng() % 6];
            sc[i] = static_cast<uint8_t>(d);
            sc[i + 1] = static_cast<uint8_t>(d >> 8);
          }
        std::vector<uint8_t> mem(1 << 20);
        Arena arena(Tier::kHost, mem.data(), mem.size());
        DownCols dc;
        ASSERT_TRUE(build_down_cols(t.m, arena, &dc).ok());
        ASSERT_EQ(dc.type, DType::kQ4E);
        const int g = group < cols ? group : cols;
        for (int pattern = 0; pattern < 7; ++pattern) {
          std::vector<float> h(cols, 0.0f);
          for (int i = 0; i < cols; ++i) {
            const bool live = pattern == 0 ? rng() % 3 == 0 : pattern == 1 ? false : pattern == 2 ? true
                              : pattern == 3 ? i % g == static_cast<int>(rng() % g)
                              : pattern == 4 ? (i % g == 0 || i % g == g - 1 || i == cols - 1)
                              : pattern == 5 ? (i / g) % 2 == 1 : i == zero_col;
            if (live) h[i] = std::ldexp(static_cast<float>(rng() % 2000) + 1.0f, static_cast<int>(rng() % 20) - 10);
            if (live && rng() % 2) h[i] = -h[i];
          }
          std::vector<int8_t> q(cols);
          float xs = 0.0f;
          q4e_quantize_activations(h.data(), cols, q.data(), &xs);
          std::vector<int32_t> live;
          for (int i = 0; i < cols; ++i)
            if (q[i] != 0) live.push_back(i);
          std::vector<float> want(rows), got(rows, -1.0f);
          matvec_q4e_q8_ref(t.m, q.data(), &xs, want.data(), 0, rows);
          const int mid = (rows / 64) * 32;
          k.matvec_down_cols(dc, q.data(), &xs, live.data(), static_cast<int>(live.size()), got.data(), 0, mid);
          k.matvec_down_cols(dc, q.data(), &xs, live.data(), static_cast<int>(live.size()), got.data(), mid, rows);
          EXPECT_TRUE(same_bits(want, got)) << "q4e rows " << rows << " cols " << cols << " group " << group
                                            << " pattern " << pattern;
          ++cases;
        }
      }
    }
  }
  EXPECT_GT(cases, 400);
}

TEST_P(KernelConformance, SparseDownColumnsQ4eEqualDense) { expect_q4e_down_cols_equal_dense(k()); }
TEST(KernelConformanceRef, SparseDownColumnsQ4eEqualDense) { expect_q4e_down_cols_equal_dense(kernels_ref()); }

// The listed rows of an i2_s matrix (the sparse FFN's live up rows): each y[rows[i]] has
// matvec_i2s_ref's bits, the rows not listed are left as they were; none, one, some, all rows.
TEST_P(KernelConformance, I2sListedRowsEqualMatvec) {
  std::mt19937_64 rng(0x12505u);
  for (int cols : {128, 640}) {
    const int rows = 77;
    std::vector<uint8_t> bytes(static_cast<size_t>(rows) * cols / 4);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    MatRef w;
    w.type = DType::kI2_S;
    w.rows = rows;
    w.cols = cols;
    w.row_bytes = static_cast<size_t>(cols) / 4;
    w.data = bytes.data();
    w.scale = 0.043f;
    std::vector<int8_t> q(cols);
    for (auto& v : q) v = static_cast<int8_t>(rng());
    const float xs = 0.37f;
    std::vector<float> want(rows);
    matvec_i2s_ref(w, q.data(), &xs, want.data(), 0, rows);
    for (int pattern = 0; pattern < 4; ++pattern) {
      std::vector<int32_t> list;
      for (int r = 0; r < rows; ++r)
        if (pattern == 1 ? r == 40 : pattern == 2 ? rng() % 3 == 0 : pattern == 3) list.push_back(r);
      std::vector<float> got(rows, -7.0f);
      k().matvec_i2s_rows(w, q.data(), &xs, list.data(), static_cast<int>(list.size()), got.data());
      std::vector<float> expect(rows, -7.0f);
      for (int32_t r : list) expect[r] = want[r];
      EXPECT_TRUE(same_bits(expect, got)) << "cols " << cols << " pattern " << pattern;
    }
  }
}

// The same for an i2_s down matrix (a ternary model's FFN): k.matvec_down_cols over the non-zero
// columns of h quantized as the dense path does (quantize_i8s, one scale) equals matvec_i2s_ref bit for
// bit. Random bytes (every code, 3 included: the i2_s kernels read it as weight 2); rows 32 .. 2112
// (whole and partial 128-row groups), cols 128 .. 640; scales 0, -0, subnormal, negative, huge; h with
// random live neurons, none, all, one, the first and last column, and more than 64 live columns in a
// row (the int16 sums' flush); the live list with extra columns whose int8 value is 0 (harmless).
void expect_i2s_down_cols_equal_dense(const KernelSet& k) {
  std::mt19937_64 rng(0xD0C12u);
  int cases = 0;
  const float scales[] = {0.0371f, 0.0f, -0.0f, 1e-40f, -2.5f, 3e37f};
  for (int rows : {32, 64, 96, 128, 160, 416, 2112}) {  // 2112: beyond the x86 kernels' 2048-row blocks
    for (int cols : {128, 256, 640}) {
      if (rows > 416 && cols > 128) continue;
      const size_t rb = static_cast<size_t>(cols) / 4;
      std::vector<uint8_t> bytes(rb * rows);
      for (auto& b : bytes) b = static_cast<uint8_t>(rng());
      MatRef w;
      w.type = DType::kI2_S;
      w.rows = rows;
      w.cols = cols;
      w.row_bytes = rb;
      w.data = bytes.data();
      w.scale = scales[cases % 6];
      std::vector<uint8_t> mem(1 << 20);
      Arena arena(Tier::kHost, mem.data(), mem.size());
      DownCols dc;
      ASSERT_TRUE(build_down_cols(w, arena, &dc).ok());
      ASSERT_EQ(dc.type, DType::kI2_S);
      for (int pattern = 0; pattern < 7; ++pattern) {
        std::vector<float> h(cols, 0.0f);
        for (int i = 0; i < cols; ++i) {
          const bool live = pattern == 0 ? rng() % 3 == 0 : pattern == 1 ? false : pattern == 2 ? true
                            : pattern == 3 ? i == cols / 3 : pattern == 4 ? (i == 0 || i == cols - 1)
                            : pattern == 5 ? rng() % 8 != 0 : i % 2 == 0;
          if (live) h[i] = std::ldexp(static_cast<float>(rng() % 2000) + 1.0f, static_cast<int>(rng() % 20) - 10);
          if (live && rng() % 2) h[i] = -h[i];
        }
        if (pattern == 2) h[5] = -1e4f;  // a q of -127 and, rounded up, others of +-127
        std::vector<int8_t> q(cols);
        float xs = 0.0f;
        quantize_i8s(h.data(), cols, q.data(), &xs);
        if (pattern == 2) q[7] = -128;  // the int8 range's end (quantize_i8s clamps to [-128, 127])
        std::vector<int32_t> live;
        for (int i = 0; i < cols; ++i)
          if (q[i] != 0 || (pattern == 6 && i % 5 == 1)) live.push_back(i);
        std::vector<float> want(rows), got(rows, -1.0f);
        matvec_i2s_ref(w, q.data(), &xs, want.data(), 0, rows);
        const int mid = (rows / 64) * 32;
        k.matvec_down_cols(dc, q.data(), &xs, live.data(), static_cast<int>(live.size()), got.data(), 0, mid);
        k.matvec_down_cols(dc, q.data(), &xs, live.data(), static_cast<int>(live.size()), got.data(), mid, rows);
        EXPECT_TRUE(same_bits(want, got)) << "i2_s rows " << rows << " cols " << cols << " pattern " << pattern
                                          << " scale " << w.scale;
        ++cases;
      }
    }
  }
  EXPECT_GT(cases, 100);
}

TEST_P(KernelConformance, SparseDownColumnsI2sEqualDense) { expect_i2s_down_cols_equal_dense(k()); }
TEST(KernelConformanceRef, SparseDownColumnsI2sEqualDense) { expect_i2s_down_cols_equal_dense(kernels_ref()); }

// build_down_cols leaves `w` row-major (not column-stored, nothing allocated): the dense path runs.
void expect_left_dense(const MatRef& w) {
  std::vector<uint8_t> mem(1 << 16);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  DownCols dc;
  ASSERT_TRUE(build_down_cols(w, arena, &dc).ok());
  EXPECT_EQ(dc.type, DType::kF32);
  EXPECT_EQ(dc.w, nullptr);
  EXPECT_EQ(arena.remaining(), mem.size());
}

// An i2_s down matrix whose rows are not a multiple of 32 (or columns of 128) is not column-stored.
TEST(KernelConformanceRef, SparseDownColumnsI2sRefused) {
  for (int bad : {0, 1}) {
    const int rows = bad ? 33 : 32, cols = bad ? 128 : 64;
    std::vector<uint8_t> bytes(static_cast<size_t>(rows) * cols / 4, 0x55);
    MatRef w;
    w.type = DType::kI2_S;
    w.rows = rows;
    w.cols = cols;
    w.row_bytes = static_cast<size_t>(cols) / 4;
    w.data = bytes.data();
    expect_left_dense(w);
  }
}

// A q4e down matrix with a non-finite group scale, or rows not a multiple of 32, is not column-stored.
TEST(KernelConformanceRef, SparseDownColumnsQ4eRefused) {
  for (int bad : {0, 1}) {
    Q4eTensor t = make_q4e_tensor(bad ? 33 : 32, 40, 8, 7);
    if (!bad) {
      uint8_t* sc = t.bytes.data() + 1 + 4 + q4e_code_bytes(32, 40) + 2 * 13;
      sc[0] = 0x00;
      sc[1] = 0x7E;  // a NaN
    }
    expect_left_dense(t.m);
  }
}

// A down matrix with a non-finite block scale is not column-stored (0 * inf would be a NaN the
// skipped block's term gives in the dense sum): the dense path runs.
TEST(KernelConformanceRef, SparseDownColumnsRefuseNonFiniteScales) {
  std::vector<uint8_t> bytes(2 * 34 * 32, 0);
  const uint16_t inf = 0x7C00;
  std::memcpy(&bytes[34 * 5], &inf, 2);
  MatRef w;
  w.type = DType::kQ8_0;
  w.rows = 32;
  w.cols = 64;
  w.row_bytes = 68;
  w.data = bytes.data();
  expect_left_dense(w);
}

// kernels/dispatch.cpp's list is in this suite.
std::vector<std::string> registered_tables() {
  int n = 0;
  const KernelTable* t = kernel_tables(&n);
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i)
    if (std::string(t[i].name) != "ref") names.push_back(t[i].name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Registered, KernelConformance, testing::ValuesIn(registered_tables()),
                         [](const testing::TestParamInfo<std::string>& info) { return info.param; });
// A build with the reference alone (no SIMD table compiled in) has nothing to compare.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(KernelConformance);

}  // namespace
}  // namespace mcullm
