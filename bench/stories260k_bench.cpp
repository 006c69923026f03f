// Per-token forward time of stories260K through the library (no CLI, no tokenizer, no sampler):
// f32 and q8_0 weights, 1 and 2 threads, positions 0..ctx-1 fed in a loop (ctx 256 or 512, as the
// S=256 / S=512 runs of bench/compare_llama2c.sh). One benchmark iteration = one forward pass plus
// an argmax over the 512 logits; items_per_second = forward passes per wall-clock second.
//
// The model: $MCULLM_STORIES260K (the .bin), else $MCULLM_SHARED_DIR/models/stories260K/stories260K.bin,
// else ../shared/models/stories260K/stories260K.bin beside the repository (found from this file's
// path). The q8_0 model is converted once, through the library, into a file in the system temporary
// directory (removed at exit).
// Missing model: every benchmark is skipped with a message saying where it looked.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include "core/thread_pool_host.h"
#include "format/transformer_gguf_writer_host.h"
#include "load/model_loader_host.h"
#include "kernels/kernels.h"
#include "model/llama.h"

namespace {

namespace fs = std::filesystem;
using namespace mcullm;

std::string model_path() {
  if (const char* p = std::getenv("MCULLM_STORIES260K"); p && *p) return p;
  if (const char* d = std::getenv("MCULLM_SHARED_DIR"); d && *d)
    return (fs::path(d) / "models" / "stories260K" / "stories260K.bin").string();
  // bench/stories260k_bench.cpp -> <repo>/../shared
  return (fs::path(__FILE__).parent_path() / ".." / ".." / "shared" / "models" / "stories260K" / "stories260K.bin")
      .lexically_normal()
      .string();
}

struct Models {
  std::string error;  // non-empty: skip every benchmark with this message
  std::unique_ptr<LoadedModel> f32, q8_0;
  std::string q8_path;
  ~Models() {
    if (!q8_path.empty()) {
      std::error_code ec;
      fs::remove(q8_path, ec);
    }
  }
};

void load_models(Models& r) {
  const std::string path = model_path();
  if (!fs::exists(path)) {
    r.error = "stories260K not found at " + path + " (set MCULLM_STORIES260K or MCULLM_SHARED_DIR)";
    return;
  }
  if (Status st = load_model(path, &r.f32); !st.ok()) {
    r.error = std::string("loading ") + path + ": " + st.message();
    return;
  }
  GgufExportOptions opt;
  opt.weight_type = DType::kQ8_0;
  GgufWriter w;
  GgufExportReport rep;
  if (Status st = export_transformer_gguf(r.f32->model, nullptr, opt, &w, &rep); !st.ok()) {
    r.error = std::string("q8_0 export: ") + st.message();
    return;
  }
  std::error_code ec;
  const fs::path tmp = fs::temp_directory_path(ec);
  r.q8_path = ((ec ? fs::path("/tmp") : tmp) / ("mcullm_stories260k_bench_" + std::to_string(::getpid()) + ".gguf")).string();
  if (Status st = w.write_file(r.q8_path); !st.ok()) {
    r.error = std::string("writing ") + r.q8_path + ": " + st.message();
    return;
  }
  if (Status st = load_model(r.q8_path, &r.q8_0); !st.ok()) {
    r.error = std::string("loading ") + r.q8_path + ": " + st.message();
    return;
  }
  std::fprintf(stderr, "stories260k_bench: %s; q8_0: %d matrices, %d kept f32 (hidden size 172 is not a multiple of 32)\n",
               path.c_str(), rep.matrices, rep.kept_f32);
}

Models& models() {
  static Models m;
  static const bool loaded = (load_models(m), true);
  (void)loaded;
  return m;
}

// args: weights (0 = f32, 1 = q8_0), threads, context (positions cycled)
void BM_Stories260kForward(benchmark::State& state) {
  Models& m = models();
  if (!m.error.empty()) {
    state.SkipWithError(m.error.c_str());
    return;
  }
  const bool q8 = state.range(0) == 1;
  const int threads = static_cast<int>(state.range(1));
  const int ctx_len = static_cast<int>(state.range(2));
  const LlamaModel& model = (q8 ? m.q8_0 : m.f32)->model;
  const LlamaConfig& c = model.cfg;
  if (ctx_len > c.seq_len) {
    state.SkipWithError("context longer than the model's");
    return;
  }
  const KernelSet* kernels = kernels_by_name("auto");
  const size_t bytes = 2ull * c.n_layers * ctx_len * c.kv_dim() * sizeof(float) +
                       8ull * (c.vocab_size + c.hidden_dim + c.dim) * sizeof(float) +
                       2ull * c.n_heads * ctx_len * sizeof(float) + (1u << 20);
  std::vector<uint8_t> mem(bytes);
  Arena arena(Tier::kHost, mem.data(), mem.size());
  HostThreadPool pool(threads);
  LlamaContext ctx;
  if (Status st = ctx.init(&model, ctx_len, arena, &pool, kernels); !st.ok()) {
    state.SkipWithError(st.message());
    return;
  }
  int pos = 0, token = 1;  // BOS, then the greedy choice: realistic activations
  for (auto _ : state) {
    const float* logits = nullptr;
    if (Status st = ctx.forward(token, pos, &logits); !st.ok()) {
      state.SkipWithError(st.message());
      return;
    }
    int best = 0;
    for (int i = 1; i < c.vocab_size; ++i)
      if (logits[i] > logits[best]) best = i;
    token = best;
    if (++pos == ctx_len) {  // wrap: the cache rows are simply overwritten
      pos = 0;
      token = 1;
    }
    benchmark::DoNotOptimize(token);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(std::string(q8 ? "q8_0" : "f32") + " " + kernels->name + ", " + std::to_string(threads) + " thread" +
                 (threads == 1 ? "" : "s") + ", positions 0.." + std::to_string(ctx_len - 1));
}

BENCHMARK(BM_Stories260kForward)
    ->ArgNames({"q8", "threads", "ctx"})
    ->ArgsProduct({{0, 1}, {1, 2}, {256, 512}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime()  // the pool's workers are not in the benchmark thread's CPU time
    ->MinTime(0.5);

}  // namespace
