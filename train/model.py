"""A llama-family model in the layout mcullm's llama GGUF loader runs (src/model/llama.cpp): RMSNorm with
weights, adjacent-pair RoPE, grouped-query attention, SwiGLU (or ReLU-gated) FFN, tied or untied head;
linear layers optionally quantization-aware (q4g64, quant.py).

quant="ternary" is the bitllama2.c layout (FACTS.md section 2, src/model/bitnet_llama2c.h): every linear
layer a BitLinear (weightless SimpleRMSNorm of its input, per-token int8 activations, absmean ternary
weights), no attention / FFN norm weights, the learned final norm, the head tied to the f32 embedding;
export.write_bitllama2c writes it as an ak42 v1 file mcullm runs.

ple_dim > 0 is esp32-ai's PLE transformer as src/model/ple.h runs it (FACTS.md section 4): per-layer
embeddings, split-half RoPE, fused QKV, no GQA, RMSNorm eps 1e-6, a GELU gate per layer, tied head; every
matrix (embedding and PLE table included) trained with the q4e values the file holds (quant.q4e_values);
export.write_esp32ai writes it. With ffn="relu" it is the "combo" model (PLE + ReLU + 4-bit): the FFN is
relu(gate x) * (up x), gate first as the engine's sparse FFN reads it, flagged in the esp32-ai header's
bit 1 (an mcullm extension, src/format/esp32ai.h kEsp32aiFlagReluFfn).

arch="qwen2" is llama.cpp's qwen2 as src/model/qwen2.h runs it: q/k/v biases, RoPE on the pairs (i, i + hs/2)
(NEOX), RMSNorm with weights, GQA, SwiGLU, a separate head. With quant="ternary" its seven linear matrices per
layer are absmean-ternary per tensor and their inputs int8 per token as the engine's i2_s path computes them
(quant.int8_i8s; no SimpleRMSNorm: that is the bitllama2.c layout); export.write_gguf writes it in f32 and
`mcullm convert --type i2_s` ternarizes it (the same absmean)."""
import dataclasses
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import quant


@dataclasses.dataclass
class Config:
    vocab: int = 1024
    dim: int = 128
    n_layers: int = 4
    n_heads: int = 4
    n_kv_heads: int = 4
    hidden: int = 384
    seq_len: int = 512
    ffn: str = "swiglu"      # or "relu": h = relu(gate x) * (up x), what src/model/sparse_ffn.h skips
    tied: bool = True
    quant: str = "none"      # "q4" (q4g64 weights) or "ternary" (absmean weights, int8 per-token activations)
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    ple_dim: int = 0         # > 0: esp32-ai's PLE architecture (PleModel), every matrix q4e QAT
    q4e_group: int = 64      # PLE: weights per q4e scale group
    ple_norm_init: float = 0.1  # PLE: the initial weight of each layer's ple_norm (see PleModel)
    arch: str = "llama"      # or "qwen2" (biases on q/k/v, NEOX RoPE; ternary without the bitllama2.c norms)


class QLinear(nn.Linear):
    def __init__(self, n_in, n_out, mode, bias=False):
        super().__init__(n_in, n_out, bias=bias)
        self.mode = mode

    def forward(self, x):
        w = self.weight
        if self.mode == "q4":
            w = quant.ste(w, quant.q4g64_values(w))
        elif self.mode == "ternary":  # BitLinear: SimpleRMSNorm, int8 per token, ternary weights
            x = simple_rmsnorm(x)
            w = quant.ste(w, quant.ternary_values(w))
            x = quant.ste(x, quant.int8_per_token(x))
        elif self.mode == "ternary-i8s":  # Qwen2's ternary layers: the engine's i2_s path, no norm of its own
            w = quant.ste(w, quant.ternary_values_absmean(w))
            x = quant.ste(x, quant.int8_i8s(x))
        return F.linear(x, w, self.bias)


def simple_rmsnorm(x):
    """bitllama2.c's SimpleRMSNorm as mcullm computes it: x * (1 / sqrt(mean(x^2))) / n (no weight, no eps)."""
    n = x.shape[-1]
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True)) / n


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(hs, n, theta):
    freq = 1.0 / torch.pow(torch.tensor(theta, dtype=torch.float64), torch.arange(0, hs, 2, dtype=torch.float64) / hs)
    freq = freq.float()
    ang = torch.arange(n, dtype=torch.float32)[:, None] * freq[None, :]
    return torch.cos(ang.double()).float(), torch.sin(ang.double()).float()


def rope(x, cos, sin):
    """x [B, T, H, hs]: rotate the pairs (2i, 2i + 1) of each head (RopeStyle::kAdjacent)."""
    a, b = x[..., 0::2], x[..., 1::2]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.stack((a * c - b * s, a * s + b * c), dim=-1).flatten(-2)


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        hs = c.dim // c.n_heads
        qwen2 = c.arch == "qwen2"
        bit = c.quant == "ternary" and not qwen2  # bitllama2.c: the BitLinear layers normalise their own inputs
        mode = "ternary-i8s" if qwen2 and c.quant == "ternary" else c.quant
        self.attn_norm = nn.Identity() if bit else RMSNorm(c.dim, c.norm_eps)
        self.wq = QLinear(c.dim, c.dim, mode, bias=qwen2)
        self.wk = QLinear(c.dim, c.n_kv_heads * hs, mode, bias=qwen2)
        self.wv = QLinear(c.dim, c.n_kv_heads * hs, mode, bias=qwen2)
        self.wo = QLinear(c.dim, c.dim, mode)
        self.ffn_norm = nn.Identity() if bit else RMSNorm(c.dim, c.norm_eps)
        self.w1 = QLinear(c.dim, c.hidden, mode)  # gate
        self.w2 = QLinear(c.hidden, c.dim, mode)  # down
        self.w3 = QLinear(c.dim, c.hidden, mode)  # up
        self.rope = rope_neox if qwen2 else rope

    def forward(self, x, cos, sin, mask, stats=None):
        c = self.c
        B, T, _ = x.shape
        hs = c.dim // c.n_heads
        h = self.attn_norm(x)
        q = self.rope(self.wq(h).view(B, T, c.n_heads, hs), cos, sin)
        k = self.rope(self.wk(h).view(B, T, c.n_kv_heads, hs), cos, sin)
        v = self.wv(h).view(B, T, c.n_kv_heads, hs)
        rep = c.n_heads // c.n_kv_heads
        k = k.repeat_interleave(rep, dim=2)
        v = v.repeat_interleave(rep, dim=2)
        att = torch.einsum("bthd,bshd->bhts", q, k) / math.sqrt(hs)
        att = att.masked_fill(mask[:T, :T], float("-inf")).softmax(-1)
        y = torch.einsum("bhts,bshd->bthd", att, v).reshape(B, T, c.dim)
        x = x + self.wo(y)
        h = self.ffn_norm(x)
        return x + self.w2(ffn_gate(c, self.w1(h), stats) * self.w3(h))


def ffn_gate(c, g, stats):
    """The FFN's gate activation: relu (stats gets the live share) or silu."""
    if c.ffn != "relu":
        return F.silu(g)
    g = F.relu(g)
    if stats is not None:
        stats.append((g > 0).float().mean().item())
    return g


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.tok_emb = nn.Embedding(c.vocab, c.dim)
        self.layers = nn.ModuleList(Block(c) for _ in range(c.n_layers))
        self.out_norm = RMSNorm(c.dim, c.norm_eps)
        self.output = None if c.tied else nn.Linear(c.dim, c.vocab, bias=False)
        cos, sin = rope_tables(c.dim // c.n_heads, c.seq_len, c.rope_theta)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.register_buffer("mask", torch.triu(torch.ones(c.seq_len, c.seq_len, dtype=torch.bool), 1), persistent=False)
        self.apply(self._init)
        for name, p in self.named_parameters():
            if name.endswith("wo.weight") or name.endswith("w2.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * c.n_layers))

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, 0.0, 0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx, stats=None):
        T = idx.shape[1]
        x = self.tok_emb(idx)
        for layer in self.layers:
            x = layer(x, self.cos[:T], self.sin[:T], self.mask, stats)
        x = self.out_norm(x)
        w = self.tok_emb.weight if self.output is None else self.output.weight
        return F.linear(x, w)

    def n_params(self):
        return sum(p.numel() for p in self.parameters())


def build(c):
    return PleModel(c) if c.ple_dim > 0 else Model(c)


def rope_neox(x, cos, sin):
    """x [B, T, H, hs]: rotate the pairs (i, i + hs / 2) of each head (RopeStyle::kNeox)."""
    h = x.shape[-1] // 2
    a, b = x[..., :h], x[..., h:]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat((a * c - b * s, a * s + b * c), dim=-1)


class Q4eLinear(nn.Module):
    """A matrix trained with the q4e values the esp32-ai file stores (straight-through)."""

    def __init__(self, n_out, n_in, group):
        super().__init__()
        self.group = group
        self.weight = nn.Parameter(torch.empty(n_out, n_in))

    def values(self):
        return quant.ste(self.weight, quant.q4e_values(self.weight, self.group))

    def forward(self, x):
        return F.linear(x, self.values())


class PleBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        D, F_, P, g, eps = c.dim, c.hidden, c.ple_dim, c.q4e_group, 1e-6
        self.attn_norm = RMSNorm(D, eps)
        self.qkv = Q4eLinear(3 * D, D, g)
        self.attn_proj = Q4eLinear(D, D, g)
        self.ffn_norm = RMSNorm(D, eps)
        self.gate = Q4eLinear(F_, D, g)
        self.up = Q4eLinear(F_, D, g)
        self.down = Q4eLinear(D, F_, g)
        self.ple_gate = Q4eLinear(P, D, g)
        self.ple_proj = Q4eLinear(D, P, g)
        self.ple_norm = RMSNorm(D, eps)

    def forward(self, x, ple, cos, sin, mask, stats=None):
        c = self.c
        B, T, D = x.shape
        H, hs = c.n_heads, c.dim // c.n_heads
        q, k, v = self.qkv(self.attn_norm(x)).split(D, dim=-1)
        q = rope_neox(q.reshape(B, T, H, hs), cos, sin)
        k = rope_neox(k.reshape(B, T, H, hs), cos, sin)
        v = v.reshape(B, T, H, hs)
        att = torch.einsum("bthd,bshd->bhts", q, k) / math.sqrt(hs)
        att = att.masked_fill(mask[:T, :T], float("-inf")).softmax(-1)
        x = x + self.attn_proj(torch.einsum("bhts,bshd->bthd", att, v).reshape(B, T, D))
        h = self.ffn_norm(x)
        x = x + self.down(ffn_gate(c, self.gate(h), stats) * self.up(h))
        return x + self.ple_norm(self.ple_proj(F.gelu(self.ple_gate(x)) * ple))


class PleModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        if not c.tied or c.n_kv_heads != c.n_heads or c.quant != "q4":
            raise ValueError("the PLE model has a tied head, no GQA and q4e weights (--quant q4)")
        self.c = c
        L, P, D, g = c.n_layers, c.ple_dim, c.dim, c.q4e_group
        self.tok_emb = Q4eLinear(c.vocab, D, g)  # rows read as embeddings; also the head
        self.ple_model_proj = Q4eLinear(L * P, D, g)
        self.ple_proj_norm = RMSNorm(P, 1e-6)
        self.ple_table = Q4eLinear(c.vocab, L * P, g)
        self.layers = nn.ModuleList(PleBlock(c) for _ in range(L))
        self.out_norm = RMSNorm(D, 1e-6)
        cos, sin = rope_tables(D // c.n_heads, c.seq_len, c.rope_theta)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.register_buffer("mask", torch.triu(torch.ones(c.seq_len, c.seq_len, dtype=torch.bool), 1), persistent=False)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * L) if name.endswith(("attn_proj.weight", "down.weight", "ple_proj.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)
        # Each layer adds ple_norm(...), a unit-RMS vector at weight 1, to a residual stream whose embedding
        # starts near RMS 0.02: the token is drowned until training shrinks the weight. Starting it at 0.1
        # took the 1.6M-token combo from 1.4113 to 1.2191 bits/byte (docs/models.md); the file is unchanged.
        for layer in self.layers:
            nn.init.constant_(layer.ple_norm.weight, c.ple_norm_init)

    def forward(self, idx, stats=None):
        c = self.c
        B, T = idx.shape
        L, P, D = c.n_layers, c.ple_dim, c.dim
        emb = self.tok_emb.values()
        x = emb[idx]
        # Per-layer inputs: (RMSNorm(proj(x) / sqrt(D)) + table[token] * sqrt(P)) / sqrt(2), as src/model/ple.cpp
        ple = self.ple_proj_norm((self.ple_model_proj(x) * (1.0 / math.sqrt(D))).view(B, T, L, P))
        ple = (ple + self.ple_table.values()[idx].view(B, T, L, P) * math.sqrt(P)) * 0.70710678
        for l, layer in enumerate(self.layers):
            x = layer(x, ple[:, :, l], self.cos[:T], self.sin[:T], self.mask, stats)
        return F.linear(self.out_norm(x), emb)

    def n_params(self):
        return sum(p.numel() for p in self.parameters())
