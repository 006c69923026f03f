#!/usr/bin/env bash
# Runs one model on every target and compares the fingerprints (token ids + logit bits):
#   x86-ref    mcullm run --kernels ref     (the model file itself)
#   x86-simd   mcullm run --kernels avx2    (or auto without AVX2)
#   board-host mcullm_board                 (the board runner's main on the host, from the board image)
#   aarch64    the board runner cross-built for aarch64-linux-gnu (tests/cross), kernels=neon, on qemu-aarch64
#   cortex-m7  the board runner on QEMU mps2-an500 (arm-none-eabi + newlib, semihosting)
#   xtensa     the board runner on QEMU sim lx106 (xtensa-lx106-elf + picolibc, -icount shift=0)
#   esp32-lx7  the board runner on QEMU sim de233_fpu: an ESP32-style LX7, windowed ABI and FPU
#              (clang-22 + targets/xtensa-lx7, -icount shift=0)
#
# usage: tools/run_targets.sh [options] MODEL
#   -z TOK            tokenizer for models without one beside them (convert and run)
#   --quant TYPE      first convert MODEL to GGUF with --type TYPE (e.g. q4g64), then run that
#   -n N              tokens to generate (16)      --prompt-ids IDS   (1,403,407)
#   --temp T --seed S sampling (0 = greedy; defaults 0 and 42)
#   --kv TYPE         KV cache f32 (default) or int8: `mcullm run --kv`, the runners' kv=
#   --cores 2         the board runners with a second core (cores=2: a thread on the hosts, QEMU -smp 2
#                     on esp32-lx7) split every pool task with it; the one-core MCUs are left out
#   --batch N         the board runners' batched prefill (batch=N; their default is 8, at most the
#                     prompt's length - 1). Either way one more row, board-host-b1, runs the host's
#                     runner token by token (batch=1): batched and not must give the same fingerprint
#   --work-tier T     where the board runners keep KV cache and activations: sram (default) or psram
#   --board-args ARGS more key=value arguments for every board runner (e.g. "sparse=1000": a ReLU model's
#                     FFN gate first on the boards; the PC runs as it does by default: the same bits)
#   --refusals        instead: every runner must refuse a truncated image, a corrupt one, an image
#                     whose SRAM section does not fit and one larger than its flash, each with its
#                     message and exit code
#   --build DIR       the release build with mcullm and mcullm_board (build/release)
#   --work DIR        scratch directory (a fresh one under $TMPDIR)
# Exit 0: all fingerprints equal (or all refusals right); 1: a mismatch or failure; 77: skipped
# because a cross toolchain or QEMU is missing (set MCULLM_REQUIRE_TARGETS=1 to fail instead, as CI does).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build/release
WORK=""
TOK=""
QUANT=""
N=16
IDS=1,403,407
TEMP=0
SEED=42
KV=f32
CORES=1
BOARD_ARGS=()
BATCH=""
TIER=sram
MODE=compare
while [ $# -gt 0 ]; do
  case "$1" in
    -z) TOK=$2; shift 2 ;;
    --quant) QUANT=$2; shift 2 ;;
    -n) N=$2; shift 2 ;;
    --prompt-ids) IDS=$2; shift 2 ;;
    --temp) TEMP=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --kv) KV=$2; shift 2 ;;
    --cores) CORES=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    --work-tier) TIER=$2; shift 2 ;;
    --board-args) read -r -a BOARD_ARGS <<<"$2"; shift 2 ;;
    --refusals) MODE=refusals; shift ;;
    --build) BUILD=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    -*) echo "run_targets: unknown option $1" >&2; exit 1 ;;
    *) MODEL=$1; shift ;;
  esac
done
[ -n "${MODEL:-}" ] || { echo "run_targets: give a model (see --help)" >&2; exit 1; }
[ -f "$MODEL" ] || { echo "run_targets: $MODEL: no such file" >&2; exit 1; }

[ -d "$BUILD" ] || { echo "run_targets: $BUILD: no such build directory" >&2; exit 1; }
BUILD=$(cd "$BUILD" && pwd)  # absolute: make -C and QEMU run elsewhere
MCULLM=$BUILD/mcullm
BOARD=$BUILD/mcullm_board
for f in "$MCULLM" "$BOARD"; do
  [ -x "$f" ] || { echo "run_targets: $f is missing: build it (cmake --build $BUILD --target mcullm mcullm_board)" >&2; exit 1; }
done

missing=""
for tool in arm-none-eabi-gcc xtensa-lx106-elf-gcc qemu-system-arm qemu-system-xtensa aarch64-linux-gnu-g++ qemu-aarch64; do
  command -v "$tool" >/dev/null || missing="$missing $tool"
done
[ -f /usr/lib/xtensa-lx106-elf/picolibc.specs ] || missing="$missing picolibc-xtensa-lx106-elf"
ls /usr/src/gcc-12/gcc-12*.tar.xz >/dev/null 2>&1 || missing="$missing gcc-12-source"
A64_SYSROOT=/usr/aarch64-linux-gnu  # the toolchain file's default (MCULLM_AARCH64_SYSROOT)
[ -f "$A64_SYSROOT/lib/libc.so.6" ] || missing="$missing libc6-arm64-cross"
if [ -n "$missing" ]; then
  msg="missing:$missing (apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm gcc-xtensa-lx106 picolibc-xtensa-lx106-elf gcc-12-source qemu-system-misc gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user)"
  if [ "${MCULLM_REQUIRE_TARGETS:-0}" = 1 ]; then echo "run_targets: FAIL: $msg" >&2; exit 1; fi
  echo "run_targets: SKIP: $msg"
  exit 77
fi

BOARDS=(board-host aarch64 cortex-m7 xtensa esp32-lx7)
MCUS=(xtensa m7 esp32)
# esp32-lx7 alone needs clang-22 (Debian 12: bookworm-security) and the lx106 binutils' ld: without
# them only that target is left out (CI, with MCULLM_REQUIRE_TARGETS=1, fails instead)
missing=""
for tool in clang-22 xtensa-lx106-elf-ld; do
  command -v "$tool" >/dev/null || missing="$missing $tool"
done
if [ -n "$missing" ]; then
  msg="esp32-lx7: missing:$missing (apt-get install clang-22 binutils-xtensa-lx106)"
  if [ "${MCULLM_REQUIRE_TARGETS:-0}" = 1 ]; then echo "run_targets: FAIL: $msg" >&2; exit 1; fi
  echo "run_targets: SKIP $msg"
  BOARDS=(board-host aarch64 cortex-m7 xtensa)
  MCUS=(xtensa m7)
fi

if [ "$CORES" = 2 ]; then  # the targets with a second core
  keep=()
  for t in "${BOARDS[@]}"; do case "$t" in board-host|aarch64|esp32-lx7) keep+=("$t") ;; esac; done
  BOARDS=("${keep[@]}")
elif [ "$CORES" != 1 ]; then
  echo "run_targets: --cores takes 1 or 2" >&2
  exit 1
fi

# The MCU builds (one at a time: parallel tests share the build directory).
TB=$BUILD/targets
mkdir -p "$TB"
if ! flock "$TB/.lock" make -s -C "$ROOT/targets" B="$TB" -j2 "${MCUS[@]}" >"$TB/make.log" 2>&1; then
  cat "$TB/make.log" >&2
  echo "run_targets: FAIL: the MCU builds failed" >&2
  exit 1
fi
# The aarch64 runner: the cross project of tests/cross (its own lock), shared with the aarch64_kernels test.
A64=$BUILD/aarch64
if ! cmake -DSOURCE="$ROOT/tests/cross" -DBINARY="$A64" -DTOOLCHAIN="$ROOT/cmake/toolchains/aarch64-linux-gnu.cmake" \
     -DTARGETS=mcullm_board -DRUN=OFF -P "$ROOT/tests/cross/run_cross.cmake" >"$TB/aarch64-build.log" 2>&1; then
  cat "$TB/aarch64-build.log" >&2
  echo "run_targets: FAIL: the aarch64 cross build failed" >&2
  exit 1
fi

[ -n "$WORK" ] || WORK=$(mktemp -d "${TMPDIR:-/tmp}/mcullm-targets.XXXXXX")
mkdir -p "$WORK"
TOKARGS=()
[ -n "$TOK" ] && TOKARGS=(-z "$TOK")
if [ -n "$QUANT" ]; then
  "$MCULLM" convert "$MODEL" "${TOKARGS[@]}" -o "$WORK/model-$QUANT.gguf" --type "$QUANT" 2>"$WORK/quant.log" ||
    { cat "$WORK/quant.log" >&2; exit 1; }
  MODEL=$WORK/model-$QUANT.gguf
fi
IMAGE=$WORK/model.img
"$MCULLM" convert "$MODEL" "${TOKARGS[@]}" --image "$IMAGE" 2>"$WORK/convert.log" || { cat "$WORK/convert.log" >&2; exit 1; }
echo "$IDS" | tr ',' ' ' >"$WORK/prompt.txt"

# run_board TARGET IMAGE ARGS...: the board runner on one target; stdout to $WORK/TARGET.out, exit code echoed.
run_board() {
  local target=$1 image=$2
  shift 2
  local args=(image="$image" prompt="$WORK/prompt.txt" n="$N" temp="$TEMP" seed="$SEED" kv="$KV" cores="$CORES" work="$TIER")
  [ -n "$BATCH" ] && args+=(batch="$BATCH")
  args+=("${BOARD_ARGS[@]}" "$@")
  local rc=0
  case "$target" in
    board-host) "$BOARD" "${args[@]}" >"$WORK/$target.out" 2>&1 || rc=$? ;;
    board-host-b1) "$BOARD" "${args[@]}" batch=1 >"$WORK/$target.out" 2>&1 || rc=$? ;;
    aarch64)  # the NEON table by name: the run fails if it is missing
      timeout 600 qemu-aarch64 -L "$A64_SYSROOT" "$A64/mcullm_board" "${args[@]}" kernels=neon \
        >"$WORK/$target.out" 2>&1 || rc=$? ;;
    cortex-m7|xtensa|esp32-lx7)
      local semi="enable=on,target=native,arg=board"
      for a in "${args[@]}"; do semi="$semi,arg=${a//,/,,}"; done
      local qemu
      case "$target" in
        cortex-m7) qemu=(qemu-system-arm -M mps2-an500 -kernel "$TB/cortex-m7.elf") ;;
        xtensa) qemu=(qemu-system-xtensa -M sim -cpu lx106 -m 128M -kernel "$TB/xtensa-lx106.elf") ;;
        esp32-lx7) qemu=(qemu-system-xtensa -M sim -cpu de233_fpu -smp "$CORES" -m 128M -kernel "$TB/esp32-lx7.elf") ;;
      esac
      timeout 600 "${qemu[@]}" -display none -monitor none -semihosting -icount shift=0 -semihosting-config "$semi" \
        >"$WORK/$target.out" 2>&1 || rc=$? ;;
  esac
  echo "$rc"
}

if [ "$MODE" = refusals ]; then
  size=$(stat -c %s "$IMAGE")
  head -c $((size / 2)) "$IMAGE" >"$WORK/truncated.img"
  cp "$IMAGE" "$WORK/corrupt.img"
  printf '\xff' | dd of="$WORK/corrupt.img" bs=1 seek=$((size - 100)) conv=notrunc status=none
  "$MCULLM" convert "$MODEL" "${TOKARGS[@]}" --image "$WORK/sram-heavy.img" --sram-budget 100000000 2>/dev/null
  truncate -s $((16 * 1024 * 1024 + 64)) "$WORK/huge.img"  # past every board's flash (sparse: costs nothing)
  fail=0
  check() {  # check TARGET IMAGE WANT_RC WANT_TEXT
    local rc
    rc=$(run_board "$1" "$2")
    if [ "$rc" = "$3" ] && grep -q "$4" "$WORK/$1.out"; then
      printf '%-11s %-15s refused (exit %s): %s\n' "$1" "$(basename "$2")" "$rc" "$(grep -m1 'board: error' "$WORK/$1.out")"
    else
      printf '%-11s %-15s WRONG: exit %s, want %s and "%s"\n' "$1" "$(basename "$2")" "$rc" "$3" "$4"
      cat "$WORK/$1.out"
      fail=1
    fi
  }
  for t in "${BOARDS[@]}"; do
    check "$t" "$WORK/truncated.img" 2 "board image: truncated"
    check "$t" "$WORK/corrupt.img" 2 "CRC mismatch"
    check "$t" "$WORK/sram-heavy.img" 3 "sram arena: .* do not fit"
    check "$t" "$WORK/huge.img" 3 "does not fit the board's"
  done
  exit $fail
fi

# The fingerprints.
declare -A FP
SIMD=auto
grep -qw avx2 /proc/cpuinfo 2>/dev/null && SIMD=avx2
for k in ref "$SIMD"; do
  name=x86-ref
  [ "$k" = ref ] || name=x86-simd
  out=$("$MCULLM" run -m "$MODEL" "${TOKARGS[@]}" --prompt-ids "$IDS" -n "$N" --temp "$TEMP" -s "$SEED" --kernels "$k" --kv "$KV" \
        --fingerprint -q 2>"$WORK/$name.err") || { cat "$WORK/$name.err" >&2; exit 1; }
  FP[$name]=$(echo "$out" | grep '^fingerprint' | cut -d' ' -f2)
done
BOARDS=(board-host-b1 "${BOARDS[@]}")
for t in "${BOARDS[@]}"; do
  rc=$(run_board "$t" "$IMAGE")
  if [ "$rc" != 0 ]; then
    cat "$WORK/$t.out" >&2
    echo "run_targets: FAIL: $t exited with $rc" >&2
    exit 1
  fi
  FP[$t]=$(grep '^fingerprint' "$WORK/$t.out" | cut -d' ' -f2)
done

ref=${FP[x86-ref]}
fail=0
last=${BOARDS[${#BOARDS[@]}-1]}  # an emulated MCU (esp32-lx7 or xtensa)
echo "model $MODEL, prompt $IDS, $N tokens, temp $TEMP, seed $SEED, kv $KV, board runners on $CORES core(s), work $TIER"
echo "tokens: $(grep '^tokens' "$WORK/$last.out" | cut -d' ' -f2-)"
declare -A KERNELS=([x86-ref]=ref [x86-simd]=$SIMD)
for t in x86-ref x86-simd "${BOARDS[@]}"; do
  per=""
  if [ -f "$WORK/$t.out" ]; then
    per=$(grep -E '^(prefill|per sampled token)' "$WORK/$t.out" | sed 's/per sampled token: //' | paste -sd ';')
    KERNELS[$t]=$(sed -n 's/^board: target.*, kernels \([a-z0-9]*\).*/\1/p' "$WORK/$t.out")
  fi
  if [ "${FP[$t]}" = "$ref" ] && [ -n "$ref" ]; then status=same; else status=DIFFERENT; fail=1; fi
  printf '%-11s %-16s %-9s kernels %-6s %s\n' "$t" "${FP[$t]:-none}" "$status" "${KERNELS[$t]}" "$per"
done
grep '^memory' "$WORK/$last.out" | sed "s/^/$last /"
exit $fail
