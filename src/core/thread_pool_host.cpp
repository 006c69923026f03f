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

HostThreadPool::HostThreadPool(int n_threads, size_t min_parallel_work) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  set_min_parallel_work(min_parallel_work);
}

void HostThreadPool::start_workers() {
  // Called by run() before it publishes a task: every worker starts from the generation before it.
  const unsigned seen = generation_.load(std::memory_order_relaxed);
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back(&HostThreadPool::worker, this, seen);
}

HostThreadPool::~HostThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

namespace {
constexpr unsigned long long claim_word(unsigned generation, unsigned parts, unsigned next) {
  return (static_cast<unsigned long long>(generation) << 32) | (static_cast<unsigned long long>(parts) << 16) | next;
}
}  // namespace

void HostThreadPool::run_parts(unsigned generation) {
  unsigned long long w = claim_.load(std::memory_order_acquire);
  for (;;) {
    const unsigned parts = static_cast<unsigned>(w >> 16) & 0xffffu, next = static_cast<unsigned>(w) & 0xffffu;
    if (static_cast<unsigned>(w >> 32) != generation || next >= parts) return;
    // Claimed part `next`: the task and its context stay valid until every part is done.
    if (claim_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
      task_(ctx_, static_cast<int>(next), static_cast<int>(parts));
      done_.fetch_add(1, std::memory_order_release);
      w = claim_.load(std::memory_order_acquire);
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
  claim_.store(claim_word(generation, static_cast<unsigned>(parts), 0), std::memory_order_release);
  generation_.store(generation, std::memory_order_release);
  generation_.notify_all();
  run_parts(generation);
  for (int spins = 0; done_.load(std::memory_order_acquire) != parts; ++spins) {
    if (spins < kSpinsBeforeSleep) {
      MC_CPU_RELAX();
    } else {
      std::this_thread::yield();
    }
  }
}

void HostThreadPool::worker(unsigned seen) {
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
    run_parts(now);
  }
}

}  // namespace mcullm
