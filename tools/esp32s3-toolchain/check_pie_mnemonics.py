#!/usr/bin/env python3
"""The PIE kernels' .byte encodings against GNU as's own mnemonics, with a real xtensa-esp32s3-elf
binutils (tools/esp32s3-toolchain/build-gcc.sh, or tools/esp32s3-pie/build-binutils.sh):
src/kernels/esp32s3/pie_kernels.S is preprocessed twice, once as written (each PIE instruction a
macro of pie_encodings.inc that emits .byte) and once with every macro call rewritten as the
instruction's mnemonic (`ee_vld_128_ip 0, 2, 16` -> `ee.vld.128.ip q0, a2, 16`); both are assembled
and their .text must be equal byte for byte. The mnemonic object's disassembly is printed.
    check_pie_mnemonics.py AS OBJDUMP      exit 0 equal, 1 different, 2 usage"""
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(ROOT, "src")
INC = os.path.join(SRC, "kernels", "esp32s3", "pie_encodings.inc")
KERNELS = os.path.join(SRC, "kernels", "esp32s3", "pie_kernels.S")


def macros():
    """macro name -> (mnemonic, operand kinds 'q' / 'a' / 'imm') from the .inc's comments."""
    out = {}
    for m in re.finditer(r"/\* (\S+) ?([^(]*)\(\d+ bytes\)[^\n]*\n\.macro (\w+)", open(INC).read()):
        kinds = [p.strip().rsplit("_", 1)[0] for p in m[2].split(",") if p.strip()]
        out[m[3]] = (m[1], kinds)
    return out


def rewrite(text, table):
    lines = []
    for line in text.split("\n"):
        m = re.match(r"(\s*)(\w+)\b(.*)$", line)
        if m and m[2] in table:
            mnemonic, kinds = table[m[2]]
            args = [a.strip() for a in m[3].split(",")] if m[3].strip() else []
            assert len(args) == len(kinds), line
            ops = [("q" + a if k == "q" else "a" + a if k == "a" else a) for k, a in zip(kinds, args)]
            line = m[1] + mnemonic + " " + ", ".join(ops)
        lines.append(line)
    return "\n".join(lines)


def text_bytes(objcopy, obj, out):
    subprocess.run([objcopy, "-O", "binary", "-j", ".text", obj, out], check=True)
    return open(out, "rb").read()


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    gas, objdump = sys.argv[1:]
    objcopy = objdump.replace("objdump", "objcopy")
    table = macros()
    if len(table) < 10:
        print(f"only {len(table)} macros read from {INC}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        pre = subprocess.run(["cpp", "-P", "-x", "assembler-with-cpp", "-I", SRC, KERNELS], check=True,
                             capture_output=True, text=True).stdout
        # The preprocessed file still holds the encoding macros' definitions; the mnemonic copy drops
        # them (and keeps the kernels' own macros, e.g. block_rows, whose bodies are rewritten too).
        body = re.sub(r"\.macro\s+(\w+).*?\.endm", lambda m: "" if m[1] in table else m[0], pre, flags=re.S)
        mnem = rewrite(body, table)
        used = sorted({t[0] for n, t in table.items() if re.search(r"^\s*" + n + r"\b", body, re.M)})
        objs = {}
        for name, src in (("bytes", pre), ("mnemonics", mnem)):
            s = os.path.join(tmp, name + ".s")
            open(s, "w").write(src)
            o = os.path.join(tmp, name + ".o")
            r = subprocess.run([gas, "--longcalls", "-o", o, s], capture_output=True, text=True)
            if r.returncode != 0:
                print(f"{gas} refused the {name} version:\n{r.stderr}", file=sys.stderr)
                return 1
            objs[name] = text_bytes(objcopy, o, os.path.join(tmp, name + ".bin"))
        dis = subprocess.run([objdump, "-d", os.path.join(tmp, "bytes.o")], capture_output=True, text=True).stdout
        print(dis)
        if objs["bytes"] != objs["mnemonics"]:
            diff = [i for i, (x, y) in enumerate(zip(objs["bytes"], objs["mnemonics"])) if x != y]
            print(f"DIFFERENT: .text of {len(objs['bytes'])} / {len(objs['mnemonics'])} bytes, first differing "
                  f"offsets {diff[:8]}", file=sys.stderr)
            return 1
        print(f"equal: {len(objs['bytes'])} bytes of .text; {len(used)} PIE instructions used, each macro "
              f"call = GNU as's mnemonic: {', '.join(used)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
