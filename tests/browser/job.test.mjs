// The job page (job.html): a job's ranks side by side from GET /api/v1/jobs/{job}, the
// straggler marked; two real gloo ranks (tests/triage/torch/, rank 1 slowed on purpose).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BASE, REPO, launch, openPage, assertClean, shot, apiGet, parseTime, columnTexts, headerIndex } from './helpers.mjs';

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
