#!/usr/bin/env bash
# Side-by-side speed of mcullm and esp32-ai's C core on the esp32-ai fixture (greedy from token 1),
# f32 activations (its default build) and int8 (its -DLLM_INT8_ACT build); checks that both engines
# emit the same token stream, then prints ms/token and the ratio.
#
# Usage: bench/compare_esp32ai.sh LLM_H_DIR [REPS] [STEPS]
#   LLM_H_DIR  a directory holding esp32-ai's llm.h (slvDev/esp32-ai, or reference-c/firmware/common
#              of Bellman281/esp32-tinyLLM), outside this repository
#   REPS       alternated repetitions (default 3); STEPS forward passes (default 256)
# Environment: MODEL (default ../shared/models/esp32-ai-ple/ple4096_int4.bin), MCULLM (default
#   build/release/mcullm), CC (default gcc), CFLAGS (default -O2), TMPDIR (scratch, outside the repo).
set -euo pipefail
script_dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
repo_dir=$(cd -- "$script_dir/.." && pwd)
die() { echo "compare_esp32ai: $*" >&2; exit 1; }
[[ $# -ge 1 ]] || die "give the directory holding esp32-ai's llm.h"
LLM_DIR=$1; REPS=${2:-3}; STEPS=${3:-256}
MODEL=${MODEL:-"$repo_dir/../shared/models/esp32-ai-ple/ple4096_int4.bin"}
MCULLM=${MCULLM:-"$repo_dir/build/release/mcullm"}
CC=${CC:-gcc}; CFLAGS=${CFLAGS:-"-O2"}
[[ -f $LLM_DIR/llm.h ]] || die "$LLM_DIR/llm.h is missing"
[[ -f $MODEL ]] || die "model $MODEL is missing"
[[ -x $MCULLM ]] || die "$MCULLM is missing (make run or cmake --build build/release --target mcullm)"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
case $work in "$repo_dir"/*) die "TMPDIR must be outside the repository" ;; esac
$CC $CFLAGS -I"$LLM_DIR" -o "$work/c_f32" "$script_dir/esp32ai_driver.c" -lm
$CC $CFLAGS -DLLM_INT8_ACT -I"$LLM_DIR" -o "$work/c_int8" "$script_dir/esp32ai_driver.c" -lm
ours() {  # mode -> ms/token of the forward passes after the first
  local flag=(); [[ $1 == f32 ]] && flag=(--f32-activations)
  "$MCULLM" run -m "$MODEL" --prompt-ids 1 -q --temp 0 -n "$STEPS" "${flag[@]}" --dump-tokens "$work/ours_$1.tokens" 2>&1 |
    sed -n 's/^mcullm: *eval time.*( *\([0-9.]*\) ms per token.*/\1/p'
}
printf "%-6s %12s %12s %8s %s\n" mode "C ms/tok" "mcullm ms/tok" ratio "same tokens"
for mode in f32 int8; do
  c_sum=0; o_sum=0
  for ((i = 0; i < REPS; i++)); do
    c=$("$work/c_$mode" "$MODEL" 1 "$STEPS" 2>&1 >"$work/c_$mode.tokens" | sed 's/ ms.*//')
    o=$(ours $mode)
    c_sum=$(echo "$c_sum + $c" | bc -l); o_sum=$(echo "$o_sum + $o" | bc -l)
  done
  same=no; cmp -s "$work/c_$mode.tokens" "$work/ours_$mode.tokens" && same=yes
  printf "%-6s %12.3f %12.3f %7.2fx %s\n" $mode "$(echo "$c_sum / $REPS" | bc -l)" "$(echo "$o_sum / $REPS" | bc -l)" \
    "$(echo "$c_sum / $o_sum" | bc -l)" "$same ($STEPS steps)"
done
