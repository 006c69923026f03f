#!/bin/sh
# The docs/models.md comparison: each variant trained twice (seeds 1 and 2) with the same short budget
# (BUDGET_ARGS: steps x batch x window tokens) on the same 1024-piece vocabulary; the last line of each
# log holds the validation bits/byte (first 60 chunks of tinystories_val_head794k.txt). Then each
# exported model is measured by mcullm (train/measure.sh).
#   train/variants.sh OUT_DIR [MCULLM]  (OUT_DIR/tokenizer.json and train-1024.npy are reused when present;
#                                        a run whose log says it wrote its model is not repeated; one with a
#                                        checkpoint.pt and no model yet continues from it with --resume)
# Variants: f32 / q4 QAT / ternary QAT (bitllama2.c layout), SwiGLU / ReLU-gated FFN, with PLE (q4e QAT),
# combo (PLE + ReLU-gated FFN, q4e QAT); ple64 / combo64: a wider per-layer table (P = 64); q4l6 / q4l8:
# q4 QAT with 6 / 8 layers instead of BUDGET_ARGS' count.
# ternary128: the ternary variant at dim 128, hidden 256 (mcullm's i2_s kernels need multiples of 128,
# so the dim-64 ternary runs are scored in PyTorch only).
set -eu
out=${1:?usage: variants.sh OUT_DIR [MCULLM]}
cli=${2:-build/release/mcullm}
py=${PYTHON:-/usr/bin/python3}
here=$(dirname "$0")
BUDGET_ARGS=${BUDGET_ARGS:-"--dim 64 --layers 2 --heads 4 --kv-heads 4 --hidden 192 --steps 150 --batch 8 --seq 256 --lr 3e-3 --warmup 20 --eval-every 150"}
VARIANTS=${VARIANTS:-"f32-swiglu q4-swiglu ternary-swiglu f32-relu q4-relu q4-ple q4-combo ternary128-swiglu"}
mkdir -p "$out"
for variant in $VARIANTS; do
  q=${variant%-*}
  ffn=${variant#*-}
  extra=""
  case $q in
    f32) q=none ;;
    ternary128) q=ternary; extra="--dim 128 --hidden 256" ;;
    q4l6) q=q4; extra="--layers 6" ;;
    q4l8) q=q4; extra="--layers 8" ;;
  esac
  case $ffn in
    ple) ffn=swiglu; extra="--ple 32" ;;
    combo) ffn=relu; extra="--ple 32" ;;
    ple64) ffn=swiglu; extra="--ple 64" ;;
    combo64) ffn=relu; extra="--ple 64" ;;
  esac
  for seed in 1 2; do
    dir="$out/$variant-s$seed"
    mkdir -p "$dir"
    ln -sf "$(cd "$out" && pwd)/tokenizer.json" "$dir/tokenizer.json"
    ln -sf "$(cd "$out" && pwd)/train-1024.npy" "$dir/train-1024.npy"
    if ! grep -q '^wrote' "$dir/log.txt" 2>/dev/null; then
      if [ -f "$dir/checkpoint.pt" ] && [ -f "$dir/log.txt" ]; then
        # an interrupted run (same arguments): continue from its checkpoint, the log appended
        # shellcheck disable=SC2086
        $py "$here/train.py" --out "$dir" --quant "$q" --ffn "$ffn" --seed "$seed" --threads 1 $BUDGET_ARGS $extra --resume >> "$dir/log.txt" 2>&1
      else
        # shellcheck disable=SC2086
        $py "$here/train.py" --out "$dir" --quant "$q" --ffn "$ffn" --seed "$seed" --threads 1 $BUDGET_ARGS $extra > "$dir/log.txt" 2>&1
      fi
    fi
    echo "$variant seed $seed: $(grep ' val ' "$dir/log.txt" | tail -1) $(grep '^relu:' "$dir/log.txt" || true)"
    "$here/measure.sh" "$dir" "$cli"
  done
done
