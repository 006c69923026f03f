#!/bin/bash
# README's two commands, taken verbatim from its "The two commands" section: each names a Makefile
# target, and what `make -n` says it would do is what README promises. `make run`: install the CLI's
# packages only, build the CLI target alone, run the default model. `make test`: install the suite's
# packages, run ctest on the Release and sanitizer builds and the fuzzers, each followed by the skip
# count. Nothing is built or run here (make -n only prints; `make test` inside the suite would recurse).
# Usage: readme_test.sh SOURCE_DIR
set -u
SRC=$1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# The indented command lines of the section, up to the next heading.
mapfile -t cmds < <(sed -n '/^## The two commands/,/^## /p' "$SRC/README.md" | sed -n 's/^    \(make .*\)$/\1/p')
[ "${#cmds[@]}" = 2 ] && [ "${cmds[0]}" = "make run" ] && [ "${cmds[1]}" = "make test" ] ||
  fail "README's section 'The two commands' should show 'make run' then 'make test', it shows: ${cmds[*]:-nothing}"

for cmd in "${cmds[@]}"; do
  target=${cmd#make }
  plan=$(make -C "$SRC" --no-print-directory -n "$target" 2>&1) || { fail "'$cmd': make -n fails: $plan"; continue; }
  echo "== $cmd would run:"
  echo "$plan"
  has() { grep -qE -- "$1" <<<"$plan" || fail "'$cmd' would not run /$1/"; }
  hasnt() { ! grep -qE -- "$1" <<<"$plan" || fail "'$cmd' would run /$1/: $2"; }
  case "$target" in
    run)
      has '^tools/install-deps\.sh run$'
      hasnt 'install-deps\.sh .*test' "the test packages are for make test"
      has '^cmake --build --preset release .*--target mcullm$'
      hasnt '^cmake --build --preset release( -j [0-9]+)?$' "a build of every target (the tests too)"
      hasnt 'ctest' "no tests in make run"
      has '^\./build/release/mcullm run -m models/tinystories-q4\.gguf ' ;;
    test)
      has '^tools/install-deps\.sh test$'
      has '^ctest --preset release --output-junit '
      has '^ctest --preset asan --output-junit '
      has 'ctest --preset fuzz --output-junit '
      [ "$(grep -c 'tools/check_skips\.py' <<<"$plan")" -ge 3 ] || fail "'$cmd': not every ctest run is followed by tools/check_skips.py" ;;
    *) fail "README names an unexpected target '$target'" ;;
  esac
done
[ "$fails" = 0 ] || { echo "readme_test: $fails failure(s)"; exit 1; }
echo "readme_test: PASS"
