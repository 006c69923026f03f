#!/bin/sh
# Debian's gcc-xtensa-lx106 leaves out of libgcc.a the soft-float and division helpers that the
# ESP8266 keeps in mask ROM (__addsf3, __mulsf3, __divsi3, __muldf3, ...). This builds them from
# GCC 12.2's own libgcc/config/xtensa sources (package gcc-12-source) against the lx106
# xtensa-config.h the compiler installs, plus the 64-bit helpers in libgcc-rom.c.
# Usage: mk-libgcc-rom.sh OUTDIR [GCCSRC]   -> OUTDIR/libgcc-rom.a (GCCSRC: where the GCC sources are
# unpacked, default OUTDIR/src; the Makefile shares it with the LX7 target's mk-rt.sh)
set -eu
OUT=${1:?usage: mk-libgcc-rom.sh OUTDIR}
HERE=$(cd "$(dirname "$0")" && pwd)
TARBALL=$(ls /usr/src/gcc-12/gcc-12*.tar.xz 2>/dev/null | head -1)
[ -n "$TARBALL" ] || { echo "mk-libgcc-rom: /usr/src/gcc-12/gcc-12*.tar.xz is missing: apt-get install gcc-12-source" >&2; exit 1; }
SRC=${2:-$OUT/src}
mkdir -p "$OUT" "$SRC"
DIR=$(tar -tJf "$TARBALL" | head -1 | cut -d/ -f1)/libgcc/config/xtensa
# under a lock: the other Xtensa target's script may be unpacking into the same GCCSRC (make -j)
flock "$SRC/.lock" sh -c '[ -f "$1/$2/lib1funcs.S" ] || tar -xJf "$3" -C "$1" "$2/lib1funcs.S" "$2/ieee754-sf.S" "$2/ieee754-df.S"' \
  unpack "$SRC" "$DIR" "$TARBALL"
CONFIG=$(dirname "$(xtensa-lx106-elf-gcc -print-libgcc-file-name)")/plugin/include
OBJS=""
for f in _divsi3 _udivsi3 _umodsi3 _umulsidi3 _addsubsf3 _mulsf3 _fixunssfsi _floatsisf _floatunsisf \
         _addsubdf3 _muldf3 _divdf3 _fixdfsi _fixunsdfsi _floatsidf _floatunsidf _truncdfsf2 _extendsfdf2; do
  xtensa-lx106-elf-gcc -O2 -c "-DL$f" -I"$CONFIG" -I"$SRC/$DIR" "$SRC/$DIR/lib1funcs.S" -o "$OUT/rom$f.o"
  OBJS="$OBJS $OUT/rom$f.o"
done
xtensa-lx106-elf-gcc -O2 -mlongcalls -c "$HERE/libgcc-rom.c" -o "$OUT/rom_di.o"
rm -f "$OUT/libgcc-rom.a"
xtensa-lx106-elf-ar rcs "$OUT/libgcc-rom.a" $OBJS "$OUT/rom_di.o"
