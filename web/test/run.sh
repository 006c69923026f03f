#!/bin/sh
# The page's browser test (CTest `web_page_browser`, label `browser`, release build only).
# Usage: run.sh MCULLM_BINARY SHARED_DIR WORK_DIR
# Installs playwright-core with `npm ci` from web/test/package-lock.json into WORK_DIR (the build
# tree, not the repo), then runs page_test.mjs against Debian's chromium. Exits 77 (CTest: skipped)
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

mkdir -p "$work"
if ! cmp -s "$here/package-lock.json" "$work/package-lock.json" || [ ! -d "$work/node_modules/playwright-core" ]; then
  cp "$here/package.json" "$here/package-lock.json" "$work/"
  (cd "$work" && npm ci --no-audit --no-fund --loglevel=error) || { echo "web_page_browser: npm ci failed" >&2; exit 1; }
fi
NODE_PATH="$work/node_modules" exec node "$here/page_test.mjs" "$bin" "$shared/models/stories260K/stories260K.bin" "$chromium" "$work"
