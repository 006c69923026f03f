#!/bin/sh
# Serving figures for docs/performance.md ("Serving"): the load test (tests/slow_serve_load_test.cpp)
# at 1, 4 and 16 concurrent clients against an in-process `mcullm serve` with stories260K (2 slots,
# queue 16, max_tokens 64, a quarter of the requests streamed). Prints one line per client count.
# Usage: bench/serve_load.sh [REQUESTS]   (default 1000; build first: cmake --build build/release --target slow_serve_load_test)
set -eu
cd "$(dirname "$0")/.."
test_bin=build/release/tests/slow_serve_load_test
[ -x "$test_bin" ] || { echo "serve_load: build $test_bin first" >&2; exit 1; }
for clients in 1 4 16; do
  MCULLM_LOAD_REQUESTS=${1:-1000} MCULLM_LOAD_CLIENTS=$clients "$test_bin" --gtest_filter=ServeLoad.ClientsAtATimeWithEnoughQueue | grep '^load '
done
