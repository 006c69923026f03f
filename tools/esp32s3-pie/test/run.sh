#!/bin/bash
# Builds the PIE kernel test (pie_kernels_test.cpp + the PIE kernels + the reference) with route 3's
# clang-22 build for the ESP32-style LX7 (targets/xtensa-lx7: xcc.sh, its start-up, C library glue,
# run-time helpers and linker script), PIE through the .byte macros, and runs it on the QEMU built
# by tools/esp32s3-qemu/build.sh or Espressif's fork (build-fork.sh):     run.sh QEMU_BINARY BUILD_DIR
# LX7=DIR overrides targets/xtensa-lx7. Needs clang-22, binutils-xtensa-lx106, gcc-12-source.
# Exit code: the number of failing checks (0 = every PIE kernel gave the reference's bits).
set -euo pipefail
QEMU=$1; B=$(realpath -m "$2")
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../../.." && pwd)
LX7=${LX7:-$ROOT/targets/xtensa-lx7}
mkdir -p "$B"
[ -f "$B/rt/librt-lx7.a" ] || sh "$LX7/mk-rt.sh" "$B/rt"
FLAGS="-O2 -ffunction-sections -fdata-sections -ffp-contract=off -fno-fast-math -nostdlibinc -isystem $LX7/include
  -DMCULLM_PIE=1 -I$ROOT/include -I$ROOT/src -I$ROOT/targets/runner"
CXXONLY="-Wno-format -std=gnu++20 -nostdinc++ -fno-exceptions -fno-rtti -fno-threadsafe-statics"
OBJS=""
for s in "$HERE/pie_kernels_test.cpp" "$ROOT/src/kernels/dispatch.cpp" "$ROOT/src/kernels/esp32s3/pie_table.cpp" \
         "$ROOT"/src/kernels/ref/*.cpp "$ROOT/src/kernels/tl_lut.cpp" "$ROOT"/src/quant/*.cpp "$ROOT/src/core/fmath.cpp"; do
  o="$B/$(basename "$s" .cpp).o"
  # shellcheck disable=SC2086
  sh "$LX7/xcc.sh" "$s" "$o" $FLAGS $CXXONLY
  OBJS="$OBJS $o"
done
# shellcheck disable=SC2086
sh "$LX7/xcc.sh" "$LX7/board.c" "$B/board.o" $FLAGS -std=gnu11 -ffreestanding
clang-22 --target=xtensa -mcpu=esp32 -c -o "$B/start.o" "$LX7/start.s"
clang-22 --target=xtensa -E -P -x assembler-with-cpp -I"$ROOT/src" -o "$B/pie_kernels.s" "$ROOT/src/kernels/esp32s3/pie_kernels.S"
clang-22 --target=xtensa -mcpu=esp32 -c -o "$B/pie_kernels.o" "$B/pie_kernels.s"
# Espressif's fork (it has the machine esp32s3) gives -M sim -cpu esp32s3 its core's own memory map.
LDS=$LX7/sim.ld
if "$QEMU" -M help | grep -q '^esp32s3 '; then LDS=$LX7/sim-esp32s3.ld; fi
# shellcheck disable=SC2086
xtensa-lx106-elf-ld --no-relax -L "$LX7" -T "$LDS" --gc-sections --no-warn-rwx-segments -z noexecstack \
  -o "$B/pie_kernels_test.elf" "$B/start.o" "$B/board.o" "$B/pie_kernels.o" $OBJS "$B/rt/librt-lx7.a"
timeout 900 "$QEMU" -M sim -cpu esp32s3 -m 128M -display none -monitor none -semihosting -icount shift=0 \
  -kernel "$B/pie_kernels_test.elf"
