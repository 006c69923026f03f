// llama2.c checkpoints: synthetic files of every version, and hostile bytes.
#include <cmath>
#include <cstring>

#include "core/thread_pool.h"
#include "format/llama2c.h"
#include "test_support.h"

namespace mcullm {
namespace {

struct Tiny {
  int dim = 8, hidden = 16, layers = 2, heads = 2, kv_heads = 1, vocab = 16, seq = 8;
  int kv() const { return dim / heads * kv_heads; }
  size_t mats() const { return static_cast<size_t>(layers) * (2 * dim * dim + 2 * kv() * dim + 3 * hidden * dim); }
};

void put_i32(std::vector<uint8_t>& b, int32_t v) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(&v);
  b.insert(b.end(), p, p + 4);
}
void put_f32(std::vector<uint8_t>& b, float v) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(&v);
  b.insert(b.end(), p, p + 4);
}

// Values that are exact in int8 x scale form: q in [-127,127], scale 1/64 per group.
float weight_value(size_t i) { return static_cast<float>(static_cast<int>((i * 2654435761u) % 255) - 127) / 64.0f; }

void header_params(std::vector<uint8_t>& b, const Tiny& t, int vocab_field) {
  for (int v : {t.dim, t.hidden, t.layers, t.heads, t.kv_heads, vocab_field, t.seq}) put_i32(b, v);
}

// Legacy layout: emb, att norms, wq, wk, wv, wo, ffn norms, w1, w2, w3, final norm, rope tables.
std::vector<uint8_t> legacy_file(const Tiny& t) {
  std::vector<uint8_t> b;
  header_params(b, t, t.vocab);
  size_t k = 0;
  auto weights = [&](size_t n) { for (size_t i = 0; i < n; ++i) put_f32(b, weight_value(k++)); };
  auto ones = [&](size_t n) { for (size_t i = 0; i < n; ++i) put_f32(b, 1.0f); };
  const size_t d = t.dim, L = t.layers, kv = t.kv(), h = t.hidden;
  weights(t.vocab * d);
  ones(L * d);
  weights(L * d * d); weights(L * kv * d); weights(L * kv * d); weights(L * d * d);
  ones(L * d);
  weights(L * h * d); weights(L * d * h); weights(L * h * d);
  ones(d);
  for (size_t i = 0; i < static_cast<size_t>(t.seq) * (d / t.heads); ++i) put_f32(b, 0.5f);
  return b;
}

// ak42 v1 / v2 with the same weight values (v2's int8 x scale reproduces them exactly).
std::vector<uint8_t> ak42_file(const Tiny& t, int version, int group = 8) {
  std::vector<uint8_t> b;
  put_i32(b, static_cast<int32_t>(kLlama2cMagic));
  put_i32(b, version);
  header_params(b, t, t.vocab);
  b.push_back(1);  // shared classifier
  if (version == 2) put_i32(b, group);
  b.resize(256, 0);
  const size_t d = t.dim, L = t.layers;
  for (size_t i = 0; i < 2 * L * d + d; ++i) put_f32(b, 1.0f);
  // emb, wq.., wk.., wv.., wo.., w1.., w2.., w3..: in v2 each tensor is int8 values then scales
  const size_t kv = t.kv(), h = t.hidden;
  const size_t sizes[] = {t.vocab * d, L * d * d, L * kv * d, L * kv * d, L * d * d, L * h * d, L * d * h, L * h * d};
  // the legacy file numbers its weights in its own order; reproduce that numbering here
  const size_t emb = t.vocab * d;
  const size_t legacy_start[] = {0, emb, emb + L * d * d, emb + L * d * d + L * kv * d, emb + L * d * d + 2 * L * kv * d,
                                 emb + 2 * L * d * d + 2 * L * kv * d, emb + 2 * L * d * d + 2 * L * kv * d + L * h * d,
                                 emb + 2 * L * d * d + 2 * L * kv * d + 2 * L * h * d};
  for (int tensor = 0; tensor < 8; ++tensor) {
    const size_t n = sizes[tensor], start = legacy_start[tensor];
    if (version == 1) {
      for (size_t i = 0; i < n; ++i) put_f32(b, weight_value(start + i));
    } else {
      for (size_t i = 0; i < n; ++i) b.push_back(static_cast<uint8_t>(static_cast<int8_t>(weight_value(start + i) * 64.0f)));
      for (size_t g = 0; g < n / static_cast<size_t>(group); ++g) put_f32(b, 1.0f / 64.0f);
    }
  }
  return b;
}

std::vector<float> run_logits(const std::vector<uint8_t>& file, int steps) {
  std::vector<uint8_t> mem(1 << 20);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  LlamaModel model;
  Status st = llama2c_load(file.data(), file.size(), arena, &model);
  EXPECT_TRUE(st.ok()) << st.message();
  if (!st.ok()) return {};
  SerialPool pool;
  LlamaContext ctx;
  EXPECT_TRUE(ctx.init(&model, 0, arena, &pool, &kernels_ref()).ok());
  std::vector<float> all;
  for (int pos = 0; pos < steps; ++pos) {
    const float* logits = nullptr;
    EXPECT_TRUE(ctx.forward((pos * 5 + 1) % model.cfg.vocab_size, pos, &logits).ok());
    all.insert(all.end(), logits, logits + model.cfg.vocab_size);
  }
  return all;
}

TEST(Llama2cFormat, EveryVersionLoadsTheSameWeightsToTheSameBits) {
  const Tiny t;
  const auto legacy = run_logits(legacy_file(t), 6);
  const auto v1 = run_logits(ak42_file(t, 1), 6);
  const auto v2 = run_logits(ak42_file(t, 2), 6);
  ASSERT_EQ(legacy.size(), 6u * 16u);
  for (float x : legacy) ASSERT_TRUE(std::isfinite(x));
  EXPECT_EQ(0, std::memcmp(legacy.data(), v1.data(), legacy.size() * 4));
  EXPECT_EQ(0, std::memcmp(legacy.data(), v2.data(), legacy.size() * 4));
}

TEST(Llama2cFormat, HeaderFieldsAreRead) {
  const Tiny t;
  Llama2cInfo info;
  const auto v2 = ak42_file(t, 2, 4);
  ASSERT_TRUE(llama2c_read_header(v2.data(), v2.size(), &info).ok());
  EXPECT_EQ(info.version, Llama2cVersion::kV2Int8);
  EXPECT_EQ(info.group_size, 4);
  EXPECT_EQ(info.cfg.hidden_dim, 16);
  EXPECT_EQ(info.cfg.n_kv_heads, 1);
  EXPECT_TRUE(info.shared_classifier);
}

TEST(Llama2cFormat, EveryTruncationIsRefused) {
  const Tiny t;
  for (const auto& file : {legacy_file(t), ak42_file(t, 1), ak42_file(t, 2)}) {
    for (size_t cut = 0; cut < file.size(); ++cut) {
      std::vector<uint8_t> mem(1 << 20);
      Arena arena(Tier::kHost, mem.data(), mem.size());
      LlamaModel model;
      const Status st = llama2c_load(file.data(), cut, arena, &model);
      ASSERT_FALSE(st.ok()) << cut;
      ASSERT_EQ(st.code(), Code::kCorrupt) << cut << ": " << st.message();
    }
  }
}

Status load_bytes(std::vector<uint8_t> file) {
  std::vector<uint8_t> mem(1 << 20);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  LlamaModel model;
  return llama2c_load(file.data(), file.size(), arena, &model);
}

void set_i32(std::vector<uint8_t>& b, size_t at, int32_t v) { std::memcpy(b.data() + at, &v, 4); }

TEST(Llama2cFormat, HostileHeadersGiveClearErrors) {
  const Tiny t;
  struct Case { size_t at; int32_t value; const char* expect; };
  // offsets of the legacy header's fields: dim 0, hidden 4, layers 8, heads 12, kv 16, vocab 20, seq 24
  const Case cases[] = {
      {0, 0, "non-positive"},         {0, -8, "non-positive"},      {4, INT32_MIN, "non-positive"},
      {8, 0x7FFFFFFF, "too large"},   {12, 3, "multiple"},          {16, 0, "non-positive"},
      {16, 3, "multiple"},            {20, INT32_MIN, "non-positive"}, {24, 0x7FFFFFFF, "too large"},
      {0, 1 << 30, "too large"},      {12, 8, "odd"},
  };
  for (const Case& c : cases) {
    auto b = legacy_file(t);
    set_i32(b, c.at, c.value);
    const Status st = load_bytes(b);
    EXPECT_FALSE(st.ok()) << c.at << "=" << c.value;
    EXPECT_NE(std::string(st.message()).find(c.expect), std::string::npos) << st.message();
  }
  // Sizes that are valid but disagree with the file length
  auto b = legacy_file(t);
  set_i32(b, 20, t.vocab + 1);
  EXPECT_NE(std::string(load_bytes(b).message()).find("header implies"), std::string::npos);
  b = legacy_file(t);
  b.push_back(0);
  EXPECT_EQ(load_bytes(b).code(), Code::kCorrupt);
  // A negative vocab means a separate classifier, which this file lacks.
  b = legacy_file(t);
  set_i32(b, 20, -t.vocab);
  EXPECT_EQ(load_bytes(b).code(), Code::kCorrupt);
  // ak42: unknown version, bad flag, bad group
  auto v = ak42_file(t, 1);
  set_i32(v, 4, 3);
  EXPECT_EQ(load_bytes(v).code(), Code::kUnsupported);
  v = ak42_file(t, 1);
  v[36] = 7;
  EXPECT_EQ(load_bytes(v).code(), Code::kCorrupt);
  v = ak42_file(t, 2);
  set_i32(v, 37, 0);
  EXPECT_NE(std::string(load_bytes(v).message()).find("group size"), std::string::npos);
  v = ak42_file(t, 2);
  set_i32(v, 37, 3);
  EXPECT_EQ(load_bytes(v).code(), Code::kCorrupt);
  // An ak42 v1 file of another size (e.g. bitllama2.c's ternary export) says so.
  v = ak42_file(t, 1);
  v.resize(v.size() / 3);
  EXPECT_NE(std::string(load_bytes(v).message()).find("bitllama2.c"), std::string::npos);
}

TEST(Llama2cFormat, TooSmallArenaIsAnError) {
  const Tiny t;
  const auto file = ak42_file(t, 2);
  std::vector<uint8_t> mem(512);
  Arena arena(Tier::kSram, mem.data(), mem.size());
  LlamaModel model;
  const Status st = llama2c_load(file.data(), file.size(), arena, &model);
  EXPECT_EQ(st.code(), Code::kOutOfMemory);
  EXPECT_NE(std::string(st.message()).find("sram"), std::string::npos) << st.message();
}

TEST(Llama2cFormat, RandomCorruptionNeverCrashes) {
  const Tiny t;
  uint64_t rng = 88172645463325252ull;
  for (const auto& base : {legacy_file(t), ak42_file(t, 2)}) {
    for (int i = 0; i < 2000; ++i) {
      auto b = base;
      rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
      const size_t at = rng % 64;  // the header and the first weights
      b[at] = static_cast<uint8_t>(rng >> 32);
      std::vector<uint8_t> mem(1 << 20);
      Arena arena(Tier::kHost, mem.data(), mem.size());
      LlamaModel model;
      if (llama2c_load(b.data(), b.size(), arena, &model).ok()) {
        SerialPool pool;
        LlamaContext ctx;
        if (!ctx.init(&model, 4, arena, &pool, &kernels_ref()).ok()) continue;
        const float* logits = nullptr;
        EXPECT_TRUE(ctx.forward(1, 0, &logits).ok());
      }
    }
  }
}

}  // namespace
}  // namespace mcullm
