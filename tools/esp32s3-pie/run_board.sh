#!/usr/bin/env bash
# The board runner with the PIE kernels on the emulated ESP32-S3 (QEMU -M sim -cpu esp32s3 from
# tools/esp32s3-qemu/build.sh): its fingerprint must equal the PC's (`mcullm run --kernels ref
# --fingerprint`), with kernels=pie and with kernels=ref (the same ELF; --kernels K: only K), and the instructions per
# sampled token of both runs are printed (-icount shift=0), and per prompt token.
# usage: tools/esp32s3-pie/run_board.sh QEMU MODEL [-z TOK] [--quant TYPE] [--prompt-ids IDS] [-n N] [--kv f32|int8] [--work-tier sram|psram] [--cores 1|2] [--kernels pie|ref]
#        [--sparse P (0)] [--down cols|rows] [--batch N (8)] [--logits all|sampled] [--build DIR (build/release, with mcullm)] [--work DIR]
# --logits sampled: the runner neither computes nor hashes the prompt's logits, so its tokens hash is compared.
# The ELF is route 3's esp32-lx7 board runner (targets/Makefile) as the variant esp32s3-pie: the
# PIE table and assembly added with LX7_EXTRA_SRCS, MCULLM_PIE defined with LX7_EXTRA_DEFS.
# Exit 0: all three fingerprints equal; 1: a mismatch or failure.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tools/esp32s3-pie/board_common.sh"
board_parse_args "$@"
board_build_elf
board_image
field=2  # the fingerprint; with --logits sampled the tokens hash
[ "$LOGITS" = sampled ] && field=4
pc=$("$MCULLM" run -m "$MODEL" "${TOKARGS[@]}" --prompt-ids "$IDS" -n "$N" --temp 0 --kernels ref --kv "$KV" --fingerprint -q |
     grep '^fingerprint' | cut -d' ' -f$field)
echo "model $MODEL, prompt $IDS, $N tokens"
echo "pc (ref)        fingerprint $pc (field $field of the fingerprint line)"
fail=0
for k in ${KERNELS:-pie ref}; do
  rc=0
  board_qemu $k "$WORK/$k.out" || rc=$?
  fp=$(grep '^fingerprint' "$WORK/$k.out" | cut -d' ' -f$field || true)
  per=$(grep -E '^(prefill|per prompt token|per sampled token)' "$WORK/$k.out" | paste -sd ';' || true)
  printf 'esp32s3 %-7s fingerprint %s  (exit %s) %s\n' "kernels=$k" "$fp" "$rc" "$per"
  if [ "$rc" != 0 ] || [ "$fp" != "$pc" ]; then
    fail=1
    tail -5 "$WORK/$k.out" >&2
  fi
done
[ $fail = 0 ] && echo "OK: the same fingerprint on the PC and on the emulated ESP32-S3 with and without PIE"
exit $fail
