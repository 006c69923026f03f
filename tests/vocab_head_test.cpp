// Two-stage and pruned vocabulary heads on synthetic heads: the pruned head always returns the full
// argmax (lowest id on ties) for f32, q8_0, q4g64 and q4e heads with f32 or int8 inputs; the
// two-stage head equals it when it reads every group; the grouping is a permutation of the rows.
#include "model/vocab_head.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "core/thread_pool_host.h"
#include "load/model_loader_host.h"
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

// The router tests' setup: a head of random f32 rows in `groups` groups (`iterations` rounds of
// k-means) and a router fitted on `n_calib` states drawn from `normal` (the test's own, so that its
// later draws continue the same stream).
struct RoutedHead {
  Head head;
  std::vector<uint8_t> mem = std::vector<uint8_t>(1 << 20);
  Arena arena;
  VocabHead vh, routed;
};
void make_routed_head(std::mt19937_64& rng, std::normal_distribution<float>& normal, int rows, int cols, int groups,
                      int iterations, int n_calib, RoutedHead* r) {
  r->head = make_head(DType::kF32, rows, cols, rng, false);
  r->arena.reset(Tier::kHost, r->mem.data(), r->mem.size());
  ASSERT_OK(build_vocab_head(r->head.m, groups, iterations, r->arena, &r->vh));
  std::vector<float> calib(static_cast<size_t>(n_calib) * cols);
  for (float& v : calib) v = normal(rng);
  ASSERT_OK(fit_head_router(r->vh, calib.data(), n_calib, r->arena, &r->routed));
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
      VocabHead routed;  // the same groups, ranked by a router fitted on random states
      std::vector<float> calib(200 * cols);
      for (float& v : calib) v = normal(rng);
      ASSERT_OK(fit_head_router(vh, calib.data(), 200, arena, &routed));
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
        EXPECT_EQ(two_stage_argmax(k, routed, act, vh.n_groups, scratch.data(), &st), best);
        EXPECT_EQ(st.bytes_read, static_cast<size_t>(vh.n_groups) * (cols + 8) + rows * head_row_bytes(head.m));
        two_stage_argmax(k, vh, act, 1, scratch.data(), &st);
        EXPECT_LT(st.rows_computed, rows);
      }
    }
  }
}

// One row per group: a group's largest logit is its row's logit, linear in x, so least squares
// recovers the rows and the router's first group is the argmax but for int8 rounding; the fit is
// deterministic. Centroid scoring is the same here (a centroid is its row): the router must match it.
TEST(VocabHead, TheRouterLearnsLinearGroupMaximaAndIsDeterministic) {
  std::mt19937_64 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int rows = 200, cols = 48, n = 1500;
  Head head = make_head(DType::kF32, rows, cols, rng, false);
  std::vector<uint8_t> mem(1 << 20);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  VocabHead vh, a, b;
  ASSERT_OK(build_vocab_head(head.m, rows, 0, arena, &vh));
  ASSERT_EQ(vh.n_groups, rows);
  std::vector<float> calib(static_cast<size_t>(n) * cols);
  for (float& v : calib) v = normal(rng) * 3.0f + 0.5f;  // an offset: the bias has something to fit
  ASSERT_OK(fit_head_router(vh, calib.data(), n, arena, &a));
  ASSERT_OK(fit_head_router(vh, calib.data(), n, arena, &b));
  ASSERT_NE(a.router, nullptr);
  EXPECT_EQ(0, std::memcmp(a.router, b.router, static_cast<size_t>(rows) * cols));
  EXPECT_EQ(0, std::memcmp(a.router_scale, b.router_scale, rows * 4));
  EXPECT_EQ(0, std::memcmp(a.router_bias, b.router_bias, rows * 4));
  const KernelSet& k = kernels_best();
  std::vector<float> x(cols), full(rows), scratch(rows);
  int agree = 0;
  const int trials = 400;
  for (int t = 0; t < trials; ++t) {
    for (float& v : x) v = normal(rng) * 3.0f + 0.5f;
    ActVec act;
    act.f = x.data();
    matvec(k, head.m, act, full.data(), 0, rows);
    const int best = static_cast<int>(std::max_element(full.begin(), full.end()) - full.begin());
    HeadStats st;
    agree += two_stage_argmax(k, a, act, 1, scratch.data(), &st) == best;
    EXPECT_EQ(st.rows_computed, 1);
  }
  EXPECT_GE(agree, trials * 95 / 100);
  // The router's scores through every kernel table (the int8 score kernel) equal their definition.
  std::vector<int8_t> q(cols + 16);
  std::vector<double> got(rows);
  for (int t = 0; t < 20; ++t) {
    for (float& v : x) v = normal(rng) * 3.0f + 0.5f;
    float qs = 0;
    q4e_quantize_activations(x.data(), cols, q.data(), &qs);
    std::vector<double> want(rows);
    for (int g = 0; g < rows; ++g) {
      int32_t acc = 0;
      for (int j = 0; j < cols; ++j) acc += a.router[static_cast<size_t>(g) * cols + j] * q[j];
      want[g] = static_cast<double>(static_cast<float>(acc) * a.router_scale[g] * qs + a.router_bias[g]);
    }
    int count = 0;
    const KernelTable* tables = kernel_tables(&count);
    for (int i = 0; i < count; ++i) {
      const KernelSet* ks = tables[i].get();
      if (!ks) continue;
      router_scores(*ks, a, x.data(), q.data() + (t & 1), got.data());  // an odd q too: the unaligned path
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), sizeof(double) * rows)) << tables[i].name;
    }
  }
  EXPECT_FALSE(fit_head_router(vh, calib.data(), 0, arena, &a).ok());
}

// The two-stage head reads the top T groups in the order a stable sort of the router's scores gives
// (ties: the lower group first), whatever T, with ties among the scores, and over 1 or 3 threads.
TEST(VocabHead, TwoStageReadsTheTopGroupsInScoreOrder) {
  std::mt19937_64 rng(21);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int rows = 120, cols = 32, groups = 24;
  RoutedHead r;
  make_routed_head(rng, normal, rows, cols, groups, 3, 300, &r);
  const VocabHead& fitted = r.routed;
  // Groups 3, 7 and 19 score alike: the same router row, scale and bias.
  std::vector<int8_t> router(fitted.router, fitted.router + static_cast<size_t>(groups) * cols);
  std::vector<float> scale(fitted.router_scale, fitted.router_scale + groups), bias(fitted.router_bias, fitted.router_bias + groups);
  for (int g : {7, 19}) {
    std::copy(router.begin() + 3 * cols, router.begin() + 4 * cols, router.begin() + static_cast<ptrdiff_t>(g) * cols);
    scale[static_cast<size_t>(g)] = scale[3];
    bias[static_cast<size_t>(g)] = bias[3];
  }
  VocabHead h = fitted;
  h.router = router.data();
  h.router_scale = scale.data();
  h.router_bias = bias.data();
  const KernelSet& k = kernels_best();
  HostThreadPool one(1, 0), three(3, 0);
  std::vector<float> x(cols), xe(cols), row_logits(head_scratch_floats(r.head.m)), logits(rows);
  std::vector<int8_t> q(cols + 16);
  int tied_in_top = 0;
  for (int t = 0; t < 60; ++t) {
    for (float& v : x) v = normal(rng);
    ActVec act;
    act.f = x.data();
    head_effective_input(act, cols, xe.data());
    std::vector<double> score(groups);
    router_scores(k, h, xe.data(), q.data(), score.data());
    std::vector<int> want(groups);
    std::iota(want.begin(), want.end(), 0);
    std::stable_sort(want.begin(), want.end(), [&](int a, int b) { return score[static_cast<size_t>(a)] > score[static_cast<size_t>(b)]; });
    for (int top : {1, 2, 5, groups}) {
      for (ThreadPool* pool : {static_cast<ThreadPool*>(&one), static_cast<ThreadPool*>(&three)}) {
        HeadVisit visit;
        HeadStats st;
        grouped_head_logits(*pool, k, h, HeadMode::kTwoStage, top, act, row_logits.data(), logits.data(), &st, &visit);
        ASSERT_EQ(visit.n, top);
        EXPECT_EQ(std::vector<int>(visit.groups, visit.groups + visit.n), std::vector<int>(want.begin(), want.begin() + top))
            << "trial " << t;
      }
    }
    const auto in = [&](int g) { return std::find(want.begin(), want.begin() + 5, g) != want.begin() + 5; };
    tied_in_top += in(3) && in(7);
  }
  EXPECT_GT(tied_in_top, 0);  // the tie was decided inside the top 5 at least once
}

// Groups of many rows: the router, fitted to each group's largest logit, ranks the group holding the
// argmax first more often than the centroids (which score a group's mean row) on states it was not fitted on.
TEST(VocabHead, TheRouterRanksGroupsBetterThanCentroids) {
  std::mt19937_64 rng(12);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int rows = 600, cols = 32, n = 4000;
  RoutedHead r;
  make_routed_head(rng, normal, rows, cols, 30, 5, n, &r);
  const Head& head = r.head;
  const VocabHead &vh = r.vh, &routed = r.routed;
  const KernelSet& k = kernels_best();
  std::vector<float> x(cols), full(rows), scratch(rows);
  int by_router = 0, by_centroid = 0;
  for (int t = 0; t < 500; ++t) {
    for (float& v : x) v = normal(rng);
    ActVec act;
    act.f = x.data();
    matvec(k, head.m, act, full.data(), 0, rows);
    const int best = static_cast<int>(std::max_element(full.begin(), full.end()) - full.begin());
    HeadStats st;
    by_router += two_stage_argmax(k, routed, act, 2, scratch.data(), &st) == best;
    by_centroid += two_stage_argmax(k, vh, act, 2, scratch.data(), &st) == best;
  }
  EXPECT_GT(by_router, by_centroid + 25) << by_router << " vs " << by_centroid << " of 500";
}

// In the logit metric, rows are near when their logits are: with states that move only the first
// coordinate, rows are grouped by that coordinate alone (plain k-means sees the others, which are
// larger), the grouping is deterministic, and the pruned head over it is still exact.
TEST(VocabHead, LogitMetricGroupsRowsByTheirLogitsOnTheStates) {
  std::mt19937_64 rng(13);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int rows = 120, cols = 16, n = 300;
  std::vector<float> w(static_cast<size_t>(rows) * cols);
  for (int r = 0; r < rows; ++r) {
    w[static_cast<size_t>(r) * cols] = static_cast<float>(r % 4);
    for (int j = 1; j < cols; ++j) w[static_cast<size_t>(r) * cols + j] = 5.0f * normal(rng);
  }
  const MatRef head = f32_matrix(w.data(), rows, cols);
  std::vector<float> states(static_cast<size_t>(n) * cols, 0.0f);
  for (int s = 0; s < n; ++s) states[static_cast<size_t>(s) * cols] = normal(rng);
  std::vector<uint8_t> mem(1 << 20);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  VocabHead vh, again, plain;
  ASSERT_OK(build_vocab_head(head, 4, 10, arena, &vh, states.data(), n));
  ASSERT_OK(build_vocab_head(head, 4, 10, arena, &again, states.data(), n));
  ASSERT_OK(build_vocab_head(head, 4, 10, arena, &plain));
  EXPECT_EQ(0, std::memcmp(vh.token_of_row, again.token_of_row, rows * 4));
  EXPECT_EQ(0, std::memcmp(vh.centroids, again.centroids, 4 * cols * 4));
  auto pure = [&](const VocabHead& h) {  // every group holds one residue of r % 4
    for (int g = 0; g < h.n_groups; ++g)
      for (int r = h.group_start[g]; r < h.group_start[g + 1]; ++r)
        if (h.token_of_row[r] % 4 != h.token_of_row[h.group_start[g]] % 4) return false;
    return true;
  };
  EXPECT_TRUE(pure(vh));
  EXPECT_FALSE(pure(plain));
  std::vector<float> x(cols), full(rows), scratch(rows);
  for (int t = 0; t < 50; ++t) {
    for (float& v : x) v = normal(rng);
    ActVec act;
    act.f = x.data();
    matvec(kernels_best(), head, act, full.data(), 0, rows);
    HeadStats st;
    EXPECT_EQ(pruned_argmax(kernels_best(), vh, act, scratch.data(), &st),
              static_cast<int>(std::max_element(full.begin(), full.end()) - full.begin()));
  }
  states[5] = __builtin_nanf("");  // states that are not numbers
  EXPECT_FALSE(build_vocab_head(head, 4, 10, arena, &vh, states.data(), n).ok());
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

// ---- the grouped heads in generation (Decoder::set_head) ----

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

int argmax_lowest(const float* x, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

// The logits of each step with `head`, feeding token 1 then `tokens` (the full head's greedy path);
// threads > 1: a pool that splits every task (the head's rows among them).
std::vector<std::vector<float>> step_logits(const LoadedModel& lm, const HeadChoice& head, const std::vector<int>& tokens,
                                            int threads = 1) {
  HostThreadPool pool(threads, 0);
  DecoderInstance d;
  EXPECT_OK(make_decoder(lm, 0, &pool, &kernels_best(), 1 << 20, &d));
  EXPECT_OK(d.decoder->set_head(head, d.work));
  std::vector<std::vector<float>> out;
  for (size_t pos = 0; pos < tokens.size(); ++pos) {
    const float* l = nullptr;
    EXPECT_OK(d.decoder->forward(tokens[pos], static_cast<int>(pos), &l));
    if (!l) break;
    out.emplace_back(l, l + d.decoder->vocab_size());
  }
  return out;
}

// Pruned: the full head's greedy tokens, each computed logit with the full head's bits, the others
// -inf. Two-stage over every group: the full head's logits; over a few: a subset of them.
void check_grouped_heads(const LoadedModel& lm, const MatRef& head, int steps) {
  std::vector<uint8_t> mem(8 << 20);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  VocabHead vh;
  ASSERT_OK(build_vocab_head(head, 24, 6, arena, &vh));
  std::vector<int> tokens = {1};  // the full head's greedy path
  {
    SerialPool pool;
    DecoderInstance d;
    ASSERT_OK(make_decoder(lm, 0, &pool, &kernels_best(), 0, &d));
    for (int pos = 0; pos + 1 < steps; ++pos) {
      const float* l = nullptr;
      ASSERT_OK(d.decoder->forward(tokens.back(), pos, &l));
      tokens.push_back(argmax_lowest(l, head.rows));
    }
  }
  const auto full = step_logits(lm, HeadChoice(), tokens);
  const auto pruned = step_logits(lm, HeadChoice{HeadMode::kPruned, &vh, 1}, tokens);
  const auto all = step_logits(lm, HeadChoice{HeadMode::kTwoStage, &vh, vh.n_groups}, tokens);
  const auto few = step_logits(lm, HeadChoice{HeadMode::kTwoStage, &vh, 2}, tokens);
  VocabHead routed;  // a router fitted on random states: over every group still the full head
  std::vector<float> calib(300 * static_cast<size_t>(head.cols));
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (float& v : calib) v = normal(rng);
  ASSERT_OK(fit_head_router(vh, calib.data(), 300, arena, &routed));
  const auto routed_all = step_logits(lm, HeadChoice{HeadMode::kTwoStage, &routed, vh.n_groups}, tokens);
  const auto routed_few = step_logits(lm, HeadChoice{HeadMode::kTwoStage, &routed, 2}, tokens);
  ASSERT_EQ(routed_all.size(), full.size());
  ASSERT_EQ(routed_few.size(), full.size());
  ASSERT_EQ(full.size(), static_cast<size_t>(steps));
  ASSERT_EQ(pruned.size(), full.size());
  ASSERT_EQ(all.size(), full.size());
  ASSERT_EQ(few.size(), full.size());
  const int V = head.rows;
  size_t pruned_skipped = 0, few_skipped = 0;
  for (int t = 0; t < steps; ++t) {
    EXPECT_EQ(argmax_lowest(pruned[t].data(), V), argmax_lowest(full[t].data(), V)) << "step " << t;
    for (int v = 0; v < V; ++v) {
      EXPECT_EQ(bits(all[t][v]), bits(full[t][v])) << "step " << t << " token " << v;
      EXPECT_EQ(bits(routed_all[t][v]), bits(full[t][v])) << "step " << t << " token " << v;
      for (const auto* g : {&pruned, &few, &routed_few}) {
        const float x = (*g)[t][v];
        if (x == -__builtin_huge_valf()) ++(g == &pruned ? pruned_skipped : few_skipped);
        else EXPECT_EQ(bits(x), bits(full[t][v])) << "step " << t << " token " << v;
      }
    }
  }
  // Three threads share the head's rows (and every other task): the same bits.
  EXPECT_EQ(step_logits(lm, HeadChoice{HeadMode::kPruned, &vh, 1}, tokens, 3), pruned);
  EXPECT_EQ(step_logits(lm, HeadChoice{HeadMode::kTwoStage, &routed, 2}, tokens, 3), routed_few);
  EXPECT_EQ(step_logits(lm, HeadChoice{HeadMode::kTwoStage, &vh, 5}, tokens, 3),
            step_logits(lm, HeadChoice{HeadMode::kTwoStage, &vh, 5}, tokens, 1));
  EXPECT_GT(few_skipped, 0u);  // two groups of 24 leave most rows out (with centroids or the router)
  (void)pruned_skipped;        // how many the bound skips depends on the model (docs/single-board.md)
}

TEST(HeadInGeneration, GroupedHeadsGiveTheFullHeadsBitsOnALlamaModel) {
  std::unique_ptr<LoadedModel> lm;
  ASSERT_OK(load_model(std::string(MCULLM_SOURCE_DIR) + "/models/tinystories-q4.gguf", &lm));
  check_grouped_heads(*lm, lm->model.output, 24);
}

TEST(HeadInGeneration, GroupedHeadsGiveTheFullHeadsBitsOnThePleModel) {
  MC_REQUIRE_SHARED();
  std::unique_ptr<LoadedModel> lm;
  ASSERT_OK(load_model(test::shared_path("models/esp32-ai-ple/ple4096_int4.bin"), &lm));
  check_grouped_heads(*lm, lm->ple.output, 6);
}

// A prompt in one batch gives each row the logits that token by token gives, with a grouped head too.
TEST(HeadInGeneration, BatchedPrefillEqualsTokenByTokenWithATwoStageHead) {
  std::unique_ptr<LoadedModel> lm;
  ASSERT_OK(load_model(std::string(MCULLM_SOURCE_DIR) + "/models/tinystories-q4.gguf", &lm));
  std::vector<uint8_t> mem(8 << 20);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  VocabHead vh;
  ASSERT_OK(build_vocab_head(lm->model.output, 16, 6, arena, &vh));
  const HeadChoice two{HeadMode::kTwoStage, &vh, 3};
  SerialPool pool;
  DecoderInstance a, b;
  ASSERT_OK(make_decoder(*lm, 0, &pool, &kernels_best(), 0, &a));
  ASSERT_OK(make_decoder(*lm, 0, &pool, &kernels_best(), 0, &b));
  ASSERT_OK(a.decoder->set_head(two, a.work));
  ASSERT_OK(b.decoder->set_head(two, b.work));
  const int prompt[7] = {1, 40, 41, 300, 7, 99, 2};
  const int V = a.decoder->vocab_size();
  ASSERT_GE(a.decoder->max_batch(), 7);
  const float* batch = nullptr;
  ASSERT_OK(a.decoder->prefill(prompt, 7, 0, &batch));
  const std::vector<float> rows(batch, batch + 7 * static_cast<size_t>(V));
  for (int i = 0; i < 7; ++i) {
    const float* one = nullptr;
    ASSERT_OK(b.decoder->forward(prompt[i], i, &one));
    for (int v = 0; v < V; ++v) ASSERT_EQ(bits(rows[static_cast<size_t>(i) * V + v]), bits(one[v])) << "row " << i << " token " << v;
  }
}

TEST(HeadInGeneration, RefusesGroupsThatDoNotFitAndMissingGroups) {
  std::unique_ptr<LoadedModel> lm;
  ASSERT_OK(load_model(std::string(MCULLM_SOURCE_DIR) + "/models/tinystories-q4.gguf", &lm));
  SerialPool pool;
  DecoderInstance d;
  ASSERT_OK(make_decoder(*lm, 0, &pool, &kernels_best(), 0, &d));
  const Status none = d.decoder->set_head(HeadChoice{HeadMode::kPruned, nullptr, 1}, d.work);
  EXPECT_FALSE(none.ok());
  EXPECT_NE(std::string(none.message()).find("head --write"), std::string::npos) << none.message();
  std::vector<uint8_t> mem(1 << 20);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  VocabHead vh;
  ASSERT_OK(build_vocab_head(lm->model.output, 8, 3, arena, &vh));
  EXPECT_FALSE(d.decoder->set_head(HeadChoice{HeadMode::kTwoStage, &vh, 0}, d.work).ok());
  EXPECT_FALSE(d.decoder->set_head(HeadChoice{HeadMode::kTwoStage, &vh, 9}, d.work).ok());
  std::mt19937_64 rng(3);
  Head other = make_head(lm->model.output.type, lm->model.output.rows - 1, lm->model.output.cols, rng, false);
  VocabHead wrong;
  ASSERT_OK(build_vocab_head(other.m, 8, 3, arena, &wrong));
  EXPECT_FALSE(d.decoder->set_head(HeadChoice{HeadMode::kPruned, &wrong, 1}, d.work).ok());
  EXPECT_OK(d.decoder->set_head(HeadChoice{HeadMode::kTwoStage, &vh, 8}, d.work));
}

}  // namespace
}  // namespace mcullm
