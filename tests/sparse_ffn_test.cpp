// Gate-first ReLU feed-forward: equals the dense computation bit for bit on synthetic weights
// (f32 and q8_0 gate / up, every kernel table, signed zeros in the input) and on stories260K's FFN
// weights run as a ReLU FFN over its own normalised token embeddings; reports the share skipped.
// A ternary model (i2_s, the qwen2 dummy run with a ReLU FFN): sparse generation equals dense
// generation (every logit's bits, the fingerprint, the counts) for every kernel table and thread count.
#include "model/sparse_ffn.h"

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool_host.h"
#include "dummy_gguf.h"
#include "format/transformer_gguf.h"
#include "load/model_loader_host.h"
#include "model/generate.h"
#include "model/transformer.h"
#include "model/transformer_runner.h"
#include "quant/blocks.h"
#include "test_support.h"

namespace mcullm {
namespace {

struct Ffn {
  std::vector<uint8_t> gate, up;
  std::vector<float> down, down_t;
  ReluFfn f;
};

MatRef pack(DType type, const std::vector<float>& w, int rows, int cols, std::vector<uint8_t>* out) {
  const size_t rb = dtype_row_bytes(type, cols);
  out->assign(rows * rb, 0);
  for (int r = 0; r < rows; ++r) quantize_row(type, &w[static_cast<size_t>(r) * cols], out->data() + r * rb, cols);
  MatRef m;
  m.type = type;
  m.data = out->data();
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = rb;
  return m;
}

void make_ffn(DType type, const float* gate, const float* up, const float* down, int ffn, int dim, Ffn* out) {
  std::vector<float> g(gate, gate + static_cast<size_t>(ffn) * dim), u(up, up + static_cast<size_t>(ffn) * dim);
  out->f.gate = pack(type, g, ffn, dim, &out->gate);
  out->f.up = pack(type, u, ffn, dim, &out->up);
  out->down.assign(down, down + static_cast<size_t>(dim) * ffn);
  out->down_t.assign(static_cast<size_t>(dim) * ffn, 0.0f);
  for (int d = 0; d < dim; ++d)
    for (int i = 0; i < ffn; ++i) out->down_t[static_cast<size_t>(i) * dim + d] = out->down[static_cast<size_t>(d) * ffn + i];
  out->f.down = f32_matrix(out->down.data(), dim, ffn);
  out->f.down_t = out->down_t.data();
}

// Dense vs sparse on one input; returns the live share.
double check_one(const KernelSet& k, const Ffn& f, DType type, const std::vector<float>& x) {
  const int ffn = f.f.gate.rows, dim = f.f.down.rows;
  std::vector<int8_t> xq(dim + 64);
  std::vector<float> xs(dim / 32 + 2);
  ActVec act;
  act.f = x.data();
  if (const int block = dtype_info(type)->act_block; block > 0) {
    quantize_activations(x.data(), dim, block, xq.data(), xs.data());
    act.q = xq.data();
    act.scales = xs.data();
    act.block = block;
  }
  std::vector<float> g(ffn), u(ffn), h(ffn), y1(dim), y2(dim), lanes(static_cast<size_t>(dim) * 16);
  FfnStats dense, sparse;
  ffn_relu_dense(k, f.f, act, g.data(), u.data(), h.data(), y1.data(), &dense);
  ffn_relu_sparse(k, f.f, act, g.data(), u.data(), h.data(), y2.data(), lanes.data(), &sparse);
  EXPECT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * 4), 0) << k.name << " " << dtype_info(type)->name;
  EXPECT_EQ(dense.live, sparse.live);
  EXPECT_LE(sparse.bytes_read, dense.bytes_read);
  return static_cast<double>(sparse.live) / ffn;
}

std::vector<const KernelSet*> tables() {
  std::vector<const KernelSet*> t = {&kernels_ref()};
  if (kernels_avx2()) t.push_back(kernels_avx2());
  return t;
}

TEST(SparseFfn, EqualsDenseOnSyntheticWeights) {
  std::mt19937_64 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int dim = 64, ffn = 200;
  std::vector<float> gate(ffn * dim), up(ffn * dim), down(dim * ffn);
  for (auto* v : {&gate, &up, &down})
    for (float& w : *v) w = normal(rng);
  for (DType type : {DType::kF32, DType::kQ8_0}) {
    Ffn f;
    make_ffn(type, gate.data(), up.data(), down.data(), ffn, dim, &f);
    for (const KernelSet* k : tables()) {
      for (int trial = 0; trial < 20; ++trial) {
        std::vector<float> x(dim);
        for (int j = 0; j < dim; ++j) x[j] = j % 7 == 0 ? -0.0f : normal(rng);
        const double live = check_one(*k, f, type, x);
        EXPECT_GT(live, 0.0);
        EXPECT_LT(live, 1.0);
      }
    }
  }
}

TEST(SparseFfn, EqualsDenseOnStories260kWeightsRunAsRelu) {
  MC_REQUIRE_SHARED();
  std::unique_ptr<LoadedModel> lm;
  ASSERT_TRUE(load_model(test::shared_path("models/stories260K/stories260K.bin"), &lm).ok());
  const LlamaModel& m = lm->model;
  const int dim = m.cfg.dim, ffn = m.cfg.hidden_dim;
  std::vector<float> emb(dim);
  double live_sum = 0;
  int n = 0;
  for (int l = 0; l < m.cfg.n_layers; ++l) {
    const LlamaLayer& L = m.layers[l];
    Ffn f;
    make_ffn(DType::kF32, reinterpret_cast<const float*>(L.w1.data), reinterpret_cast<const float*>(L.w3.data),
             reinterpret_cast<const float*>(L.w2.data), ffn, dim, &f);
    for (int tok = 0; tok < 100; ++tok) {
      ASSERT_TRUE(dequantize_row(m.tok_emb.type, m.tok_emb.row(tok), emb.data(), dim));
      std::vector<float> x(dim);
      rmsnorm(kernels_ref(), x.data(), emb.data(), L.ffn_norm, dim, m.cfg.norm_eps);
      for (const KernelSet* k : tables()) live_sum += check_one(*k, f, DType::kF32, x), ++n;
    }
  }
  std::printf("stories260K FFN weights as ReLU over normalised embeddings: %.1f%% of neurons skipped\n", 100.0 * (1 - live_sum / n));
  RecordProperty("skipped_percent", static_cast<int>(100.0 * (1 - live_sum / n)));
}

// The tiny qwen2 dummy with i2_s layers, read as a ReLU model (no file format says ternary + ReLU;
// the runner takes any BlockSpec), with its column-stored down matrices built.
struct TernaryRelu {
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> mem = std::vector<uint8_t>(size_t{8} << 20);
  Arena arena{Tier::kHost, mem.data(), mem.size()};
  GgufFile file;
  TransformerModel model;
};

void open_ternary_relu(TernaryRelu* t) {
  GgufDummyOptions o;
  o.layout = *qwen2_layout_by_name("tiny");
  o.linear_type = DType::kI2_S;
  o.seed = 99;
  GgufWriter w;
  GgufDummyReport r;
  ASSERT_TRUE(write_gguf_dummy(o, test::small_vocab(300), &w, &r).ok());
  t->bytes = w.to_bytes();
  ASSERT_TRUE(t->file.open(t->bytes.data(), t->bytes.size(), t->arena).ok());
  ASSERT_TRUE(transformer_part_from_gguf(t->file, t->arena, 0, -1, true, true, &t->model).ok());
  ASSERT_TRUE(t->model.spec.ternary);
  t->model.spec.act = FfnAct::kRelu;
  ASSERT_TRUE(build_sparse_ffn(&t->model, t->arena).ok());
}

struct Generated {
  uint64_t fingerprint = 0;
  std::vector<float> logits;  // every step's
  FfnCounts counts;
};

// 16 steps of generate() (4 prompt tokens, then sampled at temperature 0.8) on one token at a time.
Generated generate_with(const TransformerModel& m, const KernelSet* k, int threads, bool sparse, int max_live) {
  std::vector<uint8_t> mem(size_t{4} << 20);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  HostThreadPool pool(threads);
  TransformerContext ctx;
  EXPECT_TRUE(ctx.init(&m, 0, arena, &pool, k).ok());
  ctx.set_sparse_ffn(sparse, max_live);
  SamplerConfig sc;
  sc.seed = 5;
  Sampler sampler;
  EXPECT_TRUE(sampler.init(sc, ctx.vocab_size(), arena).ok());
  const std::vector<int> prompt = {1, 40, 77, 123};
  std::vector<int> history(prompt.size() + 16);
  GenerateOptions go;
  go.n_predict = 12;
  Generated g;
  GenerateHooks hooks{&g.logits, [](void* u, int, const float* l, int n) {
                        static_cast<std::vector<float>*>(u)->insert(static_cast<std::vector<float>*>(u)->end(), l, l + n);
                      }, nullptr};
  Fingerprint fp;
  GenerateResult r;
  EXPECT_TRUE(generate(ctx, sampler, prompt.data(), 4, go, history.data(), &fp, hooks, &r).ok());
  g.fingerprint = fp.combined();
  EXPECT_EQ(ctx.ffn_counts(&g.counts), m.spec.act == FfnAct::kRelu);
  return g;
}

TEST(SparseFfnTernary, GenerationEqualsDenseOnEveryTable) {
  TernaryRelu t;
  ASSERT_NO_FATAL_FAILURE(open_ternary_relu(&t));
  for (int l = 0; l < t.model.cfg.n_layers; ++l) {
    const DownCols& dc = t.model.layers[l].w2_cols;
    ASSERT_EQ(dc.type, DType::kI2_S);
    EXPECT_EQ(dc.rows, t.model.cfg.dim);
    EXPECT_EQ(dc.cols, t.model.cfg.hidden_dim);
    EXPECT_EQ(dc.scales[0], t.model.layers[l].w2.scale);
  }
  const Generated dense = generate_with(t.model, &kernels_ref(), 1, false, 1000);
  ASSERT_GT(dense.logits.size(), 0u);
  for (float x : dense.logits) ASSERT_TRUE(std::isfinite(x));
  EXPECT_GT(dense.counts.live, 0u);
  EXPECT_LT(dense.counts.live, dense.counts.neurons);
  EXPECT_EQ(dense.counts.skipped, 0u);
  for (const KernelSet* k : {&kernels_ref(), kernels_avx2(), kernels_avxvnni(), kernels_avx512(), kernels_amx(),
                             kernels_neon()}) {
    if (!k) continue;
    for (int threads : {1, 2}) {
      // every token sparse (1000), none (0: dense after the gate), the default share, and dense
      for (int max_live : {1000, 0, kSparseFfnMaxLivePermille, -1}) {
        SCOPED_TRACE(std::string(k->name) + " threads " + std::to_string(threads) + " max live " +
                     std::to_string(max_live));
        const Generated g = generate_with(t.model, k, threads, max_live >= 0, max_live < 0 ? 1000 : max_live);
        EXPECT_EQ(g.fingerprint, dense.fingerprint);
        ASSERT_EQ(g.logits.size(), dense.logits.size());
        EXPECT_EQ(0, std::memcmp(g.logits.data(), dense.logits.data(), dense.logits.size() * 4));
        EXPECT_EQ(g.counts.neurons, dense.counts.neurons);
        EXPECT_EQ(g.counts.live, dense.counts.live);
        if (max_live == 1000) {
          EXPECT_EQ(g.counts.skipped, g.counts.neurons - g.counts.live);
        }
        if (max_live <= 0) {
          EXPECT_EQ(g.counts.skipped, 0u);
        }
      }
    }
  }
  // Without the column copies (a board image's default) gate first reads the down rows whole and
  // skips the up rows of dead neurons: the same bits.
  TransformerModel rows = t.model;
  std::vector<TransformerLayer> row_layers(t.model.layers, t.model.layers + rows.cfg.n_layers);
  for (TransformerLayer& L : row_layers) L.w2_cols = DownCols();
  rows.layers = row_layers.data();
  for (const KernelSet* k : {&kernels_ref(), &kernels_best()})
    for (int threads : {1, 2}) {
      SCOPED_TRACE(std::string("rows, ") + k->name + " threads " + std::to_string(threads));
      const Generated g = generate_with(rows, k, threads, true, 1000);
      EXPECT_EQ(g.fingerprint, dense.fingerprint);
      ASSERT_EQ(g.logits.size(), dense.logits.size());
      EXPECT_EQ(0, std::memcmp(g.logits.data(), dense.logits.data(), dense.logits.size() * 4));
      EXPECT_EQ(g.counts.live, dense.counts.live);
      EXPECT_EQ(g.counts.skipped, g.counts.neurons - g.counts.live);
    }
  // The activation is really ReLU: SiLU on the same weights gives other logits.
  TransformerModel silu = t.model;
  silu.spec.act = FfnAct::kSilu;
  const Generated s = generate_with(silu, &kernels_ref(), 1, true, 1000);
  EXPECT_NE(0, std::memcmp(s.logits.data(), dense.logits.data(), std::min(s.logits.size(), dense.logits.size()) * 4));
  // Batched prefill (the dense FFN) equals forward token by token (the sparse one) bit for bit.
  std::vector<uint8_t> mem(size_t{4} << 20);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  HostThreadPool pool(2);
  TransformerContext single, batched;
  ASSERT_TRUE(single.init(&t.model, 0, arena, &pool, &kernels_best()).ok());
  ASSERT_TRUE(batched.init(&t.model, 0, arena, &pool, &kernels_best()).ok());
  ASSERT_TRUE(batched.enable_batch(5, arena).ok());
  single.set_sparse_ffn(true, 1000);
  std::vector<int> tokens;
  for (int i = 0; i < 14; ++i) tokens.push_back((i * 13 + 2) % t.model.cfg.vocab_size);
  test::expect_prefill_matches_forward(single, batched, tokens);
}

// tl1 / tl2 matrices are left dense (no column copy), and so is a sub-norm model.
TEST(SparseFfnTernary, OnlyI2sModelsWithoutSubNormsGetColumns) {
  TernaryRelu t;
  ASSERT_NO_FATAL_FAILURE(open_ternary_relu(&t));
  TransformerModel m = t.model;
  std::vector<TransformerLayer> layers(t.model.layers, t.model.layers + m.cfg.n_layers);
  for (TransformerLayer& L : layers) L.w2_cols = DownCols();
  m.layers = layers.data();
  m.spec.sub_norms = true;
  ASSERT_TRUE(build_sparse_ffn(&m, t.arena).ok());
  EXPECT_EQ(layers[0].w2_cols.w, nullptr);
  m.spec.sub_norms = false;
  layers[1].w1.type = DType::kTL2;  // (only the type is looked at)
  ASSERT_TRUE(build_sparse_ffn(&m, t.arena).ok());
  EXPECT_NE(layers[0].w2_cols.w, nullptr);
  EXPECT_EQ(layers[1].w2_cols.w, nullptr);
}

}  // namespace
}  // namespace mcullm
