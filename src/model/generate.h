// The generation loop shared by the CLI, the server and the MCU runner: feed the prompt, then
// sample until n_predict tokens, an end token, a full context or the caller says stop.
#pragma once
#include "core/fingerprint.h"
#include "model/decoder.h"
#include "model/sampler.h"

namespace mcullm {

struct GenerateStep {
  int pos;          // position of `token`
  int token;        // the token fed at pos
  int next;         // the token that follows (from the prompt, or sampled)
  bool sampled;     // false while `next` comes from the prompt
};

struct GenerateHooks {
  void* user = nullptr;
  // Called with the logits of each step before sampling touches them (may be null).
  void (*on_logits)(void* user, int pos, const float* logits, int n_vocab) = nullptr;
  // Called after each step; return false to stop (may be null).
  bool (*on_step)(void* user, const GenerateStep& step) = nullptr;
  // false: on_logits sees the sampled steps only, so the prompt's batched prefill skips the output
  // head (a board that never reads the prompt's logits). The fingerprint, when given, still takes all.
  bool prompt_logits = true;
};

struct GenerateOptions {
  int n_predict = 256;    // tokens to sample
  int stop_a = -1;        // a sampled token that ends generation (e.g. BOS in llama2.c models), -1: none
  int stop_b = -1;        // another one (e.g. EOS)
};

struct GenerateResult {
  int n_prompt = 0;       // prompt tokens fed
  int n_sampled = 0;      // tokens sampled (including a stop token)
  bool stopped_by_token = false;
  bool context_full = false;
};

// history: a caller buffer of at least n_prompt + n_predict ints (prompt + sampled tokens, for
// the repeat penalty). The fingerprint (may be null) receives every token fed or sampled and the
// logits of every step.
Status generate(Decoder& ctx, Sampler& sampler, const int* prompt, int n_prompt, const GenerateOptions& opt,
                int* history, Fingerprint* fp, const GenerateHooks& hooks, GenerateResult* result);

}  // namespace mcullm
