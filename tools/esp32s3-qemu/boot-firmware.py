#!/usr/bin/python3
"""Rung 4 of docs/firmware.md: boots the ESP-IDF flash image on Espressif's QEMU fork (machine esp32s3)
and speaks the firmware's line protocol (docs/protocol.md) on the emulated UART0, then compares the
board's tokens with `mcullm run` on the PC for the same model, prompt ids and greedy sampling.

    boot-firmware.py QEMU FLASH_BIN MODEL [-z TOK] [--image IMG] [--bridge] [--prompt-ids 1,403,407] [-n 32]
                     [--temp T --top-k K --seed S] [--mcullm build/release/mcullm]
                     [--log-dir DIR] [--bios-dir DIR] [--timeout S]

QEMU: the fork's qemu-system-xtensa (tools/esp32s3-qemu/build-fork.sh); FLASH_BIN: the 16 MB image of
tools/esp32s3-toolchain/build-firmware.sh with the board image of MODEL at the model partition;
MODEL: the GGUF (or .bin) that image was made from, run on the PC for the reference tokens.
--image IMG: boot a copy of FLASH_BIN (in DIR) with IMG written over the model partition instead, so one
firmware build serves every model. --temp/--top-k/--seed: the board's sampler (temperature and top-k;
the PC runs with top-p 1, min-p 0 and the same seed); the default is greedy.
UART0 (the protocol, sdkconfig.qemu) is a pty; UART1 (the ESP-IDF log) goes to DIR/uart1.log.
Exit 0 when the board answers and its tokens equal the PC's; 1 otherwise (both sequences printed).
Development-time only (the fork and the Xtensa toolchain are built outside the repository).
"""
import argparse
import json
import os
import re
import select
import subprocess
import sys
import termios
import threading
import time
import tty
import urllib.request


def model_partition():
    """Offset and size of the `model` partition, from the firmware's own partitions.csv."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../firmware/esp32s3/partitions.csv")
    for line in open(path):
        fields = [f.strip() for f in line.split("#")[0].split(",")]
        if fields[0] == "model":
            return int(fields[3], 0), int(fields[4], 0)
    raise SystemExit(f"boot-firmware: no model partition in {path}")


def flash_with_image(flash, image, out):
    """A copy of the flash image with `image` in the model partition (the rest of the partition erased)."""
    data = bytearray(open(flash, "rb").read())
    img = open(image, "rb").read()
    off, size = model_partition()
    if len(data) < off + size:
        raise SystemExit(f"boot-firmware: {flash} is {len(data)} bytes; the partition table needs {off + size}")
    if len(img) > size:
        raise SystemExit(f"boot-firmware: {image} is {len(img)} bytes; the model partition holds {size}")
    data[off:off + size] = b"\xff" * size
    data[off:off + len(img)] = img
    with open(out, "wb") as f:
        f.write(data)
    return out


def pc_tokens(mcullm, model, tok, prompt_ids, n, temp, top_k, seed):
    """The tokens greedy `mcullm run` generates after the prompt (its --dump-tokens file: one
    `TOK pos input next` line per forward pass; the generated ones are `next` from the prompt's last
    position on)."""
    dump = f"/tmp/boot-firmware-{os.getpid()}.tokens"
    subprocess.run([mcullm, "run", "-m", model, *tok, "--prompt-ids", ",".join(map(str, prompt_ids)), "-n", str(n),
                    "--temp", str(temp), "--top-k", str(top_k), "--top-p", "1", "--min-p", "0", "-s", str(seed),
                    "--dump-tokens", dump, "-t", "1", "-q"], capture_output=True, check=True)
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


def wait_ready(fd, deadline):
    """Sends a one-token probe (`G 1 0 0 1 0 1 1`) every 20 s until the board answers it to the end: a
    line sent while the firmware is still starting is lost or cut. The answers to earlier probes are then
    flushed; returns the (empty) read buffer."""
    probe = b"G 1 0 0 1 0 1 1\n"
    buf = b""
    os.write(fd, probe)
    while True:
        try:
            line, buf = read_line(fd, buf, min(deadline, time.monotonic() + 20))
        except TimeoutError:
            if time.monotonic() >= deadline:
                raise
            os.write(fd, probe)
            continue
        if line:
            print(f"uart0 (probe): {line}")
        if "could not start" in line:
            raise SystemExit(f"boot-firmware: the board answered {line}")
        if line.startswith("E "):
            time.sleep(1)  # answers to earlier probes still on their way
            termios.tcflush(fd, termios.TCIFLUSH)
            return b""


def direct_tokens(a, fd, buf, prompt, deadline):
    """One G line (flags 0: stop at an end token as `mcullm run` does); the T ids and E's ms per token."""
    g = f"G {a.n} {round(a.temp * 1000)} {a.top_k} {a.seed} 0 {len(prompt)} {' '.join(map(str, prompt))}\n"
    os.write(fd, g.encode())
    got = []
    while True:
        line, buf = read_line(fd, buf, deadline)
        if not line:
            continue
        print(f"uart0: {line}")
        if line.startswith("X"):
            raise SystemExit(f"boot-firmware: the board answered {line}")
        if line.startswith("T "):
            got.append(int(line.split()[1]))
        if line.startswith("E "):
            return got, line.split()[2]


def bridge_tokens(a, pts, prompt):
    """`mcullm serve --bridge PTS`: one streamed /completion with the prompt as token ids; the tokens of
    its events, its text printed as it streams."""
    srv = subprocess.Popen([a.mcullm, "serve", "--bridge", pts, "-m", a.model, *a.tok, "--port", "0",
                            "--bridge-timeout", str(int(a.timeout))],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        port = None
        for line in srv.stderr:
            m = re.search(r"127\.0\.0\.1:(\d+)", line)
            if m:
                port = int(m.group(1))
                break
        if port is None:
            raise SystemExit("boot-firmware: serve --bridge printed no port")
        body = json.dumps({"prompt": prompt, "n_predict": a.n, "temperature": a.temp, "top_k": a.top_k,
                           "top_p": 1, "min_p": 0, "seed": a.seed, "stream": True}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", data=body,
                                     headers={"Content-Type": "application/json"})
        got, ms = [], None
        with urllib.request.urlopen(req, timeout=a.timeout) as r:
            for raw in r:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                ev = json.loads(line[6:])
                got += ev.get("tokens", [])
                sys.stdout.write(ev.get("content", "")); sys.stdout.flush()
                if ev.get("stop") and "timings" in ev:
                    ms = f"{ev['timings'].get('predicted_per_token_ms', 0):.2f}"
        print()
        return got, ms
    finally:
        srv.terminate()
        srv.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("qemu"); ap.add_argument("flash"); ap.add_argument("model")
    ap.add_argument("--prompt-ids", default="1,403,407")
    ap.add_argument("-n", type=int, default=32)
    ap.add_argument("--bridge", action="store_true", help="generate through `mcullm serve --bridge` on the UART")
    ap.add_argument("-z", dest="tokenizer", help="tokenizer for a model without one (as `mcullm run -z`)")
    ap.add_argument("--image", help="board image to write over the model partition of a copy of FLASH_BIN")
    ap.add_argument("--temp", type=float, default=0.0)
    ap.add_argument("--top-k", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1, help="1..4294967295")
    ap.add_argument("--mcullm", default=os.path.join(os.path.dirname(__file__), "../../build/release/mcullm"))
    ap.add_argument("--log-dir", default=".")
    ap.add_argument("--bios-dir", help="the fork's ROM files (default: QEMU's ../src/pc-bios, as build-fork.sh lays it out)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds for boot and for the whole reply")
    a = ap.parse_args()
    prompt = [int(x) for x in a.prompt_ids.split(",")]
    a.tok = ["-z", a.tokenizer] if a.tokenizer else []
    if not 1 <= a.seed <= 0xFFFFFFFF or a.top_k < 0 or not 0 <= a.temp <= 100:
        ap.error("--seed is 1..4294967295, --top-k >= 0, --temp 0..100")
    expect = pc_tokens(a.mcullm, a.model, a.tok, prompt, a.n, a.temp, a.top_k, a.seed)
    os.makedirs(a.log_dir, exist_ok=True)
    if a.image:
        a.flash = flash_with_image(a.flash, a.image, os.path.join(a.log_dir, "flash.bin"))
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
        # QEMU's own messages go on to DIR/qemu.log: a full pipe would stop the emulator.
        def drain(out, path=os.path.join(a.log_dir, "qemu.log")):
            with open(path, "w") as log:
                for line in out:
                    log.write(line)
        threading.Thread(target=drain, args=(qemu.stdout,), daemon=True).start()
        fd = os.open(pts, os.O_RDWR | os.O_NOCTTY)
        tty.setraw(fd)
        termios.tcflush(fd, termios.TCIOFLUSH)
        start = time.monotonic()
        buf = wait_ready(fd, start + a.timeout)
        print(f"board: ready {time.monotonic() - start:.0f} s after QEMU started")
        t0 = time.monotonic()
        if a.bridge:
            os.close(fd)  # the bridge opens the pty itself
            got, ms = bridge_tokens(a, pts, prompt)
        else:
            got, ms = direct_tokens(a, fd, buf, prompt, t0 + a.timeout)
        print(f"board: {len(got)} tokens, {ms} ms per token (emulated), {time.monotonic() - t0:.0f} s wall")
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
