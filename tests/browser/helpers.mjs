// helpers.mjs: what every browser test shares.
//   FP_BASE_URL  the server under test (run.sh starts it and sets this)
//   FP_TRACES    the real traces (default: <repo root>/../shared/data/traces)
import { chromium } from 'playwright-core';
import { mkdtempSync, mkdirSync, rmSync, existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';

const here = dirname(fileURLToPath(import.meta.url));
export const REPO = resolve(here, '..', '..');
export const BASE = process.env.FP_BASE_URL || 'http://127.0.0.1:8080';
export const TRACES = process.env.FP_TRACES || resolve(REPO, '..', 'shared', 'data', 'traces');
export const OUT = join(here, 'out');
mkdirSync(OUT, { recursive: true });

export const T = {
  small: join(TRACES, 'hta/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz'),
  big: join(TRACES, 'hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz'),
  base: join(TRACES, 'hta/trace_compare/base/base.json.gz'),
  test: join(TRACES, 'hta/trace_compare/test/test.json.gz'),
};
export const T2 = {
  cpuOnly: join(TRACES, 'hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz'),
  amd: join(TRACES, 'hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz'),
  resnet: join(TRACES, 'kineto_tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz'),
};
// Uploads a trace straight to the API (no page); returns the new session id.
export async function uploadApi(file, name, labels = []) {
  const q = new URLSearchParams({ name });
  for (const l of labels) q.append('label', l);
  const r = await fetch(`${BASE}/api/v1/sessions?${q}`, { method: 'POST', body: readFileSync(file) });
  const j = await r.json();
  assert.equal(r.status, 201, `upload ${file}: ${JSON.stringify(j)}`);
  return j.id;
}
for (const [k, p] of Object.entries({ ...T, ...T2 })) {
  if (!existsSync(p)) throw new Error(`trace ${k} not found at ${p} (set FP_TRACES)`);
}

const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'];

// A browser with a fresh profile directory; close() also removes the profile.
export async function launch() {
  const profile = mkdtempSync(join(tmpdir(), 'fp-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ARGS,
    viewport: { width: 1400, height: 900 },
  });
  context.setDefaultTimeout(20000);
  return {
    context,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

// A page that records console errors, uncaught exceptions, failed requests and HTTP >= 400.
export async function openPage(context) {
  const page = await context.newPage();
  const problems = [];
  // Leaving a page aborts what it still fetches (the session page's trend chart loads last):
  // a request in flight when the page starts navigating elsewhere (page.goto, a link) may end
  // in ERR_ABORTED without anything being wrong. So may one the old page starts after the
  // navigation request and before the new page commits (framenavigated): its request event
  // can come after the navigation's (a CI run, 2026-12-06: the session page's /report,
  // aborted by a goto, counted as failed). Every other failed request is a problem.
  const inflight = new Set(), leaving = new WeakSet();
  let navigating = false;
  page.on('request', (r) => {
    if (r.isNavigationRequest() && r.frame() === page.mainFrame()) {
      navigating = true;
      for (const x of inflight) leaving.add(x);
    } else if (navigating) leaving.add(r);
    inflight.add(r);
  });
  page.on('framenavigated', (f) => { if (f === page.mainFrame()) navigating = false; });
  page.on('requestfinished', (r) => inflight.delete(r));
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console error: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('requestfailed', (r) => {
    inflight.delete(r);
    if (leaving.has(r) && r.failure()?.errorText === 'net::ERR_ABORTED') return;
    problems.push(`request failed: ${r.method()} ${r.url()} ${r.failure()?.errorText}`);
  });
  page.on('response', (r) => { if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.request().method()} ${r.url()}`); });
  page.on('dialog', (d) => d.accept()); // tests that need another answer register their own first
  return { page, problems };
}

export function assertClean(problems, where) {
  assert.deepEqual(problems, [], `${where}: console errors or failed requests`);
}

export async function shot(page, name) {
  await page.screenshot({ path: join(OUT, name), fullPage: true });
}

// Upload one trace through the sessions page's file input; returns the new session id.
export async function uploadThroughPage(page, file, labels) {
  if (!page.url().includes('index.html')) {
    await page.goto(`${BASE}/index.html`);
  }
  if (labels) await page.fill('#upload-labels', labels);
  const reply = page.waitForResponse((r) => r.url().includes('/api/v1/sessions?') && r.request().method() === 'POST',
                                     { timeout: 60000 });
  await page.setInputFiles('#file', file);
  const res = await reply;
  // (the reply body is not read through the browser's inspector: it may be evicted already)
  assert.equal(res.status(), 201, `upload of ${file}: HTTP ${res.status()}`);
  const status = page.locator('#upload-status').filter({ hasText: /as session \d+\./ });
  await status.waitFor();
  const id = Number(/as session (\d+)\./.exec(await status.innerText())[1]);
  assert.ok(id > 0);
  return id;
}

export async function apiGet(path) {
  const r = await fetch(BASE + path);
  const text = await r.text();
  assert.ok(r.ok, `GET ${path}: HTTP ${r.status} ${text.slice(0, 300)}`);
  return JSON.parse(text);
}

// Inverses of the page's formatters, for checking the order of rendered cells.
export function parseTime(s) {
  const m = /^(-?[\d.]+)(s|ms|us|µs)$/.exec(s.trim());
  if (!m) return NaN;
  return Number(m[1]) * (m[2] === 's' ? 1e6 : m[2] === 'ms' ? 1e3 : 1);
}
export function parseMem(s) {
  const m = /^(-?[\d.]+) (GB|MB|KB|B|Gb|Mb|Kb|b)$/.exec(s.trim());
  if (!m) return NaN;
  return Number(m[1]) * { GB: 2 ** 30, MB: 2 ** 20, KB: 2 ** 10, B: 1, Gb: 2 ** 30, Mb: 2 ** 20, Kb: 2 ** 10, b: 1 }[m[2]];
}
// The page's time format (three significant digits), to compare an API value with a cell.
export function fmt3(us) {
  const a = Math.abs(us);
  const sig = (v) => v.toFixed(Math.abs(v) >= 100 || v === 0 ? 0 : Math.abs(v) >= 10 ? 1 : 2);
  if (a >= 1e6) return sig(us / 1e6) + 's';
  if (a >= 999.5) return sig(us / 1e3) + 'ms';
  return sig(us) + 'µs';
}
// 1 when a displayed time (three significant digits) stands for the value us.
export function sameTime(text, us) {
  return Math.abs(parseTime(text) - us) <= 0.006 * Math.abs(us) + 0.006;
}
export function parseCount(s) { return Number(s.replace(/,/g, '')); }
export function parsePct(s) { return Number(s.replace('%', '')); }

export function isSorted(values, dir) {
  for (let i = 1; i < values.length; i++) {
    if (dir === 'descending' ? values[i] > values[i - 1] : values[i] < values[i - 1]) return false;
  }
  return true;
}

// Texts of column `col` (0-based, counting the row header) of a table's body rows.
export async function columnTexts(page, tableSel, col) {
  return page.$$eval(`${tableSel} tbody tr`, (trs, c) => trs.map((tr) => tr.children[c]?.textContent ?? ''), col);
}
// Full names of a table's first column: the title of its short .name (hover), else the text.
export async function nameColumn(page, tableSel) {
  return page.$$eval(`${tableSel} tbody tr`, (trs) => trs.map((tr) => {
    const n = tr.children[0]?.querySelector('.name');
    return n ? n.getAttribute('title') : tr.children[0]?.textContent ?? '';
  }));
}
export async function headerIndex(page, tableSel, label) {
  const labels = await page.$$eval(`${tableSel} thead th`, (ths) => ths.map((th) => th.textContent.replace(/[▲▼]/g, '').trim()));
  const i = labels.indexOf(label);
  assert.ok(i >= 0, `header "${label}" not in ${tableSel}: ${labels.join(' | ')}`);
  return i;
}
