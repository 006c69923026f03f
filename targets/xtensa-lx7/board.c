/* The C library and board glue of the LX7 target (QEMU -M sim -cpu de233_fpu), just what the core
 * and the board runner use: stdout and host files over semihosting, a bump malloc, the string
 * functions, printf & co. (their variadic entries are start.s stubs: LLVM 22 miscompiles va_arg
 * for Xtensa), 64-bit division, the C runtime start and the runner's counter (platform.h).
 * Compiled with -ffreestanding so that clang does not turn these loops back into calls to them. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "platform.h"

/* ---- semihosting (QEMU target/xtensa/xtensa-semi.c): call in a2, arguments in a3..a5, result
 * in a2, errno in a3; LLVM's assembler has no "simcall" mnemonic ---- */
enum { kExit = 1, kRead = 3, kWrite = 4, kOpen = 5, kClose = 6, kLseek = 19, kArgc = 1000, kArgvSize = 1001, kArgv = 1002 };

static int simcall(int call, int a, int b, int c) {
  register int a2 __asm__("a2") = call;
  register int a3 __asm__("a3") = a;
  register int a4 __asm__("a4") = b;
  register int a5 __asm__("a5") = c;
  __asm__ volatile(".byte 0x00, 0x51, 0x00" : "+r"(a2), "+r"(a3) : "r"(a4), "r"(a5) : "memory");
  return a2;
}

/* stdout and stderr share one line buffer, written at '\n', when full, before file writes and at exit */
struct lx7_file { int unused; };
static struct lx7_file console;
FILE* const stdout = &console;
FILE* const stderr = &console;
static char out_buf[256];
static unsigned out_len;

int fflush(FILE* f) {
  (void)f;
  if (out_len) simcall(kWrite, 1, (int)out_buf, (int)out_len);
  out_len = 0;
  return 0;
}
static void console_put(char c) {
  out_buf[out_len++] = c;
  if (c == '\n' || out_len == sizeof out_buf) fflush(stdout);
}

ssize_t write(int fd, const void* buf, size_t n) {
  if (fd == 1 || fd == 2) fflush(stdout);
  return simcall(kWrite, fd, (int)buf, (int)n);
}
ssize_t read(int fd, void* buf, size_t n) { return simcall(kRead, fd, (int)buf, (int)n); }
int open(const char* path, int flags, ...) { return simcall(kOpen, (int)path, flags, 0644); }  /* flags: Linux's */
int close(int fd) { return simcall(kClose, fd, 0, 0); }
off_t lseek(int fd, off_t off, int whence) { return simcall(kLseek, fd, (int)off, whence); }

void _exit(int status) {
  fflush(stdout);
  for (;;) simcall(kExit, status, 0, 0);
}
void exit(int status) { _exit(status); }
void abort(void) { _exit(128 + 6); } /* as a shell reports SIGABRT, like the lx106 target */

/* C++ static destructors never run on the board */
void* __dso_handle;
int __cxa_atexit(void (*fn)(void*), void* arg, void* dso) {
  (void)fn, (void)arg, (void)dso;
  return 0;
}

/* ---- memory: a bump allocator between the end of .bss and the stack (sim.ld) ---- */
extern char __heap_start[], __heap_end[];
static char* heap_top = __heap_start;

void* malloc(size_t n) {
  char* p = (char*)(((uintptr_t)heap_top + 15) & ~(uintptr_t)15);
  if (n > (size_t)(__heap_end - p)) return 0;
  heap_top = p + n;
  return p;
}
void* calloc(size_t n, size_t size) {
  if (size && n > (size_t)-1 / size) return 0;
  void* p = malloc(n * size);
  if (p) memset(p, 0, n * size);
  return p;
}
void free(void* p) { (void)p; }

/* ---- strings ---- */
void* memcpy(void* dst, const void* src, size_t n) {
  char* d = dst;
  const char* s = src;
  if ((((uintptr_t)d | (uintptr_t)s | n) & 3) == 0) {
    for (; n; n -= 4, d += 4, s += 4) *(uint32_t*)d = *(const uint32_t*)s;
    return dst;
  }
  while (n--) *d++ = *s++;
  return dst;
}
void* memmove(void* dst, const void* src, size_t n) {
  char* d = dst;
  const char* s = src;
  if (d <= s || d >= s + n) return memcpy(dst, src, n);
  while (n--) d[n] = s[n];
  return dst;
}
void* memset(void* dst, int c, size_t n) {
  unsigned char* d = dst;
  if ((((uintptr_t)d | n) & 3) == 0) {  /* words, as memcpy: the kernels zero float arrays */
    const uint32_t w = 0x01010101u * (unsigned char)c;
    for (; n; n -= 4, d += 4) *(uint32_t*)d = w;
    return dst;
  }
  while (n--) *d++ = (unsigned char)c;
  return dst;
}
int memcmp(const void* a, const void* b, size_t n) {
  const unsigned char *x = a, *y = b;
  for (; n; --n, ++x, ++y)
    if (*x != *y) return *x - *y;
  return 0;
}
void* memchr(const void* s, int c, size_t n) {
  const unsigned char* p = (const unsigned char*)s;
  for (; n; --n, ++p)
    if (*p == (unsigned char)c) return (void*)p;
  return NULL;
}
size_t strlen(const char* s) { return strnlen(s, (size_t)-1); }
size_t strnlen(const char* s, size_t max) {
  size_t n = 0;
  while (n < max && s[n]) ++n;
  return n;
}
int strncmp(const char* a, const char* b, size_t n) {
  for (; n; --n, ++a, ++b)
    if (*a != *b || !*a) return (unsigned char)*a - (unsigned char)*b;
  return 0;
}
int strcmp(const char* a, const char* b) { return strncmp(a, b, (size_t)-1); }
char* strchr(const char* s, int c) {
  for (;; ++s) {
    if (*s == (char)c) return (char*)s;
    if (!*s) return 0;
  }
}

/* ---- 64-bit division (LLVM calls these; the shifts come from libgcc's lib1funcs, mk-rt.sh) ---- */
static uint64_t udivmod64(uint64_t n, uint64_t d, uint64_t* rem) {
  if (d == 0) __builtin_trap();
  uint64_t q = 0, r = 0;
  if ((n >> 32) == 0 && (d >> 32) == 0) { /* the common case: the hardware divider (quou / remu) */
    q = (uint32_t)n / (uint32_t)d;
    r = (uint32_t)n % (uint32_t)d;
  } else {
    for (int i = 63; i >= 0; --i) { /* restoring division, one quotient bit per step */
      r = (r << 1) | ((n >> i) & 1);
      if (r >= d) {
        r -= d;
        q |= (uint64_t)1 << i;
      }
    }
  }
  if (rem) *rem = r;
  return q;
}
uint64_t __udivdi3(uint64_t n, uint64_t d) { return udivmod64(n, d, 0); }
uint64_t __umoddi3(uint64_t n, uint64_t d) {
  uint64_t r;
  udivmod64(n, d, &r);
  return r;
}
static uint64_t magnitude(int64_t v) { return v < 0 ? 0 - (uint64_t)v : (uint64_t)v; }
int64_t __divdi3(int64_t n, int64_t d) {
  const uint64_t q = udivmod64(magnitude(n), magnitude(d), 0);
  return (n < 0) != (d < 0) ? (int64_t)(0 - q) : (int64_t)q;
}
int64_t __moddi3(int64_t n, int64_t d) {
  uint64_t r;
  udivmod64(magnitude(n), magnitude(d), &r);
  return n < 0 ? (int64_t)(0 - r) : (int64_t)r;
}
/* the low 64 bits of a * b (de233_fpu has no mul32high): 16 x 16 partial products */
static uint64_t mul32x32(uint32_t a, uint32_t b) {
  const uint32_t al = a & 0xffff, ah = a >> 16, bl = b & 0xffff, bh = b >> 16;
  const uint32_t ll = al * bl, lh = al * bh, hl = ah * bl, hh = ah * bh;
  const uint32_t mid = (ll >> 16) + (lh & 0xffff) + (hl & 0xffff);
  const uint32_t lo = (ll & 0xffff) | (mid << 16);
  const uint32_t hi = hh + (lh >> 16) + (hl >> 16) + (mid >> 16);
  return ((uint64_t)hi << 32) | lo;
}
uint64_t __muldi3(uint64_t a, uint64_t b) {
  const uint32_t al = (uint32_t)a, ah = (uint32_t)(a >> 32), bl = (uint32_t)b, bh = (uint32_t)(b >> 32);
  const uint64_t low = mul32x32(al, bl);
  return low + ((uint64_t)(al * bh + ah * bl) << 32);
}

/* ---- printf & co. ---- */
/* The arguments as the start.s stubs hand them over: a2..a7 as saved, and the caller's stack
 * arguments. GCC's rules (which LLVM's callers follow): a 64-bit value takes an even register
 * pair; once a value does not fit in the registers it and every later one are on the stack, each
 * aligned to its size. Twelve bytes, so a va_list (also twelve bytes) can carry it. */
typedef struct {
  const uint32_t* reg;
  const uint32_t* stack;
  int next; /* the next register (index into reg); 6: the stack */
} Args;
_Static_assert(sizeof(Args) <= sizeof(va_list), "Args travels inside a va_list");

static uint32_t arg32(Args* a) {
  if (a->next < 6) return a->reg[a->next++];
  return *a->stack++;
}
static uint64_t arg64(Args* a) {
  const uint32_t* p;
  a->next += a->next & 1;
  if (a->next <= 4) {
    p = a->reg + a->next;
    a->next += 2;
  } else {
    a->next = 6;
    a->stack += ((uintptr_t)a->stack & 4) >> 2;
    p = a->stack;
    a->stack += 2;
  }
  return (uint64_t)p[0] | (uint64_t)p[1] << 32;
}

typedef struct {
  char* buf; /* 0: the console */
  size_t cap, len;
} Sink;
static void put(Sink* s, char c) {
  if (!s->buf) console_put(c);
  else if (s->len + 1 < s->cap) s->buf[s->len] = c;
  ++s->len;
}
static void put_padded(Sink* s, const char* text, size_t n, int width, int left, char pad) {
  size_t fill = width > 0 && (size_t)width > n ? (size_t)width - n : 0;
  if (pad == '0' && n && (*text == '-' || *text == '+')) { /* the sign goes before the zeros */
    put(s, *text++);
    --n;
  }
  if (!left) while (fill) put(s, pad), --fill;
  while (n--) put(s, *text++);
  while (fill) put(s, ' '), --fill;
}

/* digits of v in base (10 or 16) before `end`; returns the first digit */
static char* utoa64(uint64_t v, unsigned base, int upper, char* end) {
  const char* digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  do {
    *--end = digits[v % base];
    v /= base;
  } while (v);
  return end;
}

/* %f %e %g: good to the last printed digit or so (error messages only; no fingerprint uses them) */
static int format_float(double v, char conv, int prec, int alt, char* out) {
  char* o = out;
  if (v != v) return (int)(memcpy(out, "nan", 3), 3);
  if (v < 0) *o++ = '-', v = -v;
  if (v > 1.7976931348623157e308) return (int)((memcpy(o, "inf", 3), o + 3) - out);
  if (prec < 0) prec = 6;
  if (prec > 17) prec = 17;
  int exp10 = 0;
  double m = v;
  if (m != 0) {
    while (m >= 10) m /= 10, ++exp10;
    while (m < 1) m *= 10, --exp10;
  }
  int strip = 0;
  if (conv == 'g') {
    if (prec == 0) prec = 1;
    strip = !alt;
    /* rounding to prec digits may carry into a new leading digit (9.9999996 -> 10.0000) */
    double r = m, bound = 1;
    for (int i = 1; i < prec; ++i) r *= 10, bound *= 10;
    const int e = exp10 + (r + 0.5 >= bound * 10);
    if (e >= -4 && e < prec) conv = 'f', prec = prec - 1 - e;
    else conv = 'e', prec = prec - 1;
  }
  double scaled = conv == 'e' ? m : v;
  for (int i = 0; i < prec; ++i) scaled *= 10;
  if (scaled >= 1.8e19) return (int)((memcpy(o, "big", 3), o + 3) - out);
  uint64_t digits = (uint64_t)(scaled + 0.5);
  if (conv == 'e') {
    uint64_t bound = 1;
    for (int i = 0; i <= prec; ++i) bound *= 10;
    if (digits >= bound) digits /= 10, ++exp10;
  }
  char tmp[32];
  char* end = tmp + sizeof tmp;
  char* d = utoa64(digits, 10, 0, end);
  while (end - d <= prec) *--d = '0'; /* at least one digit before the point */
  const char* point = end - prec;
  while (d < point) *o++ = *d++;
  if (prec || alt) {
    char* dot = o;
    *o++ = '.';
    while (d < end) *o++ = *d++;
    if (strip) {
      while (o[-1] == '0') --o;
      if (o[-1] == '.') o = dot;
    }
  }
  if (conv == 'e') {
    *o++ = 'e';
    *o++ = exp10 < 0 ? '-' : '+';
    unsigned e = (unsigned)(exp10 < 0 ? -exp10 : exp10);
    if (e >= 100) *o++ = (char)('0' + e / 100);
    *o++ = (char)('0' + e / 10 % 10);
    *o++ = (char)('0' + e % 10);
  }
  return (int)(o - out);
}

/* printf's format language, enough for the core: flags - 0 # + space, width and precision (also
 * *), lengths hh h l ll z j t, conversions d i u x X o c s p f e g %. */
static int format(Sink* s, const char* f, Args* a) {
  for (; *f; ++f) {
    if (*f != '%') {
      put(s, *f);
      continue;
    }
    int left = 0, zero = 0, alt = 0, width = 0, prec = -1, longs = 0;
    char sign = 0;
    for (;; ++f) {
      if (f[1] == '-') left = 1;
      else if (f[1] == '0') zero = 1;
      else if (f[1] == '#') alt = 1;
      else if (f[1] == '+' || f[1] == ' ') sign = sign == '+' ? '+' : f[1];
      else break;
    }
    ++f;
    if (*f == '*') {
      width = (int)arg32(a), ++f;
      if (width < 0) left = 1, width = -width;
    } else {
      while (*f >= '0' && *f <= '9') width = width * 10 + (*f++ - '0');
    }
    if (*f == '.') {
      prec = 0, ++f;
      if (*f == '*') prec = (int)arg32(a), ++f;
      else
        while (*f >= '0' && *f <= '9') prec = prec * 10 + (*f++ - '0');
    }
    while (*f == 'h' || *f == 'l' || *f == 'z' || *f == 'j' || *f == 't') longs += *f == 'j' ? 2 : *f == 'l', ++f;
    char tmp[48];
    char* end = tmp + sizeof tmp;
    char* text = end;
    const char pad = zero && !left ? '0' : ' ';
    switch (*f) {
      case 'd': case 'i': case 'u': case 'x': case 'X': case 'o': case 'p': {
        const int is_signed = *f == 'd' || *f == 'i';
        uint64_t v = longs >= 2 ? arg64(a) : is_signed ? (uint64_t)(int64_t)(int32_t)arg32(a) : arg32(a);
        const int neg = is_signed && (int64_t)v < 0;
        if (neg) v = 0 - v;
        const unsigned base = *f == 'o' ? 8 : (*f == 'x' || *f == 'X' || *f == 'p') ? 16 : 10;
        text = utoa64(v, base, *f == 'X', end);
        if (prec >= 0) {
          while (end - text < prec) *--text = '0';
          if (prec == 0 && v == 0) text = end;
        }
        if ((alt && v && (*f == 'x' || *f == 'X')) || *f == 'p') *--text = *f == 'X' ? 'X' : 'x', *--text = '0';
        if (neg) *--text = '-';
        else if (sign && is_signed) *--text = sign;
        put_padded(s, text, (size_t)(end - text), width, left, prec >= 0 ? ' ' : pad);
        break;
      }
      case 'c':
        tmp[0] = (char)arg32(a);
        put_padded(s, tmp, 1, width, left, ' ');
        break;
      case 's': {
        const char* str = (const char*)arg32(a);
        if (!str) str = "(null)";
        put_padded(s, str, strnlen(str, prec >= 0 ? (size_t)prec : (size_t)-1), width, left, ' ');
        break;
      }
      case 'f': case 'e': case 'g': {
        const uint64_t bits = arg64(a);
        double v;
        memcpy(&v, &bits, sizeof v);
        text = tmp;
        if (sign && !(v < 0)) *text++ = sign;
        text += format_float(v, *f, prec, alt, text);
        put_padded(s, tmp, (size_t)(text - tmp), width, left, pad);
        break;
      }
      case '%': put(s, '%'); break;
      default: return -1;
    }
  }
  return 0;
}

static int sink_done(Sink* s, int rc) {
  if (s->buf && s->cap) s->buf[s->len < s->cap ? s->len : s->cap - 1] = '\0';
  return rc < 0 ? rc : (int)s->len;
}
static int format_to(char* buf, size_t cap, const char* fmt, Args* a) {
  Sink s = {buf, cap, 0};
  return sink_done(&s, format(&s, fmt, a));
}

/* what the start.s stubs call: reg = the stub's a2..a7, stack = its caller's stack arguments */
int lx7_printf(const uint32_t* reg, const uint32_t* stack) {
  Args a = {reg, stack, 1};
  Sink s = {0, 0, 0};
  return sink_done(&s, format(&s, (const char*)reg[0], &a));
}
int lx7_snprintf(const uint32_t* reg, const uint32_t* stack) {
  Args a = {reg, stack, 3};
  return format_to((char*)reg[0], reg[1], (const char*)reg[2], &a);
}
/* a va_list here is an Args that lx7_args_to_va_list packed */
int vsnprintf(char* buf, size_t size, const char* fmt, va_list args) {
  Args a;
  memcpy(&a, &args, sizeof a);
  return format_to(buf, size, fmt, &a);
}
void lx7_args_to_va_list(const uint32_t* reg, const uint32_t* stack, int first, va_list* out) {
  Args a = {reg, stack, first};
  memcpy(out, &a, sizeof a);
}
int putchar(int c) {
  console_put((char)c);
  return (unsigned char)c;
}
int puts(const char* s) {
  while (*s) console_put(*s++);
  console_put('\n');
  return 0;
}

/* ---- math: the FPU's square-root sequence (GCC's libgcc, mk-rt.sh), correctly rounded ---- */
float __ieee754_sqrtf(float x);
float sqrtf(float x) { return __ieee754_sqrtf(x); }

static uint32_t core_id(void);
static void core0_account(void);

/* ---- the runner's counter: CCOUNT. Under QEMU -icount shift=0 each instruction is 1 ns of
 * virtual time; de233_fpu's CCOUNT runs at 40 MHz, so CCOUNT * 25 = instructions executed ---- */
uint64_t board_counter(void) {
  static uint32_t last;
  static uint64_t high;
  uint32_t c;
  __asm__ volatile("rsr %0, ccount" : "=r"(c));
  if (c < last) high += (uint64_t)1 << 32;
  last = c;
  if (core_id() == 0) core0_account(); /* ICOUNT must not wrap: read it at every step */
  return high | c;
}
const char* board_counter_name(void) { return "ccount"; }

/* ---- two cores (QEMU -smp 2): core 1 runs lx7_second_core, a worker spinning on a mailbox ----
 * Each core counts its own executed instructions in ICOUNT (the debug option's counter; start.s
 * enables it at every level below 15). Under -smp 2, CCOUNT is shared virtual time (the sum of both
 * cores' instructions), so the per-core figures come from ICOUNT: a core's work is its instructions
 * minus those it spent waiting for the other, and the critical path is core 0's work plus, for each
 * job, how much longer core 1 took than core 0's share (what core 0 would have waited on a board). */
static uint32_t core_id(void) {
  uint32_t p;
  __asm__ volatile("rsr %0, prid" : "=r"(p));
  return p;
}
/* The calling core's instructions since the last call (ICOUNT read and cleared; it must not wrap:
 * reaching 0 raises a debug exception, so every caller reads it at least every 2^32 instructions). */
static uint32_t icount_take(void) {
  uint32_t n, zero = 0;
  __asm__ volatile("rsr %0, icount\n\twsr %1, icount\n\tisync" : "=&r"(n) : "r"(zero) : "memory");
  return n;
}
/* Under QEMU's round-robin TCG a CPU keeps running until its time slice ends, and with no timer
 * armed a slice can last 2^31 instructions; arming CCOMPARE0 a few cycles ahead ends the slice, so
 * the other core runs while this one waits. (The interrupt stays disabled: INTENABLE is 0.) */
static void spin_pause(void) {
  uint32_t c;
  __asm__ volatile("rsr %0, ccount" : "=r"(c));
  c += 2;
  __asm__ volatile("wsr %0, ccompare0\n\tisync" : : "r"(c) : "memory");
}
static inline void memory_barrier(void) { __asm__ volatile("memw" : : : "memory"); }

static struct {  /* in .data: core 1 reads it before core 0 has cleared .bss */
  volatile uint32_t posted, done;     /* jobs handed to core 1 / finished by it */
  void (*volatile job)(void*);
  void* volatile arg;
  volatile uint32_t job_instructions; /* core 1's instructions in the last job */
  volatile uint32_t core1_up;
} mailbox __attribute__((section(".data")));
static uint64_t core0_work, core1_work, path_extra, core0_at_start;

void lx7_second_core(void) __attribute__((noreturn));
void lx7_second_core(void) {
  uint32_t seen = mailbox.posted; /* .data, not .bss: core 0 may be clearing .bss right now */
  mailbox.core1_up = 1;
  for (;;) {
    while (mailbox.posted == seen) {
      spin_pause();
      icount_take(); /* waiting is not work (and ICOUNT must not wrap) */
    }
    seen = mailbox.posted;
    memory_barrier();
    icount_take();
    mailbox.job(mailbox.arg);
    mailbox.job_instructions = icount_take();
    memory_barrier();
    mailbox.done = seen;
  }
}

static void core0_account(void) { core0_work += icount_take(); }

int board_second_core_available(void) {
  for (int i = 0; i < 1000 && !mailbox.core1_up; ++i) spin_pause(); /* let core 1 get its first slice */
  return mailbox.core1_up;
}
void board_second_core_start(void (*job)(void*), void* arg) {
  core0_account();
  core0_at_start = core0_work;
  mailbox.job = job;
  mailbox.arg = arg;
  memory_barrier();
  mailbox.posted = mailbox.posted + 1;
}
void board_second_core_wait(void) {
  core0_account();
  const uint64_t own_share = core0_work - core0_at_start;
  while (mailbox.done != mailbox.posted) {
    spin_pause();
    icount_take(); /* waiting is not work */
  }
  memory_barrier();
  const uint32_t other = mailbox.job_instructions;
  core1_work += other;
  if (other > own_share) path_extra += other - own_share;
}
uint64_t board_core_instructions(int which) {
  if (core_id() == 0) core0_account();
  switch (which) {
    case 0: return core0_work;
    case 1: return core1_work;
    default: return core0_work + path_extra;
  }
}
uint32_t board_instructions_per_count(void) { return 25; }
const char* board_target_name(void) { return "esp32-lx7"; }

/* ---- the C runtime start, called by start.s ---- */
extern char __bss_start[], __bss_end[];
extern void (*__init_array_start[])(void);
extern void (*__init_array_end[])(void);
int main(int argc, char** argv);

void lx7_start(void) __attribute__((noreturn));
void lx7_start(void) {
  memset(__bss_start, 0, (size_t)(__bss_end - __bss_start));
  for (void (**f)(void) = __init_array_start; f != __init_array_end; ++f) (*f)();
  int argc = simcall(kArgc, 0, 0, 0);
  const int size = simcall(kArgvSize, 0, 0, 0);
  char** argv = 0;
  if (argc > 0 && size > 0 && (argv = malloc((size_t)size))) simcall(kArgv, (int)argv, 0, 0);
  else argc = 0;
  exit(main(argc, argv));
}
