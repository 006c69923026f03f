// The PC's thread pool: std::thread workers spinning on an atomic generation counter, started by
// the first task handed to them (a small model's matrices all stay on the calling thread, so its
// process never pays for a thread: creating it, its stack's page faults and its first spin).
#pragma once
#include <atomic>
#include <thread>
#include <vector>

#include "core/thread_pool.h"

namespace mcullm {

// What the CLI, the server and the cluster nodes pass as min_parallel_work (ThreadPool::run_sized):
// below 64 K multiply-adds (a few microseconds of kernel work) a matrix stays on the calling thread.
// stories260K's matrices all do (on 2 busy cores, -t 2 ran it 200x slower than -t 1), a 15M model's
// projections do not. The tests pass 0 to exercise every hand-off.
constexpr size_t kHostMinParallelWork = size_t{1} << 16;

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

  int n_threads_;
  std::vector<std::thread> workers_;     // empty until the first run() with n_threads_ > 1
  std::atomic<unsigned> generation_{0};  // bumped once per task
  std::atomic<int> pending_{0};          // workers still busy with the current task
  std::atomic<bool> stop_{false};
  TaskFn task_ = nullptr;
  void* ctx_ = nullptr;
};

}  // namespace mcullm
