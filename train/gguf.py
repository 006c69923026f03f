"""A minimal GGUF (version 3) writer and reader: f32 tensors out, any tensor's raw bytes back in."""
import struct

import numpy as np

ALIGN = 32
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
GGML_F32 = 0
_FMT = {U8: "B", I8: "b", U16: "H", I16: "h", U32: "I", I32: "i", F32: "f", BOOL: "?", U64: "Q", I64: "q", F64: "d"}


def _str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _value(kind, v):
    if kind == STR:
        return _str(v)
    fmt = _FMT[kind]
    return struct.pack("<" + fmt, v)


class Writer:
    def __init__(self):
        self.kv = []
        self.tensors = []

    def add(self, key, kind, value):
        self.kv.append((key, kind, value))

    def add_array(self, key, kind, values):
        self.kv.append((key, (ARR, kind), values))

    def add_tensor(self, name, array):
        """array: a numpy f32 array in row-major order; GGUF dims are reversed (ne0 = last axis)."""
        a = np.ascontiguousarray(array, dtype="<f4")
        self.tensors.append((name, a))

    def write(self, path):
        out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(self.tensors), len(self.kv)))
        for key, kind, value in self.kv:
            out += _str(key)
            if isinstance(kind, tuple):
                out += struct.pack("<IIQ", ARR, kind[1], len(value))
                for v in value:
                    out += _value(kind[1], v)
            else:
                out += struct.pack("<I", kind) + _value(kind, value)
        offset = 0
        offsets = []
        for name, a in self.tensors:
            out += _str(name) + struct.pack("<I", a.ndim)
            for d in reversed(a.shape):
                out += struct.pack("<Q", d)
            out += struct.pack("<IQ", GGML_F32, offset)
            offsets.append(offset)
            offset += (a.nbytes + ALIGN - 1) // ALIGN * ALIGN
        out += b"\0" * (-len(out) % ALIGN)
        for (name, a), off in zip(self.tensors, offsets):
            out += a.tobytes()
            out += b"\0" * (-len(out) % ALIGN)
        with open(path, "wb") as f:
            f.write(out)


def read(path):
    """Returns (kv dict, {name: (ggml type, dims ne0 first, raw bytes)})."""
    data = open(path, "rb").read()
    if data[:4] != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file")
    version, n_t, n_kv = struct.unpack_from("<IQQ", data, 4)
    pos = 24

    def rstr():
        nonlocal pos
        (n,) = struct.unpack_from("<Q", data, pos)
        s = data[pos + 8:pos + 8 + n].decode("utf-8")
        pos += 8 + n
        return s

    def rval(kind):
        nonlocal pos
        if kind == STR:
            return rstr()
        if kind == ARR:
            sub, n = struct.unpack_from("<IQ", data, pos)
            pos += 12
            return [rval(sub) for _ in range(n)]
        fmt = "<" + _FMT[kind]
        (v,) = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return v

    kv = {}
    for _ in range(n_kv):
        key = rstr()
        (kind,) = struct.unpack_from("<I", data, pos)
        pos += 4
        kv[key] = rval(kind)
    infos = []
    for _ in range(n_t):
        name = rstr()
        (nd,) = struct.unpack_from("<I", data, pos)
        dims = struct.unpack_from(f"<{nd}Q", data, pos + 4)
        ggml_type, off = struct.unpack_from("<IQ", data, pos + 4 + 8 * nd)
        pos += 4 + 8 * nd + 12
        infos.append((name, ggml_type, dims, off))
    align = kv.get("general.alignment", ALIGN)
    base = (pos + align - 1) // align * align
    ends = sorted(off for _, _, _, off in infos)[1:] + [len(data) - base]
    by_off = dict(zip(sorted(off for _, _, _, off in infos), ends))
    tensors = {name: (t, dims, data[base + off:base + by_off[off]]) for name, t, dims, off in infos}
    return kv, tensors
