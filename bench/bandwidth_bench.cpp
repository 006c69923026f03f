// A STREAM-like read: how fast this machine streams bytes into the cores, the bound of a
// memory-bound token (every generated token reads all weights once). Each thread sums its share of
// a buffer with 256-bit integer adds (four independent chains), so the loop is load-bound.
// Sizes: 32 MiB and 80 MiB (about the bytes a BitNet 125M token reads: 26 MB ternary + 49 MB f16
// head, which may still sit in a large last-level cache) and 1 GiB (beyond any cache: DRAM).
// bytes_per_second is the figure; docs/performance.md divides bytes per token by it.
//   build/release/bench/bandwidth_bench --benchmark_min_time=0.2
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace {

__attribute__((target("avx2"))) uint64_t sum_avx2(const uint8_t* p, size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 128 <= n; i += 128) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

uint64_t sum_scalar(const uint8_t* p, size_t n) {
  uint64_t a[4] = {};
  for (size_t i = 0; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; ++k) {
      uint64_t v;
      std::memcpy(&v, p + i + 8 * k, 8);
      a[k] += v;
    }
  return a[0] + a[1] + a[2] + a[3];
}

// One buffer per size, written once (so its pages exist), shared by the threads of a run.
uint8_t* buffer(size_t bytes) {
  static uint8_t* buf = nullptr;
  static size_t size = 0;
  if (size != bytes) {
    std::free(buf);
    buf = static_cast<uint8_t*>(std::aligned_alloc(4096, bytes));
    if (buf == nullptr) std::abort();
    for (size_t i = 0; i < bytes; ++i) buf[i] = static_cast<uint8_t>(i * 131u);
    size = bytes;
  }
  return buf;
}

void read_bw(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0)) << 20;
  // Thread 0 sets the buffer up; Google Benchmark starts all threads' timing together after this.
  static uint8_t* buf = nullptr;
  if (state.thread_index() == 0) buf = buffer(bytes);
  const size_t share = bytes / static_cast<size_t>(state.threads()) / 128 * 128;
  const bool avx2 = __builtin_cpu_supports("avx2");
  for (auto _ : state) {
    const uint8_t* p = buf + share * static_cast<size_t>(state.thread_index());
    uint64_t s = avx2 ? sum_avx2(p, share) : sum_scalar(p, share);
    benchmark::DoNotOptimize(s);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(share));
}

BENCHMARK(read_bw)->Arg(32)->Arg(80)->Arg(1024)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace
