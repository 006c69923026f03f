# Shared by bench/compare_bitnet_cpp.sh and bench/compare_llama_cpp.sh (sourced, not run): the checks
# and scratch directory every comparison needs, one engine run through a peer's llama-bench or
# through `mcullm bench`, t/s stored in TPS[engine|threads|pp|tg], and the side-by-side table. The
# caller sets N_PROMPT, N_GEN, REPS, THREADS, LLAMA_BENCH, MCULLM, repo_dir and defines die().

# Checks the common settings, then makes $work (removed at exit, never inside the repository) and
# $tlist (the thread counts, comma-separated). $1: the scratch directory's name prefix.
compare_setup() {
  [[ -x $LLAMA_BENCH ]] || die "$LLAMA_BENCH is missing or not executable"
  [[ -x $MCULLM ]] || die "our CLI $MCULLM is missing: cmake --preset release && cmake --build --preset release"
  local v t
  for v in "$N_PROMPT" "$N_GEN" "$REPS"; do [[ $v =~ ^[1-9][0-9]*$ ]] || die "-p/-n/-r want positive integers, got '$v'"; done
  for t in $THREADS; do [[ $t =~ ^[1-9][0-9]*$ ]] || die "-t wants positive integers, got '$t'"; done
  work=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
  trap 'rm -rf -- "$work"' EXIT
  case "$(cd -- "$work" && pwd -P)/" in
    "$(cd -- "$repo_dir" && pwd -P)/"*) die "TMPDIR $work is inside the repository; point TMPDIR elsewhere" ;;
  esac
  tlist=$(tr ' ' ',' <<<"$THREADS" | sed 's/,*$//')
}
declare -A TPS=()  # engine|threads|test -> t/s
ENGINES=()

# A llama.cpp-family llama-bench: its csv (avg_ts per n_threads / n_prompt / n_gen), default batch
# (-b 2048): its pp evaluates the prompt as one batch. Extra arguments go to llama-bench.
run_theirs() {
  local name=$1 model=$2
  shift 2
  ENGINES+=("$name")
  "$LLAMA_BENCH" -m "$model" -p "$N_PROMPT" -n "$N_GEN" -t "$tlist" -r "$REPS" -o csv "$@" >"$work/$name.csv" 2>"$work/$name.err" ||
    { cat "$work/$name.err" >&2; die "llama-bench failed on $model"; }
  local hdr
  hdr=$(head -1 "$work/$name.csv")
  while IFS=, read -r t p n ts; do
    if [[ $p != 0 ]]; then TPS[$name\|$t\|pp]=$ts; else TPS[$name\|$t\|tg]=$ts; fi
  done < <(awk -F, -v h="$hdr" 'BEGIN {n = split(h, c, ","); for (i = 1; i <= n; i++) {gsub(/"/, "", c[i]); col[c[i]] = i}}
             NR > 1 {gsub(/"/, ""); print $col["n_threads"] "," $col["n_prompt"] "," $col["n_gen"] "," $col["avg_ts"]}' "$work/$name.csv")
}

# ours: mcullm bench's markdown table (| model | size | params | backend | threads | test | t/s |);
# KERNELS (when set) is passed as --kernels.
run_ours() {
  local name=$1 model=$2
  ENGINES+=("$name")
  "$MCULLM" bench -m "$model" -p "$N_PROMPT" -n "$N_GEN" -t "$tlist" -r "$REPS" ${KERNELS:+--kernels "$KERNELS"} \
    >"$work/$name.md" 2>"$work/$name.err" ||
    { cat "$work/$name.err" >&2; die "mcullm bench failed on $model"; }
  echo "$name: $(awk -F'|' 'NF >= 8 && $7 ~ /(pp|tg)[0-9]/ {gsub(/^ +| +$/, "", $5); print $5; exit}' "$work/$name.md")" >&2
  while IFS='|' read -r t test ts; do
    TPS[$name\|$t\|${test:0:2}]=$ts
  done < <(awk -F'|' 'NF >= 8 && $7 ~ /(pp|tg)[0-9]/ {gsub(/ /, "", $6); gsub(/ /, "", $7); split($8, a, "±"); gsub(/ /, "", a[1]); print $6 "|" $7 "|" a[1]}' "$work/$name.md")
}

# The machine line: CPU name, its SIMD flags that matter here, load average.
print_machine() {
  local cpu flags
  cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
  flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -xE 'avx2|f16c|fma|avx_vnni|avx512f|avx512bw|avx512vl|avx512_vnni|avx512_bf16|amx_tile|amx_int8' | tr '\n' ' ')
  echo "machine: ${cpu:-unknown CPU}, $(nproc) CPUs, flags: ${flags% }, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
}

# The t/s table of every engine run, pp and tg per thread count.
print_table() {
  echo
  printf '%-22s' "t/s"
  for t in $THREADS; do printf '%12s %12s' "pp$N_PROMPT ${t}T" "tg$N_GEN ${t}T"; done
  echo
  for e in "${ENGINES[@]}"; do
    printf '%-22s' "$e"
    for t in $THREADS; do printf '%12s %12s' "${TPS[$e|$t|pp]:-?}" "${TPS[$e|$t|tg]:-?}"; done
    echo
  done
}

# One ratio row: engine ours over the best of the engines whose names start with prefix.
print_ratio() {
  local ours=$1 prefix=$2 label=$3 t test e best
  printf '%-22s' "$label"
  for t in $THREADS; do
    for test in pp tg; do
      best=0
      for e in "${ENGINES[@]}"; do
        [[ $e == "$prefix"* ]] || continue
        best=$(awk -v a="$best" -v b="${TPS[$e|$t|$test]:-0}" 'BEGIN {print (b > a ? b : a)}')
      done
      awk -v a="${TPS[$ours|$t|$test]:-0}" -v b="$best" 'BEGIN {if (b > 0) printf "%12s", sprintf("%.2fx", a / b); else printf "%12s", "?"}'
    done
  done
  echo
}
