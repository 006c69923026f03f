// Chat templates: turn a list of {role, content} messages into the text a chat model was trained
// on, and say which tokens end an assistant turn. Two templates are implemented by hand (no Jinja):
//   chatml  "<|im_start|>ROLE\nCONTENT<|im_end|>\n" per message, "<|im_start|>assistant\n" to
//           prompt a reply (Qwen2 and every ChatML model; a turn ends with <|im_end|>)
//   llama2  "<s>[INST] <<SYS>>\nSYSTEM\n<</SYS>>\n\nUSER [/INST] REPLY </s>" (Llama-2-chat; a turn
//           ends with EOS)
// A model's template is recognised from its GGUF tokenizer.chat_template (the Jinja source) by
// the markers it contains, or named explicitly (--chat-template).
// Host code.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "format/gguf.h"
#include "mcullm/status.h"
#include "tokenizer/tokenizer_host.h"

namespace mcullm {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" (chatml also takes "tool")
  std::string content;
};

enum class ChatTemplateKind { kChatML, kLlama2 };

class ChatTemplate {
 public:
  ChatTemplate() = default;
  explicit ChatTemplate(ChatTemplateKind kind) : kind_(kind) {}

  // "chatml" or "llama2" (also "qwen2", "llama-2").
  static Status by_name(std::string_view name, ChatTemplate* out);
  // From a Jinja template's text: <|im_start|> -> chatml; [INST] with <<SYS>> -> llama2. Other
  // templates give kUnsupported naming what to pass as --chat-template.
  static Status detect(std::string_view jinja, ChatTemplate* out);
  // The template a GGUF file declares (tokenizer.chat_template); kNotFound when it has none.
  static Status from_gguf(const GgufFile& file, ChatTemplate* out);
  // `override_name` when not empty, else from_gguf; what the CLI and the server call.
  static Status choose(const GgufFile* file, std::string_view override_name, ChatTemplate* out);
  static const char* known_names() { return "chatml, llama2"; }

  ChatTemplateKind kind() const { return kind_; }
  const char* name() const;

  // The whole conversation as the template's reference (Hugging Face's Jinja) renders it;
  // add_generation_prompt appends what opens the assistant's reply. Errors (kInvalidArgument) for
  // a role the template has no place for, and, for llama2, turns that do not alternate
  // user/assistant after an optional first system message (Llama-2's own template raises then too).
  Status render(const std::vector<ChatMessage>& messages, bool add_generation_prompt, std::string* out) const;

  // For a conversation kept in a KV cache: the text that follows what is already there, for the
  // new `messages` (system and/or user, ending with a user message) plus the generation prompt.
  // `first`: nothing is in the cache yet. Otherwise the cache ends with the assistant's reply
  // tokens, and `reply_closed` says whether the end-of-turn token that ended it was fed too (else
  // the reply was cut, e.g. by -n, and the template's turn closing is written out).
  // Concatenating these pieces with the replies gives render() of the whole conversation.
  Status continue_conversation(const std::vector<ChatMessage>& messages, bool first, bool reply_closed,
                               std::string* out) const;

  // Control markers the rendered text contains, which encode_chat() turns into their token ids.
  std::vector<std::string> special_texts() const;
  // The text of the token that ends an assistant turn ("<|im_end|>" / "</s>").
  const char* end_of_turn_text() const;

 private:
  ChatTemplateKind kind_ = ChatTemplateKind::kChatML;
};

// A chat template bound to a tokenizer: the ids of its markers in that vocabulary.
class ChatFormat {
 public:
  ChatFormat(const ChatTemplate& tmpl, const Tokenizer& tok);

  const ChatTemplate& chat_template() const { return tmpl_; }
  // Encodes rendered chat text: the template's markers become their token ids when the vocabulary
  // has them (else they stay text: a vocabulary without <|im_start|> spells it in pieces); the rest
  // is encoded as plain text. Like llama.cpp's chat path, a marker typed inside a message becomes
  // the control token too.
  Status encode(std::string_view text, std::vector<int>* ids) const;
  // Token ids that end an assistant turn: the template's end-of-turn token if the vocabulary has
  // it, the tokenizer's EOS / EOT, and BOS for llama2.c vocabularies (their models end a story
  // with BOS). Never empty when the tokenizer has an EOS.
  const std::vector<int>& end_of_turn_ids() const { return eot_ids_; }
  bool is_end_of_turn(int id) const;
  // The id of the template's end-of-turn token in this vocabulary, or -1.
  int end_of_turn_token() const { return eot_token_; }

 private:
  ChatTemplate tmpl_;
  const Tokenizer* tok_;
  std::vector<std::pair<std::string, int>> markers_;  // marker text -> id (only markers found)
  std::vector<int> eot_ids_;
  int eot_token_ = -1;
};

}  // namespace mcullm
