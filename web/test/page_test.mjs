// The page in headless Chromium (playwright-core driving Debian's chromium), against a real
// `mcullm serve` with stories260K. Checks, for a seeded request:
//  1. HTTP mode: typing a prompt and clicking Generate streams tokens (the test holds the stream after
//     its first event: the page shows that token while still running), and the text equals
//     /v1/completions' for the same settings; the token count, each token's time, the tokens/s figure
//     and the chart all updated. Saves a screenshot.
//  1b. A bad setting, then a request the server refuses: the error shows next to the Generate button,
//     in view, and the last story is cleared.
//  2. Chat view (the server runs with --chat-template chatml): a message's streamed reply equals
//     /v1/chat/completions' for the same settings.
//  3. WebSerial mode with a stand-in for navigator.serial whose bytes go to `mcullm serve --serial`
//     on a pseudo-terminal (made by util-linux's `script`): the same token ids as over HTTP.
// Usage: node page_test.mjs MCULLM MODEL CHROMIUM WORK_DIR (run.sh sets it up).
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { startServer as startServerOf } from './serve.mjs';

const [bin, model, chromiumPath, work] = process.argv.slice(2).map((p, i) => (i === 2 ? p : path.resolve(p)));
const { chromium } = createRequire(path.join(work, 'package.json'))('playwright-core');
const N = 48;
const settings = { temperature: 0.8, top_k: 40, seed: 4242 };
const prompt = 'Once upon a time, a little fox';
const children = [];
const deadline = setTimeout(() => fail(new Error('the browser test took over 90 s')), 90000);

function fail(e) {
  console.error('web_page_browser: FAILED:', e && e.stack ? e.stack : e);
  for (const c of children) c.kill('SIGKILL');
  process.exit(1);
}

// `mcullm serve --port 0` (a little delay per token, as a board would have); resolves its port.
function startServer() {
  return startServerOf(bin, model, ['--token-delay-ms', '10', '--chat-template', 'chatml'], children);
}

// Wraps the page's fetch so that, once window.__holdNext is set, the next /completion stream is held
// after its first event until window.__release(): the page must show that token while the generation
// is still running (the test waits for events, not for time).
function installStreamGate(page) {
  return page.evaluate(() => {
    const realFetch = window.fetch.bind(window);
    const firstEventEnd = (b) => { for (let i = 1; i < b.length; i++) if (b[i - 1] === 10 && b[i] === 10) return i + 1; return -1; };
    window.fetch = async (input, init) => {
      const res = await realFetch(input, init);
      if (!window.__holdNext || !String(input).endsWith('/completion') || !res.body) return res;
      window.__holdNext = false;
      const released = new Promise((resolve) => { window.__release = resolve; });
      const reader = res.body.getReader();
      const body = new ReadableStream({
        async start(c) {
          let head = new Uint8Array(0), held = false;
          try {
            for (;;) {
              const { value, done } = await reader.read();
              if (done) break;
              if (held) { c.enqueue(value); continue; }
              const all = new Uint8Array(head.length + value.length);
              all.set(head); all.set(value, head.length);
              const end = firstEventEnd(all);
              if (end < 0) { head = all; continue; }
              c.enqueue(all.slice(0, end));
              held = window.__held = true;
              await released;
              if (end < all.length) c.enqueue(all.slice(end));
            }
            c.close();
          } catch (e) { c.error(e); }
        },
        cancel(reason) { return reader.cancel(reason); },
      });
      return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
    };
  });
}

// `mcullm serve --serial /dev/tty` inside `script`, which gives it a pty and relays our pipes to it.
function startBoard() {
  fs.rmSync(path.join(work, 'board.log'), { force: true });
  const child = spawn('script', ['-q', '-f', '-c', `'${bin}' serve -m '${model}' --serial /dev/tty 2>'${work}/board.log'`, '/dev/null'],
                      { stdio: ['pipe', 'pipe', 'ignore'] });
  children.push(child);
  return child;
}

function readText(file) {
  try { return fs.readFileSync(file, 'utf8'); } catch { return ''; }
}

async function post(port, p, body) {
  const res = await fetch(`http://127.0.0.1:${port}${p}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  assert.equal(res.status, 200, p);
  return res.json();
}

async function generate(page, mode) {
  await page.selectOption('#mode', mode);
  await page.fill('#prompt', prompt);
  await page.fill('#n_predict', String(N));
  await page.fill('#temperature', String(settings.temperature));
  await page.fill('#top_k', String(settings.top_k));
  await page.fill('#seed', String(settings.seed));
  let partial = 0;
  if (mode === 'http') {
    await page.evaluate(() => { window.__holdNext = true; window.__held = false; });
    await page.click('#generate');
    // Part-way: the stream is held after its first event; that token must show while running.
    await page.waitForFunction(() => window.__held && Number(document.getElementById('stat-tokens').textContent) > 0, null, { timeout: 30000 });
    partial = Number(await page.textContent('#stat-tokens'));
    assert.equal(await page.getAttribute('body', 'data-state'), 'running', 'the page should still be running while the stream is held');
    await page.evaluate(() => window.__release());
  } else {
    await page.click('#generate');
  }
  await page.waitForFunction(() => document.body.dataset.state !== 'running', null, { timeout: 30000 });
  const state = await page.getAttribute('body', 'data-state');
  assert.equal(state, 'done', 'the page ended in state ' + state + ': ' + (await page.textContent('#error')));
  return partial;
}

async function main() {
  const port = await startServer();
  const want = await post(port, '/v1/completions', { prompt, max_tokens: N, top_p: 1, min_p: 0, ...settings });
  const wantIds = (await post(port, '/completion', { prompt, n_predict: N, top_p: 1, min_p: 0, ...settings })).tokens;
  const wantText = want.choices[0].text;
  assert.ok(want.usage.completion_tokens > 8, 'the reference is too short to test streaming');

  const browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: ['--no-sandbox'] });
  try {
    const page = await browser.newPage({ viewport: { width: 900, height: 1000 } });
    page.on('pageerror', (e) => fail(e));
    await page.goto(`http://127.0.0.1:${port}/`);
    await page.waitForSelector('#status.ok', { timeout: 10000 });
    await installStreamGate(page);

    // 1. HTTP.
    const partial = await generate(page, 'http');
    assert.ok(partial > 0 && partial < want.usage.completion_tokens, `tokens should stream in (seen ${partial} part-way)`);
    assert.equal(await page.textContent('#continuation'), wantText);
    assert.equal(await page.textContent('#out-prompt'), prompt);
    const n = want.usage.completion_tokens;
    assert.equal(Number(await page.textContent('#stat-tokens')), n);
    assert.equal(await page.getAttribute('#chart', 'data-points'), String(n));
    assert.equal(await page.locator('#token-log li').count(), n);
    assert.match(await page.getAttribute('#continuation .tok >> nth=0', 'title'), /^token \d+, \d+\.\d\d ms$/);
    assert.match(await page.textContent('#stat-tps'), /^\d+(\.\d)?$/);
    assert.match(await page.textContent('#stat-prompt'), /ms$/);
    const logIds = (await page.locator('#token-log li').allTextContents()).map((t) => Number(t.split(' ')[0]));
    assert.deepEqual(logIds, wantIds);
    // The chart has ink: some pixels differ from the blank canvas's.
    const inked = await page.evaluate(() => {
      const c = document.getElementById('chart');
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let blue = 0;
      for (let i = 0; i < d.length; i += 4) if (d[i + 2] > 150 && d[i] < 60 && d[i + 3] > 0) blue++;
      return blue;
    });
    assert.ok(inked > 100, 'the tokens/s chart has no line (' + inked + ' pixels)');
    await page.screenshot({ path: path.join(work, 'page.png'), fullPage: true });

    // 1b. Errors: next to the Generate button and in view (not below the fold), the last story gone.
    const errorShown = async (words, what) => {
      await page.waitForSelector('#error', { state: 'visible', timeout: 30000 });
      await page.waitForFunction(() => document.body.dataset.state === 'error', null, { timeout: 30000 });
      assert.match(await page.textContent('#error'), words, what);
      assert.equal(await page.textContent('#continuation'), '', what + ': the last story should be cleared');
      assert.equal(await page.locator('#token-log li').count(), 0, what);
      const place = await page.evaluate(() => {
        const b = document.getElementById('generate').getBoundingClientRect(), e = document.getElementById('error').getBoundingClientRect();
        return { sameRow: Math.abs((e.top + e.bottom) / 2 - (b.top + b.bottom) / 2) < b.height, inView: e.top >= 0 && e.bottom <= window.innerHeight,
                 sibling: document.getElementById('error').parentElement === document.getElementById('generate').parentElement };
      });
      assert.ok(place.sibling && place.sameRow && place.inView, what + ': the error is not next to the Generate button: ' + JSON.stringify(place));
    };
    await page.fill('#temperature', '500');
    await page.click('#generate');
    await errorShown(/Temperature/, 'a bad setting');
    await page.fill('#temperature', String(settings.temperature));
    await page.check('#prompt-ids');
    await page.fill('#prompt', '1 99999');
    await page.click('#generate');  // the server answers 400: not a token id
    await errorShown(/99999/, 'a refused request');
    await page.uncheck('#prompt-ids');

    // 2. Chat.
    const question = 'Tell me about a cat.';
    const wantChat = await post(port, '/v1/chat/completions', { messages: [{ role: 'user', content: question }], max_tokens: N, top_p: 1, min_p: 0, ...settings });
    assert.ok(wantChat.choices[0].message.content.length > 0, 'the reference chat reply is empty');
    assert.ok(await page.isVisible('#tab-chat'), 'the chat tab should show: the server has a chat template');
    await page.click('#tab-chat');
    await page.fill('#chat-input', question);
    await page.click('#chat-send');
    await page.waitForFunction(() => document.body.dataset.state !== 'running', null, { timeout: 30000 });
    assert.equal(await page.getAttribute('body', 'data-state'), 'done', await page.textContent('#error'));
    assert.equal(await page.textContent('.msg.user'), question);
    assert.equal(await page.textContent('.msg.assistant'), wantChat.choices[0].message.content);
    assert.ok(Number(await page.textContent('#stat-tokens')) > 0);
    await page.click('#tab-story');

    // 3. WebSerial, with a stand-in port whose bytes go to `mcullm serve --serial` on a pty.
    const board = startBoard();
    await page.exposeFunction('__serialWrite', (bytes) => { board.stdin.write(Buffer.from(bytes)); });
    board.stdout.on('data', (b) => { page.evaluate((bytes) => window.__serialIn(bytes), Array.from(b)).catch(() => {}); });
    await page.evaluate(() => {
      let feed;
      const readable = new ReadableStream({ start(c) { feed = c; } });
      window.__serialIn = (bytes) => feed.enqueue(new Uint8Array(bytes));
      const writable = new WritableStream({ write(chunk) { return window.__serialWrite(Array.from(chunk)); } });
      const port = { open: async () => {}, close: async () => {}, readable, writable };
      Object.defineProperty(navigator, 'serial', { value: { requestPort: async () => port } });
    });
    // Until the board has set its pty to raw mode (it says so on stderr), the pty would echo the G line.
    for (let i = 0; i < 200 && !readText(path.join(work, 'board.log')).includes('line protocol'); i++) await page.waitForTimeout(50);
    assert.ok(readText(path.join(work, 'board.log')).includes('line protocol'), 'the board did not start: ' + readText(path.join(work, 'board.log')));
    await generate(page, 'serial');
    const serialIds = (await page.locator('#token-log li').allTextContents()).map((t) => Number(t.split(' ')[0]));
    assert.deepEqual(serialIds, wantIds);
    assert.equal(await page.textContent('#continuation'), wantText);
    board.stdin.end();
  } finally {
    await browser.close();
  }
  console.log(`web_page_browser: ok (${want.usage.completion_tokens} tokens over HTTP and WebSerial, a chat reply; screenshot ${path.join(work, 'page.png')})`);
  for (const c of children) c.kill('SIGTERM');
  clearTimeout(deadline);
}

main().catch(fail);
