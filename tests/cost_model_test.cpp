// Board profiles (presets, JSON files, hostile JSON) and the cost model's properties: bytes per token
// are the bytes each token reads (layers and head in full, one embedding / PLE row, the KV cache up to
// the position), bandwidth scales memory time, a model too big for the board is reported; `mcullm plan`.
#include <cmath>
#include <fstream>

#include "plan/cost_model_host.h"
#include "plan/cost_model_calibration_host.h"
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
    EXPECT_NEAR(q.matvec_cycles, p.matvec_cycles, 1e-9);
    EXPECT_NEAR(q.attn_entry_cycles, p.attn_entry_cycles, 1e-9);
    EXPECT_NEAR(q.handoff_s, p.handoff_s, 1e-12);
    EXPECT_EQ(q.image_bytes_max, p.image_bytes_max);
    EXPECT_EQ(p.image_bytes_max, kEsp32s3ModelPartitionBytes);
  }
  BoardProfile a, b;
  ASSERT_TRUE(board_preset("esp32s3-psram80", &a).ok());
  ASSERT_TRUE(board_preset("esp32s3-psram120", &b).ok());
  EXPECT_LT(a.tiers[1].read_bytes_per_s[1], b.tiers[1].read_bytes_per_s[1]);  // the faster PSRAM clock
}

// The presets' image limit is the firmware's model partition: read from partitions.csv, so that a
// changed partition table cannot leave the limit behind.
TEST(BoardProfile, PartitionTableMatchesTheModelPartition) {
  const std::string csv = test::read_text(std::string(MCULLM_SOURCE_DIR) + "/firmware/esp32s3/partitions.csv");
  uint64_t model_size = 0;
  int rows = 0;
  size_t at = 0;
  while (at < csv.size()) {
    size_t end = csv.find('\n', at);
    if (end == std::string::npos) end = csv.size();
    std::string line = csv.substr(at, end - at);
    at = end + 1;
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> cells;  // Name, Type, SubType, Offset, Size, Flags
    for (size_t c = 0;;) {
      const size_t comma = line.find(',', c);
      std::string cell = line.substr(c, comma == std::string::npos ? std::string::npos : comma - c);
      cell.erase(0, cell.find_first_not_of(" \t"));
      cell.erase(cell.find_last_not_of(" \t\r") + 1);
      cells.push_back(cell);
      if (comma == std::string::npos) break;
      c = comma + 1;
    }
    ASSERT_GE(cells.size(), 5u) << line;
    if (cells[0] != "model") continue;
    ++rows;
    EXPECT_EQ(cells[1], "data") << line;
    model_size = std::stoull(cells[4], nullptr, 0);
  }
  ASSERT_EQ(rows, 1) << csv;
  EXPECT_EQ(model_size, kEsp32s3ModelPartitionBytes);
  for (const char* name : {"esp32s3-psram80", "esp32s3-psram120"}) {
    BoardProfile p;
    ASSERT_OK(board_preset(name, &p));
    EXPECT_EQ(p.image_bytes_max, model_size) << name;
  }
}

// image_bytes_max is optional in a JSON profile (files written before it keep working, with the
// presets' partition); when given it is a whole number of bytes > 0.
TEST(BoardProfile, ImageLimitIsOptionalInJsonAndChecked) {
  BoardProfile p, q;
  ASSERT_OK(board_preset("esp32s3-psram80", &p));
  p.image_bytes_max = 123456;
  const std::string good = board_profile_to_json(p);
  ASSERT_OK(board_profile_from_json(good, &q));
  EXPECT_EQ(q.image_bytes_max, 123456u);
  const std::string key = "\"image_bytes_max\": 123456";
  const size_t at = good.find(key);
  ASSERT_NE(at, std::string::npos) << good;
  std::string old = good;  // without the field (and the comma before it)
  old.erase(old.rfind(',', at), at + key.size() - old.rfind(',', at));
  ASSERT_OK(board_profile_from_json(old, &q));
  EXPECT_EQ(q.image_bytes_max, kEsp32s3ModelPartitionBytes);
  EXPECT_EQ(q.tiers[2].capacity_bytes, p.tiers[2].capacity_bytes);
  for (const char* bad : {"0", "-1", "1.5", "\"big\"", "null", "1e20"}) {
    std::string s = good;
    s.replace(at, key.size(), "\"image_bytes_max\": " + std::string(bad));
    const Status st = board_profile_from_json(s, &q);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_NE(std::string(st.message()).find("image_bytes_max"), std::string::npos) << st.message();
  }
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
  cases.push_back({edit("\"overheads\"", "\"extras\""), "overheads"});
  cases.push_back({edit("\"handoff_us\"", "\"handoff\""), "overheads.handoff_us"});
  cases.push_back({edit("\"matvec_cycles\": ", "\"matvec_cycles\": -"), "overheads.matvec_cycles"});
  cases.push_back({edit("\"attn_entry_cycles\": ", "\"attn_entry_cycles\": \"x\", \"y\": "), "not a number"});
  cases.push_back({edit("\"int4_c\"", "\"int4c\""), "compute_mmac_s.int4_c"});
  cases.push_back({edit("\"matvec_cycles\": ", "\"matvec_cycles\": 1e300, \"z\": "), "overheads.matvec_cycles"});
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
      EXPECT_DOUBLE_EQ(ra.tokens_per_s, 1.0 / ra.token_s);
      EXPECT_LT(rb.token_s, ra.token_s) << path;  // faster memory, faster token
      for (int s = 0; s < kStageCount; ++s) EXPECT_LE(rb.stage_s[s], ra.stage_s[s]) << path << " " << s;
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
  board.image_bytes_max = 100000;  // the flash is large, the partition the image goes to is not
  ASSERT_TRUE(cost_model(*m, board, CostOptions(), &r).ok());
  EXPECT_FALSE(r.fits);
  EXPECT_NE(r.overflow.find("image partition overflows: the model image needs"), std::string::npos) << r.overflow;
  board.image_bytes_max = kEsp32s3ModelPartitionBytes;
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
  EXPECT_NE(r.out.find("mean ms input"), std::string::npos) << r.out;
  r = test::run_cli({"bench", "-m", stories(), "-p", "0", "-n", "8", "-r", "1", "--board", "no-such-board"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("neither a preset"), std::string::npos) << r.err;
}


// The time model's properties, on hand-made stage work (no model needed).
TEST(CostModel, StageTimeIsMonotonicInBytesAndNeverBeatsTheBandwidth) {
  BoardProfile b;
  ASSERT_TRUE(board_preset("esp32s3-psram80", &b).ok());
  for (int cores : {1, 2})
    for (KernelKind kind : {KernelKind::kF32, KernelKind::kInt4, KernelKind::kInt8C}) {
      StageWork w;
      w.cores = cores;
      w.macs[static_cast<int>(kind)] = 1e6;
      w.matvecs = 10;
      double last = stage_seconds(w, b);
      for (int tier : {1, 2})
        for (int step = 0; step < 5; ++step) {
          w.bytes[tier] += 1e5;
          const double t = stage_seconds(w, b);
          EXPECT_GE(t, last) << kernel_kind_name(kind) << " tier " << tier;
          last = t;
          // never faster than the tiers' bandwidth for this many cores allows
          const double floor = w.bytes[1] / b.tiers[1].read_bytes_per_s[cores - 1] + w.bytes[2] / b.tiers[2].read_bytes_per_s[cores - 1];
          EXPECT_GE(t, floor);
        }
    }
}

TEST(CostModel, TwoCoresAreNeverSlowerThanTheirBandwidthAllowsAndNeverBelowIt) {
  MC_REQUIRE_SHARED();
  for (const std::string& path : {stories(), ple(), bit1m()}) {
    auto m = load(path);
    for (const char* name : {"esp32s3-psram80", "esp32s3-psram120"}) {
      BoardProfile b;
      ASSERT_TRUE(board_preset(name, &b).ok());
      CostOptions o;
      o.threads = 2;
      CostReport r2;
      ASSERT_TRUE(cost_model(*m, b, o, &r2).ok());
      // the time is at least the PSRAM and flash reads at two-core bandwidth
      EXPECT_GE(r2.token_s, r2.memory_s * (1 - 1e-12)) << path;
      double sum = 0;
      for (double s : r2.stage_s) sum += s;
      EXPECT_NEAR(sum, r2.token_s, 1e-12) << path;
      // stage bytes add up to the tiers' totals
      for (int t = 0; t < 3; ++t) {
        double bytes = 0;
        for (const StageWork& w : r2.work) bytes += w.bytes[t];
        EXPECT_DOUBLE_EQ(bytes, static_cast<double>(r2.read[t])) << path << " tier " << t;
      }
    }
  }
}

TEST(CostModel, AttentionTimeGrowsWithThePositionAndOtherStagesDoNot) {
  MC_REQUIRE_SHARED();
  for (const std::string& path : {stories(), ple()}) {
    auto m = load(path);
    BoardProfile b;
    ASSERT_TRUE(board_preset("esp32s3-psram80", &b).ok());
    CostReport prev;
    for (int pos : {0, 1, 64, 255, 511}) {
      CostOptions o;
      o.pos = pos;
      CostReport r;
      ASSERT_TRUE(cost_model(*m, b, o, &r).ok());
      if (pos > 0) {
        EXPECT_GT(r.stage_s[static_cast<int>(Stage::kAttention)], prev.stage_s[static_cast<int>(Stage::kAttention)]) << pos;
        for (Stage st : {Stage::kInput, Stage::kFfn, Stage::kPle, Stage::kHead})
          EXPECT_DOUBLE_EQ(r.stage_s[static_cast<int>(st)], prev.stage_s[static_cast<int>(st)]) << stage_name(st);
      }
      prev = r;
    }
  }
}

TEST(CostModel, AnInt8KvCacheAndATwoStageHeadReadFewerBytes) {
  MC_REQUIRE_SHARED();
  auto m = load(ple());
  BoardProfile b;
  ASSERT_TRUE(board_preset("esp32s3-psram80", &b).ok());
  CostOptions o;
  o.threads = 2;
  CostReport base, kv8, two;
  ASSERT_TRUE(cost_model(*m, b, o, &base).ok());
  o.kv_bytes = 1;
  ASSERT_TRUE(cost_model(*m, b, o, &kv8).ok());
  const int att = static_cast<int>(Stage::kAttention), head = static_cast<int>(Stage::kHead);
  const PleConfig& c = m->ple.cfg;
  // keys and values of positions 0..511, every layer: 3 bytes fewer per element
  EXPECT_NEAR(base.work[att].bytes[1] + base.work[att].bytes[0] - kv8.work[att].bytes[1] - kv8.work[att].bytes[0],
              3.0 * 2 * c.n_layers * 512 * c.dim, 1e-6);
  EXPECT_LT(kv8.stage_s[att], base.stage_s[att]);
  o.kv_bytes = 4;
  o.head_groups = 256;
  o.head_top = 16;
  ASSERT_TRUE(cost_model(*m, b, o, &two).ok());
  double full_bytes = 0, two_bytes = 0;
  for (int t = 0; t < 3; ++t) full_bytes += base.work[head].bytes[t], two_bytes += two.work[head].bytes[t];
  EXPECT_LT(two_bytes, 0.35 * full_bytes);
  EXPECT_GT(two_bytes, 0.0625 * full_bytes);  // at least the 16 of 256 groups' rows
  EXPECT_LT(two.stage_s[head], base.stage_s[head]);
  o.head_top = 0;
  EXPECT_FALSE(cost_model(*m, b, o, &two).ok());
  o.head_top = 16;
  o.kv_bytes = 3;
  EXPECT_FALSE(cost_model(*m, b, o, &two).ok());
}

// A ReLU model's FFN gate first (--ffn-live): the live share of each up matrix's rows is read and
// multiplied, everything else as dense; the tensors are stored in full; a SwiGLU model and a share
// outside 1..1000 are refused.
TEST(CostModel, AnFfnLiveShareReadsThatShareOfTheUpRows) {
  MC_REQUIRE_SHARED();
  auto m = load(ple());
  BoardProfile b;
  ASSERT_TRUE(board_preset("esp32s3-psram80", &b).ok());
  CostOptions o;
  CostReport dense, live;
  o.ffn_live_permille = 250;
  EXPECT_FALSE(cost_model(*m, b, o, &live).ok());  // the fixture's FFN is SwiGLU
  m->ple.cfg.relu_ffn = true;
  o.ffn_live_permille = 0;
  ASSERT_TRUE(cost_model(*m, b, o, &dense).ok());
  o.ffn_live_permille = 250;
  ASSERT_TRUE(cost_model(*m, b, o, &live).ok());
  const PleConfig& c = m->ple.cfg;
  const MatRef& up = m->ple.layers[0].up;
  const int live_rows = (c.ffn * 250 + 999) / 1000;
  const int ffn = static_cast<int>(Stage::kFfn);
  double dense_bytes = 0, live_bytes = 0;
  for (int t = 0; t < 3; ++t) dense_bytes += dense.work[ffn].bytes[t], live_bytes += live.work[ffn].bytes[t];
  const auto up_read = [](const CostReport& r) {  // layer 0's up matrix, bytes read per token
    for (const CostTensor& t : r.tensors)
      if (t.name == "layer0.up") return static_cast<double>(t.read_per_token);
    return -1.0;
  };
  ASSERT_GT(up_read(dense), 0.0);
  EXPECT_DOUBLE_EQ(up_read(live), up_read(dense) * live_rows / c.ffn);  // bytes per row times the live rows
  EXPECT_DOUBLE_EQ(dense_bytes - live_bytes, c.n_layers * (up_read(dense) - up_read(live)));
  EXPECT_DOUBLE_EQ(dense.work[ffn].macs[static_cast<int>(kernel_kind_of(up.type))] - live.work[ffn].macs[static_cast<int>(kernel_kind_of(up.type))],
                   static_cast<double>(c.n_layers) * (c.ffn - live_rows) * c.dim);
  for (int t = 0; t < 3; ++t) EXPECT_EQ(dense.placed[t], live.placed[t]);
  EXPECT_LT(live.instructions, dense.instructions);
  EXPECT_GT(live.tokens_per_s, dense.tokens_per_s);
  o.ffn_live_permille = 1001;
  EXPECT_FALSE(cost_model(*m, b, o, &live).ok());
  o.ffn_live_permille = -1;
  EXPECT_FALSE(cost_model(*m, b, o, &live).ok());
}

// The presets carry the fit: rerunning calibration_fit from them lands on the same figures, and with
// them every calibration point is predicted within 15% (fit points and held-out points alike).
TEST(CostCalibration, PresetsCarryTheFit) {
  const Esp32s3Compute& preset = esp32s3_preset_compute();
  const Esp32s3Compute fit = calibration_fit(preset);
  for (int k = 0; k < kKernelKindCount; ++k)
    EXPECT_NEAR(fit.cycles_per_mac[k], preset.cycles_per_mac[k], 0.01 * preset.cycles_per_mac[k]) << k;
  EXPECT_NEAR(fit.matvec_cycles, preset.matvec_cycles, 0.01 * preset.matvec_cycles + 1);
  EXPECT_NEAR(fit.attn_entry_cycles, preset.attn_entry_cycles, 0.01 * preset.attn_entry_cycles + 1);
  EXPECT_NEAR(fit.attn_entry_cycles_c, preset.attn_entry_cycles_c, 0.01 * preset.attn_entry_cycles_c + 1);
  // from a poor start too: the fit does not depend on the placeholders it starts from
  // (the free figures only: int8_c, int4_c and the overheads; the others are FACTS or Espressif figures)
  const int int8_c = static_cast<int>(KernelKind::kInt8C), int4_c = static_cast<int>(KernelKind::kInt4C);
  Esp32s3Compute poor = preset;
  poor.cycles_per_mac[int8_c] *= 3;
  poor.cycles_per_mac[int4_c] *= 0.3;
  poor.matvec_cycles *= 0.2;
  poor.attn_entry_cycles *= 5;
  poor.attn_entry_cycles_c *= 0.5;
  const Esp32s3Compute again = calibration_fit(poor);
  for (int k : {int8_c, int4_c}) EXPECT_NEAR(again.cycles_per_mac[k], fit.cycles_per_mac[k], 0.02 * fit.cycles_per_mac[k]) << k;
  EXPECT_NEAR(again.matvec_cycles, fit.matvec_cycles, 0.02 * fit.matvec_cycles);
  EXPECT_NEAR(again.attn_entry_cycles, fit.attn_entry_cycles, 0.02 * fit.attn_entry_cycles);
  EXPECT_NEAR(again.attn_entry_cycles_c, fit.attn_entry_cycles_c, 0.02 * fit.attn_entry_cycles_c);
}

TEST(CostCalibration, EveryPublishedPointWithin15Percent) {
  const std::vector<CalibrationResult> points = calibration_points(esp32s3_preset_compute());
  int held_out = 0;
  for (const CalibrationResult& p : points) {
    EXPECT_LT(std::fabs(p.error()), 0.15) << p.id << ": published " << p.measured << ", predicted " << p.predicted;
    held_out += p.fit ? 0 : 1;
  }
  EXPECT_GE(held_out, 5);
  EXPECT_GE(points.size(), 14u);
}

// The two descriptions of one run agree: `plan` on the fixture (placed by the engine's rule) and the
// calibration's seed-engine run on the fixture's shape (layers in SRAM up to 210 KB).
TEST(CostCalibration, PlanOnTheFixtureAgreesWithTheSeedEnginePoint) {
  MC_REQUIRE_SHARED();
  auto m = load(ple());
  BoardProfile b;
  ASSERT_TRUE(board_preset("esp32s3-psram80", &b).ok());
  CostOptions o;
  o.threads = 2;
  o.kv_bytes = 1;
  o.ctx_len = 256;
  o.pos = 0;
  CostReport r;
  ASSERT_TRUE(cost_model(*m, b, o, &r).ok());
  double seed_ms = 0;
  for (const CalibrationResult& p : calibration_points(esp32s3_preset_compute()))
    if (p.id == "seed.3.4M@0") seed_ms = p.predicted;
  ASSERT_GT(seed_ms, 0);
  EXPECT_NEAR(1e3 * r.token_s, seed_ms, 0.1 * seed_ms);
}

TEST(CliPlan, PrintsStagesPositionsAndTheCalibration) {
  MC_REQUIRE_SHARED();
  auto r = test::run_cli({"plan", "-m", ple(), "--board", "esp32s3-psram80", "-t", "2", "--ctx", "256", "--kv-bytes", "1",
                          "--head-groups", "256", "--head-top", "16"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* want : {"stage", "input", "attn", "ffn", "ple", "head", "ms per stage by position", "total_ms", "255"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  r = test::run_cli({"plan", "--calibration"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* want : {"seed.two-stage@120", "esp32-llm", "tinyllm-c.head", "check", "fit"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  r = test::run_cli({"plan", "--board", "esp32s3-psram80"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("-m MODEL"), std::string::npos) << r.err;
  r = test::run_cli({"plan", "-m", ple(), "--kv-bytes", "3"});
  EXPECT_NE(r.exit_code, 0);
  r = test::run_cli({"plan", "-m", ple(), "--head-top", "8"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--head-groups"), std::string::npos) << r.err;
  r = test::run_cli({"plan", "-m", ple(), "--head-groups", "0"});
  EXPECT_NE(r.exit_code, 0);
}

std::string write_board(const std::string& name, const std::string& json) {
  const std::string path = test::temp_dir() + "/" + name;
  test::write_file(path, std::vector<uint8_t>(json.begin(), json.end()));
  return path;
}

TEST(CliRunBoard, AModelThatDoesNotFitIsRefusedNamingWhatOverflows) {
  MC_REQUIRE_SHARED();
  BoardProfile p;
  ASSERT_TRUE(board_preset("esp32s3-psram80", &p).ok());
  // fits: runs
  auto r = test::run_cli({"run", "-m", stories(), "--prompt-ids", "1", "-n", "4", "--temp", "0", "-q", "--board", "esp32s3-psram80"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("fits on esp32s3-psram80"), std::string::npos) << r.err;
  // flash too small for the image: the tier, the bytes, the largest tensors
  p.tiers[2].capacity_bytes = 500000;
  r = test::run_cli({"run", "-m", stories(), "--prompt-ids", "1", "-n", "4", "-q", "--board",
                     write_board("small_flash.json", board_profile_to_json(p))});
  EXPECT_EQ(r.exit_code, 3);
  for (const char* want : {"does not fit", "flash overflows", "needs", "500000", "largest there", "tok_emb"})
    EXPECT_NE(r.err.find(want), std::string::npos) << want << "\n" << r.err;
  // PSRAM too small for the KV cache of the context asked for
  ASSERT_TRUE(board_preset("esp32s3-psram80", &p).ok());
  p.tiers[1].capacity_bytes = 100000;
  r = test::run_cli({"run", "-m", ple(), "--prompt-ids", "1", "-n", "2", "-q", "-c", "512", "--board",
                     write_board("small_psram.json", board_profile_to_json(p))});
  EXPECT_EQ(r.exit_code, 3);
  for (const char* want : {"psram overflows", "KV cache", "100000"})
    EXPECT_NE(r.err.find(want), std::string::npos) << want << "\n" << r.err;
  // SRAM too small for the activations
  ASSERT_TRUE(board_preset("esp32s3-psram80", &p).ok());
  p.tiers[0].capacity_bytes = 1000;
  r = test::run_cli({"run", "-m", stories(), "--prompt-ids", "1", "-n", "2", "-q", "--board",
                     write_board("small_sram.json", board_profile_to_json(p))});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("sram overflows: the activations"), std::string::npos) << r.err;
}

TEST(CliRunBoard, HostileProfilesAreRefusedClearly) {
  MC_REQUIRE_SHARED();
  BoardProfile p;
  ASSERT_TRUE(board_preset("esp32s3-psram80", &p).ok());
  const std::string good = board_profile_to_json(p);
  auto edit = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {edit("\"capacity_bytes\": 16777216", "\"capacity_bytes\": -16777216"), "capacity_bytes"},
      {edit("\"capacity_bytes\": 16777216", "\"capacity_bytes\": 1e400"), "not valid JSON"},
      {edit("\"capacity_bytes\": 16777216", "\"capacity_bytes\": 1e20"), "capacity_bytes"},
      {edit("\"clock_mhz\"", "\"mhz\""), "clock_mhz"},
      {edit("\"name\": \"esp32s3-psram80\"", "\"name\": 80"), "name"},
      {edit("\"read_mb_s\": [", "\"read_mb_s\": [\"fast\", "), "read_mb_s"},
      {"{\"name\": \"x\"}", "clock_mhz"},
      {std::string("\x00\xff\xfe", 3), "not valid JSON"},
  };
  int i = 0;
  for (const auto& c : cases) {
    const std::string path = write_board("hostile" + std::to_string(i++) + ".json", c.first);
    auto r = test::run_cli({"run", "-m", stories(), "--prompt-ids", "1", "-n", "2", "-q", "--board", path});
    EXPECT_EQ(r.exit_code, 2) << c.first;
    EXPECT_NE(r.err.find(c.second), std::string::npos) << r.err << "\n" << c.first;
  }
  auto r = test::run_cli({"run", "-m", stories(), "--prompt-ids", "1", "-n", "2", "-q", "--board", "/nonexistent.json"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("neither a preset"), std::string::npos) << r.err;
}


// `mcullm dummy --arch esp32ai-ple`: the 3.4M layout is the fixture's shape and format, so it loads,
// runs, and the cost model reads exactly the fixture's bytes per tier from it.
TEST(CliDummyPle, LayoutsLoadRunAndCostLikeTheFixture) {
  MC_REQUIRE_SHARED();
  const std::string path = test::temp_dir() + "/dummy_ple34.bin";
  auto r = test::run_cli({"dummy", "--arch", "esp32ai-ple", "--layout", "3.4M", "-o", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto d = load(path), f = load(ple());
  ASSERT_STREQ(d->arch_name(), "ple");
  EXPECT_EQ(d->ple.cfg.input_vocab, f->ple.cfg.input_vocab);
  EXPECT_EQ(d->ple.cfg.dim, f->ple.cfg.dim);
  EXPECT_EQ(d->ple.cfg.ffn, f->ple.cfg.ffn);
  EXPECT_EQ(d->ple.cfg.ple_dim, f->ple.cfg.ple_dim);
  EXPECT_EQ(d->file.size(), f->file.size());
  BoardProfile b;
  ASSERT_TRUE(board_preset("esp32s3-psram80", &b).ok());
  CostReport rd, rf;
  ASSERT_TRUE(cost_model(*d, b, CostOptions(), &rd).ok());
  ASSERT_TRUE(cost_model(*f, b, CostOptions(), &rf).ok());
  for (int t = 0; t < 3; ++t) EXPECT_EQ(rd.read[t], rf.read[t]) << t;
  r = test::run_cli({"run", "-m", path, "--prompt-ids", "1", "-n", "3", "--temp", "0", "-q"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = test::run_cli({"dummy", "--arch", "esp32ai-ple", "--layout", "1B", "-o", path});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("28.9M"), std::string::npos) << r.err;
  r = test::run_cli({"dummy", "--arch", "esp32ai-ple", "--type", "q8_0", "-o", path});
  EXPECT_NE(r.exit_code, 0);
}

// The instruction bound (plan/instruction_table_host.h) of stories260K q4g64 is the table's
// arithmetic over the model's shapes: every matvec by its kind's terms, each distinct matvec input
// quantized once, norms, RoPE over q and k, SwiGLU, attention entries, logits, layers.
TEST(InstructionBound, Stories260kQ4g64IsTheTablesArithmetic) {
  MC_REQUIRE_SHARED();
  const std::string q = test::temp_dir() + "/s260_q4g64.gguf";
  auto conv = test::run_cli({"convert", stories(), "-z", test::shared_path("models/stories260K/tok512.bin"), "-o", q, "--type",
                             "q4g64"});
  ASSERT_EQ(conv.exit_code, 0) << conv.err;
  auto m = load(q);
  const LlamaConfig& c = m->model.cfg;
  const TransformerLayer& l0 = m->model.layers[0];
  ASSERT_EQ(l0.wq.type, DType::kQ4G64);
  ASSERT_EQ(m->model.tok_emb.type, DType::kQ8_0);  // the tied head
  ASSERT_TRUE(m->model.tied_output);
  auto u = [](InstrTerm t) { return instr_term(t).per_unit; };
  auto blocks = [](int rows, int cols, int block) { return static_cast<double>(rows) * ((cols + block - 1) / block); };
  auto q4g64 = [&](int rows, int cols) { return u(InstrTerm::kQ4g64Block) * blocks(rows, cols, 64) + u(InstrTerm::kQ4g64Row) * rows; };
  const int L = c.n_layers, d = c.dim, kv = c.kv_dim(), h = c.hidden_dim;
  const double layer = q4g64(d, d) + 2 * q4g64(kv, d) + q4g64(d, d) + 2 * q4g64(h, d) + q4g64(d, h);
  const double head = u(InstrTerm::kQ8Block) * blocks(c.vocab_size, d, 32) + u(InstrTerm::kQ8Row) * c.vocab_size;
  const double quantized = L * (3.0 * d + h) + d;  // wq|wk|wv, wo, w1|w3, w2 inputs; the head's
  BoardProfile board;
  ASSERT_TRUE(board_preset("esp32s3-psram80", &board).ok());
  for (int pos : {0, 9, 100}) {
    CostOptions o;
    o.ctx_len = 256;
    o.pos = pos;
    CostReport r;
    ASSERT_TRUE(cost_model(*m, board, o, &r).ok());
    const double entries = static_cast<double>(L) * c.n_heads * (pos + 1);
    const double expect = L * layer + head + u(InstrTerm::kQuantElem) * quantized +
                          u(InstrTerm::kNormElem) * d * (2.0 * L + 1) + u(InstrTerm::kRopeElem) * L * (d + kv) +
                          u(InstrTerm::kSiluElem) * L * h + u(InstrTerm::kAttnEntry) * entries +
                          u(InstrTerm::kAttnEntryDim) * entries * c.head_dim() + u(InstrTerm::kLogit) * c.vocab_size +
                          u(InstrTerm::kLayer) * L;
    EXPECT_NEAR(r.instructions, expect, 1e-9 * expect) << pos;
    EXPECT_TRUE(r.instr.unsupported.empty());
    EXPECT_DOUBLE_EQ(r.instr_s, r.instructions / board.clock_hz);  // one core, whatever -t says
    EXPECT_EQ(r.instructions_bind(), r.instr_s > r.memory_s);
    // The int8 KV cache swaps the attention terms for their int8 ones and changes nothing else.
    o.kv_bytes = 1;
    CostReport r8;
    ASSERT_TRUE(cost_model(*m, board, o, &r8).ok());
    const double attn_f32 = u(InstrTerm::kAttnEntry) * entries + u(InstrTerm::kAttnEntryDim) * entries * c.head_dim();
    const double attn_q8 = u(InstrTerm::kAttnEntryQ8) * entries + u(InstrTerm::kAttnEntryDimQ8) * entries * c.head_dim();
    EXPECT_NEAR(r8.instructions, expect - attn_f32 + attn_q8, 1e-9 * expect) << pos;
  }
}

TEST(InstructionBound, KernelsWithoutAnEmulatedFigureGiveNoBound) {
  InstrUnits u;
  u.add_matvec(DType::kTL1, 64, 64, 0, false);
  u.add_matvec(DType::kQ4E, 64, 64, 32, true);  // q4e with f32 activations: the scalar path
  EXPECT_NE(u.unsupported.find("tl1"), std::string::npos) << u.unsupported;
  EXPECT_NE(u.unsupported.find("q4e (f32 activations)"), std::string::npos) << u.unsupported;
  EXPECT_EQ(u.instructions(), 0);
}

TEST(CliPlan, PrintsBothBoundsAndWhichBinds) {
  MC_REQUIRE_SHARED();
  // The esp32-ai fixture on one core at position 0 (the bytes bind since the attention refit).
  auto m = load(ple());
  BoardProfile board;
  ASSERT_TRUE(board_preset("esp32s3-psram80", &board).ok());
  CostOptions o;
  o.ctx_len = 256;
  o.pos = 0;
  o.threads = 1;
  CostReport r;
  ASSERT_TRUE(cost_model(*m, board, o, &r).ok());
  // Two cores share the split terms only: fewer instructions on the busier core, but more than half.
  CostOptions o2 = o;
  o2.threads = 2;
  CostReport r2;
  ASSERT_TRUE(cost_model(*m, board, o2, &r2).ok());
  EXPECT_LT(r2.instructions, r.instructions);
  EXPECT_GT(r2.instructions, r.instructions / 2);
  auto cli = test::run_cli({"plan", "-m", ple(), "--board", "esp32s3-psram80", "-t", "1", "--ctx", "256", "--pos", "0"});
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  char want[128];
  std::snprintf(want, sizeof want, "bounds: bytes %.3f ms (%.1f tok/s), instructions %.0f = %.3f ms", 1e3 * r.memory_s,
                1.0 / r.memory_s, r.instructions, 1e3 * r.instr_s);
  const char* binds = r.instructions_bind() ? ": the instructions bind" : ": the bytes bind";
  for (const char* w : {static_cast<const char*>(want), "the larger time of the two: ", binds, "instr_tok/s",
                        "bounds, mean over positions 0..255: bytes", "q4e rows", "attention entries"})
    EXPECT_NE(cli.out.find(w), std::string::npos) << w << "\n" << cli.out;
  // The cluster plan gives both bounds through the chain.
  cli = test::run_cli({"plan", "-m", stories(), "--board", "esp32s3-psram80", "--cluster", "1", "--link-mhz", "10"});
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  for (const char* w : {"bytes_ms", "instr_ms", "bounds through the chain", "bind"})
    EXPECT_NE(cli.out.find(w), std::string::npos) << w << "\n" << cli.out;
}

}  // namespace
}  // namespace mcullm
