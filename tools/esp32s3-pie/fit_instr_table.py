#!/usr/bin/python3
"""Fit the cost model's instruction table (src/plan/instruction_table_host.cpp) to per-stage profiles.

  fit_instr_table.py MCULLM PROFILE_OUT:MODEL:FIRST:LAST [...]

PROFILE_OUT: the output of tools/esp32s3-pie/profile_stages.sh for MODEL (the file the board image was
made from, e.g. its work dir's model-q4g64.gguf); FIRST..LAST: the positions of its sampled steps.
Each model's units come from `MCULLM plan -m MODEL --pos P` (its instruction table's "units" column),
averaged over the sampled positions. A stage maps to the terms it runs; the runner's test-only stages
(fingerprint, step line) are left out. Prints the table (instructions per unit), then each model's
measured vs predicted instructions per token: in-sample, and held out (the shared terms fitted on the
other models, the model's own kernel and activation terms from it, as no other model runs them).
"""
import re
import subprocess
import sys

# profile stage (prefix) -> the terms it runs
STAGES = [
    ("matvec q4e", ["q4e weights", "q4e groups", "q4e rows"]),
    ("matvec q4g64", ["q4g64 blocks", "q4g64 rows"]),
    ("matvec q8_0", ["q8_0 blocks", "q8_0 rows"]),
    ("matvec i2s", ["i2_s weights"]),
    ("matvec f32", ["f32 weights"]),
    ("head: classifier", ["f32 classifier weights"]),
    ("attention", ["attention entries", "attention entry dims"]),
    ("softmax", ["attention entries", "attention entry dims"]),
    ("activation quantization", ["quantized inputs"]),
    ("activation:", ["silu elements", "ple activation elements"]),
    ("bitllama2c layer body", ["bitnet layer elements"]),
    ("rope", ["rope elements"]),
    ("rmsnorm", ["norm elements"]),
    ("sampling", ["logits"]),
    ("PLE rows", ["ple row elements"]),
    ("other", ["layers"]),
    ("embedding row", ["layers"]),
]
TEST_ONLY = ("the runner's fingerprint", "the runner's step line")
# Terms whose per-unit figure is the assembly's loop (docs/firmware.md), not fitted: the stage's
# total then fits the kind's per-row term. q4e: 9 instructions per 32 weights, ~26 per group.
FIXED = {"q4e weights": 9 / 32, "q4e groups": 26.0, "q4g64 blocks": 47.0, "q8_0 blocks": 40.0}
# Terms only one kernel or architecture runs (not held out).
OWN = {"q4e weights", "q4e groups", "q4e rows", "q4g64 blocks", "q4g64 rows", "q8_0 blocks", "q8_0 rows",
       "i2_s weights", "f32 weights", "f32 classifier weights", "silu elements", "bitnet layer elements", "ple activation elements",
       "ple row elements"}


def units(mcullm, model, pos):
    out = subprocess.run([mcullm, "plan", "-m", model, "--board", "esp32s3-psram80", "--ctx", "256", "--pos", str(pos)],
                         capture_output=True, text=True, check=True).stdout
    u, on = {}, False
    for line in out.splitlines():
        if line.startswith("term "):
            on = True
            continue
        if on:
            m = re.match(r"^(.+?)\s+([\d.]+)\s+[-\d.]+\s+[-\d.]+$", line)
            if not m:
                break
            u[m.group(1)] = float(m.group(2))
    return u


def profile(path):
    st = {}
    for line in open(path):
        m = re.match(r"^\| (.+?) \| ([\d,]+) \|", line)
        if m and m.group(1) not in ("stage", "total"):
            st[m.group(1)] = float(m.group(2).replace(",", ""))
    return st


def terms_of(stage):
    for prefix, terms in STAGES:
        if stage.startswith(prefix):
            return terms
    sys.exit(f"fit_instr_table: stage '{stage}' has no terms")


def fit(models, names):
    """Per stage group (a set of terms), least squares over the models that run it, minus FIXED terms."""
    import itertools
    groups = {}
    for mi, (u, st) in enumerate(models):
        for stage, n in st.items():
            if stage.startswith(TEST_ONLY):
                continue
            terms = tuple(t for t in terms_of(stage) if u.get(t, 0) > 0)
            if not terms:
                sys.exit(f"fit_instr_table: stage '{stage}' of model {names[mi]} has no units")
            groups.setdefault(terms, {}).setdefault(mi, 0.0)
            groups[terms][mi] += n
    coef = dict(FIXED)
    for terms, per_model in groups.items():
        free = [t for t in terms if t not in FIXED]
        rows, rhs = [], []
        for mi, n in per_model.items():
            u = models[mi][0]
            rows.append([u[t] for t in free])
            rhs.append(n - sum(u[t] * FIXED[t] for t in terms if t in FIXED))
        if len(free) == 1:  # ratio of sums: least squares weighted by the units
            c = [sum(rhs) / sum(r[0] for r in rows)]
        else:  # 2 x 2 normal equations (attention: entries, entry dims)
            a = sum(r[0] * r[0] for r in rows); b = sum(r[0] * r[1] for r in rows); d = sum(r[1] * r[1] for r in rows)
            e = sum(r[0] * y for r, y in zip(rows, rhs)); f = sum(r[1] * y for r, y in zip(rows, rhs))
            det = a * d - b * b
            if abs(det) < 1e-9 * max(a * d, 1):  # one shape only: all of it per entry
                c = [sum(rhs) / sum(r[0] for r in rows), 0.0]
            else:
                c = [(e * d - b * f) / det, (a * f - b * e) / det]
        for t, v in zip(free, c):
            if t in coef and coef[t] != v:
                sys.exit(f"fit_instr_table: term {t} in two stage groups")
            coef[t] = v
    return coef


def predict(u, coef):
    return sum(n * coef.get(t, 0.0) for t, n in u.items())


def main(argv):
    mcullm = argv[1]
    models, names = [], []
    for spec in argv[2:]:
        out, model, first, last = spec.rsplit(":", 3)
        us = [units(mcullm, model, p) for p in range(int(first), int(last) + 1)]
        u = {t: sum(x.get(t, 0.0) for x in us) / len(us) for t in set().union(*us)}
        models.append((u, profile(out)))
        names.append(model)
    coef = fit(models, names)
    print("instructions per unit (fitted on all models):")
    for t in sorted(coef):
        print(f"  {t:26s} {coef[t]:10.4f}{'  (fixed: the assembly loop)' if t in FIXED else ''}")
    print("\n| model | measured (without the runner's test-only stages) | predicted, in-sample | error | "
          "predicted, shared terms held out | error |")
    print("|---|---:|---:|---:|---:|---:|")
    for i, (u, st) in enumerate(models):
        meas = sum(n for s, n in st.items() if not s.startswith(TEST_ONLY))
        ins = predict(u, coef)
        rest = [m for j, m in enumerate(models) if j != i]
        shared = fit(rest, [n for j, n in enumerate(names) if j != i])
        own = {t: c for t, c in coef.items() if t in OWN}
        held = predict(u, {**shared, **own})
        missing = [t for t in u if u[t] > 0 and t not in shared and t not in OWN]
        print(f"| {names[i]} | {meas:,.0f} | {ins:,.0f} | {100 * (ins / meas - 1):+.1f}% | {held:,.0f} | "
              f"{100 * (held / meas - 1):+.1f}%{' (no other model: ' + ', '.join(missing) + ')' if missing else ''} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
