#!/usr/bin/env bash
# The board runner with the PIE kernels on the emulated ESP32-S3 (QEMU -M sim -cpu esp32s3 from
# tools/esp32s3-qemu/build.sh): its fingerprint must equal the PC's (`mcullm run --kernels ref
# --fingerprint`), with kernels=pie and with kernels=ref (the same ELF), and the instructions per
# sampled token of both runs are printed (-icount shift=0).
# usage: tools/esp32s3-pie/run_board.sh QEMU MODEL [-z TOK] [--quant TYPE] [--prompt-ids IDS] [-n N]
#        [--build DIR (build/release, with mcullm)] [--work DIR]
# The ELF is route 3's esp32-lx7 board runner (targets/Makefile) as the variant esp32s3-pie: the
# PIE table and assembly added with LX7_EXTRA_SRCS, MCULLM_PIE defined with LX7_EXTRA_DEFS.
# Exit 0: all three fingerprints equal; 1: a mismatch or failure.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
QEMU=$1
shift
BUILD=$ROOT/build/release
WORK=""
TOKARGS=()
QUANT=""
N=16
IDS=1,403,407
while [ $# -gt 0 ]; do
  case "$1" in
    -z) TOKARGS=(-z "$2"); shift 2 ;;
    --quant) QUANT=$2; shift 2 ;;
    -n) N=$2; shift 2 ;;
    --prompt-ids) IDS=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    -*) echo "run_board: unknown option $1" >&2; exit 1 ;;
    *) MODEL=$1; shift ;;
  esac
done
BUILD=$(cd "$BUILD" && pwd)
MCULLM=$BUILD/mcullm
[ -n "$WORK" ] || WORK=$(mktemp -d "${TMPDIR:-/tmp}/mcullm-pie.XXXXXX")
mkdir -p "$WORK"

TB=$BUILD/targets
make -s -C "$ROOT/targets" B="$TB" -j2 esp32 LX7_VARIANT=esp32s3-pie LX7_EXTRA_DEFS=-DMCULLM_PIE=1 \
  LX7_EXTRA_SRCS="$ROOT/src/kernels/esp32s3/pie_table.cpp $ROOT/src/kernels/esp32s3/pie_kernels.S" >"$WORK/make.log" 2>&1 ||
  { cat "$WORK/make.log" >&2; exit 1; }

if [ -n "$QUANT" ]; then
  "$MCULLM" convert "$MODEL" "${TOKARGS[@]}" -o "$WORK/model-$QUANT.gguf" --type "$QUANT" 2>"$WORK/quant.log" ||
    { cat "$WORK/quant.log" >&2; exit 1; }
  MODEL=$WORK/model-$QUANT.gguf
fi
"$MCULLM" convert "$MODEL" "${TOKARGS[@]}" --image "$WORK/model.img" 2>"$WORK/convert.log" ||
  { cat "$WORK/convert.log" >&2; exit 1; }
echo "$IDS" | tr ',' ' ' >"$WORK/prompt.txt"
pc=$("$MCULLM" run -m "$MODEL" "${TOKARGS[@]}" --prompt-ids "$IDS" -n "$N" --temp 0 --kernels ref --fingerprint -q |
     grep '^fingerprint' | cut -d' ' -f2)
echo "model $MODEL, prompt $IDS, $N tokens"
echo "pc (ref)        fingerprint $pc"
fail=0
for k in pie ref; do
  semi="enable=on,target=native,arg=board,arg=image=$WORK/model.img,arg=prompt=$WORK/prompt.txt,arg=n=$N,arg=temp=0"
  semi="$semi,arg=seed=42,arg=kernels=$k"  # greedy, as the PC run (the runner samples at 0.8 by default)
  rc=0
  timeout 1800 "$QEMU" -M sim -cpu esp32s3 -m 128M -kernel "$TB/esp32s3-pie.elf" -display none -monitor none \
    -semihosting -icount shift=0 -semihosting-config "$semi" >"$WORK/$k.out" 2>&1 || rc=$?
  fp=$(grep '^fingerprint' "$WORK/$k.out" | cut -d' ' -f2 || true)
  per=$(grep '^per sampled token' "$WORK/$k.out" || true)
  printf 'esp32s3 %-7s fingerprint %s  (exit %s) %s\n' "kernels=$k" "$fp" "$rc" "$per"
  if [ "$rc" != 0 ] || [ "$fp" != "$pc" ]; then
    fail=1
    tail -5 "$WORK/$k.out" >&2
  fi
done
[ $fail = 0 ] && echo "OK: the same fingerprint on the PC and on the emulated ESP32-S3 with and without PIE"
exit $fail
