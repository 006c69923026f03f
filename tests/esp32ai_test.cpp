// The esp32-ai model format (v0 / v1) and the PLE model: synthetic files written here load and run,
// every truncation and corrupt header field is refused with a clear error, 1 vs 2 threads and
// ref vs AVX2 give the same bits, and the shared fixture matches esp32-ai's C core's greedy stream
// when its reference outputs are present.
#include "format/esp32ai.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

#include "core/thread_pool_host.h"
#include "model/sparse_ffn.h"
#include "model/vocab_head_build_host.h"
#include "format/esp32ai_writer_host.h"
#include "format/transformer_gguf.h"
#include "quant/q4e.h"
#include "test_support.h"

namespace mcullm {
namespace {

struct Spec {
  int version = 0;
  int vocab = 40, out_vocab = 40, dim = 16, layers = 2, heads = 2, ffn = 23, ple = 8, seq = 32, group = 8;
  bool tied = true;
  bool relu = false;  // v1 flags bit 1: mcullm's ReLU FFN
  float theta = 10000.0f;
};

void put32(std::vector<uint8_t>& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void putf(std::vector<uint8_t>& b, float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  put32(b, u);
}

// A model file with random weights in esp32-ai's layout.
std::vector<uint8_t> write_model(const Spec& s, uint64_t seed = 1) {
  std::vector<uint8_t> b;
  if (s.version == 0) {
    put32(b, kEsp32aiMagicV0);
    for (int v : {s.vocab, s.dim, s.layers, s.heads, s.ffn, s.ple, s.seq, s.group}) put32(b, static_cast<uint32_t>(v));
  } else {
    put32(b, kEsp32aiMagicV1);
    put32(b, 1);
    put32(b, 60);  // header_bytes: 4 bytes of padding after the 56 defined
    put32(b, (s.tied ? kEsp32aiFlagTied : 0u) | (s.relu ? kEsp32aiFlagReluFfn : 0u));
    for (int v : {s.vocab, s.out_vocab, s.dim, s.layers, s.heads, s.ffn, s.ple, s.seq, s.group}) put32(b, static_cast<uint32_t>(v));
  }
  putf(b, s.theta);
  if (s.version == 1) put32(b, 0xDEADBEEF);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  auto quant = [&](int rows, int cols) {
    std::vector<float> x(static_cast<size_t>(rows) * cols);
    for (float& v : x) v = normal(rng);
    std::vector<uint8_t> t(q4e_tensor_bytes(rows, cols, s.group));
    q4e_quantize_tensor(x.data(), rows, cols, s.group, t.data());
    b.insert(b.end(), t.begin(), t.end());
  };
  auto norm = [&](int n) {
    for (int i = 0; i < n; ++i) putf(b, 1.0f + 0.1f * normal(rng));
  };
  const int D = s.dim, L = s.layers, P = s.ple, F = s.ffn;
  quant(s.vocab, D);
  quant(L * P, D);
  norm(P);
  quant(s.vocab, L * P);
  for (int l = 0; l < L; ++l) {
    norm(D);
    quant(3 * D, D);
    quant(D, D);
    norm(D);
    quant(F, D);
    quant(F, D);
    quant(D, F);
    quant(P, D);
    quant(D, P);
    norm(D);
  }
  norm(D);
  if (s.version == 1 && !s.tied) quant(s.out_vocab, D);
  return b;
}

struct Loaded {
  std::vector<uint8_t> file;  // the weights stay in the file's bytes
  std::vector<uint8_t> tables = std::vector<uint8_t>(1 << 20);
  Arena arena{Tier::kHost, tables.data(), tables.size()};
  PleModel model;
};

Status load(std::vector<uint8_t> bytes, Loaded* out) {
  out->file = std::move(bytes);
  return esp32ai_load(out->file.data(), out->file.size(), out->arena, &out->model);
}

// Greedy run: logits of every step.
std::vector<float> run_logits(const PleModel& m, ThreadPool* pool, const KernelSet* k, bool f32, int steps) {
  std::vector<uint8_t> mem(8 << 20);
  Arena work(Tier::kHost, mem.data(), mem.size());
  PleContext ctx;
  const Status st = ctx.init(&m, 0, work, pool, k, f32);
  EXPECT_TRUE(st.ok()) << st.message();
  if (!st.ok()) return {};
  std::vector<float> all;
  int tok = 1;
  for (int pos = 0; pos < steps; ++pos) {
    const float* lg = nullptr;
    EXPECT_TRUE(ctx.forward(tok, pos, &lg).ok());
    all.insert(all.end(), lg, lg + m.cfg.output_vocab);
    int best = 0;
    for (int i = 1; i < m.cfg.output_vocab; ++i)
      if (lg[i] > lg[best]) best = i;
    tok = best;
  }
  return all;
}

TEST(Esp32ai, LoadsV0AndV1TiedAndUntied) {
  Spec v0;
  Loaded a;
  ASSERT_TRUE(load(write_model(v0), &a).ok());
  EXPECT_EQ(a.model.cfg.version, 0);
  EXPECT_TRUE(a.model.cfg.tied_head);
  EXPECT_EQ(a.model.output.data, a.model.tok_emb.data);
  EXPECT_EQ(a.model.layers[1].down.cols, 23);
  Spec v1 = v0;
  v1.version = 1;
  Loaded b;
  ASSERT_TRUE(load(write_model(v1), &b).ok());
  EXPECT_EQ(b.model.cfg.version, 1);
  Spec untied = v1;
  untied.tied = false;
  untied.out_vocab = 37;
  Loaded c;
  ASSERT_TRUE(load(write_model(untied), &c).ok());
  EXPECT_FALSE(c.model.cfg.tied_head);
  EXPECT_EQ(c.model.output.rows, 37);
  EXPECT_NE(c.model.output.data, c.model.tok_emb.data);
  // v0 and v1 of the same weights compute the same logits
  SerialPool pool;
  EXPECT_EQ(run_logits(a.model, &pool, &kernels_ref(), false, 4), run_logits(b.model, &pool, &kernels_ref(), false, 4));
}

TEST(Esp32ai, EveryTruncationIsRefused) {
  for (int version : {0, 1}) {
    Spec s;
    s.version = version;
    s.tied = version == 0;
    const std::vector<uint8_t> full = write_model(s);
    for (size_t n = 0; n < full.size(); n += (n < 200 ? 1 : 7)) {
      std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<long>(n));
      Loaded l;
      const Status st = load(cut, &l);
      ASSERT_FALSE(st.ok()) << "v" << version << " cut at " << n;
    }
  }
}

// Overwrites the u32 at `off`.
std::vector<uint8_t> patched(std::vector<uint8_t> b, size_t off, uint32_t v) {
  std::memcpy(b.data() + off, &v, 4);
  return b;
}

TEST(Esp32ai, CorruptHeadersAndSizesAreRefusedClearly) {
  Spec s;
  const std::vector<uint8_t> v0 = write_model(s);
  s.version = 1;
  const std::vector<uint8_t> v1 = write_model(s);
  struct Case {
    std::vector<uint8_t> bytes;
    const char* says;
  };
  const Case cases[] = {
      {patched(v0, 0, 0x12345678), "magic"},
      {patched(v0, 4, 0), "non-positive"},                 // vocab 0
      {patched(v0, 8, static_cast<uint32_t>(-16)), "non-positive"},
      {patched(v0, 8, 15), "multiple"},                    // dim 15 with 2 heads
      {patched(v0, 16, 3), "multiple"},                    // 3 heads do not divide dim 16
      {patched(v0, 4, 1u << 30), "too large"},             // vocab 2^30
      {patched(v0, 28, 0x7FFFFFFF), "too large"},          // seq_len
      {patched(v0, 36, 0x7FC00000), "theta"},              // rope theta NaN
      {patched(v0, 40, 0), "group size"},                  // tok_emb's group 0
      {patched(v0, 40, static_cast<uint32_t>(-8)), "group size"},
      {patched(v1, 4, 2), "version"},
      {patched(v1, 8, 12), "header_bytes"},
      {patched(v1, 8, 0xFFFFFFF0u), "header_bytes"},
      {patched(v1, 20, 41), "tied head"},                  // output vocab above the input's
      {patched(v1, 16, 2000000), "too large"},
      {patched(v1, 16, 4000), "past the file"},            // bigger vocab than the bytes hold
  };
  int i = 0;
  for (const Case& c : cases) {
    Loaded l;
    const Status st = load(c.bytes, &l);
    ASSERT_FALSE(st.ok()) << "case " << i;
    EXPECT_NE(std::string(st.message()).find(c.says), std::string::npos) << "case " << i << ": " << st.message();
    ++i;
  }
  // 16 heads of 1: an odd head size
  Loaded odd;
  const Status st = load(patched(v0, 16, 16), &odd);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("odd"), std::string::npos) << st.message();
}

TEST(Esp32ai, ForwardRefusesBadTokenAndPosition) {
  Loaded l;
  ASSERT_TRUE(load(write_model(Spec()), &l).ok());
  std::vector<uint8_t> mem(1 << 20);
  Arena work(Tier::kHost, mem.data(), mem.size());
  SerialPool pool;
  PleContext ctx;
  ASSERT_TRUE(ctx.init(&l.model, 8, work, &pool, &kernels_ref(), false).ok());
  const float* lg = nullptr;
  EXPECT_EQ(ctx.forward(40, 0, &lg).code(), Code::kOutOfRange);
  EXPECT_EQ(ctx.forward(-1, 0, &lg).code(), Code::kOutOfRange);
  EXPECT_EQ(ctx.forward(1, 8, &lg).code(), Code::kOutOfRange);
  PleContext too_long;
  EXPECT_FALSE(too_long.init(&l.model, 33, work, &pool, &kernels_ref(), false).ok());
}

TEST(Esp32ai, ThreadsAndKernelTablesGiveTheSameBits) {
  Spec s;
  s.vocab = s.out_vocab = 300;
  s.dim = 64;
  s.heads = 4;
  s.ffn = 101;
  s.group = 32;
  Loaded l;
  ASSERT_TRUE(load(write_model(s, 9), &l).ok());
  SerialPool one;
  HostThreadPool two(2);
  for (bool f32 : {false, true}) {
    const std::vector<float> base = run_logits(l.model, &one, &kernels_ref(), f32, 12);
    EXPECT_EQ(run_logits(l.model, &two, &kernels_ref(), f32, 12), base) << f32;
    if (const KernelSet* avx2 = kernels_avx2()) {
      EXPECT_EQ(run_logits(l.model, &one, avx2, f32, 12), base) << f32;
      EXPECT_EQ(run_logits(l.model, &two, avx2, f32, 12), base) << f32;
    }
  }
}

// esp32-ai bytes -> model -> bytes is stable, and GGUF -> model computes the same logits.
TEST(Esp32ai, WriterAndGgufRoundTrips) {
  SerialPool pool;
  for (int version : {0, 1}) {
    for (bool tied : {true, false}) {
      if (version == 0 && !tied) continue;
      Spec s;
      s.version = version;
      s.tied = tied;
      s.out_vocab = tied ? 40 : 33;
      Loaded a;
      ASSERT_TRUE(load(write_model(s, 4), &a).ok());
      std::vector<uint8_t> bytes;
      ASSERT_TRUE(esp32ai_write_bytes(a.model, &bytes).ok());
      if (version == 0) {
        EXPECT_EQ(bytes, a.file);  // v0 has one layout: byte for byte
      }
      Loaded b;
      ASSERT_TRUE(load(bytes, &b).ok());
      std::vector<uint8_t> again;
      ASSERT_TRUE(esp32ai_write_bytes(b.model, &again).ok());
      EXPECT_EQ(again, bytes);
      const std::vector<float> want = run_logits(a.model, &pool, &kernels_ref(), false, 5);
      EXPECT_EQ(run_logits(b.model, &pool, &kernels_ref(), false, 5), want);

      GgufWriter w;
      ASSERT_TRUE(export_ple_gguf(a.model, "test", &w).ok());
      Loaded g;
      g.file = w.to_bytes();
      GgufFile gf;
      ASSERT_TRUE(gf.open(g.file.data(), g.file.size(), g.arena).ok());
      ASSERT_TRUE(ple_from_gguf(gf, g.arena, &g.model).ok());
      EXPECT_EQ(g.model.cfg.tied_head, tied);
      EXPECT_EQ(run_logits(g.model, &pool, &kernels_ref(), false, 5), want);
    }
  }
}

// mcullm's ReLU-FFN flag (the combo model): read from the v1 header, kept by both writers (esp32-ai
// bytes, GGUF's mcullm.ffn_activation), refused where it has no room (v0); it changes what the FFN
// computes and makes the context count live neurons. Unknown flag bits and activations are refused.
// The combo model's FFN gate first (ple_build_sparse_ffn: q4e down matrices stored by column, the
// column kernel over the live neurons) gives the dense FFN's logits bit for bit: kernel tables ref
// and the best one, one and two threads, always sparse / never / the default share; an odd group
// (groups start mid-byte) and one that does not divide ffn. It skips neurons; f32 activations and
// set_sparse_ffn(false) run dense (skipped 0). Before the column copies are built the down product
// reads the q4e rows (only the up rows of dead neurons are skipped): the same bits too.
TEST(Esp32ai, ReluFfnGateFirstEqualsDense) {
  for (int group : {7, 32})
  for (bool columns : {false, true}) {
    Spec s;
    s.version = 1;
    s.relu = true;
    s.dim = 64;
    s.heads = 4;
    s.ffn = 200;
    s.group = group;
    Loaded a;
    ASSERT_TRUE(load(write_model(s, 11), &a).ok());
    HostThreadPool pool1(1), pool2(2);
    const std::vector<float> dense = run_logits(a.model, &pool1, &kernels_ref(), false, 6);
    const std::vector<float> dense_f32 = run_logits(a.model, &pool1, &kernels_ref(), true, 6);
    if (columns) {
      ASSERT_TRUE(ple_build_sparse_ffn(&a.model, a.arena).ok());
      ASSERT_EQ(a.model.layers[1].down_cols.type, DType::kQ4E);
    }
    EXPECT_EQ(run_logits(a.model, &pool1, &kernels_ref(), true, 6), dense_f32);  // f32: dense
    for (const KernelSet* k : {&kernels_ref(), &kernels_best()})
      for (ThreadPool* pool : {static_cast<ThreadPool*>(&pool1), static_cast<ThreadPool*>(&pool2)})
        for (int max_live : {1000, 0, kSparseFfnMaxLivePermille}) {
          std::vector<uint8_t> mem(8 << 20);
          Arena work(Tier::kHost, mem.data(), mem.size());
          PleContext ctx;
          ASSERT_TRUE(ctx.init(&a.model, 0, work, pool, k, false).ok());
          const auto six_steps = [&] {  // logits of 6 fixed tokens from position 0
            std::vector<float> out;
            int tok = 1;
            for (int pos = 0; pos < 6; ++pos) {
              const float* lg = nullptr;
              EXPECT_TRUE(ctx.forward(tok, pos, &lg).ok());
              out.insert(out.end(), lg, lg + a.model.cfg.output_vocab);
              tok = (tok * 7 + pos) % a.model.cfg.input_vocab;
            }
            return out;
          };
          ctx.set_sparse_ffn(true, max_live);
          const std::vector<float> all = six_steps();
          FfnCounts c;
          ASSERT_TRUE(ctx.ffn_counts(&c));
          EXPECT_EQ(c.neurons, 6ull * s.layers * s.ffn);
          if (max_live == 1000) {
            EXPECT_EQ(c.skipped, c.neurons - c.live);
          } else if (max_live == 0) {
            EXPECT_EQ(c.skipped, 0u);
          }
          // the same tokens again, dense
          ctx.set_sparse_ffn(false);
          const std::vector<float> want = six_steps();
          FfnCounts d;
          ASSERT_TRUE(ctx.ffn_counts(&d));
          EXPECT_EQ(d.skipped, c.skipped);  // the dense run skipped nothing
          ASSERT_EQ(all.size(), want.size());
          EXPECT_EQ(0, std::memcmp(all.data(), want.data(), want.size() * 4))
              << k->name << " group " << group << " max live " << max_live << " columns " << columns;
          if (k == &kernels_ref() && pool == &pool1 && max_live == 1000) {
            EXPECT_GT(c.skipped, 0u);
            EXPECT_EQ(run_logits(a.model, &pool1, k, false, 6), dense);  // the greedy run too
          }
        }
  }
}

// Batched prefill (PleContext::prefill, n tokens per call, every matrix read once for them) gives
// each row the bits forward() gives token by token: SwiGLU and the ReLU FFN (whose single tokens run
// gate first), an odd group, f32 and int8 activations, the full and the two-stage head, kernel
// tables ref and the best one, one and two threads; chunks of 5, 5 and 3, the first without logits
// (cache only) and the cache continued by forward.
TEST(Esp32ai, BatchedPrefillEqualsForward) {
  for (int variant = 0; variant < 3; ++variant) {
    Spec s;
    s.version = 1;
    s.relu = variant != 0;
    s.tied = variant != 2;
    s.out_vocab = s.tied ? s.vocab : 33;
    s.dim = 32;
    s.heads = 4;
    s.ffn = 70;
    s.group = variant == 2 ? 7 : 16;
    Loaded a;
    ASSERT_TRUE(load(write_model(s, 21 + variant), &a).ok());
    if (s.relu) {
      ASSERT_TRUE(ple_build_sparse_ffn(&a.model, a.arena).ok());
    }
    VocabHead groups;
    ASSERT_TRUE(build_vocab_head(a.model.output, 4, 4, a.arena, &groups).ok());
    const int tokens[13] = {1, 5, 9, 3, 30, 2, 7, 7, 11, 0, 39, 4, 8};
    const int V = a.model.cfg.output_vocab;
    HostThreadPool pool1(1), pool2(2);
    for (bool f32 : {false, true})
      for (bool two_stage : {false, true})
        for (const KernelSet* k : {&kernels_ref(), &kernels_best()})
          for (ThreadPool* pool : {static_cast<ThreadPool*>(&pool1), static_cast<ThreadPool*>(&pool2)}) {
            HeadChoice head;
            if (two_stage) {
              head.mode = HeadMode::kTwoStage;
              head.groups = &groups;
              head.top_groups = 2;
            }
            std::vector<uint8_t> mem1(4 << 20), mem2(4 << 20);
            Arena w1(Tier::kHost, mem1.data(), mem1.size()), w2(Tier::kHost, mem2.data(), mem2.size());
            PleContext one, batched;
            ASSERT_TRUE(one.init(&a.model, 0, w1, pool, k, f32).ok());
            ASSERT_TRUE(batched.init(&a.model, 0, w2, pool, k, f32).ok());
            EXPECT_EQ(batched.max_batch(), 1);
            ASSERT_TRUE(batched.enable_batch(5, w2).ok());
            EXPECT_EQ(batched.max_batch(), 5);
            ASSERT_TRUE(one.set_head(head, w1).ok());
            ASSERT_TRUE(batched.set_head(head, w2).ok());
            std::vector<float> want;
            for (int pos = 0; pos < 13; ++pos) {
              const float* lg = nullptr;
              ASSERT_TRUE(one.forward(tokens[pos], pos, &lg).ok());
              want.insert(want.end(), lg, lg + V);
            }
            std::vector<float> got(static_cast<size_t>(13) * V, 0.0f);
            ASSERT_TRUE(batched.prefill(tokens, 5, 0, nullptr).ok());  // cache only
            const float* lg = nullptr;
            ASSERT_TRUE(batched.prefill(tokens + 5, 5, 5, &lg).ok());
            std::memcpy(got.data() + 5 * V, lg, sizeof(float) * 5 * V);
            ASSERT_TRUE(batched.prefill(tokens + 10, 2, 10, &lg).ok());
            std::memcpy(got.data() + 10 * V, lg, sizeof(float) * 2 * V);
            ASSERT_TRUE(batched.forward(tokens[12], 12, &lg).ok());
            std::memcpy(got.data() + 12 * V, lg, sizeof(float) * V);
            EXPECT_EQ(0, std::memcmp(got.data() + 5 * V, want.data() + 5 * V, sizeof(float) * 8 * V))
                << "variant " << variant << " f32 " << f32 << " two-stage " << two_stage << " " << k->name;
            EXPECT_EQ(batched.prefill(tokens, 6, 0, &lg).code(), Code::kInvalidArgument);  // over the cap
            EXPECT_EQ(batched.prefill(tokens, 2, 31, &lg).code(), Code::kOutOfRange);      // past the context
            const int bad[2] = {1, 40};
            EXPECT_EQ(batched.prefill(bad, 2, 0, &lg).code(), Code::kOutOfRange);
          }
  }
}

TEST(Esp32ai, ReluFfnFlagIsReadKeptAndRun) {
  Spec s;
  s.version = 1;
  s.relu = true;
  Loaded a;
  ASSERT_TRUE(load(write_model(s, 5), &a).ok());
  EXPECT_TRUE(a.model.cfg.relu_ffn);
  Spec silu = s;
  silu.relu = false;
  Loaded b;
  ASSERT_TRUE(load(write_model(silu, 5), &b).ok());
  EXPECT_FALSE(b.model.cfg.relu_ffn);
  SerialPool pool;
  const std::vector<float> want = run_logits(a.model, &pool, &kernels_ref(), false, 5);
  EXPECT_NE(run_logits(b.model, &pool, &kernels_ref(), false, 5), want);

  for (Loaded* l : {&a, &b}) {
    std::vector<uint8_t> mem(1 << 20);
    Arena work(Tier::kHost, mem.data(), mem.size());
    PleContext ctx;
    ASSERT_TRUE(ctx.init(&l->model, 8, work, &pool, &kernels_ref(), true).ok());
    const float* lg = nullptr;
    for (int pos = 0; pos < 3; ++pos) ASSERT_TRUE(ctx.forward(pos + 1, pos, &lg).ok());
    FfnCounts c;
    ASSERT_EQ(ctx.ffn_counts(&c), l == &a);
    if (l == &a) {
      EXPECT_EQ(c.neurons, 3ull * s.layers * s.ffn);
      EXPECT_GT(c.live, 0u);
      EXPECT_LT(c.live, c.neurons);
      EXPECT_EQ(c.skipped, 0u);  // f32 activations: dense
    }
  }

  std::vector<uint8_t> bytes;
  ASSERT_TRUE(esp32ai_write_bytes(a.model, &bytes).ok());
  uint32_t flags = 0;
  std::memcpy(&flags, bytes.data() + 12, 4);
  EXPECT_EQ(flags, kEsp32aiFlagTied | kEsp32aiFlagReluFfn);
  Loaded c;
  ASSERT_TRUE(load(bytes, &c).ok());
  EXPECT_TRUE(c.model.cfg.relu_ffn);
  EXPECT_EQ(run_logits(c.model, &pool, &kernels_ref(), false, 5), want);

  GgufWriter w;
  ASSERT_TRUE(export_ple_gguf(a.model, "test", &w).ok());
  Loaded g;
  g.file = w.to_bytes();
  GgufFile gf;
  ASSERT_TRUE(gf.open(g.file.data(), g.file.size(), g.arena).ok());
  ASSERT_TRUE(ple_from_gguf(gf, g.arena, &g.model).ok());
  EXPECT_TRUE(g.model.cfg.relu_ffn);
  EXPECT_EQ(run_logits(g.model, &pool, &kernels_ref(), false, 5), want);

  PleModel v0 = a.model;
  v0.cfg.version = 0;
  const Status st = esp32ai_write_bytes(v0, &bytes);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("ReLU"), std::string::npos) << st.message();

  Loaded bad;
  const Status fl = load(patched(write_model(s, 5), 12, kEsp32aiFlagTied | 4u), &bad);
  ASSERT_FALSE(fl.ok());
  EXPECT_NE(std::string(fl.message()).find("flags"), std::string::npos) << fl.message();

  GgufWriter gelu;
  ASSERT_TRUE(export_ple_gguf(b.model, "", &gelu).ok());
  gelu.set_string(kLlamaFfnKey, "gelu");
  Loaded h;
  h.file = gelu.to_bytes();
  GgufFile hf;
  ASSERT_TRUE(hf.open(h.file.data(), h.file.size(), h.arena).ok());
  const Status act = ple_from_gguf(hf, h.arena, &h.model);
  ASSERT_FALSE(act.ok());
  EXPECT_NE(std::string(act.message()).find("only relu and silu"), std::string::npos) << act.message();
}

TEST(Esp32ai, CorruptGgufIsRefusedClearly) {
  Loaded a;
  ASSERT_TRUE(load(write_model(Spec()), &a).ok());
  struct Case {
    const char* key;
    int value;
    const char* says;
  };
  const Case cases[] = {{"ple.group_size", 0, "group"},      {"ple.group_size", 16, "scales"},
                        {"ple.header_version", 3, "version"}, {"ple.embedding_length", 15, "multiple"},
                        {"ple.input_vocab", 41, "token_embd"}, {"ple.block_count", 3, "should be q4e"}};
  for (const Case& c : cases) {
    GgufWriter w;
    ASSERT_TRUE(export_ple_gguf(a.model, "", &w).ok());
    if (std::string(c.key) == "ple.header_version") w.set_u32(c.key, static_cast<uint32_t>(c.value));
    else w.set_i32(c.key, c.value);
    std::vector<uint8_t> bytes = w.to_bytes();
    std::vector<uint8_t> mem(1 << 20);
    Arena arena(Tier::kHost, mem.data(), mem.size());
    GgufFile gf;
    ASSERT_TRUE(gf.open(bytes.data(), bytes.size(), arena).ok());
    PleModel m;
    const Status st = ple_from_gguf(gf, arena, &m);
    ASSERT_FALSE(st.ok()) << c.key;
    EXPECT_NE(std::string(st.message()).find(c.says), std::string::npos) << c.key << ": " << st.message();
  }
}

std::vector<int> ref_next_tokens(const std::string& path) {
  std::ifstream f(path);
  std::vector<int> next;
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string tag;
    int pos, tok, nxt;
    if (in >> tag >> pos >> tok >> nxt && tag == "TOK") next.push_back(nxt);
  }
  return next;
}

TEST(Esp32ai, SharedFixtureMatchesEsp32aiCCore) {
  MC_REQUIRE_SHARED();
  const std::vector<uint8_t> bytes = test::read_file(test::shared_path("models/esp32-ai-ple/ple4096_int4.bin"));
  Loaded l;
  ASSERT_TRUE(load(bytes, &l).ok());
  const PleConfig& c = l.model.cfg;
  EXPECT_EQ(c.input_vocab, 4096);
  EXPECT_EQ(c.dim, 128);
  EXPECT_EQ(c.n_layers, 6);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.ffn, 415);
  EXPECT_EQ(c.ple_dim, 64);
  EXPECT_EQ(c.seq_len, 512);
  EXPECT_EQ(l.model.tok_emb.group, 128);
  const std::string ref = test::shared_dir() + "/models/esp32-ai-ple/ref/greedy_bos1_f32.tokens";
  const std::vector<int> want = ref_next_tokens(ref);
  ASSERT_GE(want.size(), 200u) << ref << ": esp32-ai's C-core reference stream (part of ../shared) is missing or short";
  SerialPool pool;
  const std::vector<float> lg = run_logits(l.model, &pool, &kernels_best(), true, 200);
  for (int step = 0; step < 200; ++step) {
    const float* row = lg.data() + static_cast<size_t>(step) * 4096;
    int best = 0;
    for (int i = 1; i < 4096; ++i)
      if (row[i] > row[best]) best = i;
    ASSERT_EQ(best, want[step]) << "step " << step;
  }
}

}  // namespace
}  // namespace mcullm
