#!/bin/bash
# Installs the Debian packages a group of jobs needs, only those that are missing. One script for
# `make run`, `make test`, `make plots` and .ci/run.
#
#   tools/install-deps.sh [--dry-run] GROUP...
#     run     what the CLI build needs (`make run`): compiler, CMake, and the libraries mcullm links
#     test    everything the whole suite needs (`make test`, CI): run + GoogleTest, Benchmark, PCRE2, clang
#             for the fuzzers, Chromium and Node for the page's test, NumPy/PyTorch, cross toolchains, QEMU
#     plots   Matplotlib for `make plots`
#     train   PyTorch, NumPy and tqdm for `make train-default`
#
# Prints one line, "install-deps: missing: PKG..." or "install-deps: nothing missing", then installs
# them (apt-get update once, then apt-get install) when root; otherwise prints the `sudo` command and
# exits 1. --dry-run only prints the line and exits 0. Nothing but bash builtins, one dpkg-query call
# and apt-get (tests/install_deps_test.sh runs it with stand-ins for those on an empty PATH).
set -uo pipefail

run_pkgs=(cmake make g++ pkg-config libcli11-dev nlohmann-json3-dev libutf8proc-dev libcpp-httplib-dev
          libasio-dev)  # Asio (standalone): the cluster's TCP and serial links
test_pkgs=(libgtest-dev libbenchmark-dev libpcre2-dev
           clang-14 libclang-rt-14-dev   # clang + libFuzzer: `make test` runs the fuzz targets
           chromium nodejs               # the web page's browser test (npm: see below)
           python3 python3-numpy         # tools/qwen2_reference.py: the Qwen2 float golden
           python3-torch                 # train/ and its export test (train_export)
           # the `targets` tests: cross toolchains and QEMU for the emulated MCUs (tools/run_targets.sh)
           gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm gcc-xtensa-lx106 picolibc-xtensa-lx106-elf
           gcc-12-source qemu-system-misc
           socat                         # tools/run_chain.sh: emulated boards joined to PC cluster processes
           # esp32-lx7: the ESP32-style Xtensa LX7 route (clang-22 from bookworm-security; lx106's ld links it)
           clang-22 binutils-xtensa-lx106
           # aarch64: the NEON kernels cross-built and run under qemu-aarch64
           gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user)
plots_pkgs=(python3 python3-matplotlib)
train_pkgs=(python3 python3-numpy python3-torch python3-tqdm
            libopenblas0-pthread)       # PyTorch with the reference BLAS trains ~10x slower

usage() { echo "usage: tools/install-deps.sh [--dry-run] run|test|plots|train..." >&2; exit 2; }

dry_run=0
wanted=()
for arg in "$@"; do
  case "$arg" in
    --dry-run) dry_run=1 ;;
    run) wanted+=("${run_pkgs[@]}") ;;
    test) wanted+=("${run_pkgs[@]}" "${test_pkgs[@]}")
          # npm comes with nodejs on some machines (NodeSource's nodejs, which conflicts with Debian's
          # npm): only when there is no npm at all is Debian's installed.
          command -v npm >/dev/null 2>&1 || wanted+=(npm) ;;
    plots) wanted+=("${plots_pkgs[@]}") ;;
    train) wanted+=("${train_pkgs[@]}") ;;
    *) echo "install-deps: unknown group '$arg'" >&2; usage ;;
  esac
done
[ ${#wanted[@]} -gt 0 ] || usage

# One dpkg-query call for every package: "name status" per package dpkg knows (unknown ones only
# print an error, which is dropped).
declare -A installed=()
while read -r name status; do
  [ "$status" = installed ] && installed[$name]=1
done < <(dpkg-query -W -f='${Package} ${db:Status-Status}\n' "${wanted[@]}" 2>/dev/null)

declare -A seen=()
missing=()
for p in "${wanted[@]}"; do
  [ -n "${seen[$p]:-}" ] && continue
  seen[$p]=1
  [ -n "${installed[$p]:-}" ] || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: nothing missing"
  exit 0
fi
echo "install-deps: missing: ${missing[*]}"
[ "$dry_run" = 1 ] && exit 0

if [ "$(id -u)" != 0 ]; then
  echo "install-deps: not root: install them with" >&2
  echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q || { echo "install-deps: apt-get update failed" >&2; exit 1; }
apt-get install -y -q --no-install-recommends "${missing[@]}" || { echo "install-deps: apt-get install failed" >&2; exit 1; }
