#!/usr/bin/python3
"""Tiny random checkpoints in the Hugging Face layout (config.json, *.safetensors, tokenizer.json) of
the Qwen2 and Llama families, and their logits from a plain PyTorch forward written here from the
Hugging Face semantics (modeling_qwen2 / modeling_llama: RMSNorm, q/k/v biases for Qwen2, RoPE by
rotate_half, grouped-query attention, SwiGLU), for tests/hf_convert_test.cpp (`mcullm convert` of a
folder, then `mcullm run`'s logits against these). No download, no `transformers`; safetensors are
written by hand (8-byte little-endian header length, JSON header, raw bytes) when the `safetensors`
module is missing.

    hf_checkpoint.py OUT_DIR        (exit 0: written; 77: PyTorch is missing, unless
                                     MCULLM_REQUIRE_TORCH=1, when it is 1)

Writes under OUT_DIR:
  qwen2/              f32, separate lm_head, one model.safetensors; ref_tokens.txt, ref_logits.f32
                      (row i: the logits after tokens[0..i], f32 little-endian, vocab_size each),
                      ref_ternary_logits.f32 (the same with every linear matrix absmean-ternarized)
  llama/              f32, tied embedding, two shards + model.safetensors.index.json; ref files
  qwen2_bf16/         qwen2's weights in BF16; qwen2_bf16_f32/ the same values (BF16-rounded) in F32
  llama_f16/          llama's weights in F16;  llama_f16_f32/  the same values (F16-rounded) in F32
"""
import json
import os
import struct
import sys

try:
    import torch
except ImportError:
    if os.environ.get("MCULLM_REQUIRE_TORCH") == "1":
        sys.exit("hf_checkpoint: PyTorch is missing (apt install python3-torch)")
    print("hf_checkpoint: skipped: PyTorch is missing (apt install python3-torch)", file=sys.stderr)
    sys.exit(77)

TOKENS = [261, 104, 101, 32, 263, 120, 7, 300]  # prompt ids the reference runs (inside the vocabulary)

QWEN2_PATTERN = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                 "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
LLAMA3_PATTERN = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                  "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")


def byte_chars():
    """GPT-2's byte -> character map."""
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(0x100 + extra)
            extra += 1
    return out


def tokenizer_json(pattern, specials, nfc):
    """A byte-level BPE: the 256 bytes (ids 0..255), a few merges, then the special tokens."""
    bc = byte_chars()
    vocab = {bc[b]: b for b in range(256)}
    merges = []
    for a, b in [("\u0120", "t"), ("h", "e"), ("\u0120t", "he"), ("i", "n"), ("\u0120", "a")]:
        merges.append(a + " " + b)
        vocab[a + b] = len(vocab)
    added = [{"id": len(vocab) + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, s in enumerate(specials)]
    return {
        "version": "1.0",
        "added_tokens": added,
        "normalizer": {"type": "NFC"} if nfc else None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
                  "merges": merges},
    }


def write_safetensors(path, tensors, dtype):
    """tensors: name -> float tensor; written as dtype (torch.float32 / float16 / bfloat16)."""
    name_of = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}
    header, blobs, pos = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].to(dtype).contiguous()
        raw = t.view(torch.int16).numpy().tobytes() if dtype != torch.float32 else t.numpy().tobytes()
        header[name] = {"dtype": name_of[dtype], "shape": list(t.shape), "data_offsets": [pos, pos + len(raw)]}
        blobs.append(raw)
        pos += len(raw)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def random_model(cfg, qkv_bias, seed):
    g = torch.Generator().manual_seed(seed)

    def u(shape, a):
        return (torch.rand(shape, generator=g, dtype=torch.float64) * 2 - 1) * a

    D, F, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    H, KV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    kv = D // H * KV
    w = {"model.embed_tokens.weight": u((V, D), 1.0), "model.norm.weight": 1 + u((D,), 0.2)}
    if not cfg["tie_word_embeddings"]:
        w["lm_head.weight"] = u((V, D), 1 / D ** 0.5)
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        w[p + "input_layernorm.weight"] = 1 + u((D,), 0.2)
        w[p + "post_attention_layernorm.weight"] = 1 + u((D,), 0.2)
        for n, shape in [("q", (D, D)), ("k", (kv, D)), ("v", (kv, D)), ("o", (D, D))]:
            w[p + f"self_attn.{n}_proj.weight"] = u(shape, 1 / shape[1] ** 0.5)
            if qkv_bias and n != "o":
                w[p + f"self_attn.{n}_proj.bias"] = u((shape[0],), 0.5)
        w[p + "mlp.gate_proj.weight"] = u((F, D), 1 / D ** 0.5)
        w[p + "mlp.up_proj.weight"] = u((F, D), 1 / D ** 0.5)
        w[p + "mlp.down_proj.weight"] = u((D, F), 1 / F ** 0.5)
    return {k: v.float() for k, v in w.items()}


def ternarize(w):
    """BitNet b1.58 absmean: s = mean|W|, W ~ s * clamp(round(W / s), -1, 1) (per tensor)."""
    out = dict(w)
    for k, v in w.items():
        if k.endswith("_proj.weight"):
            s = v.abs().mean()
            out[k] = (v / s.clamp(min=1e-5)).round().clamp(-1, 1) * s
    return out


def forward(w, cfg, tokens):
    """Logits [len(tokens), vocab] in float64, Hugging Face semantics."""
    w = {k: v.double() for k, v in w.items()}
    D, H, KV = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd, eps, T = D // H, cfg["rms_norm_eps"], len(tokens)

    def norm(x, g):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * g

    def rotate_half(x):
        return torch.cat([-x[..., hd // 2:], x[..., :hd // 2]], dim=-1)

    inv = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = torch.cat([ang, ang], -1).cos()[:, None, :], torch.cat([ang, ang], -1).sin()[:, None, :]
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    x = w["model.embed_tokens.weight"][torch.tensor(tokens)]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."

        def proj(n, h):
            y = h @ w[p + f"self_attn.{n}_proj.weight"].T
            b = w.get(p + f"self_attn.{n}_proj.bias")
            return y + b if b is not None else y

        h = norm(x, w[p + "input_layernorm.weight"])
        q, k, v = proj("q", h).view(T, H, hd), proj("k", h).view(T, KV, hd), proj("v", h).view(T, KV, hd)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = k.repeat_interleave(H // KV, dim=1), v.repeat_interleave(H // KV, dim=1)
        att = torch.einsum("thd,shd->hts", q, k) / hd ** 0.5 + mask
        o = torch.einsum("hts,shd->thd", att.softmax(-1), v).reshape(T, D)
        x = x + o @ w[p + "self_attn.o_proj.weight"].T
        h = norm(x, w[p + "post_attention_layernorm.weight"])
        g = h @ w[p + "mlp.gate_proj.weight"].T
        x = x + (g * torch.sigmoid(g) * (h @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
    head = w["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else w["lm_head.weight"]
    return norm(x, w["model.norm.weight"]) @ head.T


def write_folder(d, arch, cfg, w, tok, dtype=torch.float32, shards=1):
    os.makedirs(d, exist_ok=True)
    c = dict(cfg, architectures=[arch], hidden_act="silu", torch_dtype={torch.float32: "float32",
             torch.float16: "float16", torch.bfloat16: "bfloat16"}[dtype])
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        json.dump(tok, f, ensure_ascii=False)
    names = sorted(w)
    if shards == 1:
        write_safetensors(os.path.join(d, "model.safetensors"), w, dtype)
        return
    weight_map = {}
    for s in range(shards):
        part = names[s::shards]
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        write_safetensors(os.path.join(d, fname), {n: w[n] for n in part}, dtype)
        weight_map.update({n: fname for n in part})
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=2)


def write_refs(d, w, cfg, ternary):
    with open(os.path.join(d, "ref_tokens.txt"), "w") as f:
        f.write(",".join(str(t) for t in TOKENS) + "\n")
    with open(os.path.join(d, "ref_logits.f32"), "wb") as f:
        f.write(forward(w, cfg, TOKENS).float().numpy().tobytes())
    if ternary:
        with open(os.path.join(d, "ref_ternary_logits.f32"), "wb") as f:
            f.write(forward(ternarize(w), cfg, TOKENS).float().numpy().tobytes())


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    common = dict(max_position_embeddings=64, rms_norm_eps=1e-6, num_hidden_layers=2, vocab_size=320)
    qcfg = dict(common, hidden_size=128, intermediate_size=256, num_attention_heads=4, num_key_value_heads=2,
                rope_theta=1000000.0, tie_word_embeddings=False)
    lcfg = dict(common, hidden_size=128, intermediate_size=256, num_attention_heads=8, num_key_value_heads=2,
                rope_theta=10000.0, tie_word_embeddings=True)
    qtok = tokenizer_json(QWEN2_PATTERN, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], nfc=True)
    ltok = tokenizer_json(LLAMA3_PATTERN, ["<|begin_of_text|>", "<|end_of_text|>"], nfc=False)

    qw = random_model(qcfg, qkv_bias=True, seed=1)
    write_folder(os.path.join(out, "qwen2"), "Qwen2ForCausalLM", qcfg, qw, qtok)
    write_refs(os.path.join(out, "qwen2"), qw, qcfg, ternary=True)
    lw = random_model(lcfg, qkv_bias=False, seed=2)
    write_folder(os.path.join(out, "llama"), "LlamaForCausalLM", lcfg, lw, ltok, shards=2)
    write_refs(os.path.join(out, "llama"), lw, lcfg, ternary=False)

    for name, arch, cfg, w, tok, dtype in [("qwen2_bf16", "Qwen2ForCausalLM", qcfg, qw, qtok, torch.bfloat16),
                                           ("llama_f16", "LlamaForCausalLM", lcfg, lw, ltok, torch.float16)]:
        write_folder(os.path.join(out, name), arch, cfg, w, tok, dtype=dtype)
        rounded = {k: v.to(dtype).float() for k, v in w.items()}
        write_folder(os.path.join(out, name + "_f32"), arch, cfg, rounded, tok)
    print("hf_checkpoint: wrote", out)


if __name__ == "__main__":
    main()
