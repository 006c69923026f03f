// A llama model in GGUF: round trip through the writer, and files that lie about themselves.
#include <cmath>
#include <cstring>
#include <functional>

#include "core/thread_pool.h"
#include "core/thread_pool_host.h"
#include "kernels/kernels.h"
#include "model/llama.h"
#include "format/gguf.h"
#include "format/gguf_writer_host.h"
#include "format/transformer_gguf.h"
#include "format/transformer_gguf_writer_host.h"
#include "quant/blocks.h"
#include "test_support.h"

namespace mcullm {
namespace {

// A tiny llama model held in vectors.
struct TinyModel {
  LlamaModel model;
  std::vector<std::vector<float>> store;
  std::vector<LlamaLayer> layers;

  MatRef mat(int rows, int cols, uint32_t salt) {
    store.emplace_back(static_cast<size_t>(rows) * cols);
    for (size_t i = 0; i < store.back().size(); ++i)
      store.back()[i] = static_cast<float>(static_cast<int>((i * 2654435761u + salt * 40503u) % 201) - 100) / 400.0f;
    MatRef m;
    m.data = store.back().data();
    m.rows = rows;
    m.cols = cols;
    m.row_bytes = static_cast<size_t>(cols) * 4;
    return m;
  }
  const float* ones(int n) {
    store.emplace_back(static_cast<size_t>(n), 1.0f);
    return store.back().data();
  }
  TinyModel() {
    LlamaConfig& c = model.cfg;
    c.dim = 64; c.hidden_dim = 96; c.n_layers = 2; c.n_heads = 4; c.n_kv_heads = 2; c.vocab_size = 40; c.seq_len = 16;
    store.reserve(64);
    model.tok_emb = mat(c.vocab_size, c.dim, 1);
    model.output = mat(c.vocab_size, c.dim, 2);
    model.tied_output = false;
    model.out_norm = ones(c.dim);
    layers.resize(2);
    uint32_t salt = 3;
    for (LlamaLayer& L : layers) {
      L.attn_norm = ones(c.dim);
      L.ffn_norm = ones(c.dim);
      L.wq = mat(64, 64, salt++); L.wk = mat(32, 64, salt++); L.wv = mat(32, 64, salt++); L.wo = mat(64, 64, salt++);
      L.w1 = mat(96, 64, salt++); L.w2 = mat(64, 96, salt++); L.w3 = mat(96, 64, salt++);
    }
    model.layers = layers.data();
  }
};

std::vector<float> logits_of(const LlamaModel& m, int steps) {
  std::vector<uint8_t> mem(1 << 20);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  SerialPool pool;
  LlamaContext ctx;
  EXPECT_TRUE(ctx.init(&m, 0, arena, &pool, &kernels_best()).ok());
  std::vector<float> all;
  for (int pos = 0; pos < steps; ++pos) {
    const float* l = nullptr;
    EXPECT_TRUE(ctx.forward(pos * 7 % m.cfg.vocab_size, pos, &l).ok());
    all.insert(all.end(), l, l + m.cfg.vocab_size);
  }
  return all;
}

struct Opened {
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> mem = std::vector<uint8_t>(1 << 20);
  Arena arena{Tier::kHost, mem.data(), mem.size()};
  GgufFile file;
  LlamaModel model;
  Status status;
};

void open_model(Opened* o) {
  o->status = o->file.open(o->bytes.data(), o->bytes.size(), o->arena);
  if (o->status.ok()) o->status = transformer_from_gguf(o->file, o->arena, &o->model);
}

std::vector<uint8_t> export_bytes(const LlamaModel& m, DType type) {
  GgufWriter w;
  GgufExportOptions opt;
  opt.weight_type = type;
  GgufExportReport rep;
  EXPECT_TRUE(export_transformer_gguf(m, nullptr, opt, &w, &rep).ok());
  return w.to_bytes();
}

// Batched prefill: the same logits as one forward per token, bit for bit, with 1 and 2 threads and
// every kernel table (f32 weights and a q8_0 export).
TEST(LlamaPrefill, EqualsForwardPerToken) {
  TinyModel t;
  t.model.cfg.seq_len = 16;
  for (DType type : {DType::kF32, DType::kQ8_0}) {
    Opened o;
    o.bytes = export_bytes(t.model, type);
    open_model(&o);
    ASSERT_TRUE(o.status.ok()) << o.status.message();
    for (const KernelSet* k : {&kernels_ref(), kernels_avx2(), kernels_avx512(), kernels_amx()}) {
      if (!k) continue;
      for (int threads : {1, 2}) {
        std::vector<uint8_t> mem(4 << 20);
        Arena arena(Tier::kHost, mem.data(), mem.size());
        HostThreadPool pool(threads);
        LlamaContext single, batched;
        ASSERT_TRUE(single.init(&o.model, 0, arena, &pool, k).ok());
        ASSERT_TRUE(batched.init(&o.model, 0, arena, &pool, k).ok());
        EXPECT_EQ(batched.max_batch(), 1);
        ASSERT_TRUE(batched.enable_batch(5, arena).ok());
        EXPECT_EQ(batched.max_batch(), 5);
        std::vector<int> tokens;
        for (int i = 0; i < 16; ++i) tokens.push_back((i * 11 + 1) % t.model.cfg.vocab_size);
        SCOPED_TRACE(std::string(k->name) + " " + dtype_info(type)->name + " threads " + std::to_string(threads));
        test::expect_prefill_matches_forward(single, batched, tokens);
      }
    }
  }
}

TEST(LlamaGguf, F32RoundTripGivesTheSameBits) {
  TinyModel t;
  Opened o;
  o.bytes = export_bytes(t.model, DType::kF32);
  open_model(&o);
  ASSERT_TRUE(o.status.ok()) << o.status.message();
  EXPECT_FALSE(o.model.tied_output);
  const auto a = logits_of(t.model, 5), b = logits_of(o.model, 5);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
}

TEST(LlamaGguf, QuantizedExportsStoreTheQuantizedRows) {
  TinyModel t;
  for (DType type : {DType::kQ8_0, DType::kQ4_0, DType::kQ4G64, DType::kF16}) {
    Opened o;
    o.bytes = export_bytes(t.model, type);
    open_model(&o);
    ASSERT_TRUE(o.status.ok()) << o.status.message();
    ASSERT_EQ(o.model.layers[1].w2.type, type);
    // the stored rows are exactly quantize_row of the source rows
    std::vector<uint8_t> want(dtype_row_bytes(type, 96));
    ASSERT_TRUE(quantize_row(type, reinterpret_cast<const float*>(t.model.layers[1].w2.row(5)), want.data(), 96));
    EXPECT_EQ(0, std::memcmp(o.model.layers[1].w2.row(5), want.data(), want.size()));
    const auto logits = logits_of(o.model, 3);
    for (float x : logits) ASSERT_TRUE(std::isfinite(x));
  }
}

// Logits of `steps` greedy-free steps with the ReLU FFN's sparse path on or off; counts live neurons.
std::vector<float> relu_logits(const LlamaModel& m, const KernelSet* k, int threads, bool sparse, int steps,
                               unsigned long long* neurons, unsigned long long* live,
                               int max_live_permille = kSparseFfnMaxLivePermille) {
  std::vector<uint8_t> mem(4 << 20);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  HostThreadPool pool(threads);
  LlamaContext ctx;
  EXPECT_TRUE(ctx.init(&m, 0, arena, &pool, k).ok());
  ctx.set_sparse_ffn(sparse, max_live_permille);
  std::vector<float> all;
  for (int pos = 0; pos < steps; ++pos) {
    const float* l = nullptr;
    EXPECT_TRUE(ctx.forward((pos * 7 + 3) % m.cfg.vocab_size, pos, &l).ok());
    all.insert(all.end(), l, l + m.cfg.vocab_size);
  }
  FfnCounts c;
  EXPECT_TRUE(ctx.ffn_counts(&c));
  *neurons = c.neurons;
  *live = c.live;
  EXPECT_LE(c.skipped, c.neurons - c.live);
  if (!sparse) {
    EXPECT_EQ(c.skipped, 0u);
  }
  return all;
}

// mcullm.ffn_activation = "relu": the loader runs h = relu(gate x) * (up x); with f32 down matrices
// the sparse FFN (gate first, up / down rows of live neurons only) gives the dense path's bits for
// every kernel table and thread count, the batched prefill too; the activation survives the export.
// The tiny model made ReLU-gated, exported with `type` and loaded again.
void open_relu(TinyModel& t, DType type, Opened* o) {
  t.model.spec.act = FfnAct::kRelu;
  o->bytes = export_bytes(t.model, type);
  open_model(o);
  ASSERT_TRUE(o->status.ok()) << o->status.message();
  ASSERT_EQ(o->model.spec.act, FfnAct::kRelu);
}

TEST(LlamaReluFfn, SparseEqualsDenseAndSkipsNeurons) {
  TinyModel t;
  Opened o;
  ASSERT_NO_FATAL_FAILURE(open_relu(t, DType::kF32, &o));
  ASSERT_NE(o.model.layers[1].w2_t, nullptr);
  EXPECT_EQ(o.model.layers[1].w2_t[5 * 64 + 7], reinterpret_cast<const float*>(o.model.layers[1].w2.row(7))[5]);
  unsigned long long n0 = 0, l0 = 0;
  const auto dense = relu_logits(o.model, &kernels_ref(), 1, false, 8, &n0, &l0);
  EXPECT_EQ(n0, 8ull * 2 * 96);
  EXPECT_GT(l0, 0ull);
  EXPECT_LT(l0, n0);  // some neurons are skipped
  for (const KernelSet* k : {&kernels_ref(), kernels_avx2(), kernels_avx512(), kernels_amx()}) {
    if (!k) continue;
    for (int threads : {1, 2}) {
      SCOPED_TRACE(std::string(k->name) + " threads " + std::to_string(threads));
      unsigned long long n = 0, l = 0;
      const auto sparse = relu_logits(o.model, k, threads, true, 8, &n, &l);
      ASSERT_EQ(sparse.size(), dense.size());
      EXPECT_EQ(0, std::memcmp(sparse.data(), dense.data(), dense.size() * 4));
      EXPECT_EQ(n, n0);
      EXPECT_EQ(l, l0);
    }
  }
  // SwiGLU on the same weights gives other logits: the activation is really switched.
  t.model.spec.act = FfnAct::kSilu;
  EXPECT_FALSE([&] {
    std::vector<uint8_t> mem(4 << 20);
    Arena arena(Tier::kHost, mem.data(), mem.size());
    SerialPool pool;
    LlamaContext ctx;
    EXPECT_TRUE(ctx.init(&t.model, 0, arena, &pool, &kernels_ref()).ok());
    FfnCounts c;
    return ctx.ffn_counts(&c);
  }());
  const auto swiglu = logits_of(t.model, 8);
  EXPECT_NE(0, std::memcmp(swiglu.data(), dense.data(), dense.size() * 4));
  // Batched prefill equals forward (the dense ReLU per token) bit for bit.
  std::vector<uint8_t> mem(4 << 20);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  HostThreadPool pool(2);
  LlamaContext single, batched;
  ASSERT_TRUE(single.init(&o.model, 0, arena, &pool, &kernels_best()).ok());
  ASSERT_TRUE(batched.init(&o.model, 0, arena, &pool, &kernels_best()).ok());
  ASSERT_TRUE(batched.enable_batch(5, arena).ok());
  std::vector<int> tokens;
  for (int i = 0; i < 16; ++i) tokens.push_back((i * 11 + 1) % t.model.cfg.vocab_size);
  test::expect_prefill_matches_forward(single, batched, tokens);
}

// Quantized down matrices (q8_0, q4_0): a column-stored copy (w2_cols) and the quantized sparse FFN
// (model/sparse_ffn.h ffn_relu_sparse_q), the dense path's bits for every kernel table and thread count.
TEST(LlamaReluFfn, QuantizedSparseEqualsDense) {
  for (DType type : {DType::kQ8_0, DType::kQ4_0}) {
    SCOPED_TRACE(dtype_info(type)->name);
    TinyModel t;
    Opened o;
    ASSERT_NO_FATAL_FAILURE(open_relu(t, type, &o));
    EXPECT_EQ(o.model.layers[0].w2_t, nullptr);
    ASSERT_EQ(o.model.layers[0].w2.type, type);
    ASSERT_NE(o.model.layers[0].w2_cols.w, nullptr);
    unsigned long long n0 = 0, l0 = 0;
    const auto dense = relu_logits(o.model, &kernels_ref(), 1, false, 8, &n0, &l0);
    for (float x : dense) ASSERT_TRUE(std::isfinite(x));
    EXPECT_GT(l0, 0ull);
    EXPECT_LT(l0, n0);
    for (const KernelSet* k : {&kernels_ref(), kernels_avx2(), kernels_avxvnni(), kernels_avx512(), kernels_amx(),
                               kernels_neon()}) {
      if (!k) continue;
      for (int threads : {1, 2}) {
        SCOPED_TRACE(std::string(k->name) + " threads " + std::to_string(threads));
        unsigned long long n = 0, l = 0;
        // every token sparse (1000), none (0: dense after the gate), the default share
        for (int max_live : {1000, 0, kSparseFfnMaxLivePermille}) {
          const auto sparse = relu_logits(o.model, k, threads, true, 8, &n, &l, max_live);
          ASSERT_EQ(sparse.size(), dense.size());
          EXPECT_EQ(0, std::memcmp(sparse.data(), dense.data(), dense.size() * 4)) << "max live " << max_live;
          EXPECT_EQ(n, n0);
          EXPECT_EQ(l, l0);
        }
        const auto dense_k = relu_logits(o.model, k, threads, false, 8, &n, &l);
        EXPECT_EQ(0, std::memcmp(dense_k.data(), dense.data(), dense.size() * 4));
      }
    }
  }
}

// Writes the tiny model with one change, then expects a clear error mentioning `expect`.
void expect_refused(const std::function<void(GgufWriter&)>& edit, const char* expect) {
  TinyModel t;
  GgufWriter w;
  GgufExportOptions opt;
  GgufExportReport rep;
  ASSERT_TRUE(export_transformer_gguf(t.model, nullptr, opt, &w, &rep).ok());
  edit(w);
  Opened o;
  o.bytes = w.to_bytes();
  open_model(&o);
  EXPECT_FALSE(o.status.ok()) << expect;
  EXPECT_NE(std::string(o.status.message()).find(expect), std::string::npos) << o.status.message();
}

TEST(LlamaGguf, InconsistentFilesAreRefused) {
  expect_refused([](GgufWriter& w) { w.set_string("general.architecture", "qwen2"); }, "qwen2");
  expect_refused([](GgufWriter& w) { w.set_u32("llama.block_count", 3); }, "blk.2");
  expect_refused([](GgufWriter& w) { w.set_u32("llama.embedding_length", 32); }, "should be a vector of 32");
  expect_refused([](GgufWriter& w) { w.set_u32("llama.attention.head_count", 3); }, "multiple");
  expect_refused([](GgufWriter& w) { w.set_u32("llama.context_length", 0); }, "out of range");
  expect_refused([](GgufWriter& w) { w.set_string("llama.feed_forward_length", "96"); }, "llama.feed_forward_length");
  expect_refused([](GgufWriter& w) { w.set_f32("llama.rope.freq_base", -1.0f); }, "rope theta");
  expect_refused([](GgufWriter& w) { w.set_string("mcullm.ffn_activation", "gelu"); }, "only relu and silu");
  expect_refused([](GgufWriter& w) { w.set_string("mcullm.ffn_activation", ""); }, "only relu and silu");
  expect_refused([](GgufWriter& w) { w.set_u32("mcullm.ffn_activation", 1); }, "mcullm.ffn_activation");
  expect_refused(
      [](GgufWriter& w) {
        std::vector<float> v(32, 1.0f);
        ASSERT_FALSE(w.add_tensor("blk.0.attn_norm.weight", DType::kF32, {32}, v.data(), 128).ok());  // duplicate
        w.set_u32("llama.attention.head_count_kv", 5);
      },
      "kv heads");
}

TEST(LlamaGguf, MissingTensorsAreNamed) {
  TinyModel t;
  // Export, then rebuild the file without one tensor.
  const auto full = export_bytes(t.model, DType::kF32);
  std::vector<uint8_t> mem(1 << 20);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  GgufFile f;
  ASSERT_TRUE(f.open(full.data(), full.size(), arena).ok());
  for (const char* drop : {"token_embd.weight", "output_norm.weight", "blk.1.ffn_up.weight", "blk.0.attn_norm.weight"}) {
    GgufWriter w;
    for (uint64_t i = 0; i < f.kv_count(); ++i) {
      const GgufKv* kv = f.kv(i);
      const std::string key(kv->key.data, kv->key.size);
      if (kv->type == GgufType::kString) {
        GgufStr s;
        ASSERT_TRUE(f.get_string(key.c_str(), &s).ok());
        w.set_string(key, std::string(s.data, s.size));
      } else if (kv->type == GgufType::kF32) {
        float v;
        ASSERT_TRUE(f.get_f32(key.c_str(), &v).ok());
        w.set_f32(key, v);
      } else {
        uint32_t v;
        ASSERT_TRUE(f.get_u32(key.c_str(), &v).ok());
        w.set_u32(key, v);
      }
    }
    for (uint64_t i = 0; i < f.tensor_count(); ++i) {
      const GgufTensor* tn = f.tensor(i);
      const std::string name(tn->name.data, tn->name.size);
      if (name == drop) continue;
      std::vector<int64_t> ne(tn->ne, tn->ne + tn->n_dims);
      ASSERT_TRUE(w.add_tensor(name, tn->type, ne, tn->data, tn->nbytes).ok());
    }
    Opened o;
    o.bytes = w.to_bytes();
    open_model(&o);
    EXPECT_EQ(o.status.code(), Code::kNotFound) << drop;
    EXPECT_NE(std::string(o.status.message()).find(drop), std::string::npos) << o.status.message();
  }
}

TEST(LlamaGguf, EveryTruncationIsRefused) {
  TinyModel t;
  t.model.tied_output = true;
  t.model.output = t.model.tok_emb;
  const auto full = export_bytes(t.model, DType::kQ8_0);
  for (size_t cut = 0; cut < full.size(); cut += (cut < 4096 ? 1 : 61)) {
    Opened o;
    o.bytes.assign(full.begin(), full.begin() + static_cast<long>(cut));
    open_model(&o);
    ASSERT_FALSE(o.status.ok()) << cut;
  }
}

}  // namespace
}  // namespace mcullm
