#!/usr/bin/python3
"""Rung 4 of docs/firmware.md: boots the ESP-IDF flash image on Espressif's QEMU fork (machine esp32s3)
and speaks the firmware's line protocol (docs/protocol.md) on the emulated UART0, then compares the
board's tokens with `mcullm run` on the PC for the same model, prompt ids and greedy sampling.

    boot-firmware.py QEMU FLASH_BIN MODEL [--prompt-ids 1,403,407] [-n 32] [--mcullm build/release/mcullm]
                     [--log-dir DIR] [--bios-dir DIR] [--timeout S]

QEMU: the fork's qemu-system-xtensa (tools/esp32s3-qemu/build-fork.sh); FLASH_BIN: the 16 MB image of
tools/esp32s3-toolchain/build-firmware.sh with the board image of MODEL at the model partition;
MODEL: the GGUF (or .bin) that image was made from, run on the PC for the reference tokens.
UART0 (the protocol, sdkconfig.qemu) is a pty; UART1 (the ESP-IDF log) goes to DIR/uart1.log.
Exit 0 when the board answers and its tokens equal the PC's; 1 otherwise (both sequences printed).
Development-time only (the fork and the Xtensa toolchain are built outside the repository).
"""
import argparse
import os
import re
import select
import subprocess
import sys
import termios
import time
import tty


def pc_tokens(mcullm, model, prompt_ids, n):
    """The tokens greedy `mcullm run` generates after the prompt (its --dump-tokens file: one
    `TOK pos input next` line per forward pass; the generated ones are `next` from the prompt's last
    position on)."""
    dump = f"/tmp/boot-firmware-{os.getpid()}.tokens"
    subprocess.run([mcullm, "run", "-m", model, "--prompt-ids", ",".join(map(str, prompt_ids)), "-n", str(n),
                    "--temp", "0", "--dump-tokens", dump, "-t", "1"], capture_output=True, check=True)
    with open(dump) as f:
        rows = [line.split() for line in f if line.startswith("TOK ")]
    os.remove(dump)
    return [int(r[3]) for r in rows if int(r[1]) >= len(prompt_ids) - 1]


def read_line(fd, buf, deadline):
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the board stayed silent")
        r, _, _ = select.select([fd], [], [], left)
        if r:
            chunk = os.read(fd, 4096)
            if not chunk:
                raise EOFError("the UART closed")
            buf += chunk
    line, _, rest = buf.partition(b"\n")
    return line.decode("ascii", "replace").strip(), rest


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("qemu"); ap.add_argument("flash"); ap.add_argument("model")
    ap.add_argument("--prompt-ids", default="1,403,407")
    ap.add_argument("-n", type=int, default=32)
    ap.add_argument("--mcullm", default=os.path.join(os.path.dirname(__file__), "../../build/release/mcullm"))
    ap.add_argument("--log-dir", default=".")
    ap.add_argument("--bios-dir", help="the fork's ROM files (default: QEMU's ../src/pc-bios, as build-fork.sh lays it out)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds for boot and for the whole reply")
    a = ap.parse_args()
    prompt = [int(x) for x in a.prompt_ids.split(",")]
    expect = pc_tokens(a.mcullm, a.model, prompt, a.n)
    os.makedirs(a.log_dir, exist_ok=True)
    uart1 = os.path.join(a.log_dir, "uart1.log")
    # The S3 ROM image (esp32s3-rom.bin) is found through -L; without it the emulator starts nowhere.
    bios = a.bios_dir or os.path.join(os.path.dirname(os.path.abspath(a.qemu)), "..", "src", "pc-bios")
    qemu = subprocess.Popen([a.qemu, "-L", bios, "-M", "esp32s3", "-m", "8M", "-display", "none", "-monitor", "none",
                             "-drive", f"file={a.flash},if=mtd,format=raw",
                             "-serial", "pty", "-serial", f"file:{uart1}"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        pts = None
        for line in qemu.stdout:  # "char device redirected to /dev/pts/N (label serial0)"
            m = re.search(r"redirected to (/dev/pts/\d+) \(label serial0\)", line)
            if m:
                pts = m.group(1)
                break
        if not pts:
            print("boot-firmware: QEMU printed no pty for serial0", file=sys.stderr)
            return 1
        fd = os.open(pts, os.O_RDWR | os.O_NOCTTY)
        tty.setraw(fd)
        termios.tcflush(fd, termios.TCIOFLUSH)
        start = time.monotonic()
        # The firmware reads a line when it is ready; send the G line again until the board answers.
        # greedy (temp 0, top-k 0), seed 1, flags 0: stop at an end token as `mcullm run` does
        g = f"G {a.n} 0 0 1 0 {len(prompt)} {' '.join(map(str, prompt))}\n".encode()
        buf = b""
        got, ms = [], None
        deadline = start + a.timeout
        os.write(fd, g)
        while True:
            try:
                line, buf = read_line(fd, buf, min(deadline, time.monotonic() + 20))
            except TimeoutError:
                if time.monotonic() >= deadline:
                    raise
                if not got:
                    os.write(fd, g)
                continue
            if not line:
                continue
            print(f"uart0: {line}")
            if line.startswith("X"):
                # A line sent while the firmware was still starting may arrive cut: send it again.
                if "could not start" in line or got:
                    print(f"boot-firmware: the board answered {line}", file=sys.stderr)
                    return 1
                time.sleep(2); os.write(fd, g)
                continue
            if line.startswith("T "):
                got.append(int(line.split()[1]))
            if line.startswith("E "):
                ms = line.split()[2]
                break
        print(f"board: {len(got)} tokens, {ms} ms per token (emulated), {time.monotonic() - start:.0f} s from boot")
        print(f"board: {got}")
        print(f"pc:    {expect}")
        same = got == expect
        print("tokens equal" if same else "tokens DIFFER")
        return 0 if same else 1
    finally:
        qemu.kill()
        qemu.wait()


if __name__ == "__main__":
    sys.exit(main())
