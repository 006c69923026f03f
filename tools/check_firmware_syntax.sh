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
# Not run by CI (no ESP-IDF there). Exit 0 when every file passes; the failing files' errors otherwise.
set -eu
IDF=${1:?usage: tools/check_firmware_syntax.sh ESP_IDF_DIR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CLANG=${CLANG:-clang++-22}
NEWLIB=${NEWLIB:-/usr/include/newlib}
C=$IDF/components
[ -d "$C/esp_hw_support" ] || { echo "no ESP-IDF components under $C" >&2; exit 2; }
[ -d "$NEWLIB" ] || { echo "newlib headers missing at $NEWLIB (apt-get install libnewlib-dev)" >&2; exit 2; }
command -v "$CLANG" >/dev/null || { echo "$CLANG not found" >&2; exit 2; }

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
# esp_libc's platform_include wraps the C library's headers: it comes first. Espressif's newlib
# declares _global_impure_ptr without the const Debian's newlib has: one line of a temporary copy of
# sys/reent.h differs, found before Debian's own.
mkdir -p "$OUT/newlib/sys"
sed 's/struct _reent \*const _global_impure_ptr/struct _reent *_global_impure_ptr/' "$NEWLIB/sys/reent.h" >"$OUT/newlib/sys/reent.h"
INC="-I$C/esp_libc/platform_include $INC -I$OUT/newlib"

FLAGS="--target=xtensa -Xclang -target-feature -Xclang +fp -fsyntax-only -std=gnu++20 -fno-exceptions -fno-rtti -ffp-contract=off \
  -nostdinc -isystem $($CLANG -print-resource-dir)/include -isystem $NEWLIB -D__XTENSA__ -DESP_PLATFORM -DIDF_VER=\"v5.x\" -D_GNU_SOURCE -D_POSIX_READER_WRITER_LOCKS \
  -Wall -Wextra -Wno-unused-parameter -Wno-sign-compare -Werror -Wno-error=unused-function -Wno-error=unused-variable \
  -Wno-error=deprecated-declarations -Wno-error=extra \
  -include $ROOT/tools/firmware_idf_types.h"
# ESP-IDF builds every component with -Wall -Werror (and the -Wno-error list above), and its Xtensa GCC
# makes uint32_t / int32_t `unsigned long` / `long` (clang's Xtensa target: int): both are imitated,
# so a printf format that the IDF build would refuse fails here too.
# ESP-IDF's headers, not ours, use the GNU extensions clang warns about.
IDF_WARN="-Wno-gnu-zero-variadic-macro-arguments -Wno-c99-designator -Wno-missing-field-initializers"

fail=0
n=0
check() {  # file, extra flags
  n=$((n + 1))
  if ! $CLANG $FLAGS "$@" 2>"$OUT/err"; then
    fail=$((fail + 1))
    echo "FAIL $1"
    head -40 "$OUT/err"
  elif [ -s "$OUT/err" ]; then
    echo "ok (warnings) $1"
    head -20 "$OUT/err"
  fi
}

# The app in each configuration menuconfig offers: the three roles, and the UART instead of USB.
for f in "$ROOT"/firmware/esp32s3/main/*.cpp; do
  for variant in "" "-DCONFIG_MCULLM_ROLE_MASTER=1 -DCONFIG_MCULLM_CLUSTER_NODES=1" "-DCONFIG_MCULLM_ROLE_NODE=1" "-DCONFIG_MCULLM_SERIAL_UART=1 -DCONFIG_MCULLM_UART_BAUD=115200"; do
    check "$f" $INC -I"$ROOT/include" -I"$ROOT/src" $IDF_WARN $variant
  done
done
# The mcullm component: cmake/Sources.cmake's rule (firmware/esp32s3/components/mcullm/CMakeLists.txt).
for f in $(find "$ROOT/src" -name '*.cpp' | sort); do
  case "$f" in
    *_host.cpp|*/src/tokenizer/*|*/src/host/*|*/src/serve/*|*/src/kernels/x86/*|*/src/kernels/x86_512/*|*/src/kernels/arm/*) continue ;;
  esac
  check "$f" -I"$OUT/config" -I"$ROOT/include" -I"$ROOT/src" -DMCULLM_PIE=1
done
echo "checked $n files against $IDF: $((n - fail)) passed, $fail failed"
[ "$fail" -eq 0 ]
