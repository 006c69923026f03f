"""The PIE instructions mcullm's ESP32-S3 kernels use, and helpers shared by gen_encodings.py and
check_encodings.py: assembling one instruction with a GNU as for xtensa-esp32s3 and reading back the
bytes of its .text section.

Operand kinds: 'q' a QR register q0..q7, 'a' an address register a0..a15, 'i16' a signed byte offset
that is a multiple of 16 (the .IP post-increments)."""
import os
import struct
import subprocess
import tempfile

# mnemonic -> operand kinds, in assembler order: exactly the instructions pie_kernels.S uses (and
# tools/esp32s3-qemu/pie_ops.c.inc implements).
INSNS = {
    "ee.vld.128.ip": ("q", "a", "i16"),
    "ee.ld.128.usar.ip": ("q", "a", "i16"),
    "ee.vmulas.s8.accx": ("q", "q"),
    "ee.vmulas.s8.accx.ld.ip": ("q", "a", "i16", "q", "q"),
    "ee.zero.accx": (),
    "rur.accx_0": ("a",),
    "ee.andq": ("q", "q", "q"),
    "ee.orq": ("q", "q", "q"),
    "ee.src.q": ("q", "q", "q"),
    "ee.vsr.32": ("q", "q"),
}


def macro_name(mnemonic):
    return mnemonic.replace(".", "_")


def operand_text(kind, value):
    if kind == "q":
        return "q%d" % value
    if kind == "a":
        return "a%d" % value
    return str(value)


def insn_text(mnemonic, values):
    kinds = INSNS[mnemonic]
    return (mnemonic + " " + ", ".join(operand_text(k, v) for k, v in zip(kinds, values))).strip()


def text_section(obj):
    """The bytes of the .text section of a 32-bit little-endian ELF object."""
    data = open(obj, "rb").read()
    shoff, = struct.unpack_from("<I", data, 0x20)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x2E)
    def sh(i):
        return struct.unpack_from("<IIIIIIIIII", data, shoff + i * shentsize)
    strtab = sh(shstrndx)
    for i in range(shnum):
        name, _, _, _, off, size = sh(i)[:6]
        end = data.index(b"\0", strtab[4] + name)
        if data[strtab[4] + name:end] == b".text":
            return data[off:off + size]
    raise RuntimeError("no .text in " + obj)


def assemble(gas, lines, flags=()):
    """Assembles lines with `gas` (a command list); returns the .text bytes or None on an error."""
    with tempfile.TemporaryDirectory() as d:
        src, obj = os.path.join(d, "a.s"), os.path.join(d, "a.o")
        with open(src, "w") as f:
            f.write("\n".join(lines) + "\n")
        r = subprocess.run(list(gas) + list(flags) + [src, "-o", obj], capture_output=True, text=True)
        if r.returncode != 0:
            return None
        return text_section(obj)
