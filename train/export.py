"""Model + vocabulary -> an f32 llama (or qwen2) GGUF that mcullm loads (src/format/transformer_gguf.cpp), with the
tokenizer metadata src/format/transformer_gguf_writer_host.cpp's add_llama_vocab writes. Packing to q4g64 is
left to `mcullm convert --type q4g64` (one packing definition: src/quant/blocks.cpp). Ternary QAT models
(the bitllama2.c layout) go to an ak42 v1 file with the tokenizer beside it (write_bitllama2c), PLE models
(q4e QAT) to an esp32-ai v1 file (write_esp32ai)."""
import struct

import numpy as np

import gguf
import quant
import tokenizer as tk


def write_gguf(model, tok, path, name="mcullm-train"):
    c = model.c
    a = c.arch  # "llama" or "qwen2": the GGUF keys' prefix as llama.cpp names them
    w = gguf.Writer()
    w.add("general.architecture", gguf.STR, a)
    w.add("general.name", gguf.STR, name)
    w.add(f"{a}.context_length", gguf.U32, c.seq_len)
    w.add(f"{a}.embedding_length", gguf.U32, c.dim)
    w.add(f"{a}.feed_forward_length", gguf.U32, c.hidden)
    w.add(f"{a}.block_count", gguf.U32, c.n_layers)
    w.add(f"{a}.attention.head_count", gguf.U32, c.n_heads)
    w.add(f"{a}.attention.head_count_kv", gguf.U32, c.n_kv_heads)
    w.add(f"{a}.rope.dimension_count", gguf.U32, c.dim // c.n_heads)
    w.add(f"{a}.attention.layer_norm_rms_epsilon", gguf.F32, c.norm_eps)
    w.add(f"{a}.rope.freq_base", gguf.F32, c.rope_theta)
    w.add(f"{a}.vocab_size", gguf.U32, c.vocab)
    w.add("mcullm.weight_type", gguf.STR, "f32")
    w.add("mcullm.qat", gguf.STR, c.quant)
    if c.ffn == "relu":  # src/format/transformer_gguf.h kLlamaFfnKey; absent: SwiGLU
        w.add("mcullm.ffn_activation", gguf.STR, "relu")
    w.add("tokenizer.ggml.model", gguf.STR, "llama")
    w.add_array("tokenizer.ggml.tokens", gguf.STR, [p.replace(" ", "\u2581") for p in tok.pieces])
    w.add_array("tokenizer.ggml.scores", gguf.F32, tok.scores)
    types = [2 if i == 0 else 3 if i in (tk.BOS, tk.EOS) else 6 if i < tk.N_SPECIAL + 256 else 1
             for i in range(tok.vocab_size)]
    w.add_array("tokenizer.ggml.token_type", gguf.I32, types)
    w.add("tokenizer.ggml.bos_token_id", gguf.U32, tk.BOS)
    w.add("tokenizer.ggml.eos_token_id", gguf.U32, tk.EOS)
    w.add("tokenizer.ggml.unknown_token_id", gguf.U32, 0)
    w.add("tokenizer.ggml.add_bos_token", gguf.BOOL, True)

    def t(x):
        return x.detach().float().cpu().numpy()

    w.add_tensor("token_embd.weight", t(model.tok_emb.weight))
    if model.output is not None:
        w.add_tensor("output.weight", t(model.output.weight))
    w.add_tensor("output_norm.weight", t(model.out_norm.weight))
    names = {"wq": "attn_q", "wk": "attn_k", "wv": "attn_v", "wo": "attn_output",
             "w1": "ffn_gate", "w2": "ffn_down", "w3": "ffn_up"}
    for l, b in enumerate(model.layers):
        for attr, n in names.items():
            w.add_tensor(f"blk.{l}.{n}.weight", t(getattr(b, attr).weight))
            if getattr(b, attr).bias is not None:  # qwen2's q, k, v
                w.add_tensor(f"blk.{l}.{n}.bias", t(getattr(b, attr).bias))
        w.add_tensor(f"blk.{l}.attn_norm.weight", t(b.attn_norm.weight))
        w.add_tensor(f"blk.{l}.ffn_norm.weight", t(b.ffn_norm.weight))
    w.write(path)


def write_llama2c_tokenizer(tok, path):
    """The vocabulary as a llama2.c tokenizer.bin (mcullm -z): i32 max piece bytes, then per piece
    f32 score, i32 length, UTF-8 bytes (spaces literal)."""
    pieces = [p.encode("utf-8") for p in tok.pieces]
    out = bytearray(struct.pack("<i", max(len(p) for p in pieces)))
    for p, s in zip(pieces, tok.scores):
        out += struct.pack("<fi", s, len(p)) + p
    with open(path, "wb") as f:
        f.write(out)


def bitllama2c_pack(t):
    """Ternary codes t [rows, cols] (values -1, 0, 1) -> bitllama2.c msb bytes (src/quant/ternary.h:
    00 = 0, 01 = +1, 11 = -1; weight j of a byte at bits 7-2j..6-2j), row-major."""
    codes = np.where(t > 0, 1, np.where(t < 0, 3, 0)).astype(np.uint8).reshape(-1, 4)
    return (codes[:, 0] << 6 | codes[:, 1] << 4 | codes[:, 2] << 2 | codes[:, 3]).astype(np.uint8).tobytes()


def write_bitllama2c(model, path):
    """A quant="ternary" model as a bitllama2.c ak42 v1 file (FACTS.md section 2; src/format/bitllama2c.h),
    bit order msb: every matrix stored as the scale and codes of quant.ternary_codes (the QAT forward's)."""
    c = model.c
    if c.quant != "ternary" or not c.tied or c.ffn != "swiglu":
        raise ValueError("bitllama2.c holds ternary QAT models with a tied head and a SwiGLU FFN")
    out = bytearray(struct.pack("<Ii7iB", 0x616B3432, 1, c.dim, c.hidden, c.n_layers, c.n_heads, c.n_kv_heads,
                                c.vocab, c.seq_len, 1))
    out += b"\0" * (256 - len(out))
    out += model.out_norm.weight.detach().float().numpy().astype("<f4").tobytes()
    out += model.tok_emb.weight.detach().float().numpy().astype("<f4").tobytes()
    for attr in ("wq", "wk", "wv", "wo", "w1", "w2", "w3"):
        for b in model.layers:
            t, s = quant.ternary_codes(getattr(b, attr).weight)
            out += struct.pack("<f", s.item()) + bitllama2c_pack(t.numpy())
    with open(path, "wb") as f:
        f.write(out)


def q4e_tensor(lin):
    """A Q4eLinear as esp32-ai stores it (src/quant/q4e.h): i32 group, codes q + 8 (column j in byte j / 2,
    even column in the low nibble, rows of ceil(cols / 2) bytes), f16 scales [rows][groups]."""
    rows, cols = lin.weight.shape
    q, d = quant.q4e_codes(lin.weight, lin.group)
    codes = (q.reshape(rows, -1)[:, :cols] + 8).numpy().astype(np.uint8)
    if cols % 2:
        codes = np.concatenate([codes, np.zeros((rows, 1), np.uint8)], axis=1)
    packed = codes[:, 0::2] | (codes[:, 1::2] << 4)
    return struct.pack("<i", lin.group) + packed.tobytes() + d.reshape(rows, -1).numpy().astype("<f2").tobytes()


def write_esp32ai(model, path):
    """A PLE model (model.PleModel) as an esp32-ai v1 file (FACTS.md section 4, src/format/esp32ai.h):
    the 56-byte header (flags: bit 0 tied head; bit 1 ReLU FFN, mcullm's extension), then the tensors in
    the file's order; norms as raw f32."""
    c = model.c
    flags = 1 | (2 if c.ffn == "relu" else 0)
    out = bytearray(struct.pack("<4I2I7if", 0x00454C50, 1, 56, flags, c.vocab, c.vocab, c.dim, c.n_layers, c.n_heads,
                                c.hidden, c.ple_dim, c.seq_len, c.q4e_group, c.rope_theta))

    def norm(n):
        return n.weight.detach().float().numpy().astype("<f4").tobytes()

    out += q4e_tensor(model.tok_emb) + q4e_tensor(model.ple_model_proj) + norm(model.ple_proj_norm)
    out += q4e_tensor(model.ple_table)
    for b in model.layers:
        out += norm(b.attn_norm) + q4e_tensor(b.qkv) + q4e_tensor(b.attn_proj) + norm(b.ffn_norm)
        out += q4e_tensor(b.gate) + q4e_tensor(b.up) + q4e_tensor(b.down) + q4e_tensor(b.ple_gate)
        out += q4e_tensor(b.ple_proj) + norm(b.ple_norm)
    out += norm(model.out_norm)
    with open(path, "wb") as f:
        f.write(out)


def main():
    """export.py RUN_DIR: writes RUN_DIR's exports again from its model.pt and tokenizer.json (as train.py does)."""
    import json
    import sys

    import torch

    import model as mdl
    import train
    if len(sys.argv) != 2:
        sys.exit("usage: export.py RUN_DIR")
    d = sys.argv[1]
    ck = torch.load(f"{d}/model.pt")
    m = mdl.build(mdl.Config(**ck["config"]))
    m.load_state_dict(ck["state"])
    with open(f"{d}/tokenizer.json") as f:
        j = json.load(f)
    train.save(m, tk.Tokenizer(j["pieces"], j["scores"]), d)


if __name__ == "__main__":
    main()
