// A two-thread pool (core/thread_pool.h) over the HAL's second-core worker: thread 1's share of each
// task is handed to the worker spinning on core 1, the caller computes thread 0's share, then waits.
// Every task splits its work into fixed slices, so the results equal a SerialPool's bit for bit.
// Header-only on purpose: ThreadPool's virtual destructor must not pull operator delete into the
// freestanding core library; the firmware and the tests instantiate it.
#pragma once
#include "board/hal.h"
#include "core/thread_pool.h"

namespace mcullm::board {

class DualCorePool final : public ThreadPool {
 public:
  explicit DualCorePool(Worker& worker) : worker_(worker) {}
  int size() const override { return 2; }
  void run(TaskFn task, void* ctx) override {
    job_.task = task;
    job_.ctx = ctx;
    worker_.start(&second, &job_);
    task(ctx, 0, 2);
    worker_.wait();
  }

 private:
  struct Job {
    TaskFn task = nullptr;
    void* ctx = nullptr;
  };
  static void second(void* arg) {
    Job* j = static_cast<Job*>(arg);
    j->task(j->ctx, 1, 2);
  }
  Worker& worker_;
  Job job_;
};

}  // namespace mcullm::board
