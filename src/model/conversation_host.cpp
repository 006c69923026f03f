#include "model/conversation_host.h"

namespace mcullm {

void Conversation::reset() {
  cache_.clear();
  history_.clear();
  pending_ = -1;
  pending_eot_ = false;
  full_ = false;
  turns_ = 0;
}

Status Conversation::feed(int token, const float** logits) {
  MC_TRY(dec_.forward(token, static_cast<int>(cache_.size()), logits));
  cache_.push_back(token);
  return Status::Ok();
}

Status Conversation::reply(std::string_view user, int n_predict, OnText on_text, void* on_text_user, ChatReply* out) {
  *out = ChatReply();
  if (n_predict < 1) return Status::Error(Code::kInvalidArgument, "a reply needs n_predict >= 1 (got %d)", n_predict);
  const int ctx = dec_.ctx_len();
  if (full_)
    return Status::Error(Code::kOutOfRange, "the context of %d tokens is full; reset the conversation (/reset)", ctx);

  // This turn's tokens: the previous reply's last token (sampled, not fed yet), then the template's
  // text for the new messages.
  const bool first = cache_.empty() && pending_ < 0;
  std::vector<ChatMessage> messages;
  if (first && !system_.empty()) messages.push_back({"system", system_});
  messages.push_back({"user", std::string(user)});
  std::string text;
  MC_TRY(fmt_.chat_template().continue_conversation(messages, first, pending_eot_, &text));
  std::vector<int> prompt;
  MC_TRY(fmt_.encode(text, &prompt));
  if (first && tok_.wants_bos() && (prompt.empty() || prompt[0] != tok_.bos_id())) prompt.insert(prompt.begin(), tok_.bos_id());
  if (pending_ >= 0) prompt.insert(prompt.begin(), pending_);
  if (prompt.empty()) return Status::Error(Code::kInvalidArgument, "the chat turn encodes to no tokens");
  // The prompt and at least one reply token must fit.
  if (n_past() + static_cast<int>(prompt.size()) > ctx)
    return Status::Error(Code::kOutOfRange,
                         "this turn needs %zu tokens but the context has %d of %d left; reset the conversation (/reset)",
                         prompt.size(), ctx - n_past(), ctx);

  const float* logits = nullptr;
  for (int id : prompt) {
    MC_TRY(feed(id, &logits));
    history_.push_back(id);
  }
  pending_ = -1;
  pending_eot_ = false;
  ++turns_;
  out->n_prompt = static_cast<int>(prompt.size());

  Utf8StreamDecoder utf8;
  int prev = prompt.back();
  for (;;) {
    // The context owns the logits buffer and recomputes it on the next forward: sampling may edit it.
    const int next = sampler_.sample(const_cast<float*>(logits), history_.data(), static_cast<int>(history_.size()));
    history_.push_back(next);
    ++out->n_generated;
    if (fmt_.is_end_of_turn(next)) {
      pending_ = next;
      pending_eot_ = true;
      out->ended_by_eot = true;
      break;
    }
    const std::string piece = utf8.push(tok_.decode_step(prev, next));
    out->text += piece;
    prev = next;
    const bool keep_going = !on_text || piece.empty() || on_text(on_text_user, piece);
    if (!keep_going || out->n_generated >= n_predict) {
      pending_ = next;
      break;
    }
    if (n_past() >= ctx) {
      // `next` has no position left: it stays out of the cache, and the conversation is over.
      full_ = true;
      out->context_full = true;
      break;
    }
    MC_TRY(feed(next, &logits));
  }
  const std::string rest = utf8.finish();
  out->text += rest;
  if (on_text && !rest.empty()) on_text(on_text_user, rest);
  return Status::Ok();
}

}  // namespace mcullm
