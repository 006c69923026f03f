#!/usr/bin/python3
"""An independent float64 reference for the Qwen2 architecture (the golden of tests/qwen2_test.cpp's
float path): reads a Qwen2 GGUF file with its own GGUF reader (f32 / f16 tensors), runs the model in
NumPy, and compares its logits with those `mcullm run` dumped for the same tokens.

    tools/qwen2_reference.py --mcullm build/release/mcullm [--work DIR] [--tol 1e-4]
        writes a tiny qwen2 dummy with f32 weights (`mcullm dummy --arch qwen2 --type f32 --embd-type f32`,
        once tied and once with a separate head), runs it greedily from prompt ids and compares
        every step's logits: max |ours - numpy| must be <= tol.
    tools/qwen2_reference.py --model M.gguf --tokens T.txt --logits L.f32
        compares a given run (T.txt: mcullm run --dump-tokens, L.f32: --dump-logits).

Exit 0: every logit within tol; 1: a mismatch or an error; 77: NumPy is missing (skipped), unless
MCULLM_REQUIRE_NUMPY=1. Written from the Qwen2 description (Hugging Face's modeling_qwen2 semantics:
q/k/v biases, rotate-half RoPE, grouped-query attention, SwiGLU, RMSNorm), not from mcullm's code.
"""
import argparse
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    if os.environ.get("MCULLM_REQUIRE_NUMPY") == "1":
        print("qwen2_reference: NumPy is missing (apt install python3-numpy)", file=sys.stderr)
        sys.exit(1)
    print("qwen2_reference: skipped: NumPy is missing (apt install python3-numpy)", file=sys.stderr)
    sys.exit(77)


class GgufError(Exception):
    pass


def read_gguf(path):
    """Returns (kv dict, tensor dict name -> ndarray [rows, cols] or [n]) for f32 / f16 tensors."""
    with open(path, "rb") as f:
        data = f.read()
    pos = 0

    def take(n):
        nonlocal pos
        if pos + n > len(data):
            raise GgufError("truncated at byte %d" % pos)
        b = data[pos:pos + n]
        pos += n
        return b

    def u32():
        return struct.unpack("<I", take(4))[0]

    def u64():
        return struct.unpack("<Q", take(8))[0]

    def string():
        return take(u64()).decode("utf-8", "replace")

    scalar = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}

    def value(t):
        if t in scalar:
            fmt = scalar[t]
            return struct.unpack(fmt, take(struct.calcsize(fmt)))[0]
        if t == 8:
            return string()
        if t == 9:
            et, n = u32(), u64()
            return [value(et) for _ in range(n)]
        raise GgufError("unknown value type %d" % t)

    if take(4) != b"GGUF":
        raise GgufError("not a GGUF file")
    version = u32()
    if version not in (2, 3):
        raise GgufError("GGUF version %d" % version)
    n_tensors, n_kv = u64(), u64()
    kv = {}
    for _ in range(n_kv):
        key = string()
        kv[key] = value(u32())
    infos = []
    for _ in range(n_tensors):
        name = string()
        dims = u32()
        ne = [u64() for _ in range(dims)]
        infos.append((name, ne, u32(), u64()))
    align = kv.get("general.alignment", 32)
    start = (pos + align - 1) // align * align
    tensors = {}
    for name, ne, ttype, off in infos:
        count = 1
        for n in ne:
            count *= n
        if ttype == 0:
            dtype, size = "<f4", 4
        elif ttype == 1:
            dtype, size = "<f2", 2
        else:
            continue  # only float tensors are read here
        a = start + off
        if a + count * size > len(data):
            raise GgufError("tensor %s runs past the end" % name)
        arr = np.frombuffer(data, dtype=dtype, count=count, offset=a).astype(np.float64)
        tensors[name] = arr.reshape(list(reversed(ne))) if len(ne) > 1 else arr
    return kv, tensors


class Qwen2:
    def __init__(self, path):
        kv, t = read_gguf(path)
        if kv.get("general.architecture") != "qwen2":
            raise GgufError("%s: architecture %r, not qwen2" % (path, kv.get("general.architecture")))
        p = "qwen2."
        self.dim = kv[p + "embedding_length"]
        self.layers = kv[p + "block_count"]
        self.heads = kv[p + "attention.head_count"]
        self.kv_heads = kv.get(p + "attention.head_count_kv", self.heads)
        self.eps = kv.get(p + "attention.layer_norm_rms_epsilon", 1e-6)
        self.theta = kv.get(p + "rope.freq_base", 1e6)
        self.hs = self.dim // self.heads

        def get(name):
            if name not in t:
                raise GgufError("%s: tensor %s is missing or not f32 / f16" % (path, name))
            return t[name]

        self.emb = get("token_embd.weight")
        self.out = t.get("output.weight", self.emb)
        self.out_norm = get("output_norm.weight")
        self.blk = []
        for l in range(self.layers):
            b = lambda s: get("blk.%d.%s" % (l, s))
            self.blk.append({s: b(s) for s in (
                "attn_norm.weight", "ffn_norm.weight", "attn_q.weight", "attn_q.bias", "attn_k.weight", "attn_k.bias",
                "attn_v.weight", "attn_v.bias", "attn_output.weight", "ffn_gate.weight", "ffn_up.weight",
                "ffn_down.weight")})
        self.keys = [[] for _ in range(self.layers)]
        self.values = [[] for _ in range(self.layers)]

    def rmsnorm(self, x, w):
        return w * (x / np.sqrt(np.mean(x * x) + self.eps))

    def rope(self, v, pos):
        # rotate-half: the pair (i, i + hs/2) of each head turns by pos * theta^(-2i/hs)
        half = self.hs // 2
        inv = self.theta ** (-np.arange(half, dtype=np.float64) * 2.0 / self.hs)
        c, s = np.cos(pos * inv), np.sin(pos * inv)
        v = v.reshape(-1, self.hs).copy()
        a, b = v[:, :half].copy(), v[:, half:].copy()
        v[:, :half] = a * c - b * s
        v[:, half:] = a * s + b * c
        return v.reshape(-1)

    def forward(self, token, pos):
        x = self.emb[token].copy()
        group = self.heads // self.kv_heads
        for l, B in enumerate(self.blk):
            h = self.rmsnorm(x, B["attn_norm.weight"])
            q = self.rope(B["attn_q.weight"] @ h + B["attn_q.bias"], pos)
            k = self.rope(B["attn_k.weight"] @ h + B["attn_k.bias"], pos)
            v = B["attn_v.weight"] @ h + B["attn_v.bias"]
            del self.keys[l][pos:], self.values[l][pos:]
            self.keys[l].append(k)
            self.values[l].append(v)
            K = np.stack(self.keys[l]).reshape(pos + 1, self.kv_heads, self.hs)
            V = np.stack(self.values[l]).reshape(pos + 1, self.kv_heads, self.hs)
            att = np.empty(self.dim)
            for hd in range(self.heads):
                g = hd // group
                scores = K[:, g, :] @ q[hd * self.hs:(hd + 1) * self.hs] / np.sqrt(self.hs)
                w = np.exp(scores - scores.max())
                w /= w.sum()
                att[hd * self.hs:(hd + 1) * self.hs] = w @ V[:, g, :]
            x = x + B["attn_output.weight"] @ att
            h = self.rmsnorm(x, B["ffn_norm.weight"])
            gate = B["ffn_gate.weight"] @ h
            x = x + B["ffn_down.weight"] @ (gate / (1.0 + np.exp(-gate)) * (B["ffn_up.weight"] @ h))
        return self.out @ self.rmsnorm(x, self.out_norm)


def fed_tokens(path):
    """The token fed at each position, from a --dump-tokens file (TOK pos token next)."""
    toks = []
    with open(path) as f:
        for line in f:
            p = line.split()
            if p and p[0] == "TOK":
                if int(p[1]) != len(toks):
                    raise GgufError("%s: positions out of order" % path)
                toks.append(int(p[2]))
    return toks


def compare(model_path, tokens_path, logits_path, tol):
    m = Qwen2(model_path)
    toks = fed_tokens(tokens_path)
    ours = np.fromfile(logits_path, dtype="<f4").astype(np.float64)
    vocab = m.emb.shape[0]
    if len(toks) == 0 or ours.size != len(toks) * vocab:
        raise GgufError("%s: %d logits for %d steps of %d" % (logits_path, ours.size, len(toks), vocab))
    ours = ours.reshape(len(toks), vocab)
    worst = 0.0
    for pos, tok in enumerate(toks):
        ref = m.forward(tok, pos)
        worst = max(worst, float(np.max(np.abs(ref - ours[pos]))))
        if pos == 0 and float(np.ptp(ref)) < 1e-3:
            raise GgufError("the reference logits are flat: the model tests nothing")
    ok = worst <= tol
    print("qwen2_reference: %s: %d steps, vocab %d, max |mcullm - numpy| = %.3g (tolerance %g): %s" %
          (os.path.basename(model_path), len(toks), vocab, worst, tol, "ok" if ok else "MISMATCH"))
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mcullm")
    ap.add_argument("--work")
    ap.add_argument("--model")
    ap.add_argument("--tokens")
    ap.add_argument("--logits")
    ap.add_argument("--tol", type=float, default=1e-4)
    a = ap.parse_args()
    try:
        if a.model:
            return 0 if compare(a.model, a.tokens, a.logits, a.tol) else 1
        if not a.mcullm:
            ap.error("give --mcullm (or --model, --tokens and --logits)")
        work = a.work or tempfile.mkdtemp(prefix="qwen2ref")
        os.makedirs(work, exist_ok=True)
        ok = True
        for name, extra in (("tied", []), ("untied", ["--untied-head", "--layout", "small"])):
            model = os.path.join(work, name + ".gguf")
            toks, logits = os.path.join(work, name + ".txt"), os.path.join(work, name + ".f32")
            subprocess.run([a.mcullm, "dummy", "--arch", "qwen2", "--type", "f32", "--embd-type", "f32", "--seed", "21",
                            "-o", model] + extra, check=True, stderr=subprocess.DEVNULL)
            subprocess.run([a.mcullm, "run", "-m", model, "--prompt-ids", "1,300,301,450,7", "-n", "12", "--temp", "0",
                            "-q", "--dump-tokens", toks, "--dump-logits", logits], check=True, stderr=subprocess.DEVNULL)
            ok = compare(model, toks, logits, a.tol) and ok
        return 0 if ok else 1
    except (GgufError, OSError, subprocess.CalledProcessError, KeyError) as e:
        print("qwen2_reference: error: %s" % e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
