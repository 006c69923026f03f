"""Model + vocabulary -> an f32 llama GGUF that mcullm loads (src/format/llama_gguf.cpp), with the
tokenizer metadata src/format/llama_gguf_writer_host.cpp's add_llama_vocab writes. Packing to q4g64 is
left to `mcullm convert --type q4g64` (one packing definition: src/quant/blocks.cpp)."""
import gguf
import tokenizer as tk


def write_gguf(model, tok, path, name="mcullm-train"):
    c = model.c
    w = gguf.Writer()
    w.add("general.architecture", gguf.STR, "llama")
    w.add("general.name", gguf.STR, name)
    w.add("llama.context_length", gguf.U32, c.seq_len)
    w.add("llama.embedding_length", gguf.U32, c.dim)
    w.add("llama.feed_forward_length", gguf.U32, c.hidden)
    w.add("llama.block_count", gguf.U32, c.n_layers)
    w.add("llama.attention.head_count", gguf.U32, c.n_heads)
    w.add("llama.attention.head_count_kv", gguf.U32, c.n_kv_heads)
    w.add("llama.rope.dimension_count", gguf.U32, c.dim // c.n_heads)
    w.add("llama.attention.layer_norm_rms_epsilon", gguf.F32, c.norm_eps)
    w.add("llama.rope.freq_base", gguf.F32, c.rope_theta)
    w.add("llama.vocab_size", gguf.U32, c.vocab)
    w.add("mcullm.weight_type", gguf.STR, "f32")
    w.add("mcullm.qat", gguf.STR, c.quant)
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
        w.add_tensor(f"blk.{l}.attn_norm.weight", t(b.attn_norm.weight))
        w.add_tensor(f"blk.{l}.ffn_norm.weight", t(b.ffn_norm.weight))
    w.write(path)
