#!/usr/bin/python3
"""The per-stage instruction profile of profile_stages.sh (see there).

  profile_stages.py helpers NM_FILE > helpers.txt     address ranges for count_pcs (call-site routines)
  profile_stages.py mark NM_FILE                      the hex address of the runner's on_step
  profile_stages.py report NM_FILE COUNTS RUNNER_OUT [--top K]

NM_FILE: `nm -n -C` of the board runner ELF. COUNTS: count_pcs's output. RUNNER_OUT: the runner's
stdout (its "step" lines and "per sampled token" line say which segments are sampled tokens).
"""
import bisect
import re
import sys

# Routines without a stage of their own: their instructions go to the function that called them.
HELPER = re.compile(r"^(__|_vectors$|mem(set|cpy|move|cmp)$|mcullm_(pie_|fdiv_by|softmax_exps|silu_|fill_u32|values_q8_|round_to_int8|q4e_abs_max|q4e_round_int8)|mcullm::mc_(expf?|expf_rounded\w*|log|sqrtf|sincos)\b|mcullm::q4e_scale\b)")

# A function's stage: the first pattern that matches its demangled name (arguments stripped).
STAGES = [
    (r"matvec_blocks_pie<\d+, &mcullm_pie_(\w+?)_rows", lambda m: f"matvec {m.group(1)} (PIE)"),
    (r"matvec_(\w+?)_pie\b", lambda m: f"matvec {m.group(1)} (PIE)"),
    (r"matmat_i2s_by_rows<.*matvec_i2s_pie", lambda m: "matvec i2s batched (PIE)"),
    (r"matmat_i2s", lambda m: "matvec i2s batched (scalar)"),
    (r"matvec_down_cols|ffn_relu_sparse", lambda m: "sparse FFN (scalar)"),
    (r"matvec_expand_f32", lambda m: "matvec via f32 row expansion (scalar)"),
    (r"matvec_(\w+?)_ref\b", lambda m: f"matvec {m.group(1)} (scalar)"),
    (r"classifier_task|grouped_head|visit_groups|head_batch|fill_f32", lambda m: "head: classifier over the vocabulary (scalar)"),
    (r"BitLlama2cContext::forward", lambda m: "bitllama2c layer body: SiLU gate with a double exp, norms (scalar)"),
    (r"attention_task|attend_heads", lambda m: "attention task body and glue (scalar)"),
    (r"attn_scores_(\w+?)_pie\b", lambda m: "attention scores (PIE)"),
    (r"attn_scores", lambda m: "attention scores (scalar)"),
    (r"attn_values", lambda m: "attention values (scalar)"),
    (r"softmax", lambda m: "softmax (scalar)"),
    (r"quantize_activations|quantize_bitlinear|quantize_i8s|quantize_blocks|q4e_activations_max|q4e_quantize|mcullm::abs_max", lambda m: "activation quantization"),
    (r"mc_silu|silu_mul|mc_gelu|gelu|mc_erff|relu_mul", lambda m: "activation: SiLU / GELU and gate (scalar)"),
    (r"rmsnorm|layernorm", lambda m: "rmsnorm (scalar)"),
    (r"rope_", lambda m: "rope (scalar)"),
    (r"Ple", lambda m: "PLE rows and glue (scalar)"),
    (r"tl_lut", lambda m: "TL LUT build (scalar)"),
    (r"Sampler|sort_candidates", lambda m: "sampling (scalar)"),
    (r"Fingerprint", lambda m: "the runner's fingerprint (test only)"),
    (r"dequantize_(row|cols)|TransformerRunner::embed", lambda m: "embedding row dequant (scalar)"),
    (r"on_step|printf|format|put_padded|putchar|write|semihost|board_counter", lambda m: "the runner's step line (printf)"),
]
STAGES = [(re.compile(p), f) for p, f in STAGES]
# Soft-float and libm routines (the S3's FPU has no divide and no double precision).
SOFT = re.compile(r"^(__(add|sub|mul|div|float|fix|trunc|extend|cmp|eq|ne|lt|le|gt|ge|unord)\w*|__ieee754\w*|mcullm::mc_(expf?|log|sqrtf|sincos))\b")


def load_syms(path):
    syms = []
    for line in open(path, encoding="utf-8", errors="replace"):
        parts = line.rstrip("\n").split(" ", 2)
        if len(parts) == 3 and parts[1] in "TtWw":
            syms.append((int(parts[0], 16), parts[2]))
    syms.sort()
    return syms


def short(name):
    """The demangled name without its argument list."""
    n = name.replace("(anonymous namespace)", "{anon}")
    return n if "<" in n else re.sub(r"\(.*$", "", n)


def stage_of(name):
    n = short(name)
    for pat, f in STAGES:
        m = pat.search(n)
        if m:
            return f(m)
    return "other (decoder glue, layer loop, runtime)"


def main(argv):
    mode, nm = argv[1], argv[2]
    syms = load_syms(nm)
    addrs = [a for a, _ in syms]
    if mode == "helpers":  # a routine ends where the next symbol of any kind (code or data) starts
        starts = sorted({int(line.split(" ", 1)[0], 16) for line in open(nm, encoding="utf-8", errors="replace")
                         if re.match(r"^[0-9a-fA-F]+ ", line)})
        for a, name in syms:
            if HELPER.search(name):
                j = bisect.bisect_right(starts, a)
                print(f"{a:x} {starts[j] if j < len(starts) else 0xffffffff:x}")
        return 0
    if mode == "mark":
        hits = [a for a, name in syms if short(name).endswith("::on_step")]
        if len(hits) != 1:
            sys.exit("profile_stages: the runner's on_step not found once in the symbols")
        print(f"{hits[0]:x}")
        return 0
    counts, out = argv[3], argv[4]
    top = int(argv[argv.index("--top") + 1]) if "--top" in argv else 12

    def func(pc):
        i = bisect.bisect_right(addrs, pc) - 1
        return syms[i][1] if i >= 0 else f"?{pc:x}"

    text = open(out, encoding="utf-8", errors="replace").read()
    steps = len(re.findall(r"^step pos ", text, re.M))
    m = re.search(r"^per sampled token: \w+ (\d+) \(mean of (\d+)\)(?:, (\d+) k instructions)?", text, re.M)
    if not m or steps == 0:
        sys.exit("profile_stages: no step / per sampled token lines in the runner's output")
    counter, sampled = int(m.group(1)), int(m.group(2))
    first = steps - sampled
    if first == 0:  # a one-token prompt: step 0 also holds the start-up; leave it out
        first = 1
    segs = set(range(first, steps))
    n_tok = len(segs)
    by_stage, pie_by_stage, soft_by_stage, by_func, charged = {}, {}, {}, {}, {}
    total = 0
    for line in open(counts):
        p = line.split()
        if p[0] == "segments":
            continue
        pc, site, seg, n = int(p[0], 16), int(p[1], 16), int(p[2]), int(p[3])
        if seg not in segs:
            continue
        total += n
        self_name = func(pc)
        owner = func(site) if site else self_name
        st = stage_of(owner)
        by_stage[st] = by_stage.get(st, 0) + n
        if self_name.startswith("mcullm_pie_"):
            pie_by_stage[st] = pie_by_stage.get(st, 0) + n
        elif SOFT.search(self_name):
            soft_by_stage[st] = soft_by_stage.get(st, 0) + n
        by_func[short(self_name)] = by_func.get(short(self_name), 0) + n
        if site:
            key = (short(self_name), short(owner))
            charged[key] = charged.get(key, 0) + n
    per = total / n_tok
    print(f"sampled tokens profiled: {n_tok} (steps {first}..{steps - 1} of {steps}); "
          f"instructions per token: {per:,.0f}")
    print(f"check: the runner's own count over its {sampled} sampled tokens: {counter} CCOUNT x 25 = "
          f"{counter * 25:,} per token (difference {per - counter * 25:+,.0f})")
    print()
    def pct(part, whole):
        return f"{100 * part / whole:.0f}%" if part else "-"

    print("| stage | instructions / token | % of the token | of it in PIE assembly | in soft-float / libm |")
    print("|---|---:|---:|---:|---:|")
    for st, n in sorted(by_stage.items(), key=lambda kv: -kv[1]):
        print(f"| {st} | {n / n_tok:,.0f} | {100 * n / total:.1f} | {pct(pie_by_stage.get(st, 0), n)} | "
              f"{pct(soft_by_stage.get(st, 0), n)} |")
    print(f"| total | {per:,.0f} | 100.0 | {pct(sum(pie_by_stage.values()), total)} | "
          f"{pct(sum(soft_by_stage.values()), total)} |")
    print()
    print(f"the {top} functions with the most instructions of their own (helpers not charged to callers):")
    for name, n in sorted(by_func.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {n / n_tok:12,.0f}  {100 * n / total:5.1f}%  {name[:110]}")
    print(f"the {top // 2} largest helpers charged to their callers:")
    for (name, owner), n in sorted(charged.items(), key=lambda kv: -kv[1])[:top // 2]:
        print(f"  {n / n_tok:12,.0f}  {100 * n / total:5.1f}%  {name[:50]} <- {owner[:60]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
