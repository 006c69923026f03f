/* The C library of the LX7 target (board.c): only what the core and the board runner use. */
#pragma once
#include <stdarg.h>
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif
typedef struct lx7_file FILE;  /* stdout and stderr are the semihosting console */
extern FILE* const stdout;
extern FILE* const stderr;
int printf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
int snprintf(char* buf, size_t size, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
int vsnprintf(char* buf, size_t size, const char* fmt, va_list args);
int fflush(FILE* f);
int puts(const char* s);
int putchar(int c);
#ifdef __cplusplus
}
#endif
