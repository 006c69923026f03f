// LlamaSlice: embed, layer ranges and head composed give LlamaContext::forward's logits bit for
// bit at several cut points; the slice hash tells slices apart; bad ranges are refused.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "core/thread_pool_host.h"
#include "load/model_loader_host.h"
#include "model/llama_slice.h"
#include "test_support.h"

namespace mcullm {
namespace {

struct SliceRig {
  std::vector<uint8_t> mem;
  Arena arena;
  std::vector<std::unique_ptr<LlamaSlice>> slices;
};

// Slices for the cuts (layer boundaries, e.g. {0, 2, 5}) plus the master's embed / head slice.
void make_slices(const LlamaModel& m, const std::vector<int>& cuts, ThreadPool* pool, const KernelSet* k, KvType kv, SliceRig* r) {
  size_t bytes = 0;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) bytes += llama_slice_work_bytes(m.cfg, {cuts[i], cuts[i + 1], false}, 0, kv);
  bytes += llama_slice_work_bytes(m.cfg, {0, 0, true}, 0, kv);
  r->mem.resize(bytes);
  r->arena.reset(Tier::kHost, r->mem.data(), bytes);  // exactly the bytes llama_slice_work_bytes promised
  auto add = [&](SliceRange range) {
    r->slices.push_back(std::make_unique<LlamaSlice>());
    ASSERT_TRUE(r->slices.back()->init(&m, range, 0, r->arena, pool, k, kv).ok());
  };
  add({0, 0, true});
  for (size_t i = 0; i + 1 < cuts.size(); ++i) add({cuts[i], cuts[i + 1], false});
}

void expect_slices_match_forward(const LoadedModel& lm, const std::vector<int>& cuts, KvType kv, int steps) {
  SCOPED_TRACE(::testing::Message() << "cuts " << ::testing::PrintToString(cuts) << " kv " << kv_type_name(kv));
  HostThreadPool pool(2);
  const KernelSet* k = kernels_by_name("auto");
  std::unique_ptr<uint8_t[]> mem(new uint8_t[64 << 20]);
  Arena arena(Tier::kHost, mem.get(), 64 << 20);
  LlamaContext whole;
  ASSERT_TRUE(whole.init(&lm.model, 0, arena, &pool, k, kv).ok());
  SliceRig rig;
  make_slices(lm.model, cuts, &pool, k, kv, &rig);
  LlamaSlice& master = *rig.slices[0];
  const int dim = lm.model.cfg.dim, vocab = lm.model.cfg.vocab_size;
  std::vector<float> hidden(dim);
  int token = 1;
  for (int pos = 0; pos < steps; ++pos) {
    const float* want = nullptr;
    ASSERT_TRUE(whole.forward(token, pos, &want).ok());
    ASSERT_TRUE(master.embed(token, hidden.data()).ok());
    for (size_t i = 1; i < rig.slices.size(); ++i) ASSERT_TRUE(rig.slices[i]->run_layers(hidden.data(), pos).ok());
    const float* got = nullptr;
    ASSERT_TRUE(master.head(hidden.data(), &got).ok());
    ASSERT_EQ(0, std::memcmp(want, got, sizeof(float) * vocab)) << "position " << pos;
    token = (token * 31 + pos * 7 + 3) % vocab;  // any tokens will do; the caches must follow
  }
}

std::unique_ptr<LoadedModel> load(const std::string& path) {
  std::unique_ptr<LoadedModel> lm;
  Status st = load_model(path, &lm);
  EXPECT_TRUE(st.ok()) << st.message();
  return lm;
}

TEST(LlamaSlice, Stories260KCutsMatchForwardBitForBit) {
  MC_REQUIRE_SHARED();
  auto lm = load(test::shared_path("models/stories260K/stories260K.bin"));
  ASSERT_TRUE(lm);
  ASSERT_EQ(lm->model.cfg.n_layers, 5);
  for (const std::vector<int>& cuts : {std::vector<int>{0, 5}, {0, 1, 5}, {0, 2, 3, 5}, {0, 1, 2, 3, 4, 5}})
    expect_slices_match_forward(*lm, cuts, KvType::kF32, 40);
  expect_slices_match_forward(*lm, {0, 3, 5}, KvType::kInt8, 40);
}

TEST(LlamaSlice, QuantizedDummyWithGqaMatchesForward) {
  const std::string path = test::temp_dir() + "/dummy.gguf";
  const auto r = test::run_cli({"dummy", "-o", path, "--type", "q8_0", "--layers", "6", "--dim", "64", "--heads", "4",
                                "--kv-heads", "2", "--hidden", "96", "--seq-len", "64"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lm = load(path);
  ASSERT_TRUE(lm);
  expect_slices_match_forward(*lm, {0, 1, 2, 3, 4, 5, 6}, KvType::kF32, 30);
  expect_slices_match_forward(*lm, {0, 4, 6}, KvType::kF32, 30);
}

TEST(LlamaSlice, HashTellsSlicesApart) {
  MC_REQUIRE_SHARED();
  auto lm = load(test::shared_path("models/stories260K/stories260K.bin"));
  auto again = load(test::shared_path("models/stories260K/stories260K.bin"));
  ASSERT_TRUE(lm && again);
  const LlamaModel& m = lm->model;
  EXPECT_EQ(slice_hash(m, {1, 3, false}), slice_hash(again->model, {1, 3, false}));
  EXPECT_NE(slice_hash(m, {1, 3, false}), slice_hash(m, {1, 4, false}));
  EXPECT_NE(slice_hash(m, {1, 3, false}), slice_hash(m, {0, 2, false}));
  EXPECT_NE(slice_hash(m, {0, 0, true}), slice_hash(m, {0, 1, false}));
  // One changed weight bit changes the hash of the slices that hold it, and only those.
  std::vector<float> wq(static_cast<const float*>(m.layers[2].wq.data), static_cast<const float*>(m.layers[2].wq.data) + 64 * 64);
  uint32_t bits;
  std::memcpy(&bits, &wq[100], 4);
  bits ^= 1;
  std::memcpy(&wq[100], &bits, 4);
  again->model.layers[2].wq.data = wq.data();
  EXPECT_NE(slice_hash(m, {2, 3, false}), slice_hash(again->model, {2, 3, false}));
  EXPECT_EQ(slice_hash(m, {3, 5, false}), slice_hash(again->model, {3, 5, false}));
}

TEST(LlamaSlice, RefusesBadRangesAndMissingParts) {
  MC_REQUIRE_SHARED();
  auto lm = load(test::shared_path("models/stories260K/stories260K.bin"));
  ASSERT_TRUE(lm);
  HostThreadPool pool(1);
  std::vector<uint8_t> mem(8 << 20);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  const KernelSet* k = kernels_by_name("ref");
  for (SliceRange bad : {SliceRange{-1, 2, false}, SliceRange{3, 2, false}, SliceRange{0, 6, false}, SliceRange{2, 2, false}}) {
    LlamaSlice s;
    EXPECT_FALSE(s.init(&lm->model, bad, 0, arena, &pool, k).ok()) << bad.first << ":" << bad.end;
  }
  LlamaSlice node;
  ASSERT_TRUE(node.init(&lm->model, {1, 3, false}, 16, arena, &pool, k).ok());
  std::vector<float> h(64, 0.5f);
  const float* logits = nullptr;
  EXPECT_FALSE(node.embed(1, h.data()).ok());
  EXPECT_FALSE(node.head(h.data(), &logits).ok());
  EXPECT_FALSE(node.run_layers(h.data(), 16).ok());
  EXPECT_FALSE(node.run_layers(h.data(), -1).ok());
  EXPECT_TRUE(node.run_layers(h.data(), 0).ok());
  LlamaSlice master;
  ASSERT_TRUE(master.init(&lm->model, {0, 0, true}, 16, arena, &pool, k).ok());
  EXPECT_FALSE(master.embed(512, h.data()).ok());
  EXPECT_FALSE(master.embed(-1, h.data()).ok());
}

}  // namespace
}  // namespace mcullm
