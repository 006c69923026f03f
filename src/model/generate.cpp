#include "model/generate.h"

namespace mcullm {

Status generate(Decoder& ctx, Sampler& sampler, const int* prompt, int n_prompt, const GenerateOptions& opt,
                int* history, Fingerprint* fp, const GenerateHooks& hooks, GenerateResult* result) {
  *result = GenerateResult();
  if (n_prompt <= 0) return Status::Error(Code::kInvalidArgument, "the prompt needs at least one token (BOS)");
  if (n_prompt > ctx.ctx_len())
    return Status::Error(Code::kOutOfRange, "the prompt has %d tokens, the context holds %d", n_prompt, ctx.ctx_len());
  if (opt.n_predict < 0) return Status::Error(Code::kInvalidArgument, "n_predict %d is negative", opt.n_predict);
  const int n_vocab = ctx.vocab_size();
  int n_history = 0;
  for (int i = 0; i < n_prompt; ++i) {
    history[n_history++] = prompt[i];
    if (fp) fp->add_token(prompt[i]);
  }
  result->n_prompt = n_prompt;
  int token = prompt[0];
  int pos = 0;
  // The prompt but its last token in batches (the decoder's max_batch): the same logits, bit for
  // bit, as one forward per token; they are computed only when the fingerprint or a hook reads them.
  const bool hook_prompt = hooks.on_logits != nullptr && hooks.prompt_logits;
  const bool want_logits = fp != nullptr || hook_prompt;
  const int batch = ctx.max_batch();
  while (batch > 1 && pos < n_prompt - 1) {
    const int n = n_prompt - 1 - pos < batch ? n_prompt - 1 - pos : batch;
    const float* rows = nullptr;
    MC_TRY(ctx.prefill(prompt + pos, n, pos, want_logits ? &rows : nullptr));
    for (int i = 0; i < n; ++i, ++pos) {
      if (want_logits) {
        const float* l = rows + static_cast<size_t>(i) * static_cast<size_t>(n_vocab);
        if (fp) fp->add_logits(l, static_cast<size_t>(n_vocab));
        if (hook_prompt) hooks.on_logits(hooks.user, pos, l, n_vocab);
      }
      const GenerateStep step{pos, prompt[pos], prompt[pos + 1], false};
      if (hooks.on_step && !hooks.on_step(hooks.user, step)) return Status::Ok();
    }
    token = prompt[pos];
  }
  for (;; ++pos) {
    const bool in_prompt = pos < n_prompt - 1;
    if (!in_prompt && result->n_sampled >= opt.n_predict) break;
    if (pos >= ctx.ctx_len()) {
      result->context_full = true;
      break;
    }
    const float* logits_c = nullptr;
    MC_TRY(ctx.forward(token, pos, &logits_c));
    if (fp) fp->add_logits(logits_c, static_cast<size_t>(n_vocab));
    if (hooks.on_logits && (!in_prompt || hooks.prompt_logits)) hooks.on_logits(hooks.user, pos, logits_c, n_vocab);
    GenerateStep step{pos, token, 0, !in_prompt};
    if (in_prompt) {
      step.next = prompt[pos + 1];
    } else {
      // The context owns the logits buffer and recomputes it on the next forward: sampling may edit it.
      LogitCandidates cand;
      const bool narrowed = ctx.logit_candidates(&cand);
      step.next = sampler.sample(const_cast<float*>(logits_c), history, n_history, narrowed ? &cand : nullptr);
      history[n_history++] = step.next;
      ++result->n_sampled;
      if (fp) fp->add_token(step.next);
    }
    const bool keep_going = hooks.on_step ? hooks.on_step(hooks.user, step) : true;
    if (step.sampled && (step.next == opt.stop_a || step.next == opt.stop_b)) {
      result->stopped_by_token = true;
      break;
    }
    if (!keep_going) break;
    token = step.next;
  }
  return Status::Ok();
}

}  // namespace mcullm
