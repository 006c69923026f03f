// The board runner on the host (x86-64 / aarch64 Linux): the same main, the machine's clock as counter.
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
