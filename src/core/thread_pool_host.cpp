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
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back(&HostThreadPool::worker, this, i, seen);
}

HostThreadPool::~HostThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void HostThreadPool::run(TaskFn task, void* ctx) {
  if (n_threads_ == 1) {
    task(ctx, 0, 1);
    return;
  }
  if (workers_.empty()) start_workers();
  task_ = task;
  ctx_ = ctx;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  task(ctx, 0, n_threads_);
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
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
    task_(ctx_, ith, n_threads_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace mcullm
