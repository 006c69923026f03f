#!/usr/bin/env python3
"""Checks src/kernels/esp32s3/pie_encodings.inc against Espressif's ESP32-S3 ISA description.

For every macro, N random operand sets (plus the extremes of every operand) are written both as
macro calls and as real mnemonics. The macro calls are assembled by ASM_MACRO (clang-22's Xtensa
assembler by default: the assembler the kernels are built with); the mnemonics by the
xtensa-esp32s3-elf GNU as. The check passes when the bytes are identical and when that binutils'
objdump disassembles every macro-emitted instruction back to the same mnemonic and operands.
    check_encodings.py AS OBJDUMP [N] [--golden FILE]
With --golden, the checked cases are written to FILE (mnemonic and operands, then the bytes GNU as
gave): the record that CI's assemble check (check_golden.py) compares clang-22 + macros against."""
import os
import random
import re
import subprocess
import sys
import tempfile

import pie_isa

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INC = os.path.join(ROOT, "src", "kernels", "esp32s3", "pie_encodings.inc")
CLANG = ["clang-22", "--target=xtensa", "-mcpu=esp32", "-c", "-x", "assembler"]
RANGES = {"q": (0, 7), "a": (0, 15)}


def imm_range(gas, mnemonic, index):
    """The i16 operand's range, found by assembling (multiples of 16)."""
    kinds = pie_isa.INSNS[mnemonic]
    def ok(v):
        values = [0] * len(kinds)
        values[index] = v
        return pie_isa.assemble(gas, [pie_isa.insn_text(mnemonic, values)], ["--no-transform"]) is not None
    hi = 16
    while ok(hi * 2):
        hi *= 2
    hi = hi * 2 - 16
    lo = -16
    while ok(lo * 2):
        lo *= 2
    assert ok(hi) and ok(lo) and not ok(hi + 16) and not ok(lo - 16), (mnemonic, lo, hi)
    return lo, hi


def samples(gas, mnemonic, n, rng):
    kinds = pie_isa.INSNS[mnemonic]
    ranges = [RANGES.get(k) or imm_range(gas, mnemonic, i) for i, k in enumerate(kinds)]
    out = [[r[0] for r in ranges], [r[1] for r in ranges]] if kinds else [[]]
    for _ in range(n if kinds else 0):
        out.append([rng.randrange(r[0], r[1] + 1, 16 if k == "i16" else 1) for k, r in zip(kinds, ranges)])
    return out


def signed_hex(m):
    v = int(m.group(0), 16)
    return str(v - (1 << 32) if v >= 1 << 31 else v)


def normalise(text):
    """objdump prints immediates in hex (negative ones as 32-bit values): back to signed decimal."""
    text = re.sub(r"0x[0-9a-f]+", signed_hex, text)
    return re.sub(r"\s+", " ", text.replace(",", ", ")).replace(" ,", ",").strip()


def main():
    args = sys.argv[1:]
    golden = None
    if "--golden" in args:
        golden = args[args.index("--golden") + 1]
        del args[args.index("--golden"):args.index("--golden") + 2]
    gas, objdump = [args[0]], args[1]
    n = int(args[2]) if len(args) > 2 else 40
    rng = random.Random(1234)
    cases = []
    for mnemonic in pie_isa.INSNS:
        for values in samples(gas, mnemonic, n, rng):
            cases.append((mnemonic, values))
    macro_lines = ['.include "%s"' % INC, ".text"]
    macro_lines += ["    %s %s" % (pie_isa.macro_name(m), ", ".join(str(v) for v in vals)) for m, vals in cases]
    real_lines = [pie_isa.insn_text(m, vals) for m, vals in cases]
    expected = pie_isa.assemble(gas, real_lines, ["--no-transform"])
    with tempfile.TemporaryDirectory() as d:
        src, obj = os.path.join(d, "m.s"), os.path.join(d, "m.o")
        with open(src, "w") as f:
            f.write("\n".join(macro_lines) + "\n")
        subprocess.run(CLANG + [src, "-o", obj], check=True)
        got = pie_isa.text_section(obj)
        dis = subprocess.run([objdump, "-d", obj], capture_output=True, text=True, check=True).stdout
    insns = [normalise(line.split("\t", 2)[2]) for line in dis.splitlines()
             if re.match(r"^\s+[0-9a-f]+:\t", line) and line.count("\t") >= 2]
    bad = 0
    if got != expected:
        print("FAIL: clang-22 + macros and GNU as + mnemonics give different bytes")
        bad += 1
    if len(insns) != len(cases):
        print("FAIL: objdump shows %d instructions, expected %d" % (len(insns), len(cases)))
        bad += 1
    for (m, vals), text in zip(cases, insns):
        want = normalise(pie_isa.insn_text(m, vals))
        if text != want:
            print("FAIL: %s disassembles as %s" % (want, text))
            bad += 1
    print("%d instructions of %d kinds: %s" % (len(cases), len(pie_isa.INSNS), "OK" if bad == 0 else "%d FAILURES" % bad))
    if golden and bad == 0:
        with open(golden, "w") as f:
            f.write("# PIE encodings as GNU as for xtensa-esp32s3 (Espressif's ISA description) assembles them;\n"
                    "# written by tools/esp32s3-pie/check_encodings.py --golden after its objdump check passed.\n")
            pos = 0
            for m, vals in cases:
                size = len(pie_isa.assemble(gas, [pie_isa.insn_text(m, [0] * len(vals))], ["--no-transform"]))
                f.write("%s | %s\n" % (pie_isa.insn_text(m, vals), expected[pos:pos + size].hex(" ")))
                pos += size
            assert pos == len(expected)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
