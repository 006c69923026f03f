// What the generation loop, the evaluator and the server need from any model architecture: feed
// one token at a position, get the next token's logits. Each architecture's context implements it
// (LlamaContext today; BitNet, PLE and Qwen2 contexts as they land).
#pragma once
#include "core/arena.h"
#include "mcullm/status.h"
#include "model/vocab_head.h"

namespace mcullm {

// A ReLU FFN's neurons, live ones (gate > 0) and skipped ones (up row and down weights not read:
// dead neurons of the tokens the gate-first sparse FFN ran; 0 where it ran dense).
struct FfnCounts {
  unsigned long long neurons = 0, live = 0, skipped = 0;
};

class Decoder {
 public:
  // Feeds `token` at `pos` (positions in order from 0; a smaller pos rewinds the cache) and
  // computes the logits of the next token; *logits stays valid until the next call.
  virtual Status forward(int token, int pos, const float** logits) = 0;
  // Feeds n known tokens at positions pos0 .. pos0 + n - 1 together (batched prefill: each weight
  // matrix is read once for all of them), 1 <= n <= max_batch(). With logits non-null, *logits gets
  // n rows of vocab_size values, row i being what forward(tokens[i], pos0 + i) returns, bit for bit;
  // valid until the next call. With logits null the output head is skipped (only the cache is filled).
  // The default runs forward() once (n == 1 only, as max_batch() defaults to 1).
  virtual Status prefill(const int* tokens, int n, int pos0, const float** logits) {
    if (n != 1) return Status::Error(Code::kInvalidArgument, "this decoder feeds one token at a time, not %d", n);
    const float* l = nullptr;
    MC_TRY(forward(tokens[0], pos0, &l));
    if (logits) *logits = l;
    return Status::Ok();
  }
  // Tokens one prefill() call takes at most.
  virtual int max_batch() const { return 1; }
  // A ReLU FFN's counts since init, over tokens and layers (FfnCounts); false for a model without one.
  virtual bool ffn_counts(FfnCounts* counts) const {
    (void)counts;
    return false;
  }
  // The head forward() and prefill() compute from now on (model/vocab_head.h): the groups must be the
  // model's head's (same rows, width and vocabulary); scratch comes from `arena`. Architectures
  // without grouped heads refuse anything but full.
  virtual Status set_head(const HeadChoice& head, Arena& arena) {
    (void)arena;
    if (head.grouped()) return Status::Error(Code::kUnsupported, "this architecture computes the full head only");
    return Status::Ok();
  }
  virtual int vocab_size() const = 0;
  virtual int ctx_len() const = 0;
  // After forward() with a grouped head: where its logits may be finite (vocab_head.h); false when
  // every logit was computed (the full head) or the decoder does not say.
  virtual bool logit_candidates(LogitCandidates* out) const {
    (void)out;
    return false;
  }

 protected:
  // Not virtual and not public: nothing deletes a decoder through this interface (a virtual
  // destructor would pull operator delete into the freestanding core).
  ~Decoder() = default;
};

}  // namespace mcullm
