// Tokenizer speed through the library: encode (and decode) of ../shared/data/tinystories_val_head794k.txt,
// single-threaded, with the Qwen tokenizer (tokenizer.json) and the others in ../shared/tokenizers.
// bytes_per_second = input text bytes per wall-clock second (MB/s as Google Benchmark prints it, in
// MiB); counters: tokens per iteration and the loaded vocabulary's memory (vocab_MiB, BPE only).
// bench/compare_hf_tokenizers.sh runs the Qwen case side by side with Hugging Face's tokenizers on node.
//
// Files: $MCULLM_SHARED_DIR, else ../shared beside the repository (found from this file's path).
// Missing files: the benchmark is skipped with a message saying where it looked.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/tokenizer_image.h"
#include "tokenizer/bpe_tokenizer_host.h"
#include "tokenizer/image_tokenizer_host.h"
#include "tokenizer/tokenizer_image_writer_host.h"
#include "tokenizer/pretokenizer.h"
#include "load/tokenizer_loader_host.h"

namespace {

namespace fs = std::filesystem;

fs::path shared_dir() {
  if (const char* env = std::getenv("MCULLM_SHARED_DIR")) return env;
  return fs::path(__FILE__).parent_path() / ".." / ".." / "shared";  // bench/x.cpp -> <repo>/../shared
}

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const std::string& text() {
  static const std::string t = read_all(shared_dir() / "data" / "tinystories_val_head794k.txt");
  return t;
}

struct Loaded {
  std::unique_ptr<mcullm::Tokenizer> tok;
  double load_ms = 0;
  std::string error;
};

const Loaded& tokenizer(const std::string& relative) {
  static std::vector<std::pair<std::string, std::unique_ptr<Loaded>>> cache;
  for (auto& [name, l] : cache)
    if (name == relative) return *l;
  auto l = std::make_unique<Loaded>();
  const auto t0 = std::chrono::steady_clock::now();
  const mcullm::Status st = mcullm::load_tokenizer_file((shared_dir() / relative).string(), &l->tok);
  l->load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!st.ok()) l->error = st.message();
  return *cache.emplace_back(relative, std::move(l)).second;
}

void set_memory(benchmark::State& state, const mcullm::Tokenizer& t) {
  if (const auto* bpe = dynamic_cast<const mcullm::BpeTokenizer*>(&t))
    state.counters["vocab_MiB"] = static_cast<double>(bpe->memory_bytes()) / (1 << 20);
}

void BM_Encode(benchmark::State& state, const char* relative) {
  const Loaded& l = tokenizer(relative);
  if (!l.tok || text().empty()) {
    state.SkipWithError(("missing " + (shared_dir() / relative).string() + " or the text: " + l.error).c_str());
    return;
  }
  std::vector<int> ids;
  for (auto _ : state) {
    const mcullm::Status st = l.tok->encode(text(), mcullm::EncodeOptions{}, &ids);
    if (!st.ok()) state.SkipWithError(st.message());
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(text().size()));
  state.counters["tokens"] = static_cast<double>(ids.size());
  state.counters["load_ms"] = l.load_ms;
  set_memory(state, *l.tok);
}

// The board image's in-place encoder (tokenizer/tokenizer_image.h) on the same text in one call, with the
// caller's buffers allocated once; counter image_MiB = the image's size (what the board keeps in flash).
void BM_EncodeImage(benchmark::State& state, const char* relative) {
  const Loaded& l = tokenizer(relative);
  std::vector<uint8_t> bytes;
  mcullm::ImageTokenizer image;
  mcullm::Status st = l.tok ? mcullm::write_tokenizer_image(*l.tok, &bytes) : mcullm::Status::Error(mcullm::Code::kNotFound, "%s", l.error.c_str());
  if (st.ok()) st = image.load(bytes.data(), bytes.size());
  if (!st.ok() || text().empty()) {
    state.SkipWithError(("missing " + (shared_dir() / relative).string() + " or the text: " + st.message()).c_str());
    return;
  }
  std::vector<int32_t> ids(text().size() + 3), work(text().size() + 3);
  size_t n = 0;
  for (auto _ : state) {
    st = image.image().encode(text().data(), text().size(), false, false, false, ids.data(), work.data(), ids.size(), &n);
    if (!st.ok()) state.SkipWithError(st.message());
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(text().size()));
  state.counters["tokens"] = static_cast<double>(n);
  state.counters["image_MiB"] = static_cast<double>(bytes.size()) / (1 << 20);
}

void BM_Decode(benchmark::State& state, const char* relative) {
  const Loaded& l = tokenizer(relative);
  if (!l.tok || text().empty()) {
    state.SkipWithError(("missing " + (shared_dir() / relative).string()).c_str());
    return;
  }
  std::vector<int> ids;
  (void)l.tok->encode(text(), mcullm::EncodeOptions{}, &ids);
  for (auto _ : state) {
    std::string out = l.tok->decode(ids);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(text().size()));
}

// The pre-tokenizer alone (Qwen2's rules): what the MCU's splitter costs per byte.
void BM_PretokenizeQwen2(benchmark::State& state) {
  if (text().empty()) {
    state.SkipWithError("missing the text");
    return;
  }
  size_t pieces = 0;
  for (auto _ : state) {
    pieces = 0;
    mcullm::pretokenize(
        mcullm::PreTokenizer::kQwen2, text().data(), text().size(),
        [](void* user, size_t, size_t) { ++*static_cast<size_t*>(user); }, &pieces);
    benchmark::DoNotOptimize(pieces);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(text().size()));
  state.counters["pieces"] = static_cast<double>(pieces);
}

BENCHMARK_CAPTURE(BM_Encode, qwen_json, "tokenizers/qwen/tokenizer.json")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, qwen_json, "tokenizers/qwen/tokenizer.json")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EncodeImage, qwen_json, "tokenizers/qwen/tokenizer.json")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EncodeImage, gpt2_gguf, "tokenizers/vocab-gguf/ggml-vocab-gpt-2.gguf")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PretokenizeQwen2)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, gpt2_gguf, "tokenizers/vocab-gguf/ggml-vocab-gpt-2.gguf")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, deepseek_llm_gguf, "tokenizers/vocab-gguf/ggml-vocab-deepseek-llm.gguf")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, llama2_spm, "tokenizers/llama2-32k/tokenizer.bin")->Unit(benchmark::kMillisecond);

}  // namespace
