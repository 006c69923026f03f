#!/bin/bash
# Builds an xtensa-esp32s3-elf cross toolchain (binutils with ld, GCC for C and C++, newlib, libgcc,
# libstdc++) outside the repository, from Debian's own sources with Espressif's public ESP32-S3 core
# configuration (espressif/xtensa-overlays, directory xtensa_esp32s3) swapped in. That is how
# Espressif's toolchain and Debian's gcc-xtensa-lx106 get their core: the overlay replaces the files
# that describe the configurable Xtensa core (ISA tables for binutils, xtensa-config.h for GCC,
# core-isa.h for newlib). Upstream GCC 12 has no Espressif patches: no -mdynconfig, no esp32 PSRAM
# workarounds (the S3 needs none).
#   tools/esp32s3-toolchain/build-gcc.sh PREFIX OVERLAY_GIT [WORK]
# The C library: ESP-IDF v5.3 needs newlib 4.3's interfaces (__sglue, _REENT_STDIN, _REENT_SDIDINIT in
# its newlib_init.c) and Debian 12 ships newlib 3.3.0. With NEWLIB_GIT=git dir of espressif/newlib-esp32
# (NEWLIB_REV, default esp-4.3.0_20240322: the newlib of ESP-IDF v5.3's toolchain) that newlib is used;
# its snapshot lacks the generated newlib/Makefile.in, so newlib/ is re-generated with Debian's autoconf
# 2.71 and automake 1.16 (autoreconf; GCC's config/override.m4 pins 2.69 and is relaxed in the scratch
# copy). Without NEWLIB_GIT, Debian's newlib-source 3.3.0 (enough for rung 2, not for ESP-IDF's link).
# PREFIX: install folder (e.g. /work/ext/esp32s3-toolchain); OVERLAY_GIT: git dir of
# espressif/xtensa-overlays; WORK: scratch (default PREFIX-build). Result: PREFIX/bin/xtensa-esp32s3-elf-{gcc,g++,as,ld,objdump}.
# One GCC build (not two stages): newlib is put into GCC's source tree (a "combined tree"), so the
# top-level make builds gcc, then libgcc, newlib and libstdc++ with it.
# Each step leaves a stamp in WORK; re-running resumes after the last finished step.
# Build dependencies (apt): gcc-12-source binutils-source newlib-source texinfo flex bison libgmp-dev libmpfr-dev libmpc-dev
#   automake (with NEWLIB_GIT)
# Two cores: binutils ~10 min, GCC + libraries ~1.5-2 h. JOBS=N to change -j2.
set -euo pipefail
PREFIX=$(realpath -m "${1:?usage: build-gcc.sh PREFIX OVERLAY_GIT [WORK]}"); OVERLAY_GIT=$(realpath "${2:?overlay git dir}")
WORK=$(realpath -m "${3:-$PREFIX-build}")
T=xtensa-esp32s3-elf; S=xtensa_esp32s3; J=${JOBS:-2}
GCC_TAR=/usr/src/gcc-12/gcc-12.2.0-dfsg.tar.xz; BU_TAR=/usr/src/binutils/binutils-2.40.tar.xz
NL_TAR=$(ls /usr/src/newlib/newlib-*.tar.* 2>/dev/null | head -1 || true)
for f in "$GCC_TAR" "$BU_TAR" "$NL_TAR"; do [ -f "$f" ] || { echo "missing source tarball: ${f:-/usr/src/newlib/newlib-*.tar.*} (apt-get install gcc-12-source binutils-source newlib-source)" >&2; exit 2; }; done
git --git-dir="$OVERLAY_GIT" cat-file -e HEAD:$S/gcc/include/xtensa-config.h || { echo "no $S overlay in $OVERLAY_GIT" >&2; exit 2; }
overlay() { git --git-dir="$OVERLAY_GIT" show "HEAD:$S/$1" > "$2"; }
mkdir -p "$WORK" "$PREFIX"; cd "$WORK"
export PATH="$PREFIX/bin:$PATH"
# Host objects through ccache (a re-run after a failed step costs little), without -g (faster).
if command -v ccache >/dev/null; then export CC="ccache gcc" CXX="ccache g++" CCACHE_DIR=${CCACHE_DIR:-/work/.ccache}; fi
export CFLAGS=-O2 CXXFLAGS=-O2
# Target libraries as Espressif builds them: -mlongcalls (an ESP-IDF image calls between IRAM at
# 0x4037xxxx and flash at 0x42xxxxxx, beyond CALL's range), sections for the linker's garbage collection.
TFLAGS="-O2 -mlongcalls -ffunction-sections -fdata-sections"
step() { [ -f "$WORK/stamp-$1" ] && { echo "== $1: done before"; return 1; }; echo "== $1: $(date -u +%H:%M:%S)"; }
done_() { touch "$WORK/stamp-$1"; }

if step binutils; then
  rm -rf binutils-2.40 bu-build && tar xf "$BU_TAR"
  overlay binutils/bfd/xtensa-modules.c binutils-2.40/bfd/xtensa-modules.c
  overlay binutils/include/xtensa-config.h binutils-2.40/include/xtensa-config.h
  mkdir bu-build && cd bu-build
  ../binutils-2.40/configure --target=$T --prefix="$PREFIX" --disable-gdb --disable-gdbserver --disable-sim \
    --disable-nls --disable-werror --disable-gprof --disable-gprofng --without-zstd --disable-libctf > configure.log
  make -j"$J" MAKEINFO=true > make.log 2>&1 && make install MAKEINFO=true > install.log 2>&1
  cd "$WORK"; done_ binutils
fi

if step sources; then
  rm -rf gcc-12.2.0 && tar xf "$GCC_TAR"
  overlay gcc/include/xtensa-config.h gcc-12.2.0/include/xtensa-config.h
  if [ -n "${NEWLIB_GIT:-}" ]; then
    NLD=newlib-esp; rm -rf "$NLD" && mkdir "$NLD"
    git --git-dir="$NEWLIB_GIT" archive "${NEWLIB_REV:-esp-4.3.0_20240322}" -- . ':!newlib/Makefile.in' | tar x -C "$NLD"
    sed -i 's/m4_define(\[_GCC_AUTOCONF_VERSION\], \[2.69\])/m4_define([_GCC_AUTOCONF_VERSION], [2.71])/' "$NLD/config/override.m4"
    # Debian's automake 1.16 names libm's objects a-*.o where newlib's own Makefile.in had libm_a-*.o:
    # the list of math objects that libc.a copies out of libm.a follows.
    sed -i 's/\blibm_a-\(s_\|sf_\|frexpl\)/a-\1/g' "$NLD/newlib/Makefile.am"
    (cd "$NLD/newlib" && autoreconf -f -i -I .. -I ../config > ../../autoreconf.log 2>&1)
    # Espressif's newlib keeps the core's description in libc/machine/xtensa (setjmp, mem*, str* in assembly).
    overlay newlib/newlib/libc/sys/xtensa/include/xtensa/config/core-isa.h "$NLD/newlib/libc/machine/xtensa/include/xtensa/config/core-isa.h"
  else
    NLD=$(tar tf "$NL_TAR" | sed -n '1s|/.*||p'); rm -rf "$NLD" && tar xf "$NL_TAR"
    # Debian's newlib 3.3.0 has no Xtensa code and builds its generic C for the target.
  fi
  ln -s "../$NLD/newlib" gcc-12.2.0/newlib; ln -s "../$NLD/libgloss" gcc-12.2.0/libgloss
  done_ sources
fi

if step gcc; then
  rm -rf gcc-build && mkdir gcc-build && cd gcc-build
  # newlib: the options Espressif's toolchain uses that matter to ESP-IDF (long long and C99 printf
  # formats, retargetable locks, no syscalls of its own: ESP-IDF supplies them).
  ../gcc-12.2.0/configure --target=$T --prefix="$PREFIX" --enable-languages=c,c++ --with-newlib \
    --disable-shared --disable-threads --disable-nls --disable-multilib --disable-libssp --disable-libquadmath \
    --disable-libgomp --disable-libatomic --disable-libgloss --disable-lto --disable-plugin --disable-libcc1 --without-isl --without-zstd \
    --enable-newlib-io-long-long --enable-newlib-io-c99-formats --disable-newlib-supplied-syscalls \
    --enable-newlib-retargetable-locking \
    --with-pkgversion="mcullm tools/esp32s3-toolchain (Debian gcc-12.2 + xtensa_esp32s3 overlay)" > configure.log
  # ESP-IDF supplies malloc (heap), the reentrant syscalls, raise and abort: newlib leaves them out.
  NLFLAGS="-DMALLOC_PROVIDED -DREENTRANT_SYSCALLS_PROVIDED -DSIGNAL_PROVIDED -DABORT_PROVIDED"
  # No libgloss (--disable-libgloss): ESP-IDF brings its own start-up code and syscalls (and Espressif's
  # libnosys wants the xtensa-esp-elf target's dirent.h).
  PARTS="gcc target-libgcc target-newlib target-libstdc++-v3"
  make -j"$J" MAKEINFO=true CFLAGS_FOR_TARGET="$TFLAGS $NLFLAGS" CXXFLAGS_FOR_TARGET="$TFLAGS" \
    $(printf 'all-%s ' $PARTS) > make.log 2>&1
  # Debian's -dfsg source has no GFDL manuals (doc/tm.texi.in): skip the manual check install-gcc runs.
  touch gcc/s-tm-texi
  make MAKEINFO=true $(printf 'install-%s ' $PARTS) > install.log 2>&1
  # Espressif's newlib gives its own target (xtensa-esp-elf, sys_dir=esp) a <sys/dirent.h> that ESP-IDF's
  # VFS implements; for xtensa-esp32s3-elf newlib installs the generic one, which is an #error.
  ESP_DIRENT="$WORK/${NLD:-newlib-esp}/newlib/libc/sys/esp/include/sys/dirent.h"
  [ -f "$ESP_DIRENT" ] && cp "$ESP_DIRENT" "$PREFIX/$T/include/sys/dirent.h"
  cd "$WORK"; done_ gcc
fi

# Upstream GCC's Xtensa link defaults are those of Cadence's simulator (crt1-sim.o, -lsim, -lhal...).
# An ESP-IDF image brings its own start-up code and vectors, and CMake's compiler check links a test
# program: a specs file beside libgcc (it overrides the built-in specs) keeps only crti/crtbegin and -lc.
printf '*startfile:\ncrti%%O%%s crtbegin%%O%%s\n\n*lib:\n-lc\n\n' > "$("$PREFIX/bin/$T-gcc" -print-libgcc-file-name | xargs dirname)/specs"
"$PREFIX/bin/$T-gcc" --version | head -1
echo "built: $PREFIX/bin/$T-gcc $PREFIX/bin/$T-g++"
