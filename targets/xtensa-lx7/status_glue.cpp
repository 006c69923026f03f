// Status::Error and Status::prefix on the LX7 target. Both are variadic and LLVM 22 miscompiles
// va_start for Xtensa, so the link wraps them (--wrap) with start.s stubs that call these with the
// saved a2..a7 and the caller's stack arguments; the arguments then travel to src/core/status.cpp's
// ErrorV (not variadic itself) inside a va_list that board.c's vsnprintf unpacks.
#include <stdarg.h>
#include <stdint.h>

#include "mcullm/status.h"

using mcullm::Code;
using mcullm::Status;

extern "C" void lx7_args_to_va_list(const uint32_t* reg, const uint32_t* stack, int first, va_list* out);

// Status::Error(Code code, const char* fmt, ...): a2 = where the Status goes, a3 = code, a4 = fmt.
extern "C" Status* lx7_status_error(const uint32_t* reg, const uint32_t* stack) {
  va_list args;
  lx7_args_to_va_list(reg, stack, 3, &args);
  Status* out = reinterpret_cast<Status*>(reg[0]);
  *out = Status::ErrorV(static_cast<Code>(reg[1] & 0xff), reinterpret_cast<const char*>(reg[2]), args);
  return out;
}

// Status::prefix(const char* fmt, ...): a2 = this, a3 = fmt. The same text as status.cpp's (cut to
// the same length); only an ok Status would come out as "internal error" instead of ok.
extern "C" Status* lx7_status_prefix(const uint32_t* reg, const uint32_t* stack) {
  va_list args;
  lx7_args_to_va_list(reg, stack, 2, &args);
  Status* self = reinterpret_cast<Status*>(reg[0]);
  const Status head = Status::ErrorV(Code::kInternal, reinterpret_cast<const char*>(reg[1]), args);
  *self = Status::Error(self->code(), "%s%s", head.message(), self->message());
  return self;
}
