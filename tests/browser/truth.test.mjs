// truth.test.mjs: the dashboard's numbers and words are the server's (issue 20, "Wrong today").
// Each test failed against the static/ of 413e454 (before the fix); the commit says how.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, T, T2, launch, openPage, assertClean, shot, apiGet, uploadApi, parseCount } from './helpers.mjs';

let browser;
const id = {};
const tag = `truth-${process.pid}`;
before(async () => {
  browser = await launch();
  id.big = await uploadApi(T.big, `${tag} big`, [`suite:${tag}`]);
  id.small = await uploadApi(T.small, `${tag} simple add`, [`suite:${tag}`, `one:${tag}`]);
  id.cpu = await uploadApi(T2.cpuOnly, `${tag} cpu only`, [`suite:${tag}`]);
  id.amd = await uploadApi(T2.amd, `${tag} rocm`, [`suite:${tag}`]);
});
after(async () => { await browser?.close(); });

const pct = (f) => `${(f * 100).toFixed(1)}%`;
const fmtInt = (n) => Math.round(n).toLocaleString('en-US');
async function ready(page) {
  await page.waitForFunction(() => document.getElementById('tl').dataset.state === 'ready', null, { timeout: 30000 });
}
const viewOf = (page) => page.evaluate(() => ({ s: Number(document.getElementById('tl').dataset.viewStart), e: Number(document.getElementById('tl').dataset.viewEnd) }));

test('timeline: busy and event counts are the exact ones, whole session and zoomed in', { timeout: 90000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/timeline.html?id=${id.big}`);
  await ready(page);
  const busy = await apiGet(`/api/v1/sessions/${id.big}/busy`);
  const tl = await apiGet(`/api/v1/sessions/${id.big}/timeline?buckets=1`);
  const glance = await page.locator('#glance').innerText();
  // this session's GPU is 4.5% idle; gpu_user_annotation ranges once made it read "busy 100%"
  assert.ok(glance.includes(`busy ${pct(busy.devices[0].busy_fraction)}`), glance);
  assert.ok(!/busy 100\.0%/.test(glance), glance);
  assert.ok(glance.includes(`${fmtInt(tl.gpu_events)} GPU events`), `exact GPU events ${tl.gpu_events}: ${glance}`);
  const cells = await page.$$eval('#tracks tbody tr', (trs) => trs.map((tr) => [tr.children[0].textContent, tr.children[2].textContent]));
  tl.tracks.forEach((t, i) => assert.equal(parseCount(cells[i][1]), t.count, `${t.id} events in view`));
  // zoomed in: event mode used to count depth 0 only ("1 GPU events")
  await page.focus('#tl');
  for (let i = 0; i < 9; i++) await page.keyboard.press('w');
  await ready(page);
  const v = await viewOf(page);
  const z = await apiGet(`/api/v1/sessions/${id.big}/timeline?start_us=${v.s}&end_us=${v.e}&buckets=1`);
  const zb = await apiGet(`/api/v1/sessions/${id.big}/busy?start_us=${v.s}&end_us=${v.e}`);
  const g2 = await page.locator('#glance').innerText();
  assert.ok(g2.includes(`${fmtInt(z.gpu_events)} GPU event${z.gpu_events === 1 ? "" : "s"}`) && g2.includes(`busy ${pct(zb.devices[0].busy_fraction)}`), `${g2} vs ${z.gpu_events}`);
  await shot(page, 'truth-timeline-zoomed.png');
  assertClean(problems, 'timeline counts');
  await page.close();
});

test('timeline: ticks and the range stay distinct at a 1 µs zoom', { timeout: 90000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/timeline.html?id=${id.big}`);
  await ready(page);
  await page.focus('#tl');
  for (let i = 0; i < 19; i++) await page.keyboard.press('w'); // 495 ms / 2^19 ≈ 1 µs
  await ready(page);
  const v = await viewOf(page);
  assert.ok(v.e - v.s < 5, `zoomed to ${v.e - v.s} µs`);
  const ticks = (await page.locator('#tl').getAttribute('data-ticks') || '').split('|').filter(Boolean);
  assert.ok(ticks.length >= 2, `ticks drawn: ${ticks}`);
  assert.equal(new Set(ticks).size, ticks.length, `every tick reads differently: ${ticks}`);
  const r = await page.locator('#range').innerText();
  const [a, b] = r.split(' (')[0].split(' – ');
  assert.notEqual(a, b, `the range's ends differ: ${r}`);
  await shot(page, 'truth-timeline-1us.png');
  assertClean(problems, 'timeline ticks');
  await page.close();
});

test('the idle-gap counts of the session page and the timeline say what they count', { timeout: 60000 }, async () => {
  const gpu = await apiGet(`/api/v1/sessions/${id.big}/gpu`);
  const n = gpu.devices[0].gaps.count, largest = gpu.devices[0].gaps.largest.length;
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/session.html?id=${id.big}`);
  const def = page.locator('#gpu .gap-def');
  await def.waitFor();
  const t = await def.innerText();
  assert.ok(t.includes(`all ${fmtInt(n)}`) && t.includes(`the ${largest} largest`) && /5µs/.test(t), t);
  await page.goto(`${BASE}/timeline.html?id=${id.big}`);
  await ready(page);
  const g = await page.locator('#glance').innerText();
  assert.ok(g.includes(`${fmtInt(n)} gaps of 5µs or more in all`), g);
  assertClean(problems, 'gap words');
  await page.close();
});

test('sessions: Load more appears only with a next page and never repeats a row; substring search', { timeout: 60000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  // this file's four sessions only (label), so that the other suites' uploads cannot move rows
  await page.goto(`${BASE}/index.html?limit=2&label=suite:${tag}`);
  await page.waitForFunction(() => document.querySelectorAll('#sessions tbody a.session-link').length > 0);
  const api = (await apiGet(`/api/v1/sessions?limit=4&label=suite:${tag}`)).sessions.map((s) => `session.html?id=${s.id}`);
  const hrefs = () => page.$$eval('#sessions tbody a.session-link', (as) => as.map((a) => a.getAttribute('href')));
  assert.deepEqual(await hrefs(), api.slice(0, 2));
  assert.ok(await page.locator('#more').isVisible(), 'a next page: Load more shown');
  await page.click('#more');
  await page.waitForFunction(() => document.querySelectorAll('#sessions tbody a.session-link').length >= 4);
  assert.deepEqual(await hrefs(), api, 'the next page, each row once');
  await page.goto(`${BASE}/index.html?label=suite:${tag}`);
  await page.waitForFunction(() => document.querySelectorAll('#sessions tbody a.session-link').length === 4);
  assert.equal(await page.locator('#more').isVisible(), false, 'no next page: no Load more');
  await page.fill('#f-name', 'CPU ONL');
  await page.waitForFunction(() => [...document.querySelectorAll('#sessions tbody a.session-link')].length === 1, null, { timeout: 10000 });
  assert.deepEqual(await hrefs(), [`session.html?id=${id.cpu}`]);
  assert.match(await page.getAttribute('#file', 'accept'), /\.sqlite/, 'the picker takes nsys .sqlite exports');
  assertClean(problems, 'sessions list');
  await page.close();
});

test('trend: the page keeps its width, the y label whole, one point labelled once', { timeout: 60000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/session.html?id=${id.small}`);
  await page.waitForSelector('#trend-chart svg circle');
  const w = await page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(w <= 1420, `page ${w}px wide with 2 KiB kernel names in the dropdown`);
  const labels = await page.$$eval('#trend-chart svg text', (ts) => ts.map((t) => ({ s: t.textContent, x: t.getBBox().x })));
  for (const l of labels) assert.ok(l.x >= 0, `label "${l.s}" starts inside the chart (${l.x})`);
  const under = labels.filter((l) => /session|#/.test(l.s)).map((l) => l.s);
  assert.deepEqual(under, [`session ${id.small}`], `one point, one label: ${under}`);
  assertClean(problems, 'trend');
  await page.close();
});

test('kernel names: short, distinct, whole on hover; report and evidence in words', { timeout: 60000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/session.html?id=${id.small}`);
  await page.waitForSelector('#kernels tbody tr th .name');
  const k = (await apiGet(`/api/v1/sessions/${id.small}/kernels?limit=50`)).kernels;
  const shown = await page.$$eval('#kernels tbody tr th .name', (ns) => ns.map((n) => [n.textContent, n.getAttribute('title')]));
  assert.deepEqual(shown.map((x) => x[1]), k.map((x) => x.name), 'full names on hover, in order');
  assert.equal(new Set(shown.map((x) => x[0])).size, new Set(k.map((x) => x.name)).size, 'distinct names stay distinct');
  for (const [s] of shown) assert.ok(s.length <= 90, `short name: ${s.length} chars`);
  await page.waitForSelector('#report .report-line');
  const lines = await page.$$eval('#report .text', (ts) => ts.map((t) => t.innerText));
  for (const l of lines) for (const x of k) if (x.name.length > 80) assert.ok(!l.includes(x.name), `a report line prints ${x.name.length} chars of a name`);
  const ev = await page.$$eval('#smells dd', (ds) => ds.map((d) => d.textContent));
  for (const t of ev) assert.ok(!/[{}"]|\d\.\d{5,}/.test(t), `evidence in words, no JSON or float noise: ${t}`);
  await shot(page, 'truth-kernels.png');
  assertClean(problems, 'names');
  await page.close();
});

test('CPU-only traces: no CUDA columns, sorted by CPU total; ROCm traces say GPU', { timeout: 60000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/session.html?id=${id.cpu}`);
  await page.waitForSelector('#operators thead th');
  const h = await page.$$eval('#operators thead th', (ths) => ths.map((t) => [t.textContent.replace(/[▲▼]/g, '').trim(), t.getAttribute('aria-sort')]));
  assert.ok(!h.some(([t]) => /CUDA|GPU/.test(t)), `no GPU columns: ${h.map((x) => x[0])}`);
  assert.deepEqual(h.filter((x) => x[1]).map((x) => x[0]), ['CPU total']);
  await page.waitForSelector('#phases thead th');
  await page.waitForSelector('#trend-chart svg');
  const more = await page.$$eval('#phases thead th, #trend-metric option, #mem-ops thead th', (es) => es.map((e) => e.textContent).join(' | '));
  assert.ok(!/CUDA|GPU/.test(more), `phases, trend metric and memory: no GPU words on a CPU-only trace: ${more}`);
  assert.equal(await page.$eval('#trend-metric', (x) => x.value), 'cpu_time_total');
  await shot(page, 'truth-cpu-only.png');
  await page.goto(`${BASE}/session.html?id=${id.amd}`);
  await page.waitForSelector('#operators thead th');
  await page.waitForSelector('#report .report-line');
  const text = await page.$$eval('#operators thead th, #report .key, #trend-metric option, #share-h', (es) => es.map((e) => e.textContent).join(' | '));
  assert.ok(!/CUDA/.test(text), `AMD: no "CUDA" in headers and labels: ${text}`);
  assert.match(text, /Self GPU/);
  // the compare page, an AMD session against itself (it said "CUDA total" before this fix)
  await page.goto(`${BASE}/compare.html?base=${id.amd}&head=${id.amd}`);
  await page.waitForSelector('#cmp-summary tbody tr');
  await page.waitForSelector('#cmp-ops thead th');
  const cmp = await page.$$eval('#cmp-summary th, #summary dt, #cmp-ops thead th', (es) => es.map((e) => e.textContent).join(' | '));
  assert.ok(!/CUDA/.test(cmp), `AMD compare: no "CUDA": ${cmp}`);
  assert.match(cmp, /GPU time total/);
  assertClean(problems, 'cpu-only and rocm');
  await page.close();
});

test('a missing session shows one message and nothing broken under it', { timeout: 60000 }, async () => {
  const { page } = await openPage(browser.context);
  for (const p of ['session', 'timeline']) {
    await page.goto(`${BASE}/${p}.html?id=987654`);
    const m = page.locator('#missing');
    await m.waitFor();
    assert.match(await m.innerText(), /There is no session 987654/);
    assert.equal(await page.locator('#banner').isVisible(), false, `${p}: no second message in the banner`);
    const visible = await page.$$eval('main > *', (es) => es.filter((e) => e.offsetParent !== null).map((e) => e.id || e.tagName));
    assert.deepEqual(visible.sort(), ['missing', 'title'].sort(), `${p}: only the title and the message`);
    await shot(page, `truth-missing-${p}.png`);
  }
  await page.close();
});
