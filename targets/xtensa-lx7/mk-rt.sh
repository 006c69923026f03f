#!/bin/sh
# Builds librt-lx7.a: the run-time helpers LLVM calls on the LX7 target and the FPU does not cover
# (float divide and square root as the ESP32 toolchain does them with the FPU's step instructions,
# soft double, 64-bit shifts and conversions), from GCC 12.2's own libgcc/config/xtensa/*.S in
# Debian's gcc-12-source, configured by our xtensa-config.h and assembled by clang-22's assembler.
# That assembler is not GNU as, so the preprocessed sources are adjusted: "bbci.l/bbsi.l" become
# bbci/bbsi, "srli x, y, N" with N >= 16 becomes extui, and the conditional branches it reports out
# of range become an inverted branch around a "j".
# usage: mk-rt.sh OUTDIR [GCCSRC]   (GCCSRC: where the GCC sources are unpacked, default OUTDIR/src;
# the Makefile shares it with the lx106 target's mk-libgcc-rom.sh)
set -eu
OUT=${1:?usage: mk-rt.sh OUTDIR}
HERE=$(cd "$(dirname "$0")" && pwd)
TARBALL=$(ls /usr/src/gcc-12/gcc-12*.tar.xz 2>/dev/null | head -1)
[ -n "$TARBALL" ] || { echo "mk-rt: /usr/src/gcc-12/gcc-12*.tar.xz is missing: apt-get install gcc-12-source" >&2; exit 1; }
SRC=${2:-$OUT/src}
mkdir -p "$OUT" "$SRC"
DIR=$(tar -tJf "$TARBALL" | head -1 | cut -d/ -f1)/libgcc/config/xtensa
# under a lock: the other Xtensa target's script may be unpacking into the same GCCSRC (make -j)
flock "$SRC/.lock" sh -c '[ -f "$1/$2/lib1funcs.S" ] || tar -xJf "$3" -C "$1" "$2/lib1funcs.S" "$2/ieee754-sf.S" "$2/ieee754-df.S"' \
  unpack "$SRC" "$DIR" "$TARBALL"

# the opposite of each conditional branch
negate() {
  case $1 in
    beq) echo bne ;; bne) echo beq ;; blt) echo bge ;; bge) echo blt ;; bltu) echo bgeu ;; bgeu) echo bltu ;;
    beqz) echo bnez ;; bnez) echo beqz ;; bltz) echo bgez ;; bgez) echo bltz ;;
    beqi) echo bnei ;; bnei) echo beqi ;; blti) echo bgei ;; bgei) echo blti ;; bltui) echo bgeui ;; bgeui) echo bltui ;;
    bany) echo bnone ;; bnone) echo bany ;; ball) echo bnall ;; bnall) echo ball ;;
    bbc) echo bbs ;; bbs) echo bbc ;; bbci) echo bbsi ;; bbsi) echo bbci ;;
    *) echo "mk-rt: no inverse for branch $1" >&2; return 1 ;;
  esac
}

OBJS=""
for f in _ashldi3 _ashrdi3 _lshrdi3 _umulsidi3 _divsf3 _sqrtf _fixsfdi _fixunssfdi _floatdisf \
         _negdf2 _addsubdf3 _muldf3 _divdf3 _cmpdf2 _fixdfsi _fixdfdi _fixunsdfsi _fixunsdfdi \
         _floatsidf _floatdidf _truncdfsf2 _extendsfdf2; do
  s=$OUT/rt$f.s
  clang-22 --target=xtensa -E -P -x assembler-with-cpp "-DL$f" -I"$HERE" -I"$SRC/$DIR" \
    "$SRC/$DIR/lib1funcs.S" >"$s.pp"
  sed -E 's/\b(bb[cs]i)\.l\b/\1/' "$s.pp" |
    awk '$1 == "srli" { split($0, op, ","); n = op[3] + 0
           if (op[3] ~ /^[ \t]*[0-9]+[ \t]*$/ && n >= 16) { sub(/srli/, "extui"); sub(/,[ \t]*[0-9]+[ \t]*$/, ", " n ", " 32 - n) } }
         { print }' >"$s"
  tries=0
  until clang-22 --target=xtensa -mcpu=esp32 -c "$s" -o "$OUT/rt$f.o" 2>"$OUT/rt$f.err"; do
    tries=$((tries + 1))
    lines=$(sed -n 's/^[^:]*:\([0-9]*\):[0-9]*: error: fixup value out of range.*/\1/p' "$OUT/rt$f.err")
    if [ -z "$lines" ] || [ $tries -gt 4 ]; then cat "$OUT/rt$f.err" >&2; exit 1; fi
    for l in $lines; do  # "bXX a, b, target" -> "bNOT a, b, .Lfar<l>; j target; .Lfar<l>:"
      set -- $(sed -n "${l}p" "$s" | tr ',' ' ')
      op=$1
      shift
      eval "target=\${$#}"
      operands=$(echo "$*" | sed -E "s/ *$target\$//; s/ +/, /g")
      sed -i "${l}s/.*/ $(negate "$op") $operands, .Lfar$l ; j $target ; .Lfar$l:/" "$s"
    done
  done
  OBJS="$OBJS $OUT/rt$f.o"
done
rm -f "$OUT/librt-lx7.a"
xtensa-lx106-elf-ar rcs "$OUT/librt-lx7.a" $OBJS
