// mcullm's page. Two ways to generate:
//  - HTTP: POST /completion with "stream": true; each Server-Sent Event carries one token's text,
//    id and time (token_us); the last one carries the timings.
//  - WebSerial (Chrome/Edge): the board's line protocol (docs/protocol.md): G out; P, T..., E in.
//    The board has no tokenizer: the page asks the server's /tokenize and /detokenize when one is
//    reachable, otherwise the prompt must be token ids and the page shows ids.
// Both use the board's sampler (temperature, top-k, seed; top-p 1, min-p 0), so they agree.
'use strict';

const $ = (id) => document.getElementById(id);
const ui = {
  mode: $('mode'), server: $('server'), apikey: $('apikey'), status: $('status'), serialControls: $('serial-controls'),
  baud: $('baud'), connect: $('connect'), nPredict: $('n_predict'), temperature: $('temperature'), topK: $('top_k'),
  seed: $('seed'), prompt: $('prompt'), promptIds: $('prompt-ids'), generate: $('generate'), stop: $('stop'),
  outPrompt: $('out-prompt'), continuation: $('continuation'), tokens: $('stat-tokens'), tps: $('stat-tps'),
  last: $('stat-last'), promptMs: $('stat-prompt'), chart: $('chart'), log: $('token-log'), error: $('error'),
  tabStory: $('tab-story'), tabChat: $('tab-chat'), storyView: $('story-view'), chatView: $('chat-view'), storyButtons: $('story-buttons'),
  messages: $('messages'), chatForm: $('chat-form'), chatInput: $('chat-input'),
};

ui.server.value = location.protocol.startsWith('http') ? location.origin : 'http://127.0.0.1:8080';

// ---- the run being shown: tokens, times, chart --------------------------------------------------

const run = { times: [], tokens: 0, abort: null };

function setState(state) {
  document.body.dataset.state = state;
  const busy = state === 'running';
  ui.generate.disabled = busy;
  ui.stop.disabled = !busy;
}

function showError(message) {
  ui.error.textContent = message;
  ui.error.hidden = !message;
}

function resetRun(promptText) {
  run.times = [];
  run.tokens = 0;
  ui.outPrompt.textContent = promptText;
  ui.continuation.textContent = '';
  ui.log.textContent = '';
  ui.tokens.textContent = '0';
  ui.tps.textContent = '–';
  ui.last.textContent = '–';
  ui.promptMs.textContent = '–';
  showError('');
  drawChart();
}

// One token arrived: its text (may be empty while a character or a stop string is incomplete),
// its id (-1 if unknown) and its time in microseconds.
function addToken(text, id, us) {
  run.tokens += 1;
  run.times.push(us);
  const span = document.createElement('span');
  span.className = 'tok new';
  span.textContent = text;
  span.title = (id >= 0 ? 'token ' + id + ', ' : '') + (us / 1000).toFixed(2) + ' ms';
  ui.continuation.appendChild(span);
  setTimeout(() => span.classList.remove('new'), 400);
  const item = document.createElement('li');
  item.textContent = (id >= 0 ? id + ' ' : '') + JSON.stringify(text) + ' ' + (us / 1000).toFixed(2) + ' ms';
  ui.log.appendChild(item);
  ui.tokens.textContent = String(run.tokens);
  ui.last.textContent = (us / 1000).toFixed(2) + ' ms';
  const total = run.times.reduce((a, b) => a + b, 0);
  if (total > 0) ui.tps.textContent = (run.tokens * 1e6 / total).toFixed(1);
  drawChart();
}

// Tokens per second, token by token (thin line), and its running mean over 8 tokens (thick line).
function drawChart() {
  const c = ui.chart, g = c.getContext('2d');
  const w = c.width, h = c.height, left = 44, bottom = 22, top = 10, right = 10;
  g.clearRect(0, 0, w, h);
  g.font = '11px system-ui, sans-serif';
  g.fillStyle = '#66707a';
  const rates = run.times.map((us) => (us > 0 ? 1e6 / us : 0));
  const mean = rates.map((_, i) => {
    const from = Math.max(0, i - 7), part = run.times.slice(from, i + 1);
    const sum = part.reduce((a, b) => a + b, 0);
    return sum > 0 ? part.length * 1e6 / sum : 0;
  });
  // The scale follows the typical rate: the first token (sampling only, no forward pass) and other
  // outliers would flatten everything else, so values above it are drawn at the top edge.
  const sorted = [...mean].sort((a, b) => a - b);
  const ymax = niceMax(Math.max(1, 1.25 * (sorted[Math.floor(0.9 * (sorted.length - 1))] || 0)));
  const n = Math.max(16, rates.length);
  const x = (i) => left + (w - left - right) * (n <= 1 ? 0 : i / (n - 1));
  const y = (v) => h - bottom - (h - bottom - top) * Math.min(v, ymax) / ymax;
  g.strokeStyle = '#dde2e6';
  g.lineWidth = 1;
  for (let k = 0; k <= 4; k++) {
    const v = ymax * k / 4;
    g.beginPath(); g.moveTo(left, y(v)); g.lineTo(w - right, y(v)); g.stroke();
    g.fillText(v >= 100 ? v.toFixed(0) : v.toFixed(1), 4, y(v) + 4);
  }
  g.fillText('tokens/s', w - right - 60, top + 10);
  g.fillText('token ' + n, w - right - 60, h - 6);
  const line = (values, color, width) => {
    if (!values.length) return;
    g.strokeStyle = color;
    g.lineWidth = width;
    g.beginPath();
    values.forEach((v, i) => (i ? g.lineTo(x(i), y(v)) : g.moveTo(x(i), y(v))));
    g.stroke();
  };
  line(rates, '#9fc3e0', 1);
  line(mean, '#1769aa', 2.5);
  ui.chart.dataset.points = String(rates.length);
}

function niceMax(v) {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

// ---- settings and the server ---------------------------------------------------------------------

function settings() {
  const num = (el, name, lo, hi) => {
    const v = Number(el.value);
    if (!Number.isFinite(v) || v < lo || v > hi) throw new Error(name + ' must be a number in ' + lo + '..' + hi);
    return v;
  };
  const s = {
    n_predict: Math.round(num(ui.nPredict, 'Length', 1, 4096)),
    temperature: num(ui.temperature, 'Temperature', 0, 100),
    top_k: Math.round(num(ui.topK, 'Top-k', 0, 2147483647)),
    seed: ui.seed.value === '' ? 1 + Math.floor(Math.random() * 4294967294) : Math.round(num(ui.seed, 'Seed', 1, 4294967295)),
  };
  return s;
}

function promptIds() {
  const ids = ui.prompt.value.trim().split(/[\s,]+/).filter(Boolean).map(Number);
  if (!ids.length || ids.some((v) => !Number.isInteger(v) || v < 0)) throw new Error('the prompt must be token ids (whole numbers) when "token ids" is ticked');
  return ids;
}

function headers() {
  const h = { 'Content-Type': 'application/json' };
  if (ui.apikey.value) h.Authorization = 'Bearer ' + ui.apikey.value;
  return h;
}

function url(path) { return ui.server.value.replace(/\/+$/, '') + path; }

async function api(path, body) {
  const res = await fetch(url(path), body === undefined ? { headers: headers() } : { method: 'POST', headers: headers(), body: JSON.stringify(body) });
  const j = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error((j.error && j.error.message) || ('HTTP ' + res.status));
  return j;
}

let serverInfo = null;  // /v1/models' model, when the server answered

async function probeServer() {
  try {
    const j = await api('/v1/models');
    serverInfo = j.data[0];
    const m = serverInfo.meta || {};
    ui.status.textContent = serverInfo.id + ' · context ' + m.n_ctx + ' · vocabulary ' + m.n_vocab;
    ui.status.className = 'ok';
    ui.tabChat.hidden = !m.chat_template;
  } catch (e) {
    serverInfo = null;
    ui.status.textContent = 'no server at ' + ui.server.value + ' (' + e.message + ')';
    ui.status.className = 'bad';
    ui.tabChat.hidden = true;
  }
}

// Reads a Server-Sent Events body and calls onEvent with each event's parsed JSON ("[DONE]" skipped).
async function readEvents(res, onEvent) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true });
    let at;
    while ((at = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, at);
      buf = buf.slice(at + 2);
      for (const line of ev.split('\n')) {
        if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
        onEvent(JSON.parse(line.slice(6)));
      }
    }
  }
}

async function generateHttp(s) {
  const prompt = ui.promptIds.checked ? promptIds() : ui.prompt.value;
  run.abort = new AbortController();
  const body = { prompt, n_predict: s.n_predict, temperature: s.temperature, top_k: s.top_k, seed: s.seed, top_p: 1, min_p: 0, stream: true };
  const res = await fetch(url('/completion'), { method: 'POST', headers: headers(), body: JSON.stringify(body), signal: run.abort.signal });
  if (!res.ok) {
    const j = await res.json().catch(() => ({}));
    throw new Error((j.error && j.error.message) || ('HTTP ' + res.status));
  }
  await readEvents(res, (ev) => {
    if (ev.error) throw new Error(ev.error.message);
    if (ev.stop) {
      if (ev.timings) {
        ui.promptMs.textContent = ev.timings.prompt_ms.toFixed(1) + ' ms';
        ui.tps.textContent = ev.timings.predicted_per_second.toFixed(1);
      }
      return;
    }
    if (ev.tokens && ev.tokens.length) addToken(ev.content, ev.tokens[0], ev.token_us);
    else if (ev.content) ui.continuation.appendChild(document.createTextNode(ev.content));  // the final flush
  });
}

// ---- WebSerial: the board's line protocol ---------------------------------------------------------

const serial = { port: null, reader: null, writer: null, buf: '', pending: null };

// Opens `given` (the port the flashing panel just wrote) or one the user picks.
async function connectBoard(given) {
  if (!('serial' in navigator)) throw new Error('this browser has no WebSerial (use Chrome or Edge, over http://localhost or https)');
  if (serial.port) await disconnectBoard();
  const port = given || await navigator.serial.requestPort();
  await port.open({ baudRate: Number(ui.baud.value) });
  serial.port = port;
  serial.writer = port.writable.getWriter();
  serial.reader = port.readable.getReader();
  serial.buf = '';
  serial.pending = null;
  ui.status.textContent = 'board connected at ' + ui.baud.value + ' baud';
  ui.status.className = 'ok';
}

async function disconnectBoard() {
  try { if (serial.reader) await serial.reader.cancel(); } catch (e) { /* already gone */ }
  try { if (serial.writer) serial.writer.releaseLock(); } catch (e) { /* already gone */ }
  try { if (serial.port) await serial.port.close(); } catch (e) { /* already gone */ }
  serial.port = serial.reader = serial.writer = serial.pending = null;
}

async function readLine(timeoutMs) {
  const decoder = new TextDecoder();
  for (;;) {
    const nl = serial.buf.indexOf('\n');
    if (nl >= 0) {
      const line = serial.buf.slice(0, nl).replace(/\r$/, '');
      serial.buf = serial.buf.slice(nl + 1);
      if (line.trim()) return line;
      continue;
    }
    if (serial.buf.length > 16384) throw new Error('the board sent a line longer than 16384 bytes');
    let timer;
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(Object.assign(new Error('the board sent nothing for ' + timeoutMs / 1000 + ' s'), { name: 'TimeoutError' })), timeoutMs);
    });
    // A read still pending when a timeout won is kept for the next call: its bytes are not lost.
    serial.pending = serial.pending || serial.reader.read();
    const { value, done } = await Promise.race([serial.pending, timeout]).finally(() => clearTimeout(timer));
    serial.pending = null;
    if (done) throw new Error('the board closed the serial line');
    serial.buf += decoder.decode(value, { stream: true });
  }
}

async function generateSerial(s) {
  if (!serial.port) await connectBoard();
  let ids;
  if (ui.promptIds.checked) ids = promptIds();
  else if (serverInfo) ids = (await api('/tokenize', { content: ui.prompt.value, add_special: true })).tokens;
  else throw new Error('no server to tokenize the prompt: tick "the prompt is token ids" and give ids');
  const temp = Math.round(s.temperature * 1000);
  const g = ['G', s.n_predict, temp, s.top_k, s.seed, 0, ids.length, ...ids].join(' ') + '\n';
  await serial.writer.write(new TextEncoder().encode(g));
  const got = [];
  let shown = '';
  run.abort = { abort() { run.stopped = true; } };
  run.stopped = false;
  for (;;) {
    const line = await readLine(30000);
    const f = line.trim().split(/ +/);
    if (f[0] === 'X') throw new Error('the board: ' + line.slice(2));
    if (f[0] === 'P') { ui.promptMs.textContent = Number(f[1]).toFixed(1) + ' ms'; continue; }
    if (f[0] === 'E') { if (Number(f[2]) > 0) ui.tps.textContent = (1000 / Number(f[2])).toFixed(1); return; }
    if (f[0] !== 'T' || f.length !== 3) throw new Error('the board sent a line that is not P, T, E or X: ' + line.slice(0, 60));
    const id = Number(f[1]), us = Number(f[2]);
    if (run.stopped) continue;  // the protocol has no stop command: the rest of the reply is read and dropped
    got.push(id);
    let text = '[' + id + ']';
    if (serverInfo && !ui.promptIds.checked) {
      const all = (await api('/detokenize', { tokens: [ids[ids.length - 1], ...got] })).content;
      const prefix = (await api('/detokenize', { tokens: [ids[ids.length - 1]] })).content;
      const full = all.slice(prefix.length);
      text = full.slice(shown.length);
      shown = full;
    }
    addToken(text, id, us);
  }
}

// ---- chat (shown when the model has a chat template) ----------------------------------------------

const chat = [];

function addMessage(role, text) {
  const div = document.createElement('div');
  div.className = 'msg ' + role;
  div.textContent = text;
  ui.messages.appendChild(div);
  return div;
}

async function sendChat(s, content) {
  chat.push({ role: 'user', content });
  addMessage('user', content);
  const div = addMessage('assistant', '');
  resetRun('');
  run.abort = new AbortController();
  const body = { messages: chat, max_tokens: s.n_predict, temperature: s.temperature, top_k: s.top_k, seed: s.seed, top_p: 1, min_p: 0, stream: true };
  const res = await fetch(url('/v1/chat/completions'), { method: 'POST', headers: headers(), body: JSON.stringify(body), signal: run.abort.signal });
  if (!res.ok) {
    const j = await res.json().catch(() => ({}));
    throw new Error((j.error && j.error.message) || ('HTTP ' + res.status));
  }
  let answer = '', last = performance.now();
  await readEvents(res, (ev) => {
    if (ev.error) throw new Error(ev.error.message);
    const delta = ev.choices && ev.choices[0] && ev.choices[0].delta;
    if (delta && typeof delta.content === 'string' && delta.content) {
      const now = performance.now();  // chat chunks carry no token time: the page's arrival time stands in
      answer += delta.content;
      div.textContent = answer;
      addToken(delta.content, -1, (now - last) * 1000);
      last = now;
    }
    if (ev.timings) ui.tps.textContent = ev.timings.predicted_per_second.toFixed(1);
  });
  chat.push({ role: 'assistant', content: answer });
}

// ---- wiring ---------------------------------------------------------------------------------------

async function guarded(work) {
  setState('running');
  try {
    await work();
    setState('done');
  } catch (e) {
    if (e.name !== 'AbortError') showError(e.message);
    setState(e.name === 'AbortError' ? 'done' : 'error');
  }
}

ui.generate.addEventListener('click', () => guarded(async () => {
  resetRun(ui.prompt.value);  // the last story goes first, whether this one starts or fails
  const s = settings();
  if (ui.mode.value === 'serial') await generateSerial(s); else await generateHttp(s);
}));
ui.stop.addEventListener('click', () => { if (run.abort) run.abort.abort(); });
ui.connect.addEventListener('click', () => connectBoard().catch((e) => showError(e.message)));
ui.mode.addEventListener('change', () => { ui.serialControls.hidden = ui.mode.value !== 'serial'; });
ui.server.addEventListener('change', probeServer);
ui.apikey.addEventListener('change', probeServer);
ui.chatForm.addEventListener('submit', (e) => {
  e.preventDefault();
  const text = ui.chatInput.value.trim();
  if (!text) return;
  ui.chatInput.value = '';
  guarded(() => { showError(''); return sendChat(settings(), text); });
});
for (const [tab, view] of [[ui.tabStory, ui.storyView], [ui.tabChat, ui.chatView]]) {
  tab.addEventListener('click', () => {
    for (const [t, v] of [[ui.tabStory, ui.storyView], [ui.tabChat, ui.chatView]]) {
      t.classList.toggle('active', t === tab);
      v.hidden = v !== view;
    }
    // Errors show next to the view's own button.
    if (view === ui.chatView) ui.chatForm.after(ui.error); else ui.storyButtons.appendChild(ui.error);
    showError('');
  });
}

drawChart();
probeServer();
