// What the board runner needs from the machine it runs on (one file per target: host.cpp,
// xtensa/syscalls.c, arm/startup.c). Files are read with POSIX open/read/lseek, which newlib's
// rdimon and our picolibc glue route over semihosting; stdout is printf.
#pragma once
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// A free-running counter and what it counts ("ccount" on Xtensa, where QEMU -icount shift=0 makes
// it executed instructions / 25; "systick" on Cortex-M; "ns" on the host).
uint64_t board_counter(void);
const char* board_counter_name(void);
const char* board_target_name(void);

#ifdef __cplusplus
}
#endif
