// Qwen2 (llama.cpp's `qwen2` layout) and its layer slices: the dummy writer's files load with their
// layout and give one fingerprint for every kernel table, thread count and batching; a model cut
// into slices (embed, each layer range in order, head) gives Decoder::forward's logits bit for bit;
// a slice loaded from a file reads only its own tensors, owns only their bytes and its layers' KV
// cache, and hashes them stably; damaged files and bad ranges get clear errors. The float golden
// (an independent NumPy program) is tools/qwen2_reference.py, run by the qwen2_numpy_golden test.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "core/fingerprint.h"
#include "core/thread_pool_host.h"
#include "format/gguf_writer_host.h"
#include "format/transformer_gguf.h"
#include "model/qwen2.h"
#include "dummy_gguf.h"
#include "load/layer_slice_loader_host.h"
#include "load/model_loader_host.h"
#include "test_support.h"

namespace mcullm {
namespace {

using test::small_vocab;

struct Variant {
  DType linear = DType::kI2_S;
  DType embedding = DType::kQ4_0;
  bool tied = true;
};

std::vector<uint8_t> tiny_bytes(uint64_t seed, Variant v = Variant(), const char* layout = "tiny") {
  GgufDummyOptions opt;
  opt.layout = *qwen2_layout_by_name(layout);
  opt.seed = seed;
  opt.linear_type = v.linear;
  opt.embedding_type = v.embedding;
  opt.tied_head = v.tied;
  GgufWriter w;
  GgufDummyReport rep;
  const Status st = write_gguf_dummy(opt, small_vocab(300), &w, &rep);
  EXPECT_TRUE(st.ok()) << st.message();
  return w.to_bytes();
}

struct Loaded {
  std::vector<uint8_t> tables = std::vector<uint8_t>(size_t{8} << 20);
  Arena table_arena;
  GgufFile file;
  TransformerModel model;
  Status load(const std::vector<uint8_t>& bytes, int first = 0, int end = -1, bool emb = true, bool head = true) {
    table_arena.reset(Tier::kHost, tables.data(), tables.size());
    MC_TRY(file.open(bytes.data(), bytes.size(), table_arena));
    return transformer_part_from_gguf(file, table_arena, first, end, emb, head, &model);
  }
};

std::vector<const KernelSet*> tables() {
  std::vector<const KernelSet*> t = {&kernels_ref()};
  if (kernels_avx2()) t.push_back(kernels_avx2());
  if (kernels_avx512()) t.push_back(kernels_avx512());
  if (kernels_amx()) t.push_back(kernels_amx());
  return t;
}

std::vector<int> some_tokens(int n, int vocab) {
  std::vector<int> t;
  for (int i = 0; i < n; ++i) t.push_back((i * 37 + 1) % vocab);
  return t;
}

// The logits of forward() over `tokens`, all rows; fails on a non-finite or flat row.
std::vector<float> forward_logits(const TransformerModel& model, const KernelSet& k, int threads, const std::vector<int>& tokens,
                                  KvType kv = KvType::kF32) {
  std::vector<uint8_t> mem(size_t{32} << 20);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  HostThreadPool pool(threads);
  Qwen2Context c;
  const Status st = c.init(&model, 64, arena, &pool, &k, kv);
  EXPECT_TRUE(st.ok()) << st.message();
  std::vector<float> all;
  if (!st.ok()) return all;
  for (size_t pos = 0; pos < tokens.size(); ++pos) {
    const float* l = nullptr;
    const Status f = c.forward(tokens[pos], static_cast<int>(pos), &l);
    EXPECT_TRUE(f.ok()) << f.message();
    if (!f.ok()) return {};
    const auto [lo, hi] = std::minmax_element(l, l + c.vocab_size());
    EXPECT_TRUE(std::isfinite(*lo) && std::isfinite(*hi));
    EXPECT_GT(*hi - *lo, 1e-3f) << "flat logits at " << pos;
    all.insert(all.end(), l, l + c.vocab_size());
  }
  return all;
}

uint64_t hash_of(const std::vector<float>& v) {
  Fingerprint fp;
  fp.add_logits(v.data(), v.size());
  return fp.logits();
}

TEST(Qwen2Dummy, TinyLoadsWithItsLayout) {
  Loaded m;
  const auto bytes = tiny_bytes(7);
  ASSERT_TRUE(m.load(bytes).ok());
  const LlamaConfig& c = m.model.cfg;
  EXPECT_EQ(c.dim, 128);
  EXPECT_EQ(c.hidden_dim, 384);
  EXPECT_EQ(c.n_layers, 4);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.vocab_size, 300);
  EXPECT_FLOAT_EQ(c.rope_theta, 1e6f);
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-6f);
  EXPECT_TRUE(m.model.whole());
  EXPECT_TRUE(m.model.spec.ternary);
  EXPECT_TRUE(m.model.tied_output);
  EXPECT_EQ(m.model.tok_emb.type, DType::kQ4_0);
  EXPECT_EQ(m.model.layers[3].wk.type, DType::kI2_S);
  EXPECT_EQ(m.model.layers[3].wk.rows, 64);
  EXPECT_NE(m.model.layers[3].bk, nullptr);
}

TEST(Qwen2Dummy, RefLayoutIsTheReferenceDesign) {
  const ModelLayout* r = qwen2_layout_by_name("ref");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->layers, 24);
  EXPECT_EQ(r->dim, 896);
  EXPECT_EQ(r->hidden, 4864);
  EXPECT_EQ(r->heads, 14);
  EXPECT_EQ(r->kv_heads, 2);
  EXPECT_EQ(r->dim / r->heads, 64);
  EXPECT_EQ(r->vocab, 32000);
  EXPECT_EQ(r->seq_len, 512);
  EXPECT_EQ(qwen2_layout_by_name("nope"), nullptr);
}

TEST(Qwen2Dummy, SameSeedSameBytesOtherSeedOtherWeights) {
  const auto a = tiny_bytes(7), b = tiny_bytes(7), c = tiny_bytes(8);
  EXPECT_EQ(a, b);
  ASSERT_EQ(a.size(), c.size());
  EXPECT_NE(a, c);
}

// One fingerprint for every kernel table and thread count, for ternary, LUT-packed and dense
// linear layers, 4-bit embeddings of both kinds, tied and separate heads, and an int8 KV cache.
TEST(Qwen2Decoder, SameLogitsForEveryKernelTableAndThreadCount) {
  const Variant variants[] = {{DType::kI2_S, DType::kQ4_0, true},
                              {DType::kTL2, DType::kQ4G64, true},
                              {DType::kQ8_0, DType::kQ4_0, false},
                              {DType::kF32, DType::kF32, true}};
  for (const Variant& v : variants) {
    Loaded m;
    const auto bytes = tiny_bytes(11, v);
    const Status st = m.load(bytes);
    ASSERT_TRUE(st.ok()) << st.message();
    const std::vector<int> tokens = some_tokens(10, m.model.cfg.vocab_size);
    for (KvType kv : {KvType::kF32, KvType::kInt8}) {
      if (kv == KvType::kInt8 && v.linear != DType::kI2_S) continue;  // the int8 cache once is enough
      const uint64_t ref = hash_of(forward_logits(m.model, kernels_ref(), 1, tokens, kv));
      for (const KernelSet* k : tables())
        for (int threads : {1, 2})
          EXPECT_EQ(hash_of(forward_logits(m.model, *k, threads, tokens, kv)), ref)
              << dtype_info(v.linear)->name << " " << k->name << " threads " << threads << " kv " << kv_type_name(kv);
    }
  }
}

TEST(Qwen2Decoder, BiasesAndTheHeadMatter) {
  Loaded a, b;
  const auto bytes = tiny_bytes(3);
  ASSERT_TRUE(a.load(bytes).ok());
  ASSERT_TRUE(b.load(bytes).ok());
  const std::vector<int> tokens = some_tokens(4, 300);
  const uint64_t base = hash_of(forward_logits(a.model, kernels_best(), 1, tokens));
  b.model.layers[2].bk = b.model.layers[2].bq;  // another key bias (the first kv_dim values of bq)
  EXPECT_NE(hash_of(forward_logits(b.model, kernels_best(), 1, tokens)), base);
  b.model.layers[2].bk = a.model.layers[2].bk;
  b.model.cfg.rope_theta = 10000.0f;  // llama's theta: other angles
  EXPECT_NE(hash_of(forward_logits(b.model, kernels_best(), 1, tokens)), base);
}

TEST(Qwen2Prefill, EqualsForwardPerToken) {
  for (const Variant& v : {Variant{DType::kI2_S, DType::kQ4_0, true}, Variant{DType::kQ8_0, DType::kQ4G64, false}}) {
    Loaded m;
    const auto bytes = tiny_bytes(3, v);
    ASSERT_TRUE(m.load(bytes).ok());
    for (const KernelSet* k : tables()) {
      for (int threads : {1, 2}) {
        std::vector<uint8_t> mem(size_t{32} << 20);
        Arena arena(Tier::kHost, mem.data(), mem.size());
        HostThreadPool pool(threads);
        Qwen2Context single, batched;
        ASSERT_TRUE(single.init(&m.model, 24, arena, &pool, k).ok());
        ASSERT_TRUE(batched.init(&m.model, 24, arena, &pool, k).ok());
        ASSERT_TRUE(batched.enable_batch(7, arena).ok());
        SCOPED_TRACE(std::string(dtype_info(v.linear)->name) + " " + k->name + " threads " + std::to_string(threads));
        test::expect_prefill_matches_forward(single, batched, some_tokens(20, m.model.cfg.vocab_size));
      }
    }
  }
}

TEST(Qwen2Decoder, RefusesAPartialModel) {
  Loaded m;
  const auto bytes = tiny_bytes(3);
  ASSERT_TRUE(m.load(bytes, 1, 3, true, true).ok());
  std::vector<uint8_t> mem(size_t{8} << 20);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  SerialPool pool;
  Qwen2Context c;
  const Status st = c.init(&m.model, 16, arena, &pool, &kernels_ref());
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(std::string(st.message()).find("whole model"), std::string::npos) << st.message();
}

// Cuts of the 4 layers: embed on the first part, the ranges in order, head on the last.
const std::vector<std::vector<int>> kCuts = {{0, 4}, {0, 1, 4}, {0, 2, 4}, {0, 1, 2, 3, 4}, {0, 3, 4}, {0, 0, 2, 2, 4}};

// embed + every range + head over separately built slices (from the in-memory file) give forward's
// logits bit for bit, with 1 and 2 threads, one position at a time and (ranges) in batches.
TEST(Qwen2Slice, SlicesInOrderEqualForward) {
  const auto bytes = tiny_bytes(5);
  Loaded whole;
  ASSERT_TRUE(whole.load(bytes).ok());
  const std::vector<int> tokens = some_tokens(14, whole.model.cfg.vocab_size);
  const size_t vocab = 300, dim = 128;
  for (int threads : {1, 2}) {
    const std::vector<float> want = forward_logits(whole.model, kernels_best(), threads, tokens);
    ASSERT_EQ(want.size(), tokens.size() * vocab);
    for (const auto& cut : kCuts) {
      const int parts = static_cast<int>(cut.size()) - 1;
      std::vector<std::unique_ptr<Loaded>> models;
      std::vector<std::unique_ptr<Qwen2Slice>> slices;
      std::vector<uint8_t> mem(size_t{32} << 20);
      Arena arena(Tier::kHost, mem.data(), mem.size());
      HostThreadPool pool(threads);
      for (int p = 0; p < parts; ++p) {
        models.push_back(std::make_unique<Loaded>());
        ASSERT_TRUE(models.back()->load(bytes, cut[p], cut[p + 1], p == 0, p == parts - 1).ok());
        slices.push_back(std::make_unique<Qwen2Slice>());
        ASSERT_TRUE(slices.back()->init(&models.back()->model, 32, arena, &pool, &kernels_best()).ok());
        ASSERT_TRUE(slices.back()->enable_batch(5, arena).ok());
        EXPECT_EQ(slices.back()->first_layer(), cut[p]);
        EXPECT_EQ(slices.back()->end_layer(), cut[p + 1]);
      }
      std::string name = "cut";
      for (int c : cut) name += " " + std::to_string(c);
      SCOPED_TRACE(name + " threads " + std::to_string(threads));
      // Positions 0..4 as one batch through every range, then one at a time.
      std::vector<float> hidden(5 * dim);
      for (int i = 0; i < 5; ++i) ASSERT_TRUE(slices[0]->embed(tokens[i], hidden.data() + i * dim).ok());
      for (auto& s : slices) ASSERT_TRUE(s->run_layers_batch(hidden.data(), 5, 0).ok());
      for (int i = 0; i < 5; ++i) {
        const float* l = nullptr;
        ASSERT_TRUE(slices.back()->head(hidden.data() + i * dim, &l).ok());
        EXPECT_EQ(std::memcmp(l, want.data() + i * vocab, vocab * 4), 0) << "batched position " << i;
      }
      for (size_t pos = 5; pos < tokens.size(); ++pos) {
        std::vector<float> h(dim);
        ASSERT_TRUE(slices[0]->embed(tokens[pos], h.data()).ok());
        for (auto& s : slices) ASSERT_TRUE(s->run_layers(h.data(), static_cast<int>(pos)).ok());
        const float* l = nullptr;
        ASSERT_TRUE(slices.back()->head(h.data(), &l).ok());
        EXPECT_EQ(std::memcmp(l, want.data() + pos * vocab, vocab * 4), 0) << "position " << pos;
      }
    }
  }
}

TEST(Qwen2Slice, RefusesWhatItDoesNotHold) {
  const auto bytes = tiny_bytes(5);
  Loaded m;
  ASSERT_TRUE(m.load(bytes, 1, 3, false, false).ok());
  EXPECT_EQ(m.model.tok_emb.data, nullptr);
  EXPECT_EQ(m.model.output.data, nullptr);
  std::vector<uint8_t> mem(size_t{8} << 20);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  SerialPool pool;
  Qwen2Slice s;
  ASSERT_TRUE(s.init(&m.model, 16, arena, &pool, &kernels_ref()).ok());
  std::vector<float> h(128, 0.5f);
  const float* l = nullptr;
  EXPECT_EQ(s.embed(3, h.data()).code(), Code::kInvalidArgument);
  EXPECT_EQ(s.head(h.data(), &l).code(), Code::kInvalidArgument);
  EXPECT_EQ(s.run_layers(h.data(), 16).code(), Code::kOutOfRange);
  EXPECT_EQ(s.run_layers(h.data(), -1).code(), Code::kOutOfRange);
  EXPECT_EQ(s.run_layers_batch(h.data(), 2, 0).code(), Code::kInvalidArgument);  // no batch buffers
  EXPECT_TRUE(s.run_layers(h.data(), 0).ok());
  // Bad ranges.
  for (auto r : {std::pair<int, int>{-1, 2}, {3, 2}, {0, 5}}) {
    Loaded bad;
    EXPECT_EQ(bad.load(bytes, r.first, r.second, false, false).code(), Code::kInvalidArgument) << r.first << " " << r.second;
  }
}

// ---- slices loaded from a file ----

std::string write_tiny(const std::string& name, uint64_t seed, Variant v = Variant()) {
  const std::string path = test::temp_dir() + "/" + name;
  test::write_file(path, tiny_bytes(seed, v));
  return path;
}

// The byte range of a tensor inside a file.
std::pair<size_t, size_t> tensor_range(const std::vector<uint8_t>& bytes, const char* name) {
  std::vector<uint8_t> mem(size_t{8} << 20);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  GgufFile f;
  EXPECT_TRUE(f.open(bytes.data(), bytes.size(), arena).ok());
  const GgufTensor* t = f.find_tensor(name);
  EXPECT_NE(t, nullptr) << name;
  if (!t) return {0, 0};
  return {static_cast<size_t>(t->data - bytes.data()), static_cast<size_t>(t->nbytes)};
}

TEST(Qwen2SliceFile, LoadedSlicesInOrderEqualTheWholeModel) {
  const std::string path = write_tiny("tiny.gguf", 9);
  std::unique_ptr<LoadedModel> lm;
  ASSERT_TRUE(load_model(path, &lm).ok());
  EXPECT_STREQ(lm->arch_name(), "qwen2");
  const std::vector<int> tokens = some_tokens(10, 300);
  for (int threads : {1, 2}) {
    const std::vector<float> want = forward_logits(lm->model, kernels_best(), threads, tokens);
    for (const auto& cut : kCuts) {
      const int parts = static_cast<int>(cut.size()) - 1;
      std::vector<std::unique_ptr<LoadedSlice>> nodes;
      SliceOptions o;
      o.ctx_len = 32;
      o.threads = threads;
      for (int p = 0; p < parts; ++p) {
        nodes.emplace_back();
        const Status st = load_layer_slice(path, cut[p], cut[p + 1], p == 0, p == parts - 1, o, &nodes.back());
        ASSERT_TRUE(st.ok()) << st.message();
      }
      for (size_t pos = 0; pos < tokens.size(); ++pos) {
        std::vector<float> h(128);
        ASSERT_TRUE(nodes[0]->slice().embed(tokens[pos], h.data()).ok());
        for (auto& n : nodes) ASSERT_TRUE(n->slice().run_layers(h.data(), static_cast<int>(pos)).ok());
        const float* l = nullptr;
        ASSERT_TRUE(nodes.back()->slice().head(h.data(), &l).ok());
        EXPECT_EQ(std::memcmp(l, want.data() + pos * 300, 300 * 4), 0) << "position " << pos << " threads " << threads;
      }
    }
  }
}

TEST(Qwen2SliceFile, OwnsOnlyItsLayersAndTheirCache) {
  const std::string path = write_tiny("tiny.gguf", 9);
  SliceOptions o;
  o.ctx_len = 32;
  std::unique_ptr<LoadedSlice> all, two, master;
  ASSERT_TRUE(load_layer_slice(path, 0, 4, false, false, o, &all).ok());
  ASSERT_TRUE(load_layer_slice(path, 1, 3, false, false, o, &two).ok());
  ASSERT_TRUE(load_layer_slice(path, 0, 0, true, true, o, &master).ok());
  const ArenaStats& a = all->weights().arena.stats();
  const ArenaStats& b = two->weights().arena.stats();
  const ArenaStats& m = master->weights().arena.stats();
  // Half the layers, half the bytes (counts include up to 63 bytes of alignment per tensor).
  EXPECT_EQ(2 * two->weights().tensor_bytes, all->weights().tensor_bytes);
  for (TensorClass c : {TensorClass::kAttention, TensorClass::kFfn, TensorClass::kNorm}) {
    const int i = static_cast<int>(c);
    EXPECT_GT(b.by_class[i], 0u);
    EXPECT_NEAR(static_cast<double>(2 * b.by_class[i]), static_cast<double>(a.by_class[i]), 64.0 * 4 * 7)
        << tensor_class_name(c);
  }
  for (TensorClass c : {TensorClass::kEmbedding, TensorClass::kHead}) {
    EXPECT_EQ(a.by_class[static_cast<int>(c)], 0u);
    EXPECT_EQ(b.by_class[static_cast<int>(c)], 0u);
  }
  // The master: the q4_0 embedding (tied head: once) and the final norm, no layer.
  EXPECT_EQ(master->weights().tensor_bytes, dtype_tensor_bytes(DType::kQ4_0, 300, 128) + 128 * 4);
  EXPECT_GE(m.by_class[static_cast<int>(TensorClass::kEmbedding)], dtype_tensor_bytes(DType::kQ4_0, 300, 128));
  EXPECT_EQ(m.by_class[static_cast<int>(TensorClass::kAttention)], 0u);
  EXPECT_EQ(m.by_class[static_cast<int>(TensorClass::kHead)], 0u);
  EXPECT_EQ(m.mapped_total(), 0u);  // nothing left pointing into the file
  // The KV cache covers the slice's layers: 2 of 4 layers, 32 positions, kv_dim 64, keys and values.
  const size_t kv2 = two->stream().work.stats().by_class[static_cast<int>(TensorClass::kKvCache)];
  EXPECT_EQ(kv2, 2u * 32 * 64 * 2 * 4);
  EXPECT_EQ(all->stream().work.stats().by_class[static_cast<int>(TensorClass::kKvCache)], 2 * kv2);
  EXPECT_EQ(master->stream().work.stats().by_class[static_cast<int>(TensorClass::kKvCache)], 0u);
}

TEST(Qwen2SliceFile, OtherLayersBytesAreNeverRead) {
  // Scribbling over every tensor of layers 0 and 3 leaves slice [1, 3) the same (hash and output);
  // scribbling over one of its own tensors changes the hash.
  auto bytes = tiny_bytes(9);
  const std::string dir = test::temp_dir();
  test::write_file(dir + "/clean.gguf", bytes);
  auto scribbled = bytes;
  for (int l : {0, 3})
    for (const char* t : {"attn_q.weight", "attn_k.bias", "ffn_down.weight", "attn_norm.weight"}) {
      const std::string name = "blk." + std::to_string(l) + "." + t;
      const auto r = tensor_range(bytes, name.c_str());
      std::memset(scribbled.data() + r.first, 0xA5, r.second);
    }
  const auto e = tensor_range(bytes, "token_embd.weight");
  std::memset(scribbled.data() + e.first, 0x5A, e.second);
  test::write_file(dir + "/scribbled.gguf", scribbled);
  auto own = bytes;
  const auto r = tensor_range(bytes, "blk.2.ffn_up.weight");
  own[r.first + 7] ^= 0x10;
  test::write_file(dir + "/own.gguf", own);

  SliceOptions o;
  o.ctx_len = 16;
  std::unique_ptr<LoadedSlice> a, b, c, a2, other;
  ASSERT_TRUE(load_layer_slice(dir + "/clean.gguf", 1, 3, false, false, o, &a).ok());
  ASSERT_TRUE(load_layer_slice(dir + "/clean.gguf", 1, 3, false, false, o, &a2).ok());
  const Status st = load_layer_slice(dir + "/scribbled.gguf", 1, 3, false, false, o, &b);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_TRUE(load_layer_slice(dir + "/own.gguf", 1, 3, false, false, o, &c).ok());
  ASSERT_TRUE(load_layer_slice(dir + "/clean.gguf", 1, 4, false, false, o, &other).ok());
  EXPECT_EQ(a->weights().hash, a2->weights().hash);
  EXPECT_EQ(a->weights().hash, b->weights().hash);
  EXPECT_NE(a->weights().hash, c->weights().hash);
  EXPECT_NE(a->weights().hash, other->weights().hash);
  std::unique_ptr<LoadedSlice> with_emb;
  ASSERT_TRUE(load_layer_slice(dir + "/clean.gguf", 1, 3, true, false, o, &with_emb).ok());
  EXPECT_NE(a->weights().hash, with_emb->weights().hash);
  for (int pos = 0; pos < 6; ++pos) {
    std::vector<float> h1(128), h2(128);
    for (int i = 0; i < 128; ++i) h1[i] = h2[i] = std::sin(0.1f * static_cast<float>(i + pos));
    ASSERT_TRUE(a->slice().run_layers(h1.data(), pos).ok());
    ASSERT_TRUE(b->slice().run_layers(h2.data(), pos).ok());
    EXPECT_EQ(std::memcmp(h1.data(), h2.data(), 128 * 4), 0) << pos;
  }
}

TEST(Qwen2SliceFile, StreamsOverSharedWeightsKeepTheirOwnCaches) {
  // Two sequences interleaved through two streams of one slice's weights give what each gives alone.
  const std::string path = write_tiny("tiny.gguf", 9);
  std::unique_ptr<SliceWeights> w;
  ASSERT_TRUE(load_slice_weights(path, 0, 4, true, true, &w).ok());
  HostThreadPool pool(2);
  SliceOptions o;
  o.ctx_len = 16;
  auto run = [&](Qwen2Slice& s, int token, int pos) {
    std::vector<float> h(128);
    EXPECT_TRUE(s.embed(token, h.data()).ok());
    EXPECT_TRUE(s.run_layers(h.data(), pos).ok());
    const float* l = nullptr;
    EXPECT_TRUE(s.head(h.data(), &l).ok());
    return std::vector<float>(l, l + 300);
  };
  std::unique_ptr<SliceStream> a, b, alone;
  ASSERT_TRUE(make_slice_stream(*w, o, &pool, &kernels_best(), &a).ok());
  ASSERT_TRUE(make_slice_stream(*w, o, &pool, &kernels_best(), &b).ok());
  ASSERT_TRUE(make_slice_stream(*w, o, &pool, &kernels_best(), &alone).ok());
  std::vector<std::vector<float>> want;
  for (int pos = 0; pos < 6; ++pos) want.push_back(run(alone->qwen2, 10 + pos, pos));
  for (int pos = 0; pos < 6; ++pos) {
    EXPECT_EQ(run(a->qwen2, 10 + pos, pos), want[static_cast<size_t>(pos)]) << pos;
    run(b->qwen2, 200 - pos, pos);  // another sequence in between
  }
}

// The tensor list of the tiny file with `skip` left out or `replace` given another type and shape.
std::vector<uint8_t> rebuilt(const std::string& skip, const std::string& replace = "", DType type = DType::kF32,
                             std::vector<int64_t> ne = {}) {
  const auto bytes = tiny_bytes(5);
  std::vector<uint8_t> mem(size_t{8} << 20);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  GgufFile f;
  EXPECT_TRUE(f.open(bytes.data(), bytes.size(), arena).ok());
  GgufWriter w;
  w.set_string("general.architecture", "qwen2");
  for (const char* key : {"qwen2.block_count", "qwen2.context_length", "qwen2.embedding_length", "qwen2.feed_forward_length",
                          "qwen2.attention.head_count", "qwen2.attention.head_count_kv"}) {
    uint32_t v = 0;
    EXPECT_TRUE(f.get_u32(key, &v).ok());
    w.set_u32(key, v);
  }
  for (uint64_t i = 0; i < f.tensor_count(); ++i) {
    const GgufTensor* t = f.tensor(i);
    const std::string name(t->name.data, t->name.size);
    if (name == skip) continue;
    if (name == replace) {
      int64_t rows = 1;
      for (size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
      std::vector<uint8_t> zeros(static_cast<size_t>(rows) * dtype_row_bytes(type, ne[0]) + dtype_info(type)->tensor_tail_bytes);
      EXPECT_TRUE(w.add_tensor(name, type, ne, zeros.data(), zeros.size()).ok());
      continue;
    }
    std::vector<int64_t> shape(t->ne, t->ne + t->n_dims);
    EXPECT_TRUE(w.add_tensor(name, t->type, shape, t->data, static_cast<size_t>(t->nbytes)).ok());
  }
  return w.to_bytes();
}

TEST(Qwen2Errors, MissingTensorIsNamed) {
  for (const char* name : {"blk.1.attn_k.bias", "blk.3.ffn_norm.weight", "blk.2.ffn_down.weight", "output_norm.weight"}) {
    Loaded m;
    const auto bytes = rebuilt(name);
    const Status st = m.load(bytes);
    EXPECT_EQ(st.code(), Code::kNotFound) << name;
    EXPECT_NE(std::string(st.message()).find(name), std::string::npos) << st.message();
  }
  // A slice that does not hold the missing tensor's layer loads.
  Loaded m;
  const auto bytes = rebuilt("blk.3.ffn_norm.weight");
  EXPECT_TRUE(m.load(bytes, 0, 3, true, false).ok());
}

TEST(Qwen2Errors, WrongShapesAndMixedKindsAreReported) {
  Loaded m;
  auto bytes = rebuilt("", "blk.1.attn_v.bias", DType::kF32, {128});  // kv_dim is 64
  Status st = m.load(bytes);
  EXPECT_EQ(st.code(), Code::kCorrupt);
  EXPECT_NE(std::string(st.message()).find("blk.1.attn_v.bias should be a vector of 64"), std::string::npos) << st.message();
  bytes = rebuilt("", "blk.2.ffn_up.weight", DType::kF32, {128, 384});  // dense among ternary
  st = m.load(bytes);
  EXPECT_EQ(st.code(), Code::kUnsupported);
  EXPECT_NE(std::string(st.message()).find("ffn_up (layer 2)"), std::string::npos) << st.message();
  bytes = rebuilt("", "blk.0.ffn_gate.weight", DType::kI2_S, {128, 256});  // 256 rows, the config implies 384
  st = m.load(bytes);
  EXPECT_EQ(st.code(), Code::kCorrupt);
  EXPECT_NE(std::string(st.message()).find("ffn_gate (layer 0) is 256x128"), std::string::npos) << st.message();
}

TEST(Qwen2Errors, TruncatedAndForeignFilesAreRefused) {
  const std::string dir = test::temp_dir();
  const auto bytes = tiny_bytes(5);
  SliceOptions o;
  std::unique_ptr<LoadedSlice> s;
  for (size_t keep : {size_t{0}, size_t{3}, size_t{100}, bytes.size() / 2, bytes.size() - 1}) {
    const std::string p = dir + "/cut.gguf";
    test::write_file(p, std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<long>(keep)));
    const Status st = load_layer_slice(p, 0, 2, true, false, o, &s);
    EXPECT_FALSE(st.ok()) << keep;
    EXPECT_NE(std::string(st.message()).find("cut.gguf"), std::string::npos) << st.message();
  }
  EXPECT_EQ(load_layer_slice(dir + "/missing.gguf", 0, 1, false, false, o, &s).code(), Code::kIo);
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  test::write_file(dir + "/llama.gguf", w.to_bytes());
  const Status st = load_layer_slice(dir + "/llama.gguf", 0, 1, false, false, o, &s);
  EXPECT_EQ(st.code(), Code::kUnsupported);
  EXPECT_NE(std::string(st.message()).find("qwen2"), std::string::npos) << st.message();
  const std::string good = dir + "/good.gguf";
  test::write_file(good, bytes);
  EXPECT_EQ(load_layer_slice(good, 2, 9, false, false, o, &s).code(), Code::kInvalidArgument);
  SliceOptions big;
  big.ctx_len = 100000;
  EXPECT_EQ(load_layer_slice(good, 0, 1, false, false, big, &s).code(), Code::kOutOfRange);
  SliceOptions threads;
  threads.threads = 0;
  EXPECT_EQ(load_layer_slice(good, 0, 1, false, false, threads, &s).code(), Code::kInvalidArgument);
}

TEST(Qwen2Cli, DummyRunsAndRefusesBadFlags) {
  const std::string dir = test::temp_dir();
  auto r = test::run_cli({"dummy", "--arch", "qwen2", "--layout", "tiny", "-o", dir + "/t.gguf", "--seed", "4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("dummy qwen2 layout tiny, dim 128, 4 layers, 4/2 heads"), std::string::npos) << r.err;
  auto a = test::run_cli({"run", "-m", dir + "/t.gguf", "--prompt-ids", "1,400,500", "-n", "6", "--temp", "0", "-t", "1",
                          "--fingerprint", "--kernels", "ref"});
  auto b = test::run_cli({"run", "-m", dir + "/t.gguf", "--prompt-ids", "1,400,500", "-n", "6", "--temp", "0", "-t", "2",
                          "--fingerprint"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const auto fp = [](const std::string& s) { return s.substr(s.find("fingerprint ")); };
  EXPECT_EQ(fp(a.out), fp(b.out));
  // Repacked as tl2 (and back): the same weights, the same fingerprint; dense qwen2 files convert only to ternary.
  auto c = test::run_cli({"convert", dir + "/t.gguf", "-o", dir + "/t2.gguf", "--type", "tl2"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  auto d = test::run_cli({"run", "-m", dir + "/t2.gguf", "--prompt-ids", "1,400,500", "-n", "6", "--temp", "0", "--fingerprint"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_EQ(fp(a.out), fp(d.out));
  ASSERT_EQ(test::run_cli({"dummy", "--arch", "qwen2", "--type", "q8_0", "-o", dir + "/q8.gguf"}).exit_code, 0);
  c = test::run_cli({"convert", dir + "/q8.gguf", "-o", dir + "/q8b.gguf", "--type", "f32"});
  EXPECT_NE(c.exit_code, 0);
  EXPECT_NE(c.err.find("qwen2 model with dense linear layers converts to i2_s, tl1 or tl2"), std::string::npos) << c.err;
  // Ternarized by absmean (train/check_export.py checks the values against the trainer's quantizer).
  c = test::run_cli({"convert", dir + "/q8.gguf", "-o", dir + "/q8t.gguf", "--type", "tl2"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  d = test::run_cli({"run", "-m", dir + "/q8t.gguf", "--prompt-ids", "1,400,500", "-n", "6", "--temp", "0", "--fingerprint"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_NE(d.out.find("fingerprint "), std::string::npos) << d.out;
  c = test::run_cli({"convert", dir + "/t.gguf", "--image", dir + "/img.bin"});  // qwen2 board images exist
  EXPECT_EQ(c.exit_code, 0) << c.err;
  EXPECT_GT(test::read_file(dir + "/img.bin").size(), 0u);
  struct Bad {
    std::vector<std::string> args;
    std::string says;
  } bad[] = {
      {{"--arch", "qwen2", "--layout", "huge"}, "--layout huge is unknown for qwen2 (ref, small, tiny)"},
      {{"--arch", "qwen2", "--type", "q4e"}, "--type"},
      {{"--arch", "llama", "--untied-head"}, "--untied-head needs --arch qwen2"},
      {{"--arch", "llama", "--embd-type", "q4_0"}, "--embd-type needs"},
      {{"--arch", "bitnet", "--embd-type", "q4_0"}, "embedding type q4_0"},
      {{"--arch", "qwen2", "--layout", "tiny", "--embd-type", "bogus"}, "--embd-type"},
  };
  for (const Bad& x : bad) {
    std::vector<std::string> args = {"dummy", "-o", dir + "/bad.gguf"};
    args.insert(args.end(), x.args.begin(), x.args.end());
    const auto res = test::run_cli(args);
    EXPECT_NE(res.exit_code, 0) << x.says;
    EXPECT_NE((res.err + res.out).find(x.says), std::string::npos) << res.err << res.out;
  }
}

}  // namespace
}  // namespace mcullm
