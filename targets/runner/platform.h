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

// A second core, where the target has one (the LX7 runner under QEMU -smp 2); the runner's defaults
// (main.cpp, weak) say there is none. start hands job(arg) to it and returns at once; wait spins
// until it has finished.
int board_second_core_available(void);
void board_second_core_start(void (*job)(void*), void* arg);
void board_second_core_wait(void);
// Instructions of work per core where the target counts them per core (0 elsewhere): which = 0
// core 0, 1 core 1 (waiting for the other core left out), 2 the critical path (core 0's work plus
// what core 0 would have waited for core 1).
uint64_t board_core_instructions(int which);

#ifdef __cplusplus
}
#endif
