// The flashing panel (web/flash.js) in headless Chromium against a stand-in ESP32-S3 (fake_esp32s3.mjs)
// behind a stand-in navigator.serial, with the real esptool-js (npm, served by `mcullm serve
// --vendor-dir`). Checks:
//  1. Property, over random layouts (partition tables, file sizes, bauds, with and without ESP-IDF's
//     flasher_args.json, a model-only flash over old firmware): every file lands at its offset, byte
//     for byte; bytes outside the written sectors are untouched; the loader checked each file's MD5;
//     the board was reset into the firmware; the page then speaks the line protocol on the same port
//     (its probe, then a Generate with token ids gives the fake firmware's tokens).
//  2. Hostile: a model larger than its partition, a corrupt or foreign model file, no port chosen,
//     a busy port, a silent port, another chip (ESP32-C3), a FLASH_DATA error reply, Cancel while
//     writing; each gives its message, and the page flashes the right board afterwards.
// Usage: node flash_test.mjs MCULLM MODEL CHROMIUM WORK_DIR VENDOR_DIR (run.sh sets it up).
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { FakeEsp32s3 } from './fake_esp32s3.mjs';
import { startServer as startServerOf } from './serve.mjs';

const [bin, model, chromiumPath, work, vendor] = process.argv.slice(2).map((p, i) => (i === 2 ? p : path.resolve(p)));
const { chromium } = createRequire(path.join(work, 'package.json'))('playwright-core');
const children = [];
let step = 'starting';  // named in a timeout's message
const deadline = setTimeout(() => fail(new Error('the flashing test took over 150 s (at: ' + step + ')')), 150000);

function fail(e) {
  console.error('web_flash_browser: FAILED:', e && e.stack ? e.stack : e);
  for (const c of children) c.kill('SIGKILL');
  process.exit(1);
}

function startServer() {
  return startServerOf(bin, model, ['--vendor-dir', vendor], children);
}

// ---- files: a seeded generator, ESP-IDF's partition-table format, board images ----

function rng(seed) {
  let s = BigInt(seed) | 1n;
  return (n) => {  // xorshift64*: an integer in [0, n)
    s ^= s >> 12n; s ^= (s << 25n) & 0xffffffffffffffffn; s ^= s >> 27n;
    return Number(((s * 0x2545f4914f6cdd1dn) & 0xffffffffffffffffn) >> 11n) % n;
  };
}
const align = (n, a) => Math.ceil(n / a) * a;
const bytes = (n, r) => Buffer.from(Array.from({ length: n }, () => r(256)));

// 32-byte entries (0xAA 0x50, type, subtype, offset, size, label[16], flags), an MD5 entry, 0xFF.
function partitionTable(parts) {
  const out = Buffer.alloc(0xc00, 0xff);
  let at = 0;
  for (const p of parts) {
    out.fill(0, at, at + 32);
    out[at] = 0xaa; out[at + 1] = 0x50; out[at + 2] = p.type; out[at + 3] = p.subtype;
    out.writeUInt32LE(p.offset, at + 4);
    out.writeUInt32LE(p.size, at + 8);
    out.write(p.label, at + 12, 'latin1');
    at += 32;
  }
  out[at] = 0xeb; out[at + 1] = 0xeb;
  crypto.createHash('md5').update(out.subarray(0, at)).digest().copy(out, at + 16);
  return out;
}

// An app image starts with ESP-IDF's magic byte 0xE9; the rest is noise here.
function appImage(n, r) {
  const b = bytes(n, r);
  b[0] = 0xe9;
  return b;
}

function syntheticBoardImage(n, r) {
  const b = bytes(n, r);
  b.write('MCUIMAGE', 0, 'latin1');
  b.writeUInt32LE(1, 8);
  b.writeBigUInt64LE(BigInt(n), 16);
  b.writeUInt32LE(zlib.crc32(b.subarray(16)), 12);
  return b;
}

// A random layout: nvs, phy_init, the factory app at 0x10000, the model partition after it.
function layout(r, modelBytes) {
  const appSize = align(0x50000 + r(0x100000), 0x10000);  // room for the app (at most 0x28000 bytes here)
  const modelOffset = align(0x10000 + appSize + r(0x80000), 0x10000);
  const modelSize = align(modelBytes + r(0x100000), 0x1000);
  const parts = [
    { label: 'nvs', type: 1, subtype: 2, offset: 0x9000, size: 0x6000 },
    { label: 'phy_init', type: 1, subtype: 1, offset: 0xf000, size: 0x1000 },
    { label: 'factory', type: 0, subtype: 0, offset: 0x10000, size: appSize },
    { label: 'model', type: 1, subtype: 0x40, offset: modelOffset, size: modelSize },
  ];
  return { parts, appSize, modelOffset, modelSize, table: partitionTable(parts) };
}

// firmware/esp32s3/partitions.csv (ESP-IDF's CSV: name, type, subtype, offset, size, flags) as
// partition entries, or null when the firmware is not in the tree. Explicit offsets only.
const SUBTYPES = { app: { factory: 0x00, test: 0x20 }, data: { ota: 0x00, phy: 0x01, nvs: 0x02, coredump: 0x03, nvs_keys: 0x04, efuse: 0x05, fat: 0x81, spiffs: 0x82, littlefs: 0x83 } };
function firmwarePartitions(csvPath) {
  if (!fs.existsSync(csvPath)) return null;
  const num = (t) => {
    const m = /^(0x[0-9a-f]+|\d+)([KM]?)$/i.exec(t);
    assert.ok(m, `${csvPath}: "${t}" is not an offset or size the test reads`);
    return Number(m[1]) * { '': 1, K: 1024, M: 1 << 20 }[m[2].toUpperCase()];
  };
  return fs.readFileSync(csvPath, 'utf8').split('\n').map((l) => l.replace(/#.*/, '').trim()).filter(Boolean).map((l) => {
    const [label, type, subtype, offset, size] = l.split(',').map((f) => f.trim());
    const sub = /^ota_(\d+)$/.exec(subtype) ? 0x10 + Number(subtype.slice(4)) : SUBTYPES[type]?.[subtype] ?? num(subtype);
    return { label, type: type === 'app' ? 0 : type === 'data' ? 1 : num(type), subtype: sub, offset: num(offset), size: num(size) };
  });
}

// ---- the page with a stand-in port ----

// Runs in the page: a SerialPort whose bytes and control lines go to window.__espHost (node).
function installFakePort() {
  // Bytes cross to node as latin1 strings (much faster than arrays of numbers).
  const latin1 = (bytes) => {
    let out = '';
    for (let i = 0; i < bytes.length; i += 8192) out += String.fromCharCode.apply(null, bytes.subarray(i, i + 8192));
    return out;
  };
  class FakePort {
    constructor() { this.isOpen = false; this.r = null; this.w = null; this.ctrl = null; }
    getInfo() { return { usbVendorId: 0x10c4, usbProductId: 0xea60 }; }  // a CP2102 USB-UART bridge
    async open(o) {
      if (this.isOpen) throw new DOMException('The port is already open.', 'InvalidStateError');
      if (window.__portBusy) throw new DOMException('Failed to open serial port.', 'NetworkError');
      this.isOpen = true;
      await window.__espHost('open', o.baudRate);
    }
    get readable() {
      if (!this.isOpen) return null;
      if (!this.r) {
        const stream = new ReadableStream({
          start: (c) => { this.ctrl = c; },
          cancel: () => { if (this.r === stream) { this.r = null; this.ctrl = null; } },
        });
        this.r = stream;
      }
      return this.r;
    }
    get writable() {
      if (!this.isOpen) return null;
      if (!this.w) this.w = new WritableStream({ write: (chunk) => window.__espHost('write', latin1(chunk)) });
      return this.w;
    }
    async setSignals(s) {
      if (!this.isOpen) throw new DOMException('The port is closed.', 'InvalidStateError');
      await window.__espHost('signals', s);
    }
    async close() {
      if (!this.isOpen) throw new DOMException('The port is already closed.', 'InvalidStateError');
      if ((this.r && this.r.locked) || (this.w && this.w.locked)) throw new TypeError('Cannot close a locked stream');
      this.isOpen = false;
      this.r = this.w = this.ctrl = null;
      await window.__espHost('close');
    }
  }
  const port = new FakePort();
  window.__espFeed = (text) => {
    if (!port.isOpen) return;
    if (!port.r) void port.readable;  // bytes that arrive before anyone reads are kept, as a real port does
    port.ctrl.enqueue(Uint8Array.from(text, (c) => c.charCodeAt(0)));
  };
  Object.defineProperty(navigator, 'serial', {
    value: {
      requestPort: async () => {
        if (window.__portChoice === 'cancel') throw new DOMException('No port selected by the user.', 'NotFoundError');
        return port;
      },
    },
  });
}

// One page for the whole test; board(options) puts a new stand-in board at the far end of its port.
async function openPage(browser, port) {
  const page = await browser.newPage({ viewport: { width: 900, height: 1200 } });
  page.on('pageerror', (e) => fail(e));
  let chain = Promise.resolve();
  let fake = null;
  await page.exposeFunction('__espHost', async (kind, arg) => {
    if (kind === 'open') fake.open(arg);
    else if (kind === 'close') fake.close();
    else if (kind === 'signals') fake.signals(arg);
    else if (kind === 'write') await fake.receive(Buffer.from(arg, 'latin1'));
  });
  await page.goto(`http://127.0.0.1:${port}/`);
  await page.evaluate(installFakePort);
  await page.click('#flash summary');
  const board = (options) => {  // options, or a board from before
    fake = options instanceof FakeEsp32s3 ? options : new FakeEsp32s3({
      ...options,
      send: (b) => { chain = chain.then(() => page.evaluate((x) => window.__espFeed(x), Buffer.from(b).toString('latin1'))).catch(() => {}); },
    });
    return fake;
  };
  return { page, board, current: () => fake };
}

const file = (name, buffer) => ({ name, mimeType: 'application/octet-stream', buffer });

async function flash(page, firmware, modelFile, baud = 460800, whileRunning = null) {
  await page.setInputFiles('#flash-firmware', firmware);
  await page.setInputFiles('#flash-model', modelFile ? [modelFile] : []);
  await page.selectOption('#flash-baud', String(baud));
  await page.click('#flash-start');
  if (whileRunning) await whileRunning();
  await page.waitForFunction(() => document.body.dataset.flash && document.body.dataset.flash !== 'running', null, { timeout: 30000 })
    .catch(async (e) => { throw new Error(e.message + '\nstatus: ' + (await page.textContent('#flash-status')) + '\nlog: ' + (await page.textContent('#flash-log'))); });
  return { state: await page.getAttribute('body', 'data-flash'), status: await page.textContent('#flash-status') };
}

function flasherArgs(appName) {
  return Buffer.from(JSON.stringify({
    write_flash_args: ['--flash_mode', 'dio', '--flash_size', '8MB', '--flash_freq', '80m'],
    flash_files: { '0x0': 'bootloader/bootloader.bin', '0x10000': appName, '0x8000': 'partition_table/partition-table.bin' },
    'partition-table': { offset: '0x8000', file: 'partition_table/partition-table.bin', encrypted: 'false' },
    extra_esptool_args: { after: 'hard_reset', before: 'default_reset', stub: true, chip: 'esp32s3' },
  }, null, 4));
}

// Every write at its offset, byte for byte; the rest of the flash as it was, except the erased tails
// of the written sectors; each file's MD5 asked for; reset into the firmware, then its probe.
function checkFlashed(fake, before, writes) {
  const expected = Buffer.from(before);
  for (const w of writes) {
    expected.fill(0xff, w.offset, align(w.offset + w.data.length, 4096));
    w.data.copy(expected, w.offset);
    assert.ok(fake.md5Checked.some(([o, n]) => o === w.offset && n === align(w.data.length, 4)), `no MD5 check of ${w.name} at 0x${w.offset.toString(16)}`);
  }
  for (const w of writes) assert.ok(fake.flash.subarray(w.offset, w.offset + w.data.length).equals(w.data), `${w.name} at 0x${w.offset.toString(16)} differs`);
  assert.ok(fake.flash.equals(expected), 'bytes outside the written sectors changed');
  const rom = fake.events.indexOf('reset:rom'), app = fake.events.lastIndexOf('reset:app');
  assert.ok(rom >= 0 && app > rom, 'not reset into the loader, then into the firmware: ' + fake.events.join(' '));
  assert.equal(fake.requests[0], 'G 0 0 0 1 0 1 1', 'the page did not probe the firmware with the line protocol');
}

async function main() {
  const port = await startServer();
  // The board image a maker would flash: stories260K in 4 bits (163 KB).
  const gguf = path.join(work, 'stories260K-q4g64.gguf'), image = path.join(work, 'stories260K-q4g64.img');
  for (const args of [[model, '--type', 'q4g64', '--embd-type', 'q8_0', '-o', gguf], [gguf, '--image', image]]) {
    const conv = spawnSync(bin, ['convert', ...args], { encoding: 'utf8' });
    assert.equal(conv.status, 0, 'mcullm convert failed: ' + conv.stderr);
  }
  const realImage = fs.readFileSync(image);
  // The firmware's own partition table too, when firmware/esp32s3 is in the tree (16 MB flash).
  const csvPath = process.env.MCULLM_PARTITIONS_CSV || path.join(path.dirname(new URL(import.meta.url).pathname), '../../firmware/esp32s3/partitions.csv');
  const firmwareParts = firmwarePartitions(csvPath);
  const browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: ['--no-sandbox'] });
  let rounds = 0;
  try {
    const { page, board, current } = await openPage(browser, port);
    // 1. Property: random layouts.
    const cases = [[11, 'manifest'], [22, 'names'], [33, 'model-only']];
    if (firmwareParts) cases.push([55, 'firmware/esp32s3/partitions.csv']);
    for (const [seed, how] of cases) {
      step = how;
      const r = rng(seed);
      const modelData = how === 'names' || how === 'model-only' ? syntheticBoardImage(0x8000 + r(0x30000), r) : realImage;
      let lay = layout(r, modelData.length);
      if (how.endsWith('.csv')) {
        const model = firmwareParts.find((p) => p.label === 'model');
        assert.ok(model, csvPath + ' has no partition labelled "model"');
        lay = { parts: firmwareParts, modelOffset: model.offset, table: partitionTable(firmwareParts), flashBytes: 16 << 20 };
      }
      const boot = appImage(0x3000 + r(0x3000), r), app = appImage(0x8000 + r(0x20000), r);
      const fake = board({ modelOffset: lay.modelOffset, flashBytes: lay.flashBytes });  // the page still holds the port from the round before
      await page.selectOption('#mode', 'http');
      if (how === 'model-only') {  // old firmware in place
        bytes(0x40000, r).copy(fake.flash, 0);
        fake.flash[0] = fake.flash[0x10000] = 0xe9;
      }
      const before = Buffer.from(fake.flash);
      const writes = [{ name: 'partition-table.bin', offset: 0x8000, data: lay.table }, { name: 'model.img', offset: lay.modelOffset, data: modelData }];
      let firmware = [file('partition-table.bin', lay.table)];
      if (how !== 'model-only') {
        writes.push({ name: 'bootloader.bin', offset: 0, data: boot }, { name: 'mcullm.bin', offset: 0x10000, data: app });
        firmware.push(file('bootloader.bin', boot), file('mcullm.bin', app));
        if (how === 'manifest') firmware.push(file('flasher_args.json', flasherArgs('mcullm.bin')));
      }
      const got = await flash(page, firmware, file('model.img', modelData), how === 'names' ? 115200 : 460800);
      assert.equal(got.state, 'done', `${how}: ${got.status}\n${await page.textContent('#flash-log')}`);
      checkFlashed(fake, before, writes);
      const plan = (await page.locator('#flash-plan li').allTextContents()).map((t) => t.split(' ')[0]);
      assert.deepEqual(plan, writes.map((w) => w.offset).sort((a, b) => a - b).map((o) => '0x' + o.toString(16)));
      assert.equal(await page.inputValue('#mode'), 'serial');
      if (how === 'manifest') {  // Generate now talks to the flashed board on the same port
        await page.check('#prompt-ids');
        await page.fill('#prompt', '1 2 3');
        await page.fill('#n_predict', '5');
        await page.click('#generate');
        await page.waitForFunction(() => document.body.dataset.state !== 'running', null, { timeout: 10000 });
        assert.equal(await page.getAttribute('body', 'data-state'), 'done', await page.textContent('#error'));
        const ids = (await page.locator('#token-log li').allTextContents()).map((t) => Number(t.split(' ')[0]));
        assert.deepEqual(ids, [1, 2, 3, 4, 5].map((i) => (3 * 7 + i) % 500));
        assert.match(fake.requests[1], /^G 5 \d+ \d+ \d+ 0 3 1 2 3$/);
        await page.screenshot({ path: path.join(work, 'flash.png'), fullPage: true });
      }
      rounds++;
    }

    // 2. Hostile input and boards.
    const r = rng(44);
    const small = syntheticBoardImage(0x9000, r);
    const lay = layout(r, small.length);
    const boot = appImage(0x4000, r), app = appImage(0x9000, r);
    const firmware = [file('bootloader.bin', boot), file('partition-table.bin', lay.table), file('mcullm.bin', app)];
    const fake = board({ modelOffset: lay.modelOffset });
    const expectError = async (what, pattern, run) => {
      step = what;
      const got = await run();
      assert.equal(got.state, 'error', `${what}: ${got.status}`);
      assert.match(got.status, pattern, what);
      assert.equal(await page.isEnabled('#flash-start'), true, what + ': the Flash button stays usable');
      assert.equal(current().portOpen, false, what + ': the port was left open');
    };
    const writesBefore = () => fake.commands.filter((op) => op === 0x02 || op === 0x10).length;

    const big = syntheticBoardImage(lay.modelSize + 4096, r);
    await expectError('model larger than its partition', new RegExp(`the model image is ${big.length} bytes; the "model" partition at 0x${lay.modelOffset.toString(16)} holds ${lay.modelSize}`),
                      () => flash(page, firmware, file('big.img', big)));
    const corrupt = Buffer.from(small);
    corrupt[corrupt.length - 1] ^= 1;
    await expectError('corrupt model', /corrupt \(CRC-32 mismatch\)/, () => flash(page, firmware, file('bad.img', corrupt)));
    await expectError('foreign model', /not a board image/, () => flash(page, firmware, file('model.gguf', Buffer.from('GGUF\x03\0\0\0' + '\0'.repeat(100)))));
    const badTable = Buffer.from(lay.table);
    badTable[40] ^= 1;
    await expectError('corrupt partition table', /partition table is corrupt/,
                      () => flash(page, [firmware[0], file('partition-table.bin', badTable), firmware[2]], file('m.img', small)));
    await expectError('app larger than its partition', /mcullm.bin is \d+ bytes; its partition "factory" holds/,
                      () => flash(page, [firmware[0], firmware[1], file('mcullm.bin', appImage(lay.appSize + 16, r))], file('m.img', small)));
    await expectError('a model picked as firmware', /m.img is a board image: pick it under Model image/,
                      () => flash(page, [...firmware, file('m.img', small)], null));
    await expectError('not a firmware image', /mcullm.bin is not an ESP32-S3 firmware image/,
                      () => flash(page, [firmware[0], firmware[1], file('mcullm.bin', Buffer.from('\x7fELF' + '\0'.repeat(4000)))], file('m.img', small)));
    await expectError('a file the manifest does not name', /extra.bin is not in flasher_args.json/,
                      () => flash(page, [...firmware, file('flasher_args.json', flasherArgs('mcullm.bin')), file('extra.bin', app)], file('m.img', small)));
    await expectError('no partition table', /pick the partition table/, () => flash(page, [firmware[0], firmware[2]], file('m.img', small)));
    assert.deepEqual(fake.events, [], 'a plan error must not touch the port');

    await page.evaluate(() => { window.__portChoice = 'cancel'; });
    await expectError('no port chosen', /no serial port chosen/, () => flash(page, firmware, file('m.img', small)));
    await page.evaluate(() => { window.__portChoice = ''; window.__portBusy = true; });
    await expectError('busy port', /busy or cannot be opened/, () => flash(page, firmware, file('m.img', small)));
    await page.evaluate(() => { window.__portBusy = false; });

    fake.silent = true;
    await expectError('silent port', /does not answer the ROM loader/, () => flash(page, firmware, file('m.img', small)));
    fake.silent = false;
    fake.chip = 'esp32c3';  // told by GET_SECURITY_INFO's chip id
    await expectError('an ESP32-C3', /ESP32-C3, not an ESP32-S3: nothing was written/, () => flash(page, firmware, file('m.img', small)));
    fake.chip = 'esp32';  // a ROM without GET_SECURITY_INFO: told by the magic register
    await expectError('an ESP32', /an ESP32, not an ESP32-S3: nothing was written/, () => flash(page, firmware, file('m.img', small)));
    assert.equal(writesBefore(), 0, 'a wrong chip was written to');
    fake.chip = 'esp32s3';
    const tiny = board({ modelOffset: lay.modelOffset, flashBytes: 256 << 10 });  // its RDID says 256 KB
    await expectError('flash smaller than the layout', /the files reach 0x[0-9a-f]+ but the board has 256KB of flash: nothing was written/,
                      () => flash(page, firmware, file('m.img', small)));
    assert.equal(tiny.commands.filter((op) => op === 0x10).length, 0, 'a too small flash was written to');
    board(fake);  // the 8 MB board again
    fake.failFlashData = { file: 1, seq: 0 };  // the second file's first block, every attempt
    await expectError('FLASH_DATA error', /writing failed: .*status.*partial firmware/, () => flash(page, firmware, file('m.img', small)));
    fake.failFlashData = null;
    fake.dataDelayMs = 150;
    const large = syntheticBoardImage(0x30000, r);  // several blocks, ~150 ms each
    await expectError('cancel while writing', /cancelled while writing/, () => flash(page, firmware, file('m.img', large), 460800, async () => {
      await page.waitForFunction(() => Number(document.getElementById('flash-progress').value) > 0, null, { timeout: 20000 });
      await page.click('#flash-cancel');
    }));
    fake.dataDelayMs = 0;

    // After all that, the same page flashes the board.
    const before = Buffer.from(fake.flash);
    const got = await flash(page, firmware, file('m.img', small));
    assert.equal(got.state, 'done', got.status);
    checkFlashed(fake, before, [{ name: 'b', offset: 0, data: boot }, { name: 't', offset: 0x8000, data: lay.table },
                                { name: 'a', offset: 0x10000, data: app }, { name: 'm', offset: lay.modelOffset, data: small }]);
  } finally {
    await browser.close();
  }
  console.log(`web_flash_browser: ok (${rounds} layouts (${firmwareParts ? 'with' : 'without'} ${csvPath}) flashed and checked byte for byte, 16 hostile cases; screenshot ${path.join(work, 'flash.png')})`);
  for (const c of children) c.kill('SIGTERM');
  clearTimeout(deadline);
}

main().catch(fail);
