#include "core/thread_pool_host.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MC_CPU_RELAX() _mm_pause()
#else
#define MC_CPU_RELAX() std::this_thread::yield()
#endif

namespace mcullm {

namespace {
constexpr int kSpinsBeforeSleep = 1 << 12;  // ~100 us of pause-spinning, then sleep
}

HostThreadPool::HostThreadPool(int n_threads, size_t min_parallel_work)
    : n_threads_(n_threads < 1 ? 1 : n_threads > kMaxThreads ? kMaxThreads : n_threads),
      ranges_(new Range[static_cast<size_t>(n_threads_)]) {
  set_min_parallel_work(min_parallel_work);
}

void HostThreadPool::start_workers() {
  // Called by run() before it publishes a task: every worker starts from the generation before it.
  const unsigned seen = generation_.load(std::memory_order_relaxed);
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back(&HostThreadPool::worker, this, i, seen);
}

HostThreadPool::~HostThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

namespace {
constexpr unsigned long long range_word(unsigned generation, unsigned end, unsigned next) {
  return (static_cast<unsigned long long>(generation) << 32) | (static_cast<unsigned long long>(end) << 16) | next;
}
}  // namespace

void HostThreadPool::run_parts(unsigned generation, int home) {
  const int parts = n_threads_ * kPartsPerThread;
  for (int k = 0; k < n_threads_; ++k) {  // its own range first, then the next threads' leftovers
    std::atomic<unsigned long long>& range = ranges_[static_cast<size_t>((home + k) % n_threads_)].word;
    unsigned long long w = range.load(std::memory_order_acquire);
    for (;;) {
      const unsigned end = static_cast<unsigned>(w >> 16) & 0xffffu, next = static_cast<unsigned>(w) & 0xffffu;
      if (static_cast<unsigned>(w >> 32) != generation || next >= end) break;
      // Claimed part `next`: the task and its context stay valid until every part is done.
      if (range.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
        task_(ctx_, static_cast<int>(next), parts);
        done_.fetch_add(1, std::memory_order_release);
        w = range.load(std::memory_order_acquire);
      }
    }
  }
}

void HostThreadPool::run(TaskFn task, void* ctx) {
  if (n_threads_ == 1) {
    task(ctx, 0, 1);
    return;
  }
  if (workers_.empty()) start_workers();
  const int parts = n_threads_ * kPartsPerThread;
  const unsigned generation = generation_.load(std::memory_order_relaxed) + 1;
  task_ = task;
  ctx_ = ctx;
  done_.store(0, std::memory_order_relaxed);
  for (int t = 0; t < n_threads_; ++t)
    ranges_[static_cast<size_t>(t)].word.store(
        range_word(generation, static_cast<unsigned>((t + 1) * kPartsPerThread), static_cast<unsigned>(t * kPartsPerThread)),
        std::memory_order_release);
  generation_.store(generation, std::memory_order_release);
  generation_.notify_all();
  run_parts(generation, 0);
  for (int spins = 0; done_.load(std::memory_order_acquire) != parts; ++spins) {
    if (spins < kSpinsBeforeSleep) {
      MC_CPU_RELAX();
    } else {
      std::this_thread::yield();
    }
  }
}

void HostThreadPool::worker(int ith, unsigned seen) {
  // `seen` is the generation before the task that started this worker: a worker that starts late
  // must still see that task (reading the counter here would skip it).
  for (;;) {
    unsigned now;
    int spins = 0;
    while ((now = generation_.load(std::memory_order_acquire)) == seen) {
      if (++spins < kSpinsBeforeSleep) {
        MC_CPU_RELAX();
      } else {
        generation_.wait(seen, std::memory_order_acquire);
      }
    }
    seen = now;
    if (stop_.load(std::memory_order_acquire)) return;
    run_parts(now, ith);
  }
}

}  // namespace mcullm
