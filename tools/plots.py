#!/usr/bin/python3
"""The figures of docs/img/ (`make plots`; Debian's python3-matplotlib), from data the repo keeps:

  learning-curve.png   models/tinystories-q4.curve.csv (the trainer's curve.csv of the default model)
  board-stages.png     `mcullm plan`'s "ms per stage by position" table for the default model and
                       esp32-ai's PLE model on the esp32s3-psram80 preset, 2 cores (the cost model, not
                       a board measurement; docs/cost-model.md)

The peers' speed ratios (docs/performance.md) exist only as markdown tables, not as CSV or JSON: they are
not plotted.

    plots.py --mcullm build/release/mcullm --out docs/img [--shared ../shared]
"""
import argparse
import csv
import os
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def learning_curve(out):
    path = os.path.join(ROOT, "models/tinystories-q4.curve.csv")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"plots: {path} has no rows")
    tokens = [int(r["tokens"]) / 1e6 for r in rows]
    loss = [float(r["train_loss"]) for r in rows]
    val = [(int(r["tokens"]) / 1e6, float(r["val_bits_per_byte"])) for r in rows if r["val_bits_per_byte"]]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    ax.plot(tokens, loss, color="tab:blue", label="training loss (nats/token, running mean)")
    ax.set_xlabel("training tokens (millions)")
    ax.set_ylabel("training loss (nats/token)", color="tab:blue")
    ax2 = ax.twinx()
    ax2.plot([v[0] for v in val], [v[1] for v in val], "o-", color="tab:orange", ms=3,
             label="validation bits/byte")
    ax2.set_ylabel("validation bits/byte", color="tab:orange")
    ax.set_title("models/tinystories-q4.gguf: 4-bit QAT training (make train-default)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "learning-curve.png"))
    plt.close(fig)


def stage_table(mcullm, model, board):
    """`mcullm plan`'s table of ms per stage by position: (stage names, [(pos, [ms...])])."""
    r = subprocess.run([mcullm, "plan", "-m", model, "--board", board, "-t", "2"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"plots: mcullm plan -m {model} exited {r.returncode}: {r.stderr.strip()}")
    lines = r.stdout.splitlines()
    at = next((i for i, l in enumerate(lines) if l.startswith("ms per stage by position")), None)
    if at is None:
        sys.exit("plots: `mcullm plan` printed no 'ms per stage by position' table")
    head = lines[at + 1].split()
    if head[0] != "pos" or "total_ms" not in head:  # then tok/s and the two bounds' columns
        sys.exit(f"plots: unexpected table header: {lines[at + 1]}")
    stages, rows = head[1:head.index("total_ms")], []
    for line in lines[at + 2:]:
        cells = line.split()
        if len(cells) != len(head) or not cells[0].isdigit():
            break
        rows.append((int(cells[0]), [float(c) for c in cells[1:1 + len(stages)]]))
    if not rows:
        sys.exit("plots: the 'ms per stage by position' table has no rows")
    return stages, rows


def board_stages(mcullm, shared, out):
    board = "esp32s3-psram80"
    models = [("default model (tinystories-q4)", os.path.join(ROOT, "models/tinystories-q4.gguf")),
              ("esp32-ai PLE (ple4096_int4)", os.path.join(shared, "models/esp32-ai-ple/ple4096_int4.bin"))]
    fig, axes = plt.subplots(1, len(models), figsize=(11, 4), dpi=100, sharey=False)
    for ax, (title, path) in zip(axes, models):
        stages, rows = stage_table(mcullm, path, board)
        labels = [str(p) for p, _ in rows]
        bottom = [0.0] * len(rows)
        for i, stage in enumerate(stages):
            ms = [r[1][i] for r in rows]
            ax.bar(labels, ms, bottom=bottom, label=stage)
            bottom = [b + m for b, m in zip(bottom, ms)]
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("position of the token")
        ax.set_ylabel("predicted ms per token")
        ax.legend(fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(f"ms per stage on {board}, 2 cores (mcullm plan: the cost model's prediction)", fontsize=11)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "board-stages.png"))
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mcullm", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    learning_curve(a.out)
    board_stages(a.mcullm, a.shared, a.out)
    print(f"plots: wrote {a.out}/learning-curve.png and {a.out}/board-stages.png")


if __name__ == "__main__":
    main()
