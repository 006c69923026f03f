#include "mcullm/status.h"

#include <stdio.h>
#include <string.h>

namespace mcullm {

const char* code_name(Code code) {
  switch (code) {
    case Code::kOk: return "ok";
    case Code::kInvalidArgument: return "invalid argument";
    case Code::kNotFound: return "not found";
    case Code::kCorrupt: return "corrupt";
    case Code::kUnsupported: return "unsupported";
    case Code::kOutOfMemory: return "out of memory";
    case Code::kOutOfRange: return "out of range";
    case Code::kIo: return "i/o error";
    case Code::kInternal: return "internal error";
  }
  return "unknown";
}

Status Status::ErrorV(Code code, const char* fmt, va_list args) {
  Status s;
  s.code_ = code == Code::kOk ? Code::kInternal : code;
  vsnprintf(s.message_, sizeof(s.message_), fmt, args);
  return s;
}

Status Status::Error(Code code, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  Status s = ErrorV(code, fmt, args);
  va_end(args);
  return s;
}

Status& Status::prefix(const char* fmt, ...) {
  char head[kMaxMessage];
  va_list args;
  va_start(args, fmt);
  vsnprintf(head, sizeof(head), fmt, args);
  va_end(args);
  // head then the old message, cut to fit
  char joined[kMaxMessage];
  size_t n = strlen(head);
  memcpy(joined, head, n);
  const size_t rest = strnlen(message_, kMaxMessage - 1);
  const size_t take = rest < kMaxMessage - 1 - n ? rest : kMaxMessage - 1 - n;
  memcpy(joined + n, message_, take);
  joined[n + take] = '\0';
  memcpy(message_, joined, sizeof(message_));
  return *this;
}

}  // namespace mcullm
