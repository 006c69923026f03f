#include "serve/api_json_host.h"

#include <chrono>
#include <cmath>
#include <optional>

namespace mcullm::serve {

namespace {

ApiError bad_request(const std::string& message) { return ApiError(400, "invalid_request_error", message); }

// Absent and null both mean "not given".
const json* field(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<double> opt_number(const json& j, const char* key, double lo, double hi) {
  const json* f = field(j, key);
  if (!f) return std::nullopt;
  if (!f->is_number()) throw bad_request(std::string("'") + key + "' must be a number, not " + f->type_name());
  const double v = f->get<double>();
  if (!(v >= lo && v <= hi)) throw bad_request(std::string("'") + key + "' = " + f->dump() + " is out of range [" + json(lo).dump() + ", " + json(hi).dump() + "]");
  return v;
}

std::optional<int64_t> opt_int(const json& j, const char* key, int64_t lo, int64_t hi) {
  const json* f = field(j, key);
  if (!f) return std::nullopt;
  int64_t v = 0;
  if (f->is_number_integer()) {
    if (f->is_number_unsigned() && f->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      throw bad_request(std::string("'") + key + "' = " + f->dump() + " is out of range");
    v = f->get<int64_t>();
  } else if (f->is_number_float() && std::floor(f->get<double>()) == f->get<double>() && std::fabs(f->get<double>()) < 9e15) {
    v = static_cast<int64_t>(f->get<double>());
  } else {
    throw bad_request(std::string("'") + key + "' must be an integer, not " + (f->is_number() ? f->dump() : std::string(f->type_name())));
  }
  if (v < lo || v > hi)
    throw bad_request(std::string("'") + key + "' = " + std::to_string(v) + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

std::optional<bool> opt_bool(const json& j, const char* key) {
  const json* f = field(j, key);
  if (!f) return std::nullopt;
  if (!f->is_boolean()) throw bad_request(std::string("'") + key + "' must be a boolean, not " + f->type_name());
  return f->get<bool>();
}

std::vector<std::string> parse_stop(const json& j) {
  const json* f = field(j, "stop");
  std::vector<std::string> out;
  if (!f) return out;
  if (f->is_string()) {
    out.push_back(f->get<std::string>());
  } else if (f->is_array()) {
    if (f->size() > 16) throw bad_request("'stop' holds more than 16 strings");
    for (const json& s : *f) {
      if (!s.is_string()) throw bad_request("'stop' must be a string or an array of strings");
      out.push_back(s.get<std::string>());
    }
  } else {
    throw bad_request(std::string("'stop' must be a string or an array of strings, not ") + f->type_name());
  }
  for (const auto& s : out)
    if (s.size() > 256) throw bad_request("a 'stop' string is longer than 256 bytes");
  return out;
}

std::vector<int> token_array(const json& a, const char* what, int vocab) {
  std::vector<int> ids;
  for (const json& t : a) {
    if (!t.is_number_integer()) throw bad_request(std::string(what) + " must hold token ids (integers)");
    const int64_t v = t.is_number_unsigned() && t.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX) ? -1 : t.get<int64_t>();
    if (v < 0 || v >= vocab)
      throw bad_request(std::string(what) + ": token id " + t.dump() + " is not in the vocabulary (0.." + std::to_string(vocab - 1) + ")");
    ids.push_back(static_cast<int>(v));
  }
  return ids;
}

std::vector<int> parse_prompt(const json& j, const Engine& engine) {
  const json* f = field(j, "prompt");
  if (!f) throw bad_request("'prompt' is required (a string or an array of token ids)");
  const json* p = f;
  if (f->is_array() && !f->empty() && (f->front().is_string() || f->front().is_array())) {
    if (f->size() != 1) throw bad_request("batches of prompts are not supported: send one prompt per request");
    p = &f->front();
  }
  std::vector<int> ids;
  if (p->is_string()) {
    if (Status st = engine.tokenizer().encode(p->get<std::string>(), true, false, &ids); !st.ok()) throw api_error_from(st);
  } else if (p->is_array()) {
    ids = token_array(*p, "'prompt'", engine.vocab_size());
    if (ids.empty()) throw bad_request("'prompt' is an empty array of token ids");
  } else {
    throw bad_request(std::string("'prompt' must be a string or an array of token ids, not ") + p->type_name());
  }
  if (static_cast<int>(ids.size()) > engine.ctx_len())
    throw bad_request("the prompt has " + std::to_string(ids.size()) + " tokens, the context holds " + std::to_string(engine.ctx_len()));
  return ids;
}

}  // namespace

json error_json(int status, const std::string& type, const std::string& message) {
  return json{{"error", {{"message", message}, {"type", type}, {"code", status}}}};
}

ApiError api_error_from(const Status& st) {
  switch (st.code()) {
    case Code::kInvalidArgument:
    case Code::kOutOfRange:
      return ApiError(400, "invalid_request_error", st.message());
    case Code::kUnsupported:
      return ApiError(503, "unavailable_error", st.message());
    case Code::kCorrupt:  // only the bridge's board link fails this way during a generation
      return ApiError(502, "board_error", st.message());
    case Code::kIo:  // the board link: the board fell silent
      return ApiError(504, "timeout_error", st.message());
    default:
      return ApiError(500, "server_error", st.message());
  }
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json parse_body(const std::string& body) {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    throw bad_request(std::string("the body is not valid JSON: ") + e.what());
  } catch (const json::exception& e) {  // a number beyond a double's range (1e309): out_of_range, not parse_error
    throw bad_request(std::string("the body holds a number out of range: ") + e.what());
  }
  if (!j.is_object()) throw bad_request(std::string("the body must be a JSON object, not ") + j.type_name());
  return j;
}

CompletionRequest parse_completion(const json& j, Dialect dialect, const Engine& engine) {
  CompletionRequest r;
  if (const json* m = field(j, "model")) {
    if (!m->is_string()) throw bad_request(std::string("'model' must be a string, not ") + m->type_name());
    if (m->get<std::string>() != engine.model_id())
      throw ApiError(404, "not_found_error", "model '" + m->get<std::string>() + "' does not exist; this server has '" + engine.model_id() + "'");
  }
  if (auto n = opt_int(j, "n", 1, 1 << 20); n && *n != 1) throw bad_request("'n' must be 1: one completion per request");
  if (auto b = opt_int(j, "best_of", 1, 1 << 20); b && *b != 1) throw bad_request("'best_of' must be 1");
  if (auto e = opt_bool(j, "echo"); e && *e) throw bad_request("'echo' is not supported");
  if (const json* lp = field(j, "logprobs"); lp && !(lp->is_boolean() && !lp->get<bool>()) && !(lp->is_number() && lp->get<double>() == 0))
    throw bad_request("'logprobs' is not supported");

  CompletionParams& p = r.params;
  p.prompt = parse_prompt(j, engine);
  if (dialect == Dialect::kOpenAI) {
    p.n_predict = 16;  // OpenAI's default
    if (auto v = opt_int(j, "max_tokens", 0, 1 << 24)) p.n_predict = static_cast<int>(*v);
  } else {
    p.n_predict = -1;  // llama-server's default: until the context is full or an end token
    if (auto v = opt_int(j, "n_predict", -1, 1 << 24)) p.n_predict = static_cast<int>(*v);
  }
  SamplerConfig& sc = p.sampler;
  if (auto v = opt_number(j, "temperature", 0, 100)) sc.temperature = static_cast<float>(*v);
  if (auto v = opt_int(j, "top_k", 0, 1 << 24)) sc.top_k = static_cast<int>(*v);
  if (auto v = opt_number(j, "top_p", 0, 1)) sc.top_p = static_cast<float>(*v);
  if (auto v = opt_number(j, "min_p", 0, 1)) sc.min_p = static_cast<float>(*v);
  if (auto v = opt_number(j, "repeat_penalty", 0, 100)) sc.repeat_penalty = static_cast<float>(*v);
  if (auto v = opt_int(j, "repeat_last_n", -1, 1 << 24)) sc.repeat_last_n = static_cast<int>(*v);
  const std::optional<int64_t> seed = opt_int(j, "seed", -1, INT64_MAX);
  if (seed && *seed == 0) throw bad_request("'seed' must be nonzero (-1 or no seed: a random one)");
  if (seed && *seed > 0) {
    sc.seed = static_cast<uint64_t>(*seed);
  } else {
    sc.seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) | 1u;
  }
  p.stop = parse_stop(j);
  if (auto v = opt_bool(j, "ignore_eos")) p.ignore_eos = *v;
  if (auto v = opt_bool(j, "stream")) r.stream = *v;
  if (auto v = opt_bool(j, "return_tokens")) r.return_tokens = *v;
  if (auto v = opt_bool(j, "timings_per_token")) r.timings_per_token = *v;
  return r;
}

namespace {

// A message's content: a string, null, or OpenAI's array of parts of which only "text" ones are taken.
std::string message_content(const json& c, size_t i) {
  const std::string where = "'messages[" + std::to_string(i) + "].content'";
  if (c.is_null()) return std::string();
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) throw bad_request(where + " must be a string or an array of parts, not " + c.type_name());
  std::string text;
  for (const json& part : c) {
    const json* type = part.is_object() ? field(part, "type") : nullptr;
    const json* t = part.is_object() ? field(part, "text") : nullptr;
    if (!type || !type->is_string() || type->get<std::string>() != "text" || !t || !t->is_string())
      throw bad_request(where + ": only parts of the form {\"type\": \"text\", \"text\": str} are supported");
    text += t->get<std::string>();
  }
  return text;
}

}  // namespace

CompletionRequest parse_chat(const json& j, const Engine& engine) {
  const ChatFormat* chat = engine.chat();
  if (!chat)
    throw ApiError(501, "not_supported_error",
                   "chat completions need a chat template: " + engine.chat_unavailable() + " (mcullm serve --chat-template NAME), or use /v1/completions");
  const json* m = field(j, "messages");
  if (!m || !m->is_array() || m->empty()) throw bad_request("'messages' (a non-empty array of {role, content}) is required");
  if (m->size() > 4096) throw bad_request("'messages' holds more than 4096 messages");
  std::vector<ChatMessage> messages;
  for (size_t i = 0; i < m->size(); ++i) {
    const json& x = (*m)[i];
    const json* role = x.is_object() ? field(x, "role") : nullptr;
    if (!role || !role->is_string()) throw bad_request("'messages[" + std::to_string(i) + "]' must be an object with a string 'role'");
    const json* content = field(x, "content");
    messages.push_back(ChatMessage{role->get<std::string>(), content ? message_content(*content, i) : std::string()});
  }
  std::string text;
  if (Status st = chat->chat_template().render(messages, true, &text); !st.ok()) throw api_error_from(st);
  std::vector<int> ids;
  if (Status st = chat->encode(text, &ids); !st.ok()) throw api_error_from(st);
  json body = j;
  body.erase("messages");
  body["prompt"] = ids;
  if (const json* mct = field(j, "max_completion_tokens"); mct && !field(j, "max_tokens")) body["max_tokens"] = *mct;
  if (!field(body, "max_tokens")) body["max_tokens"] = engine.ctx_len();  // the engine caps it at the context's end
  CompletionRequest r = parse_completion(body, Dialect::kOpenAI, engine);
  r.params.stop_tokens = chat->end_of_turn_ids();
  return r;
}

json timings_json(const CompletionResult& r) {
  const auto per_token = [](double ms, int n) { return n > 0 ? ms / n : 0.0; };
  const auto per_second = [](double ms, int n) { return ms > 0 ? 1000.0 * n / ms : 0.0; };
  return json{{"prompt_n", r.n_prompt},
              {"prompt_ms", r.prompt_ms},
              {"prompt_per_token_ms", per_token(r.prompt_ms, r.n_prompt)},
              {"prompt_per_second", per_second(r.prompt_ms, r.n_prompt)},
              {"predicted_n", r.n_predicted},
              {"predicted_ms", r.predicted_ms},
              {"predicted_per_token_ms", per_token(r.predicted_ms, r.n_predicted)},
              {"predicted_per_second", per_second(r.predicted_ms, r.n_predicted)}};
}

const char* finish_reason(const CompletionResult& r) { return r.stop_type == "limit" ? "length" : "stop"; }

}  // namespace mcullm::serve
