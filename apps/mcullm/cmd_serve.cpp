// `mcullm serve`: an OpenAI / llama-server compatible HTTP server, or (--serial) the board's line
// protocol on a serial device or pseudo-terminal. docs/protocol.md describes both.
// The HTTP side lives in the executable mcullm-serve (built from this file with MCULLM_SERVE_HTTP);
// mcullm itself execs it for HTTP (apps/mcullm/CMakeLists.txt says why).
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "serve/board_link_host.h"
#include "serve/engine_host.h"
#include "serve/http_server_host.h"
#include "serve/serial_server_host.h"
#include "session.h"

namespace mcullm::cli {

namespace {

struct ServeOptions {
  ModelOptions m;  // -m, -z, -c, -t, --kernels: the engine's
  serve::EngineOptions engine;
  serve::HttpOptions http;
  std::string serial, bridge;
  int baud = 115200;
  int bridge_timeout_s = 30;
};

// SIGINT / SIGTERM stop the server cleanly: the signals are blocked in every thread and one thread
// waits for them (no work in a signal handler).
class SignalWaiter {
 public:
  SignalWaiter() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGUSR1);  // our own wake-up when the server ends by itself
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    signal(SIGPIPE, SIG_IGN);
  }
  template <typename F>
  void start(F on_signal) {
    thread_ = std::thread([this, on_signal] {
      int sig = 0;
      sigwait(&set_, &sig);
      if (sig != SIGUSR1) {
        std::fprintf(stderr, "mcullm: %s: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
        on_signal();
      }
    });
  }
  // Wakes the waiting thread and joins it. Call it before what on_signal touches goes away: a
  // SIGTERM's stop() may still be running when the server it stopped returns.
  void finish() {
    if (thread_.joinable()) {
      pthread_kill(thread_.native_handle(), SIGUSR1);
      thread_.join();
    }
  }
  ~SignalWaiter() { finish(); }

 private:
  sigset_t set_;
  std::thread thread_;
};

#if !MCULLM_SERVE_HTTP
// Replaces this process with mcullm-serve from mcullm's own directory, same arguments (from
// /proc/self/cmdline) and same pid, so that users, scripts and signals see one `mcullm serve`.
// Returns only on failure.
int exec_http_server() {
  std::string self(4096, '\0');
  const ssize_t n = readlink("/proc/self/exe", self.data(), self.size() - 1);
  if (n <= 0) return report(Status::Error(Code::kNotFound, "serve: cannot find this executable (/proc/self/exe)"));
  self.resize(static_cast<size_t>(n));
  const std::string exe = self.substr(0, self.rfind('/') + 1) + "mcullm-serve";
  std::string cmdline;
  if (FILE* f = std::fopen("/proc/self/cmdline", "rb")) {
    char buf[4096];
    for (size_t got; (got = std::fread(buf, 1, sizeof buf, f)) > 0;) cmdline.append(buf, got);
    std::fclose(f);
  }
  std::vector<char*> argv;
  for (size_t i = 0; i < cmdline.size(); i = cmdline.find('\0', i) + 1) argv.push_back(cmdline.data() + i);
  if (argv.empty()) return report(Status::Error(Code::kNotFound, "serve: cannot read this process's arguments (/proc/self/cmdline)"));
  argv.push_back(nullptr);
  execv(exe.c_str(), argv.data());
  return report(Status::Error(Code::kNotFound, "serve: cannot start %s (the HTTP server, installed beside mcullm): %s", exe.c_str(),
                              std::strerror(errno)));
}
#endif

int serve_main(ServeOptions& o) {
  o.engine.model = o.m.model;
  o.engine.tokenizer = o.m.tokenizer;
  o.engine.ctx = o.m.ctx;
  o.engine.threads = o.m.threads;
  o.engine.kernels = o.m.kernels;
  o.engine.head = o.m.head;
  o.engine.head_top = o.m.head_top;
#if !MCULLM_SERVE_HTTP
  if (o.serial.empty()) return exec_http_server();  // HTTP, also with --bridge
#endif
  SignalWaiter signals;  // before any thread exists, so that all of them inherit the mask
  if (!o.bridge.empty()) {
    int fd = -1;
    if (Status st = open_serial(o.bridge, o.baud, &fd); !st.ok()) return report(st);
    o.engine.remote = std::make_shared<serve::BoardLink>(fd, true, o.bridge_timeout_s * 1000);
  }
  std::unique_ptr<serve::Engine> engine;
  if (Status st = serve::Engine::create(o.engine, &engine); !st.ok()) return report(st);

  if (!o.serial.empty()) {
    int fd = -1;
    if (Status st = open_serial(o.serial, o.baud, &fd); !st.ok()) return report(st);
    std::atomic<bool> stop{false};
    signals.start([&stop] { stop.store(true); });
    std::fprintf(stderr, "mcullm: serving %s on %s (line protocol, %d baud)\n", engine->model_id().c_str(), o.serial.c_str(), o.baud);
    const Status st = serve::serve_lines(*engine, fd, fd, stop);
    signals.finish();
    close(fd);
    if (!st.ok()) return report(st);
    std::fprintf(stderr, "mcullm: %s closed\n", o.serial.c_str());
    return 0;
  }

#if MCULLM_SERVE_HTTP
  serve::HttpServer server(*engine, o.http);
  if (Status st = server.bind(); !st.ok()) return report(st);
  signals.start([&server] { server.stop(); });
  std::fprintf(stderr, "mcullm: serving %s on http://%s:%d (%d slot%s, queue %d, context %d)\n", engine->model_id().c_str(),
               o.http.host.c_str(), server.port(), o.engine.parallel, o.engine.parallel == 1 ? "" : "s", o.engine.queue, engine->ctx_len());
  if (!o.bridge.empty()) std::fprintf(stderr, "mcullm: generations run on the board at %s (%d baud)\n", o.bridge.c_str(), o.baud);
  std::fflush(stderr);
  const Status st = server.run();
  signals.finish();
  if (!st.ok()) return report(st);
  return 0;
#else
  return 1;  // not reached: exec_http_server above
#endif
}

}  // namespace

void add_serve_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve a model over HTTP (OpenAI / llama-server API) or a serial line protocol");
  add_model_options(cmd, &o->m, kTokenizerFlag | kCtxFlag | kThreadsFlag | kKernelsFlag | kHeadFlag,
                    {.ctx = "Context length per slot (default: the model's)", .threads = "Threads per slot"});
  cmd->add_option("--parallel", o->engine.parallel, "Concurrent generations (slots), each with its own KV cache")->check(CLI::Range(1, 64));
  cmd->add_option("--queue", o->engine.queue, "Requests that may wait for a slot (a burst waits for its turn); more get 503")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  cmd->add_option("--alias", o->engine.alias, "Model id in the API (default: the model file's name)");
  cmd->add_option("--chat-template", o->engine.chat_template,
                  std::string("Chat template for /v1/chat/completions: ") + ChatTemplate::known_names() + " (default: the model file's own)");
  cmd->add_option("--token-delay-ms", o->engine.token_delay_ms, "Sleep after each token (to mimic a slow board in demos and tests)")
      ->check(CLI::Range(0, 10000));
  cmd->add_option("--host", o->http.host, "Address to listen on");
  cmd->add_option("--port", o->http.port, "Port (0 = any free port; the chosen one is printed)")->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", o->http.api_key, "Require this key (Authorization: Bearer KEY) on every endpoint but /health");
  cmd->add_option("--timeout", o->http.read_timeout_s, "Seconds a client may stay silent (reading) or stop reading (writing)")
      ->check(CLI::Range(1, 3600))
      ->each([o](const std::string&) { o->http.write_timeout_s = o->http.read_timeout_s; });
  cmd->add_option("--header-timeout", o->http.header_timeout_s,
                  "Seconds a client has to send a whole request (line, headers, body), however slowly its bytes come; then 408")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  cmd->add_option("--max-connections", o->http.max_connections,
                  "Open connections (a thread each; more than --parallel + --queue); one more gets 503 at once")
      ->capture_default_str()
      ->check(CLI::Range(2, 65536));
  cmd->add_option("--max-body", o->http.max_body_bytes, "Largest request body in bytes, whatever its Content-Type; larger gets 413")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{1} << 30));
  cmd->add_option("--vendor-dir", o->http.vendor_dir, "Serve this directory at /vendor/ (web/flash/node_modules: esptool-js for the page's flashing panel)");
  cmd->add_option("--serial", o->serial, "Speak the line protocol on this serial device or pty instead of HTTP");
  CLI::Option* bridge = cmd->add_option("--bridge", o->bridge, "Serve HTTP, but generate on a board speaking the line protocol on this serial device");
  bridge->excludes(cmd->get_option("--serial"));
  cmd->add_option("--bridge-timeout", o->bridge_timeout_s, "Seconds the board may stay silent while a reply is due")->check(CLI::Range(1, 3600));
  cmd->add_option("--baud", o->baud, "Serial speed (--serial, --bridge)");
  cmd->callback([o, exit_code] { *exit_code = serve_main(*o); });
}

}  // namespace mcullm::cli
