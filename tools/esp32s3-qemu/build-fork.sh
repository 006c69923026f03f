#!/bin/bash
# Builds Espressif's QEMU fork with the `esp32s3` machine (QEMU 9.2.2 with the S3 ROM image and the PIE
# instructions, target/xtensa/translate_tie_esp32s3.c) outside the repository. Its public copy here is
# the repository vecnode/esp32js at commit b49c8e1072 (QEMU at the repository root).
#   tools/esp32s3-qemu/build-fork.sh WORK FORK_GIT KEYCODEMAPDB_GIT
# WORK: scratch folder; FORK_GIT: git dir of vecnode/esp32js; KEYCODEMAPDB_GIT: git dir of
# qemu/keycodemapdb (the meson subproject QEMU's configure wants even without a UI; the fork's wrap
# pins f5772a62ec). Result: WORK/build/qemu-system-xtensa (-M esp32s3). QEMU's own meson comes from the
# tree's python/wheels (offline). tests/fp is left out (its berkeley-softfloat/testfloat subprojects
# are not in the tree). About 7 to 40 minutes with -j2 by load (JOBS=N to change).
# Build dependencies (apt): ninja-build python3-venv pkg-config libglib2.0-dev libpixman-1-dev flex bison
#   libfdt-dev libgcrypt20-dev libslirp-dev
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(realpath -m "$1"); FORK_GIT=$(realpath "$2"); KCM_GIT=$(realpath "$3")
REV=${FORK_REV:-b49c8e1072}
mkdir -p "$WORK"; cd "$WORK"
if [ ! -f src/.prepared ]; then
  rm -rf src && mkdir src
  git --git-dir="$FORK_GIT" archive "$REV" | tar x -C src
  mkdir -p src/subprojects/keycodemapdb
  git --git-dir="$KCM_GIT" archive f5772a62ec52591ff6870b7e8ef32482371f22c6 | tar x -C src/subprojects/keycodemapdb
  sed -i "s|^  subdir('fp')$|  # subdir('fp'): tools/esp32s3-qemu/build-fork.sh (no softfloat subprojects offline)|" src/tests/meson.build
  touch src/.prepared
fi
# -M sim -cpu esp32s3 (the bare board runner, tools/esp32s3-pie/) with PIE: the sim machine allocates the
# PIE state that only -M esp32s3 did (without it the first PIE instruction dereferences NULL).
grep -q cpu_esp32s3.h src/hw/xtensa/sim.c || patch -d src -p1 < "$HERE/fork-sim-pie.patch"
mkdir -p build && cd build
[ -f build.ninja ] || ../src/configure --target-list=xtensa-softmmu --without-default-features --enable-tcg --enable-system \
  --enable-gcrypt --enable-slirp --enable-fdt=system --disable-werror --disable-docs --disable-install-blobs > configure.log
ninja -j"${JOBS:-2}" qemu-system-xtensa > ninja.log
echo "built: $WORK/build/qemu-system-xtensa (ROM: $WORK/src/pc-bios/esp32s3_rev0_rom.bin)"
