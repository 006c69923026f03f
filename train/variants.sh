#!/bin/sh
# The docs/models.md comparison: each variant trained twice (seeds 1 and 2) with the same short budget
# (BUDGET_ARGS: steps x batch x window tokens) on the same 1024-piece vocabulary; the last line of each
# log holds the validation bits/byte (first 60 chunks of tinystories_val_head794k.txt).
#   train/variants.sh OUT_DIR      (OUT_DIR/tokenizer.json and train-1024.npy are reused when present)
set -eu
out=${1:?usage: variants.sh OUT_DIR}
py=${PYTHON:-/usr/bin/python3}
here=$(dirname "$0")
BUDGET_ARGS=${BUDGET_ARGS:-"--dim 64 --layers 2 --heads 4 --kv-heads 4 --hidden 192 --steps 150 --batch 8 --seq 256 --lr 3e-3 --warmup 20 --eval-every 150"}
mkdir -p "$out"
for variant in "f32 swiglu" "q4 swiglu" "ternary swiglu" "f32 relu" "q4 relu"; do
  set -- $variant
  for seed in 1 2; do
    dir="$out/$1-$2-s$seed"
    mkdir -p "$dir"
    ln -sf "$(cd "$out" && pwd)/tokenizer.json" "$dir/tokenizer.json"
    ln -sf "$(cd "$out" && pwd)/train-1024.npy" "$dir/train-1024.npy"
    q=$1; [ "$q" = f32 ] && q=none
    $py "$here/train.py" --out "$dir" --quant "$q" --ffn "$2" --seed "$seed" --threads 1 $BUDGET_ARGS > "$dir/log.txt" 2>&1
    echo "$1 $2 seed $seed: $(grep ' val ' "$dir/log.txt" | tail -1) $(grep '^relu:' "$dir/log.txt" || true)"
  done
done
