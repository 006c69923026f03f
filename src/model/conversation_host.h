// A multi-turn chat kept in one decoder's KV cache: each user turn is rendered with the chat
// template (only the new part: ChatTemplate::continue_conversation), fed at the next positions, and
// the reply is sampled until an end-of-turn token, a length limit or a full context. Earlier turns
// are never evaluated again. Used by `mcullm run -cnv`; the server can hold one per chat slot.
// Host code.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "mcullm/status.h"
#include "model/decoder.h"
#include "model/sampler.h"
#include "tokenizer/chat_template_host.h"
#include "tokenizer/llama2c_tokenizer_host.h"
#include "tokenizer/tokenizer_host.h"

namespace mcullm {

struct ChatReply {
  std::string text;          // the reply's text (the end-of-turn token not included)
  int n_prompt = 0;          // tokens fed before the reply (this turn's template text + the previous reply's last token)
  int n_generated = 0;       // tokens sampled (including an end-of-turn token)
  bool ended_by_eot = false;  // stopped at an end-of-turn token
  bool context_full = false;  // stopped because the context is full (the next reply() will fail)
};

class Conversation {
 public:
  // Streams the reply's text as it comes (whole UTF-8 characters only); return false to stop.
  using OnText = bool (*)(void* user, std::string_view text);

  // The objects must outlive the conversation; the decoder's cache belongs to it from now on.
  Conversation(Decoder& decoder, Sampler& sampler, const Tokenizer& tok, const ChatFormat& format)
      : dec_(decoder), sampler_(sampler), tok_(tok), fmt_(format) {}

  // The system prompt of the next conversation (takes effect at the first turn after reset()).
  void set_system(std::string system) { system_ = std::move(system); }
  // Forgets the conversation: the next reply() starts again at position 0.
  void reset();

  // Adds the user's message and generates the reply (at most n_predict tokens). Fails with
  // kOutOfRange, leaving the conversation as it was, when the new turn does not fit in the context.
  Status reply(std::string_view user, int n_predict, OnText on_text, void* on_text_user, ChatReply* out);

  int n_past() const { return static_cast<int>(cache_.size()); }  // tokens in the KV cache
  int ctx_len() const { return dec_.ctx_len(); }
  // Every token fed, in position order (what the KV cache holds).
  const std::vector<int>& cache_tokens() const { return cache_; }
  int turns() const { return turns_; }

 private:
  Status feed(int token, const float** logits);

  Decoder& dec_;
  Sampler& sampler_;
  const Tokenizer& tok_;
  const ChatFormat& fmt_;
  std::string system_;
  std::vector<int> cache_;    // tokens fed (position = index)
  std::vector<int> history_;  // tokens fed or sampled, for the repeat penalty
  int pending_ = -1;          // the last sampled token, not fed yet (the next turn feeds it first)
  bool pending_eot_ = false;  // ... and it ended the turn
  bool full_ = false;         // a reply stopped at the end of the context
  int turns_ = 0;
};

}  // namespace mcullm
