/* The C library of the LX7 target (board.c). malloc is a bump allocator; free does nothing. */
#pragma once
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif
void* malloc(size_t n);
void* calloc(size_t n, size_t size);
void free(void* p);
void exit(int status) __attribute__((noreturn));
void _exit(int status) __attribute__((noreturn));
void abort(void) __attribute__((noreturn));
#ifdef __cplusplus
}
#endif
