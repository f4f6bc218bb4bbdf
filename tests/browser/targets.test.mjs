// The Targets page (targets.html): a real agent (firstpass-upload --target) beside the stand-in
// vLLM engine (tests/agent/engine.py: real torch.profiler traces on the CPU, flushed slowly),
// "Profile now" clicked on the page, the capture's progress followed to "uploaded", and its
// job opened from the page's link: one session a rank.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, openSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:net';
import { BASE, REPO, launch, openPage, assertClean, shot, apiGet } from './helpers.mjs';

const UPLOAD = process.env.FP_UPLOAD_BIN || join(REPO, 'build', 'firstpass-upload');
const TARGET = `browser-vllm-${process.pid}`;
const tmp = mkdtempSync(join(tmpdir(), 'fp-browser-targets-'));
let browser, engine, agent, port;

function freePort() {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); });
  });
}
async function until(fn, ms, what) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn().catch(() => null);
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

before(async () => {
  browser = await launch();
  port = await freePort();
  const log = openSync(join(tmp, 'engine.log'), 'w');
  engine = spawn('/usr/bin/python3', ['-B', join(REPO, 'tests', 'agent', 'engine.py'), '--mode', 'vllm', '--port', String(port),
    '--dir', join(tmp, 'traces'), '--ranks', '2', '--flush-seconds', '1.5'], { stdio: ['ignore', log, log] });
  await until(async () => (await fetch(`http://127.0.0.1:${port}/health`)).ok, 30000, 'the stand-in engine');
  const alog = openSync(join(tmp, 'agent.log'), 'w');
  agent = spawn(UPLOAD, ['--server', BASE, '--state', join(tmp, 'state'), '--settle', '0.3', '--agent', `browser-agent-${process.pid}`,
    '--model', 'tiny-mlp', '--target', `vllm=http://127.0.0.1:${port},dir=${join(tmp, 'traces')},name=${TARGET}`],
  { stdio: ['ignore', alog, alog], env: { ...process.env, FIRSTPASS_SPOOL: join(tmp, 'spool') } });
  await until(async () => (await apiGet('/api/v1/targets')).targets.some((t) => t.name === TARGET && t.online), 15000, 'the registration');
});
after(async () => {
  agent?.kill('SIGTERM');
  engine?.kill('SIGTERM');
  await browser?.close();
  rmSync(tmp, { recursive: true, force: true });
});

test('Profile now on the Targets page ends as a job with one session per rank', { timeout: 90000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/targets.html`);
  const row = page.locator('#targets tbody tr', { has: page.locator('th', { hasText: TARGET }) });
  await row.waitFor();
  assert.match(await row.innerText(), /online/);
  assert.match(await row.innerText(), /vllm/);
  await row.locator('input.cap-n').fill('1');
  const reply = page.waitForResponse((r) => r.url().endsWith('/api/v1/captures') && r.request().method() === 'POST');
  await row.getByRole('button', { name: 'Profile now' }).click();
  assert.equal((await reply).status(), 201);
  // the progress follows the capture: running/flushing, then uploaded with its job
  await page.locator('#progress-status').waitFor();
  const seen = new Set();
  const end = Date.now() + 60000;
  while (Date.now() < end) {
    const s = await page.locator('#progress-status').innerText();
    seen.add(s.split(':')[0]);
    if (s === 'uploaded' || s === 'failed') break;
    await page.waitForTimeout(150);
  }
  assert.ok(seen.has('uploaded'), `the capture did not land: ${[...seen]}; ${await page.locator('#progress').innerText()}`);
  assert.ok(seen.has('flushing') || seen.has('running'), `progress shown on the way: ${[...seen]}`);
  const link = page.locator('#job-link');
  await link.waitFor();
  const job = await link.innerText();
  assert.match(job, /^job capture-\d+$/);
  assert.match(await page.locator('#progress-result').innerText(), /2 sessions, one a rank/);
  await shot(page, 'targets.png');
  await link.click();
  await page.waitForFunction(() => document.querySelectorAll('#ranks tbody tr').length === 2);
  const ranks = await page.locator('#ranks tbody tr th').allInnerTexts();
  assert.deepEqual(ranks, ['0', '1']);
  const api = await apiGet('/api/v1/jobs/' + job.replace('job ', ''));
  assert.equal(api.ranks.length, 2);
  assertClean(problems, 'targets');
  await page.close();
});

test('a refusal shows the server\'s words on the page', { timeout: 30000 }, async () => {
  const { page } = await openPage(browser.context);
  await page.goto(`${BASE}/targets.html`);
  const row = page.locator('#targets tbody tr', { has: page.locator('th', { hasText: TARGET }) });
  await row.waitFor();
  await until(async () => !(await row.getByRole('button', { name: 'Profile now' }).isDisabled()), 20000, 'the button (the first capture ended)');
  const limit = (await apiGet('/api/v1/targets')).limits.max_seconds;
  await row.locator('input.cap-n').fill(String(limit + 1));
  await row.getByRole('button', { name: 'Profile now' }).click();
  const banner = page.locator('#banner');
  await banner.waitFor({ state: 'visible' });
  assert.match(await banner.innerText(), /--max-capture-seconds.*invalid_parameter, HTTP 400/);
  await page.close();
});
