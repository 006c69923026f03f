/* picolibc on QEMU's Xtensa "sim" machine: stdio and POSIX files over semihosting (SIMCALL: call
 * number in a2, arguments in a3..a5, result in a2, errno in a3; QEMU needs -semihosting), the C
 * runtime start (bss, constructors, argv from -semihosting-config arg=...), and the runner's counter. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "platform.h"

enum { kExit = 1, kRead = 3, kWrite = 4, kOpen = 5, kClose = 6, kLseek = 19, kArgc = 1000, kArgvSize = 1001, kArgv = 1002 };

static int simcall(int nr, int a, int b, int c) {
  register int a2 __asm__("a2") = nr;
  register int a3 __asm__("a3") = a;
  register int a4 __asm__("a4") = b;
  register int a5 __asm__("a5") = c;
  __asm__ volatile("simcall" : "+r"(a2), "+r"(a3) : "r"(a4), "r"(a5) : "memory");
  if (a2 == -1) errno = a3;
  return a2;
}

/* stdout and stderr: one buffer, written out at '\n', when full, before file writes and at exit */
static char out_buf[512];
static int out_len;
static int out_flush(FILE* f) {
  (void)f;
  if (out_len) simcall(kWrite, 1, (int)out_buf, out_len);
  out_len = 0;
  return 0;
}
static int out_putc(char c, FILE* f) {
  out_buf[out_len++] = c;
  if (c == '\n' || out_len == (int)sizeof out_buf) out_flush(f);
  return (unsigned char)c;
}
static int in_getc(FILE* f) {
  (void)f;
  unsigned char c;
  return simcall(kRead, 0, (int)&c, 1) == 1 ? c : EOF;
}
static FILE console = FDEV_SETUP_STREAM(out_putc, in_getc, out_flush, _FDEV_SETUP_RW);
FILE* const stdin = &console;
FILE* const stdout = &console;
FILE* const stderr = &console;

ssize_t write(int fd, const void* b, size_t n) {
  if (fd == 1 || fd == 2) out_flush(stdout);
  return simcall(kWrite, fd, (int)b, (int)n);
}
ssize_t read(int fd, void* b, size_t n) { return simcall(kRead, fd, (int)b, (int)n); }
int open(const char* path, int flags, ...) {
  /* the host is Linux and QEMU passes the flags through: translate picolibc's bits */
  int host = flags & O_ACCMODE;
  if (flags & O_CREAT) host |= 0100;
  if (flags & O_EXCL) host |= 0200;
  if (flags & O_TRUNC) host |= 01000;
  if (flags & O_APPEND) host |= 02000;
  return simcall(kOpen, (int)path, host, 0644);
}
int close(int fd) { return simcall(kClose, fd, 0, 0); }
off_t lseek(int fd, off_t off, int whence) { return simcall(kLseek, fd, (int)off, whence); }
void _exit(int status) {
  out_flush(stdout);
  for (;;) simcall(kExit, status, 0, 0);
}

/* abort() raises SIGABRT: end the run with 128 + the signal, as a host shell reports it */
int getpid(void) { return 1; }
int kill(int pid, int sig) {
  (void)pid;
  _exit(128 + sig);
}

/* CCOUNT: with QEMU -icount shift=0 each instruction is 1 ns of virtual time and the lx106 runs
 * at 40 MHz, so CCOUNT * 25 = executed instructions (25-instruction resolution). 32 bits wrap:
 * the runner only takes differences well below 2^32. */
uint64_t board_counter(void) {
  uint32_t c;
  __asm__ volatile("rsr.ccount %0" : "=r"(c));
  static uint32_t last;
  static uint64_t high;
  if (c < last) high += 1ull << 32;
  last = c;
  return high | c;
}
const char* board_counter_name(void) { return "ccount"; }
uint32_t board_instructions_per_count(void) { return 25; }
const char* board_target_name(void) { return "xtensa-lx106"; }

extern char __bss_start[], __bss_end[];
extern void __libc_init_array(void);
extern int main(int, char**);

void board_start(void) __attribute__((noreturn));
void board_start(void) {
  memset(__bss_start, 0, (size_t)(__bss_end - __bss_start));
  __libc_init_array();
  int argc = simcall(kArgc, 0, 0, 0);
  int size = simcall(kArgvSize, 0, 0, 0);
  if (argc < 0 || size < 0) {
    argc = 0;
    size = 8;
  }
  uint32_t args[(size + 3) / 4 + 1];
  char** argv = (char**)args;
  argv[0] = 0;
  if (argc > 0) simcall(kArgv, (int)args, 0, 0);
  exit(main(argc, argv));
}
