// Board profiles (presets, JSON files, hostile JSON) and the cost model's properties: bytes per token
// are the bytes each token reads (layers and head in full, one embedding / PLE row, the KV cache up to
// the position), bandwidth scales memory time, a model too big for the board is reported; `mcullm plan`.
#include <cmath>
#include <fstream>

#include "host/cost_model.h"
#include "test_support.h"

namespace mcullm {
namespace {

std::string stories() { return test::shared_path("models/stories260K/stories260K.bin"); }
std::string ple() { return test::shared_path("models/esp32-ai-ple/ple4096_int4.bin"); }
std::string bit1m() { return test::shared_path("models/bitnet-tinystories/bit1M_msb.bin"); }

TEST(BoardProfile, PresetsRoundTripThroughJson) {
  for (const char* name : {"esp32s3-psram80", "esp32s3-psram120"}) {
    BoardProfile p, q;
    ASSERT_TRUE(board_preset(name, &p).ok()) << name;
    ASSERT_TRUE(board_profile_from_json(board_profile_to_json(p), &q).ok()) << name;
    EXPECT_EQ(q.name, p.name);
    for (int t = 0; t < 3; ++t) {
      EXPECT_EQ(q.tiers[t].capacity_bytes, p.tiers[t].capacity_bytes);
      for (int c = 0; c < 2; ++c) EXPECT_NEAR(q.tiers[t].read_bytes_per_s[c], p.tiers[t].read_bytes_per_s[c], 1e-3);
    }
    for (int k = 0; k < kKernelKindCount; ++k)
      for (int c = 0; c < 2; ++c) EXPECT_NEAR(q.macs_per_s[k][c], p.macs_per_s[k][c], 1e-3);
  }
  BoardProfile a, b;
  ASSERT_TRUE(board_preset("esp32s3-psram80", &a).ok());
  ASSERT_TRUE(board_preset("esp32s3-psram120", &b).ok());
  EXPECT_LT(a.tiers[1].read_bytes_per_s[1], b.tiers[1].read_bytes_per_s[1]);  // the faster PSRAM clock
}

TEST(BoardProfile, UnknownPresetAndMissingFileAreRefused) {
  BoardProfile p;
  Status st = board_preset("esp32s3-psram999", &p);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("esp32s3-psram80"), std::string::npos) << st.message();
  st = load_board_profile("/nonexistent/board.json", &p);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("neither a preset"), std::string::npos) << st.message();
}

TEST(BoardProfile, HostileJsonIsRefusedWithTheFieldNamed) {
  BoardProfile p;
  ASSERT_TRUE(board_preset("esp32s3-psram80", &p).ok());
  const std::string good = board_profile_to_json(p);
  struct Case {
    std::string text, expect;
  };
  std::vector<Case> cases = {
      {good.substr(0, good.size() / 2), "not valid JSON"},
      {"", "not valid JSON"},
      {"[1,2]", "top level"},
      {"{}", "name"},
  };
  auto edit = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  cases.push_back({edit("\"clock_mhz\"", "\"clock\""), "clock_mhz"});
  cases.push_back({edit("\"flash\"", "\"rom\""), "tiers.flash"});
  cases.push_back({edit("\"ternary\"", "\"t\""), "compute_mmac_s.ternary"});
  cases.push_back({edit("\"clock_mhz\": 240.0", "\"clock_mhz\": -240"), "clock_mhz"});
  cases.push_back({edit("\"clock_mhz\": 240.0", "\"clock_mhz\": \"fast\""), "not a number"});
  cases.push_back({edit("\"clock_mhz\": 240.0", "\"clock_mhz\": 1e300"), "clock_mhz"});
  cases.push_back({edit("\"clock_mhz\": 240.0", "\"clock_mhz\": NaN"), "not valid JSON"});
  cases.push_back({edit("\"capacity_bytes\": 16777216", "\"capacity_bytes\": 0"), "capacity_bytes"});
  cases.push_back({edit("\"capacity_bytes\": 16777216", "\"capacity_bytes\": 1.5"), "whole number"});
  cases.push_back({edit("\"capacity_bytes\": 16777216", "\"capacity_bytes\": null"), "not a number"});
  cases.push_back({edit("\"read_mb_s\": [", "\"read_mb_s\": [1, "), "read_mb_s"});
  for (const Case& c : cases) {
    const Status st = board_profile_from_json(c.text, &p);
    EXPECT_FALSE(st.ok()) << c.text;
    EXPECT_NE(std::string(st.message()).find(c.expect), std::string::npos) << st.message() << "\n" << c.text;
  }
}

std::unique_ptr<LoadedModel> load(const std::string& path) {
  std::unique_ptr<LoadedModel> m;
  EXPECT_TRUE(load_model(path, &m).ok()) << path;
  return m;
}

// Bytes per token = the sum of what each tensor reads; every full-read weight counted in full, a
// row-read table one row; the classes and tiers add up to the same total.
void check_sums(const CostReport& r) {
  uint64_t total = 0, tiers = 0, classes = 0;
  for (const CostTensor& t : r.tensors) {
    total += t.read_per_token;
    if (t.cls == TensorClass::kKvCache) continue;
    if (t.row_read) {
      EXPECT_LT(t.read_per_token, t.bytes) << t.name;
      EXPECT_EQ(t.tier, Tier::kFlash) << t.name;
    } else {
      EXPECT_GE(t.read_per_token, t.bytes > 0 ? 1u : 0u) << t.name;
    }
  }
  for (int t = 0; t < kTierCount; ++t) tiers += r.read[t];
  for (int c = 0; c < kClassCount; ++c)
    for (int t = 0; t < kTierCount; ++t) classes += r.read_by_class[c][t];
  EXPECT_EQ(total, tiers);
  EXPECT_EQ(total, classes);
}

TEST(CostModel, Stories260kReadsLayersHeadInFullAndOneEmbeddingRow) {
  MC_REQUIRE_SHARED();
  auto m = load(stories());
  BoardProfile board;
  ASSERT_TRUE(board_preset("esp32s3-psram80", &board).ok());
  CostReport r;
  CostOptions o;
  o.pos = 0;
  ASSERT_TRUE(cost_model(*m, board, o, &r).ok());
  check_sums(r);
  const LlamaConfig& c = m->model.cfg;
  // f32, tied: every layer matrix, every norm and the [vocab, dim] head once, plus one embedding row.
  uint64_t expect = 4ull * c.vocab_size * c.dim + 4ull * c.dim;  // head + embedding row
  expect += 4ull * c.dim * (2 * c.n_layers + 1);                  // norms
  expect += 4ull * c.n_layers * (2ull * c.dim * c.dim + 2ull * c.kv_dim() * c.dim + 3ull * c.dim * c.hidden_dim);
  expect += 2ull * c.n_layers * c.kv_dim() * 4;  // the KV cache at position 0
  uint64_t total = 0;
  for (int t = 0; t < kTierCount; ++t) total += r.read[t];
  EXPECT_EQ(total, expect);
  EXPECT_TRUE(r.fits);
  // The KV cache read grows by one row per layer per position.
  CostReport r2;
  o.pos = 10;
  ASSERT_TRUE(cost_model(*m, board, o, &r2).ok());
  uint64_t total2 = 0;
  for (int t = 0; t < kTierCount; ++t) total2 += r2.read[t];
  EXPECT_EQ(total2 - total, 10ull * 2 * c.n_layers * c.kv_dim() * 4);
}

TEST(CostModel, DoublingEveryBandwidthHalvesMemoryTime) {
  MC_REQUIRE_SHARED();
  for (const std::string& path : {stories(), ple(), bit1m()}) {
    auto m = load(path);
    BoardProfile a;
    ASSERT_TRUE(board_preset("esp32s3-psram80", &a).ok());
    // Keep placement equal: only bandwidths change.
    BoardProfile b = a;
    for (auto& t : b.tiers)
      for (double& bw : t.read_bytes_per_s) bw *= 2;
    for (int threads : {1, 2}) {
      CostOptions o;
      o.threads = threads;
      CostReport ra, rb;
      ASSERT_TRUE(cost_model(*m, a, o, &ra).ok()) << path;
      ASSERT_TRUE(cost_model(*m, b, o, &rb).ok()) << path;
      check_sums(ra);
      EXPECT_NEAR(rb.memory_s * 2, ra.memory_s, 1e-12 + ra.memory_s * 1e-12) << path;
      EXPECT_DOUBLE_EQ(rb.compute_s, ra.compute_s);
      EXPECT_DOUBLE_EQ(ra.tokens_per_s, 1.0 / std::max(ra.memory_s, ra.compute_s));
    }
  }
}

TEST(CostModel, PleTableStaysInFlashAndIsReadOneRowPerToken) {
  MC_REQUIRE_SHARED();
  auto m = load(ple());
  BoardProfile board;
  ASSERT_TRUE(board_preset("esp32s3-psram80", &board).ok());
  CostReport r;
  ASSERT_TRUE(cost_model(*m, board, CostOptions(), &r).ok());
  check_sums(r);
  bool seen = false;
  for (const CostTensor& t : r.tensors)
    if (t.name == "ple_table") {
      seen = true;
      EXPECT_EQ(t.tier, Tier::kFlash);
      const PleConfig& c = m->ple.cfg;
      EXPECT_EQ(t.bytes, static_cast<uint64_t>(c.input_vocab) * t.read_per_token);
    }
  EXPECT_TRUE(seen);
}

TEST(CostModel, SramFillsFirstThenPsram) {
  MC_REQUIRE_SHARED();
  auto m = load(stories());
  BoardProfile board;
  ASSERT_TRUE(board_preset("esp32s3-psram80", &board).ok());
  board.tiers[0].capacity_bytes = 8 << 20;  // everything fits in SRAM
  CostReport big, small;
  ASSERT_TRUE(cost_model(*m, board, CostOptions(), &big).ok());
  EXPECT_EQ(big.read[static_cast<int>(Tier::kPsram)], 0u);
  board.tiers[0].capacity_bytes = 64 << 10;  // a part spills to PSRAM
  ASSERT_TRUE(cost_model(*m, board, CostOptions(), &small).ok());
  EXPECT_GT(small.read[static_cast<int>(Tier::kPsram)], 0u);
  EXPECT_GT(small.memory_s, big.memory_s);
}

TEST(CostModel, AModelTooBigIsReportedWithWhatOverflows) {
  MC_REQUIRE_SHARED();
  auto m = load(stories());
  BoardProfile board;
  ASSERT_TRUE(board_preset("esp32s3-psram80", &board).ok());
  board.tiers[2].capacity_bytes = 100000;  // smaller than stories260K's ~1 MB
  CostReport r;
  ASSERT_TRUE(cost_model(*m, board, CostOptions(), &r).ok());
  EXPECT_FALSE(r.fits);
  EXPECT_NE(r.overflow.find("flash"), std::string::npos) << r.overflow;
  board.tiers[2].capacity_bytes = 16 << 20;
  board.tiers[0].capacity_bytes = 1000;  // not even the activations
  ASSERT_TRUE(cost_model(*m, board, CostOptions(), &r).ok());
  EXPECT_FALSE(r.fits);
  EXPECT_NE(r.overflow.find("activations"), std::string::npos) << r.overflow;
}

TEST(CostModel, BadOptionsAreRefused) {
  MC_REQUIRE_SHARED();
  auto m = load(stories());
  BoardProfile board;
  ASSERT_TRUE(board_preset("esp32s3-psram80", &board).ok());
  CostReport r;
  CostOptions o;
  o.threads = 3;
  EXPECT_FALSE(cost_model(*m, board, o, &r).ok());
  o.threads = 1;
  o.ctx_len = 16;
  o.pos = 16;
  EXPECT_FALSE(cost_model(*m, board, o, &r).ok());
}

TEST(CliPlan, PrintsTheTableAndRefusesBadBoards) {
  MC_REQUIRE_SHARED();
  auto r = test::run_cli({"plan", "-m", stories(), "--board", "esp32s3-psram120", "-t", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* want : {"esp32s3-psram120", "sram", "psram", "flash", "tok/s", "fits: yes"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  r = test::run_cli({"plan", "-m", stories(), "--board", "esp32s3-psram9"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("neither a preset"), std::string::npos) << r.err;
  const std::string bad = test::temp_dir() + "/bad_board.json";
  test::write_file(bad, {'{', '"', 'n'});
  r = test::run_cli({"plan", "-m", stories(), "--board", bad});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not valid JSON"), std::string::npos) << r.err;
  // a board too small: the table, then a clear error naming what overflows
  BoardProfile p;
  ASSERT_TRUE(board_preset("esp32s3-psram80", &p).ok());
  p.tiers[2].capacity_bytes = 4096;
  const std::string tiny = test::temp_dir() + "/tiny_board.json";
  const std::string js = board_profile_to_json(p);
  test::write_file(tiny, std::vector<uint8_t>(js.begin(), js.end()));
  r = test::run_cli({"plan", "-m", stories(), "--board", tiny});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("does not fit"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("flash"), std::string::npos) << r.err;
}

TEST(CliPlan, BenchPrintsThePredictionAndRefusesABadBoard) {
  MC_REQUIRE_SHARED();
  auto r = test::run_cli({"bench", "-m", stories(), "-p", "0", "-n", "8", "-r", "1", "-t", "1", "--board", "esp32s3-psram80"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("predicted on esp32s3-psram80, tg8, 1 core(s)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tg8, 2 core(s)"), std::string::npos) << r.out;
  r = test::run_cli({"bench", "-m", stories(), "-p", "0", "-n", "8", "-r", "1", "--board", "no-such-board"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("neither a preset"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace mcullm
