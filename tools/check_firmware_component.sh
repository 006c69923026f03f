#!/bin/sh
# CTest firmware_component (label unit): what a real ESP-IDF build of firmware/esp32s3 needs from the
# mcullm component, checked without ESP-IDF:
#  1. components/mcullm/CMakeLists.txt defines MCULLM_PIE (else the board runs the scalar kernels:
#     src/kernels/dispatch.cpp compiles the PIE table only with it);
#  2. no -Wno-format anywhere under firmware/ (ESP-IDF builds with -Wall -Werror);
#  3. with clang-22 and newlib's headers (libnewlib-dev) present: every src/ file the component takes
#     (the rule of its CMakeLists.txt) has no printf format warning when uint32_t / int32_t are
#     `unsigned long` / `long`, as with ESP-IDF's Xtensa GCC (tools/firmware_idf_types.h). Without
#     them this part is skipped with a message; parts 1 and 2 always run.
#   tools/check_firmware_component.sh [REPO_ROOT]
set -eu
ROOT=${1:-$(cd "$(dirname "$0")/.." && pwd)}
CM=$ROOT/firmware/esp32s3/components/mcullm/CMakeLists.txt
[ -f "$CM" ] || { echo "FAIL: $CM missing" >&2; exit 1; }
fail=0
# 1. A definition outside comments: target_compile_definitions(... MCULLM_PIE...) or -DMCULLM_PIE.
if sed 's/#.*//' "$CM" | tr '\n' ' ' | grep -Eq 'target_compile_definitions\([^)]*MCULLM_PIE|-DMCULLM_PIE'; then
  echo "ok: $CM defines MCULLM_PIE"
else
  echo "FAIL: $CM does not define MCULLM_PIE (the PIE kernels would not be in the board's dispatch table)"; fail=1
fi
# 2.
if hits=$(grep -rn -e '-Wno-format' "$ROOT/firmware"); then
  echo "FAIL: -Wno-format under firmware/ (ESP-IDF's -Werror must see every format):"; echo "$hits"; fail=1
else
  echo "ok: no -Wno-format under firmware/"
fi
# 3.
CLANG=${CLANG:-clang++-22}; NEWLIB=${NEWLIB:-/usr/include/newlib}
if ! command -v "$CLANG" >/dev/null || [ ! -d "$NEWLIB" ]; then
  echo "skipped: the format check needs $CLANG and newlib's headers at $NEWLIB (apt-get install clang-22 libnewlib-dev)"
else
  OUT=$(mktemp -d); trap 'rm -rf "$OUT"' EXIT
  cp "$ROOT/tools/firmware_sdkconfig.h" "$OUT/sdkconfig.h"
  n=0; bad=0
  for f in $(find "$ROOT/src" -name '*.cpp' | sort); do
    case "$f" in
      */src/kernels/ref/*|*/src/kernels/esp32s3/*) ;;
      *_host.cpp|*/src/kernels/*/*) continue ;;
    esac
    n=$((n + 1))
    if ! "$CLANG" --target=xtensa -Xclang -target-feature -Xclang +fp -fsyntax-only -std=gnu++20 -fno-exceptions -fno-rtti \
        -nostdinc -isystem "$("$CLANG" -print-resource-dir)/include" -isystem "$NEWLIB" -D__XTENSA__ -DESP_PLATFORM -D_GNU_SOURCE \
        -DMCULLM_PIE=1 -Wno-everything -Wformat -Werror=format -include "$ROOT/tools/firmware_idf_types.h" \
        -I"$OUT" -I"$ROOT/include" -I"$ROOT/src" "$f" 2>"$OUT/err"; then
      bad=$((bad + 1)); echo "FAIL: $f"; head -20 "$OUT/err"
    fi
  done
  if [ "$bad" -eq 0 ]; then echo "ok: $n component files, no printf format ESP-IDF's Xtensa GCC would refuse"; else fail=1; fi
fi
exit $fail
