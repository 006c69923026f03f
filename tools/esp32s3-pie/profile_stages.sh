#!/usr/bin/env bash
# Where a token's instructions go on the emulated ESP32-S3: the board runner (as run_board.sh builds
# it, with PIE) runs once on QEMU with `-accel tcg,one-insn-per-tb=on -d exec,nochain`, so that the
# log has one line per executed instruction; the log streams through a FIFO into count_pcs (C, built
# here), which counts per PC, per call site of helper routines, and per generation step (the runner's
# on_step marks the steps); profile_stages.py maps PCs to functions (nm) and functions to stages,
# and prints instructions per sampled token per stage, checked against the runner's own count.
# usage: tools/esp32s3-pie/profile_stages.sh QEMU MODEL [-z TOK] [--quant TYPE] [--prompt-ids IDS] [-n N]
#        [--kernels pie|ref] [--build DIR (with mcullm)] [--work DIR]
# QEMU: Espressif's fork (tools/esp32s3-qemu/build-fork.sh, plus fork-sim-pie.patch for PIE on -M sim)
# or tools/esp32s3-qemu/build.sh's. Needs cc and xtensa-lx106-elf-nm (NM=... to override); the log
# is ~150 bytes per instruction, streamed, never stored: 0.2 to 0.5 M instructions per second on
# 2 shared cores, plus ~40 M instructions that the fork runs in its double-exception vector after
# the runner exits (outside the sampled steps, so not counted).
# Instructions, not cycles: no PSRAM / flash stalls, no pipeline; see docs/firmware.md.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$ROOT/tools/esp32s3-pie
. "$HERE/board_common.sh"
board_parse_args "$@"
KERNELS=${KERNELS:-pie}
board_build_elf
board_image

cc -O2 -o "$WORK/count_pcs" "$HERE/count_pcs.c"
"${NM:-xtensa-lx106-elf-nm}" -n -C "$ELF" >"$WORK/nm.txt"
python3 "$HERE/profile_stages.py" helpers "$WORK/nm.txt" >"$WORK/helpers.txt"
mark=$(python3 "$HERE/profile_stages.py" mark "$WORK/nm.txt")
rm -f "$WORK/exec.fifo"
mkfifo "$WORK/exec.fifo"
"$WORK/count_pcs" "$mark" "$WORK/helpers.txt" 0 <"$WORK/exec.fifo" >"$WORK/counts.txt" &  # core 0 (the busier one)
counter=$!
rc=0
# One instruction per translation block: QEMU 9's tcg property, QEMU 7.2's -singlestep (tools/esp32s3-qemu/build.sh).
one_insn=(-accel tcg,one-insn-per-tb=on)
"$QEMU" -accel tcg,help 2>/dev/null | grep -q one-insn-per-tb || one_insn=(-singlestep)
board_qemu "$KERNELS" "$WORK/run.out" "${one_insn[@]}" -d exec,nochain -D "$WORK/exec.fifo" || rc=$?
wait $counter
if [ $rc != 0 ]; then
  tail -5 "$WORK/run.out" >&2
  exit 1
fi
echo "model $MODEL${QUANT:+ ($QUANT)}, prompt $IDS, $N tokens, kernels=$KERNELS, $(grep '^fingerprint' "$WORK/run.out")"
python3 "$HERE/profile_stages.py" report "$WORK/nm.txt" "$WORK/counts.txt" "$WORK/run.out"
