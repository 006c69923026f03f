#!/usr/bin/python3
"""The trainer's export against the engine (CTest train_export; seconds, no training):

1. tokenizer: a BPE vocabulary trained here, encoded by mcullm (`tokenize --ids --bos`), gives the
   ids train/tokenizer.py gives;
2. f32: a random llama model exported to GGUF; mcullm's logits for every step of a greedy run equal
   PyTorch's within 1e-4, and the greedy tokens are the same;
3. q4g64: a QAT model exported in f32 and packed by `mcullm convert --type q4g64`; every packed weight,
   unpacked here, equals train/quant.py's q4g64 value exactly, and mcullm's greedy choices equal PyTorch's
   (teacher-forced, every step whose margin exceeds the int8-activation noise);
4. ReLU FFN (mcullm.ffn_activation = "relu", run by mcullm's sparse FFN): 2. and 3. again;
5. ternary: a QAT model in the bitllama2.c layout written as an ak42 v1 file; the weights mcullm holds
   (its i2_s GGUF from `mcullm convert`, unpacked here) equal train/quant.py's ternary values exactly,
   mcullm's logits equal PyTorch's within 1e-4 (the QAT forward quantizes activations as mcullm does)
   up to the first int8 rounding flip, its choices after it (check_logits_int8);
6. PLE: a q4e QAT model of esp32-ai's PLE architecture written in its file format: the weights mcullm
   holds equal the quantizer's, its logits with f32 activations equal PyTorch's within 1e-4 and its
   greedy tokens are equal (with int8 activations: its choices, as in 3.); the llama2.c tokenizer
   file written beside it gives train/tokenizer.py's ids;
7. combo (PLE + ReLU FFN + q4e, check_combo): 6. again with the ReLU flag in the esp32-ai header, which
   mcullm keeps through `convert` to GGUF (mcullm.ffn_activation "relu") and runs as a ReLU FFN;
8. qwen2 (q/k/v biases, NEOX RoPE, GQA, separate head): an f32 model's logits equal PyTorch's within 1e-4;
   a ternary QAT model exported in f32 and ternarized by `mcullm convert --type i2_s`: every weight mcullm
   holds equals quant.ternary_values_absmean's, and its logits equal the QAT forward's (which quantizes
   the activations as the engine's i2_s path does) within 1e-4 up to the first int8 rounding flip, its
   choices after it.

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


def random_model(quant_mode, vocab, seed, ffn="swiglu", arch="llama"):
    torch.manual_seed(seed)
    ternary = quant_mode == "ternary"  # bitllama2.c: tied head; the i2_s kernels take multiples of 128
    c = mdl.Config(vocab=vocab, dim=128 if ternary else 64, n_layers=2, n_heads=4, n_kv_heads=2,
                   hidden=256 if ternary else 128, seq_len=64, quant=quant_mode, ffn=ffn,
                   tied=quant_mode in ("none", "ternary") and arch == "llama", arch=arch,
                   norm_eps=1e-6 if arch == "qwen2" else 1e-5)
    m = mdl.Model(c)
    with torch.no_grad():  # larger weights than the training init: decisive logits
        for p in m.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.15)
            else:
                p.uniform_(0.5, 1.5)
    return m.eval()


Q4_MARGIN = 0.3
LAYER_NAMES = (("wq", "attn_q"), ("wk", "attn_k"), ("wv", "attn_v"), ("wo", "attn_output"), ("w1", "ffn_gate"),
               ("w2", "ffn_down"), ("w3", "ffn_up"))


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


def check_f32(cli, work, tok, ffn, seed):
    """mcullm's logits for every step of a greedy run equal PyTorch's within 1e-4; the tokens are equal."""
    m = random_model("none", tok.vocab_size, seed, ffn)
    path = os.path.join(work, f"f32-{ffn}.gguf")
    export.write_gguf(m, tok, path)
    check_logits(f"f32 {ffn}", cli, path, m, tok.encode("Once upon a time"), work, ())


def check_logits(what, cli, path, m, prompt, work, extra, n=12):
    """mcullm's logits for every step of a greedy run equal PyTorch's within 1e-4; the tokens are equal."""
    toks, logits = mcullm_greedy(cli, path, prompt, n, work, extra)
    want_toks, want_logits = torch_greedy(m, prompt, n)
    steps = len(prompt) + n - 1
    logits = logits.reshape(-1, want_logits.shape[-1])
    if logits.shape[0] < steps:
        fail(f"{what}: mcullm dumped {logits.shape[0]} logit rows, expected {steps}")
    diff = np.abs(logits[:steps] - want_logits[:steps]).max()
    print(f"{what}: max |logit difference| {diff:.2e} over {steps} steps", flush=True)
    if not diff <= 1e-4:
        fail(f"{what}: logits differ by {diff}")
    if toks[-n:] != want_toks:
        fail(f"{what}: greedy tokens mcullm {toks[-n:]} != torch {want_toks}")


def check_logits_int8(what, cli, path, m, prompt, work, extra, n=16):
    """For runs whose int8 activations the QAT forward quantizes as mcullm does: the logits agree within
    1e-4 up to the first position where one activation rounds the other way in the two engines (the
    floats before the rounding differ in the last bits: PyTorch sums in its BLAS's order, which depends
    on the BLAS and the CPU; seen with OpenBLAS on a Zen 5 at step 8 of 23, never with the reference
    BLAS), from there mcullm's choices equal PyTorch's as in check_choices. Teacher-forced, so a flip
    changes logits, never the tokens fed. At least the first position must agree within 1e-4: a
    quantization scheme unlike the QAT forward's differs from the start."""
    logits, want, decisive, same = teacher_forced(what, cli, path, m, prompt, work, extra, n)
    steps = logits.shape[0]
    per_step = np.abs(logits - want).max(-1)
    exact = int(np.argmax(per_step > 1e-4)) if (per_step > 1e-4).any() else steps
    if exact == 0:
        fail(f"{what}: logits differ by {per_step[0]} at the first position")
    print(f"{what}: max |logit difference| {per_step[:exact].max():.2e} over the first {exact} of {steps} steps"
          + (f" (then {per_step[exact:].max():.3f}: an int8 rounding flip; argmax equal at {same.sum()} of {steps}, "
             f"at all {decisive.sum()} steps with a margin > {Q4_MARGIN})" if exact < steps else ""), flush=True)
    if exact < steps and (not per_step.max() <= Q4_MARGIN or not same[decisive].all()):
        fail(f"{what}: after the first {exact} steps mcullm's choices differ from PyTorch's "
             f"(diff {per_step.max()}, argmax equal {same[decisive].sum()} of {decisive.sum()} decisive)")


def check_q4(cli, work, tok, ffn, seed):
    """Packed by mcullm convert: every weight equals the QAT quantizer's; greedy tokens equal."""
    m = random_model("q4", tok.vocab_size, seed, ffn)
    q_f32 = os.path.join(work, f"qat-{ffn}-f32.gguf")
    q_q4 = os.path.join(work, f"qat-{ffn}-q4g64.gguf")
    export.write_gguf(m, tok, q_f32)
    run([cli, "convert", q_f32, "-o", q_q4, "--type", "q4g64", "--embd-type", "f32"])
    kv, tensors = gguf.read(q_q4)
    if ffn == "relu" and kv.get("mcullm.ffn_activation") != "relu":
        fail(f"q4g64 {ffn}: mcullm convert dropped mcullm.ffn_activation ({kv.get('mcullm.ffn_activation')})")
    checked = 0
    for l, b in enumerate(m.layers):
        for attr, name in LAYER_NAMES:
            w = getattr(b, attr).weight
            t, dims, raw = tensors[f"blk.{l}.{name}.weight"]
            packed = q4g64_unpack(raw, w.shape[0], w.shape[1])
            mine = quant.q4g64_values(w).numpy()
            if not np.array_equal(packed, mine):
                fail(f"q4g64 {ffn}: blk.{l}.{name}: {np.sum(packed != mine)} values differ from the C++ packer")
            checked += w.numel()
    print(f"q4g64 {ffn}: {checked} packed weights equal the QAT quantizer's values", flush=True)
    # mcullm runs q4g64 with int8 activations (64-value blocks), which the QAT forward does not model.
    check_choices(f"q4g64 {ffn}", cli, q_q4, m, tok.encode("Lily"), work, ())


def teacher_forced(what, cli, path, m, prompt, work, extra, n):
    """PyTorch's greedy run of n tokens fed to mcullm: the logits of both for every step (mcullm's,
    PyTorch's), which steps PyTorch's top-2 margin exceeds Q4_MARGIN at, and where the argmaxes agree."""
    want_toks, want_logits = torch_greedy(m, prompt, n)
    _, logits = mcullm_greedy(cli, path, prompt + want_toks[:-1], 1, work, extra)
    steps = len(prompt) + n - 1
    logits = logits.reshape(-1, want_logits.shape[-1])
    if logits.shape[0] < steps:
        fail(f"{what}: mcullm dumped {logits.shape[0]} logit rows, expected {steps}")
    logits, want = logits[:steps], want_logits[:steps]
    top2 = np.sort(want, axis=-1)[:, -2:]
    return logits, want, (top2[:, 1] - top2[:, 0]) > Q4_MARGIN, logits.argmax(-1) == want.argmax(-1)


def check_choices(what, cli, path, m, prompt, work, extra, n=16):
    """For runs whose int8 activations the QAT forward does not model: on these random weights the
    logits differ by up to about 0.25, more than many top-2 margins. So PyTorch's greedy run is fed to
    mcullm (teacher forcing) and mcullm's argmax must equal PyTorch's at every step where PyTorch's margin
    exceeds Q4_MARGIN (ties below it are counted, not failed)."""
    logits, want, decisive, same = teacher_forced(what, cli, path, m, prompt, work, extra, n)
    steps = logits.shape[0]
    diff = np.abs(logits - want).max()
    print(f"{what}: max |logit difference| {diff:.3f}; argmax equal at {same.sum()} of {steps} steps, "
          f"at all {decisive.sum()} steps with a margin > {Q4_MARGIN}", flush=True)
    if not diff <= Q4_MARGIN or decisive.sum() < steps // 3 or not same[decisive].all():
        fail(f"{what}: mcullm's greedy choices differ from PyTorch's (diff {diff}, decisive {decisive.sum()}, "
             f"argmax equal {same[decisive].sum()})")


def check_ple(cli, work, tok, seed, ffn="swiglu"):
    """A PLE model written in esp32-ai's format: mcullm's q4e weights are the QAT quantizer's; with f32
    activations its logits equal PyTorch's within 1e-4; with its default int8 activations, its choices."""
    what = "ple" if ffn == "swiglu" else "combo"
    torch.manual_seed(seed)
    c = mdl.Config(vocab=tok.vocab_size, dim=64, n_layers=2, n_heads=4, n_kv_heads=4, hidden=96, seq_len=64,
                   quant="q4", ple_dim=32, q4e_group=64, ffn=ffn)  # hidden 96: a short last group; ple 32: one short group
    m = mdl.build(c)
    with torch.no_grad():
        for p in m.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.15)
            else:
                p.uniform_(0.5, 1.5)
    m.eval()
    path = os.path.join(work, f"{what}.bin")
    export.write_esp32ai(m, path)
    g = os.path.join(work, f"{what}.gguf")
    run([cli, "convert", path, "-o", g])
    kv, tensors = gguf.read(g)
    if kv.get("mcullm.ffn_activation", "swiglu").replace("swiglu", "silu") != ffn.replace("swiglu", "silu"):
        fail(f"{what}: mcullm convert wrote mcullm.ffn_activation {kv.get('mcullm.ffn_activation')} for a {ffn} FFN")
    mats = {"token_embd.weight": m.tok_emb, "ple_model_proj.weight": m.ple_model_proj, "ple_table.weight": m.ple_table}
    for l, b in enumerate(m.layers):
        for attr, name in (("qkv", "attn_qkv"), ("attn_proj", "attn_output"), ("gate", "ffn_gate"), ("up", "ffn_up"),
                           ("down", "ffn_down"), ("ple_gate", "ple_gate"), ("ple_proj", "ple_proj")):
            mats[f"blk.{l}.{name}.weight"] = getattr(b, attr)
    checked = 0
    for name, lin in mats.items():
        rows, cols = lin.weight.shape
        codes = np.frombuffer(tensors[name][2][:rows * ((cols + 1) // 2)], np.uint8).reshape(rows, -1)
        q = np.stack([codes & 15, codes >> 4], axis=-1).reshape(rows, -1)[:, :cols].astype(np.float32) - 8
        ng = (cols + lin.group - 1) // lin.group
        d = np.frombuffer(tensors[name + ".scales"][2][:rows * ng * 2], "<f2").astype(np.float32).reshape(rows, ng)
        held = q * np.repeat(d, lin.group, axis=1)[:, :cols]
        if not np.array_equal(held, quant.q4e_values(lin.weight, lin.group).numpy()):
            fail(f"{what}: {name}: mcullm holds other weights than the QAT quantizer")
        checked += rows * cols
    print(f"{what}: {checked} q4e weights mcullm holds equal the QAT quantizer's values", flush=True)
    tokfile = os.path.join(work, "tokenizer.bin")
    export.write_llama2c_tokenizer(tok, tokfile)
    probe = "Lily and Max played in the park.\n\nThe big dog barked: \"Hi!\" \u00fcber"
    got = [int(x) for x in run([cli, "tokenize", "-m", tokfile, "--ids", "--bos", "-p", probe]).stdout.split()]
    if got != tok.encode(probe):
        fail(f"{what}: the llama2.c tokenizer file gives {got}, python {tok.encode(probe)}")
    prompt = tok.encode("Once upon a time")
    for p in (path, g):  # the esp32-ai file and its GGUF form
        check_logits(f"{what} {os.path.basename(p)} f32 activations", cli, p, m, prompt, work, ("--f32-activations",))
    check_choices(f"{what} int8 activations", cli, path, m, prompt, work, ())
    return m


def check_combo(cli, work, tok, seed):
    """PLE + ReLU FFN + q4e: check_ple with the ReLU flag; on the probe some neurons are dead and some
    live, so the 1e-4 logit match sees the activation mcullm runs."""
    m = check_ple(cli, work, tok, seed, ffn="relu")
    stats = []
    with torch.no_grad():
        m(torch.tensor([tok.encode("Once upon a time")]), stats)
    print(f"combo: {100 * (1 - sum(stats) / len(stats)):.0f}% of FFN neurons zero on the probe", flush=True)
    if not 0 < sum(stats) / len(stats) < 1:
        fail("combo: the ReLU gate leaves no neuron dead (or none live): the check would not see it")


def i2s_unpack(raw, rows, cols):
    """i2_s rows (src/quant/ternary.h: per 128 weights 32 bytes, byte b holds weights b, b + 32, b + 64,
    b + 96 at bits 7-6, 5-4, 3-2, 1-0, code = w + 1), then the tensor's f32 scale; returns (codes, scale)."""
    n = rows * cols // 4
    b = np.frombuffer(raw[:n], dtype=np.uint8).reshape(rows, cols // 128, 1, 32)
    codes = np.concatenate([(b >> s) & 3 for s in (6, 4, 2, 0)], axis=2).reshape(rows, cols)
    if (codes == 3).any():
        fail("i2_s: code 3 in a packed row")
    return codes.astype(np.float32) - 1.0, np.frombuffer(raw[n:n + 4], dtype="<f4")[0]


def check_ternary_weights(what, path, m, values):
    """Every i2_s weight of the GGUF at `path`, unpacked here, equals values(w) of the QAT model m."""
    _, tensors = gguf.read(path)
    checked = 0
    for l, b in enumerate(m.layers):
        for attr, name in LAYER_NAMES:
            w = getattr(b, attr).weight
            codes, scale = i2s_unpack(tensors[f"blk.{l}.{name}.weight"][2], w.shape[0], w.shape[1])
            held = torch.from_numpy(codes) * torch.tensor(scale)
            if not torch.equal(held, values(w)):
                fail(f"{what}: blk.{l}.{name}: mcullm holds other weights than the QAT quantizer")
            checked += w.numel()
    print(f"{what}: {checked} weights mcullm holds equal the QAT quantizer's values", flush=True)


def check_ternary(cli, work, tok, seed):
    m = random_model("ternary", tok.vocab_size, seed)
    path = os.path.join(work, "ternary.bin")
    export.write_bitllama2c(m, path)
    g = os.path.join(work, "ternary-i2s.gguf")
    run([cli, "convert", path, "-o", g, "--bit-order", "msb"])
    check_ternary_weights("ternary", g, m, quant.ternary_values)
    # within 1e-4 although mcullm runs int8 activations: the QAT forward quantizes them as mcullm does
    check_logits_int8("ternary", cli, path, m, tok.encode("Once upon a time"), work, ("--bit-order", "msb"), 16)


def check_qwen2(cli, work, tok, seed):
    """qwen2 f32 (1e-4) and ternary QAT through `mcullm convert --type i2_s` (weights exact, choices)."""
    def qwen2_model(quant_mode, s):
        m = random_model(quant_mode, tok.vocab_size, s, arch="qwen2")
        with torch.no_grad():  # biases the check can see
            for b in m.layers:
                for lin in (b.wq, b.wk, b.wv):
                    lin.bias.uniform_(-0.5, 0.5)
        return m

    m = qwen2_model("none", seed)
    path = os.path.join(work, "qwen2-f32.gguf")
    export.write_gguf(m, tok, path)
    kv, _ = gguf.read(path)
    if kv.get("general.architecture") != "qwen2":
        fail(f"qwen2: the GGUF says architecture {kv.get('general.architecture')}")
    check_logits("qwen2 f32", cli, path, m, tok.encode("Once upon a time"), work, ())

    m = qwen2_model("ternary", seed + 1)
    f32 = os.path.join(work, "qwen2-ternary-f32.gguf")
    g = os.path.join(work, "qwen2-ternary-i2s.gguf")
    export.write_gguf(m, tok, f32)
    run([cli, "convert", f32, "-o", g, "--type", "i2_s", "--embd-type", "f32"])
    check_ternary_weights("qwen2 ternary", g, m, quant.ternary_values_absmean)
    # within 1e-4 although mcullm runs int8 activations: the QAT forward quantizes them as mcullm's i2_s path does
    check_logits_int8("qwen2 ternary", cli, g, m, tok.encode("Once upon a time"), work, (), 16)


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

    check_f32(cli, work, tok, "swiglu", 1)
    check_q4(cli, work, tok, "swiglu", 2)
    check_f32(cli, work, tok, "relu", 3)
    check_q4(cli, work, tok, "relu", 4)
    check_ternary(cli, work, tok, 5)
    check_ple(cli, work, tok, 6)
    check_combo(cli, work, tok, 7)
    check_qwen2(cli, work, tok, 8)
    print("check_export: PASS")


if __name__ == "__main__":
    main()
