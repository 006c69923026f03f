/* Cortex-M on QEMU mps2 boards with newlib's rdimon (semihosting). QEMU loads SP and PC from the
 * vector table at address 0 (it ignores the ELF entry on M-profile). Reset enables the FPU and
 * SysTick, then enters newlib's crt0 _start (SYS_HEAPINFO stack and heap, bss, argv from
 * SYS_GET_CMDLINE, constructors, main, exit with SYS_EXIT_EXTENDED: the exact exit code).
 * A fault prints its CFSR and exits with 99. */
#include <stdint.h>

#include "platform.h"

extern void _start(void);
extern uint32_t __stack_top[];
extern void _exit(int) __attribute__((noreturn));

#define SYST_CSR (*(volatile uint32_t*)0xE000E010)
#define SYST_RVR (*(volatile uint32_t*)0xE000E014)
#define SYST_CVR (*(volatile uint32_t*)0xE000E018)

static volatile uint32_t systick_wraps;

void Reset_Handler(void) __attribute__((noreturn));
void Reset_Handler(void) {
#if defined(__ARM_FP)
  *(volatile uint32_t*)0xE000ED88 |= 0xFu << 20; /* CPACR: CP10, CP11 full access */
  __asm volatile("dsb\n\tisb" ::: "memory");
#endif
  SYST_RVR = 0xFFFFFF; /* free-running 24-bit down counter on the CPU clock, an interrupt per wrap */
  SYST_CVR = 0;
  SYST_CSR = 7;
  _start();
  for (;;) {
  }
}

static void SysTick_Handler(void) { systick_wraps = systick_wraps + 1; }

/* SysTick ticks of the CPU clock (with QEMU -icount the clock follows executed instructions). */
uint64_t board_counter(void) {
  uint32_t wraps, value;
  do {
    wraps = systick_wraps;
    value = SYST_CVR;
  } while (wraps != systick_wraps);
  return ((uint64_t)wraps << 24) + (0xFFFFFFu - value);
}
const char* board_counter_name(void) { return "systick"; }
uint32_t board_instructions_per_count(void) { return 40; }
const char* board_target_name(void) { return "cortex-m7"; }

static void write0(const char* s) { /* SYS_WRITE0: works whatever state stdio is in */
  register int r0 __asm__("r0") = 0x04;
  register const char* r1 __asm__("r1") = s;
  __asm volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
}

static void Fault_Handler(void) {
  static const char hex[] = "0123456789abcdef";
  char msg[] = "\nboard: CPU fault, CFSR=xxxxxxxx\n";
  const uint32_t cfsr = *(volatile uint32_t*)0xE000ED28;
  for (int i = 0; i < 8; ++i) msg[24 + i] = hex[(cfsr >> (28 - 4 * i)) & 15];
  write0(msg);
  _exit(99);
}

__attribute__((section(".vectors"), used)) void (*const vector_table[16])(void) = {
    (void (*)(void))(uintptr_t)__stack_top,
    Reset_Handler,
    Fault_Handler, /* NMI */
    Fault_Handler, /* HardFault */
    Fault_Handler, /* MemManage */
    Fault_Handler, /* BusFault */
    Fault_Handler, /* UsageFault */
    0, 0, 0, 0,
    Fault_Handler, /* SVC */
    Fault_Handler, /* DebugMon */
    0,
    Fault_Handler, /* PendSV */
    SysTick_Handler,
};
