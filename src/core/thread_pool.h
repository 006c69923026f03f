// A fixed pool of threads that run one task at a time: task(ctx, ith, nth) once for every part
// ith of nth, the caller taking part too. Workers spin on a counter between tasks (hand-off in
// well under a microsecond), then fall back to sleeping so that an idle pool does not burn a core.
// Results never depend on nth, nor on which thread runs which part: every task splits its work
// into fixed slices (see slice()) whose results are computed alone. So a pool may cut a task into
// more parts than it has threads and let a free thread take over another's (HostThreadPool).
#pragma once
#include <stddef.h>

namespace mcullm {

using TaskFn = void (*)(void* ctx, int ith, int nth);

// The [begin, end) share of `n` items that thread ith of nth computes: contiguous, deterministic.
inline void slice(int n, int ith, int nth, int* begin, int* end) {
  const int per = n / nth, extra = n % nth;
  *begin = ith * per + (ith < extra ? ith : extra);
  *end = *begin + per + (ith < extra ? 1 : 0);
}

class ThreadPool {
 public:
  virtual ~ThreadPool() = default;
  virtual int size() const = 0;
  // Runs task(ctx, ith, nth) for every part ith of nth (nth >= size(); the caller runs some of
  // them) and returns when all have finished. Nothing may depend on which thread runs a part.
  virtual void run(TaskFn task, void* ctx) = 0;
  // run(), or task(ctx, 0, 1) on the caller alone when `work` (multiply-adds, roughly) is below
  // min_parallel_work(): waking a worker, or waiting for one the OS has preempted on a busy machine,
  // costs more than a tiny model's whole matrix. The results are the same (fixed slices).
  void run_sized(TaskFn task, void* ctx, size_t work) {
    if (work < min_parallel_work_) {
      task(ctx, 0, 1);
    } else {
      run(task, ctx);
    }
  }
  size_t min_parallel_work() const { return min_parallel_work_; }
  void set_min_parallel_work(size_t work) { min_parallel_work_ = work; }

 private:
  size_t min_parallel_work_ = 0;  // 0: every task on every thread
};

// fn(begin, end) over [0, n) split into the pool's fixed slices, in whole granules of `granule`
// items (a multiple of 16 floats keeps every slice's start 64-byte aligned, as the SIMD and PIE
// kernels want, and threads off each other's cache lines): for work whose every item is computed
// alone (elementwise activations, quantizing with a known scale, rotating heads), so the results
// do not depend on the split. `work`: as run_sized's.
template <class Fn>
void run_slices(ThreadPool& pool, int n, int granule, size_t work, const Fn& fn) {
  struct Ctx {
    const Fn* fn;
    int n, granule;
  } ctx{&fn, n, granule};
  pool.run_sized(
      [](void* p, int ith, int nth) {
        const Ctx& c = *static_cast<const Ctx*>(p);
        int g0, g1;
        slice((c.n + c.granule - 1) / c.granule, ith, nth, &g0, &g1);
        const int b = g0 * c.granule, e = g1 * c.granule < c.n ? g1 * c.granule : c.n;
        if (b < e) (*c.fn)(b, e);
      },
      &ctx, work);
}

// One thread: run() calls task(ctx, 0, 1) directly. Freestanding.
class SerialPool final : public ThreadPool {
 public:
  int size() const override { return 1; }
  void run(TaskFn task, void* ctx) override { task(ctx, 0, 1); }
};

}  // namespace mcullm
