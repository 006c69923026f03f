#include "tokenizer/chat_template_host.h"

#include <algorithm>

namespace mcullm {

namespace {

constexpr const char* kImStart = "<|im_start|>";
constexpr const char* kImEnd = "<|im_end|>";
constexpr const char* kEndOfText = "<|endoftext|>";
constexpr const char* kBos = "<s>";
constexpr const char* kEos = "</s>";

bool contains(std::string_view s, std::string_view needle) { return s.find(needle) != std::string_view::npos; }

// Python's str.strip() as the Llama-2 template applies it (ASCII whitespace; Unicode spaces kept).
std::string_view strip(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\v\f";
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

Status bad_role(const ChatMessage& m, const char* tmpl) {
  return Status::Error(Code::kInvalidArgument, "chat template %s has no place for a message with role '%.40s'", tmpl,
                       m.role.c_str());
}

Status render_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt, std::string* out) {
  for (const ChatMessage& m : messages) {
    if (m.role != "system" && m.role != "user" && m.role != "assistant" && m.role != "tool") return bad_role(m, "chatml");
    *out += kImStart;
    *out += m.role;
    *out += '\n';
    *out += m.content;
    *out += kImEnd;
    *out += '\n';
  }
  if (add_generation_prompt) *out += std::string(kImStart) + "assistant\n";
  return Status::Ok();
}

// Llama-2-chat: the system message folds into the first user turn; `first_index` is the position of
// messages[0] among the non-system turns of the whole conversation (for the alternation check).
Status render_llama2(const std::vector<ChatMessage>& messages, size_t first_index, std::string* out) {
  size_t begin = 0;
  std::string system;
  bool has_system = false;
  if (!messages.empty() && messages[0].role == "system") {
    if (first_index != 0)
      return Status::Error(Code::kInvalidArgument, "chat template llama2 takes a system message only at the start");
    system = messages[0].content;
    has_system = true;
    begin = 1;
  }
  for (size_t i = begin; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const size_t turn = first_index + (i - begin);
    if (m.role != "user" && m.role != "assistant") {
      if (m.role == "system")
        return Status::Error(Code::kInvalidArgument, "chat template llama2 takes a system message only at the start");
      return bad_role(m, "llama2");
    }
    if ((m.role == "user") != (turn % 2 == 0))
      return Status::Error(Code::kInvalidArgument, "chat template llama2: turns must alternate user/assistant/user/...");
    if (m.role == "user") {
      const std::string content = turn == 0 && has_system ? "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + m.content : m.content;
      *out += kBos;
      *out += "[INST] ";
      *out += strip(content);
      *out += " [/INST]";
    } else {
      *out += ' ';
      *out += strip(m.content);
      *out += ' ';
      *out += kEos;
    }
  }
  return Status::Ok();
}

}  // namespace

const char* ChatTemplate::name() const { return kind_ == ChatTemplateKind::kChatML ? "chatml" : "llama2"; }

Status ChatTemplate::by_name(std::string_view name, ChatTemplate* out) {
  if (name == "chatml" || name == "qwen2") {
    *out = ChatTemplate(ChatTemplateKind::kChatML);
  } else if (name == "llama2" || name == "llama-2") {
    *out = ChatTemplate(ChatTemplateKind::kLlama2);
  } else {
    return Status::Error(Code::kInvalidArgument, "unknown chat template '%.40s' (known: %s)",
                         std::string(name.substr(0, 40)).c_str(), known_names());
  }
  return Status::Ok();
}

Status ChatTemplate::detect(std::string_view jinja, ChatTemplate* out) {
  // A bare name is accepted too (llama.cpp does the same for its --chat-template).
  if (by_name(jinja, out).ok()) return Status::Ok();
  if (contains(jinja, kImStart)) {
    *out = ChatTemplate(ChatTemplateKind::kChatML);
    return Status::Ok();
  }
  if (contains(jinja, "[INST]") && contains(jinja, "<<SYS>>")) {
    *out = ChatTemplate(ChatTemplateKind::kLlama2);
    return Status::Ok();
  }
  return Status::Error(Code::kUnsupported,
                       "the model's chat template is not one we implement (known: %s); pass --chat-template NAME",
                       known_names());
}

Status ChatTemplate::from_gguf(const GgufFile& file, ChatTemplate* out) {
  GgufStr s{"", 0};
  const Status st = file.get_string("tokenizer.chat_template", &s);
  if (st.code() == Code::kNotFound)
    return Status::Error(Code::kNotFound, "the model has no chat template (tokenizer.chat_template); pass --chat-template %s",
                         "chatml|llama2");
  MC_TRY(st);
  return detect(std::string_view(s.data, s.size), out);
}

Status ChatTemplate::choose(const GgufFile* file, std::string_view override_name, ChatTemplate* out) {
  if (!override_name.empty()) return by_name(override_name, out);
  if (!file)
    return Status::Error(Code::kNotFound, "the model file carries no chat template; pass --chat-template %s", "chatml|llama2");
  return from_gguf(*file, out);
}

Status ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt, std::string* out) const {
  out->clear();
  if (kind_ == ChatTemplateKind::kChatML) return render_chatml(messages, add_generation_prompt, out);
  // Llama-2's template has no generation prompt: " [/INST]" already ends the prompt.
  return render_llama2(messages, 0, out);
}

Status ChatTemplate::continue_conversation(const std::vector<ChatMessage>& messages, bool first, bool reply_closed,
                                           std::string* out) const {
  out->clear();
  if (messages.empty() || messages.back().role != "user")
    return Status::Error(Code::kInvalidArgument, "a new chat turn must end with a user message");
  std::string body;
  if (kind_ == ChatTemplateKind::kChatML) {
    if (!first) *out = reply_closed ? "\n" : std::string(kImEnd) + "\n";
    MC_TRY(render_chatml(messages, true, &body));
  } else {
    if (!first && !reply_closed) *out = std::string(" ") + kEos;
    // Turn 0 for the first call; after a reply the next user message is at an even turn again.
    MC_TRY(render_llama2(messages, first ? 0 : 2, &body));
  }
  *out += body;
  return Status::Ok();
}

std::vector<std::string> ChatTemplate::special_texts() const {
  if (kind_ == ChatTemplateKind::kChatML) return {kImStart, kImEnd, kEndOfText};
  return {kBos, kEos};
}

const char* ChatTemplate::end_of_turn_text() const { return kind_ == ChatTemplateKind::kChatML ? kImEnd : kEos; }

ChatFormat::ChatFormat(const ChatTemplate& tmpl, const Tokenizer& tok) : tmpl_(tmpl), tok_(&tok) {
  // <s> and </s> are the tokenizer's BOS / EOS whatever their stored text (llama2.c's tokenizer.bin
  // stores them as "\n<s>\n"); other markers are looked up by their text among the control tokens.
  const std::vector<std::string> texts = tmpl.special_texts();
  const int n = tok.vocab_size();
  for (const std::string& text : texts) {
    int id = -1;
    if (text == kBos) id = tok.bos_id();
    else if (text == kEos) id = tok.eos_id();
    for (int i = 0; id < 0 && i < n; ++i)
      if (tok.is_control(i) && tok.token_text(i) == text) id = i;
    if (id >= 0) markers_.emplace_back(text, id);
    if (text == tmpl.end_of_turn_text()) eot_token_ = id;
  }
  // Longest first, so that a marker that is a prefix of another cannot shadow it.
  std::sort(markers_.begin(), markers_.end(), [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  for (int id : {eot_token_, tok.eot_id(), tok.eos_id(), std::string(tok.kind()) == "llama2c-spm" ? tok.bos_id() : -1})
    if (id >= 0 && std::find(eot_ids_.begin(), eot_ids_.end(), id) == eot_ids_.end()) eot_ids_.push_back(id);
}

bool ChatFormat::is_end_of_turn(int id) const { return std::find(eot_ids_.begin(), eot_ids_.end(), id) != eot_ids_.end(); }

Status ChatFormat::encode(std::string_view text, std::vector<int>* ids) const {
  ids->clear();
  std::vector<int> piece;
  EncodeOptions plain;
  size_t pos = 0;
  while (pos <= text.size()) {
    // The nearest marker from pos.
    size_t best = std::string_view::npos;
    const std::pair<std::string, int>* marker = nullptr;
    for (const auto& m : markers_) {
      const size_t at = text.find(m.first, pos);
      if (at < best) {
        best = at;
        marker = &m;
      }
    }
    const size_t end = marker ? best : text.size();
    if (end > pos) {
      MC_TRY(tok_->encode(text.substr(pos, end - pos), plain, &piece));
      ids->insert(ids->end(), piece.begin(), piece.end());
    }
    if (!marker) break;
    ids->push_back(marker->second);
    pos = best + marker->first.size();
  }
  return Status::Ok();
}

}  // namespace mcullm
