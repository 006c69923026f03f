#!/bin/sh
# Compiles one C or C++ file for the ESP32-style Xtensa LX7 (windowed ABI, single-precision FPU)
# with Debian's clang-22, for QEMU's de233_fpu.      usage: xcc.sh SOURCE OBJECT [clang flags...]
# It goes source -> LLVM IR -> (patched IR) -> assembly -> object because of LLVM 22.1 Xtensa bugs
# (../shared/mcu-emulation/README.md, "Route 3"):
#  - clang's front end refuses -mcpu=esp32, so the ESP32 ISA is given as target features (without
#    mul32high, which de233_fpu lacks); only the assembler takes -mcpu=esp32;
#  - objects emitted directly get misaligned l32r literals: the assembly detour gets them right;
#  - a select between two float constants ("c ? 0.5f : -0.5f") crashes instruction selection: the
#    sed below hides one of the two constants behind an empty inline asm;
#  - va_start / va_arg are miscompiled: a file that still has a va_arg is refused (the variadic
#    entry points are assembly, start.s), and -fomit-frame-pointer keeps a7 intact.
set -eu
src=$1 obj=$2
shift 2
isa=""
for f in density fp windowed bool loop sext nsa clamps minmax mul16 mul32 div32 s32c1i threadptr timers3 prid debug; do
  isa="$isa -Xclang -target-feature -Xclang +$f"
done
# shellcheck disable=SC2086
clang-22 --target=xtensa $isa -ffp-contract=off -fomit-frame-pointer "$@" -S -emit-llvm -o "$obj.ll" "$src"
sed -E 's/^( *)%([^ ]+) = select (i1 [^,]+), float ([-0-9][^, ]*), float ([-0-9][^, ]*)(.*)$/\1%k.\2 = call float asm "", "=r,0"(float \5)\n\1%\2 = select \3, float \4, float %k.\2\6/' \
  "$obj.ll" >"$obj.patched.ll"
if grep -q ' = va_arg ' "$obj.patched.ll"; then
  echo "xcc.sh: $src uses va_arg, which LLVM 22 miscompiles for Xtensa" >&2
  exit 1
fi
# shellcheck disable=SC2086
clang-22 --target=xtensa $isa -fomit-frame-pointer "$@" -Wno-unused-command-line-argument -S -o "$obj.s" "$obj.patched.ll"
clang-22 --target=xtensa -mcpu=esp32 -c -o "$obj" "$obj.s"
