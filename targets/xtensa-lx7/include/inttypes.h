/* The C library of the LX7 target: the printf format macros the core's messages use, taken from the
 * compiler's predefined ones (clang's __UINT32_FMTu__ and kin), so they match its own uint32_t. */
#pragma once
#include <stdint.h>
#define PRId32 __INT32_FMTd__
#define PRIi32 __INT32_FMTi__
#define PRIu32 __UINT32_FMTu__
#define PRIx32 __UINT32_FMTx__
#define PRIX32 __UINT32_FMTX__
#define PRId64 __INT64_FMTd__
#define PRIu64 __UINT64_FMTu__
#define PRIx64 __UINT64_FMTx__
