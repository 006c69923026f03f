// A stand-in ESP32-S3 at the far end of a serial port, for the flashing panel's browser test
// (flash_test.mjs). It models what esptool-js relies on, from Espressif's serial-protocol docs:
//  - the auto-reset circuit of a USB-UART bridge: EN is held low while RTS is asserted and DTR is
//    not; IO0 is low while DTR is asserted and RTS is not; IO0 is sampled 20 ms after EN rises (the
//    EN capacitor), giving the ROM loader (download mode) or the flashed firmware;
//  - the ROM loader: SLIP frames, SYNC (8 answers), READ_REG / WRITE_REG over a register file with
//    the SPI flash peripheral's user command (RDID answers the flash id), GET_SECURITY_INFO with the
//    chip id (ESP32-S3: 9), MEM_BEGIN / MEM_DATA / MEM_END (a stub upload: once started it says
//    "OHAI" and answers as the stub does), CHANGE_BAUDRATE (bytes at another baud are lost),
//    FLASH_BEGIN / DATA / END and their deflated forms (checksums, sequence numbers, sizes checked;
//    erases in 4 KB sectors), SPI_FLASH_MD5 (32 hex digits from the ROM, 16 bytes from the stub);
//    4 status bytes from the ROM, 2 from the stub; an unknown command gets status 1, error 5;
//  - the flashed firmware: a boot log, then the line protocol (docs/protocol.md) if the flash holds
//    an app image at 0x10000 and a board image ("MCUIMAGE") at the model partition; silence if not.
// Knobs for hostile cases: chip ('esp32s3', 'esp32c3', 'esp32'), silent, failFlashData ({file, seq}),
// dataDelayMs, flashBytes.
import crypto from 'node:crypto';
import zlib from 'node:zlib';

const SLIP_END = 0xc0, SLIP_ESC = 0xdb;
const ROM_BAUD = 115200, FIRMWARE_BAUD = 115200;
const SPI_BASE = 0x60002000, SPI_CMD = SPI_BASE, SPI_USR2 = SPI_BASE + 0x20, SPI_W0 = SPI_BASE + 0x58, SPI_CMD_USR = 1 << 18;
const SECTOR = 4096;
const CHIP_MAGIC_REG = 0x40001000;
// What the other chips' ROMs answer, for the wrong-chip cases: GET_SECURITY_INFO's chip id (the
// ESP32's ROM lacks the command) and the magic word at CHIP_MAGIC_REG.
const CHIPS = { esp32s3: { id: 9, magic: 0x9 }, esp32c3: { id: 5, magic: 0x1b31506f }, esp32: { id: null, magic: 0x00f01d83 } };

export function slipEncode(bytes) {
  const out = [SLIP_END];
  for (const b of bytes) {
    if (b === SLIP_END) out.push(SLIP_ESC, 0xdc);
    else if (b === SLIP_ESC) out.push(SLIP_ESC, 0xdd);
    else out.push(b);
  }
  out.push(SLIP_END);
  return Buffer.from(out);
}

export function checksum(bytes) {
  let c = 0xef;
  for (const b of bytes) c ^= b;
  return c;
}

export class FakeEsp32s3 {
  // send(bytes): deliver bytes to the host's end of the port.
  constructor({ send, flashBytes = 8 << 20, chip = 'esp32s3', silent = false, failFlashData = null, dataDelayMs = 0, modelOffset = -1 }) {
    Object.assign(this, { send, chip, silent, failFlashData, dataDelayMs, modelOffset });
    this.flash = Buffer.alloc(flashBytes, 0xff);
    this.flashId = 0xef | (0x40 << 8) | ((Math.log2(flashBytes)) << 16);  // Winbond-like RDID: capacity 2^n bytes
    this.mode = 'app';          // 'reset' | 'rom' | 'stub' | 'app'
    this.portOpen = false;
    this.portBaud = 0;
    this.chipBaud = FIRMWARE_BAUD;
    this.dtr = false;
    this.rts = false;
    this.rx = [];               // a SLIP frame being received
    this.inFrame = false;
    this.escape = false;
    this.line = '';
    this.regs = new Map();
    this.write = null;          // the flash write in progress
    this.fileIndex = -1;
    this.commands = [];         // every command's op, in order
    this.md5Checked = [];       // [offset, size] of each SPI_FLASH_MD5
    this.requests = [];         // line-protocol lines the firmware received
    this.events = [];           // 'reset:rom', 'reset:app', 'open:115200', ...
  }

  // ---- the port's side ----
  open(baud) { this.portOpen = true; this.portBaud = baud; this.events.push('open:' + baud); }
  close() { this.portOpen = false; this.events.push('close'); }
  signals(s) {
    const enLowBefore = this.rts && !this.dtr;
    if (s.dataTerminalReady !== undefined) this.dtr = s.dataTerminalReady;
    if (s.requestToSend !== undefined) this.rts = s.requestToSend;
    const enLow = this.rts && !this.dtr;
    if (enLow && !enLowBefore) this.mode = 'reset';
    if (!enLow && enLowBefore) setTimeout(() => this.boot(this.dtr && !this.rts), 20);
  }

  boot(download) {
    if (this.mode !== 'reset') return;  // held in reset again meanwhile
    this.rx = [];
    this.inFrame = false;
    this.line = '';
    this.write = null;
    if (download) {
      this.mode = 'rom';
      this.chipBaud = ROM_BAUD;
      this.events.push('reset:rom');
      this.emit(Buffer.from('ESP-ROM:esp32s3-20210327\r\nrst:0x1 (POWERON),boot:0x0 (DOWNLOAD(USB/UART0))\r\nwaiting for download\r\n'));
    } else {
      this.mode = 'app';
      this.chipBaud = FIRMWARE_BAUD;
      this.events.push('reset:app');
      this.emit(Buffer.from('ESP-ROM:esp32s3-20210327\r\nrst:0x1 (POWERON),boot:0x8 (SPI_FAST_FLASH_BOOT)\r\n'));
      if (this.firmwareValid()) this.emit(Buffer.from('I (312) mcullm: model mapped, line protocol on UART0\r\n'));
      else this.emit(Buffer.from('invalid header: 0xffffffff\r\n'));
    }
  }

  firmwareValid() {
    return this.flash[0] === 0xe9 && this.flash[0x10000] === 0xe9 && this.modelOffset >= 0 &&
           this.flash.subarray(this.modelOffset, this.modelOffset + 8).toString('latin1') === 'MCUIMAGE';
  }

  emit(bytes) {
    if (this.silent || !this.portOpen || this.portBaud !== this.chipBaud) return;  // nobody listening, or garbled
    this.send(bytes);
  }

  // Bytes from the host.
  async receive(bytes) {
    if (this.silent || this.mode === 'reset' || this.portBaud !== this.chipBaud) return;
    if (this.mode === 'app') return this.receiveLines(bytes);
    for (const b of bytes) {
      if (!this.inFrame) { if (b === SLIP_END) { this.inFrame = true; this.rx = []; } continue; }
      if (this.escape) { this.rx.push(b === 0xdc ? SLIP_END : SLIP_ESC); this.escape = false; continue; }
      if (b === SLIP_ESC) { this.escape = true; continue; }
      if (b !== SLIP_END) { this.rx.push(b); continue; }
      this.inFrame = false;
      if (this.rx.length) await this.command(Buffer.from(this.rx));
    }
  }

  // ---- the loader ----
  reply(op, value, data = Buffer.alloc(0), status = 0, error = 0) {
    const statusBytes = this.mode === 'stub' ? [status, error] : [status, error, 0, 0];
    const body = Buffer.concat([data, Buffer.from(statusBytes)]);
    const head = Buffer.alloc(8);
    head[0] = 1;
    head[1] = op;
    head.writeUInt16LE(body.length, 2);
    head.writeUInt32LE(value >>> 0, 4);
    this.emit(slipEncode(Buffer.concat([head, body])));
  }

  async command(p) {
    if (p.length < 8 || p[0] !== 0) return;  // not a request
    const op = p[1], size = p.readUInt16LE(2), chk = p.readUInt32LE(4), d = p.subarray(8);
    if (d.length !== size) return this.reply(op, 0, undefined, 1, 0xc0);  // a malformed frame
    this.commands.push(op);
    const u32 = (i) => d.readUInt32LE(4 * i);
    const fail = (error) => this.reply(op, 0, undefined, 1, error);
    switch (op) {
      case 0x08:  // SYNC
        if (d.length !== 36 || d.readUInt32BE(0) !== 0x07071220 || d.subarray(4).some((b) => b !== 0x55)) return fail(0x05);
        for (let i = 0; i < (this.mode === 'stub' ? 1 : 8); i++) this.reply(op, this.mode === 'stub' ? 0 : 0x20120707);
        return;
      case 0x0a:  // READ_REG
        return this.reply(op, u32(0) === CHIP_MAGIC_REG ? CHIPS[this.chip].magic : this.regs.get(u32(0)) ?? 0);
      case 0x09: {  // WRITE_REG (addr, value, mask, delay)
        const [addr, value, mask] = [u32(0), u32(1), u32(2)];
        this.regs.set(addr, (((this.regs.get(addr) ?? 0) & ~mask) | (value & mask)) >>> 0);
        if (addr === SPI_CMD && (value & SPI_CMD_USR)) {  // the SPI user command runs at once
          if (((this.regs.get(SPI_USR2) ?? 0) & 0xff) === 0x9f) this.regs.set(SPI_W0, this.flashId);
          this.regs.set(SPI_CMD, 0);
        }
        return this.reply(op, 0);
      }
      case 0x14: {  // GET_SECURITY_INFO: flags, crypt count, key purposes, chip id, API version
        if (CHIPS[this.chip].id === null) return fail(0x05);
        const info = Buffer.alloc(20);
        info.writeUInt32LE(CHIPS[this.chip].id, 12);
        return this.reply(op, 0, info);
      }
      case 0x05:  // MEM_BEGIN (size, blocks, block size, address)
        if (d.length !== 16) return fail(0x05);
        this.mem = { blocks: u32(1), seq: 0 };
        return this.reply(op, 0);
      case 0x07:  // MEM_DATA
        if (!this.mem || u32(1) !== this.mem.seq || u32(0) !== d.length - 16 || checksum(d.subarray(16)) !== chk) return fail(0x07);
        this.mem.seq++;
        return this.reply(op, 0);
      case 0x06:  // MEM_END (no-entry flag, entry)
        this.reply(op, 0);
        if (u32(0) === 0 && this.mode === 'rom') {  // the stub starts
          this.mode = 'stub';
          setTimeout(() => this.emit(slipEncode(Buffer.from('OHAI'))), 5);
        }
        return;
      case 0x0f: {  // CHANGE_BAUDRATE: answered at the old speed
        this.reply(op, 0);
        this.chipBaud = u32(0);
        return;
      }
      case 0x02: case 0x10: {  // FLASH_BEGIN / FLASH_DEFL_BEGIN (size, blocks, block size, offset[, encrypted])
        if (d.length !== (this.mode === 'stub' ? 16 : 20)) return fail(0x05);
        const [bytes, blocks, blockSize, offset] = [u32(0), u32(1), u32(2), u32(3)];
        if (offset % SECTOR || offset + bytes > this.flash.length) return fail(0x06);
        this.flash.fill(0xff, offset, Math.min(this.flash.length, offset + Math.ceil(bytes / SECTOR) * SECTOR));
        this.write = { deflated: op === 0x10, offset, bytes, blocks, blockSize, seq: 0, chunks: [] };
        this.fileIndex++;
        return this.reply(op, 0);
      }
      case 0x03: case 0x11: {  // FLASH_DATA / FLASH_DEFL_DATA (length, seq, 0, 0, data)
        const w = this.write;
        if (!w || w.deflated !== (op === 0x11)) return fail(0x07);
        if (this.failFlashData && this.failFlashData.file === this.fileIndex && this.failFlashData.seq === u32(1)) return fail(0xc1);
        if (u32(1) !== w.seq || u32(0) !== d.length - 16 || checksum(d.subarray(16)) !== chk) return fail(0xc1);
        if (this.dataDelayMs) await new Promise((r) => setTimeout(r, this.dataDelayMs));
        w.chunks.push(Buffer.from(d.subarray(16)));
        w.seq++;
        if (w.seq === w.blocks) this.finishWrite();
        return this.reply(op, 0);
      }
      case 0x04: case 0x12:  // FLASH_END / FLASH_DEFL_END
        if (this.write) return fail(0xc4);  // blocks missing
        return this.reply(op, 0);
      case 0x13: {  // SPI_FLASH_MD5 (offset, size, 0, 0)
        const [offset, bytes] = [u32(0), u32(1)];
        if (offset + bytes > this.flash.length) return fail(0x06);
        this.md5Checked.push([offset, bytes]);
        const md5 = crypto.createHash('md5').update(this.flash.subarray(offset, offset + bytes)).digest();
        return this.reply(op, 0, this.mode === 'stub' ? md5 : Buffer.from(md5.toString('hex')));
      }
      default:
        return fail(0x05);
    }
  }

  finishWrite() {
    const w = this.write;
    this.write = null;
    let data = Buffer.concat(w.chunks);
    if (w.deflated) data = zlib.inflateSync(data);
    if (!w.deflated) data = data.subarray(0, w.bytes);  // the last block is padded with 0xff
    if (data.length > w.bytes) throw new Error(`fake ESP32-S3: ${data.length} bytes written after announcing ${w.bytes}`);
    data.copy(this.flash, w.offset);
  }

  // ---- the firmware: the line protocol ----
  receiveLines(bytes) {
    this.line += Buffer.from(bytes).toString('latin1');
    let nl;
    while ((nl = this.line.indexOf('\n')) >= 0) {
      const line = this.line.slice(0, nl).replace(/\r$/, '');
      this.line = this.line.slice(nl + 1);
      if (!line.trim() || !this.firmwareValid()) continue;
      this.requests.push(line);
      const f = line.trim().split(/ +/).map(Number);
      if (line[0] !== 'G' || f.length < 8 || f[6] !== f.length - 7) { this.emit(Buffer.from('X malformed line\n')); continue; }
      // The stand-in "model": token i is (last prompt id * 7 + i) % 500, 1 ms each.
      let out = 'P 2.50\n';
      for (let i = 1; i <= f[1]; i++) out += `T ${(f[f.length - 1] * 7 + i) % 500} 1000\n`;
      this.emit(Buffer.from(out + `E ${f[1]} ${f[1] ? '1.00' : '0.00'}\n`));
    }
  }
}
