#!/bin/bash
# Runs a built test preset several times in a row while CPU hogs run beside it, to catch tests that
# depend on machine speed or load (issue 15: "the suite passes 5 times in a row under ASan with a CPU
# hog running beside it"). Stops at the first failing run. Development-time only (CI runs each suite once).
#   tools/soak.sh [-n RUNS] [--hogs N] [PRESET]       defaults: 5 runs, N = number of CPUs, preset asan
# A hog is a busy loop (`yes > /dev/null`) at normal priority. Each run is reported with its wall time,
# the load average at its end and ctest's summary line; the JUnit file of run K is
# build/PRESET/soak-K.xml, checked with tools/check_skips.py like CI does.
set -euo pipefail
RUNS=5; HOGS=$(nproc); PRESET=asan
while [ $# -gt 0 ]; do
  case "$1" in
    -n) RUNS=${2:?-n needs a count}; shift 2 ;;
    --hogs) HOGS=${2:?--hogs needs a count}; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    -*) echo "soak.sh: unknown option $1" >&2; exit 2 ;;
    *) PRESET=$1; shift ;;
  esac
done
[[ "$RUNS" =~ ^[1-9][0-9]*$ && "$HOGS" =~ ^[0-9]+$ ]] || { echo "soak.sh: -n and --hogs take whole numbers" >&2; exit 2; }
ROOT=$(cd "$(dirname "$0")/.." && pwd); cd "$ROOT"
[ -d "build/$PRESET" ] || { echo "soak.sh: build/$PRESET is missing (cmake --preset $PRESET && cmake --build --preset $PRESET)" >&2; exit 2; }
PIDS=()
stop_hogs() { [ ${#PIDS[@]} -eq 0 ] || kill "${PIDS[@]}" 2>/dev/null || true; }
trap stop_hogs EXIT
for _ in $(seq 1 "$HOGS"); do yes > /dev/null & PIDS+=($!); done
echo "soak: preset $PRESET, $RUNS runs, $HOGS hog(s), $(nproc) CPUs, started $(date -u +%H:%M:%S) UTC"
for k in $(seq 1 "$RUNS"); do
  t0=$(date +%s)
  set +e
  ctest --preset "$PRESET" --output-junit "soak-$k.xml" > "build/$PRESET/soak-$k.log" 2>&1; rc=$?
  set -e
  t1=$(date +%s)
  summary=$(grep -E "tests passed|tests failed" "build/$PRESET/soak-$k.log" | tail -1)
  echo "run $k: exit $rc, $(( (t1 - t0) / 60 )) min $(( (t1 - t0) % 60 )) s, load $(cut -d' ' -f1-3 /proc/loadavg): $summary"
  if [ "$rc" -ne 0 ]; then
    grep -E "\*\*\*Failed|\*\*\*Timeout|\(Failed\)|\(Timeout\)|Exception" "build/$PRESET/soak-$k.log" | head -20
    echo "soak: run $k failed (log: build/$PRESET/soak-$k.log)"; exit 1
  fi
  /usr/bin/python3 tools/check_skips.py --strict --allow tests/allowed_skips.txt "build/$PRESET/soak-$k.xml"
done
echo "soak: $RUNS of $RUNS runs passed in a row"
