// perf.test.mjs: the dashboard stays usable on a 1M-event LLM trace (bench/gen_trace.c).
// Runs only with FP_PERF=1 (make test-browser-perf generates the trace and sets it):
// FP_PERF_TRACE the trace file. Measures, in a real browser against the real server:
//   session usable  goto session.html until the pictures, report, operators and kernels are drawn
//   timeline drawn  goto timeline.html until the first canvas picture; exact: its numbers too
//   zoom, pan       one W or D key until the new view is fetched, drawn and its numbers exact
//                   (median of 5 each; every view is new, so nothing comes from the reply cache)
//   search          Find "gemm", Next, until the match's details show
//   under load      the session page while 10 other pages load at once
// Writes tests/browser/out/perf.json and prints it; fails only past generous budgets.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BASE, OUT, launch, openPage, assertClean, shot, uploadApi } from './helpers.mjs';

const ON = process.env.FP_PERF === '1';
let browser, id;
const res = {};
before(async () => {
  if (!ON) return;
  assert.ok(process.env.FP_PERF_TRACE, 'FP_PERF_TRACE names the 1M-event trace');
  const t0 = performance.now();
  id = await uploadApi(process.env.FP_PERF_TRACE, 'perf llm 1M', ['suite:perf']);
  res.upload_s = (performance.now() - t0) / 1000;
  browser = await launch();
});
after(async () => {
  await browser?.close();
  if (ON) {
    writeFileSync(join(OUT, 'perf.json'), JSON.stringify(res, null, 2));
    console.log('perf:', JSON.stringify(res));
  }
});

const ms = (t0) => Math.round(performance.now() - t0);
const median = (a) => a.slice().sort((x, y) => x - y)[a.length >> 1];
async function sessionUsable(page) {
  await page.goto(`${BASE}/session.html?id=${id}`);
  for (const sel of ['#suspects-chart svg, #suspects-note:not(:empty)', '#steps-chart svg', '#busy-chart .busy-row', '#share-chart svg',
    '#report .report-line', '#operators tbody tr th', '#kernels tbody tr th'])
    await page.waitForSelector(sel, { state: 'attached', timeout: 60000 });
}
const ready = (page) => page.waitForFunction(() => document.getElementById('tl').dataset.state === 'ready', null, { timeout: 60000 });

test('1M-event session: time to usable, timeline drawn, zoom, pan, search', { skip: !ON, timeout: 600000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  let t0 = performance.now();
  await sessionUsable(page);
  res.session_usable_ms = ms(t0);
  await shot(page, 'perf-session.png');

  t0 = performance.now();
  await page.goto(`${BASE}/timeline.html?id=${id}`);
  await page.waitForFunction(() => document.getElementById('tl').dataset.drawn === '1', null, { timeout: 60000 });
  res.timeline_drawn_ms = ms(t0);
  await ready(page);
  res.timeline_exact_ms = ms(t0);

  await page.focus('#tl');
  const zooms = [], pans = [];
  for (let i = 0; i < 5; i++) {
    t0 = performance.now();
    await page.keyboard.press('w');
    await ready(page);
    zooms.push(ms(t0));
  }
  for (let i = 0; i < 5; i++) {
    t0 = performance.now();
    await page.keyboard.press('d');
    await ready(page);
    pans.push(ms(t0));
  }
  res.zoom_ms = zooms;
  res.zoom_median_ms = median(zooms);
  res.pan_ms = pans;
  res.pan_median_ms = median(pans);

  await page.fill('#search-q', 'gemm');
  t0 = performance.now();
  await page.click('#search-next');
  await page.waitForSelector('#details:not([hidden])', { timeout: 60000 });
  res.search_ms = ms(t0);
  await shot(page, 'perf-timeline.png');
  assertClean(problems, 'perf pages');
  await page.close();

  // ten pages at once (timelines of other windows and session pages), then one more to time
  const others = await Promise.all(Array.from({ length: 10 }, () => openPage(browser.context)));
  const loads = others.map(({ page: p }, i) => (i % 2 ? sessionUsable(p) : p.goto(`${BASE}/timeline.html?id=${id}`)));
  const probe = await openPage(browser.context);
  t0 = performance.now();
  await sessionUsable(probe.page);
  res.session_usable_under_load_10_ms = ms(t0);
  await Promise.all(loads);
  for (const o of [...others, probe]) await o.page.close();

  assert.ok(res.session_usable_ms < 10000, `session usable in ${res.session_usable_ms} ms`);
  assert.ok(res.timeline_drawn_ms < 10000, `timeline drawn in ${res.timeline_drawn_ms} ms`);
  assert.ok(res.zoom_median_ms < 5000 && res.pan_median_ms < 5000, `zoom ${res.zoom_median_ms} ms, pan ${res.pan_median_ms} ms`);
});
