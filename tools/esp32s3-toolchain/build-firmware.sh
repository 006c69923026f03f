#!/bin/bash
# Rung 3 (docs/firmware.md, "verified where"): links and images firmware/esp32s3 with ESP-IDF and the
# toolchain of build-gcc.sh, outside the repository, without idf.py: ESP-IDF's CMake build directly.
#   tools/esp32s3-toolchain/build-firmware.sh WORK TOOLCHAIN_PREFIX MIRROR [MODEL_IMAGE]
# MIRROR: folder of git dirs named owner+repo/repo (as the fetch tool leaves them): espressif+esp-idf,
#   espressif+tlsf, espressif+mbedtls, Mbed-TLS+mbedtls, Mbed-TLS+mbedtls-framework, kmackay+micro-ecc, espressif+esptool,
#   espressif+esp-idf-kconfig.
# ESP-IDF release: IDF_REV (default v5.3.4: the oldest the firmware supports, esp_driver_* components).
# Its own toolchain is GCC 13.2 (esp-13.2.0); ours is GCC 12.2, so the version check is waived with
# IDF_MAINTAINER=1 (it warns instead). The submodules an app for the ESP32-S3 needs are taken at the
# commits the release pins (heap/tlsf, mbedtls, the bootloader's micro-ecc); COMPONENTS=main keeps
# the build to what main/ requires (no Wi-Fi, BT or their binary blobs). cmock and mqtt are removed from
# the scratch tree: ESP-IDF reads every component's CMakeLists, and theirs stop on a missing submodule.
# Python: Debian's packages (python3-pyparsing -click -pyelftools -serial -cryptography -bitstring
# -intelhex -construct -yaml -ecdsa) plus esptool v4 and esp-idf-kconfig v2 from their git dirs on
# PYTHONPATH.
# Result: WORK/build/{bootloader/bootloader.bin,partition_table/partition-table.bin,mcullm_esp32s3.bin}
# and WORK/flash.bin (16 MB: all three at their offsets, plus MODEL_IMAGE at 0x110000 if given).
# Build dependencies (apt): cmake ninja-build python3 and the Python packages above.
# PREPARE_ONLY=1 stops after preparing the ESP-IDF tree and the Python packages.
# VARIANT=NAME builds a second configuration beside the first (WORK/build-NAME, WORK/sdkconfig-NAME,
# WORK/flash-NAME.bin), e.g. VARIANT=ref EXTRA_SDKCONFIG=... with CONFIG_MCULLM_KERNELS="ref" in it.
# Status: written before the toolchain finished building; see docs/firmware.md for how far it got.
set -euo pipefail
WORK=$(realpath -m "$1"); TC=$(realpath "$2"); M=$(realpath "$3"); MODEL=${4:-}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
REV=${IDF_REV:-v5.3.4}
IDF_GIT=$M/espressif+esp-idf/repo
mkdir -p "$WORK"; cd "$WORK"
sub() {  # submodule path, git dir [, fallback git dir, fallback ref, paths...]: the commit the release pins, in place
  local c; c=$(git --git-dir="$IDF_GIT" ls-tree "$REV" "$1" | awk '{print $3}')
  [ -n "$c" ] || { echo "no submodule $1 in $REV" >&2; exit 2; }
  rm -rf "esp-idf/$1" && mkdir -p "esp-idf/$1"
  if git --git-dir="$2" cat-file -e "$c^{commit}" 2>/dev/null; then
    git --git-dir="$2" archive "$c" | tar x -C "esp-idf/$1"
  elif [ -n "${3:-}" ]; then
    echo "$1: $c is not in $2; using $4 of $3 instead" | tee -a submodules.txt
    git --git-dir="$3" archive "$4" "${@:5}" | tar x -C "esp-idf/$1"
  else
    echo "$1: $c is not in $2" >&2; exit 2
  fi
}
if [ ! -f esp-idf/.prepared ]; then
  rm -rf esp-idf && mkdir esp-idf
  # The whole tree does not archive (some large example blobs are not in the snapshot).
  git --git-dir="$IDF_GIT" archive "$REV" components tools CMakeLists.txt Kconfig sdkconfig.rename | tar x -C esp-idf
  sub components/heap/tlsf "$M/espressif+tlsf/repo"
  # v5.3.4 pins Espressif's mbedtls-3.6.4-idf branch, which the espressif/mbedtls snapshot lacks:
  # upstream Mbed TLS v3.6.4 (the same release without Espressif's patches) stands in, the library's
  # folders only (some test data blobs are not in that snapshot; ESP-IDF builds no tests or programs).
  sub components/mbedtls/mbedtls "$M/espressif+mbedtls/repo" "$M/Mbed-TLS+mbedtls/repo" v3.6.4 \
    include library 3rdparty cmake scripts CMakeLists.txt pkgconfig
  # Upstream Mbed TLS pins C99 for its library, where Espressif's fork keeps ESP-IDF's C17 (its
  # ports use _Static_assert through ESP_STATIC_ASSERT).
  sed -i 's/^set(CMAKE_C_STANDARD 99)$/# C99 pin removed by build-firmware.sh (ESP-IDF builds C17)/' esp-idf/components/mbedtls/mbedtls/CMakeLists.txt
  # Upstream Mbed TLS 3.6 keeps its CMake helpers and config.py's Python package in its own submodule,
  # `framework` (Mbed-TLS/mbedtls-framework), at the commit v3.6.4 pins.
  FW=$(git --git-dir="$M/Mbed-TLS+mbedtls/repo" ls-tree v3.6.4 framework | awk '{print $3}')
  mkdir -p esp-idf/components/mbedtls/mbedtls/framework
  git --git-dir="$M/Mbed-TLS+mbedtls-framework/repo" archive "$FW" | tar x -C esp-idf/components/mbedtls/mbedtls/framework
  sub components/bootloader/subproject/components/micro-ecc/micro-ecc "$M/kmackay+micro-ecc/repo"
  rm -rf esp-idf/components/cmock esp-idf/components/mqtt
  # With PSRAM, ESP-IDF compiles everything with -mdisable-hardware-atomics (Espressif's GCC only: atomics
  # through library calls, because S32C1I does not work on PSRAM). Upstream GCC 12 lacks the option, so
  # atomics stay S32C1I: right for the firmware, which keeps no atomic variable in PSRAM (weights, KV
  # cache and activations there are plain data).
  sed -i 's/^if(CONFIG_STDATOMIC_S32C1I_SPIRAM_WORKAROUND)$/if(FALSE)  # build-firmware.sh: upstream GCC/' \
    esp-idf/components/newlib/project_include.cmake esp-idf/components/newlib/CMakeLists.txt
  echo "$REV" > esp-idf/version.txt
  touch esp-idf/.prepared
fi
if [ ! -f py/.prepared ]; then
  rm -rf py && mkdir -p py/esptool py/kconfig
  T=$(git --git-dir="$M/espressif+esptool/repo" tag | grep -E '^v4\.[0-9]+\.[0-9]+$' | sort -V | tail -1)
  git --git-dir="$M/espressif+esptool/repo" archive "$T" | tar x -C py/esptool
  T=$(git --git-dir="$M/espressif+esp-idf-kconfig/repo" tag | grep -E '^v2\.[0-9]+\.[0-9]+$' | sort -V | tail -1)
  git --git-dir="$M/espressif+esp-idf-kconfig/repo" archive "$T" | tar x -C py/kconfig
  touch py/.prepared
fi
[ "${PREPARE_ONLY:-0}" = 1 ] && { echo "prepared: $WORK/esp-idf ($REV), $WORK/py"; exit 0; }
export IDF_PATH="$WORK/esp-idf" IDF_MAINTAINER=1 IDF_COMPONENT_MANAGER=0 IDF_SKIP_CHECK_SUBMODULES=1
export PYTHONPATH="$WORK/py/esptool:$WORK/py/kconfig${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$TC/bin:$PATH"
PY=${PYTHON:-/usr/bin/python3}  # Debian's Python: its dist-packages hold the packages above
DEFAULTS="$ROOT/firmware/esp32s3/sdkconfig.defaults"
grep -q '^components/mbedtls/mbedtls:' submodules.txt 2>/dev/null && DEFAULTS="$DEFAULTS;$ROOT/tools/esp32s3-toolchain/sdkconfig.upstream-mbedtls"
[ -n "${EXTRA_SDKCONFIG:-}" ] && DEFAULTS="$DEFAULTS;$EXTRA_SDKCONFIG"
B=build${VARIANT:+-$VARIANT}; FLASH=flash${VARIANT:+-$VARIANT}.bin
[ -f $B/build.ninja ] || cmake -S "$ROOT/firmware/esp32s3" -B $B -G Ninja -DIDF_TARGET=esp32s3 -DPYTHON="$PY" \
  -DPYTHON_DEPS_CHECKED=1 -DCOMPONENTS=main -DSDKCONFIG="$WORK/sdkconfig${VARIANT:+-$VARIANT}" \
  -DSDKCONFIG_DEFAULTS="$DEFAULTS" > $B.cmake.log 2>&1 \
  || { tail -30 $B.cmake.log; exit 1; }
ninja -C $B -j"${JOBS:-2}" > $B.ninja.log 2>&1 || { grep -m5 -B2 -A10 -E "error|Error" $B.ninja.log; exit 1; }
ARGS=(0x0 $B/bootloader/bootloader.bin 0x8000 $B/partition_table/partition-table.bin 0x10000 $B/mcullm_esp32s3.bin)
[ -n "$MODEL" ] && ARGS+=(0x110000 "$(realpath "$MODEL")")
"$PY" -m esptool --chip esp32s3 merge_bin --fill-flash-size 16MB -o $FLASH "${ARGS[@]}"
echo "imaged: $WORK/$FLASH (ESP-IDF $REV)"
