// A bounded load test on loopback: N requests (default 200; $MCULLM_LOAD_REQUESTS), 16 at a time
// ($MCULLM_LOAD_CLIENTS; bench/serve_load.sh runs 1, 4 and 16), a
// quarter of them streamed, against an in-process `mcullm serve` with stories260K. Reports errors,
// latency percentiles, throughput and resident memory; fails on any error other than the documented
// 503 (queue full), on a crash, a leaked slot, or memory that keeps growing. Labelled slow: left out
// of the sanitizer run.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "serve/engine_host.h"
#include "serve/http_server_host.h"
#include "test_support.h"

namespace mcullm {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

long rss_kib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  return -1;
}

struct LoadResult {
  int ok = 0, busy = 0, errors = 0;
  std::vector<double> latency_ms;
  double wall_s = 0;
  long tokens = 0;
  std::string first_error;
};

LoadResult load(int port, int n_requests, int concurrency, double deadline_s) {
  LoadResult r;
  std::mutex mu;
  std::atomic<int> next{0};
  const auto t0 = Clock::now();
  const auto deadline = t0 + std::chrono::duration<double>(deadline_s);
  std::vector<std::thread> workers;
  for (int w = 0; w < concurrency; ++w)
    workers.emplace_back([&] {
      httplib::Client c("127.0.0.1", port);
      c.set_read_timeout(30, 0);
      c.set_connection_timeout(5, 0);
      for (int i; (i = next++) < n_requests && Clock::now() < deadline;) {
        const bool stream = i % 4 == 3;
        const json body{{"prompt", "Once upon a time"}, {"max_tokens", 64}, {"temperature", 0.8}, {"seed", i + 1}, {"stream", stream}};
        const auto start = Clock::now();
        auto res = c.Post("/v1/completions", body.dump(), "application/json");
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        std::lock_guard<std::mutex> l(mu);
        if (!res) {
          ++r.errors;
          if (r.first_error.empty()) r.first_error = "transport error " + httplib::to_string(res.error());
        } else if (res->status == 200) {
          ++r.ok;
          r.latency_ms.push_back(ms);
          if (stream) {
            if (res->body.find("data: [DONE]") == std::string::npos) {
              ++r.errors;
              if (r.first_error.empty()) r.first_error = "stream without [DONE]";
            }
          } else {
            const json j = json::parse(res->body, nullptr, false);
            if (j.is_object()) r.tokens += j["usage"]["completion_tokens"].get<long>();
          }
        } else if (res->status == 503) {
          ++r.busy;
        } else {
          ++r.errors;
          if (r.first_error.empty()) r.first_error = std::to_string(res->status) + " " + res->body;
        }
      }
    });
  for (auto& t : workers) t.join();
  r.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

void report(const char* name, const LoadResult& r, long rss_before, long rss_after) {
  std::printf("load %s: %d ok, %d busy (503), %d errors in %.2f s (%.1f requests/s); latency ms p50 %.2f p95 %.2f p99 %.2f max %.2f; "
              "%ld tokens in non-streamed replies; RSS %ld -> %ld KiB\n",
              name, r.ok, r.busy, r.errors, r.wall_s, (r.ok + r.busy) / r.wall_s, percentile(r.latency_ms, 0.5),
              percentile(r.latency_ms, 0.95), percentile(r.latency_ms, 0.99), percentile(r.latency_ms, 1.0), r.tokens, rss_before, rss_after);
  std::fflush(stdout);
}

int env_int(const char* name, int fallback, int hi) {
  const char* env = std::getenv(name);
  return env ? std::clamp(std::atoi(env), 1, hi) : fallback;
}
int requests() { return env_int("MCULLM_LOAD_REQUESTS", 200, 1000000); }

TEST(ServeLoad, ClientsAtATimeWithEnoughQueue) {
  MC_REQUIRE_SHARED();
  serve::EngineOptions eo;
  eo.model = test::shared_path("models/stories260K/stories260K.bin");
  eo.parallel = 2;
  eo.queue = 16;  // 16 clients never overflow 2 slots + 16 places: no 503 expected
  std::unique_ptr<serve::Engine> engine;
  ASSERT_TRUE(serve::Engine::create(eo, &engine).ok());
  serve::HttpOptions ho;
  ho.port = 0;
  serve::HttpServer server(*engine, ho);
  ASSERT_TRUE(server.start().ok());
  load(server.port(), 32, 16, 60);  // warm-up: threads, connections, allocator pools
  const long before = rss_kib();
  const int n = requests();
  const int clients = env_int("MCULLM_LOAD_CLIENTS", 16, 16);  // more would overflow the queue (503)
  const LoadResult r = load(server.port(), n, clients, 120);
  const long after = rss_kib();
  report(("2 slots, queue 16, " + std::to_string(clients) + " clients").c_str(), r, before, after);
  if (!r.first_error.empty()) std::printf("first error: %s\n", r.first_error.c_str());
  EXPECT_EQ(r.errors, 0) << r.first_error;
  EXPECT_EQ(r.busy, 0);
  EXPECT_EQ(r.ok, n) << "the 120 s deadline cut the run short";
  EXPECT_LT(after - before, 32 * 1024) << "resident memory grew by more than 32 MiB";
  const serve::EngineMetrics m = engine->metrics();
  EXPECT_EQ(m.busy_slots, 0);
  EXPECT_EQ(m.queued, 0);
  server.stop();
}

TEST(ServeLoad, AFullQueueAnswers503AndNothingElse) {
  MC_REQUIRE_SHARED();
  serve::EngineOptions eo;
  eo.model = test::shared_path("models/stories260K/stories260K.bin");
  eo.parallel = 1;
  eo.queue = 2;
  eo.token_delay_ms = 1;  // about 70 ms per request, so that 16 clients overflow 3 places
  std::unique_ptr<serve::Engine> engine;
  ASSERT_TRUE(serve::Engine::create(eo, &engine).ok());
  serve::HttpOptions ho;
  ho.port = 0;
  serve::HttpServer server(*engine, ho);
  ASSERT_TRUE(server.start().ok());
  const long before = rss_kib();
  const LoadResult r = load(server.port(), requests(), 16, 120);
  report("1 slot, queue 2", r, before, rss_kib());
  EXPECT_EQ(r.errors, 0) << r.first_error;
  EXPECT_GT(r.busy, 0);
  EXPECT_GT(r.ok, 0);
  const serve::EngineMetrics m = engine->metrics();
  EXPECT_EQ(m.busy_slots, 0);
  EXPECT_EQ(m.queued, 0);
  EXPECT_EQ(m.rejected, static_cast<uint64_t>(r.busy));
  server.stop();
}

}  // namespace
}  // namespace mcullm
