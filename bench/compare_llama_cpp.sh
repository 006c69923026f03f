#!/usr/bin/env bash
# Side-by-side speed of mcullm and llama.cpp (its llama-bench) on one dense llama file per type, read
# by both engines: prompt processing (pp) and generation (tg), per thread count, t/s and the ratio
# ours / theirs. llama.cpp is built outside this repository (docs/performance.md has the commands).
#
# Usage: bench/compare_llama_cpp.sh [options] [LLAMA_BIN]
#   LLAMA_BIN  directory holding llama.cpp's llama-bench (its build/bin). Default: $LLAMA_BIN.
# Options:
#   -T "T .."  weight types (default "q8_0 q4_0"; $TYPES)
#   -d "ARGS"  the model: `mcullm dummy` arguments (default "--dim 768 --layers 12 --hidden 2048
#              --seed 1", a dense llama of 86M parameters; $DUMMY_ARGS)
#   -t "T .."  thread counts (default "1 2"; $THREADS)
#   -p N       prompt tokens of the pp test (default 128; $N_PROMPT)
#   -n N       generated tokens of the tg test (default 64; $N_GEN)
#   -r N       repetitions inside each tool (default 3; $REPS)
#   -b BIN     our CLI (default build/release/mcullm; $MCULLM)
#   -k TABLE   our kernel table (mcullm bench --kernels: avx512, avx2, ...; default auto; $KERNELS)
#   -h         this help
# The machine is shared: the CPU, its flags and the load average are printed before and after;
# rerun when the load is high.
set -euo pipefail

script_dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
repo_dir=$(cd -- "$script_dir/.." && pwd)
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "compare_llama_cpp: $*" >&2; exit 1; }

TYPES=${TYPES:-"q8_0 q4_0"}
DUMMY_ARGS=${DUMMY_ARGS:-"--dim 768 --layers 12 --hidden 2048 --seed 1"}
THREADS=${THREADS:-"1 2"}
N_PROMPT=${N_PROMPT:-128}
N_GEN=${N_GEN:-64}
REPS=${REPS:-3}
MCULLM=${MCULLM:-"$repo_dir/build/release/mcullm"}
KERNELS=${KERNELS:-}
LLAMA_BIN=${LLAMA_BIN:-}

while getopts ":T:d:t:p:n:r:b:k:h" opt; do
  case $opt in
    T) TYPES=$OPTARG ;;
    d) DUMMY_ARGS=$OPTARG ;;
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
[[ $# -le 1 ]] || die "one LLAMA_BIN argument at most (-h for help)"
[[ $# -eq 1 ]] && LLAMA_BIN=$1
[[ -n $LLAMA_BIN ]] || { usage >&2; die "give llama.cpp's build/bin directory (argument or \$LLAMA_BIN)"; }
LLAMA_BENCH=$LLAMA_BIN/llama-bench
[[ -n $TYPES ]] || die "-T wants at least one type"
# shellcheck source=bench/compare_lib.sh
. "$script_dir/compare_lib.sh"
compare_setup compare_llama_cpp

print_machine
echo "pp$N_PROMPT / tg$N_GEN, threads $THREADS, $REPS repetitions in each tool; model: mcullm dummy $DUMMY_ARGS" >&2
for type in $TYPES; do
  model=$work/dummy-$type.gguf
  # shellcheck disable=SC2086  # DUMMY_ARGS is a list of arguments
  "$MCULLM" dummy $DUMMY_ARGS --type "$type" -o "$model" >/dev/null 2>"$work/dummy.log" ||
    { cat "$work/dummy.log" >&2; die "mcullm dummy --type $type failed"; }
  # Alternating engines, one type at a time.
  run_theirs "llama.cpp_$type" "$model"
  run_ours "mcullm_$type" "$model"
done
echo "load average after the runs: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "llama.cpp $(awk -F, 'NR == 1 {for (i = 1; i <= NF; i++) {gsub(/"/, "", $i); if ($i == "build_commit") c = i}}
                     NR == 2 {gsub(/"/, "", $c); print "commit " $c}' "$work/llama.cpp_${TYPES%% *}.csv")" >&2

print_table
for type in $TYPES; do print_ratio "mcullm_$type" "llama.cpp_$type" "$type: ours / theirs"; done
echo "(llama.cpp pp is batched (-b 2048); ours: see $MCULLM bench's note)"
