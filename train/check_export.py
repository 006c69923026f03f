#!/usr/bin/python3
"""The trainer's export against the engine (CTest train_export; seconds, no training):

1. tokenizer: a BPE vocabulary trained here, encoded by mcullm (`tokenize --ids --bos`), gives the
   ids train/tokenizer.py gives;
2. f32: a random llama model exported to GGUF; mcullm's logits for every step of a greedy run equal
   PyTorch's within 1e-4, and the greedy tokens are the same;
3. q4g64: a QAT model exported in f32 and packed by `mcullm convert --type q4g64`; every packed weight,
   unpacked here, equals train/quant.py's q4g64 value exactly, and mcullm's greedy tokens equal PyTorch's.

  check_export.py MCULLM_BINARY WORK_DIR      (exit 0: pass; anything else: fail, with the reason)
"""
import os
import subprocess
import sys

try:
    import numpy as np
    import torch
except ImportError as e:  # CI installs python3-torch and python3-numpy: a missing one is a failure
    sys.exit(f"check_export: FAIL: {e} (install python3-torch and python3-numpy, use /usr/bin/python3)")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export  # noqa: E402
import gguf  # noqa: E402
import model as mdl  # noqa: E402
import quant  # noqa: E402
import tokenizer as tk  # noqa: E402

TEXT = ("Once upon a time, there was a little girl named Lily. She loved to play outside with her dog, Max.\n"
        "One day, Lily and Max went to the park. \"Look, Max!\" said Lily. \"A big red ball!\" Max barked.\n"
        "They played all day. When the sun went down, they went home, happy and tired. The end. Caf\u00e9 \u2014 ok.\n")


def run(cmd):
    r = subprocess.run(cmd, capture_output=True)
    if r.returncode != 0:
        fail(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.decode(errors='replace')[-600:]}")
    return r


def fail(msg):
    print(f"check_export: FAIL: {msg}", flush=True)
    sys.exit(1)


def random_model(quant_mode, vocab, seed):
    torch.manual_seed(seed)
    c = mdl.Config(vocab=vocab, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, hidden=128, seq_len=64, quant=quant_mode,
                   tied=quant_mode == "none")
    m = mdl.Model(c)
    with torch.no_grad():  # larger weights than the training init: decisive logits
        for p in m.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.15)
            else:
                p.uniform_(0.5, 1.5)
    return m.eval()


def mcullm_greedy(cli, path, prompt, n, work, extra=()):
    logits_path = os.path.join(work, "logits.f32")
    tokens_path = os.path.join(work, "tokens.txt")
    run([cli, "run", "-m", path, "--prompt-ids", ",".join(map(str, prompt)), "-n", str(n), "--temp", "0", "-q",
         "--dump-logits", logits_path, "--dump-tokens", tokens_path, *extra])
    toks = []
    for line in open(tokens_path):
        parts = line.split()
        if parts and parts[0] == "TOK":  # TOK position input next
            toks.append(int(parts[-1]))
    return toks, np.fromfile(logits_path, dtype="<f4")


@torch.no_grad()
def torch_greedy(m, prompt, n):
    ids = list(prompt)
    for _ in range(n):
        ids.append(int(m(torch.tensor([ids]))[0, -1].argmax()))
    return ids[len(prompt):], m(torch.tensor([ids[:-1]]))[0].numpy()


def q4g64_unpack(raw, rows, cols):
    blocks = np.frombuffer(raw[:rows * cols // 64 * 34], dtype=np.uint8).reshape(rows, cols // 64, 34)
    d = blocks[:, :, :2].copy().view("<f2").astype(np.float32)  # [rows, groups, 1]
    qs = blocks[:, :, 2:].astype(np.int32)
    q = np.concatenate([(qs & 15) - 8, (qs >> 4) - 8], axis=-1).astype(np.float32)  # weights j, j + 32
    return (d * q).reshape(rows, cols)


def main():
    if len(sys.argv) != 3:
        fail("usage: check_export.py MCULLM_BINARY WORK_DIR")
    cli, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    torch.set_num_threads(1)

    # 1. tokenizer
    pieces, scores = tk.train_bpe(TEXT * 3, 512, min_char_count=1, log=lambda *_: None)
    tok = tk.Tokenizer(pieces, scores)
    m = random_model("none", tok.vocab_size, 1)
    f32_path = os.path.join(work, "f32.gguf")
    export.write_gguf(m, tok, f32_path)
    probe = "Lily and Max played in the park.\n\nThe big dog barked: \"Hi!\" \u00fcber \u263a zzz"
    got = [int(x) for x in run([cli, "tokenize", "-m", f32_path, "--ids", "--bos", "-p", probe]).stdout.split()]
    want = tok.encode(probe)
    if got != want:
        fail(f"tokenizer: mcullm {got} != python {want}")
    if tok.decode(want) != probe:
        fail("tokenizer: python decode does not round-trip")
    print(f"tokenizer: {len(want)} ids equal", flush=True)

    # 2. f32 logits
    prompt = tok.encode("Once upon a time")
    toks, logits = mcullm_greedy(cli, f32_path, prompt, 12, work)
    want_toks, want_logits = torch_greedy(m, prompt, 12)
    steps = len(prompt) + 12 - 1
    logits = logits.reshape(-1, tok.vocab_size)
    if logits.shape[0] < steps:
        fail(f"f32: mcullm dumped {logits.shape[0]} logit rows, expected {steps}")
    diff = np.abs(logits[:steps] - want_logits[:steps]).max()
    print(f"f32: max |logit difference| {diff:.2e} over {steps} steps", flush=True)
    if not diff <= 1e-4:
        fail(f"f32: logits differ by {diff}")
    if toks[-12:] != want_toks:
        fail(f"f32: greedy tokens mcullm {toks[-12:]} != torch {want_toks}")

    # 3. q4g64 QAT
    m = random_model("q4", tok.vocab_size, 2)
    q_f32 = os.path.join(work, "qat-f32.gguf")
    q_q4 = os.path.join(work, "qat-q4g64.gguf")
    export.write_gguf(m, tok, q_f32)
    run([cli, "convert", q_f32, "-o", q_q4, "--type", "q4g64", "--embd-type", "f32"])
    _, tensors = gguf.read(q_q4)
    checked = 0
    for l, b in enumerate(m.layers):
        for attr, name in (("wq", "attn_q"), ("wk", "attn_k"), ("wv", "attn_v"), ("wo", "attn_output"),
                           ("w1", "ffn_gate"), ("w2", "ffn_down"), ("w3", "ffn_up")):
            w = getattr(b, attr).weight
            t, dims, raw = tensors[f"blk.{l}.{name}.weight"]
            packed = q4g64_unpack(raw, w.shape[0], w.shape[1])
            mine = quant.q4g64_values(w).numpy()
            if not np.array_equal(packed, mine):
                fail(f"q4g64: blk.{l}.{name}: {np.sum(packed != mine)} values differ from the C++ packer")
            checked += w.numel()
    print(f"q4g64: {checked} packed weights equal the QAT quantizer's values", flush=True)
    prompt = tok.encode("Lily")
    toks, _ = mcullm_greedy(cli, q_q4, prompt, 12, work)
    want_toks, _ = torch_greedy(m, prompt, 12)
    if toks[-12:] != want_toks:
        fail(f"q4g64: greedy tokens mcullm {toks[-12:]} != torch {want_toks}")
    print("q4g64: greedy tokens equal", flush=True)
    print("check_export: PASS")


if __name__ == "__main__":
    main()
