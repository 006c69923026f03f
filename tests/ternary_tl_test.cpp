// TL1 / TL2 packings (quant/ternary.h): geometry, hand-placed bytes, round trips on random and
// adversarial matrices (zeros, all -1, all +1, pair tails), corrupt indices, conversions.
#include <random>
#include <vector>

#include "quant/ternary.h"
#include "test_support.h"

namespace mcullm {
namespace {

std::vector<int8_t> random_matrix(int M, int K, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-1, 1);
  std::vector<int8_t> w(static_cast<size_t>(M) * K);
  for (auto& v : w) v = static_cast<int8_t>(d(rng));
  return w;
}

TlTiling tiling(int BM, int BK, int bm) {
  TlTiling t;
  t.BM = BM;
  t.BK = BK;
  t.bm = bm;
  return t;
}

void expect_round_trip(TlType type, const TlTiling& t, const std::vector<int8_t>& w, int M, int K) {
  const size_t bytes = tl_packed_bytes(type, M, K, t);
  ASSERT_GT(bytes, 0u) << tl_type_name(type) << " " << M << "x" << K;
  std::vector<uint8_t> packed(bytes + 1, 0xA5);
  ASSERT_TRUE(tl_pack(type, t, w.data(), M, K, packed.data()));
  EXPECT_EQ(packed[bytes], 0xA5) << "wrote past tl_packed_bytes";
  std::vector<int8_t> back(w.size(), 99);
  ASSERT_TRUE(tl_unpack(type, t, packed.data(), M, K, back.data()));
  EXPECT_EQ(back, w) << tl_type_name(type) << " " << M << "x" << K << " BM " << t.BM << " BK " << t.BK << " bm " << t.bm;
}

TEST(TernaryTl, Geometry) {
  // bitnet.cpp's TL2 file size formula: (K - 256) * M * 5 / 24 + 256 * M / 4, then the scale.
  const TlTiling t2 = tiling(256, 96, 32);
  EXPECT_EQ(tl_packed_bytes(TlType::kTL2, 768, 768, t2), 768u * 768 * 5 / 24);
  EXPECT_EQ(tl_scale_offset(TlType::kTL2, 768, 768, t2), 512u * 768 * 5 / 24 + 256 * 768 / 4);
  EXPECT_EQ(tl_tensor_bytes(TlType::kTL2, 768, 768, t2), tl_scale_offset(TlType::kTL2, 768, 768, t2) + 32);
  EXPECT_EQ(tl_three_k(TlType::kTL2, 2560, t2), 2496);  // 2560 % 96 = 64 columns go to pairs
  EXPECT_EQ(tl_packed_bytes(TlType::kTL2, 256, 2560, t2), 256u * 2496 * 5 / 24 + 256 * 64 / 4);
  EXPECT_EQ(tl_packed_bytes(TlType::kTL1, 256, 768, tiling(256, 128, 32)), 256u * 768 / 4);
  // Refused: M not a multiple of BM, TL2 pair tail not a multiple of 32, BK not a multiple of 24,
  // TL2 bm other than 32, BK past the int16 bound, TL1 K not a multiple of BK, bad bm.
  EXPECT_FALSE(tl_tiling_valid(TlType::kTL2, 100, 768, t2));
  EXPECT_FALSE(tl_tiling_valid(TlType::kTL2, 256, 96 + 16, t2));
  EXPECT_FALSE(tl_tiling_valid(TlType::kTL2, 256, 768, tiling(256, 64, 32)));
  EXPECT_FALSE(tl_tiling_valid(TlType::kTL2, 256, 768, tiling(256, 96, 64)));
  EXPECT_FALSE(tl_tiling_valid(TlType::kTL2, 256, 768, tiling(256, 264, 32)));
  EXPECT_FALSE(tl_tiling_valid(TlType::kTL1, 256, 96, tiling(256, 64, 32)));
  EXPECT_FALSE(tl_tiling_valid(TlType::kTL1, 256, 128, tiling(256, 64, 48)));
  EXPECT_FALSE(tl_tiling_valid(TlType::kTL1, 256, 512, tiling(256, 512, 32)));
  EXPECT_FALSE(tl_tiling_valid(TlType::kTL1, 0, 128, tiling(256, 64, 32)));
  EXPECT_FALSE(tl_tiling_valid(TlType::kTL1, -256, 128, tiling(256, 64, 32)));
  EXPECT_EQ(tl_packed_bytes(TlType::kTL2, 100, 768, t2), 0u);
  EXPECT_EQ(tl_tensor_bytes(TlType::kTL2, 100, 768, t2), 0u);
  // Defaults fit every BitNet shape and the benchmark shapes.
  const int shapes[][2] = {{768, 768}, {3072, 768}, {768, 3072}, {2560, 2560}, {6912, 2560}, {2560, 6912}, {1536, 4096}};
  for (const auto& s : shapes)
    for (TlType type : {TlType::kTL1, TlType::kTL2}) {
      const TlTiling t = tl_default_tiling(type, s[0], s[1]);
      EXPECT_TRUE(tl_tiling_valid(type, s[0], s[1], t)) << tl_type_name(type) << " " << s[0] << "x" << s[1];
    }
  EXPECT_EQ(tl_default_tiling(TlType::kTL2, 768, 768).BK, 96);
  EXPECT_EQ(tl_default_tiling(TlType::kTL2, 768, 768).BM, 256);
  EXPECT_EQ(tl_default_tiling(TlType::kTL2, 17, 768).BM, 0);  // no tiling fits
  TlType type;
  EXPECT_TRUE(tl_type_by_name("tl2", &type));
  EXPECT_EQ(type, TlType::kTL2);
  EXPECT_FALSE(tl_type_by_name("tl3", &type));
  EXPECT_FALSE(tl_type_by_name(nullptr, &type));
}

TEST(TernaryTl, Tl2HandPlacedBytes) {
  // 32 rows x 24 columns, BK 24: 8 triples a row, no pair part. Index bytes: [4 pairs of triples][32].
  const int M = 32, K = 24;
  const TlTiling t = tiling(32, 24, 32);
  std::vector<int8_t> w(M * K, 0);
  w[0] = 1;                    // row 0, triple 0 = (1, 0, 0): v = 9
  w[8 * K + 3 + 2] = -1;       // row 8, triple 1 = (0, 0, -1): v = -1
  w[31 * K + 21] = -1;         // row 31, triple 7 = (-1, 1, 1): v = -5
  w[31 * K + 22] = 1;
  w[31 * K + 23] = 1;
  std::vector<uint8_t> p(tl_packed_bytes(TlType::kTL2, M, K, t));
  ASSERT_EQ(p.size(), 32u * 24 / 6 + 32 * 24 / 24);
  ASSERT_TRUE(tl_pack(TlType::kTL2, t, w.data(), M, K, p.data()));
  EXPECT_EQ(p[0], 0x90);           // row 0 at byte 0, triple 0 in the high nibble
  EXPECT_EQ(p[16], 0x01);          // row 8 sits at byte 16 (quarters 0, 2, 1, 3), triple 1 low nibble
  EXPECT_EQ(p[3 * 32 + 31], 0x05); // row 31, pair of triples 3, low nibble
  // Sign words start at 128: word c, bit 15 - i = triple i / 2, row 16 * (i % 2) + c.
  const uint8_t* s = p.data() + 128;
  EXPECT_EQ(s[2 * 8 + 1], 1 << (13 - 8));  // row 8 = word 8, triple 1 (i = 2): bit 13
  EXPECT_EQ(s[2 * 15], 1 << 0);            // row 31 = word 15, triple 7 (i = 15): bit 0
  int ones = 0;
  for (size_t i = 0; i < 32; ++i) ones += __builtin_popcount(s[i]);
  EXPECT_EQ(ones, 2);
}

TEST(TernaryTl, Tl1HandPlacedBytes) {
  // bm 32 -> by 8 weights (4 pairs) per block; units of 16 bytes = 16 rows x 2 pairs.
  const int M = 32, K = 8;
  const TlTiling t = tiling(32, 8, 32);
  std::vector<int8_t> w(M * K, 0);
  w[0] = -1;              // row 0 pair 0 = (-1, 0): 1
  w[0 * K + 3] = 1;       // row 0 pair 1 = (0, 1): 5
  w[20 * K + 4] = 1;      // row 20 pair 2 = (1, 0): 7
  std::vector<uint8_t> p(tl_packed_bytes(TlType::kTL1, M, K, t));
  ASSERT_EQ(p.size(), 64u);
  ASSERT_TRUE(tl_pack(TlType::kTL1, t, w.data(), M, K, p.data()));
  EXPECT_EQ(p[0], 0x15);
  EXPECT_EQ(p[1], 0x44);                 // zeros are index 4
  // order: row group (bm / 16) outside pair quad (by / 4): row 20 = group 1, quad 1 -> unit 3
  EXPECT_EQ(p[3 * 16 + 4], 0x74);
}

TEST(TernaryTl, RoundTripsRandomAndAdversarial) {
  struct Case {
    TlType type;
    int M, K, BM, BK, bm;
  };
  const Case cases[] = {
      {TlType::kTL2, 32, 24, 32, 24, 32},    {TlType::kTL2, 64, 80, 32, 48, 32},   // 48 triples + 32 pairs
      {TlType::kTL2, 96, 32, 96, 48, 32},    {TlType::kTL2, 64, 32, 64, 48, 32},   // pair part only (K < BK)
      {TlType::kTL2, 256, 768, 128, 96, 32}, {TlType::kTL2, 160, 2560, 160, 96, 32}, {TlType::kTL2, 128, 1056, 64, 240, 32},
      {TlType::kTL1, 16, 16, 16, 16, 16},    {TlType::kTL1, 64, 72, 32, 8, 32},    {TlType::kTL1, 128, 256, 64, 64, 64},
      {TlType::kTL1, 256, 768, 256, 128, 32}, {TlType::kTL1, 192, 96, 64, 32, 16},
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    const TlTiling t = tiling(c.BM, c.BK, c.bm);
    ASSERT_TRUE(tl_tiling_valid(c.type, c.M, c.K, t)) << c.M << "x" << c.K;
    const size_t n = static_cast<size_t>(c.M) * c.K;
    expect_round_trip(c.type, t, random_matrix(c.M, c.K, seed++), c.M, c.K);
    for (int v : {0, -1, 1}) expect_round_trip(c.type, t, std::vector<int8_t>(n, static_cast<int8_t>(v)), c.M, c.K);
    std::vector<int8_t> alt(n);  // alternating +1 / -1 (every sign bit flips along a row)
    for (size_t i = 0; i < n; ++i) alt[i] = static_cast<int8_t>(i % 2 ? 1 : -1);
    expect_round_trip(c.type, t, alt, c.M, c.K);
  }
}

TEST(TernaryTl, RefusesBadInputAndCorruptIndices) {
  const TlTiling t = tiling(32, 48, 32);
  std::vector<int8_t> w(32 * 80, 0);
  std::vector<uint8_t> p(tl_packed_bytes(TlType::kTL2, 32, 80, t));
  w[7] = 2;
  EXPECT_FALSE(tl_pack(TlType::kTL2, t, w.data(), 32, 80, p.data()));
  w[7] = 0;
  EXPECT_FALSE(tl_pack(TlType::kTL2, t, w.data(), 33, 80, p.data()));
  ASSERT_TRUE(tl_pack(TlType::kTL2, t, w.data(), 32, 80, p.data()));
  p[5] = 0xE0;  // triple index 14 is not a pattern
  EXPECT_FALSE(tl_unpack(TlType::kTL2, t, p.data(), 32, 80, w.data()));
  ASSERT_TRUE(tl_pack(TlType::kTL2, t, std::vector<int8_t>(32 * 80, 0).data(), 32, 80, p.data()));
  p[p.size() - 1] = 0x09;  // pair index 9 in the pair part
  EXPECT_FALSE(tl_unpack(TlType::kTL2, t, p.data(), 32, 80, w.data()));
  const TlTiling t1 = tiling(32, 8, 32);
  std::vector<uint8_t> p1(tl_packed_bytes(TlType::kTL1, 32, 8, t1), 0xFF);
  EXPECT_FALSE(tl_unpack(TlType::kTL1, t1, p1.data(), 32, 8, w.data()));
}

TEST(TernaryTl, ConvertsBetweenRowLayoutsAndTl) {
  const int M = 256, K = 768;
  const std::vector<int8_t> w = random_matrix(M, K, 77);
  for (TernaryLayout rows : {TernaryLayout::kI2S, TernaryLayout::kTQ2_0, TernaryLayout::kBitllama2cMsb}) {
    const size_t rb = ternary_row_bytes(rows, K);
    std::vector<uint8_t> src(rb * M), back(rb * M);
    for (int r = 0; r < M; ++r) ASSERT_TRUE(ternary_pack_row(rows, w.data() + r * K, K, src.data() + r * rb));
    for (TlType type : {TlType::kTL1, TlType::kTL2}) {
      const TlTiling t = tl_default_tiling(type, M, K);
      std::vector<uint8_t> tl(tl_packed_bytes(type, M, K, t));
      std::vector<int8_t> scratch(static_cast<size_t>(M) * K);
      ASSERT_TRUE(ternary_rows_to_tl(rows, src.data(), rb, type, t, M, K, tl.data(), scratch.data()));
      ASSERT_TRUE(tl_to_ternary_rows(type, t, tl.data(), rows, back.data(), rb, M, K, scratch.data()));
      EXPECT_EQ(back, src) << ternary_layout_name(rows) << " via " << tl_type_name(type);
    }
  }
}

}  // namespace
}  // namespace mcullm
