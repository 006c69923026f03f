/* The C library of the LX7 target (board.c): host files over semihosting. */
#pragma once
#include <stddef.h>
#define SEEK_SET 0
#define SEEK_CUR 1
#define SEEK_END 2
typedef int ssize_t;
typedef long off_t;
#ifdef __cplusplus
extern "C" {
#endif
ssize_t read(int fd, void* buf, size_t n);
ssize_t write(int fd, const void* buf, size_t n);
off_t lseek(int fd, off_t off, int whence);
int close(int fd);
#ifdef __cplusplus
}
#endif
