#!/usr/bin/python3
"""Resumable training (CTest train_resume; about half a minute on one core): a tiny combo model (PLE +
ReLU FFN + q4e QAT) trained for STEPS steps in one run, and again stopped after step STOP
(`--stop-after`, which writes the checkpoint and exits) and continued with `--resume`. The two final
model.pt states must be equal bit for bit, and so must the curve.csv files; a --resume with another
argument must be refused.

  check_resume.py WORK_DIR      (exit 0: pass; anything else: fail, with the reason)
"""
import os
import shutil
import subprocess
import sys

import torch

TRAIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "train.py")
STEPS, STOP = 8, 3
ARGS = ["--vocab", "512", "--dim", "32", "--layers", "2", "--heads", "2", "--kv-heads", "2", "--hidden", "64",
        "--ple", "16", "--q4e-group", "32", "--ffn", "relu", "--quant", "q4", "--ctx", "512", "--seq", "32",
        "--batch", "4", "--steps", str(STEPS), "--warmup", "2", "--eval-every", "2", "--val-chunks", "2",
        "--train-chars", "30000", "--checkpoint-every", "2", "--threads", "1", "--log-every", "1"]


def fail(msg):
    print(f"check_resume: FAIL: {msg}", flush=True)
    sys.exit(1)


def train(out, *extra, expect_ok=True):
    r = subprocess.run([sys.executable, TRAIN, "--out", out, *ARGS, *extra], capture_output=True, text=True)
    if (r.returncode == 0) != expect_ok:
        fail(f"train.py {' '.join(extra)} exited {r.returncode}: {r.stderr[-800:]}{r.stdout[-400:]}")
    return r


def main():
    if len(sys.argv) != 2:
        fail("usage: check_resume.py WORK_DIR")
    work = sys.argv[1]
    whole, split = os.path.join(work, "whole"), os.path.join(work, "split")
    for d in (whole, split):
        shutil.rmtree(d, ignore_errors=True)
    train(whole)
    train(split, "--stop-after", str(STOP))
    ck = torch.load(os.path.join(split, "checkpoint.pt"), weights_only=False)
    if ck["step"] != STOP:
        fail(f"the interrupted run's checkpoint is of step {ck['step']}, not {STOP}")
    r = train(split, "--resume", "--lr", "1e-3", expect_ok=False)
    if "arguments differ" not in r.stderr + r.stdout:
        fail(f"a --resume with another --lr was not refused for that reason: {r.stderr[-400:]}")
    train(split, "--resume")
    a = torch.load(os.path.join(whole, "model.pt"))["state"]
    b = torch.load(os.path.join(split, "model.pt"))["state"]
    if a.keys() != b.keys():
        fail("the two runs' models have different tensors")
    for k in a:
        if not torch.equal(a[k], b[k]):
            fail(f"{k}: the resumed run's weights differ from the unbroken run's (max {(a[k] - b[k]).abs().max()})")
    curves = [open(os.path.join(d, "curve.csv")).read() for d in (whole, split)]
    if curves[0] != curves[1]:
        fail(f"curve.csv differs:\n{curves[0]}\n--- resumed:\n{curves[1]}")
    print(f"train_resume: {len(a)} tensors equal after {STEPS} steps, unbroken vs stopped at {STOP} + --resume; "
          f"curve.csv equal ({len(curves[0].splitlines()) - 1} rows)", flush=True)
    print("check_resume: PASS")


if __name__ == "__main__":
    main()
