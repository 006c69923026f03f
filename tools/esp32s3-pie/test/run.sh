#!/bin/bash
# Builds the PIE kernel test (pie_kernels_test.cpp + the kernels + the reference) with Debian's
# clang-22 for the ESP32-S3 (windowed ABI, FPU; PIE through the .byte macros) and runs it on the
# QEMU built by tools/esp32s3-qemu/build.sh.     run.sh QEMU_BINARY BUILD_DIR
# Needs: clang-22, binutils-xtensa-lx106 (its ld links, with --no-relax). Exit code = failures.
set -euo pipefail
QEMU=$1; B=$(realpath -m "$2")
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../../.." && pwd)
mkdir -p "$B"
# Compiled by route 3's xcc.sh and linked with its run-time helpers (targets/xtensa-lx7: clang-22 for
# the ESP32-style windowed-ABI LX7, with its workarounds for LLVM 22's Xtensa bugs); LX7 overrides
# that folder.
LX7=${LX7:-$ROOT/targets/xtensa-lx7}
XCC=$LX7/xcc.sh
[ -f "$B/rt/librt-lx7.a" ] || sh "$LX7/mk-rt.sh" "$B/rt"
CXXFLAGS="-O2 -ffunction-sections -fdata-sections -ffp-contract=off -fno-fast-math -std=gnu++20 -nostdinc++
  -fno-exceptions -fno-rtti -fno-threadsafe-statics -ffreestanding -DMCULLM_PIE=1 -I$ROOT/include -I$ROOT/src
  -nostdlibinc -isystem /usr/lib/xtensa-lx106-elf/include -isystem $(clang-22 -print-resource-dir)/include"
SRCS="$HERE/pie_kernels_test.cpp $ROOT/src/kernels/dispatch.cpp $ROOT/src/kernels/esp32s3/pie_table.cpp
  $(ls $ROOT/src/kernels/ref/*.cpp $ROOT/src/kernels/tl_lut.cpp $ROOT/src/quant/*.cpp) $ROOT/src/core/fmath.cpp"
OBJS=""
for s in $SRCS; do
  o="$B/$(basename "$s" .cpp).o"
  # shellcheck disable=SC2086
  sh "$XCC" "$s" "$o" $CXXFLAGS
  OBJS="$OBJS $o"
done
sh "$XCC" "$HERE/libc_min.c" "$B/libc_min.o" -O2 -ffreestanding -nostdlibinc -isystem "$(clang-22 -print-resource-dir)/include"
clang-22 --target=xtensa -mcpu=esp32 -c -x assembler -o "$B/start.o" "$HERE/start.s"
clang-22 --target=xtensa -E -P -x assembler-with-cpp -I"$ROOT/src" -o "$B/pie_kernels.s" "$ROOT/src/kernels/esp32s3/pie_kernels.S"
clang-22 --target=xtensa -mcpu=esp32 -c -o "$B/pie_kernels.o" "$B/pie_kernels.s"
# shellcheck disable=SC2086
xtensa-lx106-elf-ld --no-relax --gc-sections -T "$HERE/sim.ld" -o "$B/pie_kernels_test.elf" \
  "$B/start.o" "$B/pie_kernels.o" "$B/libc_min.o" $OBJS "$B/rt/librt-lx7.a"
timeout 600 "$QEMU" -M sim -cpu esp32s3 -m 64M -display none -monitor none -semihosting -icount shift=0 \
  -kernel "$B/pie_kernels_test.elf"
