// The PC's thread pool: std::thread workers spinning on an atomic generation counter, started by
// the first task handed to them (a small model's matrices all stay on the calling thread, so its
// process never pays for a thread: creating it, its stack's page faults and its first spin).
// Each task is cut into kPartsPerThread parts per thread. Thread t owns the contiguous range of
// parts [t * kPartsPerThread, (t + 1) * kPartsPerThread) and claims them in order (on a quiet
// machine each thread reads one contiguous stretch of every matrix, as with one part per thread);
// a thread done with its own range claims what is left of the next ones: when the OS preempts a
// worker on a shared machine, the others take over its remaining parts instead of waiting for it
// (with one part per thread, a worker descheduled for a time slice stalled every matrix it had a
// share of). The results are the same whoever runs a part (fixed slices, see thread_pool.h).
#pragma once
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "core/thread_pool.h"

namespace mcullm {

// What the CLI, the server and the cluster nodes pass as min_parallel_work (ThreadPool::run_sized):
// below 64 K multiply-adds (a few microseconds of kernel work) a matrix stays on the calling thread.
// stories260K's matrices all do (on 2 busy cores, -t 2 ran it 200x slower than -t 1), a 15M model's
// projections do not. The tests pass 0 to exercise every hand-off.
constexpr size_t kHostMinParallelWork = size_t{1} << 16;

// Parts per thread of every task: enough that a preempted worker leaves little behind, few enough
// that claiming them (one compare-and-swap each) stays far below a matrix's time.
constexpr int kPartsPerThread = 4;
// Threads a pool has at most (part numbers are 16 bits in the claim words); more are clamped.
constexpr int kMaxThreads = 0xffff / kPartsPerThread;

class HostThreadPool final : public ThreadPool {
 public:
  explicit HostThreadPool(int n_threads, size_t min_parallel_work = 0);
  ~HostThreadPool() override;
  HostThreadPool(const HostThreadPool&) = delete;
  HostThreadPool& operator=(const HostThreadPool&) = delete;

  int size() const override { return n_threads_; }
  void run(TaskFn task, void* ctx) override;

 private:
  void start_workers();
  void worker(int ith, unsigned seen);
  // Runs parts of the task published as `generation`, from thread `home`'s range first, until none
  // is left unclaimed.
  void run_parts(unsigned generation, int home);

  // One thread's range of the current task's parts: generation (high 32 bits), end (next 16), next
  // unclaimed part (low 16). A worker that wakes late claims nothing from a later task by mistake:
  // its compare-and-swap carries the generation it read. A cache line each.
  struct alignas(64) Range {
    std::atomic<unsigned long long> word{0};
  };

  int n_threads_;
  std::unique_ptr<Range[]> ranges_;      // n_threads_ of them
  std::vector<std::thread> workers_;     // empty until the first run() with n_threads_ > 1
  std::atomic<unsigned> generation_{0};  // bumped once per task: what sleeping workers wait on
  std::atomic<int> done_{0};  // parts of the current task finished
  std::atomic<bool> stop_{false};
  TaskFn task_ = nullptr;  // written only while no part of the previous task is unfinished
  void* ctx_ = nullptr;
};

}  // namespace mcullm
