// The "Flash a board" panel: writes an ESP-IDF build of firmware/esp32s3 and a board image
// (`mcullm convert MODEL --image`) to an ESP32-S3 over WebSerial with esptool-js, then hands the
// same port to the page's line-protocol mode (app.js) and checks that the board answers.
// esptool-js is not compiled into mcullm: `npm ci` in web/flash, then `mcullm serve --vendor-dir
// web/flash/node_modules` serves it at /vendor/. docs/flashing.md: files, offsets, what is tested.
'use strict';

const flashUi = {
  firmware: $('flash-firmware'), model: $('flash-model'), baud: $('flash-baud'), start: $('flash-start'),
  cancel: $('flash-cancel'), progress: $('flash-progress'), status: $('flash-status'), plan: $('flash-plan'), log: $('flash-log'),
};
const FLASH_CHIP = 'ESP32-S3';
const MODEL_PARTITION = 'model';  // the label of the model's partition in firmware/esp32s3/partitions.csv
const ESPTOOL_PATH = '/vendor/esptool-js/bundle.js';
const PROBE_LINE = 'G 0 0 0 1 0 1 1\n';  // the line protocol's smallest request: prompt [1], no tokens

const hex = (n) => '0x' + n.toString(16);
const baseName = (p) => String(p).split(/[\\/]/).pop();

// ---- the plan: which bytes go where, checked before any port is opened ---------------------------

// ESP-IDF's binary partition table: 32-byte entries (0xAA 0x50, type, subtype, offset, size, label,
// flags), then an entry starting 0xEB 0xEB holding the MD5 of the entries before it, then 0xFF.
function parsePartitionTable(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const parts = [];
  let checked = false;
  for (let at = 0; at + 32 <= bytes.length; at += 32) {
    const m0 = bytes[at], m1 = bytes[at + 1];
    if (m0 === 0xff && m1 === 0xff) break;
    if (m0 === 0xeb && m1 === 0xeb) {
      if (md5Hex(bytes.subarray(0, at)) !== Array.from(bytes.subarray(at + 16, at + 32), (x) => x.toString(16).padStart(2, '0')).join(''))
        throw new Error('the partition table is corrupt (its MD5 does not match its entries)');
      checked = true;
      continue;
    }
    if (m0 !== 0xaa || m1 !== 0x50) throw new Error('not a partition table (entry ' + at / 32 + ' does not start with 0xAA 0x50)');
    const label = new TextDecoder().decode(bytes.subarray(at + 12, at + 28)).replace(/\0.*$/s, '');
    parts.push({ type: bytes[at + 2], subtype: bytes[at + 3], offset: view.getUint32(at + 4, true), size: view.getUint32(at + 8, true), label });
  }
  if (!parts.length) throw new Error('the partition table has no entries');
  if (!checked) throw new Error('the partition table has no MD5 entry (build it with ESP-IDF)');
  return parts;
}

// A board image (src/format/board_image.h): "MCUIMAGE", version 1, CRC-32 of bytes 16.. at 12,
// the total size at 16.
function checkBoardImage(bytes, name) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.length < 64 || new TextDecoder().decode(bytes.subarray(0, 8)) !== 'MCUIMAGE')
    throw new Error(name + ' is not a board image (make one with `mcullm convert MODEL --image OUT`)');
  if (view.getUint32(8, true) !== 1) throw new Error(name + ': board image version ' + view.getUint32(8, true) + ' (this page knows 1)');
  const total = Number(view.getBigUint64(16, true));
  if (total !== bytes.length) throw new Error(name + ': the header says ' + total + ' bytes, the file has ' + bytes.length + ' (truncated?)');
  if (crc32(bytes.subarray(16)) !== view.getUint32(12, true)) throw new Error(name + ': the board image is corrupt (CRC-32 mismatch)');
}

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(bytes) {
  let c = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) c = CRC_TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function parseOffset(text, what) {
  if (!/^0x[0-9a-f]{1,8}$/i.test(String(text))) throw new Error(what + ': offset ' + JSON.stringify(text) + ' is not a hex number like 0x10000');
  return parseInt(text, 16);
}

// ESP-IDF's build/flasher_args.json: {"flash_files": {"0x0": "bootloader/bootloader.bin", ...},
// "partition-table": {"offset", "file"}, "extra_esptool_args": {"chip": "esp32s3"}}.
function manifestWrites(manifest, files) {
  const chip = manifest.extra_esptool_args && manifest.extra_esptool_args.chip;
  if (chip && chip !== 'esp32s3') throw new Error('flasher_args.json is for ' + chip + ', this page flashes esp32s3');
  if (!manifest.flash_files || typeof manifest.flash_files !== 'object') throw new Error('flasher_args.json has no "flash_files"');
  const writes = Object.entries(manifest.flash_files).map(([offset, p]) => {
    const data = files.get(baseName(p));
    if (!data) throw new Error('flasher_args.json names ' + p + ': pick that file too');
    return { name: baseName(p), offset: parseOffset(offset, 'flasher_args.json'), data };
  });
  for (const name of files.keys())
    if (!writes.some((w) => w.name === name)) throw new Error(name + ' is not in flasher_args.json (a model goes under Model image)');
  const table = manifest['partition-table'] && baseName(manifest['partition-table'].file);
  return { writes, table };
}

// Without a manifest: ESP-IDF's names and the ESP32-S3's offsets (bootloader 0x0, partition table
// 0x8000), the app at the partition table's first app partition.
function conventionalWrites(files) {
  const writes = [];
  let table = null, app = null;
  for (const [name, data] of files) {
    if (/bootloader/i.test(name)) writes.push({ name, offset: 0x0, data });
    else if (/partition/i.test(name)) { table = name; writes.push({ name, offset: 0x8000, data }); }
    else if (app) throw new Error('two app images (' + app.name + ', ' + name + '): pick one, or add flasher_args.json');
    else app = { name, offset: -1, data };
  }
  if (app) writes.push(app);
  return { writes, table };
}

async function readFile(file) { return new Uint8Array(await file.arrayBuffer()); }

// Returns [{name, offset, data}] sorted by offset, or throws a message for the user.
async function flashPlan(firmwareFiles, modelFile) {
  const files = new Map();
  let manifest = null;
  for (const f of firmwareFiles) {
    if (f.name.endsWith('.json')) {
      if (manifest) throw new Error('pick one flasher_args.json, not two');
      try { manifest = JSON.parse(await f.text()); } catch (e) { throw new Error(f.name + ' is not JSON: ' + e.message); }
    } else {
      files.set(f.name, await readFile(f));
    }
  }
  if (!files.size && !modelFile) throw new Error('pick the firmware files and / or a model image first');
  for (const [name, data] of files)
    if (new TextDecoder().decode(data.subarray(0, 8)) === 'MCUIMAGE') throw new Error(name + ' is a board image: pick it under Model image');
  const { writes, table } = manifest ? manifestWrites(manifest, files) : conventionalWrites(files);
  const tableWrite = writes.find((w) => w.name === table);
  if (!tableWrite) throw new Error('pick the partition table too (build/partition_table/partition-table.bin): it says where the app and the model go');
  const parts = parsePartitionTable(tableWrite.data);
  for (const w of writes)  // the bootloader and app images start with ESP-IDF's image magic
    if (w !== tableWrite && w.data[0] !== 0xe9 && (w.offset <= 0 || parts.some((p) => p.type === 0 && p.offset === w.offset)))
      throw new Error(w.name + ' is not an ESP32-S3 firmware image (it does not start with 0xE9)');
  const app = writes.find((w) => w.offset === -1);
  if (app) {
    const p = parts.find((q) => q.type === 0);
    if (!p) throw new Error('the partition table has no app partition for ' + app.name);
    app.offset = p.offset;
  }
  if (modelFile) {
    const data = await readFile(modelFile);
    checkBoardImage(data, modelFile.name);
    const p = parts.find((q) => q.label === MODEL_PARTITION);
    if (!p) throw new Error('the partition table has no partition named "' + MODEL_PARTITION + '" for the model');
    if (data.length > p.size)
      throw new Error('the model image is ' + data.length + ' bytes; the "' + MODEL_PARTITION + '" partition at ' + hex(p.offset) + ' holds ' + p.size);
    const old = writes.findIndex((w) => w.offset === p.offset);
    if (old >= 0) writes.splice(old, 1);  // the picked model replaces one the manifest names
    writes.push({ name: modelFile.name, offset: p.offset, data });
  }
  writes.sort((a, b) => a.offset - b.offset);
  for (const w of writes) {
    const p = parts.find((q) => q.offset === w.offset);
    if (p && w.data.length > p.size) throw new Error(w.name + ' is ' + w.data.length + ' bytes; its partition "' + p.label + '" holds ' + p.size);
    if (w.offset % 4096) throw new Error(w.name + ' would go to ' + hex(w.offset) + ', not a 4 KB flash sector boundary');
  }
  for (let i = 1; i < writes.length; i++) {
    const a = writes[i - 1], b = writes[i];
    if (a.offset + a.data.length > b.offset) throw new Error(a.name + ' (' + hex(a.offset) + ', ' + a.data.length + ' bytes) runs into ' + b.name + ' at ' + hex(b.offset));
  }
  return writes;
}

// ---- writing: esptool-js over WebSerial ------------------------------------------------------------

const flashing = { cancelled: false, busy: false };

function flashLog(text) {
  flashUi.log.textContent = (flashUi.log.textContent + text).split('\n').slice(-200).join('\n');
  flashUi.log.scrollTop = flashUi.log.scrollHeight;
}

function flashStatus(text, cls) {
  flashUi.status.textContent = text;
  flashUi.status.className = cls || '';
}

async function loadEsptool() {
  const base = location.protocol.startsWith('http') ? location.origin : ui.server.value.replace(/\/+$/, '');
  try {
    return await import(base + ESPTOOL_PATH);
  } catch (e) {
    throw new Error('esptool-js is not available at ' + base + ESPTOOL_PATH + ': run `npm ci` in web/flash, then start ' +
                    '`mcullm serve -m MODEL --vendor-dir web/flash/node_modules` and open the page it serves');
  }
}

// esptool-js's and WebSerial's errors, said for a maker holding a board.
function explainFlashError(e, stage) {
  const m = String(e && e.message || e);
  if (e && e.name === 'NotFoundError') return 'no serial port chosen: nothing was written';
  if ((e && e.name === 'InvalidStateError') || /Failed to open serial port|already open/i.test(m))
    return 'the serial port is busy or cannot be opened (' + m + '): close other programs or tabs using it (a serial monitor, idf.py monitor) and try again';
  if (/Failed to connect/i.test(m))
    return 'the board does not answer the ROM loader: hold BOOT, press and release RESET, release BOOT, then try again (' + m + ')';
  if (e && /UnexpectedChip/.test(e.name)) return 'this is not an ' + FLASH_CHIP + ': ' + m;
  if (stage === 'write') return 'writing failed: ' + m + '. The board holds a partial firmware: flash it again before using it';
  return m;
}

async function flashBoard() {
  flashing.cancelled = false;
  flashUi.progress.value = 0;
  flashUi.log.textContent = '';
  flashUi.plan.textContent = '';
  const writes = await flashPlan(Array.from(flashUi.firmware.files), flashUi.model.files[0] || null);
  for (const w of writes) {
    const li = document.createElement('li');
    li.textContent = hex(w.offset) + ' ' + w.name + ' (' + w.data.length + ' bytes)';
    flashUi.plan.appendChild(li);
  }
  if (!('serial' in navigator)) throw new Error('this browser has no WebSerial (use Chrome or Edge, over http://localhost or https)');
  const esptool = await loadEsptool();
  if (serial.port) await disconnectBoard();  // the port may be the one the page talks to
  let stage = 'choose';
  let transport = null;
  try {
    const port = await navigator.serial.requestPort();
    transport = new esptool.Transport(port, false);
    const terminal = { clean() {}, writeLine: (s) => flashLog(s + '\n'), write: (s) => flashLog(s) };
    const loader = new esptool.ESPLoader({ transport, baudrate: Number(flashUi.baud.value), romBaudrate: 115200, terminal,
                                           resetConstructors: { hardReset: (t) => ({ reset: () => pulseReset(t) }) } });
    flashStatus('connecting to the ROM loader...');
    stage = 'connect';
    await loader.detectChip('default_reset', 4);
    if (loader.chip.CHIP_NAME !== FLASH_CHIP) throw new Error('this board is an ' + loader.chip.CHIP_NAME + ', not an ' + FLASH_CHIP + ': nothing was written');
    flashLog('Chip: ' + (await loader.chip.getChipDescription(loader)) + '\n');
    await loader.runStub();
    if (loader.baudrate !== loader.romBaudrate) await loader.changeBaud();
    const size = await loader.detectFlashSize();
    const end = Math.max(...writes.map((w) => w.offset + w.data.length));
    if (size && end > loader.flashSizeBytes(size)) throw new Error('the files reach ' + hex(end) + ' but the board has ' + size + ' of flash: nothing was written');
    if (flashing.cancelled) throw new Error('cancelled before writing: nothing was written');
    stage = 'write';
    const total = writes.reduce((a, w) => a + w.data.length, 0);
    const before = writes.map((_, i) => writes.slice(0, i).reduce((a, w) => a + w.data.length, 0));
    flashStatus('writing ' + total + ' bytes...');
    await loader.writeFlash({
      fileArray: writes.map((w) => ({ data: w.data, address: w.offset })),
      flashMode: 'keep', flashFreq: 'keep', flashSize: 'keep',  // the images are written as built
      eraseAll: false, compress: true,
      reportProgress: (i, written, of) => {
        if (flashing.cancelled) throw new Error('cancelled');
        flashUi.progress.value = (before[i] + writes[i].data.length * (of ? written / of : 1)) / total;
      },
      calculateMD5Hash: md5Hex,  // the loader reads the flash back and compares
    });
    stage = 'reset';
    await loader.after('hard_reset');
    await transport.disconnect();
    transport = null;
    flashUi.progress.value = 1;
    flashStatus('written and verified (MD5); the board restarts: talking to it...');
    stage = 'protocol';
    ui.mode.value = 'serial';
    ui.serialControls.hidden = false;
    await connectBoard(port);
    await probeBoard(10000);
    flashStatus('done: the board runs the firmware and answers the line protocol; Generate talks to it', 'ok');
  } catch (e) {
    if (transport) { try { await transport.disconnect(); } catch (ignored) { /* already closed */ } }
    if (stage === 'write' && /cancelled/.test(String(e.message))) throw new Error('cancelled while writing: the board holds a partial firmware; flash it again before using it');
    if (stage === 'protocol') throw new Error('the board was flashed, but ' + e.message + ' (press its RESET button, then Connect board)');
    throw new Error(explainFlashError(e, stage));
  }
}

// esptool.py's hard reset: EN low for 100 ms through RTS (DTR, hence IO0, left high: the firmware
// boots). esptool-js 0.7.0's HardReset only releases RTS, which after its own connect sequence (RTS
// already released) resets nothing; the browser test's auto-reset circuit caught it.
async function pulseReset(transport) {
  await transport.setRTS(true);
  await new Promise((resolve) => setTimeout(resolve, 100));
  await transport.setRTS(false);
}

// After the reset the board prints its boot log; once it has been quiet (or after 3 s), one request
// with no tokens must be answered by P then E.
async function probeBoard(timeoutMs) {
  const quietBy = Date.now() + 3000;
  for (;;) {
    try { await readLine(300); } catch (e) { if (e.name === 'TimeoutError') break; throw e; }
    if (Date.now() > quietBy) break;
  }
  serial.buf = '';
  await serial.writer.write(new TextEncoder().encode(PROBE_LINE));
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) throw new Error('it did not answer a line-protocol request within ' + timeoutMs / 1000 + ' s');
    let line;
    try { line = await readLine(left); } catch (e) { if (e.name === 'TimeoutError') continue; throw e; }
    if (/^X( |$)/.test(line)) throw new Error('it refused a line-protocol request: ' + line.slice(2));
    if (/^E \d+ /.test(line)) return;
  }
}

flashUi.start.addEventListener('click', async () => {
  if (flashing.busy) return;
  flashing.busy = true;
  flashUi.start.disabled = true;
  flashUi.cancel.disabled = false;
  document.body.dataset.flash = 'running';
  try {
    await flashBoard();
    document.body.dataset.flash = 'done';
  } catch (e) {
    flashStatus(e.message, 'bad');
    document.body.dataset.flash = 'error';
  } finally {
    flashing.busy = false;
    flashUi.start.disabled = false;
    flashUi.cancel.disabled = true;
  }
});
flashUi.cancel.addEventListener('click', () => { flashing.cancelled = true; flashStatus('cancelling...'); });
