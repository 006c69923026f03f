#!/usr/bin/env python3
"""CI's check of the PIE encoding macros, with Debian's clang-22 only (no Espressif binutils):
every case of golden_encodings.txt (recorded from Espressif's ISA description by
check_encodings.py --golden) is written as a macro call of src/kernels/esp32s3/pie_encodings.inc,
assembled by clang-22's Xtensa assembler and compared byte for byte; then pie_kernels.S is
preprocessed and assembled, and must define every kernel symbol.
    check_golden.py            exit 0 ok, 1 mismatch, 77 clang-22 missing (skipped)"""
import os
import shutil
import subprocess
import sys
import tempfile

import pie_isa

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SRC = os.path.join(ROOT, "src")
KERNELS = ["mcullm_pie_dot_s8", "mcullm_pie_dot_s8_ub", "mcullm_pie_i2s_codes", "mcullm_pie_q4g64_rows",
           "mcullm_pie_q8_0_rows", "mcullm_pie_q4e_rows"]
CLANG = ["clang-22", "--target=xtensa"]


def symbols(obj):
    """Global symbol names of a 32-bit little-endian ELF object."""
    import struct
    data = open(obj, "rb").read()
    shoff, = struct.unpack_from("<I", data, 0x20)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x2E)
    secs = [struct.unpack_from("<IIIIIIIIII", data, shoff + i * shentsize) for i in range(shnum)]
    names = set()
    for sec in secs:
        if sec[1] != 2:  # SHT_SYMTAB
            continue
        strtab = secs[sec[6]]
        for off in range(sec[4], sec[4] + sec[5], 16):
            name, _, _, info = struct.unpack_from("<IIIB", data, off)
            if info >> 4 == 1:  # STB_GLOBAL
                start = strtab[4] + name
                names.add(data[start:data.index(b"\0", start)].decode())
    return names


def main():
    if shutil.which("clang-22") is None:
        print("clang-22 not installed: skipped")
        return 77
    cases = []
    for line in open(os.path.join(HERE, "golden_encodings.txt")):
        if line.startswith("#") or not line.strip():
            continue
        text, hexbytes = line.split("|")
        mnemonic, _, ops = text.strip().partition(" ")
        values = [o.strip().lstrip("qa") for o in ops.split(",")] if ops.strip() else []
        cases.append((mnemonic, values, bytes.fromhex(hexbytes)))
    with tempfile.TemporaryDirectory() as d:
        src, obj = os.path.join(d, "m.s"), os.path.join(d, "m.o")
        with open(src, "w") as f:
            f.write('#include "kernels/esp32s3/pie_encodings.inc"\n.text\n')
            for m, vals, _ in cases:
                f.write("    %s %s\n" % (pie_isa.macro_name(m), ", ".join(vals)))
        subprocess.run(CLANG + ["-E", "-P", "-x", "assembler-with-cpp", "-I" + SRC, "-o", src + ".s", src], check=True)
        subprocess.run(CLANG + ["-mcpu=esp32", "-c", "-o", obj, src + ".s"], check=True)
        got = pie_isa.text_section(obj)
        want = b"".join(c[2] for c in cases)
        bad = 0
        if got != want:
            pos = 0
            for m, vals, code in cases:
                if got[pos:pos + len(code)] != code:
                    print("FAIL: %s %s -> %s, expected %s" % (m, ", ".join(vals), got[pos:pos + len(code)].hex(" "),
                                                             code.hex(" ")))
                    bad += 1
                pos += len(code)
            bad = max(bad, 1)
        kpp, kobj = os.path.join(d, "k.s"), os.path.join(d, "k.o")
        subprocess.run(CLANG + ["-E", "-P", "-x", "assembler-with-cpp", "-I" + SRC, "-o", kpp,
                                os.path.join(SRC, "kernels", "esp32s3", "pie_kernels.S")], check=True)
        subprocess.run(CLANG + ["-mcpu=esp32", "-c", "-o", kobj, kpp], check=True)
        missing = [k for k in KERNELS if k not in symbols(kobj)]
        if missing:
            print("FAIL: pie_kernels.S does not define " + ", ".join(missing))
            bad += 1
    print("%d golden PIE encodings, pie_kernels.S: %s" % (len(cases), "OK" if bad == 0 else "FAILED"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
