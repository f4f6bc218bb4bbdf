// The job page (job.html): a job's ranks side by side from GET /api/v1/jobs/{job}, the
// straggler marked; two real gloo ranks (tests/triage/torch/, rank 1 slowed on purpose).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BASE, REPO, TRACES, launch, openPage, assertClean, shot, apiGet, parseTime, columnTexts, headerIndex } from './helpers.mjs';

const JOB = `browser-job-${process.pid}`;
let browser;
const ids = [];
before(async () => {
  browser = await launch();
  for (const r of [0, 1]) {
    const body = readFileSync(join(REPO, 'tests', 'triage', 'torch', `gloo_rank${r}.json.gz`));
    const res = await fetch(`${BASE}/api/v1/sessions?name=gloo-${r}&label=job:${JOB}&label=rank:${r}`, { method: 'POST', body });
    assert.equal(res.status, 201);
    ids.push((await res.json()).id);
  }
});
after(async () => { await browser?.close(); });

test('the job page puts the ranks side by side and marks the straggler', { timeout: 60000 }, async () => {
  const job = await apiGet(`/api/v1/jobs/${encodeURIComponent(JOB)}`);
  assert.equal(job.straggler.rank, 1, 'the API names the slowed rank');
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/job.html?job=${encodeURIComponent(JOB)}`);
  await page.waitForFunction(() => document.querySelectorAll('#ranks tbody tr').length === 2);
  assert.deepEqual(await columnTexts(page, '#ranks', 0), ['0', '1']);
  const mi = await headerIndex(page, '#ranks', 'Step mean');
  const means = (await columnTexts(page, '#ranks', mi)).map(parseTime);
  job.ranks.forEach((r, i) => assert.ok(Math.abs(means[i] - r.steps.mean_us) <= r.steps.mean_us * 0.006, `rank ${i} step mean (three significant digits)`));
  const si = await headerIndex(page, '#ranks', 'Straggler');
  assert.deepEqual(await columnTexts(page, '#ranks', si), ['', 'yes']);
  const text = await page.locator('#straggler-text').innerText();
  assert.match(text, /^Straggler: rank 1 /);
  assert.ok(text.includes(`${Math.round(job.straggler.slower_by * 100)}%`), text);
  assert.ok((await page.locator('#phases tbody tr').count()) >= 1, 'phases per rank');
  await shot(page, 'job.png');
  assertClean(problems, 'job');
  await page.close();
});

test('the jobs list links each job', { timeout: 60000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/job.html`);
  await page.locator('#jobs a', { hasText: JOB }).first().waitFor();
  await page.locator('#jobs a', { hasText: JOB }).first().click();
  await page.waitForFunction(() => document.querySelectorAll('#ranks tbody tr').length === 2);
  assertClean(problems, 'jobs list');
  await page.close();
});

// A generated rank: one ProfilerStep per entry of own, each own[i] us of CPU work, then a 1 ms kernel.
function jitterRank(own) {
  const evs = [];
  let t = 0;
  own.forEach((w, s) => {
    const start = t;
    evs.push({ ph: 'X', cat: 'cpu_op', name: 'aten::work', pid: 1, tid: 1, ts: t + 10, dur: w });
    t += 10 + w;
    evs.push({ ph: 'X', cat: 'cpu_op', name: 'aten::mm', pid: 1, tid: 1, ts: t, dur: 30 });
    evs.push({ ph: 'X', cat: 'cuda_runtime', name: 'cudaLaunchKernel', pid: 1, tid: 1, ts: t + 5, dur: 10, args: { correlation: s + 1 } });
    evs.push({ ph: 'X', cat: 'kernel', name: 'gemm', pid: 0, tid: 7, ts: t + 20, dur: 1000, args: { device: 0, stream: 7, correlation: s + 1 } });
    t += 1100;
    evs.push({ ph: 'X', cat: 'user_annotation', name: `ProfilerStep#${s + 1}`, pid: 1, tid: 1, ts: start, dur: t - start });
  });
  return JSON.stringify({ traceEvents: evs });
}
async function jitterJob(name, a, b) {
  for (const [r, own] of [a, b].entries()) {
    const res = await fetch(`${BASE}/api/v1/sessions?label=job:${name}&label=rank:${r}`, { method: 'POST', body: jitterRank(own) });
    assert.equal(res.status, 201);
  }
  return apiGet(`/api/v1/jobs/${name}`);
}

test('issue 51 item 4: a straggler only beyond the steps\' spread, the split per rank, every column at 1440 px', { timeout: 90000 }, async () => {
  const noisy = await jitterJob(`noisy-${process.pid}`, [1000, 9000, 1000, 9000], [6000, 6000, 6000, 6000]);
  const clear = await jitterJob(`clear-${process.pid}`, [1000, 9000, 1000, 9000], [20000, 20000, 20000, 20000]);
  assert.equal(noisy.straggler, null);
  assert.equal(clear.straggler.verdict, 'beyond_noise');
  const { page, problems } = await openPage(browser.context);
  await page.setViewportSize({ width: 1440, height: 900 });
  await page.goto(`${BASE}/job.html?job=${encodeURIComponent(noisy.job)}`);
  await page.locator('#straggler-text').waitFor();
  assert.equal(await page.locator('#straggler-text').getAttribute('data-verdict'), 'within_noise');
  const t1 = await page.locator('#straggler-text').innerText();
  assert.match(t1, /^No straggler beyond the steps' own spread: rank 1 /);
  assert.ok(t1.includes(await page.evaluate((v) => FP.fmtTime(v), noisy.straggler_check.noise_us)), `${t1} quotes the API's noise bound`);
  await page.goto(`${BASE}/job.html?job=${encodeURIComponent(clear.job)}`);
  await page.locator('#straggler-text').waitFor();
  assert.equal(await page.locator('#straggler-text').getAttribute('data-verdict'), 'beyond_noise');
  assert.match(await page.locator('#straggler-text').innerText(), /^Straggler: rank 1 .*beyond the steps' own spread/);
  // the split: one stacked bar per rank, its parts the API's
  const rows = await page.$$eval('#split-chart g.row', (gs) => gs.map((g) => ({ total: Number(g.dataset.total),
    parts: Object.fromEntries([...g.querySelectorAll('rect')].map((r) => [r.dataset.key, Number(r.dataset.value)])) })));
  assert.equal(rows.length, 2);
  clear.ranks.forEach((r, i) => {
    assert.ok(Math.abs(rows[i].total - r.breakdown.step_us) < 0.5, `rank ${i}: the bar is its mean step`);
    assert.equal(rows[i].parts.compute, r.breakdown.compute_us);
    assert.equal(rows[i].parts.idle, r.breakdown.idle_us);
  });
  // every column of the ranks table on screen at 1440 px, without a horizontal scroll
  const right = await page.$$eval('#ranks thead th', (ths) => Math.max(...ths.map((th) => th.getBoundingClientRect().right)));
  assert.ok(right <= 1440, `the last column ends at ${right} px`);
  const si = await headerIndex(page, '#ranks', 'Straggler');
  assert.deepEqual(await columnTexts(page, '#ranks', si), ['', 'yes']);
  await shot(page, 'job-1440.png');
  assertClean(problems, 'job noise bound');
  await page.close();
});

test('issue 51 item 4: the collectives table reads the API\'s calls, bytes and bandwidths', { timeout: 90000 }, async () => {
  const name = `nccl-${process.pid}`;
  const body = readFileSync(join(TRACES, 'hta/nccl_parser_config/nccl_data.json.gz'));
  let res = await fetch(`${BASE}/api/v1/sessions?label=job:${name}&label=rank:0`, { method: 'POST', body });
  assert.equal(res.status, 201);
  res = await fetch(`${BASE}/api/v1/sessions?label=job:${name}&label=rank:1`, { method: 'POST', body: jitterRank([1000, 1000]) });
  assert.equal(res.status, 201);
  const job = await apiGet(`/api/v1/jobs/${name}`);
  assert.ok(job.collectives.length >= 2);
  const { page, problems } = await openPage(browser.context);
  await page.setViewportSize({ width: 1440, height: 900 });
  await page.goto(`${BASE}/job.html?job=${encodeURIComponent(name)}`);
  await page.waitForFunction((n) => document.querySelectorAll('#collectives tbody tr').length === n, job.collectives.length);
  assert.deepEqual(await columnTexts(page, '#collectives', 0), job.collectives.map((c) => c.collective));
  const calls = (await columnTexts(page, '#collectives', await headerIndex(page, '#collectives', 'Calls'))).map(Number);
  assert.deepEqual(calls, job.collectives.map((c) => c.calls));
  const bus = await columnTexts(page, '#collectives', await headerIndex(page, '#collectives', 'Bus bandwidth'));
  job.collectives.forEach((c, i) => {
    const v = Number(bus[i].replace(' GB/s', ''));
    assert.ok(Math.abs(v - c.busbw_gbps) <= (c.busbw_gbps < 10 ? 0.005 : 0.05), `${c.collective}: ${bus[i]} is ${c.busbw_gbps}`);
  });
  const bytes = await columnTexts(page, '#collectives', await headerIndex(page, '#collectives', 'Bytes'));
  const fmt = await page.evaluate((b) => b.map((x) => FP.fmtMem(x)), job.collectives.map((c) => c.bytes));
  assert.deepEqual(bytes, fmt);
  const right = await page.$$eval('#collectives thead th', (ths) => Math.max(...ths.map((th) => th.getBoundingClientRect().right)));
  assert.ok(right <= 1440, `the last column ends at ${right} px`);
  await shot(page, 'job-collectives.png');
  assertClean(problems, 'collectives');
  await page.close();
});
