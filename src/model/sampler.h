// Picks the next token from logits. Freestanding: no heap (scratch comes from an Arena at init), no
// exceptions, no recursion, and every exp goes through mc_expf so that all targets agree bit for bit.
//
// Two procedures:
//  - llama2c = true: llama2.c run.c's sampler exactly (FACTS.md section 3): temperature 0 = argmax
//    with no RNG use; else logits / T, softmax, one coin per step, then multinomial (top_p <= 0 or
//    >= 1) or top-p with run.c's (1 - top_p) / (n - 1) pre-filter. Only temperature and top_p are used.
//  - default: repeat penalty -> top-k -> top-p -> min-p -> temperature -> softmax -> draw with the same
//    xorshift coin (one per step when T > 0); T <= 0 = argmax after the penalty.
//
// Ordering: wherever candidates are sorted, it is by value descending, then by token id ascending.
// This is a total order, so the result never depends on the sort algorithm. run.c sorts with qsort,
// which is not stable; for distinct probabilities any correct sort gives run.c's order, and for ties
// we take the order a stable sort of the index-ordered array gives (lower id first).
//
// Non-finite logits (never produced by a healthy model, but a sampler must not crash on them):
// NaN counts as -inf (never chosen while any other token is possible). If some logits are +inf
// (given, or after dividing by a tiny temperature), the probability mass is shared equally among
// those tokens. If every logit is -inf or NaN, all tokens are equally likely. Greedy returns the
// lowest id with the largest logit (NaN ignored; token 0 when all are NaN).
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "mcullm/status.h"
#include "model/vocab_head.h"

namespace mcullm {

struct SamplerConfig {
  float temperature = 0.8f;     // 0 = greedy
  int top_k = 40;               // 0 = off
  float top_p = 0.95f;          // 1 (or 0) = off
  float min_p = 0.05f;          // 0 = off
  float repeat_penalty = 1.0f;  // 1 = off; llama.cpp semantics: a repeated token's logit is divided by
                                // it when > 0, multiplied by it when < 0 (once per distinct token)
  int repeat_last_n = 64;       // how many of the last history tokens count; -1 = all of them
  uint64_t seed = 42;
  bool llama2c = false;         // llama2.c's exact procedure: only temperature and top_p are used
  // The token is the argmax of the raw logits (what a pruned vocabulary head computes exactly).
  bool picks_argmax() const { return temperature <= 0.0f && (llama2c || repeat_penalty == 1.0f); }
};

class Sampler {
 public:
  // Validates the config (seed must be nonzero) and takes scratch (8 bytes per vocabulary entry,
  // plus a bitmap in default mode) from the arena.
  Status init(const SamplerConfig& cfg, int vocab_size, Arena& arena);
  // Picks the next token from logits[vocab_size] (modified in place). history = tokens so far (for
  // the repeat penalty; ids outside the vocabulary are ignored). Returns 0 if init() did not succeed.
  // candidates (may be null): the logits outside them are -inf (a grouped head's, Decoder::
  // logit_candidates): greedy decoding then reads only those; the token is the same.
  int sample(float* logits, const int* history, int n_history, const LogitCandidates* candidates = nullptr);

  const SamplerConfig& config() const { return cfg_; }
  uint64_t rng_state() const { return rng_; }

  struct Candidate {
    float value;  // a logit or a probability, depending on the step
    int id;
  };

 private:
  int sample_llama2c(float* logits);
  int sample_default(float* logits, const int* history, int n_history, const LogitCandidates* candidates);
  void apply_repeat_penalty(float* logits, const int* history, int n_history);

  SamplerConfig cfg_;
  int vocab_ = 0;
  uint64_t rng_ = 0;
  Candidate* cand_ = nullptr;     // [vocab]
  uint8_t* seen_ = nullptr;       // [vocab / 8 + 1] bitmap for the repeat penalty
};

// llama2.c's generator (xorshift64*): advances *state and returns the high 32 bits of the product.
uint32_t xorshift_u32(uint64_t* state);
// (xorshift_u32 >> 8) / 16777216.0f: a float in [0, 1).
float xorshift_f32(uint64_t* state);

}  // namespace mcullm
