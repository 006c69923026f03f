#!/bin/sh
# mcullm's figures for one trained run directory (train/variants.sh): bits/byte on the first 60 chunks of
# the validation file (`mcullm eval`, with the share of ReLU neurons skipped when the FFN is ReLU-gated),
# weight bytes read per token and the predicted ESP32-S3 tokens/s (`mcullm plan`: esp32s3-psram80, one
# core, mean over positions 0..511). q4 QAT runs are measured as `mcullm convert --type q4g64` packs them.
#   train/measure.sh RUN_DIR [MCULLM]
set -eu
dir=${1:?usage: measure.sh RUN_DIR [MCULLM]}
cli=${2:-build/release/mcullm}
shared=${MCULLM_SHARED:-$(dirname "$0")/../../shared}
val="$shared/data/tinystories_val_head794k.txt"
tok=""
if [ -f "$dir/model-ternary.bin" ]; then
  # the bit order is fixed here (eval would guess it); the i2_s GGUF holds the same weights
  model="$dir/model-ternary.gguf"
  if ! "$cli" convert "$dir/model-ternary.bin" -o "$model" --bit-order msb -z "$dir/tokenizer.bin" > "$dir/convert.txt" 2>&1; then
    echo "  mcullm: model-ternary.bin does not load: $(tail -1 "$dir/convert.txt")"
    exit 0
  fi
elif [ -f "$dir/model-ple.bin" ]; then
  model="$dir/model-ple.bin"
  tok="-z $dir/tokenizer.bin"
elif grep -q "quant='q4'" "$dir/log.txt"; then
  model="$dir/model-q4g64.gguf"
  "$cli" convert "$dir/model-f32.gguf" -o "$model" --type q4g64 > /dev/null 2>&1
else
  model="$dir/model-f32.gguf"
fi
# shellcheck disable=SC2086
if ! "$cli" eval -m "$model" $tok -f "$val" --chunks 60 -t 1 > "$dir/eval.txt" 2>&1; then
  echo "  mcullm: $(basename "$model") does not run: $(tail -1 "$dir/eval.txt")"
  exit 0
fi
"$cli" plan -m "$model" > "$dir/plan.txt" 2>&1
bpb=$(sed -n 's/.*bits\/byte \([0-9.]*\).*/\1/p' "$dir/eval.txt")
skip=$(sed -n 's/.*ReLU FFN: \([0-9.]*%\) of neurons dead.*/ dead \1,/p' "$dir/eval.txt")
# weight bytes read per token: the class rows other than the KV cache, over the three tiers
bytes=$(awk '/^class/{on=1; next} on && /^(embedding|attention|ffn|norm|head|ple)/{s += $2 + $3 + $4} on && /^compute/{on=0} END{print s}' "$dir/plan.txt")
ffn=$(awk '/^class/{on=1; next} on && /^ffn /{print $2 + $3 + $4; exit}' "$dir/plan.txt")
toks=$(sed -n 's/^mean over positions.*-> \([0-9.]*\) tok\/s/\1/p' "$dir/plan.txt")
# ReLU-gated: the firmware's gate-first FFN reads the gate and down matrices whole and the up rows of
# live neurons only (`mcullm plan --ffn-live`, the live share `mcullm eval` counted over the chunks)
sparse=""
live=$(sed -n 's/.*ReLU FFN: .*; \([0-9]*\) of \([0-9]*\) live.*/\1 \2/p' "$dir/eval.txt" | awk '{l = int((1000 * $1 + $2 - 1) / $2); print (l < 1 ? 1 : l)}')
if [ -n "$live" ]; then
  "$cli" plan -m "$model" --ffn-live "$live" > "$dir/plan-live.txt" 2>&1
  lbytes=$(awk '/^class/{on=1; next} on && /^(embedding|attention|ffn|norm|head|ple)/{s += $2 + $3 + $4} on && /^compute/{on=0} END{print s}' "$dir/plan-live.txt")
  ltoks=$(sed -n 's/^mean over positions.*-> \([0-9.]*\) tok\/s/\1/p' "$dir/plan-live.txt")
  sparse="; gate first at $live live per mille: weight bytes/token $lbytes, $ltoks tok/s predicted (mean)"
fi
echo "  mcullm: $(basename "$model"): bits/byte $bpb,$skip weight bytes/token $bytes (ffn $ffn), $toks tok/s predicted (mean)$sparse"
