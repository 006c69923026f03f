#!/usr/bin/env bash
# Side-by-side speed of mcullm and bitnet.cpp (its llama-bench) on BitNet b1.58 125M dummies:
# prompt processing (pp) and generation (tg), 1 and 2 threads, t/s and the ratio ours / theirs.
# bitnet.cpp is built outside this repository (docs/performance.md has the commands).
#
# Usage: bench/compare_bitnet_cpp.sh [options] [BITNET_BIN]
#   BITNET_BIN  directory holding bitnet.cpp's llama-bench (its build/bin). Default: $BITNET_BIN.
# Options:
#   -i FILE   bitnet.cpp's I2_S 125M file, run by both engines
#             (default ../shared/models/bitnet-dummy/dummy-bitnet-125m.i2_s.gguf; $I2S_MODEL)
#   -l FILE   bitnet.cpp's TL2 125M file (its kernels must come from the same codegen as BITNET_BIN;
#             bitnet.cpp only; default none; $TL2_MODEL)
#   -t "T .." thread counts (default "1 2"; $THREADS)
#   -p N      prompt tokens of the pp test (default 128; $N_PROMPT)
#   -n N      generated tokens of the tg test (default 128; $N_GEN)
#   -r N      repetitions inside each tool (default 3; $REPS)
#   -b BIN    our CLI (default build/release/mcullm; $MCULLM)
#   -k TABLE  our kernel table (mcullm bench --kernels: avx512, avx2, ...; default auto; $KERNELS)
#   -h        this help
# Ours also runs its own dummy of the same layout (`mcullm dummy --arch bitnet --layout 125M
# --embd-type q8_0 --seed 1`: q8_0 tied head) twice: i2_s layers, and tl2 layers (the same weights
# packed for our LUT kernels; the same logits).
# The machine is shared: the load average is printed before and after; rerun when it is high.
set -euo pipefail

script_dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
repo_dir=$(cd -- "$script_dir/.." && pwd)
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "compare_bitnet_cpp: $*" >&2; exit 1; }

I2S_MODEL=${I2S_MODEL:-"$repo_dir/../shared/models/bitnet-dummy/dummy-bitnet-125m.i2_s.gguf"}
TL2_MODEL=${TL2_MODEL:-}
THREADS=${THREADS:-"1 2"}
N_PROMPT=${N_PROMPT:-128}
N_GEN=${N_GEN:-128}
REPS=${REPS:-3}
MCULLM=${MCULLM:-"$repo_dir/build/release/mcullm"}
KERNELS=${KERNELS:-}
BITNET_BIN=${BITNET_BIN:-}

while getopts ":i:l:t:p:n:r:b:k:h" opt; do
  case $opt in
    i) I2S_MODEL=$OPTARG ;;
    l) TL2_MODEL=$OPTARG ;;
    t) THREADS=$OPTARG ;;
    p) N_PROMPT=$OPTARG ;;
    n) N_GEN=$OPTARG ;;
    r) REPS=$OPTARG ;;
    b) MCULLM=$OPTARG ;;
    k) KERNELS=$OPTARG ;;
    h) usage; exit 0 ;;
    :) die "option -$OPTARG needs a value (-h for help)" ;;
    *) die "unknown option -$OPTARG (-h for help)" ;;
  esac
done
shift $((OPTIND - 1))
[[ $# -le 1 ]] || die "one BITNET_BIN argument at most (-h for help)"
[[ $# -eq 1 ]] && BITNET_BIN=$1
[[ -n $BITNET_BIN ]] || { usage >&2; die "give bitnet.cpp's build/bin directory (argument or \$BITNET_BIN)"; }
LLAMA_BENCH=$BITNET_BIN/llama-bench
[[ -f $I2S_MODEL ]] || die "I2_S model $I2S_MODEL not found (-i)"
[[ -z $TL2_MODEL || -f $TL2_MODEL ]] || die "TL2 model $TL2_MODEL not found (-l)"
# shellcheck source=bench/compare_lib.sh
. "$script_dir/compare_lib.sh"
compare_setup compare_bitnet_cpp

OURS_DUMMY=$work/ours-125m.gguf
"$MCULLM" dummy --arch bitnet --layout 125M --embd-type q8_0 --seed 1 -o "$OURS_DUMMY" >/dev/null 2>"$work/dummy.log" ||
  { cat "$work/dummy.log" >&2; die "mcullm dummy failed"; }
OURS_TL2=$work/ours-125m.tl2.gguf
"$MCULLM" dummy --arch bitnet --layout 125M --embd-type q8_0 --seed 1 --type tl2 -o "$OURS_TL2" >/dev/null 2>"$work/dummy.log" ||
  { cat "$work/dummy.log" >&2; die "mcullm dummy --type tl2 failed"; }

print_machine
echo "pp$N_PROMPT / tg$N_GEN, threads $THREADS, $REPS repetitions in each tool" >&2
run_theirs bitnet.cpp_I2_S "$I2S_MODEL"
[[ -n $TL2_MODEL ]] && run_theirs bitnet.cpp_TL2 "$TL2_MODEL"
run_ours mcullm_their_I2_S "$I2S_MODEL"
run_ours mcullm_own_dummy "$OURS_DUMMY"
run_ours mcullm_own_tl2 "$OURS_TL2"
echo "load average after the runs: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
sed -n 's/^\(.*MiB of weights read per generated token.*\)$/ours: \1/p' "$work/mcullm_their_I2_S.md" >&2

print_table
# ratios: each of ours over bitnet.cpp's best type at that thread count and test
for ours in mcullm_their_I2_S mcullm_own_dummy mcullm_own_tl2; do print_ratio "$ours" bitnet.cpp_ "${ours#mcullm_} / best"; done
echo "(best = the faster bitnet.cpp type for that column; bitnet.cpp pp is batched (-b 2048), see $MCULLM bench's note for ours)"
