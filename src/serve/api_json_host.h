// JSON side of the HTTP API: request fields read with their types and ranges checked (unknown
// fields are ignored), OpenAI-shaped errors, and the response objects (OpenAI and llama-server).
#pragma once
#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

#include "serve/engine_host.h"

namespace mcullm::serve {

using json = nlohmann::json;

// Thrown by the parsers; the HTTP layer turns it into {"error": {"message", "type", "code"}}.
struct ApiError : std::runtime_error {
  ApiError(int status_, std::string type_, const std::string& message) : std::runtime_error(message), status(status_), type(std::move(type_)) {}
  int status;
  std::string type;  // invalid_request_error, authentication_error, not_found_error, unavailable_error, ...
};

// {"error": {"message", "type", "code"}} with code = the HTTP status (as llama-server does).
json error_json(int status, const std::string& type, const std::string& message);
// The HTTP status for a failed engine Status (400 for bad input, 503 when shutting down, else 500).
ApiError api_error_from(const Status& st);

// Never throws on invalid UTF-8 (bytes a model generated): they become U+FFFD in the JSON text.
std::string dump(const json& j);

// The body must be a JSON object.
json parse_body(const std::string& body);

enum class Dialect { kOpenAI, kLlamaServer, kOpenAIChat };

struct CompletionRequest {
  CompletionParams params;
  bool stream = false;
  bool return_tokens = false;       // /completion: "return_tokens"
  bool timings_per_token = false;   // /completion: "timings_per_token"
};

// /v1/completions (OpenAI: prompt, max_tokens = 16 by default, ...) or /completion (llama-server:
// prompt, n_predict = -1 by default, ...). Checks "model" against the engine's model id (404).
CompletionRequest parse_completion(const json& body, Dialect dialect, const Engine& engine);

// /v1/chat/completions: "messages" rendered with the engine's chat template and encoded (501 when
// the model has none); generation stops at the template's end-of-turn tokens; max_tokens (or
// max_completion_tokens) defaults to the rest of the context. Other fields as /v1/completions.
CompletionRequest parse_chat(const json& body, const Engine& engine);

json timings_json(const CompletionResult& r);
const char* finish_reason(const CompletionResult& r);  // "stop" or "length"

}  // namespace mcullm::serve
