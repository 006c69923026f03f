#!/bin/bash
# Rungs 4 and 5 of docs/firmware.md in one run: every firmware build of build-firmware.sh (default:
# PIE and both cores; VARIANT=ref: reference kernels; VARIANT=onecore: core 0 alone) booted on the
# QEMU fork with each model's board image, its tokens compared with `mcullm run` (boot-firmware.py):
# stories260K q4g64 (greedy, sampled, and through `mcullm serve --bridge`), bit1M ternary, esp32-ai's
# int4 PLE fixture, and a Qwen2 dummy (`mcullm dummy --arch qwen2 --layout small`: i2_s linear layers,
# q4_0 tied embedding, q/k/v biases) sampled at temperature 1 over the whole vocabulary.
#   tools/esp32s3-qemu/check-firmware.sh FW_WORK QEMU [OUT_DIR]
# FW_WORK: build-firmware.sh's WORK (flash.bin, flash-ref.bin, flash-onecore.bin; missing ones are
# reported and skipped); QEMU: the fork's qemu-system-xtensa. Needs build/release/mcullm and
# mcullm-serve and ../shared/models. Prints one line per run; exit 1 if any run differs or fails.
set -uo pipefail
FW=$(realpath "$1"); QEMU=$(realpath "$2"); OUT=$(realpath -m "${3:-/tmp/mcullm-check-firmware}")
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
S=$ROOT/../shared/models
M=$ROOT/build/release/mcullm
[ -d "$S" ] || { echo "check-firmware: $S is missing (the shared models)" >&2; exit 2; }
[ -x "$M" ] || { echo "check-firmware: $M is missing (cmake --build --preset release --target mcullm mcullm-serve)" >&2; exit 2; }
mkdir -p "$OUT/models"
TOK=$S/stories260K/tok512.bin
"$M" convert "$S/stories260K/stories260K.bin" --type q4g64 -o "$OUT/models/s260k-q4g64.gguf" 2>/dev/null &&
  "$M" convert "$OUT/models/s260k-q4g64.gguf" -z "$TOK" --image "$OUT/models/s260k-q4g64.img" 2>/dev/null &&
  "$M" convert "$S/bitnet-tinystories/bit1M_msb.bin" -z "$TOK" --image "$OUT/models/bit1M.img" 2>/dev/null &&
  "$M" convert "$S/esp32-ai-ple/ple4096_int4.bin" --image "$OUT/models/ple.img" 2>/dev/null &&
  "$M" dummy --arch qwen2 --layout small -o "$OUT/models/qwen2-small.gguf" 2>/dev/null &&
  "$M" convert "$OUT/models/qwen2-small.gguf" --image "$OUT/models/qwen2-small.img" 2>/dev/null ||
  { echo "check-firmware: making the models and board images failed (mcullm convert / dummy)" >&2; exit 1; }
fail=0
run() {  # name flash model image args...
  local name=$1 flash=$2 model=$3 image=$4
  shift 4
  local log="$OUT/$name"
  mkdir -p "$log"
  if "$ROOT/tools/esp32s3-qemu/boot-firmware.py" "$QEMU" "$flash" "$model" --image "$image" --log-dir "$log" \
       --mcullm "$M" "$@" > "$log/out.txt" 2>&1; then
    echo "$name: equal ($(grep -m1 '^board: [0-9]* tokens' "$log/out.txt" | cut -d' ' -f2-))"
  else
    echo "$name: FAILED ($log/out.txt)"; tail -4 "$log/out.txt"; fail=1
  fi
}
for v in "" ref onecore; do
  flash=$FW/flash${v:+-$v}.bin
  tag=${v:-pie-2core}
  [ -f "$flash" ] || { echo "$tag: no $flash (VARIANT=$v build-firmware.sh), skipped"; continue; }
  run "$tag-s260k-greedy" "$flash" "$OUT/models/s260k-q4g64.gguf" "$OUT/models/s260k-q4g64.img" -n 48
  run "$tag-s260k-sampled" "$flash" "$OUT/models/s260k-q4g64.gguf" "$OUT/models/s260k-q4g64.img" -n 48 --temp 0.8 --top-k 40 --seed 7
  run "$tag-bit1M" "$flash" "$S/bitnet-tinystories/bit1M_msb.bin" "$OUT/models/bit1M.img" -z "$TOK" -n 48
  run "$tag-esp32ai" "$flash" "$S/esp32-ai-ple/ple4096_int4.bin" "$OUT/models/ple.img" -n 48
  run "$tag-qwen2" "$flash" "$OUT/models/qwen2-small.gguf" "$OUT/models/qwen2-small.img" -n 32 --temp 1 --seed 7
  [ -n "$v" ] || run "$tag-s260k-bridge" "$flash" "$OUT/models/s260k-q4g64.gguf" "$OUT/models/s260k-q4g64.img" -n 48 --bridge
done
exit $fail
