#!/bin/sh
# Syntax check of the ESP32-S3 firmware against ESP-IDF's own headers, without the IDF build system:
#   tools/check_firmware_syntax.sh ESP_IDF_DIR      (a checkout or `git archive` of esp-idf: its components/)
# clang-22 (--target=xtensa, -fsyntax-only) compiles every source the firmware builds: the app
# (firmware/esp32s3/main/*.cpp) with the include directories of the ESP-IDF components it uses, and
# the mcullm component (the repository's src/ files the component's CMakeLists.txt takes, the same
# rule) with C headers only. The generated sdkconfig.h of a real build is replaced by
# tools/firmware_sdkconfig.h: the CONFIG_ values sdkconfig.defaults and the firmware's Kconfig give,
# plus the ESP-IDF defaults those headers read. C library headers: Debian's newlib (/usr/include/newlib;
# ESP-IDF uses newlib or picolibc with the same interfaces). clang-22 knows no esp32s3 CPU; -mcpu=esp32
# (LX6, the same windowed ABI and FPU) is close enough for a syntax check.
# With XTENSA_GCC=/path/to/xtensa-esp32s3-elf-gcc (tools/esp32s3-toolchain/build-gcc.sh) the same files
# are compiled for real instead: -c -O2 with the flags ESP-IDF gives every component (its warnings,
# -Werror, -mlongcalls, -fno-builtin-mem*: tools/cmake/build.cmake and toolchain-esp32s3.cmake) and the
# firmware's own, against the toolchain's newlib; the PIE .S is assembled by that GCC / GNU as and its
# .byte encodings are compared with GNU as's mnemonics (tools/esp32s3-toolchain/check_pie_mnemonics.py).
# OBJ_DIR=DIR keeps the objects.
# Not run by CI (no ESP-IDF there). Exit 0 when every file passes; the failing files' errors otherwise.
set -eu
IDF=${1:?usage: tools/check_firmware_syntax.sh ESP_IDF_DIR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CLANG=${CLANG:-clang++-22}
NEWLIB=${NEWLIB:-/usr/include/newlib}
C=$IDF/components
[ -d "$C/esp_hw_support" ] || { echo "no ESP-IDF components under $C" >&2; exit 2; }
GCC=${XTENSA_GCC:-}
if [ -n "$GCC" ]; then
  [ -x "$GCC" ] || { echo "XTENSA_GCC=$GCC is not an executable" >&2; exit 2; }
else
  [ -d "$NEWLIB" ] || { echo "newlib headers missing at $NEWLIB (apt-get install libnewlib-dev)" >&2; exit 2; }
  command -v "$CLANG" >/dev/null || { echo "$CLANG not found" >&2; exit 2; }
fi

OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
mkdir -p "$OUT/config"
cp "$ROOT/tools/firmware_sdkconfig.h" "$OUT/config/sdkconfig.h"

# The include directories of the components main/CMakeLists.txt REQUIRES and of those they pull in:
# every include/ folder of these components but other chips' (and tests'), plus FreeRTOS's port for
# Xtensa and esp32s3's register and ROM headers.
COMPONENTS="esp_libc newlib freertos esp_common esp_system esp_hw_support esp_rom soc hal xtensa log heap esp_partition
  spi_flash esp_mm esp_driver_spi esp_driver_gpio esp_driver_uart esp_driver_usb_serial_jtag esp_timer esp_pm esp_ringbuf
  esp_stdio vfs esp_driver_dma esp_psram esp_hal_gpio esp_hal_gpspi esp_hal_uart esp_hal_usb esp_hal_dma esp_hal_clock
  esp_hal_mspi esp_hal_systimer esp_hal_timg esp_hal_pmu esp_hal_rtc_timer esp_hal_wdt esp_hal_regi2c esp_blockdev driver"
OTHER_CHIPS="esp32|esp32s2|esp32c2|esp32c3|esp32c5|esp32c6|esp32c61|esp32h2|esp32h21|esp32h4|esp32p4|linux|riscv|test_apps|test|FreeRTOS-Kernel-SMP|posix"
INC="-I$OUT/config"
for comp in $COMPONENTS; do
  [ -d "$C/$comp" ] || continue
  for d in $(find "$C/$comp" -type d \( -name include -o -name platform_include \) | grep -Ev "/($OTHER_CHIPS)(/|$)" | sort); do
    INC="$INC -I$d"
  done
done
for d in freertos/config/include/freertos freertos/config/xtensa/include freertos/FreeRTOS-Kernel/portable/xtensa/include/freertos \
  soc/esp32s3/register esp_rom/esp32s3/include/esp32s3 esp_hw_support/include/soc/esp32s3; do
  [ -d "$C/$d" ] && INC="$INC -I$C/$d"
done
# esp_libc's platform_include wraps the C library's headers: it comes first (ESP-IDF v5's newlib
# component has its platform_include among the others, found before the C library's headers anyway).
INC="-I$C/esp_libc/platform_include $INC"
IDF_VER=$(git -C "$IDF" describe --tags 2>/dev/null || sed -n 's/^ *VERSION "\(.*\)"$/\1/p' "$IDF/tools/cmake/version.cmake" 2>/dev/null || echo v5.x)
if [ -z "$GCC" ]; then
  # Espressif's newlib declares _global_impure_ptr without the const Debian's newlib has: one line of a
  # temporary copy of sys/reent.h differs, found before Debian's own.
  mkdir -p "$OUT/newlib/sys"
  sed 's/struct _reent \*const _global_impure_ptr/struct _reent *_global_impure_ptr/' "$NEWLIB/sys/reent.h" >"$OUT/newlib/sys/reent.h"
  INC="$INC -I$OUT/newlib"
  COMPILE="$CLANG --target=xtensa -Xclang -target-feature -Xclang +fp -fsyntax-only \
  -nostdinc -isystem $($CLANG -print-resource-dir)/include -isystem $NEWLIB -D__XTENSA__ -D_POSIX_READER_WRITER_LOCKS \
  -Wall -Wextra -Wno-unused-parameter -Wno-sign-compare -Werror -Wno-error=unused-function -Wno-error=unused-variable \
  -Wno-error=deprecated-declarations -Wno-error=extra \
  -include $ROOT/tools/firmware_idf_types.h"
  # ESP-IDF builds every component with -Wall -Werror (and the -Wno-error list above), and its Xtensa GCC
  # makes uint32_t / int32_t `unsigned long` / `long` (clang's Xtensa target: int): both are imitated,
  # so a printf format that the IDF build would refuse fails here too.
  # ESP-IDF's headers, not ours, use the GNU extensions clang warns about.
  # (v5.3: an empty struct in esp_etm.h, -Wextern-c-compat.)
  IDF_WARN="-Wno-gnu-zero-variadic-macro-arguments -Wno-c99-designator -Wno-missing-field-initializers -Wno-extern-c-compat"
else
  # ESP-IDF's flags for every component (v5.3 to v6.1: build.cmake's list, -Werror as in v6), the
  # ESP32-S3 toolchain file's, and CONFIG_COMPILER_OPTIMIZATION_PERF's -O2.
  COMPILE="${GCC%gcc}g++ -c -O2 -mlongcalls -fno-builtin-memcpy -fno-builtin-memset -fno-builtin-bzero -fno-builtin-stpcpy \
  -fno-builtin-strncpy -ffunction-sections -fdata-sections -Wall -Werror -Wno-error=unused-function -Wno-error=unused-variable \
  -Wno-error=unused-but-set-variable -Wno-error=deprecated-declarations -Wextra -Wno-error=extra -Wno-unused-parameter \
  -Wno-sign-compare -Wno-enum-conversion -gdwarf-4 -ggdb -D_GLIBCXX_USE_POSIX_SEMAPHORE -D_GLIBCXX_HAVE_POSIX_SEMAPHORE -std=gnu++2b"
  IDF_WARN=""
fi
# Then the firmware's own options (main/ and components/mcullm/ CMakeLists.txt).
COMPILE="$COMPILE -DESP_PLATFORM -DIDF_VER=\"$IDF_VER\" -D_GNU_SOURCE -std=gnu++20 -fno-exceptions -fno-rtti -ffp-contract=off"
OBJ=${OBJ_DIR:-$OUT/obj}
mkdir -p "$OBJ"

fail=0
n=0
check() {  # file, extra flags
  n=$((n + 1))
  o="$OBJ/$(basename "$1" .cpp)$(echo "$*" | cksum | cut -d' ' -f1).o"
  if [ -n "$GCC" ]; then set -- "$@" -o "$o"; fi
  if ! $COMPILE "$@" 2>"$OUT/err"; then
    fail=$((fail + 1))
    echo "FAIL $1"
    head -40 "$OUT/err"
  elif [ -s "$OUT/err" ]; then
    echo "ok (warnings) $1"
    head -20 "$OUT/err"
  fi
}

# The app in each configuration menuconfig offers: the three roles, the UART instead of USB, and core 0
# alone with the reference kernels.
for f in "$ROOT"/firmware/esp32s3/main/*.cpp; do
  for variant in "" "-DCONFIG_MCULLM_ROLE_MASTER=1 -DCONFIG_MCULLM_CLUSTER_NODES=1" "-DCONFIG_MCULLM_ROLE_NODE=1" "-DCONFIG_MCULLM_SERIAL_UART=1 -DCONFIG_MCULLM_UART_BAUD=115200" \
                 '-DMCULLM_CHECK_ONE_CORE=1 -DCONFIG_MCULLM_KERNELS="ref"'; do
    check "$f" $INC -I"$ROOT/include" -I"$ROOT/src" $IDF_WARN $variant
  done
done
# The mcullm component: cmake/Sources.cmake's rule (firmware/esp32s3/components/mcullm/CMakeLists.txt).
for f in $(find "$ROOT/src" -name '*.cpp' | sort); do
  case "$f" in
    *_host.cpp|*/src/kernels/x86/*|*/src/kernels/x86_512/*|*/src/kernels/arm/*) continue ;;
  esac
  extra=""  # the component's per-file options (its CMakeLists.txt): GCC 12.2 ICEs on this one at -O2 without it
  case "$f" in */src/kernels/ref/down_cols_ref.cpp) [ -n "$GCC" ] && extra=-fno-tree-pre ;; esac
  check "$f" -I"$OUT/config" -I"$ROOT/include" -I"$ROOT/src" -DMCULLM_PIE=1 -fno-fast-math $extra
done
# The PIE kernels: assembled as ESP-IDF does (the C compiler on the .S), then their .byte encodings
# against GNU as's mnemonics.
if [ -n "$GCC" ]; then
  for f in $(find "$ROOT/src/kernels" -name '*.S' | grep -Ev '/kernels/(x86|x86_512|arm)/' | sort); do
    n=$((n + 1))
    if ! "$GCC" -c -mlongcalls -I"$ROOT/src" "$f" -o "$OBJ/$(basename "$f" .S).o" 2>"$OUT/err"; then
      fail=$((fail + 1)); echo "FAIL $f"; head -40 "$OUT/err"
    fi
  done
  n=$((n + 1))
  if ! python3 "$ROOT/tools/esp32s3-toolchain/check_pie_mnemonics.py" "${GCC%gcc}as" "${GCC%gcc}objdump" >"$OUT/pie" 2>&1; then
    fail=$((fail + 1)); echo "FAIL PIE encodings against GNU as"; tail -20 "$OUT/pie"
  else
    tail -1 "$OUT/pie"
  fi
fi
echo "${GCC:+compiled with $GCC: }checked $n files against $IDF: $((n - fail)) passed, $fail failed"
[ "$fail" -eq 0 ]
