// The PC's thread pool: std::thread workers spinning on an atomic generation counter.
#pragma once
#include <atomic>
#include <thread>
#include <vector>

#include "core/thread_pool.h"

namespace mcullm {

class HostThreadPool final : public ThreadPool {
 public:
  explicit HostThreadPool(int n_threads);
  ~HostThreadPool() override;
  HostThreadPool(const HostThreadPool&) = delete;
  HostThreadPool& operator=(const HostThreadPool&) = delete;

  int size() const override { return n_threads_; }
  void run(TaskFn task, void* ctx) override;

 private:
  void worker(int ith);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::atomic<unsigned> generation_{0};  // bumped once per task
  std::atomic<int> pending_{0};          // workers still busy with the current task
  std::atomic<bool> stop_{false};
  TaskFn task_ = nullptr;
  void* ctx_ = nullptr;
};

}  // namespace mcullm
