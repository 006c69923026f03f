#!/bin/bash
# Builds GNU as + objdump for xtensa-esp32s3-elf outside the repository: Debian's binutils 2.40
# source (apt: binutils-source) with Espressif's ESP32-S3 ISA description (xtensa-overlays:
# xtensa_esp32s3/binutils/{bfd/xtensa-modules.c,include/xtensa-config.h}) swapped in, which is how
# Espressif's own toolchain gets its PIE instructions. About 5 minutes with -j2.
#   tools/esp32s3-pie/build-binutils.sh WORK OVERLAY_GIT
# Result: WORK/bu-build/gas/as-new and WORK/bu-build/binutils/objdump.
# Build dependencies (apt): binutils-source texinfo flex bison
set -euo pipefail
WORK=$(realpath -m "$1"); OVERLAY_GIT=$(realpath "$2")
mkdir -p "$WORK" && cd "$WORK"
rm -rf binutils-2.40 bu-build && tar xf /usr/src/binutils/binutils-2.40.tar.xz
git --git-dir="$OVERLAY_GIT" show HEAD:xtensa_esp32s3/binutils/bfd/xtensa-modules.c > binutils-2.40/bfd/xtensa-modules.c
git --git-dir="$OVERLAY_GIT" show HEAD:xtensa_esp32s3/binutils/include/xtensa-config.h > binutils-2.40/include/xtensa-config.h
mkdir bu-build && cd bu-build
../binutils-2.40/configure --target=xtensa-esp32s3-elf --disable-gdb --disable-gdbserver --disable-sim --disable-nls \
  --disable-werror --disable-gprof --disable-gprofng --disable-ld --disable-libctf --without-zstd > configure.log
make -j"${JOBS:-2}" all-gas all-binutils > make.log
echo "built: $WORK/bu-build/gas/as-new $WORK/bu-build/binutils/objdump"
