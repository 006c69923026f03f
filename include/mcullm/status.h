// Status codes with a message: how every library function reports failure.
// Freestanding: no exceptions, no allocation; the message lives inside the object.
#pragma once
#include <stdarg.h>
#include <stddef.h>

namespace mcullm {

enum class Code : unsigned char {
  kOk = 0,
  kInvalidArgument,  // a caller passed something unusable (flag, shape, option)
  kNotFound,         // a key, tensor or file that should be there is not
  kCorrupt,          // bytes that contradict their own format (magic, bounds, sizes)
  kUnsupported,      // well-formed but not something we implement
  kOutOfMemory,      // an arena is full
  kOutOfRange,       // a position or id past a limit (context, vocabulary)
  kIo,               // the OS refused a read, write or map
  kInternal,
};

const char* code_name(Code code);

class Status {
 public:
  Status() : code_(Code::kOk) { message_[0] = '\0'; }
  static Status Ok() { return Status(); }
  static Status Error(Code code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  static Status ErrorV(Code code, const char* fmt, va_list args);

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const char* message() const { return message_; }

  // Prefixes context ("loading stories260K.bin: ") to the message, keeping the code.
  Status& prefix(const char* fmt, ...) __attribute__((format(printf, 2, 3)));

  static constexpr size_t kMaxMessage = 240;

 private:
  Code code_;
  char message_[kMaxMessage];
};

}  // namespace mcullm

#define MC_TRY(expr)                        \
  do {                                      \
    ::mcullm::Status mc_try_status_ = (expr); \
    if (!mc_try_status_.ok()) return mc_try_status_; \
  } while (0)
