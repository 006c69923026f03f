#!/bin/sh
# The page's browser test (CTest `web_page_browser`, label `browser`, release build only).
# Usage: run.sh MCULLM_BINARY SHARED_DIR WORK_DIR
# Installs playwright-core with `npm ci` from web/test/package-lock.json into WORK_DIR (the build
# tree, not the repo) and esptool-js from web/flash/package-lock.json into WORK_DIR/flash, then runs
# page_test.mjs (the page against `mcullm serve`) and flash_test.mjs (the flashing panel against a
# stand-in ESP32-S3) in Debian's chromium. Exits 77 (CTest: skipped)
# when node, npm, chromium or the shared model is missing, unless MCULLM_REQUIRE_BROWSER=1 (CI),
# which turns a missing piece into a failure.
set -eu
bin=$1 shared=${MCULLM_SHARED:-$2} work=$3
here=$(cd "$(dirname "$0")" && pwd)

skip() {
  echo "web_page_browser: $1" >&2
  if [ "${MCULLM_REQUIRE_BROWSER:-0}" = 1 ]; then echo "web_page_browser: MCULLM_REQUIRE_BROWSER=1, so this is a failure" >&2; exit 1; fi
  echo "web_page_browser: skipped" >&2
  exit 77
}

command -v node >/dev/null 2>&1 || skip "node is not installed (apt-get install nodejs npm)"
command -v npm >/dev/null 2>&1 || skip "npm is not installed (apt-get install npm)"
chromium=${CHROMIUM:-}
for c in chromium chromium-browser; do
  [ -z "$chromium" ] && command -v $c >/dev/null 2>&1 && chromium=$(command -v $c)
done
[ -n "$chromium" ] || skip "Debian's chromium is not installed (apt-get install chromium)"
[ -f "$shared/models/stories260K/stories260K.bin" ] || skip "$shared/models/stories260K is missing"

# npm ci DIR WORK PACKAGE: installs DIR's package-lock.json into WORK unless it is there already.
install() {
  mkdir -p "$2"
  if ! cmp -s "$1/package-lock.json" "$2/package-lock.json" || [ ! -d "$2/node_modules/$3" ]; then
    cp "$1/package.json" "$1/package-lock.json" "$2/"
    (cd "$2" && npm ci --no-audit --no-fund --loglevel=error) || { echo "web_page_browser: npm ci in $2 failed" >&2; exit 1; }
  fi
}
install "$here" "$work" playwright-core
install "$here/../flash" "$work/flash" esptool-js  # the flashing panel's esptool-js, as a user installs it
model="$shared/models/stories260K/stories260K.bin"
# Both run even if the first fails (each says what failed); either failing fails the test.
page=0 flash=0
NODE_PATH="$work/node_modules" node "$here/page_test.mjs" "$bin" "$model" "$chromium" "$work" || page=$?
NODE_PATH="$work/node_modules" node "$here/flash_test.mjs" "$bin" "$model" "$chromium" "$work" "$work/flash/node_modules" || flash=$?
[ "$page" = 0 ] && [ "$flash" = 0 ]
