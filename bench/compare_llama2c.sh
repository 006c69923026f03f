#!/usr/bin/env bash
# Side-by-side speed of mcullm and llama2.c's run.c on stories260K, 1 thread, greedy, same prompt,
# same number of forward passes. See docs/performance.md for what every number times.
#
# Usage: bench/compare_llama2c.sh [options] [LLAMA2C]
#   LLAMA2C   llama2.c source directory (holding run.c: run / runfast / runnative are compiled into a
#             temporary directory, never into this repository), or a run binary built elsewhere.
#             Default: $LLAMA2C.
# Options:
#   -r N        repetitions of every engine, alternated (default 5; $REPS)
#   -s "S ..."  steps per run: forward passes, prompt included, as run.c's -n (default "256 512";
#               $STEPS; at most the model's context, 512 for stories260K)
#   -p TEXT     prompt (default "Tom and Ben": its greedy story runs past 512 tokens with both f32 and
#               q8_0, so no engine stops early at the end-of-story BOS; $PROMPT)
#   -m DIR      model directory with stories260K.bin and tok512.bin
#               (default: ../shared/models/stories260K beside the repository; $MODEL_DIR)
#   -b BIN      our CLI (default: build/release/mcullm of this repository; $MCULLM)
#   -H N        hyperfine wall-clock runs of the longest step count (default 20; 0 skips; $HF_RUNS)
#   -c CPU      pin every engine to this CPU with taskset (default: no pinning; $BENCH_CPU)
#   -h          this help
# Environment: LLAMA2C_RUNFAST (an -Ofast run binary when LLAMA2C is a binary; else a sibling
#   "runfast" is used when present), LLAMA2C_NATIVE=0 (do not build the -Ofast -march=native
#   variant), PERF=0 (do not measure each process's CPU time with `perf stat -e task-clock`),
#   CC (default gcc), TMPDIR (scratch space; must be outside the repository).
set -euo pipefail

script_dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
repo_dir=$(cd -- "$script_dir/.." && pwd)

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "compare_llama2c: $*" >&2; exit 1; }

REPS=${REPS:-5}
STEPS=${STEPS:-"256 512"}
PROMPT=${PROMPT:-"Tom and Ben"}
MODEL_DIR=${MODEL_DIR:-"$repo_dir/../shared/models/stories260K"}
MCULLM=${MCULLM:-"$repo_dir/build/release/mcullm"}
HF_RUNS=${HF_RUNS:-20}
BENCH_CPU=${BENCH_CPU:-}
LLAMA2C=${LLAMA2C:-}
CC=${CC:-gcc}

while getopts ":r:s:p:m:b:H:c:h" opt; do
  case $opt in
    r) REPS=$OPTARG ;;
    s) STEPS=$OPTARG ;;
    p) PROMPT=$OPTARG ;;
    m) MODEL_DIR=$OPTARG ;;
    b) MCULLM=$OPTARG ;;
    H) HF_RUNS=$OPTARG ;;
    c) BENCH_CPU=$OPTARG ;;
    h) usage; exit 0 ;;
    :) die "option -$OPTARG needs a value (-h for help)" ;;
    *) die "unknown option -$OPTARG (-h for help)" ;;
  esac
done
shift $((OPTIND - 1))
[[ $# -le 1 ]] || die "one LLAMA2C argument at most (-h for help)"
[[ $# -eq 1 ]] && LLAMA2C=$1
[[ -n $LLAMA2C ]] || { usage >&2; die "give the llama2.c source directory or run binary (argument or \$LLAMA2C)"; }

[[ $REPS =~ ^[1-9][0-9]*$ ]] || die "-r wants a positive integer, got '$REPS'"
[[ $HF_RUNS =~ ^[0-9]+$ ]] || die "-H wants a non-negative integer, got '$HF_RUNS'"
for s in $STEPS; do [[ $s =~ ^[1-9][0-9]*$ ]] || die "-s wants positive integers, got '$s'"; done
[[ -x $MCULLM ]] || die "our CLI $MCULLM is missing: cmake --preset release && cmake --build --preset release"
MODEL=$MODEL_DIR/stories260K.bin
TOK=$MODEL_DIR/tok512.bin
[[ -f $MODEL && -f $TOK ]] || die "stories260K.bin / tok512.bin not found in $MODEL_DIR (-m)"
MODEL=$(cd -- "$(dirname -- "$MODEL")" && pwd)/stories260K.bin
TOK=$(dirname -- "$MODEL")/tok512.bin
PERF=${PERF:-1}
PIN=()
if [[ -n $BENCH_CPU ]]; then
  command -v taskset >/dev/null || die "-c needs taskset"
  PIN=(taskset -c "$BENCH_CPU")
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/compare_llama2c.XXXXXX")
trap 'rm -rf -- "$work"' EXIT
case "$(cd -- "$work" && pwd -P)/" in
  "$(cd -- "$repo_dir" && pwd -P)/"*) die "TMPDIR $work is inside the repository; point TMPDIR elsewhere" ;;
esac

# --- llama2.c binaries -------------------------------------------------------------------------
declare -A BIN=()
if [[ -d $LLAMA2C ]]; then
  [[ -f $LLAMA2C/run.c ]] || die "$LLAMA2C has no run.c"
  command -v "$CC" >/dev/null || die "no C compiler ($CC)"
  # The flags of llama2.c's Makefile: `make run` (-O3) and `make runfast` (-Ofast); runnative is
  # `make runomp` without OpenMP (-Ofast -march=native): vectorized for this CPU (AVX2 / AVX-512, FMA).
  echo "building run.c from $LLAMA2C into $work ($($CC --version | head -1))" >&2
  "$CC" -O3 -o "$work/run" "$LLAMA2C/run.c" -lm
  "$CC" -Ofast -o "$work/runfast" "$LLAMA2C/run.c" -lm
  BIN[runc_O3]=$work/run
  BIN[runc_Ofast]=$work/runfast
  if [[ ${LLAMA2C_NATIVE:-1} != 0 ]]; then
    "$CC" -Ofast -march=native -o "$work/runnative" "$LLAMA2C/run.c" -lm
    BIN[runc_native]=$work/runnative
  fi
  if git -C "$LLAMA2C" rev-parse HEAD >/dev/null 2>&1; then
    echo "llama2.c commit $(git -C "$LLAMA2C" rev-parse HEAD)" >&2
  fi
elif [[ -x $LLAMA2C ]]; then
  BIN[runc_O3]=$LLAMA2C
  fast=${LLAMA2C_RUNFAST:-$(dirname -- "$LLAMA2C")/runfast}
  if [[ -x $fast ]]; then BIN[runc_Ofast]=$fast; fi
else
  die "$LLAMA2C is neither a directory with run.c nor an executable"
fi

# --- our Q8_0 model ----------------------------------------------------------------------------
Q8=$work/stories260K_q8_0.gguf
"$MCULLM" convert "$MODEL" -z "$TOK" -o "$Q8" --type q8_0 2>"$work/convert.log" ||
  { cat "$work/convert.log" >&2; die "mcullm convert failed"; }
kept=$(grep -c 'do not fill' "$work/convert.log" || true)
echo "q8_0 model: $(tail -1 "$work/convert.log" | sed 's/^mcullm: //')" >&2

ENGINES=(ours_f32 ours_q8_0)
for e in runc_O3 runc_Ofast runc_native; do
  if [[ -n ${BIN[$e]:-} ]]; then ENGINES+=("$e"); fi
done

# Prompt length in tokens, BOS included (our CLI reports it): run.c's -n S runs S forward passes
# (positions 0..S-1, prompt included); ours runs P-1 prompt passes plus one per sampled token but
# the last, so -n S-P+1 gives the same S passes.
P=$("$MCULLM" run -m "$MODEL" -z "$TOK" -p "$PROMPT" -n 1 -t 1 --temp 0 -q 2>&1 >/dev/null |
    sed -n 's|.*prompt eval time.*/ *\([0-9]*\) tokens.*|\1|p')
[[ $P =~ ^[0-9]+$ ]] || die "could not read the prompt length from $MCULLM"
for s in $STEPS; do
  ((s <= 512)) || die "$s steps exceed stories260K's context of 512"
  ((s > P)) || die "$s steps leave nothing to generate after a prompt of $P tokens"
done

# CPU time of every process (task-clock: on-CPU time, immune to the waits a busy machine adds to
# wall-clock timers) when perf can count it.
STAT=()
if [[ $PERF != 0 ]] && command -v perf >/dev/null &&
   perf stat -x, -e task-clock -o "$work/probe" -- true >/dev/null 2>&1; then
  STAT=(perf stat -x, -e task-clock -o "$work/stat" --)
else
  echo "perf stat -e task-clock unavailable: CPU-time figures skipped" >&2
fi

# One run of one engine; prints "<its own tokens/s> <CPU ms of the process or nan>". stdout (the
# text) goes to $work/<engine>_<S>.txt: both engines print and flush every token, same I/O.
run_engine() {
  local e=$1 s=$2 err=$work/err
  local out=$work/${e}_$s.txt tokps
  rm -f "$work/stat"
  case $e in
    ours_f32 | ours_q8_0)
      local m=$MODEL
      [[ $e == ours_q8_0 ]] && m=$Q8
      "${STAT[@]}" "${PIN[@]}" "$MCULLM" run -m "$m" -z "$TOK" -p "$PROMPT" -n $((s - P + 1)) -t 1 --temp 0 \
        >"$out" 2>"$err" || { cat "$err" >&2; die "$e failed"; }
      # forward passes actually run = prompt + sampled - 1 ("total time = ... / N tokens")
      local n
      n=$(sed -n 's|.*total time.*/ *\([0-9]*\) tokens.*|\1|p' "$err")
      [[ $((n - 1)) -eq $s ]] || echo "warning: $e ran $((n - 1)) forward passes, not $s (stopped early?)" >&2
      tokps=$(sed -n 's|.*eval time.*runs.*, *\([0-9.]*\) tokens per second.*|\1|p' "$err" | tail -1)
      ;;
    *)
      OMP_NUM_THREADS=1 "${STAT[@]}" "${PIN[@]}" "${BIN[$e]}" "$MODEL" -z "$TOK" -t 0.0 -n "$s" -i "$PROMPT" \
        >"$out" 2>"$err" || { cat "$err" >&2; die "$e failed"; }
      tokps=$(sed -n 's|^achieved tok/s: *\([0-9.]*\).*|\1|p' "$err" | tail -1)
      ;;
  esac
  [[ -n $tokps ]] || { cat "$err" >&2; die "$e printed no tokens/s"; }
  local cpu=nan
  [[ -f $work/stat ]] && cpu=$(awk -F, '$3 ~ /^task-clock/ {print $1}' "$work/stat")
  echo "$tokps ${cpu:-nan}"
}

median() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
echo "machine: ${cpu:-unknown CPU}, $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')" >&2
echo "engines: ${ENGINES[*]}; prompt \"$PROMPT\" ($P tokens with BOS); steps: $STEPS; $REPS repetitions, 1 thread" >&2
declare -A RES=() CPU=()
n_eng=${#ENGINES[@]}
for ((r = 0; r < REPS; r++)); do
  for s in $STEPS; do
    for ((i = 0; i < n_eng; i++)); do
      e=${ENGINES[$(((i + r) % n_eng))]}  # rotate the order each repetition
      line=$(run_engine "$e" "$s")
      read -r v c <<<"$line"
      RES[$e,$s]+="$v "
      CPU[$e,$s]+="$(awk -v s="$s" -v c="$c" 'BEGIN {print (c == "nan" ? "nan" : s / c * 1000)}') "
    done
  done
  echo "  repetition $((r + 1))/$REPS done" >&2
done
echo "load average after the runs: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')" >&2

# Same greedy text from every f32 engine = same token sequence = same forward passes. (Ours
# prints the stop token as "<s>" when a story ends; run.c stops before printing it.)
norm() { tr -d '\n' <"$1" | sed 's/<s>//g'; }
for s in $STEPS; do
  for e in "${ENGINES[@]}"; do
    [[ $e == ours_* ]] && continue
    [[ "$(norm "$work/ours_f32_$s.txt")" == "$(norm "$work/${e}_$s.txt")" ]] ||
      echo "note: $e's text at $s steps differs from ours_f32 (-Ofast / -march=native may change greedy picks)" >&2
  done
done

# table TITLE ARRAY-NAME: medians per engine and step count, the ratios ours / theirs, the spread.
table() {
  local title=$1
  local -n arr=$2
  local e s ours
  declare -A med=()
  echo
  echo "$title"
  printf '%-24s' engine
  for s in $STEPS; do printf '%14s' "S=$s"; done
  echo
  for e in "${ENGINES[@]}"; do
    printf '%-24s' "$e"
    for s in $STEPS; do
      med[$e,$s]=$(tr ' ' '\n' <<<"${arr[$e,$s]}" | grep . | median)
      printf '%14.1f' "${med[$e,$s]}"
    done
    echo
  done
  for ours in ours_f32 ours_q8_0; do
    for e in "${ENGINES[@]}"; do
      [[ $e == ours_* ]] && continue
      printf '%-24s' "$ours / $e"
      for s in $STEPS; do awk -v a="${med[$ours,$s]}" -v b="${med[$e,$s]}" 'BEGIN {printf "%13.2fx", a / b}'; done
      echo
    done
  done
  echo "spread (min..max over the $REPS repetitions)"
  for e in "${ENGINES[@]}"; do
    printf '%-24s' "$e"
    for s in $STEPS; do
      tr ' ' '\n' <<<"${arr[$e,$s]}" | grep . | sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "  %9.1f..%-9.1f", lo, hi}'
    done
    echo
  done
}

table "A. tokens/s, median of $REPS, each engine's own timer (ours: 'eval time' line, positions P..S-1; run.c: 'achieved tok/s', positions 1..S-1); S = forward passes incl. the $P-token prompt" RES
if ((${#STAT[@]})); then
  table "B. forward passes per CPU-second of the whole process (S / task-clock of perf stat: start-up, load, prompt, generation, exit), median of $REPS" CPU
fi
if [[ $kept -gt 0 ]]; then
  echo "(q8_0: $kept matrices kept f32 - stories260K's hidden size 172 is not a multiple of 32)"
fi

# --- wall clock of whole processes (start-up, load, prompt, generation, exit) -------------------
if ((HF_RUNS > 0)); then
  if ! command -v hyperfine >/dev/null; then
    echo "hyperfine not found: wall-clock figures skipped" >&2
  else
    smax=$(tr ' ' '\n' <<<"$STEPS" | sort -n | tail -1)
    # hyperfine -N splits its command lines itself, with shell quoting rules: quote every word.
    q() { printf ' %q' "$@"; }
    cmds=() names=()
    for e in "${ENGINES[@]}"; do
      case $e in
        ours_f32) c=$(q "${PIN[@]}" "$MCULLM" run -m "$MODEL" -z "$TOK" -p "$PROMPT" -n $((smax - P + 1)) -t 1 --temp 0) ;;
        ours_q8_0) c=$(q "${PIN[@]}" "$MCULLM" run -m "$Q8" -z "$TOK" -p "$PROMPT" -n $((smax - P + 1)) -t 1 --temp 0) ;;
        *) c=$(q "${PIN[@]}" "${BIN[$e]}" "$MODEL" -z "$TOK" -t 0.0 -n "$smax" -i "$PROMPT") ;;
      esac
      cmds+=("${c# }") names+=(-n "$e")
    done
    echo
    echo "wall clock, hyperfine ($HF_RUNS runs each after 3 warm-ups, run one engine after the other), $smax forward passes per process:"
    OMP_NUM_THREADS=1 hyperfine -N --warmup 3 --runs "$HF_RUNS" --style none --output=null \
      --export-csv "$work/hf.csv" "${names[@]}" "${cmds[@]}" >/dev/null 2>"$work/hf.err" ||
      { cat "$work/hf.err" >&2; die "hyperfine failed"; }
    # csv: command,mean,stddev,median,user,system,min,max (seconds)
    awk -F, -v s="$smax" 'NR > 1 {med[$1] = $4; printf "%-12s median %8.2f ms (min %7.2f, max %7.2f) = %8.1f forward passes/s; user+sys (mean) %7.2f ms\n", $1, $4 * 1000, $7 * 1000, $8 * 1000, s / $4, ($5 + $6) * 1000}
      {cpu[$1] = $5 + $6}
      END {if (("ours_f32" in med) && ("runc_O3" in med))
             printf "ratio ours_f32 / runc_O3 (time of run.c / time of ours): wall-clock median %.2fx, user+sys %.2fx\n",
                    med["runc_O3"] / med["ours_f32"], cpu["runc_O3"] / cpu["ours_f32"]}' "$work/hf.csv"
    echo "(hyperfine runs all of one engine, then the next: load changes between engines bias the wall-clock ratio; user+sys is steadier)"
  fi
fi
