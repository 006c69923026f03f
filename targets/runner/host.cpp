// The board runner on the host (x86-64 / aarch64 Linux): the same main, the machine's clock as counter,
// a thread as the second core (cores=2).
#include <time.h>

#include "platform.h"

extern "C" uint64_t board_counter(void) {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}
extern "C" const char* board_counter_name(void) { return "ns"; }
extern "C" uint32_t board_instructions_per_count(void) { return 0; }
extern "C" const char* board_target_name(void) {
#if defined(__x86_64__)
  return "host-x86_64";
#elif defined(__aarch64__)
  return "host-aarch64";
#else
  return "host";
#endif
}

// The second core: a thread spinning on a job counter (yielding, so that a loaded host still makes
// progress), as board::HostWorker does for the HAL; C and pthreads only, like the rest of the runner.
#include <pthread.h>
#include <sched.h>

namespace {
struct SecondCore {
  pthread_t thread;
  bool up = false;
  void (*job)(void*) = nullptr;
  void* arg = nullptr;
  unsigned posted = 0, done = 0;  // __atomic: jobs handed over / finished
};
SecondCore g_core1;

void* second_core_loop(void*) {
  unsigned seen = 0;
  for (;;) {
    while (__atomic_load_n(&g_core1.posted, __ATOMIC_ACQUIRE) == seen) sched_yield();
    seen = __atomic_load_n(&g_core1.posted, __ATOMIC_ACQUIRE);
    g_core1.job(g_core1.arg);
    __atomic_store_n(&g_core1.done, seen, __ATOMIC_RELEASE);
  }
  return nullptr;
}
}  // namespace

extern "C" int board_second_core_available(void) {
  if (!g_core1.up) g_core1.up = pthread_create(&g_core1.thread, nullptr, second_core_loop, nullptr) == 0;
  return g_core1.up;  // the thread spins until the process exits
}
extern "C" void board_second_core_start(void (*job)(void*), void* arg) {
  g_core1.job = job;
  g_core1.arg = arg;
  __atomic_store_n(&g_core1.posted, g_core1.posted + 1, __ATOMIC_RELEASE);
}
extern "C" void board_second_core_wait(void) {
  while (__atomic_load_n(&g_core1.done, __ATOMIC_ACQUIRE) != g_core1.posted) sched_yield();
}

// A neighbour in a ring of runners (role=master / node over named pipes) that has gone makes a write
// fail with EPIPE, which the link reports, instead of killing the process with SIGPIPE.
#include <signal.h>
__attribute__((constructor)) static void ignore_sigpipe() { signal(SIGPIPE, SIG_IGN); }
