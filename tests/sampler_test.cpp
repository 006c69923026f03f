#include "model/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "core/fmath.h"
#include "test_support.h"

namespace mcullm {
namespace {

// A sampler with its own arena.
struct Rig {
  std::vector<uint8_t> memory;
  Arena arena;
  Sampler sampler;
  Status status;
  Rig(const SamplerConfig& cfg, int vocab) : memory(static_cast<size_t>(vocab) * 16 + 4096) {
    arena.reset(Tier::kHost, memory.data(), memory.size());
    status = sampler.init(cfg, vocab, arena);
    EXPECT_TRUE(status.ok()) << status.message();
  }
  int sample(std::vector<float> logits, const std::vector<int>& history = {}) {
    return sampler.sample(logits.data(), history.data(), static_cast<int>(history.size()));
  }
};

SamplerConfig plain(float temperature) {  // no truncation at all
  SamplerConfig c;
  c.temperature = temperature;
  c.top_k = 0;
  c.top_p = 1.0f;
  c.min_p = 0.0f;
  return c;
}

SamplerConfig llama2c(float temperature, float top_p, uint64_t seed = 42) {
  SamplerConfig c;
  c.llama2c = true;
  c.temperature = temperature;
  c.top_p = top_p;
  c.seed = seed;
  return c;
}

std::vector<float> random_logits(uint64_t* rng, int n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = (xorshift_f32(rng) * 2.0f - 1.0f) * scale;
  return v;
}

std::vector<double> softmax(const std::vector<float>& logits, double t) {
  const double m = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < p.size(); ++i) sum += p[i] = std::exp((logits[i] - m) / t);
  for (double& x : p) x /= sum;
  return p;
}

// Pearson chi-square of observed counts against expected probabilities.
double chi_square(const std::vector<int>& counts, const std::vector<double>& p, int n) {
  double chi = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double e = p[i] * n;
    if (e < 1e-9) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " has probability ~0";
      continue;
    }
    chi += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi;
}

TEST(SamplerRng, XorshiftMatchesFacts) {
  // FACTS.md section 3: state ^= state >> 12; state ^= state << 25; state ^= state >> 27;
  // return (state * 0x2545F4914F6CDD1D) >> 32. Expected values computed separately (Python).
  uint64_t s = 42;
  const uint32_t want42[] = {0x56ce4ab7u, 0xc841eb53u, 0xca466be0u, 0xf1acc733u, 0xc3af4dd7u};
  for (const uint32_t w : want42) EXPECT_EQ(xorshift_u32(&s), w);
  EXPECT_EQ(s, 0x53e4a303a98ce13eULL);
  s = 133742;
  const float want_f[] = {0.7062990069389343f, 0.6226770877838135f, 0.5385057330131531f, 0.5325804352760315f,
                          0.32792866230010986f};
  for (const float w : want_f) EXPECT_EQ(xorshift_f32(&s), w);
  EXPECT_EQ(s, 0x23887b0c800a384eULL);
  // And the formula itself over a long run.
  uint64_t a = 987654321, b = 987654321;
  for (int i = 0; i < 10000; ++i) {
    b ^= b >> 12;
    b ^= b << 25;
    b ^= b >> 27;
    const uint32_t u = static_cast<uint32_t>((b * 0x2545F4914F6CDD1DULL) >> 32);
    ASSERT_EQ(xorshift_f32(&a), static_cast<float>(u >> 8) / 16777216.0f);
  }
}

TEST(Sampler, GreedyIsArgmaxLowestIdOnTies) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 3.0f, 1.0f, 3.0f};
  for (const SamplerConfig& cfg : {plain(0.0f), llama2c(0.0f, 0.9f)}) {
    Rig r(cfg, 6);
    EXPECT_EQ(r.sample(logits), 3);
    EXPECT_EQ(r.sampler.rng_state(), cfg.seed);  // greedy draws no coin
  }
  SamplerConfig d;  // default truncations, but temperature 0
  d.temperature = 0.0f;
  Rig r(d, 6);
  EXPECT_EQ(r.sample(logits), 3);
}

// Greedy decoding told where the finite logits are (a grouped head's groups) picks the token the
// full pass picks: ties, NaN, -inf candidates, the repeat penalty, groups in any order.
TEST(Sampler, GreedyOverCandidatesEqualsTheFullPass) {
  const int V = 40;
  std::vector<int32_t> token_of_row(V), group_start = {0, 7, 7, 15, 26, 40};  // group 1 is empty
  std::iota(token_of_row.begin(), token_of_row.end(), 0);
  std::mt19937 rng(5);
  std::shuffle(token_of_row.begin(), token_of_row.end(), rng);
  VocabHead h;
  h.n_groups = 5;
  h.token_of_row = token_of_row.data();
  h.group_start = group_start.data();
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  int trials = 0, fell_back = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<int> groups = {0, 1, 2, 3, 4};
    std::shuffle(groups.begin(), groups.end(), rng);
    const int n_groups = 1 + static_cast<int>(rng() % 4);
    std::vector<float> logits(V, -inf);
    bool any_finite = false;
    for (int i = 0; i < n_groups; ++i)
      for (int r = group_start[groups[i]]; r < group_start[groups[i] + 1]; ++r) {
        // coarse values for ties; some NaN, some -inf; every 8th trial nothing finite at all
        const unsigned kind = trial % 8 == 0 ? rng() % 2 : rng() % 10;
        logits[token_of_row[r]] = kind == 0 ? nan : kind == 1 ? -inf : static_cast<float>(rng() % 5);
        any_finite |= kind > 1;
      }
    fell_back += !any_finite;
    std::vector<int> history = {static_cast<int>(rng() % V), static_cast<int>(rng() % V)};
    for (float penalty : {1.0f, 1.3f}) {
      SamplerConfig cfg = plain(0.0f);
      cfg.repeat_penalty = penalty;
      Rig a(cfg, V), b(cfg, V);
      std::vector<float> la = logits, lb = logits;
      const LogitCandidates cand{&h, groups.data(), n_groups};
      const int want = a.sampler.sample(la.data(), history.data(), 2);
      EXPECT_EQ(b.sampler.sample(lb.data(), history.data(), 2, &cand), want) << "trial " << trial;
      ++trials;
    }
  }
  EXPECT_EQ(trials, 800);
  EXPECT_GT(fell_back, 0);  // some trials had no finite candidate: the full pass decided
}

TEST(Sampler, TopKOneEqualsGreedy) {
  uint64_t rng = 7;
  SamplerConfig cfg = plain(1.5f);
  cfg.top_k = 1;
  Rig one(cfg, 300);
  Rig greedy(plain(0.0f), 300);
  for (int i = 0; i < 200; ++i) {
    std::vector<float> logits = random_logits(&rng, 300, 4.0f);
    if (i % 3 == 0) logits[17] = logits[250] = 10.0f;  // a tie: the lower id
    EXPECT_EQ(one.sample(logits), greedy.sample(logits));
  }
}

TEST(Sampler, TopKKeepsOnlyTheKBest) {
  uint64_t rng = 11;
  SamplerConfig cfg = plain(5.0f);  // hot: the tail would be drawn often without top-k
  cfg.top_k = 7;
  Rig r(cfg, 32000);
  for (int i = 0; i < 100; ++i) {
    const std::vector<float> logits = random_logits(&rng, 32000, 3.0f);
    std::vector<float> sorted = logits;
    std::nth_element(sorted.begin(), sorted.begin() + 6, sorted.end(), std::greater<float>());
    const int id = r.sample(logits);
    ASSERT_GE(logits[static_cast<size_t>(id)], sorted[6]);
  }
}

void expect_distribution(const SamplerConfig& cfg, const std::vector<float>& logits, const std::vector<double>& p) {
  Rig r(cfg, static_cast<int>(logits.size()));
  const int n = 200000;
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < n; ++i) ++counts[static_cast<size_t>(r.sample(logits))];
  // 7 degrees of freedom: P(chi2 > 30) ~ 1e-4. The seed is fixed, so this cannot flake.
  EXPECT_LT(chi_square(counts, p, n), 30.0);
}

TEST(Sampler, DrawsFollowSoftmaxOverTemperature) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 1.5f, 0.0f, 2.2f, -0.3f};
  expect_distribution(plain(0.7f), logits, softmax(logits, 0.7));
  expect_distribution(plain(1.0f), logits, softmax(logits, 1.0));
  expect_distribution(llama2c(0.7f, 1.0f), logits, softmax(logits, 0.7));
  expect_distribution(llama2c(1.3f, 0.0f, 99), logits, softmax(logits, 1.3));
  // llama2.c's top-p 0.9: the nucleus (cumulative > 0.9 in probability order), renormalised.
  std::vector<double> p = softmax(logits, 1.0);
  std::vector<int> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
  double cum = 0;
  std::vector<double> nucleus(p.size(), 0.0);
  for (const int i : order) {
    nucleus[i] = p[i];
    cum += p[i];
    if (cum > 0.9) break;
  }
  for (double& x : nucleus) x /= cum;
  expect_distribution(llama2c(1.0f, 0.9f), logits, nucleus);
}

// The smallest probability-ordered prefix whose mass reaches `top_p` (computed in double).
std::vector<bool> nucleus_of(const std::vector<float>& logits, double top_p) {
  const std::vector<double> p = softmax(logits, 1.0);
  std::vector<int> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
  std::vector<bool> in(p.size(), false);
  double cum = 0;
  for (const int i : order) {
    in[i] = true;
    cum += p[i];
    if (cum >= top_p) break;
  }
  return in;
}

TEST(Sampler, TopPNeverLeavesTheNucleus) {
  uint64_t rng = 2024;
  for (const bool run_c : {false, true}) {
    SamplerConfig cfg = run_c ? llama2c(1.0f, 0.8f, 5) : plain(1.0f);
    cfg.top_p = 0.8f;
    Rig r(cfg, 1000);
    for (int i = 0; i < 300; ++i) {
      const std::vector<float> logits = random_logits(&rng, 1000, 6.0f);
      // A little slack for float rounding at the edge of the nucleus.
      const std::vector<bool> allowed = nucleus_of(logits, 0.8 + 1e-4);
      for (int k = 0; k < 20; ++k) {
        const int id = r.sample(logits);
        ASSERT_TRUE(allowed[static_cast<size_t>(id)]) << "token " << id << " outside the nucleus";
      }
    }
  }
}

TEST(Sampler, MinPNeverReturnsUnlikelyTokens) {
  uint64_t rng = 31337;
  SamplerConfig cfg = plain(1.0f);
  cfg.min_p = 0.2f;
  Rig r(cfg, 500);
  int distinct_seen = 0;
  for (int i = 0; i < 300; ++i) {
    const std::vector<float> logits = random_logits(&rng, 500, 3.0f);
    const std::vector<double> p = softmax(logits, 1.0);
    const double pmax = *std::max_element(p.begin(), p.end());
    std::vector<bool> seen(500, false);
    for (int k = 0; k < 20; ++k) {
      const int id = r.sample(logits);
      ASSERT_GE(p[static_cast<size_t>(id)], 0.2 * pmax * (1 - 1e-5)) << "token " << id;
      if (!seen[static_cast<size_t>(id)]) ++distinct_seen;
      seen[static_cast<size_t>(id)] = true;
    }
  }
  EXPECT_GT(distinct_seen, 300 * 2);  // it still samples, not just argmax
}

TEST(Sampler, RepeatPenaltyChangesTheChoice) {
  SamplerConfig cfg = plain(0.0f);
  cfg.repeat_penalty = 1.2f;
  cfg.repeat_last_n = 2;
  Rig r(cfg, 4);
  // Positive logit divided: 2.0 / 1.2 = 1.67 < 1.9.
  EXPECT_EQ(r.sample({2.0f, 1.9f, 0.5f, 0.0f}), 0);
  EXPECT_EQ(r.sample({2.0f, 1.9f, 0.5f, 0.0f}, {0}), 1);
  // Counted once however often it repeats: 2.0 / 1.2 > 1.5, whereas 2.0 / 1.2^3 would be < 1.5.
  EXPECT_EQ(r.sample({2.0f, 1.5f, 0.5f, 0.0f}, {3, 0, 0}), 0);
  // Negative logit multiplied: -1.0 * 1.2 = -1.2 < -1.1.
  EXPECT_EQ(r.sample({-1.0f, -1.1f, -5.0f, -5.0f}, {0}), 1);
  // Outside the last 2 tokens: no penalty. Out-of-range ids in the history are ignored.
  EXPECT_EQ(r.sample({2.0f, 1.9f, 0.5f, 0.0f}, {0, 2, 3, -4, 99}), 0);
  // The penalty is applied to the caller's logits in place.
  std::vector<float> logits = {2.4f, 0.0f, -2.4f, 1.0f};
  const int history[] = {1, 0, 2};  // token 1 is outside the last 2
  r.sampler.sample(logits.data(), history, 3);
  EXPECT_FLOAT_EQ(logits[0], 2.0f);
  EXPECT_EQ(logits[1], 0.0f);
  EXPECT_FLOAT_EQ(logits[2], -2.88f);
  EXPECT_EQ(logits[3], 1.0f);
}

TEST(Sampler, SameSeedSameSequenceDifferentSeedsDiffer) {
  uint64_t rng = 5;
  std::vector<std::vector<float>> steps;
  for (int i = 0; i < 100; ++i) steps.push_back(random_logits(&rng, 64, 2.0f));
  for (const bool run_c : {false, true}) {
    auto run = [&](uint64_t seed) {
      SamplerConfig cfg = run_c ? llama2c(1.0f, 0.9f, seed) : SamplerConfig{};
      cfg.seed = seed;
      cfg.temperature = 1.0f;
      Rig r(cfg, 64);
      std::vector<int> out;
      for (const auto& l : steps) out.push_back(r.sample(l));
      return out;
    };
    EXPECT_EQ(run(42), run(42));
    EXPECT_NE(run(42), run(43));
  }
}

TEST(Sampler, NonFiniteLogitsAreHandled) {
  const float nan = std::nanf("");
  const float inf = INFINITY;
  for (const bool run_c : {false, true}) {
    for (const float t : {0.0f, 0.8f}) {
      SamplerConfig cfg = run_c ? llama2c(t, 0.9f) : plain(t);
      if (!run_c) {
        cfg.top_k = 3;
        cfg.top_p = 0.9f;
        cfg.min_p = 0.05f;
      }
      Rig r(cfg, 5);
      for (int k = 0; k < 50; ++k) {
        // NaN is never chosen while a real logit exists.
        const int a = r.sample({nan, 1.0f, nan, 0.5f, nan});
        EXPECT_TRUE(a == 1 || a == 3) << a;
        // +inf takes all the mass (shared among +inf entries; greedy: the lowest id).
        const int b = r.sample({1.0f, inf, 3.0f, inf, nan});
        EXPECT_TRUE(b == 1 || b == 3) << b;
        if (t == 0.0f) {
          EXPECT_EQ(b, 1);
        }
        // -inf is never chosen while something finite exists.
        const int c = r.sample({-inf, -inf, -3.0f, -inf, nan});
        EXPECT_EQ(c, 2);
        // All NaN / -inf: some valid id, no crash.
        const int d = r.sample({nan, nan, nan, nan, nan});
        EXPECT_TRUE(d >= 0 && d < 5);
        const int e = r.sample({-inf, -inf, -inf, -inf, -inf});
        EXPECT_TRUE(e >= 0 && e < 5);
        // Finite logits that overflow when divided by a tiny temperature.
        const int f = r.sample({3e38f, -3e38f, 3e38f, 0.0f, 1.0f});
        EXPECT_TRUE(f == 0 || f == 2) << f;
      }
    }
  }
  SamplerConfig tiny = llama2c(1e-30f, 0.0f);
  Rig r(tiny, 3);
  EXPECT_EQ(r.sample({1.0f, 3.0f, 2.0f}), 1);  // 3e30 vs 2e30: finite, still fine
}

TEST(Sampler, VocabOfOne) {
  for (const SamplerConfig& cfg : {plain(0.0f), plain(1.0f), SamplerConfig{}, llama2c(1.0f, 0.9f),
                                   llama2c(1.0f, 0.0f), llama2c(0.0f, 0.9f)}) {
    Rig r(cfg, 1);
    EXPECT_EQ(r.sample({0.3f}), 0);
    EXPECT_EQ(r.sample({std::nanf("")}, {0, 0, 5}), 0);
  }
}

TEST(Sampler, RejectsBadConfigs) {
  std::vector<uint8_t> mem(1 << 16);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  Sampler s;
  auto bad = [&](SamplerConfig c, int vocab) { return s.init(c, vocab, arena).code(); };
  SamplerConfig c;
  EXPECT_EQ(bad(c, 0), Code::kInvalidArgument);
  c.temperature = -1.0f;
  EXPECT_EQ(bad(c, 10), Code::kInvalidArgument);
  c = SamplerConfig{};
  c.temperature = std::nanf("");
  EXPECT_EQ(bad(c, 10), Code::kInvalidArgument);
  c = SamplerConfig{};
  c.top_p = 1.5f;
  EXPECT_EQ(bad(c, 10), Code::kInvalidArgument);
  c = SamplerConfig{};
  c.top_k = -1;
  EXPECT_EQ(bad(c, 10), Code::kInvalidArgument);
  c = SamplerConfig{};
  c.min_p = -0.1f;
  EXPECT_EQ(bad(c, 10), Code::kInvalidArgument);
  c = SamplerConfig{};
  c.repeat_penalty = 0.0f;
  EXPECT_EQ(bad(c, 10), Code::kInvalidArgument);
  c = SamplerConfig{};
  c.seed = 0;
  EXPECT_EQ(bad(c, 10), Code::kInvalidArgument);
  c = SamplerConfig{};
  EXPECT_EQ(bad(c, 1000000), Code::kOutOfMemory);
  float logits[2] = {0.0f, 1.0f};
  EXPECT_EQ(s.sample(logits, nullptr, 0), 0);  // a failed init leaves a sampler that returns 0
  EXPECT_TRUE(s.init(c, 100, arena).ok());
}

// run.c's sampler, written out literally in the test (with mc_expf in place of expf, and a stable
// sort where run.c has qsort): the llama2c mode must agree token for token and coin for coin.
struct RunCOracle {
  float temperature, topp;
  uint64_t state;
  int sample(std::vector<float> x) {
    const int n = static_cast<int>(x.size());
    if (temperature == 0.0f) return static_cast<int>(std::max_element(x.begin(), x.end()) - x.begin());
    for (float& v : x) v /= temperature;
    float m = x[0];
    for (const float v : x) m = v > m ? v : m;
    float sum = 0.0f;
    for (float& v : x) {
      v = mc_expf(v - m);
      sum += v;
    }
    for (float& v : x) v /= sum;
    const float coin = xorshift_f32(&state);
    if (topp <= 0 || topp >= 1) {
      float cdf = 0.0f;
      for (int i = 0; i < n; ++i) {
        cdf += x[i];
        if (coin < cdf) return i;
      }
      return n - 1;
    }
    const float cutoff = (1.0f - topp) / (n - 1);
    std::vector<std::pair<float, int>> c;
    for (int i = 0; i < n; ++i)
      if (x[i] >= cutoff) c.push_back({x[i], i});
    std::stable_sort(c.begin(), c.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    float cum = 0.0f;
    int last = static_cast<int>(c.size()) - 1;
    for (int i = 0; i < static_cast<int>(c.size()); ++i) {
      cum += c[i].first;
      if (cum > topp) {
        last = i;
        break;
      }
    }
    const float r = coin * cum;
    float cdf = 0.0f;
    for (int i = 0; i <= last; ++i) {
      cdf += c[i].first;
      if (r < cdf) return c[i].second;
    }
    return c[last].second;
  }
};

TEST(Sampler, Llama2cModeMatchesRunCLiterally) {
  uint64_t rng = 77;
  for (const float t : {0.0f, 0.5f, 1.0f}) {
    for (const float p : {0.0f, 0.5f, 0.9f, 0.99f, 1.0f}) {
      Rig r(llama2c(t, p, 133742), 512);
      RunCOracle oracle{t, p, 133742};
      for (int i = 0; i < 300; ++i) {
        std::vector<float> logits = random_logits(&rng, 512, 8.0f);
        if (i % 10 == 0) logits[3] = logits[9] = logits[400] = 9.0f;  // ties among the top tokens
        ASSERT_EQ(r.sample(logits), oracle.sample(logits)) << "t " << t << " p " << p << " step " << i;
        ASSERT_EQ(r.sampler.rng_state(), oracle.state);
      }
    }
  }
}

TEST(Sampler, GreedyReproducesRunCReference) {
  MC_REQUIRE_SHARED();
  const std::vector<uint8_t> raw = test::read_file(test::shared_path("models/stories260K/ref/greedy_noprompt.logits.f32"));
  ASSERT_EQ(raw.size(), 256u * 512u * 4u);
  const std::string tokens = test::read_text(test::shared_path("models/stories260K/ref/greedy_noprompt.tokens"));
  std::vector<int> next;
  for (size_t pos = tokens.find("TOK "); pos != std::string::npos; pos = tokens.find("TOK ", pos + 1)) {
    int p, tok, nx;
    ASSERT_EQ(std::sscanf(tokens.c_str() + pos, "TOK %d %d %d", &p, &tok, &nx), 3);
    next.push_back(nx);
  }
  ASSERT_EQ(next.size(), 256u);
  Rig run_c(llama2c(0.0f, 0.9f), 512);
  Rig ours(plain(0.0f), 512);
  for (size_t step = 0; step < 256; ++step) {
    std::vector<float> logits(512);
    std::memcpy(logits.data(), raw.data() + step * 512 * 4, 512 * 4);
    EXPECT_EQ(run_c.sample(logits), next[step]) << "step " << step;
    EXPECT_EQ(ours.sample(logits), next[step]) << "step " << step;
  }
}

}  // namespace
}  // namespace mcullm
