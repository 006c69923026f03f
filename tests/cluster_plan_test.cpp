// The cluster partition planner (plan/cluster_plan_host.h): its splits are contiguous, cover every layer
// once, fit every node, and their slowest stage is the smallest any split achieves (checked against
// brute force on small cases); models it cannot place get a clear error; the link's frames follow
// the ESP32-S3 SPI DMA rules; `mcullm plan --cluster` refuses hostile flags.
#include <cmath>
#include <functional>
#include <memory>

#include "cluster/frame.h"
#include "plan/model_layouts_host.h"
#include "plan/cluster_plan_host.h"
#include "quant/dtype.h"
#include "load/model_loader_host.h"
#include "test_support.h"

namespace mcullm {
namespace {

BoardProfile small_board(uint64_t psram, uint64_t flash) {
  BoardProfile b = esp32s3_board("test-board", 80, 91, esp32s3_preset_compute());
  b.tiers[1].capacity_bytes = psram;
  b.tiers[2].capacity_bytes = flash;
  return b;
}

// Layers of uneven sizes (from a seed), so that the best split is not just equal counts.
ClusterModel synthetic(int layers, uint64_t seed) {
  ClusterModel m;
  m.name = "synthetic";
  m.dim = 64;
  m.hidden_dim = 128;
  m.n_layers = layers;
  m.ctx_len = 64;
  m.vocab = 256;
  for (int l = 0; l < layers; ++l) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    LayerWork w;
    w.weight_bytes = 200000 + (seed >> 33) % 900000;
    w.macs[static_cast<int>(KernelKind::kTernary)] = static_cast<double>(w.weight_bytes) * 4;
    w.matvecs = 7;
    w.kv_bytes_per_pos = 256;
    w.attn_macs_per_pos = 128;
    w.heads = 4;
    m.layers.push_back(w);
  }
  m.master.embedding_bytes = 300000;
  m.master.embedding_row_bytes = 1200;
  m.master.head_read_bytes = 300000;
  m.master.head_macs = 256.0 * 64;
  m.master.head_kind = KernelKind::kInt4;
  m.master.norm_bytes = 256;
  return m;
}

// Every split of L layers over a master (0 layers, or any with master_layers) and N nodes (>= 1 each).
void for_each_split(int L, int N, bool master_layers, const std::function<void(const std::vector<int>&)>& fn) {
  std::vector<int> cuts(static_cast<size_t>(N + 2), 0);
  cuts.back() = L;
  std::function<void(int)> rec = [&](int i) {  // choose cuts[i], i = 1..N
    if (i == N + 1) {
      fn(cuts);
      return;
    }
    const int lo = i == 1 ? 0 : cuts[static_cast<size_t>(i - 1)] + 1;
    const int hi = i == 1 && !master_layers ? 0 : L - (N - i + 1);
    for (int c = lo; c <= hi; ++c) {
      cuts[static_cast<size_t>(i)] = c;
      rec(i + 1);
    }
  };
  rec(1);
}

TEST(ClusterPlan, BottleneckIsOptimalAgainstBruteForce) {
  const BoardProfile board = small_board(1500000, 3000000);
  int checked = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed)
    for (int L : {3, 5, 8})
      for (int N = 1; N <= std::min(L, 4); ++N)
        for (bool ml : {false, true}) {
          const ClusterModel m = synthetic(L, seed);
          ClusterOptions o;
          o.nodes = N;
          o.master_layers = ml;
          double brute = INFINITY;
          for_each_split(L, N, ml, [&](const std::vector<int>& cuts) {
            ClusterPlan p;
            ASSERT_TRUE(price_partition(m, board, board, o, cuts, &p).ok());
            bool fits = true;
            double worst = 0;
            for (const StagePlan& s : p.stages) {
              fits = fits && s.fits;
              worst = std::max(worst, s.compute_s);
            }
            if (fits) brute = std::min(brute, worst);
          });
          ClusterPlan p;
          const Status st = plan_cluster(m, board, board, o, &p);
          SCOPED_TRACE("seed " + std::to_string(seed) + " L " + std::to_string(L) + " N " + std::to_string(N) +
                       (ml ? " master layers" : ""));
          if (std::isinf(brute)) {
            EXPECT_EQ(st.code(), Code::kOutOfRange) << st.message();
            continue;
          }
          ASSERT_TRUE(st.ok()) << st.message();
          ++checked;
          // Contiguous, covering, every node at least one layer, every stage fits.
          ASSERT_EQ(p.stages.size(), static_cast<size_t>(N + 1));
          EXPECT_EQ(p.stages[0].first, 0);
          if (!ml) {
            EXPECT_EQ(p.stages[0].end, 0);
          }
          for (int i = 1; i <= N; ++i) {
            EXPECT_EQ(p.stages[static_cast<size_t>(i)].first, p.stages[static_cast<size_t>(i - 1)].end);
            EXPECT_GT(p.stages[static_cast<size_t>(i)].end, p.stages[static_cast<size_t>(i)].first);
          }
          EXPECT_EQ(p.stages.back().end, L);
          double worst = 0;
          for (const StagePlan& s : p.stages) {
            EXPECT_TRUE(s.fits) << s.name << ": " << s.overflow;
            worst = std::max(worst, s.compute_s);
          }
          EXPECT_EQ(worst, brute);
          EXPECT_GE(p.bottleneck_s, worst);
          EXPECT_GT(p.latency_s, worst);
        }
  EXPECT_GT(checked, 40);
}

TEST(ClusterPlan, ClearErrorsWhenItCannotFit) {
  const ClusterModel m = synthetic(6, 3);
  ClusterOptions o;
  o.nodes = 2;
  ClusterPlan p;
  // Flash of 1 MB: some layer alone is larger.
  Status st = plan_cluster(m, small_board(1500000, 3000000), small_board(1000000, 1000000), o, &p);
  EXPECT_EQ(st.code(), Code::kOutOfRange);
  EXPECT_NE(std::string(st.message()).find("do not fit on 2 nodes of test-board"), std::string::npos) << st.message();
  // The master's own embedding and head do not fit.
  st = plan_cluster(m, small_board(1000, 100000), small_board(1500000, 3000000), o, &p);
  EXPECT_EQ(st.code(), Code::kOutOfRange);
  EXPECT_NE(std::string(st.message()).find("master's embedding and head"), std::string::npos) << st.message();
  o.nodes = 7;
  st = plan_cluster(m, small_board(1500000, 3000000), small_board(1500000, 3000000), o, &p);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(std::string(st.message()).find("7 nodes for 6 layers"), std::string::npos) << st.message();
  // Bad cut lists.
  o.nodes = 2;
  const BoardProfile b = small_board(1500000, 3000000);
  for (const std::vector<int>& cuts : std::vector<std::vector<int>>{{0, 0, 3}, {0, 0, 3, 7}, {0, 1, 3, 6}, {0, 0, 0, 6}, {0, 0, 4, 3, 6}})
    EXPECT_EQ(price_partition(m, b, b, o, cuts, &p).code(), Code::kInvalidArgument) << cuts.size();
  // A KV cache per stream: enough streams fill PSRAM.
  o.streams = 65;
  EXPECT_EQ(plan_cluster(m, b, b, o, &p).code(), Code::kInvalidArgument);
}

// Stages that become board images (plan_board_split: convert --nodes) must fit the board's image
// partition, the master's with the tokenizer image it carries: exactly at the limit fits, one byte
// over does not. Plans of designs (board_images off) keep the flash tier's capacity only.
TEST(ClusterPlan, BoardImagesFitTheImagePartitionWithTheMastersTokenizer) {
  const ClusterModel m = synthetic(6, 3);
  BoardProfile b = small_board(1500000, 3000000);
  ClusterOptions o;
  o.nodes = 2;
  const uint64_t master_weights = plan_stage(m, b, 0, 0, true, o).weight_bytes;
  const uint64_t layer0 = plan_stage(m, b, 0, 1, false, o).weight_bytes;
  ASSERT_EQ(master_weights, m.master.embedding_bytes + m.master.norm_bytes);
  ASSERT_EQ(layer0, m.layers[0].weight_bytes);
  const uint64_t tokenizer = 4000;
  b.image_bytes_max = master_weights + tokenizer;
  o.master_image_extra = tokenizer;
  EXPECT_TRUE(plan_stage(m, b, 0, 0, true, o).fits);  // not images: the limit does not apply
  b.image_bytes_max = 1;
  EXPECT_TRUE(plan_stage(m, b, 0, 0, true, o).fits);
  o.board_images = true;
  b.image_bytes_max = master_weights + tokenizer;
  EXPECT_TRUE(plan_stage(m, b, 0, 0, true, o).fits);
  b.image_bytes_max = master_weights + tokenizer - 1;
  StagePlan s = plan_stage(m, b, 0, 0, true, o);
  EXPECT_FALSE(s.fits);
  EXPECT_NE(s.overflow.find("+ 4000 of the tokenizer image"), std::string::npos) << s.overflow;
  EXPECT_NE(s.overflow.find("image partition holds " + std::to_string(master_weights + tokenizer - 1)), std::string::npos)
      << s.overflow;
  o.master_image_extra = 0;  // without the tokenizer it fits again
  EXPECT_TRUE(plan_stage(m, b, 0, 0, true, o).fits);
  o.master_image_extra = tokenizer;
  ClusterPlan p;
  Status st = plan_cluster(m, b, small_board(1500000, 3000000), o, &p);
  EXPECT_EQ(st.code(), Code::kOutOfRange);
  EXPECT_NE(std::string(st.message()).find("master's embedding and head"), std::string::npos) << st.message();
  // A node's image: its weights alone (the extra is the master's), against the smaller of flash and the partition.
  b.image_bytes_max = layer0;
  EXPECT_TRUE(plan_stage(m, b, 0, 1, false, o).fits);
  b.image_bytes_max = layer0 - 1;
  s = plan_stage(m, b, 0, 1, false, o);
  EXPECT_FALSE(s.fits);
  EXPECT_NE(s.overflow.find("image partition holds"), std::string::npos) << s.overflow;
  BoardProfile node = small_board(1500000, layer0 - 1);  // flash smaller than the partition: flash decides
  node.image_bytes_max = 1ull << 40;
  s = plan_stage(m, node, 0, 1, false, o);
  EXPECT_FALSE(s.fits);
  EXPECT_NE(s.overflow.find("flash has"), std::string::npos) << s.overflow;
  // No node takes the largest layer: the error names the image limit.
  uint64_t biggest = 0;
  for (const LayerWork& w : m.layers) biggest = std::max(biggest, w.weight_bytes);
  node = small_board(1500000, 3000000);
  node.image_bytes_max = biggest - 1;
  st = plan_cluster(m, small_board(1500000, 3000000), node, o, &p);
  EXPECT_EQ(st.code(), Code::kOutOfRange);
  EXPECT_NE(std::string(st.message()).find("(image " + std::to_string(biggest - 1)), std::string::npos) << st.message();
  node.image_bytes_max = biggest;  // every layer on a node of its own would fit: 6 nodes do
  o.nodes = 6;
  EXPECT_OK(plan_cluster(m, small_board(1500000, 3000000), node, o, &p));
}

TEST(ClusterPlan, MoreStreamsMoreKvCacheAndThroughputUpToTheBottleneck) {
  ClusterModel m;
  ASSERT_TRUE(cluster_model_from_qwen2_layout("ref", DType::kI2_S, DType::kQ4_0, 0, 1, 0, 0, &m).ok());
  BoardProfile b;
  ASSERT_TRUE(board_preset("esp32s3-psram80", &b).ok());
  ClusterOptions o;
  ClusterPlan p1, p4;
  ASSERT_TRUE(plan_cluster(m, b, b, o, &p1).ok());
  o.streams = 4;
  ASSERT_TRUE(plan_cluster(m, b, b, o, &p4).ok());
  EXPECT_EQ(p4.stages[1].kv_bytes, 4 * p1.stages[1].kv_bytes);
  EXPECT_GE(p4.stages[1].compute_s, p1.stages[1].compute_s);  // less PSRAM left for weights
  EXPECT_GT(p4.tokens_per_s(), 2 * p1.tokens_per_s());
  EXPECT_LE(p4.tokens_per_s(), 1.0 / p4.bottleneck_s + 1e-12);
  const std::vector<double> t = stream_table(m, b, b, o, p4, 7);
  ASSERT_EQ(t.size(), 7u);
  EXPECT_DOUBLE_EQ(t[0], p1.tokens_per_s());
  EXPECT_DOUBLE_EQ(t[3], p4.tokens_per_s());
}

TEST(ClusterPlan, ReferenceDesignIsSixNodesOfFourLayers) {
  ClusterModel m;
  ASSERT_TRUE(cluster_model_from_qwen2_layout("ref", DType::kI2_S, DType::kQ4_0, 0, 4, 0, 0, &m).ok());
  EXPECT_EQ(m.n_layers, 24);
  EXPECT_EQ(m.ctx_len, 512);
  // Counted from the shapes (d 896, ffn 4864, KV dim 128): 2*896*896 + 2*128*896 + 3*4864*896 =
  // 14,909,440 ternary weights at 2 bits = 3,727,360 bytes, one f32 scale per matrix (i2_s's tail),
  // f32 norms (2 x 896) and q/k/v biases (896 + 2 x 128): 3.74 MB. FACTS section 5 quotes the design's
  // own "about 3.82 MB per layer", which this count does not reach: the 0.08 MB are not in the shapes.
  const uint64_t d = 896, ffn = 4864, kv = 128;
  const uint64_t ternary = 2 * d * d + 2 * kv * d + 3 * ffn * d;
  EXPECT_EQ(ternary, 14909440u);
  const uint64_t layer_bytes = ternary / 4 + 7 * static_cast<uint64_t>(dtype_info(DType::kI2_S)->tensor_tail_bytes) + 4 * (2 * d + d + 2 * kv);
  EXPECT_EQ(m.layers[0].weight_bytes, layer_bytes);
  EXPECT_NEAR(static_cast<double>(layer_bytes) / 1e6, 3.74, 0.005);
  BoardProfile b;
  ASSERT_TRUE(board_preset("esp32s3-psram80", &b).ok());
  ClusterOptions o;
  ClusterPlan p;
  ASSERT_TRUE(plan_cluster(m, b, b, o, &p).ok());
  const std::vector<int> want = {0, 0, 4, 8, 12, 16, 20, 24};
  EXPECT_EQ(p.cuts, want);
  EXPECT_EQ(p.hops, 7);
  EXPECT_EQ(p.link.payload_bytes, cluster::kHiddenChunkHeadBytes + 896u * 4);  // one frame: chunk head + f32 values
}

TEST(ClusterPlan, FileAndLayoutGiveTheSameLayerWork) {
  const std::string path = test::temp_dir() + "/small.gguf";
  const auto r = test::run_cli({"dummy", "--arch", "qwen2", "--layout", "small", "-o", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::unique_ptr<LoadedModel> lm;
  ASSERT_TRUE(load_model(path, &lm).ok());
  ClusterModel a, b;
  ASSERT_TRUE(cluster_model_from_loaded(*lm, 0, 1, 0, 0, &a).ok());
  ASSERT_TRUE(cluster_model_from_qwen2_layout("small", DType::kI2_S, DType::kQ4_0, 0, 1, 0, 0, &b).ok());
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t l = 0; l < a.layers.size(); ++l) {
    EXPECT_EQ(a.layers[l].weight_bytes, b.layers[l].weight_bytes) << l;
    EXPECT_EQ(a.layers[l].matvecs, b.layers[l].matvecs);
    EXPECT_EQ(a.layers[l].kv_bytes_per_pos, b.layers[l].kv_bytes_per_pos);
    for (int k = 0; k < kKernelKindCount; ++k) EXPECT_EQ(a.layers[l].macs[k], b.layers[l].macs[k]) << l << " " << k;
  }
  EXPECT_EQ(a.master.embedding_row_bytes, b.master.embedding_row_bytes);
  EXPECT_EQ(a.master.head_kind, b.master.head_kind);
}

TEST(ClusterLink, FramesFollowTheDmaRules) {
  LinkOptions o;
  LinkCost c;
  ASSERT_TRUE(link_cost(896, o, &c).ok());
  // The planner prices exactly what the link protocol sends: 28-byte frame headers, a 16-byte chunk
  // head, the values, and a 32-byte ack (cluster/frame.h).
  EXPECT_EQ(c.frames, 1);
  EXPECT_EQ(c.payload_bytes, 16u + 3584u);
  EXPECT_EQ(c.wire_bytes, 28u + 16u + 3584u + 32u);
  EXPECT_EQ(c.wire_bytes - 32u, cluster::hidden_wire_bytes(cluster::HiddenEncoding::kF32, 896));
  EXPECT_NEAR(c.hop_s, ((28 + 16 + 3584 + 32) * 8) / 10e6 + 2 * 50e-6, 1e-12);
  o.precision = HiddenPrecision::kInt8;
  ASSERT_TRUE(link_cost(897, o, &c).ok());
  EXPECT_EQ(c.payload_bytes, 16u + 15u * 4u + 900u);  // 15 scales (one per 64 values), 897 values padded to 900
  o.precision = HiddenPrecision::kF16;
  o.ack = false;
  ASSERT_TRUE(link_cost(20000, o, &c).ok());  // 40000 bytes: two frames of at most 32 KB
  EXPECT_EQ(c.frames, 2);
  EXPECT_EQ(c.payload_bytes % 4, 0u);
  EXPECT_LE(c.wire_bytes, 2u * 32768u);
  for (double mhz : {0.0, -1.0, 1e9, static_cast<double>(NAN)}) {
    LinkOptions bad;
    bad.mhz = mhz;
    EXPECT_EQ(link_cost(896, bad, &c).code(), Code::kInvalidArgument) << mhz;
  }
  LinkOptions bad;
  bad.frame_overhead_s = -1;
  EXPECT_EQ(link_cost(896, bad, &c).code(), Code::kInvalidArgument);
  EXPECT_EQ(link_cost(0, LinkOptions(), &c).code(), Code::kInvalidArgument);
}

TEST(ClusterPlanCli, ReferencePlanAndHostileFlags) {
  auto r = test::run_cli({"plan", "--reference"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("node6    [20,24)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("7 hops"), std::string::npos) << r.out;
  r = test::run_cli({"plan", "--cluster", "2", "--layout", "tiny", "--cuts", "0,0,1,4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("node2    [1,4)"), std::string::npos) << r.out;
  struct Bad {
    std::vector<std::string> args;
    std::string says;
  } bad[] = {
      {{"--cluster", "0", "--layout", "ref"}, "--cluster"},
      {{"--cluster", "5", "--layout", "tiny"}, "5 nodes for 4 layers"},
      {{"--cluster", "2"}, "give a model (-m) or a qwen2 layout"},
      {{"--cluster", "2", "--layout", "huge"}, "layout huge is unknown"},
      {{"--cluster", "2", "--layout", "tiny", "--hidden", "f64"}, "--hidden f64"},
      {{"--cluster", "2", "--layout", "tiny", "--cuts", "0,0,x,4"}, "is not a list of layer numbers"},
      {{"--cluster", "2", "--layout", "tiny", "--cuts", "0,0,4"}, "cut points"},
      {{"--cluster", "2", "--layout", "tiny", "--cuts", "0,0,1,99999999"}, "is not a list"},
      {{"--cluster", "2", "--layout", "tiny", "--link-mhz", "0"}, "--link-mhz"},
      {{"--cluster", "2", "--layout", "tiny", "--streams", "0"}, "--streams"},
      {{"--cluster", "2", "--layout", "tiny", "--kv", "int8", "--kv-bytes", "2"}, "say different things"},
      {{"--cluster", "2", "--layout", "tiny", "--board", "/nonexistent.json"}, "nonexistent"},
      {{"--layout", "ref"}, "need --cluster N"},
      {{"--cluster", "6", "--layout", "ref", "--board", "esp32s3-psram80", "--streams", "64"}, "not fit"},
  };
  for (const Bad& b : bad) {
    std::vector<std::string> args = {"plan"};
    args.insert(args.end(), b.args.begin(), b.args.end());
    const auto res = test::run_cli(args);
    EXPECT_NE(res.exit_code, 0) << b.says;
    EXPECT_NE((res.err + res.out).find(b.says), std::string::npos) << b.says << ": " << res.err << res.out;
  }
}

}  // namespace
}  // namespace mcullm
