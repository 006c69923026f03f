/* The XCHAL_* settings GCC's libgcc/config/xtensa sources test, for the LX7 QEMU emulates as
 * de233_fpu: windowed, single-precision FPU with the divide / square-root step instructions,
 * 32-bit multiply and divide. Unlike the ESP32-S3 it has no MUL32_HIGH (mulsh / muluh). */
#pragma once
#define XCHAL_HAVE_BE 0
#define XCHAL_HAVE_WINDOWED 1
#define XCHAL_HAVE_ABS 1
#define XCHAL_HAVE_ADDX 1
#define XCHAL_HAVE_NSA 1
#define XCHAL_HAVE_LOOPS 1
#define XCHAL_HAVE_MAC16 1
#define XCHAL_HAVE_MUL16 1
#define XCHAL_HAVE_MUL32 1
#define XCHAL_HAVE_MUL32_HIGH 0
#define XCHAL_HAVE_DIV32 1
#define XCHAL_NO_MUL 0
#define XCHAL_HAVE_FP 1
#define XCHAL_HAVE_FP_DIV 1
#define XCHAL_HAVE_FP_RECIP 1
#define XCHAL_HAVE_FP_SQRT 1
#define XCHAL_HAVE_FP_RSQRT 1
#define XCHAL_HAVE_DFP_DIV 0
#define XCHAL_HAVE_DFP_RECIP 0
#define XCHAL_HAVE_DFP_SQRT 0
#define XCHAL_HAVE_DFP_RSQRT 0
