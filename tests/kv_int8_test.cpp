// The int8 KV cache (--kv int8): its attention kernels equal the reference bit for bit; every model
// kind gives the same logits with every kernel table, 1 or 2 threads, batched or token by token;
// the cache takes about a quarter of the f32 bytes; and its logits stay close to the f32 cache's.
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "core/thread_pool_host.h"
#include "load/model_loader_host.h"
#include "kernels/kernels.h"
#include "quant/blocks.h"
#include "test_support.h"

namespace mcullm {
namespace {

struct Rng {
  uint64_t s = 0x2545F4914F6CDD1Dull;
  uint32_t next() {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    return static_cast<uint32_t>(s >> 32);
  }
  float uniform(float lo, float hi) { return lo + (hi - lo) * static_cast<float>(next() >> 8) / static_cast<float>(1u << 24); }
};

std::vector<const KernelSet*> tables() {
  std::vector<const KernelSet*> t = {&kernels_ref()};
  if (kernels_avx2()) t.push_back(kernels_avx2());
  if (kernels_avx512()) t.push_back(kernels_avx512());
  return t;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

TEST(KvInt8Kernels, ScoresAndValuesMatchReferenceAndDefinition) {
  Rng rng;
  for (const KernelSet* k : tables()) {
    for (int hs : {1, 3, 4, 7, 8, 9, 15, 16, 17, 24, 32, 33, 64, 128}) {
      for (int n : {1, 2, 5, 17, 64}) {
        const size_t stride = static_cast<size_t>(hs) * 3 + 5, s_stride = 3;  // other heads between
        std::vector<int8_t> keys(stride * n), values(stride * n), q(hs);
        for (int8_t& v : keys) v = static_cast<int8_t>(static_cast<int>(rng.next() % 255) - 127);
        for (int8_t& v : values) v = static_cast<int8_t>(static_cast<int>(rng.next() % 255) - 127);
        for (int8_t& v : q) v = static_cast<int8_t>(static_cast<int>(rng.next() % 255) - 127);
        std::vector<float> ks(s_stride * n), vs(s_stride * n), att(n);
        for (float& v : ks) v = rng.uniform(0.001f, 0.05f);
        for (float& v : vs) v = rng.uniform(0.001f, 0.05f);
        for (float& v : att) v = rng.uniform(0.0f, 1.0f);
        const float qs = 0.02f, scale = std::sqrt(static_cast<float>(hs));
        std::vector<float> s_ref(n), s_k(n), o_ref(hs), o_k(hs);
        kernels_ref().attn_scores_q8(q.data(), qs, keys.data() + 2, ks.data() + 1, stride, s_stride, n, hs, scale, s_ref.data());
        k->attn_scores_q8(q.data(), qs, keys.data() + 2, ks.data() + 1, stride, s_stride, n, hs, scale, s_k.data());
        ASSERT_TRUE(same_bits(s_ref, s_k)) << k->name << " hs " << hs << " n " << n;
        kernels_ref().attn_values_q8(att.data(), values.data() + 1, vs.data() + 2, stride, s_stride, n, hs, o_ref.data());
        k->attn_values_q8(att.data(), values.data() + 1, vs.data() + 2, stride, s_stride, n, hs, o_k.data());
        ASSERT_TRUE(same_bits(o_ref, o_k)) << k->name << " hs " << hs << " n " << n;
        for (int t = 0; t < n; ++t) {  // the definition: exact integer dot product times the scales
          long isum = 0;
          for (int i = 0; i < hs; ++i) isum += q[i] * keys[2 + t * stride + i];
          const double want = static_cast<double>(isum) * qs * ks[1 + t * s_stride] / scale;
          EXPECT_NEAR(s_ref[t], want, 1e-5 * (1 + std::fabs(want)));
        }
        for (int i = 0; i < hs; ++i) {
          double want = 0;
          for (int t = 0; t < n; ++t) want += static_cast<double>(att[t]) * vs[2 + t * s_stride] * values[1 + t * stride + i];
          EXPECT_NEAR(o_ref[i], want, 1e-4 * (1 + std::fabs(want)));
        }
      }
    }
  }
}

// A model loaded once, run with either cache.
struct Model {
  std::unique_ptr<LoadedModel> lm;
  void load(const std::string& path) {
    const Status st = load_model(path, &lm);
    ASSERT_TRUE(st.ok()) << st.message();
  }
  // Logits of every position of `tokens`, fed one by one or in the decoder's batches.
  std::vector<float> logits(KvType kv, const KernelSet& k, int threads, const std::vector<int>& tokens, bool batched,
                            size_t* kv_bytes = nullptr) {
    lm->kv = kv;
    HostThreadPool pool(threads);
    DecoderInstance dec;
    const Status st = make_decoder(*lm, static_cast<int>(tokens.size()), &pool, &k, 0, &dec);
    EXPECT_TRUE(st.ok()) << st.message();
    if (!st.ok()) return {};
    if (kv_bytes) *kv_bytes = dec.work.stats().by_class[static_cast<int>(TensorClass::kKvCache)];
    Decoder& d = *dec.decoder;
    const size_t vocab = static_cast<size_t>(d.vocab_size());
    std::vector<float> out;
    const int n = static_cast<int>(tokens.size());
    for (int pos = 0; pos < n;) {
      const int m = batched ? std::min(d.max_batch(), n - pos) : 1;
      const float* rows = nullptr;
      const Status s = m == 1 ? d.forward(tokens[pos], pos, &rows) : d.prefill(tokens.data() + pos, m, pos, &rows);
      EXPECT_TRUE(s.ok()) << s.message();
      if (!s.ok()) return {};
      out.insert(out.end(), rows, rows + m * vocab);
      pos += m;
    }
    return out;
  }
};

std::vector<int> some_tokens(int vocab, int n) {
  std::vector<int> t = {1};
  for (int i = 1; i < n; ++i) t.push_back((i * 193 + 7) % vocab);
  return t;
}

// Same bits for every kernel table, 1 or 2 threads, batched or not (the reference table, one
// thread, token by token against each table both ways round); returns the reference logits.
std::vector<float> expect_int8_deterministic(Model& m, const std::vector<int>& tokens) {
  const std::vector<float> want = m.logits(KvType::kInt8, kernels_ref(), 1, tokens, false);
  EXPECT_FALSE(want.empty());
  for (const KernelSet* k : tables())
    for (int threads : {1, 2}) {
      const bool batched = threads == 2;
      if (k == &kernels_ref() && threads == 1) continue;
      EXPECT_TRUE(same_bits(m.logits(KvType::kInt8, *k, threads, tokens, batched), want))
          << k->name << " threads " << threads << (batched ? " batched" : " token by token");
    }
  return want;
}

// int8 against f32 cache: every logit within `max_abs` of the f32 cache's, on average within
// `mean_abs`, and the argmax the same at `min_agree` of the positions at least. Bounded, not exact:
// int8 rounding reaches the logits. (The bounds are about 1.5x what was measured.)
void expect_close_to_f32(Model& m, const std::vector<int>& tokens, const std::vector<float>& int8, double max_abs,
                         double mean_abs, double min_agree) {
  const std::vector<float> f32 = m.logits(KvType::kF32, kernels_best(), 1, tokens, false);
  ASSERT_EQ(f32.size(), int8.size());
  ASSERT_FALSE(same_bits(f32, int8)) << "the int8 cache changed nothing";
  const size_t vocab = f32.size() / tokens.size();
  double worst = 0, sum = 0, range = 0;
  int agree = 0;
  for (size_t p = 0; p < tokens.size(); ++p) {
    size_t a = 0, b = 0;
    for (size_t i = 0; i < vocab; ++i) {
      const size_t j = p * vocab + i;
      const double d = std::fabs(static_cast<double>(f32[j]) - int8[j]);
      worst = std::max(worst, d);
      sum += d;
      range = std::max(range, std::fabs(static_cast<double>(f32[j])));
      if (f32[j] > f32[p * vocab + a]) a = i;
      if (int8[j] > int8[p * vocab + b]) b = i;
    }
    agree += a == b;
  }
  const double share = static_cast<double>(agree) / static_cast<double>(tokens.size());
  const double mean = sum / static_cast<double>(f32.size());
  std::printf("int8 vs f32 KV: |logit difference| max %.4f, mean %.5f (largest |logit| %.2f); argmax equal at %.1f%% of %zu positions\n",
              worst, mean, range, 100.0 * share, tokens.size());
  EXPECT_LE(worst, max_abs);
  EXPECT_LE(mean, mean_abs);
  EXPECT_GE(share, min_agree);
}

// The arena's KV bytes: a head of hs values takes hs int8 values and one f32 scale (hs + 4 bytes)
// against 4 hs bytes (alignment padding aside).
void expect_kv_bytes_shrink(Model& m, int hs) {
  size_t f32_bytes = 0, int8_bytes = 0;
  m.logits(KvType::kF32, kernels_best(), 1, {1, 2}, false, &f32_bytes);
  m.logits(KvType::kInt8, kernels_best(), 1, {1, 2}, false, &int8_bytes);
  EXPECT_GT(int8_bytes, 0u);
  EXPECT_LE(int8_bytes * 4 * hs, f32_bytes * (hs + 4) + 256 * 4 * hs) << int8_bytes << " vs " << f32_bytes;
  EXPECT_GE(int8_bytes * 4 * hs + 256 * 4 * hs, f32_bytes * (hs + 4)) << int8_bytes << " vs " << f32_bytes;
}

TEST(KvInt8, LlamaStories260K) {
  MC_REQUIRE_SHARED();
  Model m;
  m.load(test::shared_path("models/stories260K/stories260K.bin"));
  const std::vector<int> tokens = some_tokens(512, 64);
  const std::vector<float> int8 = expect_int8_deterministic(m, tokens);
  expect_close_to_f32(m, tokens, int8, 0.85, 0.11, 0.85);
  expect_kv_bytes_shrink(m, 8);
}

TEST(KvInt8, BitLlama2c1M) {
  MC_REQUIRE_SHARED();
  Model m;
  m.load(test::shared_path("models/bitnet-tinystories/bit1M_msb.bin"));
  const std::vector<int> tokens = some_tokens(512, 64);
  const std::vector<float> int8 = expect_int8_deterministic(m, tokens);
  expect_close_to_f32(m, tokens, int8, 1.2, 0.18, 0.9);
}

TEST(KvInt8, Esp32aiPle) {
  MC_REQUIRE_SHARED();
  Model m;
  m.load(test::shared_path("models/esp32-ai-ple/ple4096_int4.bin"));
  const std::vector<int> tokens = some_tokens(4096, 64);
  const std::vector<float> int8 = expect_int8_deterministic(m, tokens);
  expect_close_to_f32(m, tokens, int8, 0.45, 0.06, 0.9);
  expect_kv_bytes_shrink(m, 32);
}

TEST(KvInt8, BitnetGgufDummy) {
  const std::string path = test::temp_dir() + "/tiny.gguf";
  const auto r = test::run_cli({"dummy", "--arch", "bitnet", "--layout", "tiny", "-o", path, "--seed", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Model m;
  m.load(path);
  const std::vector<int> tokens = some_tokens(m.lm->model.cfg.vocab_size, 48);
  expect_int8_deterministic(m, tokens);
}

// The CLI flag: the same fingerprint with 1 or 2 threads and either kernel table, another than the
// f32 cache's; a bad value is refused.
TEST(KvInt8, CliFingerprintAndBadValue) {
  MC_REQUIRE_SHARED();
  auto run = [](std::vector<std::string> extra) {
    std::vector<std::string> args = {"run", "-m", test::shared_path("models/stories260K/stories260K.bin"), "--temp", "0",
                                     "-n", "40", "-p", "Once upon a time", "--fingerprint", "-q"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = test::run_cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  };
  const std::string base = run({"--kv", "int8"});
  ASSERT_NE(base.find("fingerprint"), std::string::npos) << base;
  EXPECT_EQ(run({"--kv", "int8", "-t", "2"}), base);
  EXPECT_EQ(run({"--kv", "int8", "--kernels", "ref"}), base);
  EXPECT_NE(run({"--kv", "f32"}), base);
  EXPECT_EQ(run({"--kv", "f32"}), run({}));
  const auto bad = test::run_cli({"run", "-m", test::shared_path("models/stories260K/stories260K.bin"), "--kv", "int4"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--kv"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace mcullm
