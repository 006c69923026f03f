#include "serve/http_server_host.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <ctime>
#include <map>
#include <thread>

#include "serve/api_json_host.h"
#include "serve/http_connections_host.h"
#include "serve/web_assets_host.h"

namespace mcullm::serve {

namespace {

void send_error(httplib::Response& res, int status, const std::string& type, const std::string& message) {
  res.status = status;
  if (status == 503) res.set_header("Retry-After", "1");
  res.set_content(dump(error_json(status, type, message)), "application/json");
}

bool key_matches(const std::string& given, const std::string& key) {
  // Compares every byte whatever the first difference (no early exit on a prefix).
  unsigned diff = given.size() == key.size() ? 0u : 1u;
  for (size_t i = 0; i < given.size(); ++i) diff |= static_cast<unsigned>(given[i] ^ key[i % (key.empty() ? 1 : key.size())]);
  return diff == 0 && !key.empty();
}

std::string sse(const json& j) { return "data: " + dump(j) + "\n\n"; }

// The reply to a connection over --max-connections, written by the accept loop as it closes it.
std::string refusal(int max_connections) {
  const std::string body = dump(error_json(503, "unavailable_error", "the server has " + std::to_string(max_connections) +
                                                                          " connections open (--max-connections); retry later"));
  return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
         "Access-Control-Allow-Origin: *\r\nConnection: close\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

}  // namespace

struct HttpServer::Impl {
  Engine& engine;
  HttpOptions opt;
  ConnectionCounters connections;
  GuardedServer srv;
  std::map<std::string, std::string> allowed;  // known path -> its methods (the Allow header of a 405)
  std::thread thread;
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> next_id{1};
  std::atomic<uint64_t> http_requests{0}, http_errors{0};
  int bound_port = -1;
  int listen_fd = -1;

  Impl(Engine& e, const HttpOptions& o)
      : engine(e), opt(o), srv(connections, o.max_connections, o.header_timeout_s * 1000, refusal(o.max_connections)) {
    setup();
  }

  // Runs a handler, turning ApiError and any other exception into an OpenAI-shaped error.
  template <typename F>
  void guard(httplib::Response& res, F f) {
    ++http_requests;
    try {
      f();
    } catch (const ApiError& e) {
      send_error(res, e.status, e.type, e.what());
    } catch (const std::exception& e) {
      send_error(res, 500, "server_error", e.what());
    }
    if (res.status >= 400) ++http_errors;
  }

  template <typename F>
  void get(const std::string& path, F f) {
    allowed[path] = "GET, HEAD, OPTIONS";
    srv.Get(path, [this, f](const httplib::Request& req, httplib::Response& res) { guard(res, [&] { f(req, res); }); });
  }

  // f(req, res, body): the body is read here, so that one limit holds whatever its Content-Type
  // (httplib's own reading caps form-encoded bodies at 8 KB).
  template <typename F>
  void post(const std::string& path, F f) {
    allowed[path] = "POST, OPTIONS";
    srv.Post(path, [this, f](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& content) {
      guard(res, [&] { f(req, res, read_body(req, res, content)); });
    });
  }

  std::string read_body(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& content) {
    if (req.is_multipart_form_data()) {
      GuardedServer::close_after_reply(res);  // its body was not read
      throw ApiError(415, "invalid_request_error", "the body must be a JSON object, not multipart/form-data");
    }
    std::string body;
    bool too_large = false;
    const bool ok = content([&](const char* data, size_t n) {
      if (body.size() + n > opt.max_body_bytes) {  // a chunked body has no length to check first
        too_large = true;
        return false;
      }
      body.append(data, n);
      return true;
    });
    if (ok) return body;
    GuardedServer::close_after_reply(res);  // the rest of the body, if any, is still on the way
    if (too_large || res.status == 413) throw too_large_error();
    if (GuardedServer::request_timed_out()) throw timeout_error();
    throw ApiError(400, "invalid_request_error", "the request body was cut short");
  }

  ApiError too_large_error() const {
    return ApiError(413, "invalid_request_error", "the request body is larger than " + std::to_string(opt.max_body_bytes) + " bytes (--max-body)");
  }
  ApiError timeout_error() const {
    return ApiError(408, "timeout_error", "the request did not arrive within " + std::to_string(opt.header_timeout_s) + " s (--header-timeout)");
  }

  void setup() {
    srv.set_read_timeout(opt.read_timeout_s, 0);
    srv.set_write_timeout(opt.write_timeout_s, 0);
    srv.set_keep_alive_timeout(5);
    srv.set_keep_alive_max_count(1000);
    // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, which would let a second server bind
    // the same port silently instead of failing with "address in use".
    srv.set_socket_options([this](socket_t sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
      listen_fd = sock;
    });
    srv.set_payload_max_length(opt.max_body_bytes);

    // Any origin may call the API (the page also works opened as a file, or from another port);
    // the API key, when set, is what guards it.
    srv.set_default_headers({{"Access-Control-Allow-Origin", "*"}});
    srv.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      // The page and the CORS preflight carry no key; the page asks the user for it.
      const bool page = req.method == "GET" && (find_web_asset(req.path) || (!opt.vendor_dir.empty() && req.path.rfind("/vendor/", 0) == 0));
      const bool open = req.path == "/health" || req.method == "OPTIONS" || page;
      if (opt.api_key.empty() || open) return httplib::Server::HandlerResponse::Unhandled;
      std::string given = req.get_header_value("X-Api-Key");
      const std::string auth = req.get_header_value("Authorization");
      if (auth.rfind("Bearer ", 0) == 0) given = auth.substr(7);
      if (key_matches(given, opt.api_key)) return httplib::Server::HandlerResponse::Unhandled;
      ++http_requests;
      ++http_errors;
      GuardedServer::close_after_reply(res);  // a body, if any, was not read
      send_error(res, 401, "authentication_error", given.empty() ? "an API key is required (Authorization: Bearer KEY)" : "invalid API key");
      return httplib::Server::HandlerResponse::Handled;
    });
    srv.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
      const auto send = [&res](const ApiError& e) { send_error(res, e.status, e.type, e.what()); };
      if (GuardedServer::request_timed_out()) {  // the headers did not arrive in time
        send(timeout_error());
        GuardedServer::close_after_reply(res);
      } else if (const auto it = allowed.find(req.path); res.status == 404 && it != allowed.end()) {
        send_error(res, 405, "invalid_request_error", req.method + " is not allowed on " + req.path + " (allowed: " + it->second + ")");
        res.set_header("Allow", it->second);
      } else if (res.status == 404) {
        send_error(res, 404, "not_found_error", "no endpoint " + req.method + " " + req.path);
      } else if (res.status == 413) {
        send(too_large_error());
      } else {
        send_error(res, res.status, res.status < 500 ? "invalid_request_error" : "server_error", "HTTP status " + std::to_string(res.status));
      }
      return httplib::Server::HandlerResponse::Handled;
    }));
    srv.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
      send_error(res, 500, "server_error", "internal error");
    });

    srv.Options(".*", [](const httplib::Request&, httplib::Response& res) {
      res.status = 204;
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      res.set_header("Access-Control-Allow-Headers", "Content-Type, Authorization, X-Api-Key");
      res.set_header("Access-Control-Max-Age", "600");
    });
    const auto page = [](const httplib::Request& req, httplib::Response& res) { web_asset(req, res); };
    get("/", page);
    for (size_t i = 0; i < kWebAssetCount; ++i) get(kWebAssets[i].path, page);
    get("/health", [this](const httplib::Request&, httplib::Response& res) {
      const EngineMetrics m = engine.metrics();
      res.set_content(dump(json{{"status", "ok"}, {"slots_idle", m.slots - m.busy_slots}, {"slots_processing", m.busy_slots}}),
                      "application/json");
    });
    get("/v1/models", [this](const httplib::Request&, httplib::Response& res) { models(res); });
    get("/models", [this](const httplib::Request&, httplib::Response& res) { models(res); });
    get("/metrics", [this](const httplib::Request&, httplib::Response& res) { metrics(res); });
    const auto completions = [this](Dialect d) {
      return [this, d](const httplib::Request&, httplib::Response& res, const std::string& body) { completion(body, res, d); };
    };
    post("/v1/completions", completions(Dialect::kOpenAI));
    post("/completion", completions(Dialect::kLlamaServer));
    post("/completions", completions(Dialect::kLlamaServer));
    post("/v1/chat/completions", completions(Dialect::kOpenAIChat));
    post("/chat/completions", completions(Dialect::kOpenAIChat));
    post("/tokenize", [this](const httplib::Request&, httplib::Response& res, const std::string& body) { tokenize(body, res); });
    post("/detokenize", [this](const httplib::Request&, httplib::Response& res, const std::string& body) { detokenize(body, res); });
  }

  static void web_asset(const httplib::Request& req, httplib::Response& res) {
    const WebAsset* a = find_web_asset(req.path);
    if (!a) throw ApiError(404, "not_found_error", "no page " + req.path);
    res.set_header("Cache-Control", "no-cache");
    res.set_content(reinterpret_cast<const char*>(a->data), a->size, a->mime);
  }

  void models(httplib::Response& res) {
    const LlamaConfig& c = engine.model().model.cfg;
    json m{{"id", engine.model_id()},
           {"object", "model"},
           {"created", 0},
           {"owned_by", "mcullm"},
           {"meta", {{"n_vocab", c.vocab_size}, {"n_ctx", engine.ctx_len()}, {"n_ctx_train", c.seq_len}, {"n_embd", c.dim},
                     {"n_layer", c.n_layers}, {"format", engine.model().format},
                     {"chat_template", engine.chat() ? json(engine.chat()->chat_template().name()) : json(nullptr)}}}};
    res.set_content(dump(json{{"object", "list"}, {"data", json::array({m})}}), "application/json");
  }

  void metrics(httplib::Response& res) {
    const EngineMetrics m = engine.metrics();
    std::string s;
    const auto add = [&s](const char* name, const char* type, const char* help, double v) {
      s += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " + json(v).dump() + "\n";
    };
    add("mcullm_http_requests_total", "counter", "HTTP requests handled (any endpoint)", static_cast<double>(http_requests.load()));
    add("mcullm_http_errors_total", "counter", "HTTP responses with a status of 400 or more", static_cast<double>(http_errors.load()));
    add("mcullm_http_connections", "gauge", "Open client connections", connections.open.load());
    add("mcullm_http_connections_refused_total", "counter", "Connections refused (503) because --max-connections were open",
        static_cast<double>(connections.refused.load()));
    add("mcullm_http_requests_timed_out_total", "counter", "Requests that did not arrive within --header-timeout (408, or an idle connection closed)",
        static_cast<double>(connections.timed_out.load()));
    add("mcullm_requests_total", "counter", "Generation requests received", static_cast<double>(m.requests));
    add("mcullm_requests_rejected_total", "counter", "Generation requests refused because the slots and the queue were full (503)", static_cast<double>(m.rejected));
    add("mcullm_requests_completed_total", "counter", "Generations that ran to their end", static_cast<double>(m.completed));
    add("mcullm_requests_cancelled_total", "counter", "Generations stopped because the client went away", static_cast<double>(m.cancelled));
    add("mcullm_requests_failed_total", "counter", "Generations that failed", static_cast<double>(m.failed));
    add("mcullm_prompt_tokens_total", "counter", "Prompt tokens evaluated", static_cast<double>(m.prompt_tokens));
    add("mcullm_tokens_predicted_total", "counter", "Tokens generated", static_cast<double>(m.predicted_tokens));
    add("mcullm_prompt_seconds_total", "counter", "Time spent on prompts", m.prompt_ms / 1000.0);
    add("mcullm_tokens_predicted_seconds_total", "counter", "Time spent generating", m.predicted_ms / 1000.0);
    add("mcullm_slots", "gauge", "Generation slots (--parallel)", m.slots);
    add("mcullm_slots_busy", "gauge", "Slots generating now", m.busy_slots);
    add("mcullm_queue_depth", "gauge", "Admitted requests waiting for a slot", m.queued);
    add("mcullm_queue_capacity", "gauge", "Requests that may wait for a slot (--queue)", m.queue_capacity);
    res.set_content(s, "text/plain; version=0.0.4");
  }

  void tokenize(const std::string& body, httplib::Response& res) {
    const json j = parse_body(body);
    const auto it = j.find("content");
    if (it == j.end() || !it->is_string()) throw ApiError(400, "invalid_request_error", "'content' (a string) is required");
    bool add_special = false, with_pieces = false;
    if (auto a = j.find("add_special"); a != j.end() && !a->is_null()) {
      if (!a->is_boolean()) throw ApiError(400, "invalid_request_error", "'add_special' must be a boolean");
      add_special = a->get<bool>();
    }
    if (auto w = j.find("with_pieces"); w != j.end() && !w->is_null()) {
      if (!w->is_boolean()) throw ApiError(400, "invalid_request_error", "'with_pieces' must be a boolean");
      with_pieces = w->get<bool>();
    }
    std::vector<int> ids;
    if (Status st = engine.tokenizer().encode(it->get<std::string>(), add_special, false, &ids); !st.ok()) throw api_error_from(st);
    json tokens = json::array();
    int prev = -1;
    for (const int id : ids) {
      if (with_pieces) {
        tokens.push_back(json{{"id", id}, {"piece", engine.tokenizer().decode_step(prev, id)}});
      } else {
        tokens.push_back(id);
      }
      prev = id;
    }
    res.set_content(dump(json{{"tokens", tokens}}), "application/json");
  }

  void detokenize(const std::string& body, httplib::Response& res) {
    const json j = parse_body(body);
    const auto it = j.find("tokens");
    if (it == j.end() || !it->is_array()) throw ApiError(400, "invalid_request_error", "'tokens' (an array of token ids) is required");
    std::vector<int> ids;
    for (const json& t : *it) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= engine.vocab_size())
        throw ApiError(400, "invalid_request_error", "'tokens': " + t.dump() + " is not a token id in 0.." + std::to_string(engine.vocab_size() - 1));
      ids.push_back(t.get<int>());
    }
    res.set_content(dump(json{{"content", engine.tokenizer().decode(ids)}}), "application/json");
  }

  json final_object(Dialect d, const std::string& id, std::time_t created, const CompletionResult& r, const CompletionRequest& cr,
                    bool stream) {
    const json usage{{"prompt_tokens", r.n_prompt}, {"completion_tokens", r.n_predicted}, {"total_tokens", r.n_prompt + r.n_predicted}};
    if (d == Dialect::kOpenAI) {
      json choice{{"text", stream ? std::string() : r.text}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish_reason(r)}};
      return json{{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", engine.model_id()},
                  {"choices", json::array({choice})}, {"usage", usage}, {"timings", timings_json(r)}};
    }
    if (d == Dialect::kOpenAIChat) {
      json choice{{"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish_reason(r)}};
      if (stream) {
        choice["delta"] = json::object();
      } else {
        choice["message"] = json{{"role", "assistant"}, {"content", r.text}};
      }
      return json{{"id", id}, {"object", stream ? "chat.completion.chunk" : "chat.completion"}, {"created", created},
                  {"model", engine.model_id()}, {"choices", json::array({choice})}, {"usage", usage}, {"timings", timings_json(r)}};
    }
    json o{{"content", stream ? std::string() : r.text},
           {"id_slot", 0},
           {"stop", true},
           {"model", engine.model_id()},
           {"tokens_predicted", r.n_predicted},
           {"tokens_evaluated", r.n_prompt},
           {"stop_type", r.stop_type},
           {"stopping_word", r.stopping_word},
           {"truncated", false},
           {"generation_settings", {{"n_predict", cr.params.n_predict}, {"temperature", cr.params.sampler.temperature},
                                    {"top_k", cr.params.sampler.top_k}, {"top_p", cr.params.sampler.top_p},
                                    {"min_p", cr.params.sampler.min_p}, {"repeat_penalty", cr.params.sampler.repeat_penalty},
                                    {"repeat_last_n", cr.params.sampler.repeat_last_n}, {"seed", cr.params.sampler.seed},
                                    {"n_ctx", engine.ctx_len()}, {"stop", cr.params.stop}, {"ignore_eos", cr.params.ignore_eos}}},
           {"timings", timings_json(r)}};
    if (cr.return_tokens || !stream) o["tokens"] = r.tokens;
    return o;
  }

  void completion(const std::string& text, httplib::Response& res, Dialect d) {
    const json body = parse_body(text);
    auto cr = std::make_shared<CompletionRequest>(d == Dialect::kOpenAIChat ? parse_chat(body, engine) : parse_completion(body, d, engine));
    auto adm = std::make_shared<std::unique_ptr<Admission>>(engine.admit());
    if (!*adm)
      throw ApiError(503, "unavailable_error", "the server is busy: all " + std::to_string(engine.options().parallel) + " slots and " +
                                                   std::to_string(engine.options().queue) + " queue places are taken; retry later");
    const std::string id = (d == Dialect::kOpenAI ? "cmpl-" : d == Dialect::kOpenAIChat ? "chatcmpl-" : "") + std::to_string(next_id++);
    const std::time_t created = std::time(nullptr);

    if (!cr->stream) {
      CompletionResult r;
      const Engine::TokenFn keep_going = [this](const TokenEvent&) { return !stopping.load(); };
      if (Status st = engine.complete(**adm, cr->params, nullptr, keep_going, &r); !st.ok()) throw api_error_from(st);
      res.set_content(dump(final_object(d, id, created, r, *cr, false)), "application/json");
      return;
    }

    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider("text/event-stream", [this, adm, cr, d, id, created](size_t, httplib::DataSink& sink) {
      if (!*adm) return false;  // called again after the end: nothing more to send
      bool first_chunk = true;
      const Engine::TokenFn on_token = [&](const TokenEvent& ev) {
        if (stopping.load()) return false;
        if (d != Dialect::kLlamaServer && ev.text.empty()) return sink.is_writable();
        json chunk;
        if (d == Dialect::kOpenAIChat) {
          json delta{{"content", ev.text}};
          if (first_chunk) delta["role"] = "assistant";  // OpenAI names the role in the first delta
          first_chunk = false;
          chunk = json{{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", engine.model_id()},
                       {"choices", json::array({json{{"index", 0}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", nullptr}}})}};
        } else if (d == Dialect::kOpenAI) {
          chunk = json{{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", engine.model_id()},
                       {"choices", json::array({json{{"text", ev.text}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", nullptr}}})}};
        } else {
          chunk = json{{"content", ev.text}, {"stop", false}, {"id_slot", 0}};
          if (ev.id >= 0) {
            chunk["tokens"] = json::array({ev.id});
            chunk["token_us"] = ev.us;
          } else {
            chunk["tokens"] = json::array();
          }
        }
        const std::string s = sse(chunk);
        return sink.write(s.data(), s.size());
      };
      CompletionResult r;
      const Status st = engine.complete(**adm, cr->params, nullptr, on_token, &r);
      adm->reset();  // the place is free before the last bytes go out
      std::string tail;
      if (!st.ok()) {
        const ApiError e = api_error_from(st);
        tail = sse(error_json(e.status, e.type, e.what()));
      } else if (r.stop_type == "cancelled") {
        return false;  // the client is gone (or the server stops): drop the connection
      } else {
        tail = sse(final_object(d, id, created, r, *cr, true));
      }
      if (d != Dialect::kLlamaServer) tail += "data: [DONE]\n\n";
      if (!sink.write(tail.data(), tail.size())) return false;
      sink.done();
      return true;
    });
  }
};

HttpServer::HttpServer(Engine& engine, const HttpOptions& options) : impl_(std::make_unique<Impl>(engine, options)) {}

HttpServer::~HttpServer() { stop(); }

Status HttpServer::bind() {
  Impl& s = *impl_;
  if (s.opt.port < 0 || s.opt.port > 65535) return Status::Error(Code::kInvalidArgument, "--port %d is not in 0..65535", s.opt.port);
  const int admitted = s.engine.options().parallel + s.engine.options().queue;
  if (s.opt.max_connections <= admitted)
    return Status::Error(Code::kInvalidArgument,
                         "--max-connections %d must be more than --parallel + --queue (%d): every admitted request holds a connection",
                         s.opt.max_connections, admitted);
  if (s.opt.header_timeout_s < 1) return Status::Error(Code::kInvalidArgument, "--header-timeout %d must be at least 1 s", s.opt.header_timeout_s);
  // httplib serves the directory's files (refusing paths with "..") before any handler.
  if (!s.opt.vendor_dir.empty() && !s.srv.set_mount_point("/vendor", s.opt.vendor_dir))
    return Status::Error(Code::kInvalidArgument, "--vendor-dir %s is not a directory", s.opt.vendor_dir.c_str());
  if (s.opt.port == 0) {
    s.bound_port = s.srv.bind_to_any_port(s.opt.host);
  } else {
    s.bound_port = s.srv.bind_to_port(s.opt.host, s.opt.port) ? s.opt.port : -1;
  }
  if (s.bound_port <= 0)
    return Status::Error(Code::kIo, "cannot listen on %s port %d (address in use, or not an address of this machine?)", s.opt.host.c_str(), s.opt.port);
  // Debian's library listens with a backlog of 5: a burst of connections would see dropped SYNs
  // and a one-second retransmit. Listening again on the bound socket raises the backlog.
  if (s.listen_fd >= 0) ::listen(s.listen_fd, 256);
  return Status::Ok();
}

int HttpServer::port() const { return impl_->bound_port; }

Status HttpServer::run() {
  if (impl_->bound_port <= 0) return Status::Error(Code::kInternal, "HttpServer::run() before bind()");
  if (!impl_->srv.listen_after_bind() && !impl_->stopping.load()) return Status::Error(Code::kIo, "the HTTP server stopped with an error");
  return Status::Ok();
}

Status HttpServer::start() {
  MC_TRY(bind());
  impl_->thread = std::thread([this] { impl_->srv.listen_after_bind(); });
  // Wait (bounded) until the accept loop runs, so that stop() right after start() cannot miss it.
  for (int i = 0; i < 2000 && !impl_->srv.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return Status::Ok();
}

void HttpServer::stop() {
  if (!impl_) return;
  impl_->stopping.store(true);
  impl_->engine.shutdown();
  impl_->srv.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace mcullm::serve
