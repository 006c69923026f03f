"""Fake quantizers for quantization-aware training (straight-through estimator).

q4g64 is src/quant/blocks.cpp's quantize_q4g64 written in torch, value for value: per row, groups of 64
columns, d = amax / 7 in f32, q = round_half_away(x * (1 / d)) clamped to [-7, 7], stored d = f16(d), so
the weight mcullm computes with is f16(d) * q. tests/train_export_test checks this against the C++ packer.
"""
import torch

Q4_GROUP = 64


def round_half_away(x):
    """src/quant/blocks.h round_half_away in f32 (a + 0.5 can round up: corrected as the C++ does)."""
    a = x.abs()
    r = torch.trunc(a + 0.5)
    r = torch.where(a < r - 0.5, r - 1.0, r)
    r = torch.where(a < 8388608.0, r, a)
    return torch.copysign(r, x)


def q4g64_values(w):
    """The f32 values mcullm's q4g64 weights hold for the f32 matrix w [rows, cols], cols % 64 == 0."""
    rows, cols = w.shape
    if cols % Q4_GROUP:
        raise ValueError(f"q4g64 needs columns in whole groups of {Q4_GROUP}, got {cols}")
    g = w.detach().to(torch.float32).reshape(rows, cols // Q4_GROUP, Q4_GROUP)
    d = g.abs().amax(dim=-1, keepdim=True) / 7.0
    inv = torch.where(d != 0, 1.0 / torch.where(d != 0, d, torch.ones_like(d)), torch.zeros_like(d))
    q = round_half_away(g * inv).clamp(-7, 7)
    return (d.half().float() * q).reshape(rows, cols)


def ternary_codes(w):
    """BitNet b1.58 absmean (FACTS.md section 2): s = mean|w| (f32), t = clamp(round(w / s), -1, 1); the
    weight is s * t. export.write_bitllama2c stores exactly these t and s."""
    s = w.detach().float().abs().mean().clamp(min=1e-8)
    return (w.detach().float() / s).round().clamp(-1, 1), s


def ternary_values(w):
    t, s = ternary_codes(w)
    return t * s


def int8_per_token(x):
    """Per-token absmax int8 activations as src/quant/ternary.cpp quantize_bitlinear computes them:
    s = f32(amax / 127.0 in double), q = round_half_away(x * f32(1 / s in double)) in [-127, 127]."""
    x = x.detach()
    amax = x.abs().amax(dim=-1, keepdim=True)
    s = (amax.double() / 127.0).float()
    ok = s > 0
    inv = (1.0 / torch.where(ok, s, torch.ones_like(s)).double()).float()
    q = round_half_away(x * inv).clamp(-127, 127)
    return torch.where(ok, q * s, torch.zeros_like(x))


def ternary_values_absmean(w):
    """Absmean ternary values as `mcullm convert --type i2_s` computes them from an f32 matrix
    (src/load/ternarize_host.cpp): s = f32(mean |w| in double), d = max(s, 1e-5), t = clamp(round(w / d), -1, 1)
    (round half to even); the weight is s * t."""
    wd = w.detach().float()
    s = wd.double().abs().mean().float()
    d = torch.clamp(s, min=1e-5)
    return (wd / d).round().clamp(-1, 1) * s


def int8_i8s(x):
    """Per-token int8 activations as src/quant/ternary.cpp quantize_i8s computes them (the engine's i2_s
    matvec input): s = f32(127 / max(amax, 1e-5) in double), q = round_half_away(x * s) in [-128, 127], the
    value q * f32(1 / s in double)."""
    x = x.detach()
    amax = x.abs().amax(dim=-1, keepdim=True)
    s = (127.0 / torch.clamp(amax, min=1e-5).double()).float()
    inv = (1.0 / s.double()).float()
    q = round_half_away(x * s).clamp(-128, 127)
    return q * inv


def ste(x, q):
    """Forward q, backward identity to x."""
    return x + (q - x).detach()


def q4e_values(w, group):
    """src/quant/q4e.cpp q4e_quantize_tensor in torch, value for value: per row, groups of `group` columns
    (the last one may be short), d = f16(amax / 7), q = round_half_away(x * (1 / d)) in [-7, 7]; the
    weight is d * q. export.write_esp32ai stores these q and d."""
    q, d = q4e_codes(w, group)
    rows, cols = w.shape
    return (q * d).reshape(rows, -1)[:, :cols]


def q4e_codes(w, group):
    """(q [rows, groups, group] in -7..7 with zero padding, d [rows, groups, 1] f16 values as f32)."""
    rows, cols = w.shape
    ng = (cols + group - 1) // group
    g = torch.zeros(rows, ng * group)
    g[:, :cols] = w.detach().float()
    g = g.reshape(rows, ng, group)
    d = (g.abs().amax(dim=-1, keepdim=True) / 7.0).half().float()
    inv = torch.where(d != 0, 1.0 / torch.where(d != 0, d, torch.ones_like(d)), torch.zeros_like(d))
    return round_half_away(g * inv).clamp(-7, 7), d
