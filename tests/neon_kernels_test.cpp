// The NEON table (aarch64) equals the reference bit for bit: f32 dot / matvec and attention on a
// sweep of lengths (every tail of the 16 lanes) with nasty values (signed zeros, overflow to inf,
// subnormal products), the quantized-block matvecs (q8_0, q4_0, q4g64), the i2_s matvec / matmat
// on random codes (all four i2_s codes, the invalid one included), q4e with int8 activations (group
// sizes that start groups mid-byte, odd widths, every nibble), and the whole table by name.
// Uses only the core library and gtest, so that the aarch64 cross build (tests/cross) runs it under
// qemu-aarch64; on other machines it is skipped (no NEON table).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "kernels/kernels.h"
#include "quant/blocks.h"
#include "quant/f16.h"
#include "quant/q4e.h"
#include "test_support.h"

namespace mcullm {
namespace {

#define NEON_OR_SKIP()                                                                          \
  const KernelSet* neon = kernels_neon();                                                       \
  if (neon == nullptr) MCULLM_SKIP_OR_FAIL("NEON", "no NEON table here (aarch64 builds only: tests/cross)"); \
  const KernelSet& ref = kernels_ref()

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Normal values, with every fourth kind of data one of: signed zeros, huge (sums overflow), tiny
// (subnormal products).
std::vector<float> values(std::mt19937& rng, size_t n, int kind) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) {
    x = normal(rng);
    if (kind == 1) x = (rng() % 3 == 0) ? ((rng() & 1) ? 0.0f : -0.0f) : x;
    if (kind == 2) x *= 1e19f;
    if (kind == 3) x *= 1e-21f;
  }
  return v;
}

std::vector<int> lengths() {
  std::vector<int> n;
  for (int i = 1; i <= 50; ++i) n.push_back(i);
  for (int i : {63, 64, 65, 127, 128, 129, 255, 256, 257, 768, 1000}) n.push_back(i);
  return n;
}

void expect_same(const std::vector<float>& a, const std::vector<float>& b, const char* what, int n) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(bits(a[i]), bits(b[i])) << what << " n=" << n << " at " << i << ": " << a[i] << " vs " << b[i];
}

TEST(KernelsNeon, TableByNameIsNeon) {
  NEON_OR_SKIP();
  EXPECT_STREQ(neon->name, "neon");
  EXPECT_EQ(kernels_by_name("neon"), neon);
  EXPECT_EQ(&kernels_best(), neon);  // `auto` on aarch64
  EXPECT_NE(neon->matvec_f32, ref.matvec_f32);
  EXPECT_NE(neon->matvec_i2s, ref.matvec_i2s);
  EXPECT_NE(neon->matvec_q4e_q8, ref.matvec_q4e_q8);
}

TEST(KernelsNeon, DotAndMatvecF32EqualRef) {
  NEON_OR_SKIP();
  std::mt19937 rng(11);
  for (int n : lengths())
    for (int kind = 0; kind < 4; ++kind) {
      const int rows = 5;
      auto w = values(rng, static_cast<size_t>(rows) * n, kind), x = values(rng, n, kind);
      ASSERT_EQ(bits(neon->dot_f32(w.data(), x.data(), n)), bits(ref.dot_f32(w.data(), x.data(), n))) << "n=" << n;
      const MatRef m = f32_matrix(w.data(), rows, n);
      std::vector<float> yn(rows, -1.0f), yr(rows, -1.0f);
      neon->matvec_f32(m, x.data(), yn.data(), 1, rows);  // rows [1, 5): row 0 untouched
      ref.matvec_f32(m, x.data(), yr.data(), 1, rows);
      expect_same(yn, yr, "matvec_f32", n);
    }
}

TEST(KernelsNeon, AttentionEqualsRef) {
  NEON_OR_SKIP();
  std::mt19937 rng(12);
  for (int hs : {1, 3, 4, 7, 8, 16, 17, 32, 48, 64})
    for (int n : {1, 2, 5, 19, 40})
      for (int kind = 0; kind < 4; ++kind) {
        const size_t stride = static_cast<size_t>(hs) + 5;
        auto q = values(rng, hs, kind), kv = values(rng, stride * n, kind), att = values(rng, n, 0);
        std::vector<float> sn(n), sr(n), on(hs), orf(hs);
        neon->attn_scores(q.data(), kv.data(), stride, n, hs, 2.5f, sn.data());
        ref.attn_scores(q.data(), kv.data(), stride, n, hs, 2.5f, sr.data());
        expect_same(sn, sr, "attn_scores", hs);
        neon->attn_values(att.data(), kv.data(), stride, n, hs, on.data());
        ref.attn_values(att.data(), kv.data(), stride, n, hs, orf.data());
        expect_same(on, orf, "attn_values", hs);
      }
}

// Random blocks (any nibble / int8 code, finite f16 scales) times random int8 activations.
template <typename Block>
void check_blocks(DType type, int block, void (*const KernelSet::*fn)(const MatRef&, const int8_t*, const float*,
                                                                       float*, int, int)) {
  NEON_OR_SKIP();
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> scale(-2.0f, 2.0f);
  for (int nb : {1, 2, 7, 8, 9, 17, 40}) {
    const int rows = 6, cols = nb * block;
    std::vector<Block> w(static_cast<size_t>(rows) * nb);
    for (auto& b : w) {
      for (auto& q : b.qs) q = static_cast<std::remove_reference_t<decltype(q)>>(rng());
      b.d = f32_to_f16(scale(rng));
    }
    std::vector<int8_t> xq(cols);
    for (auto& v : xq) v = static_cast<int8_t>(rng());
    std::vector<float> xs(nb);
    for (auto& s : xs) s = scale(rng) * 0.01f;
    MatRef m;
    m.type = type;
    m.data = w.data();
    m.rows = rows;
    m.cols = cols;
    m.row_bytes = sizeof(Block) * nb;
    std::vector<float> yn(rows), yr(rows);
    (neon->*fn)(m, xq.data(), xs.data(), yn.data(), 0, rows);
    (ref.*fn)(m, xq.data(), xs.data(), yr.data(), 0, rows);
    expect_same(yn, yr, dtype_info(type)->name, nb);
  }
}

TEST(KernelsNeon, Q8_0EqualsRef) { check_blocks<BlockQ8_0>(DType::kQ8_0, 32, &KernelSet::matvec_q8_0); }
TEST(KernelsNeon, Q4_0EqualsRef) { check_blocks<BlockQ4_0>(DType::kQ4_0, 32, &KernelSet::matvec_q4_0); }
TEST(KernelsNeon, Q4G64EqualsRef) { check_blocks<BlockQ4G64>(DType::kQ4G64, 64, &KernelSet::matvec_q4g64); }

TEST(KernelsNeon, I2sMatvecAndMatmatEqualRef) {
  NEON_OR_SKIP();
  std::mt19937 rng(14);
  for (int cols : {128, 256, 640, 2048})
    for (int extreme = 0; extreme < 2; ++extreme) {
      const int rows = 9, n = 3;
      std::vector<uint8_t> w(static_cast<size_t>(rows) * cols / 4);
      for (auto& b : w) b = static_cast<uint8_t>(rng());
      std::vector<int8_t> xq(static_cast<size_t>(n) * cols);
      for (auto& v : xq) v = extreme ? ((rng() & 1) ? 127 : -128) : static_cast<int8_t>(rng());
      const float xs[n] = {0.013f, -0.5f, 3e-3f};
      MatRef m;
      m.type = DType::kI2_S;
      m.data = w.data();
      m.rows = rows;
      m.cols = cols;
      m.row_bytes = static_cast<size_t>(cols) / 4;
      m.scale = 0.37f;
      std::vector<float> yn(static_cast<size_t>(n) * rows), yr(yn.size());
      neon->matvec_i2s(m, xq.data(), xs, yn.data(), 2, rows);
      ref.matvec_i2s(m, xq.data(), xs, yr.data(), 2, rows);
      expect_same(yn, yr, "matvec_i2s", cols);
      neon->matmat_i2s(m, xq.data(), cols, xs, n, yn.data(), rows, 0, rows);
      ref.matmat_i2s(m, xq.data(), cols, xs, n, yr.data(), rows, 0, rows);
      expect_same(yn, yr, "matmat_i2s", cols);
    }
}

TEST(KernelsNeon, Q4eQ8EqualsRef) {
  NEON_OR_SKIP();
  std::mt19937 rng(15);
  for (int group : {32, 64, 48, 33, 7})
    for (int cols : {31, 32, 64, 95, 96, 130, 448}) {
      const int rows = 5;
      auto x = values(rng, static_cast<size_t>(rows) * cols, 0);
      std::vector<uint8_t> t(q4e_tensor_bytes(rows, cols, group));
      q4e_quantize_tensor(x.data(), rows, cols, group, t.data());
      for (size_t i = 4; i < 4 + q4e_code_bytes(rows, cols); i += 3) t[i] = static_cast<uint8_t>(rng());  // codes 0 and 15 too
      MatRef m;
      ASSERT_TRUE(q4e_bind(t.data(), rows, cols, &m));
      std::vector<int8_t> xq(cols);
      for (auto& v : xq) v = static_cast<int8_t>(rng());
      const float xs = 0.021f;
      std::vector<float> yn(rows), yr(rows);
      neon->matvec_q4e_q8(m, xq.data(), &xs, yn.data(), 0, rows);
      ref.matvec_q4e_q8(m, xq.data(), &xs, yr.data(), 0, rows);
      expect_same(yn, yr, "matvec_q4e_q8", cols * 100 + group);
    }
}

}  // namespace
}  // namespace mcullm
