#include "model/sampler.h"

#include "core/fmath.h"

namespace mcullm {

namespace {

constexpr float kInf = __builtin_huge_valf();
using Candidate = Sampler::Candidate;

inline bool is_nan(float x) { return x != x; }

// The one order used everywhere: larger value first, then lower id.
inline bool before(const Candidate& a, const Candidate& b) {
  return a.value > b.value || (a.value == b.value && a.id < b.id);
}

// Max-heap under before(): the root is the candidate that comes last. Iterative, no recursion.
void sift_down(Candidate* a, int n, int i) {
  for (;;) {
    const int l = 2 * i + 1;
    if (l >= n) return;
    const int c = (l + 1 < n && before(a[l], a[l + 1])) ? l + 1 : l;
    if (!before(a[i], a[c])) return;
    const Candidate t = a[i];
    a[i] = a[c];
    a[c] = t;
    i = c;
  }
}

void heapify(Candidate* a, int n) {
  for (int i = n / 2 - 1; i >= 0; --i) sift_down(a, n, i);
}

// Given a heap from heapify(), sorts it into before() order (best first).
void sort_heap(Candidate* a, int n) {
  for (int end = n - 1; end > 0; --end) {
    const Candidate t = a[0];
    a[0] = a[end];
    a[end] = t;
    sift_down(a, end, 0);
  }
}

void sort_candidates(Candidate* a, int n) {
  heapify(a, n);
  sort_heap(a, n);
}

// Unnormalised softmax weight of x given the maximum m, defined for every input so that non-finite
// logits cannot produce NaN: a finite m gives exp(x - m) (1 for the maximum); m = +inf shares the mass
// among the +inf entries; m = -inf means every entry is -inf, and all weigh the same.
inline float weight(float x, float m) {
  if (m == kInf) return x == kInf ? 1.0f : 0.0f;
  if (m == -kInf) return 1.0f;
  return mc_expf(x - m);
}

// Lowest index of the largest value; NaN is skipped (index 0 if everything is NaN).
int argmax(const float* x, int n) {
  int best = 0;
  bool found = false;
  for (int i = 0; i < n; ++i) {
    if (is_nan(x[i])) continue;
    if (!found || x[i] > x[best]) {
      best = i;
      found = true;
    }
  }
  return best;
}

// run.c's softmax (max subtraction, sequential sum, division), through weight() for non-finite input.
void softmax_inplace(float* x, int n) {
  for (int i = 0; i < n; ++i)
    if (is_nan(x[i])) x[i] = -kInf;
  float max_val = x[0];
  for (int i = 1; i < n; ++i)
    if (x[i] > max_val) max_val = x[i];
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) {
    x[i] = weight(x[i], max_val);
    sum += x[i];
  }
  for (int i = 0; i < n; ++i) x[i] /= sum;
}

int sample_multinomial(const float* probs, int n, float coin) {
  float cdf = 0.0f;
  for (int i = 0; i < n; ++i) {
    cdf += probs[i];
    if (coin < cdf) return i;
  }
  return n - 1;  // rounding: run.c's fallback
}

// run.c's sample_topp. `cand` has room for n entries.
int sample_topp_llama2c(const float* probs, int n, float topp, Candidate* cand, float coin) {
  if (n == 1) return 0;  // run.c would divide by n - 1 = 0 here
  // Tokens below (1 - topp) / (n - 1) cannot be in the nucleus (except the top one, see below).
  const float cutoff = (1.0f - topp) / static_cast<float>(n - 1);
  int n0 = 0;
  for (int i = 0; i < n; ++i) {
    if (probs[i] >= cutoff) cand[n0++] = Candidate{probs[i], i};
  }
  // Only when topp < 1/n can even the most likely token fall below the cutoff; run.c then reads
  // before its buffer. That token alone already exceeds topp, so it is the whole nucleus.
  if (n0 == 0) return argmax(probs, n);
  sort_candidates(cand, n0);
  float cumulative = 0.0f;
  int last = n0 - 1;  // rounding: if topp is never exceeded, keep all
  for (int i = 0; i < n0; ++i) {
    cumulative += cand[i].value;
    if (cumulative > topp) {
      last = i;
      break;
    }
  }
  const float r = coin * cumulative;
  float cdf = 0.0f;
  for (int i = 0; i <= last; ++i) {
    cdf += cand[i].value;
    if (r < cdf) return cand[i].id;
  }
  return cand[last].id;
}

// Largest value among candidates (the first one when they are sorted).
float max_value(const Candidate* c, int n) {
  float m = c[0].value;
  for (int i = 1; i < n; ++i)
    if (c[i].value > m) m = c[i].value;
  return m;
}

}  // namespace

uint32_t xorshift_u32(uint64_t* state) {
  uint64_t s = *state;
  s ^= s >> 12;
  s ^= s << 25;
  s ^= s >> 27;
  *state = s;
  return static_cast<uint32_t>((s * 0x2545F4914F6CDD1DULL) >> 32);
}

float xorshift_f32(uint64_t* state) { return static_cast<float>(xorshift_u32(state) >> 8) / 16777216.0f; }

Status Sampler::init(const SamplerConfig& cfg, int vocab_size, Arena& arena) {
  vocab_ = 0;
  cand_ = nullptr;
  seen_ = nullptr;
  if (vocab_size < 1) return Status::Error(Code::kInvalidArgument, "sampler: vocab_size %d", vocab_size);
  const float t = cfg.temperature;
  if (is_nan(t) || t < 0.0f || t == kInf)
    return Status::Error(Code::kInvalidArgument, "sampler: temperature %g must be finite and >= 0",
                         static_cast<double>(t));
  if (is_nan(cfg.top_p) || cfg.top_p < 0.0f || cfg.top_p > 1.0f)
    return Status::Error(Code::kInvalidArgument, "sampler: top_p %g must be in [0, 1]", static_cast<double>(cfg.top_p));
  if (cfg.top_k < 0) return Status::Error(Code::kInvalidArgument, "sampler: top_k %d must be >= 0", cfg.top_k);
  if (is_nan(cfg.min_p) || cfg.min_p < 0.0f || cfg.min_p > 1.0f)
    return Status::Error(Code::kInvalidArgument, "sampler: min_p %g must be in [0, 1]", static_cast<double>(cfg.min_p));
  if (is_nan(cfg.repeat_penalty) || cfg.repeat_penalty <= 0.0f || cfg.repeat_penalty == kInf)
    return Status::Error(Code::kInvalidArgument, "sampler: repeat_penalty %g must be finite and > 0",
                         static_cast<double>(cfg.repeat_penalty));
  if (cfg.repeat_last_n < -1)
    return Status::Error(Code::kInvalidArgument, "sampler: repeat_last_n %d must be >= -1", cfg.repeat_last_n);
  if (cfg.seed == 0)
    return Status::Error(Code::kInvalidArgument, "sampler: seed 0 would lock xorshift at 0 (pick another)");
  Candidate* cand = nullptr;
  uint8_t* seen = nullptr;
  MC_TRY(arena.alloc_array(static_cast<size_t>(vocab_size), TensorClass::kScratch, &cand));
  if (!cfg.llama2c) MC_TRY(arena.alloc_array(static_cast<size_t>(vocab_size) / 8 + 1, TensorClass::kScratch, &seen));
  if (seen) {
    for (int i = 0; i <= vocab_size / 8; ++i) seen[i] = 0;
  }
  cfg_ = cfg;
  vocab_ = vocab_size;
  rng_ = cfg.seed;
  cand_ = cand;
  seen_ = seen;
  return Status::Ok();
}

int Sampler::sample(float* logits, const int* history, int n_history, const LogitCandidates* candidates) {
  if (vocab_ == 0 || logits == nullptr) return 0;
  return cfg_.llama2c ? sample_llama2c(logits) : sample_default(logits, history, n_history, candidates);
}

int Sampler::sample_llama2c(float* logits) {
  const int n = vocab_;
  if (cfg_.temperature == 0.0f) return argmax(logits, n);
  for (int i = 0; i < n; ++i) logits[i] /= cfg_.temperature;
  softmax_inplace(logits, n);
  const float coin = xorshift_f32(&rng_);
  if (cfg_.top_p <= 0.0f || cfg_.top_p >= 1.0f) return sample_multinomial(logits, n, coin);
  return sample_topp_llama2c(logits, n, cfg_.top_p, cand_, coin);
}

// llama.cpp's penalty: each distinct token among the last repeat_last_n once.
void Sampler::apply_repeat_penalty(float* logits, const int* history, int n_history) {
  if (cfg_.repeat_penalty == 1.0f || history == nullptr || n_history <= 0 || cfg_.repeat_last_n == 0) return;
  int start = 0;
  if (cfg_.repeat_last_n > 0 && n_history > cfg_.repeat_last_n) start = n_history - cfg_.repeat_last_n;
  for (int i = start; i < n_history; ++i) {
    const int t = history[i];
    if (t < 0 || t >= vocab_) continue;
    const uint8_t bit = static_cast<uint8_t>(1u << (t & 7));
    if (seen_[t >> 3] & bit) continue;
    seen_[t >> 3] |= bit;
    if (logits[t] > 0.0f) {
      logits[t] /= cfg_.repeat_penalty;
    } else if (logits[t] < 0.0f) {
      logits[t] *= cfg_.repeat_penalty;
    }
  }
  for (int i = start; i < n_history; ++i) {
    const int t = history[i];
    if (t >= 0 && t < vocab_) seen_[t >> 3] = 0;
  }
}

int Sampler::sample_default(float* logits, const int* history, int n_history, const LogitCandidates* candidates) {
  const int n = vocab_;
  apply_repeat_penalty(logits, history, n_history);  // -inf stays -inf
  if (cfg_.temperature <= 0.0f && candidates && candidates->head) {
    // Greedy over the candidates only: the first largest of the full pass below is the largest with
    // the lowest id, and every other logit is -inf. If none is above -inf, the full pass decides.
    const VocabHead& h = *candidates->head;
    int best = -1;
    for (int i = 0; i < candidates->n_groups; ++i) {
      const int g = candidates->groups[i];
      for (int r = h.group_start[g]; r < h.group_start[g + 1]; ++r) {
        const int t = h.token_of_row[r];
        if (is_nan(logits[t])) logits[t] = -kInf;
        if (best < 0 || logits[t] > logits[best] || (logits[t] == logits[best] && t < best)) best = t;
      }
    }
    if (best >= 0 && logits[best] > -kInf) return best;
  }
  // NaN counts as -inf (and is replaced by it); greedy decoding takes the first largest in the same pass.
  int best = 0;
  for (int i = 0; i < n; ++i) {
    if (is_nan(logits[i])) logits[i] = -kInf;
    if (logits[i] > logits[best]) best = i;
  }
  if (cfg_.temperature <= 0.0f) return best;
  const float coin = xorshift_f32(&rng_);  // exactly one per step, whatever follows

  Candidate* c = cand_;
  int count = n;
  bool sorted = false;
  // Top-k: keep the k best in a heap whose root is the worst kept (O(V log k)), then sort them.
  if (cfg_.top_k > 0 && cfg_.top_k < n) {
    const int k = cfg_.top_k;
    for (int i = 0; i < k; ++i) c[i] = Candidate{logits[i], i};
    heapify(c, k);
    for (int i = k; i < n; ++i) {
      const Candidate x{logits[i], i};
      if (before(x, c[0])) {
        c[0] = x;
        sift_down(c, k, 0);
      }
    }
    sort_heap(c, k);
    count = k;
    sorted = true;
  } else {
    for (int i = 0; i < n; ++i) c[i] = Candidate{logits[i], i};
  }

  // Top-p on the softmax at temperature 1 (as llama.cpp): the smallest sorted prefix whose mass
  // reaches top_p. Unsorted candidates are first thinned with run.c's cutoff, which cannot remove
  // a nucleus member, so that a 32000-entry vocabulary is not sorted whole.
  if (cfg_.top_p > 0.0f && cfg_.top_p < 1.0f && count > 1) {
    const float m = max_value(c, count);
    float sum = 0.0f;
    for (int i = 0; i < count; ++i) sum += weight(c[i].value, m);
    if (!sorted) {
      const float cutoff = (1.0f - cfg_.top_p) / static_cast<float>(count - 1);
      int kept = 0;
      int best = 0;
      for (int i = 0; i < count; ++i) {
        if (before(c[i], c[best])) best = i;
        if (weight(c[i].value, m) / sum >= cutoff) c[kept++] = c[i];
      }
      if (kept == 0) c[kept++] = c[best];  // best was not overwritten: kept stayed 0
      count = kept;
      sort_candidates(c, count);
      sorted = true;
    }
    float cumulative = 0.0f;
    for (int i = 0; i < count; ++i) {
      cumulative += weight(c[i].value, m) / sum;
      if (cumulative >= cfg_.top_p) {
        count = i + 1;
        break;
      }
    }
  }

  // Min-p: keep p >= min_p * p_max, i.e. exp(logit - max) >= min_p; the maximum always stays.
  if (cfg_.min_p > 0.0f && count > 1) {
    const float m = max_value(c, count);
    int kept = 0;
    for (int i = 0; i < count; ++i) {
      if (c[i].value == m || weight(c[i].value, m) >= cfg_.min_p) c[kept++] = c[i];
    }
    count = kept;
  }

  // Temperature, softmax weights, then the draw in candidate order.
  for (int i = 0; i < count; ++i) c[i].value /= cfg_.temperature;
  const float m = max_value(c, count);
  float sum = 0.0f;
  for (int i = 0; i < count; ++i) {
    c[i].value = weight(c[i].value, m);
    sum += c[i].value;
  }
  const float r = coin * sum;
  float cdf = 0.0f;
  int last_positive = 0;
  for (int i = 0; i < count; ++i) {
    if (c[i].value > 0.0f) last_positive = i;
    cdf += c[i].value;
    if (r < cdf) return c[i].id;
  }
  return c[last_positive].id;  // rounding: r reached the total
}

}  // namespace mcullm
