#!/usr/bin/python3
"""Train a small llama-family model on ../shared/data/tinystories_train_7k.txt and export it to GGUF.

  /usr/bin/python3 train/train.py --out OUT [--vocab 1024 --dim 128 ... --quant q4 --ffn relu --steps N]

Writes OUT/tokenizer.json, OUT/model.pt, OUT/model-f32.gguf (ternary: OUT/model-ternary.bin, a bitllama2.c
file, and OUT/tokenizer.bin for `mcullm -z`; --arch qwen2 --quant ternary: model-f32.gguf, which
`mcullm convert --type i2_s` ternarizes as the QAT forward did) and OUT/curve.csv (step, train loss,
validation bits/byte on the first --val-chunks chunks of tinystories_val_head794k.txt, scored per chunk
from position 0 as `mcullm eval` does). Seeds are fixed (--seed); one or two threads (--threads).

Resumable: every --checkpoint-every steps (and at --stop-after) OUT/checkpoint.pt holds the model, the
optimizer, every RNG state (torch, numpy, the batch sampler's generator: the data position), the step and
the running loss; `--resume` (same arguments) continues from it and ends with the weights an unbroken run
ends with, bit for bit (CPU, same --threads; train/check_resume.py tests it).
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export  # noqa: E402
import model as mdl  # noqa: E402
import tokenizer as tk  # noqa: E402

TRAIN_FILE = "data/tinystories_train_7k.txt"
VAL_FILE = "data/tinystories_val_head794k.txt"


def shared_dir():
    """$MCULLM_SHARED, else ../shared beside the repo (as tests/test_support.cpp finds it)."""
    env = os.environ.get("MCULLM_SHARED")
    if env and os.path.isdir(env):
        return env
    d = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared")
    if os.path.isdir(d):
        return os.path.normpath(d)
    sys.exit("train: ../shared is missing (set MCULLM_SHARED): it holds the training and validation text")


def read_text(rel):
    path = os.path.join(shared_dir(), rel)
    if not os.path.isfile(path):
        sys.exit(f"train: {path} is missing")
    with open(path, encoding="utf-8") as f:
        return f.read()


def load_or_train_tokenizer(out, vocab, train_text):
    path = os.path.join(out, "tokenizer.json")
    if os.path.exists(path):
        with open(path) as f:
            j = json.load(f)
        if len(j["pieces"]) == vocab:
            return tk.Tokenizer(j["pieces"], j["scores"])
    t0 = time.time()
    pieces, scores = tk.train_bpe(train_text, vocab)
    print(f"bpe: {vocab} pieces in {time.time() - t0:.0f} s", flush=True)
    with open(path, "w") as f:
        json.dump({"pieces": pieces, "scores": scores}, f)
    return tk.Tokenizer(pieces, scores)


def encode_train(out, tok, text, partial=False):
    """The training stories as eval chunks, each BOS + encode, concatenated (cached)."""
    suffix = f"-{len(text)}" if partial else ""  # --train-chars: a cache of its own
    path = os.path.join(out, f"train-{tok.vocab_size}{suffix}.npy")
    if os.path.exists(path):
        return np.load(path)
    ids = []
    for chunk in tk.eval_chunks(tk.stories_as_eval_text(text)):
        ids.extend(tok.encode(chunk))
    arr = np.array(ids, dtype=np.int16 if tok.vocab_size < 32768 else np.int32)
    np.save(path, arr)
    return arr


@torch.no_grad()
def val_bits_per_byte(model, val_chunks, batch=8, stats=None):
    """Sum over chunks of -log2 p(token) over the chunk's UTF-8 bytes; chunk = BOS + encode, from position 0."""
    model.eval()
    nats, nbytes = 0.0, 0
    for i in range(0, len(val_chunks), batch):
        group = val_chunks[i:i + batch]
        n = min(max(len(ids) for ids, _ in group), model.c.seq_len + 1)  # a longer chunk is cut (all its bytes count)
        x = torch.zeros(len(group), n - 1, dtype=torch.long)
        y = torch.full((len(group), n - 1), -100, dtype=torch.long)
        for r, (ids, nb) in enumerate(group):
            t = torch.tensor(ids[:model.c.seq_len + 1])
            x[r, :len(t) - 1] = t[:-1]
            y[r, :len(t) - 1] = t[1:]
            nbytes += nb
        logits = model(x, stats)
        nats += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=-100,
                                reduction="sum").item()
    model.train()
    return nats / math.log(2) / nbytes


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab", type=int, default=1024)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=384)
    ap.add_argument("--ctx", type=int, default=512, help="context length written to the GGUF")
    ap.add_argument("--ffn", choices=["swiglu", "relu"], default="swiglu")
    ap.add_argument("--untied", action="store_true")
    ap.add_argument("--quant", choices=["none", "q4", "ternary"], default="none")
    ap.add_argument("--ple", type=int, default=0, help="per-layer embedding size: esp32-ai's PLE model (q4e, --quant q4)")
    ap.add_argument("--q4e-group", type=int, default=64, help="PLE: weights per q4e scale group")
    ap.add_argument("--ple-norm-init", type=float, default=0.1,
                    help="PLE: the initial weight of each layer's ple_norm (1.0: the plain RMSNorm start)")
    ap.add_argument("--arch", choices=["llama", "qwen2"], default="llama",
                    help="qwen2: q/k/v biases, NEOX RoPE, separate head; with --quant ternary the engine's i2_s layers")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=384, help="training window in tokens")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--log-every", type=int, default=20)
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--val-chunks", type=int, default=60)
    ap.add_argument("--train-chars", type=int, default=0, help="train on the first N characters only (0: all; tests)")
    ap.add_argument("--checkpoint-every", type=int, default=500, help="steps between OUT/checkpoint.pt writes (0: none)")
    ap.add_argument("--stop-after", type=int, default=0, help="write the checkpoint after step N and exit (an interruption)")
    ap.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt (same arguments)")
    a = ap.parse_args()
    if not 512 <= a.vocab <= 8192:
        sys.exit("train: --vocab must be 512..8192")
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(a.seed)
    np.random.seed(a.seed)
    torch.set_num_threads(a.threads)

    train_text = read_text(TRAIN_FILE)
    if a.train_chars:
        train_text = train_text[:a.train_chars]
    tok = load_or_train_tokenizer(a.out, a.vocab, tk.stories_as_eval_text(train_text))
    data = torch.from_numpy(encode_train(a.out, tok, train_text, partial=a.train_chars > 0).astype(np.int64))
    val = [(tok.encode(c), len(c.encode("utf-8"))) for c in tk.eval_chunks(read_text(VAL_FILE))[:a.val_chunks]]
    print(f"data: {len(data)} training tokens ({len(train_text.encode()) / len(data):.2f} bytes/token), "
          f"{len(val)} validation chunks", flush=True)

    c = mdl.Config(vocab=a.vocab, dim=a.dim, n_layers=a.layers, n_heads=a.heads, n_kv_heads=a.kv_heads,
                   hidden=a.hidden, seq_len=a.ctx, ffn=a.ffn, tied=not a.untied, quant=a.quant, ple_dim=a.ple,
                   q4e_group=a.q4e_group, ple_norm_init=a.ple_norm_init, arch=a.arch,
                   norm_eps=1e-6 if a.arch == "qwen2" else 1e-5)
    if a.arch == "qwen2" and (a.ple or a.quant == "q4" or not a.untied):
        sys.exit("train: --arch qwen2 is llama.cpp's qwen2: a separate head (--untied), f32 or ternary weights "
                 "(--ffn relu: mcullm's GGUF key, which llama.cpp does not read)")
    if a.arch == "qwen2" and a.quant == "ternary" and (a.dim % 128 or a.hidden % 128):
        sys.exit(f"train: mcullm's i2_s kernels need dim and hidden in multiples of 128 (here {a.dim}, {a.hidden})")
    if a.quant == "ternary" and a.arch == "llama":
        if a.untied or a.ffn != "swiglu":
            sys.exit("train: --quant ternary is the bitllama2.c layout: tied head, SwiGLU")
        if a.dim % 128 or a.hidden % 128:
            print(f"train: note: mcullm's i2_s kernels need dim and hidden in multiples of 128 (here {a.dim}, "
                  f"{a.hidden}): the exported file will not load", flush=True)
    model = mdl.build(c)
    print(f"model: {model.n_params()} parameters, {c}", flush=True)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    other = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(a.seed)
    first, seen, run_loss = 1, 0, None
    if a.resume:
        first, seen, run_loss = load_checkpoint(a, model, opt, gen)
        print(f"resume: from step {first - 1} of {a.steps}", flush=True)
    curve = open_curve(a.out, first - 1)
    t0 = time.time()
    bar = progress_bar(a.steps - first + 1)
    say = bar.write if bar else lambda msg: print(msg, flush=True)
    for step in range(first, a.steps + 1):
        lr = a.lr * min(1.0, step / a.warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / a.steps)))
        for g in opt.param_groups:
            g["lr"] = lr
        starts = torch.randint(0, len(data) - a.seq - 1, (a.batch,), generator=gen)
        batch = torch.stack([data[s:s + a.seq + 1] for s in starts])
        logits = model(batch[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, c.vocab), batch[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        seen += a.batch * a.seq
        run_loss = loss.item() if run_loss is None else 0.9 * run_loss + 0.1 * loss.item()
        val_bpb = ""
        if step % a.eval_every == 0 or step == a.steps:
            val_bpb = f"{val_bits_per_byte(model, val):.4f}"
            save(model, tok, a.out)  # a usable model at every evaluation
        if bar:
            bar.set_postfix_str(f"loss {run_loss:.4f}", refresh=False)
            bar.update(1)
        if step % a.log_every == 0 or val_bpb:
            dt = time.time() - t0
            say(f"step {step}/{a.steps} loss {run_loss:.4f} lr {lr:.2e} {seen / dt:.0f} tok/s {dt:.0f} s"
                + (f" val {val_bpb} bits/byte" if val_bpb else ""))
            curve.write(f"{step},{seen},{run_loss:.4f},{val_bpb}\n")
            curve.flush()
        if step == a.stop_after or (a.checkpoint_every and step % a.checkpoint_every == 0 and step < a.steps):
            save_checkpoint(a, model, opt, gen, step, seen, run_loss)
            if step == a.stop_after:
                say(f"stop: checkpoint of step {step} in {a.out}/checkpoint.pt (continue with --resume)")
                return
    if bar:
        bar.close()
    if c.ffn == "relu":
        stats = []
        val_bits_per_byte(model, val[:8], stats=stats)
        print(f"relu: {100 * (1 - sum(stats) / len(stats)):.1f}% of FFN neurons are zero on validation text")
    save(model, tok, a.out)
    written = ("model-ple.bin" if c.ple_dim else "model-ternary.bin" if c.quant == "ternary" and c.arch == "llama"
               else "model-f32.gguf")
    print(f"wrote {a.out}/{written}" + (" and tokenizer.bin" if written != "model-f32.gguf" else ""), flush=True)


# Arguments that may differ between an interrupted run and its resumption (the others must not).
RESUME_FREE = ("out", "resume", "stop_after", "checkpoint_every", "log_every")


def save_checkpoint(a, model, opt, gen, step, seen, run_loss):
    """Everything the next step depends on, written whole or not at all (temp file + rename)."""
    path = os.path.join(a.out, "checkpoint.pt")
    torch.save({"args": {k: v for k, v in vars(a).items() if k not in RESUME_FREE}, "step": step, "seen": seen,
                "run_loss": run_loss, "model": model.state_dict(), "opt": opt.state_dict(),
                "torch_rng": torch.get_rng_state(), "numpy_rng": np.random.get_state(), "gen": gen.get_state()},
               path + ".tmp")
    os.replace(path + ".tmp", path)


def load_checkpoint(a, model, opt, gen):
    """Restores a save_checkpoint; returns (next step, tokens seen, running loss)."""
    path = os.path.join(a.out, "checkpoint.pt")
    if not os.path.isfile(path):
        sys.exit(f"train: --resume: {path} is missing")
    ck = torch.load(path, weights_only=False)
    now = {k: v for k, v in vars(a).items() if k not in RESUME_FREE}
    changed = {k: (ck["args"].get(k), v) for k, v in now.items() if ck["args"].get(k) != v}
    if changed:
        sys.exit(f"train: --resume: arguments differ from the checkpoint's (was, now): {changed}")
    model.load_state_dict(ck["model"])
    opt.load_state_dict(ck["opt"])
    torch.set_rng_state(ck["torch_rng"])
    np.random.set_state(ck["numpy_rng"])
    gen.set_state(ck["gen"])
    return ck["step"] + 1, ck["seen"], ck["run_loss"]


def open_curve(out, last_step):
    """curve.csv for appending: new (last_step 0), else its rows up to last_step (a resumed run
    rewrites the steps after its checkpoint)."""
    path = os.path.join(out, "curve.csv")
    head = "step,tokens,train_loss,val_bits_per_byte\n"
    rows = []
    if last_step and os.path.isfile(path):
        with open(path) as f:
            rows = [r for r in f.readlines()[1:] if int(r.split(",")[0]) <= last_step]
    curve = open(path, "w")
    curve.write(head + "".join(rows))
    return curve


def progress_bar(steps):
    """A one-line bar (steps, rate, time left) on stderr when it is a terminal and Debian's python3-tqdm
    is installed (`make train-default` installs it); None otherwise: the step lines alone."""
    if not sys.stderr.isatty():
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=steps, file=sys.stderr, unit="step", dynamic_ncols=True, leave=False)


def save(model, tok, out):
    torch.save({"config": model.c.__dict__, "state": model.state_dict()}, os.path.join(out, "model.pt"))
    if model.c.ple_dim > 0:  # esp32-ai's PLE format (q4e) and the tokenizer for `mcullm -z`
        export.write_esp32ai(model, os.path.join(out, "model-ple.bin"))
        export.write_llama2c_tokenizer(tok, os.path.join(out, "tokenizer.bin"))
    elif model.c.quant == "ternary" and model.c.arch == "llama":  # the bitllama2.c layout: an ak42 v1 file and its tokenizer
        export.write_bitllama2c(model, os.path.join(out, "model-ternary.bin"))
        export.write_llama2c_tokenizer(tok, os.path.join(out, "tokenizer.bin"))
    else:
        export.write_gguf(model, tok, os.path.join(out, "model-f32.gguf"))


if __name__ == "__main__":
    main()
