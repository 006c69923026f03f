// Two-stage and pruned vocabulary heads on synthetic heads: the pruned head always returns the full
// argmax (lowest id on ties) for f32, q8_0, q4g64 and q4e heads with f32 or int8 inputs; the
// two-stage head equals it when it reads every group; the grouping is a permutation of the rows.
#include "model/vocab_head.h"

#include <algorithm>
#include <random>
#include <vector>

#include "model/vocab_head_build_host.h"
#include "quant/blocks.h"
#include "quant/q4e.h"
#include "test_support.h"

namespace mcullm {
namespace {

struct Head {
  std::vector<uint8_t> bytes;
  MatRef m;
};

Head make_head(DType type, int rows, int cols, std::mt19937_64& rng, bool duplicate_rows) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(rows) * cols);
  for (float& v : w) v = normal(rng);
  if (duplicate_rows)  // equal rows make equal logits: ties the argmax must break by the lowest id
    for (int r = 1; r < rows; r += 3) std::copy_n(&w[0], cols, &w[static_cast<size_t>(r) * cols]);
  Head h;
  if (type == DType::kQ4E) {
    h.bytes.resize(q4e_tensor_bytes(rows, cols, 32));
    q4e_quantize_tensor(w.data(), rows, cols, 32, h.bytes.data());
    q4e_bind(h.bytes.data(), rows, cols, &h.m);
    return h;
  }
  const size_t rb = dtype_row_bytes(type, cols);
  h.bytes.resize(rows * rb);
  for (int r = 0; r < rows; ++r) quantize_row(type, &w[static_cast<size_t>(r) * cols], h.bytes.data() + r * rb, cols);
  h.m.type = type;
  h.m.data = h.bytes.data();
  h.m.rows = rows;
  h.m.cols = cols;
  h.m.row_bytes = rb;
  return h;
}

TEST(VocabHead, PrunedIsExactAndTwoStageOverAllGroupsToo) {
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const KernelSet& k = kernels_best();
  for (DType type : {DType::kF32, DType::kQ8_0, DType::kQ4G64, DType::kQ4E}) {
    for (bool dup : {false, true}) {
      const int rows = 700, cols = 64;
      Head head = make_head(type, rows, cols, rng, dup);
      std::vector<uint8_t> mem(1 << 20);
      Arena arena(Tier::kHost, mem.data(), mem.size());
      VocabHead vh;
      ASSERT_TRUE(build_vocab_head(head.m, 40, 5, arena, &vh).ok());
      std::vector<int> seen(rows, 0);
      for (int r = 0; r < rows; ++r) ++seen[vh.token_of_row[r]];
      EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), rows);
      EXPECT_EQ(vh.group_start[vh.n_groups], rows);
      std::vector<float> x(cols), full(rows), scratch(rows), xs(cols);
      std::vector<int8_t> xq(cols);
      for (int trial = 0; trial < 60; ++trial) {
        for (float& v : x) v = normal(rng) * (trial % 3 == 0 ? 10.0f : 1.0f);
        ActVec act;
        act.f = x.data();
        const int block = type == DType::kQ4E ? (trial % 2 ? cols : 0) : dtype_info(type)->act_block;
        if (block > 0) {
          if (type == DType::kQ4E) q4e_quantize_activations(x.data(), cols, xq.data(), xs.data());
          else quantize_activations(x.data(), cols, block, xq.data(), xs.data());
          act.q = xq.data();
          act.scales = xs.data();
          act.block = block;
        }
        matvec(k, head.m, act, full.data(), 0, rows);
        const int best = static_cast<int>(std::max_element(full.begin(), full.end()) - full.begin());  // first max
        HeadStats st;
        EXPECT_EQ(pruned_argmax(k, vh, act, scratch.data(), &st), best) << dtype_info(type)->name << " trial " << trial;
        EXPECT_LE(st.groups_visited, vh.n_groups);
        EXPECT_EQ(two_stage_argmax(k, vh, act, vh.n_groups, scratch.data(), &st), best);
        EXPECT_EQ(st.rows_computed, rows);
        two_stage_argmax(k, vh, act, 1, scratch.data(), &st);
        EXPECT_LT(st.rows_computed, rows);
      }
    }
  }
}

TEST(VocabHead, RefusesBadGroupCounts) {
  std::mt19937_64 rng(1);
  Head head = make_head(DType::kF32, 10, 8, rng, false);
  std::vector<uint8_t> mem(1 << 16);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  VocabHead vh;
  EXPECT_FALSE(build_vocab_head(head.m, 0, 3, arena, &vh).ok());
  EXPECT_FALSE(build_vocab_head(head.m, kMaxHeadGroups + 1, 3, arena, &vh).ok());
  ASSERT_TRUE(build_vocab_head(head.m, 50, 3, arena, &vh).ok());  // more groups than rows: one per row
  EXPECT_EQ(vh.n_groups, 10);
}

}  // namespace
}  // namespace mcullm
