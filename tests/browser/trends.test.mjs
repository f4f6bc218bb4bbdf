// The session page's trend chart (static/trend.js): this session's top operator in the last
// sessions with the same labels, from GET /api/v1/trends, with exact values from synthetic traces.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, launch, openPage, assertClean, shot } from './helpers.mjs';

const ev = (name, cat, ts, dur, args = {}, pid = 1, tid = 1) => ({ ph: 'X', cat, name, pid, tid, ts, dur, args });

// 4 x aten::mm (one "gemm" kernel of mmUs each) and addCalls x aten::add (no kernel) in a 10 ms step.
function kineto(mmUs, addCalls = 5, withMm = true) {
  const evs = [ev('decode', 'user_annotation', 0, 10000)];
  for (let i = 0; withMm && i < 4; i++) {
    const ts = 100 + i * 2000;
    evs.push(ev('aten::mm', 'cpu_op', ts, 500), ev('cudaLaunchKernel', 'cuda_runtime', ts + 1, 2, { correlation: 10 + i }),
      ev('gemm', 'kernel', ts + 3, mmUs, { correlation: 10 + i, device: 0, stream: 7 }, 0, 7));
  }
  for (let i = 0; i < addCalls; i++) evs.push(ev('aten::add', 'cpu_op', 600 + i * 10, 5));
  return JSON.stringify({ schemaVersion: 1, traceEvents: evs });
}

async function upload(body, name, labels) {
  const q = new URLSearchParams([['name', name], ...labels.map((l) => ['label', l])]);
  const r = await fetch(`${BASE}/api/v1/sessions?${q}`, { method: 'POST', body });
  const text = await r.text();
  assert.equal(r.status, 201, text);
  return JSON.parse(text).id;
}

let browser;
const ids = [];
const suite = `trend-${process.pid}-${Date.now()}`;
before(async () => {
  browser = await launch();
  const labels = [`suite:${suite}`, 'model:tiny'];
  ids.push(await upload(kineto(1000), 't0', labels));
  ids.push(await upload(kineto(0, 7, false), 't1-no-mm', labels)); // a gap in the aten::mm line
  ids.push(await upload(kineto(1500), 't2', labels));
  await upload(kineto(9000), 'other-labels', [`suite:${suite}`, 'model:other']); // not in the chart
  ids.push(await upload(kineto(2000, 9), 't3', labels));
});
after(async () => { await browser?.close(); });

const dots = (page) => page.$$eval('#trend-chart svg circle', (cs) => cs.map((c) => [Number(c.dataset.sessionId), Number(c.dataset.value),
  c.classList.contains('current')]));

test('trend chart: top operator over the sessions with the same labels, gaps, metric and operator choice', { timeout: 60000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  const head = ids[3];
  await page.goto(`${BASE}/session.html?id=${head}`);
  await page.waitForFunction(() => document.querySelectorAll('#trend-chart svg circle').length > 0);
  assert.equal(await page.inputValue('#trend-op'), 'aten::mm', 'the top operator by CUDA total is preselected');
  const opts = await page.$$eval('#trend-op option', (os) => os.map((o) => o.value));
  assert.ok(!opts.includes('decode'), `annotations are not offered: ${opts}`);
  // 4 sessions, oldest first. t1 has no aten::mm: no dot, and the line breaks there (t0 alone
  // draws no segment; t2 -> t3 is the one polyline).
  assert.deepEqual(await dots(page), [[ids[0], 4000, false], [ids[2], 6000, false], [ids[3], 8000, true]]);
  assert.equal(await page.locator('#trend-chart svg polyline').count(), 1);
  const summary = await page.locator('#trend-summary').innerText();
  assert.match(summary, /in the last 4 sessions labelled model:tiny suite:/);
  assert.match(summary, /this session 8\.00ms; min 4\.00ms, max 8\.00ms; 1 without this operator/);
  // Other dots link to their sessions.
  assert.equal(await page.locator(`#trend-chart svg a[href="session.html?id=${ids[0]}"] circle`).count(), 1);
  await shot(page, 'trend-cuda.png');

  await page.selectOption('#trend-metric', 'calls');
  await page.waitForFunction(() => document.querySelector('#trend-summary').textContent.includes('# of Calls'));
  assert.deepEqual((await dots(page)).map((d) => d[1]), [4, 4, 4]);

  await page.selectOption('#trend-op', 'aten::add');
  await page.waitForFunction(() => document.querySelector('#trend-summary').textContent.startsWith('aten::add'));
  assert.deepEqual(await dots(page), [[ids[0], 5, false], [ids[1], 7, false], [ids[2], 5, false], [ids[3], 9, true]]);
  assert.equal(await page.locator('#trend-chart svg polyline').count(), 1);
  await shot(page, 'trend-calls.png');
  assertClean(problems, 'session page with trend');
  await page.close();
});
