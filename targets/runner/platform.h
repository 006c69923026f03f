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
// Executed instructions per counter unit when QEMU runs with -icount shift=0 (1 ns of virtual time
// per instruction): 25 on the lx106 (CCOUNT at 40 MHz), 40 on the mps2-an500 (SysTick at 25 MHz,
// measured with a loop of known length); 0 when the counter does not count instructions.
uint32_t board_instructions_per_count(void);

#ifdef __cplusplus
}
#endif
