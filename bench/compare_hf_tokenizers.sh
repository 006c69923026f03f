#!/usr/bin/env bash
# Side by side, in one run: Qwen tokenizer encoding speed of mcullm (bench/tokenizer_bench, one
# thread) and of Hugging Face's tokenizers.js on node, on ../shared/data/tinystories_val_head794k.txt,
# and whether the two give the same ids. Nothing is downloaded: install the package once, outside the
# repository, e.g.  mkdir -p /tmp/hf && (cd /tmp/hf && npm install @huggingface/tokenizers)
#
# Usage: bench/compare_hf_tokenizers.sh PACKAGE_DIR [REPS]
#   PACKAGE_DIR  the directory holding node_modules/@huggingface/tokenizers ($HF_TOKENIZERS_DIR)
#   REPS         repetitions of each side (default 5)
# Environment: SHARED (default ../shared beside the repository), MCULLM_BUILD (default build/release).
set -euo pipefail
script_dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
repo_dir=$(cd -- "$script_dir/.." && pwd)
PKG=${1:-${HF_TOKENIZERS_DIR:-}}
REPS=${2:-5}
SHARED=${SHARED:-"$repo_dir/../shared"}
BUILD=${MCULLM_BUILD:-"$repo_dir/build/release"}
die() { echo "compare_hf_tokenizers: $*" >&2; exit 1; }
[ -n "$PKG" ] && [ -d "$PKG/node_modules/@huggingface/tokenizers" ] ||
  die "give the directory where @huggingface/tokenizers is installed (see the top of this script)"
command -v node >/dev/null || die "node is not installed"
[ -x "$BUILD/bench/tokenizer_bench" ] && [ -x "$BUILD/mcullm" ] || die "build first: cmake --preset release && cmake --build --preset release"
TEXT="$SHARED/data/tinystories_val_head794k.txt"
TOK="$SHARED/tokenizers/qwen/tokenizer.json"
CONF="$SHARED/tokenizers/qwen/tokenizer_config.json"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "text: $TEXT ($(wc -c < "$TEXT") bytes), tokenizer: $TOK, machine: $(nproc) cores, $(date -u +%FT%TZ)"
"$BUILD/mcullm" tokenize -m "$TOK" -f "$TEXT" --ids --no-parse-special > "$tmp/ours.ids" 2>/dev/null
for r in $(seq 1 "$REPS"); do
  "$BUILD/bench/tokenizer_bench" --benchmark_filter='BM_Encode/qwen_json$' --benchmark_repetitions=1 \
      --benchmark_format=csv 2>/dev/null | awk -F, '/BM_Encode/ { printf "mcullm:           %.2f MB/s (cpu %.1f ms per encode), vocabulary %.1f MiB\n", $6/1e6, $4, $NF }'
  node "$script_dir/hf_tokenizers_encode.mjs" "$PKG" "$TOK" "$CONF" "$TEXT" 3 "$tmp/hf.ids"
done
if cmp -s "$tmp/ours.ids" "$tmp/hf.ids"; then
  echo "ids: identical ($(wc -w < "$tmp/ours.ids") tokens)"
else
  echo "ids: DIFFERENT (ours $(wc -w < "$tmp/ours.ids"), hf $(wc -w < "$tmp/hf.ids") tokens)"; exit 1
fi
