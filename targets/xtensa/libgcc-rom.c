/* The 64-bit integer helpers Debian's lx106 libgcc lacks, on top of those it has
 * (__udivmoddi4, __divmoddi4) and lib1funcs.S's __umulsidi3. */
#include <stdint.h>

extern uint64_t __udivmoddi4(uint64_t, uint64_t, uint64_t*);
extern int64_t __divmoddi4(int64_t, int64_t, int64_t*);
extern uint64_t __umulsidi3(uint32_t, uint32_t);

uint64_t __udivdi3(uint64_t a, uint64_t b) { return __udivmoddi4(a, b, 0); }
uint64_t __umoddi3(uint64_t a, uint64_t b) {
  uint64_t r;
  __udivmoddi4(a, b, &r);
  return r;
}
int64_t __divdi3(int64_t a, int64_t b) {
  int64_t r;
  return __divmoddi4(a, b, &r);
}
/* low 64 bits of a * b: the full low product plus the two cross terms (mod 2^32) in the high word */
uint64_t __muldi3(uint64_t a, uint64_t b) {
  const uint32_t al = (uint32_t)a, ah = (uint32_t)(a >> 32), bl = (uint32_t)b, bh = (uint32_t)(b >> 32);
  const uint64_t low = __umulsidi3(al, bl);
  const uint32_t high = (uint32_t)(low >> 32) + al * bh + ah * bl;
  return ((uint64_t)high << 32) | (uint32_t)low;
}
