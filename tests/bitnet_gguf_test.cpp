// BitNet b1.58 in llama.cpp's GGUF layout (architectures `bitnet` and `bitnet-25`): bitnet.cpp's
// I2_S dummy file loads and runs; our dummy writer's files load, run and give one fingerprint for
// every kernel table and thread count, and the same bytes for the same seed; damaged files (a missing
// tensor, a wrong shape, a non-ternary type) get clear errors. The weights are random, so the text
// is meaningless: these tests check properties, not tokens.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "core/fingerprint.h"
#include "core/thread_pool_host.h"
#include "format/transformer_gguf.h"
#include "model/bitnet.h"
#include "dummy_gguf.h"
#include "format/ternary_gguf_host.h"
#include "load/model_loader_host.h"
#include "quant/ternary.h"
#include "test_support.h"

namespace mcullm {
namespace {

using test::small_vocab;

using test::run_cli;

std::string dummy125m() { return test::shared_path("models/bitnet-dummy/dummy-bitnet-125m.i2_s.gguf"); }

std::vector<uint8_t> tiny_bytes(const std::string& layout, uint64_t seed, DType ternary = DType::kI2_S) {
  GgufDummyOptions opt;
  opt.layout = *bitnet_layout_by_name(layout);
  opt.seed = seed;
  opt.linear_type = ternary;
  GgufWriter w;
  GgufDummyReport rep;
  const Status st = write_gguf_dummy(opt, small_vocab(300), &w, &rep);
  EXPECT_TRUE(st.ok()) << st.message();
  return w.to_bytes();
}

// Everything a test needs to run a model held in memory.
struct Loaded {
  std::vector<uint8_t> tables = std::vector<uint8_t>(size_t{8} << 20);
  std::vector<uint8_t> work = std::vector<uint8_t>(size_t{64} << 20);
  Arena table_arena, work_arena;
  GgufFile file;
  TransformerModel model;
  Status load(const std::vector<uint8_t>& bytes) {
    table_arena.reset(Tier::kHost, tables.data(), tables.size());
    MC_TRY(file.open(bytes.data(), bytes.size(), table_arena));
    return transformer_from_gguf(file, table_arena, &model);
  }
};

// Feeds `steps` tokens (greedy from token 1) and hashes every logit; fails on a non-finite logit.
uint64_t run_fingerprint(const TransformerModel& model, const KernelSet& k, int threads, int steps, int ctx = 64) {
  std::vector<uint8_t> mem(size_t{64} << 20);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  HostThreadPool pool(threads);
  BitnetContext c;
  const Status st = c.init(&model, ctx, arena, &pool, &k);
  EXPECT_TRUE(st.ok()) << st.message();
  if (!st.ok()) return 0;
  Fingerprint fp;
  int token = 1;
  float lo = 0, hi = 0;
  for (int pos = 0; pos < steps; ++pos) {
    const float* logits = nullptr;
    const Status f = c.forward(token, pos, &logits);
    EXPECT_TRUE(f.ok()) << f.message();
    if (!f.ok()) return 0;
    int best = 0;
    for (int i = 0; i < c.vocab_size(); ++i) {
      EXPECT_TRUE(std::isfinite(logits[i])) << "step " << pos << " logit " << i;
      if (!std::isfinite(logits[i])) return 0;
      if (logits[i] > logits[best]) best = i;
      lo = std::min(lo, logits[i]);
      hi = std::max(hi, logits[i]);
    }
    fp.add_logits(logits, static_cast<size_t>(c.vocab_size()));
    fp.add_token(best);
    token = best;
  }
  EXPECT_GT(hi - lo, 1e-3f) << "the logits are all the same";
  return fp.combined();
}

std::vector<const KernelSet*> tables() {
  std::vector<const KernelSet*> t = {&kernels_ref()};
  if (kernels_avx2()) t.push_back(kernels_avx2());
  if (kernels_avx512()) t.push_back(kernels_avx512());
  if (kernels_amx()) t.push_back(kernels_amx());
  return t;
}

// Batched prefill: the same logits as one forward per token, bit for bit, for both BitNet
// architectures, every kernel table, 1 and 2 threads.
TEST(BitnetPrefill, EqualsForwardPerToken) {
  for (const char* layout : {"tiny", "tiny-25"}) {
    Loaded m;
    const auto bytes = tiny_bytes(layout, 3);  // the model points into these bytes
    ASSERT_TRUE(m.load(bytes).ok());
    for (const KernelSet* k : tables()) {
      for (int threads : {1, 2}) {
        std::vector<uint8_t> mem(size_t{32} << 20);
        Arena arena(Tier::kHost, mem.data(), mem.size());
        HostThreadPool pool(threads);
        BitnetContext single, batched;
        ASSERT_TRUE(single.init(&m.model, 24, arena, &pool, k).ok());
        ASSERT_TRUE(batched.init(&m.model, 24, arena, &pool, k).ok());
        ASSERT_TRUE(batched.enable_batch(7, arena).ok());
        std::vector<int> tokens;
        for (int i = 0; i < 20; ++i) tokens.push_back((i * 37 + 1) % m.model.cfg.vocab_size);
        SCOPED_TRACE(std::string(layout) + " " + k->name + " threads " + std::to_string(threads));
        test::expect_prefill_matches_forward(single, batched, tokens);
      }
    }
  }
}

TEST(BitnetDummy, TinyLoadsWithItsLayout) {
  Loaded m;
  const auto bytes = tiny_bytes("tiny", 7);
  ASSERT_TRUE(m.load(bytes).ok());
  const LlamaConfig& c = m.model.cfg;
  EXPECT_EQ(c.dim, 256);
  EXPECT_EQ(c.hidden_dim, 512);
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.vocab_size, 300);
  EXPECT_EQ(m.model.spec.act, FfnAct::kSilu);
  EXPECT_EQ(m.model.spec.rope, RopeStyle::kNeox);
  EXPECT_TRUE(m.model.tied_output);
  EXPECT_EQ(m.model.tok_emb.type, DType::kF16);
  EXPECT_EQ(m.model.layers[1].wk.type, DType::kI2_S);
  EXPECT_EQ(m.model.layers[1].wk.rows, 128);
  EXPECT_FLOAT_EQ(m.model.layers[1].w2.scale, 1.0f / std::sqrt(512.0f));
}

TEST(BitnetDummy, SameSeedSameBytesOtherSeedOtherWeights) {
  const auto a = tiny_bytes("tiny", 7), b = tiny_bytes("tiny", 7), c = tiny_bytes("tiny", 8);
  EXPECT_EQ(a, b);
  ASSERT_EQ(a.size(), c.size());
  EXPECT_NE(a, c);
}

class BitnetTiny : public ::testing::TestWithParam<const char*> {};

TEST_P(BitnetTiny, SameFingerprintForEveryKernelTableAndThreadCount) {
  Loaded m;
  const auto bytes = tiny_bytes(GetParam(), 11);
  ASSERT_TRUE(m.load(bytes).ok());
  const uint64_t ref = run_fingerprint(m.model, kernels_ref(), 1, 24);
  ASSERT_NE(ref, 0u);
  for (const KernelSet* k : tables())
    for (int threads : {1, 2}) EXPECT_EQ(run_fingerprint(m.model, *k, threads, 24), ref) << k->name << " " << threads;
}

INSTANTIATE_TEST_SUITE_P(Layouts, BitnetTiny, ::testing::Values("tiny", "tiny-25"));

TEST(BitnetDummy, TheTwoArchitecturesDiffer) {
  Loaded a, b;
  const auto bytes = tiny_bytes("tiny", 3);
  ASSERT_TRUE(a.load(bytes).ok());
  // Same weights read as bitnet-25: squared ReLU and adjacent-pair RoPE change the logits.
  b.model = a.model;
  b.model.spec.act = FfnAct::kReluSqr;
  EXPECT_NE(run_fingerprint(a.model, kernels_best(), 1, 4), run_fingerprint(b.model, kernels_best(), 1, 4));
  b.model.spec.act = FfnAct::kSilu;
  b.model.spec.rope = RopeStyle::kAdjacent;
  EXPECT_NE(run_fingerprint(a.model, kernels_best(), 1, 4), run_fingerprint(b.model, kernels_best(), 1, 4));
}

// The tiny model's file rebuilt tensor by tensor: `skip` left out, `replace` given another type/shape.
struct Edit {
  std::string skip, replace;
  DType type = DType::kF32;
  std::vector<int64_t> ne;
};

std::vector<uint8_t> rebuilt(const Edit& e) {
  const auto bytes = tiny_bytes("tiny", 5);
  std::vector<uint8_t> mem(size_t{8} << 20);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  GgufFile f;
  EXPECT_TRUE(f.open(bytes.data(), bytes.size(), arena).ok());
  GgufWriter w;
  w.set_string("general.architecture", "bitnet");
  for (const char* key : {"bitnet.block_count", "bitnet.context_length", "bitnet.embedding_length", "bitnet.feed_forward_length",
                          "bitnet.attention.head_count", "bitnet.attention.head_count_kv"}) {
    uint32_t v = 0;
    EXPECT_TRUE(f.get_u32(key, &v).ok());
    w.set_u32(key, v);
  }
  for (uint64_t i = 0; i < f.tensor_count(); ++i) {
    const GgufTensor* t = f.tensor(i);
    const std::string name(t->name.data, t->name.size);
    if (name == e.skip) continue;
    if (name == e.replace) {
      int64_t rows = 1;
      for (size_t d = 1; d < e.ne.size(); ++d) rows *= e.ne[d];
      const size_t n = static_cast<size_t>(rows) * dtype_row_bytes(e.type, e.ne[0]) + dtype_info(e.type)->tensor_tail_bytes;
      std::vector<uint8_t> zeros(n, 0);
      EXPECT_TRUE(w.add_tensor(name, e.type, e.ne, zeros.data(), zeros.size()).ok());
      continue;
    }
    std::vector<int64_t> ne(t->ne, t->ne + t->n_dims);
    EXPECT_TRUE(w.add_tensor(name, t->type, ne, t->data, static_cast<size_t>(t->nbytes)).ok());
  }
  return w.to_bytes();
}

TEST(BitnetErrors, RebuiltFileStillLoads) {
  Loaded m;
  const Status st = m.load(rebuilt(Edit()));
  EXPECT_TRUE(st.ok()) << st.message();
}

TEST(BitnetErrors, MissingTensorIsNamed) {
  for (const char* name : {"blk.1.attn_sub_norm.weight", "blk.0.ffn_sub_norm.weight", "blk.1.ffn_down.weight", "output_norm.weight"}) {
    Edit e;
    e.skip = name;
    Loaded m;
    const Status st = m.load(rebuilt(e));
    EXPECT_EQ(st.code(), Code::kNotFound) << name;
    EXPECT_NE(std::string(st.message()).find(name), std::string::npos) << st.message();
  }
}

TEST(BitnetErrors, WrongShapeIsReported) {
  Edit e;
  e.replace = "blk.1.ffn_down.weight";
  e.type = DType::kI2_S;
  e.ne = {256, 256};  // should be 512 columns
  Loaded m;
  const Status st = m.load(rebuilt(e));
  EXPECT_EQ(st.code(), Code::kCorrupt);
  EXPECT_NE(std::string(st.message()).find("ffn_down (layer 1) is 256x256, the config implies 256x512"), std::string::npos)
      << st.message();

  Edit n;
  n.replace = "blk.0.ffn_sub_norm.weight";
  n.type = DType::kF32;
  n.ne = {256};  // the FFN sub-norm spans the hidden width (512)
  const Status sn = m.load(rebuilt(n));
  EXPECT_EQ(sn.code(), Code::kCorrupt);
  EXPECT_NE(std::string(sn.message()).find("blk.0.ffn_sub_norm.weight should be a vector of 512"), std::string::npos)
      << sn.message();
}

TEST(BitnetErrors, NonTernaryLayerIsRefused) {
  Edit e;
  e.replace = "blk.0.attn_q.weight";
  e.type = DType::kF32;
  e.ne = {256, 256};
  Loaded m;
  const Status st = m.load(rebuilt(e));
  EXPECT_EQ(st.code(), Code::kUnsupported);
  EXPECT_NE(std::string(st.message()).find("attn_q (layer 0): expected i2_s"), std::string::npos) << st.message();
}

TEST(BitnetErrors, OtherArchitectureIsRefused) {
  std::vector<uint8_t> mem(size_t{8} << 20);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  GgufWriter w;
  w.set_string("general.architecture", "bitllama2c");  // not of the llama family
  const auto g = w.to_bytes();
  GgufFile f;
  ASSERT_TRUE(f.open(g.data(), g.size(), arena).ok());
  TransformerModel model;
  const Status st = transformer_from_gguf(f, arena, &model);
  EXPECT_EQ(st.code(), Code::kUnsupported);
  EXPECT_NE(std::string(st.message()).find("'bitnet', 'bitnet-25'"), std::string::npos) << st.message();
}

TEST(BitnetI8s, QuantizerFollowsBitnetCppRule) {
  const float x[6] = {0.5f, -1.0f, 0.25f, 0.0f, 1e-3f, -0.75f};
  int8_t q[6];
  float inv = 0;
  quantize_i8s(x, 6, q, &inv);
  const int8_t want[6] = {64, -127, 32, 0, 0, -95};  // 0.5 * 127 = 63.5 -> 64 (half away from zero)
  for (int i = 0; i < 6; ++i) EXPECT_EQ(q[i], want[i]) << i;
  EXPECT_EQ(inv, static_cast<float>(1.0 / static_cast<double>(static_cast<float>(127.0))));
  const float z[3] = {0, 0, 0};
  quantize_i8s(z, 3, q, &inv);  // max |x| floored at 1e-5: all zeros, finite scale
  EXPECT_EQ(q[0] | q[1] | q[2], 0);
  EXPECT_TRUE(std::isfinite(inv));
  const float bad[2] = {1.0f, INFINITY};
  quantize_i8s(bad, 2, q, &inv);
  EXPECT_EQ(q[0], 0);
  EXPECT_EQ(inv, 0.0f);
}

// bitnet.cpp's dummy 125M I2_S file (its own tools wrote it).
TEST(Bitnet125M, LoadsWithItsVocabularyAndRuns) {
  MC_REQUIRE_SHARED();
  std::unique_ptr<LoadedModel> lm;
  const Status st = load_model(dummy125m(), &lm);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_STREQ(lm->arch_name(), "bitnet");
  const TransformerModel& m = lm->model;
  EXPECT_EQ(m.cfg.dim, 768);
  EXPECT_EQ(m.cfg.hidden_dim, 3072);
  EXPECT_EQ(m.cfg.n_layers, 11);
  EXPECT_EQ(m.cfg.n_heads, 12);
  EXPECT_EQ(m.cfg.vocab_size, 32002);
  EXPECT_TRUE(m.tied_output);
  EXPECT_EQ(m.tok_emb.type, DType::kF16);
  for (int l = 0; l < 11; ++l) EXPECT_GT(m.layers[l].w2.scale, 0.0f);
  Llama2cTokenizer tok;
  std::string source;
  ASSERT_TRUE(load_tokenizer(*lm, "", &tok, &source).ok());
  EXPECT_EQ(tok.vocab_size(), 32002);
  EXPECT_EQ(tok.piece(15043), " Hello");
  // The fast table with 1 and 2 threads (the reference table on this model is in slow_bitnet_gguf_test).
  const KernelSet& k = kernels_best();
  EXPECT_EQ(run_fingerprint(m, k, 1, 3, 16), run_fingerprint(m, k, 2, 3, 16));
}

TEST(BitnetCli, RunsTheBitnetCppDummyFromTokenIds) {
  MC_REQUIRE_SHARED();
  const auto r = run_cli({"run", "-m", dummy125m(), "--prompt-ids", "1,15043,3186", "-n", "16", "--temp", "0", "--fingerprint"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("fingerprint "), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("tokenizer embedded in"), std::string::npos) << r.err;
  const auto r2 = run_cli({"run", "-m", dummy125m(), "--prompt-ids", "1,15043,3186", "-n", "16", "--temp", "0", "--fingerprint", "-t", "2"});
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  EXPECT_EQ(r.out, r2.out);
}

TEST(BitnetCli, DummyWritesRunnableDeterministicFiles) {
  const std::string dir = test::temp_dir();
  for (const char* arch : {"bitnet", "bitnet-25"}) {
    const std::string a = dir + "/a-" + arch + ".gguf", b = dir + "/b-" + arch + ".gguf";
    auto w = run_cli({"dummy", "--arch", arch, "-o", a, "--seed", "9"});
    ASSERT_EQ(w.exit_code, 0) << w.err;
    w = run_cli({"dummy", "--arch", arch, "-o", b, "--seed", "9"});
    ASSERT_EQ(w.exit_code, 0) << w.err;
    EXPECT_EQ(test::read_file(a), test::read_file(b));
    std::string first;
    for (const char* kernels : {"ref", "avx2"})
      for (const char* threads : {"1", "2"}) {
        const auto r = run_cli({"run", "-m", a, "-p", "the dog", "-n", "12", "--temp", "0", "--kernels", kernels, "-t", threads,
                                "--fingerprint"});
        if (r.exit_code != 0 && std::string(kernels) == "avx2" && !kernels_avx2()) continue;
        ASSERT_EQ(r.exit_code, 0) << r.err;
        if (first.empty()) first = r.out;
        EXPECT_EQ(r.out, first) << arch << " " << kernels << " " << threads;
      }
  }
}

TEST(BitnetCli, DummyErrors) {
  const std::string out = test::temp_dir() + "/x.gguf";
  auto r = run_cli({"dummy", "--arch", "bitnet", "--layout", "nope", "-o", out});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--layout nope is unknown"), std::string::npos) << r.err;
  r = run_cli({"dummy", "--arch", "bitnet", "--layout", "2B-4T", "-o", out});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("layout 2B-4T is architecture bitnet-25"), std::string::npos) << r.err;
  r = run_cli({"dummy", "--layout", "tiny", "-o", out});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--layout needs --arch"), std::string::npos) << r.err;
}

// ---- tl1 / tl2 weights (quant/ternary.h "Our GGUF tensor types", model/ternary_lut.h) ----

// The same weights in i2_s, tl1 and tl2 give the same bits: the activations are quantized alike,
// the integer sums are exact, and the one float step is shared; for every kernel table and 1-2 threads.
TEST(BitnetTl, SameFingerprintAsI2sForEveryTableAndThreadCount) {
  for (const char* layout : {"tiny", "tiny-25"}) {
    Loaded base;
    const auto i2s = tiny_bytes(layout, 3);
    ASSERT_TRUE(base.load(i2s).ok());
    const uint64_t want = run_fingerprint(base.model, kernels_ref(), 1, 12);
    for (DType type : {DType::kTL1, DType::kTL2}) {
      Loaded m;
      const auto bytes = tiny_bytes(layout, 3, type);
      const Status st = m.load(bytes);
      ASSERT_TRUE(st.ok()) << st.message();
      EXPECT_EQ(m.model.layers[0].wq.type, type);
      EXPECT_EQ(m.model.layers[1].w2.type, type);
      ASSERT_NE(m.model.layers[1].w2.tl, nullptr);
      for (const KernelSet* k : tables())
        for (int threads : {1, 2})
          EXPECT_EQ(run_fingerprint(m.model, *k, threads, 12), want)
              << layout << " " << dtype_info(type)->name << " " << k->name << " threads " << threads;
    }
  }
}

// Batched prefill through the LUT kernels (one LUT per column, shared by q/k/v and gate/up): the same
// bits as one forward per token.
TEST(BitnetTl, PrefillEqualsForwardPerToken) {
  for (DType type : {DType::kTL1, DType::kTL2}) {
    Loaded m;
    const auto bytes = tiny_bytes("tiny", 3, type);
    ASSERT_TRUE(m.load(bytes).ok());
    for (const KernelSet* k : tables())
      for (int threads : {1, 2}) {
        std::vector<uint8_t> mem(size_t{32} << 20);
        Arena arena(Tier::kHost, mem.data(), mem.size());
        HostThreadPool pool(threads);
        BitnetContext single, batched;
        ASSERT_TRUE(single.init(&m.model, 24, arena, &pool, k).ok());
        ASSERT_TRUE(batched.init(&m.model, 24, arena, &pool, k).ok());
        ASSERT_TRUE(batched.enable_batch(7, arena).ok());
        std::vector<int> tokens;
        for (int i = 0; i < 20; ++i) tokens.push_back((i * 37 + 1) % m.model.cfg.vocab_size);
        SCOPED_TRACE(std::string(dtype_info(type)->name) + " " + k->name + " threads " + std::to_string(threads));
        test::expect_prefill_matches_forward(single, batched, tokens);
      }
  }
}

// Repacks every ternary tensor of a GGUF held in memory.
std::vector<uint8_t> retyped(const std::vector<uint8_t>& bytes, DType to, TernaryRetypeReport* rep = nullptr) {
  std::vector<uint8_t> mem(size_t{8} << 20);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  GgufFile f;
  EXPECT_TRUE(f.open(bytes.data(), bytes.size(), arena).ok());
  GgufWriter w;
  TernaryRetypeReport local;
  const Status st = retype_ternary_gguf(f, to, &w, rep ? rep : &local);
  EXPECT_TRUE(st.ok()) << st.message();
  return w.to_bytes();
}

// Lossless: i2_s -> tl2 -> i2_s and i2_s -> tl1 -> tl2 -> i2_s give the input's bytes; a TL file
// repacked gives the bytes the dummy writer wrote for that type (keys and other tensors copied as they are).
TEST(BitnetTl, RepackingRoundTripsByteForByte) {
  for (const char* layout : {"tiny", "tiny-25"}) {
    const auto i2s = tiny_bytes(layout, 4), tl1 = tiny_bytes(layout, 4, DType::kTL1), tl2 = tiny_bytes(layout, 4, DType::kTL2);
    TernaryRetypeReport rep;
    EXPECT_EQ(retyped(i2s, DType::kTL2, &rep), tl2) << layout;
    EXPECT_EQ(rep.repacked, 14);
    EXPECT_EQ(rep.fell_back, 0);
    EXPECT_LT(tl2.size(), i2s.size());
    EXPECT_EQ(retyped(tl2, DType::kI2_S), i2s) << layout;
    EXPECT_EQ(retyped(i2s, DType::kTL1), tl1) << layout;
    EXPECT_EQ(retyped(retyped(tl1, DType::kTL2), DType::kI2_S), i2s) << layout;
    EXPECT_EQ(retyped(tl2, DType::kTL2), tl2) << layout;
  }
}

// A shape no TL layout holds is written as i2_s with a note; one that neither holds is refused.
TEST(BitnetTl, ShapesWithoutTlLayoutFallBackToI2s) {
  std::vector<int8_t> w(48 * 128);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>(static_cast<int>(i * 7 % 3) - 1);
  std::vector<uint8_t> out;
  DType written;
  std::string note;
  ASSERT_TRUE(ternary_tensor_pack(DType::kTL2, w.data(), 48, 128, 0.5f, &out, &written, &note).ok());  // TL2 tiles: 32-row multiples
  EXPECT_EQ(written, DType::kI2_S);
  EXPECT_NE(note.find("no tl2 tiling holds 48x128"), std::string::npos) << note;
  EXPECT_EQ(out.size(), i2s_tensor_bytes(48, 128));
  ASSERT_TRUE(ternary_tensor_pack(DType::kTL1, w.data(), 48, 128, 0.5f, &out, &written, &note).ok());  // TL1: 16-row tiles
  EXPECT_EQ(written, DType::kTL1);
  EXPECT_TRUE(note.empty());
  std::vector<int8_t> back;
  float scale = 0;
  ASSERT_TRUE(ternary_tensor_unpack("t", DType::kTL1, out.data(), out.size(), 48, 128, &back, &scale).ok());
  EXPECT_EQ(back, w);
  EXPECT_EQ(scale, 0.5f);
  const Status st = ternary_tensor_pack(DType::kTL2, w.data(), 64, 96, 0.5f, &out, &written, &note);  // 96: i2_s needs 128s
  ASSERT_TRUE(st.ok()) << st.message();  // TL2 holds 64x96 (four triple blocks of 24)
  EXPECT_EQ(written, DType::kTL2);
  const Status bad = ternary_tensor_pack(DType::kTL2, w.data(), 48, 96, 0.5f, &out, &written, &note);
  EXPECT_EQ(bad.code(), Code::kInvalidArgument);
  EXPECT_NE(std::string(bad.message()).find("i2_s rows need a multiple of 128 columns (and no TL layout"), std::string::npos)
      << bad.message();
}

// Hostile TL tensors: a malformed tail (reserved bytes, tiling that does not fit, BM 0), a
// truncated file, a column count TL2 cannot store: clear errors naming the tensor, no crash.
TEST(BitnetTl, DamagedTlTensorsAreRefused) {
  const auto good = tiny_bytes("tiny", 5, DType::kTL2);
  std::vector<uint8_t> mem(size_t{8} << 20);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  GgufFile f;
  ASSERT_TRUE(f.open(good.data(), good.size(), arena).ok());
  const GgufTensor* t = f.find_tensor("blk.1.ffn_down.weight");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->type, DType::kTL2);
  const size_t tail = static_cast<size_t>(t->data - good.data()) + static_cast<size_t>(t->nbytes) - kTlFileTailBytes;
  struct Damage { size_t at; uint8_t value; };
  for (const Damage& d : {Damage{tail + 20, 1}, Damage{tail + 5, 0}, Damage{tail + 4, 48}, Damage{tail + 8, 0xC0}, Damage{tail + 8, 25},
                          Damage{tail + 8, 0}, Damage{tail + 12, 16}, Damage{tail + 7, 0x80}}) {
    auto bad = good;
    bad[d.at] = d.value;
    Loaded m;
    const Status st = m.load(bad);
    EXPECT_EQ(st.code(), Code::kCorrupt) << "byte " << d.at - tail;
    EXPECT_NE(std::string(st.message()).find("blk.1.ffn_down.weight: the tl2 tail"), std::string::npos) << st.message();
  }
  {  // a NaN scale
    auto bad = good;
    const float nan = std::nanf("");
    std::memcpy(bad.data() + tail, &nan, 4);
    Loaded m;
    const Status st = m.load(bad);
    EXPECT_EQ(st.code(), Code::kCorrupt);
    EXPECT_NE(std::string(st.message()).find("blk.1.ffn_down.weight has scale"), std::string::npos) << st.message();
  }
  for (size_t cut : {good.size() - 1, tail + 16, tail - 1000}) {  // inside the last tensors
    std::vector<uint8_t> bad(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(cut));
    Loaded m;
    const Status st = m.load(bad);
    EXPECT_EQ(st.code(), Code::kCorrupt) << cut;
    EXPECT_NE(std::string(st.message()).find("past the end of the file"), std::string::npos) << st.message();
  }
  {  // an index nibble out of range: loading does not scan the weights, the repacker refuses it
    auto bad = good;
    bad[static_cast<size_t>(t->data - good.data())] = 0xFF;  // triple indices 15 (> 13)
    Loaded m;
    ASSERT_TRUE(m.load(bad).ok());
    EXPECT_TRUE(std::isfinite(static_cast<float>(run_fingerprint(m.model, kernels_best(), 1, 2))));
    std::vector<uint8_t> mem2(size_t{8} << 20);
    Arena a2(Tier::kHost, mem2.data(), mem2.size());
    GgufFile g;
    ASSERT_TRUE(g.open(bad.data(), bad.size(), a2).ok());
    GgufWriter w;
    TernaryRetypeReport rep;
    const Status st = retype_ternary_gguf(g, DType::kI2_S, &w, &rep);
    EXPECT_EQ(st.code(), Code::kCorrupt);
    EXPECT_NE(std::string(st.message()).find("blk.1.ffn_down.weight: an index out of range for tl2"), std::string::npos)
        << st.message();
  }
  {  // a tl2 tensor of 100 columns (no triple / pair split of 100 is a multiple of 8)
    GgufWriter w;
    std::vector<uint8_t> zeros(64, 0);
    const Status st = w.add_tensor("x", DType::kTL2, {100, 4}, zeros.data(), zeros.size());
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.message();
  }
}

TEST(BitnetTl, CliDummyAndConvert) {
  const std::string dir = test::temp_dir();
  std::string first;
  for (const char* type : {"i2_s", "tl1", "tl2"}) {
    const std::string path = dir + "/" + type + ".gguf";
    auto w = run_cli({"dummy", "--arch", "bitnet-25", "--type", type, "-o", path, "--seed", "2"});
    ASSERT_EQ(w.exit_code, 0) << w.err;
    EXPECT_NE(w.err.find(std::string(type) + " + f16 embedding"), std::string::npos) << w.err;
    const auto r = run_cli({"run", "-m", path, "-p", "the dog", "-n", "8", "--temp", "0", "-t", "2", "--fingerprint"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    if (first.empty()) first = r.out;
    EXPECT_EQ(r.out, first) << type;
  }
  {  // tilings from a tuning file: other bytes (BM 128 for the 256x256 matrices), the same logits
    std::FILE* f = std::fopen((dir + "/tuning.txt").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("mcullm-tl-tuning 1\ntl2 256 256 128 96 32\n", f);
    std::fclose(f);
    const std::string tuned = dir + "/tuned.gguf";
    auto w = run_cli({"dummy", "--arch", "bitnet-25", "--type", "tl2", "-o", tuned, "--seed", "2", "--use-pretuned", "--tuning",
                      dir + "/tuning.txt"});
    ASSERT_EQ(w.exit_code, 0) << w.err;
    EXPECT_NE(test::read_file(tuned), test::read_file(dir + "/tl2.gguf"));
    const auto r = run_cli({"run", "-m", tuned, "-p", "the dog", "-n", "8", "--temp", "0", "-t", "2", "--fingerprint"});
    EXPECT_EQ(r.out, first);
    // run with the tuning on the file packed with the defaults: the file's tiling, with a note
    const auto n = run_cli({"run", "-m", dir + "/tl2.gguf", "-p", "the dog", "-n", "8", "--temp", "0", "--fingerprint",
                            "--use-pretuned", "--tuning", dir + "/tuning.txt"});
    EXPECT_EQ(n.out, first);
    EXPECT_NE(n.err.find("note: tl2 256x256 is packed with BM 256 BK 96 bm 32, the tuning asks for BM 128 BK 96 bm 32"),
              std::string::npos) << n.err;
  }
  auto c = run_cli({"convert", dir + "/i2_s.gguf", "--type", "tl2", "-o", dir + "/c.tl2.gguf"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE(c.err.find("14 ternary matrices as tl2"), std::string::npos) << c.err;
  EXPECT_EQ(test::read_file(dir + "/c.tl2.gguf"), test::read_file(dir + "/tl2.gguf"));
  c = run_cli({"convert", dir + "/c.tl2.gguf", "--type", "i2_s", "-o", dir + "/c.i2_s.gguf"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_EQ(test::read_file(dir + "/c.i2_s.gguf"), test::read_file(dir + "/i2_s.gguf"));
  c = run_cli({"convert", dir + "/i2_s.gguf", "--type", "tl2", "--embd-type", "q8_0", "-o", dir + "/x.gguf"});
  EXPECT_EQ(c.exit_code, 2);
  EXPECT_NE(c.err.find("--embd-type: a ternary model keeps its embedding"), std::string::npos) << c.err;
  c = run_cli({"convert", dir + "/i2_s.gguf", "--type", "q8_0", "-o", dir + "/x.gguf"});
  EXPECT_EQ(c.exit_code, 2);
  EXPECT_NE(c.err.find("--type q8_0: a BitNet (ternary) model converts to i2_s, tl1 or tl2"), std::string::npos) << c.err;
  c = run_cli({"convert", dir + "/tl1.gguf", "--image", dir + "/x.img"});
  EXPECT_NE(c.exit_code, 0);
  EXPECT_NE(c.err.find("board image: tl1 / tl2 matrices are not in the image format"), std::string::npos) << c.err;
  c = run_cli({"dummy", "--type", "tl2", "-o", dir + "/x.gguf"});
  EXPECT_EQ(c.exit_code, 2);
  EXPECT_NE(c.err.find("--type tl2 needs --arch bitnet"), std::string::npos) << c.err;
}

}  // namespace
}  // namespace mcullm
