/* Debian's newlib for arm-none-eabi is built without C99 printf formats: "%zu" prints "zu". The
 * core's status messages use %zu, so the Cortex-M build wraps vsnprintf (ld --wrap) and rewrites
 * the `z` length modifier to `l` (size_t and unsigned long are both 32 bits on this ABI). */
#include <stdarg.h>
#include <stddef.h>

int __real_vsnprintf(char* buf, size_t n, const char* fmt, va_list ap);

int __wrap_vsnprintf(char* buf, size_t n, const char* fmt, va_list ap) {
  char copy[256];
  size_t i = 0;
  int in_spec = 0;
  for (; fmt[i] && i + 1 < sizeof copy; ++i) {
    char c = fmt[i];
    if (in_spec) {
      if (c == 'z') c = 'l';
      else if (c != 'l' && c != 'h' && c != '.' && c != '-' && c != '+' && c != ' ' && c != '#' && c != '*' &&
               (c < '0' || c > '9'))
        in_spec = 0; /* the conversion character ends the spec */
    } else if (c == '%') {
      in_spec = 1;
    }
    copy[i] = c;
  }
  if (fmt[i]) return __real_vsnprintf(buf, n, fmt, ap); /* too long to copy: print as is */
  copy[i] = '\0';
  return __real_vsnprintf(buf, n, copy, ap);
}
