# Shared by run_board.sh and profile_stages.sh (sourced, after `set -euo pipefail` and ROOT=...):
# the options, the board runner ELF with PIE, the model's board image, and the QEMU command line.
#   board_parse_args "$@"   sets QEMU MODEL TOKARGS QUANT N IDS BUILD WORK KERNELS KV TIER CORES BATCH LOGITS SPARSE DOWN MCULLM
#   board_build_elf         builds $ELF (the variant esp32s3-pie; esp32s3-pie-fork, linked by
#                           targets/xtensa-lx7/sim-esp32s3.ld, when QEMU is Espressif's fork)
#   board_image             converts MODEL (to --quant first, if given) into $WORK/model.img
#   board_qemu K OUT [QEMU OPTIONS...]   runs the ELF with kernels=K, its stdout and stderr to OUT

board_parse_args() {
  QEMU=$1
  shift
  BUILD=$ROOT/build/release WORK="" TOKARGS=() QUANT="" N=16 IDS=1,403,407 KERNELS="" MODEL="" KV=f32 TIER=sram CORES=1 BATCH=8 LOGITS=all SPARSE=0 DOWN=cols
  while [ $# -gt 0 ]; do
    case "$1" in
      -z) TOKARGS=(-z "$2"); shift 2 ;;
      --quant) QUANT=$2; shift 2 ;;
      -n) N=$2; shift 2 ;;
      --prompt-ids) IDS=$2; shift 2 ;;
      --build) BUILD=$2; shift 2 ;;
      --work) WORK=$2; shift 2 ;;
      --kernels) KERNELS=$2; shift 2 ;;
      --kv) KV=$2; shift 2 ;;
      --work-tier) TIER=$2; shift 2 ;;  # where the runner's KV cache and activations go: sram | psram
      --cores) CORES=$2; shift 2 ;;     # 2: the runner's second core (QEMU -smp 2) takes half of every pool task
      --batch) BATCH=$2; shift 2 ;;     # the runner's batched prefill: up to N prompt tokens a call (1: one at a time)
      --logits) LOGITS=$2; shift 2 ;;   # sampled: the prompt's logits are not computed (nor hashed), as on the firmware
      --sparse) SPARSE=$2; shift 2 ;;   # a ReLU model's FFN gate first at <= P live neurons per mille (0: dense)
      --down) DOWN=$2; shift 2 ;;       # with --sparse: the down product by column copies (cols) or the rows
      -*) echo "$(basename "$0"): unknown option $1" >&2; exit 1 ;;
      *) MODEL=$1; shift ;;
    esac
  done
  [ -n "$MODEL" ] || { echo "$(basename "$0"): no model" >&2; exit 1; }
  BUILD=$(cd "$BUILD" && pwd)
  MCULLM=$BUILD/mcullm
  [ -n "$WORK" ] || WORK=$(mktemp -d "${TMPDIR:-/tmp}/mcullm-pie.XXXXXX")
  mkdir -p "$WORK"
  WORK=$(cd "$WORK" && pwd)
}

board_build_elf() {
  local variant=esp32s3-pie ld=()
  # Espressif's fork (it has the machine esp32s3) gives -M sim -cpu esp32s3 its core's own memory
  # map (sysrom 0x50000000, sysram 0x60000000); tools/esp32s3-qemu/build.sh's QEMU has de233_fpu's.
  if "$QEMU" -M help | grep -q '^esp32s3 '; then
    variant=esp32s3-pie-fork
    ld=(LX7_LDSCRIPT="$ROOT/targets/xtensa-lx7/sim-esp32s3.ld")
  fi
  local tb=$BUILD/targets
  make -s -C "$ROOT/targets" B="$tb" -j2 esp32 LX7_VARIANT=$variant "${ld[@]}" LX7_EXTRA_DEFS=-DMCULLM_PIE=1 \
    LX7_EXTRA_SRCS="$ROOT/src/kernels/esp32s3/pie_table.cpp $ROOT/src/kernels/esp32s3/pie_kernels.S" >"$WORK/make.log" 2>&1 ||
    { cat "$WORK/make.log" >&2; exit 1; }
  ELF=$tb/$variant.elf
}

board_image() {
  if [ -n "$QUANT" ]; then
    "$MCULLM" convert "$MODEL" "${TOKARGS[@]}" -o "$WORK/model-$QUANT.gguf" --type "$QUANT" 2>"$WORK/quant.log" ||
      { cat "$WORK/quant.log" >&2; exit 1; }
    MODEL=$WORK/model-$QUANT.gguf
  fi
  "$MCULLM" convert "$MODEL" "${TOKARGS[@]}" --image "$WORK/model.img" 2>"$WORK/convert.log" ||
    { cat "$WORK/convert.log" >&2; exit 1; }
  echo "$IDS" | tr ',' ' ' >"$WORK/prompt.txt"
}

board_qemu() {
  local k=$1 out=$2
  shift 2
  local semi="enable=on,target=native,arg=board,arg=image=$WORK/model.img,arg=prompt=$WORK/prompt.txt,arg=n=$N,arg=temp=0"
  semi="$semi,arg=seed=42,arg=kernels=$k,arg=kv=$KV,arg=work=$TIER,arg=cores=$CORES,arg=batch=$BATCH,arg=logits=$LOGITS,arg=sparse=$SPARSE"  # greedy, as the PC run (the runner samples at 0.8 by default)
  [ "$SPARSE" = 0 ] || semi="$semi,arg=down=$DOWN"
  timeout 1800 "$QEMU" -M sim -cpu esp32s3 -smp "$CORES" -m 128M -kernel "$ELF" -display none -monitor none \
    -semihosting -icount shift=0 "$@" -semihosting-config "$semi" >"$out" 2>&1
}
