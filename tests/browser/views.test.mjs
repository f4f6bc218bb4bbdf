// views.test.mjs: the pictures and views of issue 20, each checked against the API it draws:
// suspects, steps, GPU busy over time, operator shares, the trace questions, memory, kernels;
// timeline select/flow/search/resize/keys; the sessions list's sort, label filter and pick-two.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, T, T2, launch, openPage, assertClean, shot, apiGet, uploadApi, headerIndex, columnTexts } from './helpers.mjs';

let browser;
const id = {};
const tag = `views-${process.pid}`;
before(async () => {
  browser = await launch();
  id.resnet = await uploadApi(T2.resnet, `${tag} resnet`, [`suite:${tag}`, `model:${tag}`]);
  id.big = await uploadApi(T.big, `${tag} big`, [`suite:${tag}`]);
});
after(async () => { await browser?.close(); });

const near = (a, b, what) => assert.ok(Math.abs(a - b) <= 1e-6 * Math.max(1, Math.abs(b)), `${what}: ${a} vs ${b}`);
const pct = (f) => `${(f * 100).toFixed(1)}%`;

test('session pictures: suspects, questions, steps by role, GPU busy over time, operator shares', { timeout: 60000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/session.html?id=${id.resnet}`);
  const sus = await apiGet(`/api/v1/sessions/${id.resnet}/suspects`);
  await page.waitForSelector('#suspects-chart rect.bar');
  const bars = await page.$$eval('#suspects-chart rect.bar', (rs) => rs.map((r) => Number(r.dataset.value)));
  assert.equal(bars.length, sus.suspects.length, 'one bar per suspect');
  sus.suspects.forEach((x, i) => near(bars[i], x.at_stake_us, `suspect ${i} at stake`));
  const answers = await page.$$eval('#questions li', (ls) => ls.map((l) => [l.dataset.question, l.dataset.answer]));
  assert.deepEqual(answers, Object.entries(sus.questions).map(([k, v]) => [k, v.answer]));

  const st = await apiGet(`/api/v1/sessions/${id.resnet}/steps`);
  await page.waitForSelector('#steps-chart g.row');
  const parts = (sel) => page.$$eval(sel, (gs) => gs.map((g) => Object.fromEntries([...g.querySelectorAll('rect')].map((r) => [r.dataset.key, Number(r.dataset.value)]))));
  // the mean step first, then a bar per step; the phases (totals over the window) in a chart of their own
  const rows = await parts('#steps-chart g.row');
  assert.equal(rows.length, 1 + st.steps.length, 'the mean and a bar per step');
  [st.mean, ...st.steps].forEach((s, i) => {
    for (const k of st.roles) near(rows[i][k] || 0, s[`${k}_us`], `${s.name || 'mean'} ${k}`);
  });
  const prow = await parts('#steps-phases-chart g.row');
  assert.equal(prow.length, st.phases.length, 'a bar per phase');
  st.phases.forEach((s, i) => { for (const k of st.roles) near(prow[i][k] || 0, s[`${k}_us`], `${s.name} ${k}`); });
  // every label of the bar charts is inside its picture: a phase's "name ×count" once ran
  // past the left edge and was cut ("ptimizer.ze…")
  const cut = await page.$$eval('svg.chart text.lbl', (ts) => ts.filter((t) => t.getBBox().x < 0).map((t) => t.textContent));
  assert.deepEqual(cut, [], 'labels cut at the left edge');

  const busy = await apiGet(`/api/v1/sessions/${id.resnet}/busy?buckets=60`);
  await page.waitForSelector('#busy-chart rect.col', { state: 'attached' });
  const cols = await page.$$eval('#busy-chart .busy-row', (rs) => rs.map((r) => [...r.querySelectorAll('rect.col')].map((c) => Number(c.dataset.value))));
  busy.devices.forEach((d, i) => d.buckets.forEach((v, j) => near(cols[i][j], v, `device ${d.device} slice ${j}`)));
  const gpu = await apiGet(`/api/v1/sessions/${id.resnet}/gpu`);
  const fromSlices = cols[0].reduce((a, v) => a + v, 0) * busy.wall_us / 60;
  assert.ok(Math.abs(fromSlices - gpu.devices[0].busy_us) < 1e-3 * gpu.wall_us, 'the picture adds up to the GPU busy time');
  assert.ok((await page.locator('#busy-note').innerText()).includes(pct(busy.devices[0].busy_fraction)));

  const ops = await apiGet(`/api/v1/sessions/${id.resnet}/operators?limit=1`);
  const share = await page.$$eval('#share-chart rect.bar', (rs) => rs.map((r) => Number(r.dataset.value)));
  near(share.reduce((a, v) => a + v, 0), ops.totals.self_cuda_time_total_us, 'operator shares add up to the GPU time');
  await shot(page, 'session-pictures.png');
  assertClean(problems, 'session pictures');
  await page.close();
});

test('memory view and kernel view', { timeout: 60000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/session.html?id=${id.resnet}`);
  const mem = await apiGet(`/api/v1/sessions/${id.resnet}/memory`);
  await page.waitForSelector('#memory .mem-dev');
  const devs = await page.$$eval('#memory .mem-dev', (ds) => ds.map((d) => [d.dataset.device, d.querySelector('dd').textContent, Number(d.querySelector('circle.peak').dataset.value)]));
  const mb = (b) => { const G = 2 ** 30, M = 2 ** 20, K = 1024, a = Math.abs(b), s = (v) => v.toFixed(Math.abs(v) >= 100 ? 0 : Math.abs(v) >= 10 ? 1 : 2);
    return a >= G ? `${s(b / G)} GB` : a >= M ? `${s(b / M)} MB` : a >= K ? `${s(b / K)} KB` : `${b} B`; };
  mem.devices.forEach((d, i) => {
    assert.equal(devs[i][0], d.device);
    assert.equal(devs[i][1], mb(d.peak_bytes), `${d.device} peak`);
    assert.equal(devs[i][2], Math.max(...d.samples.map((s) => s[1])), `${d.device}: the marked peak is the highest sample`);
  });
  const topName = await page.$eval('#mem-ops tbody tr th .name', (n) => n.getAttribute('title'));
  const want = mem.top_operators.slice(0, 15).sort((a, b) => b.self_cuda_memory_usage_bytes - a.self_cuda_memory_usage_bytes)[0].name;
  assert.equal(topName, want, 'top allocating operator first');

  const k = (await apiGet(`/api/v1/sessions/${id.resnet}/kernels?sort=total_us&limit=50`)).kernels;
  const cell = async (label) => columnTexts(page, '#kernels', await headerIndex(page, '#kernels', label));
  const [bps, occ, eff, tc] = [await cell('Blocks/SM'), await cell('Est. occupancy'), await cell('SM efficiency'), await cell('Tensor cores')];
  k.forEach((r, i) => {
    assert.equal(bps[i], r.blocks_per_sm === null ? '—' : r.blocks_per_sm.toFixed(2), `${r.name} blocks/SM`);
    assert.equal(occ[i], r.est_occupancy === null ? '—' : pct(r.est_occupancy), `${r.name} occupancy`);
    assert.equal(eff[i], r.est_sm_efficiency === null ? '—' : pct(r.est_sm_efficiency), `${r.name} SM efficiency`);
    assert.equal(tc[i], r.tensor_core ? 'yes' : 'no', `${r.name} tensor cores`);
  });
  await page.locator('#memory-section').screenshot({ path: `${process.env.FP_OUT || 'tests/browser/out'}/session-memory.png` });
  assertClean(problems, 'memory and kernels');
  await page.close();
});

async function ready(page) {
  await page.waitForFunction(() => document.getElementById('tl').dataset.state === 'ready', null, { timeout: 30000 });
}
const viewOf = (page) => page.evaluate(() => ({ s: Number(document.getElementById('tl').dataset.viewStart), e: Number(document.getElementById('tl').dataset.viewEnd) }));

test('timeline: search next/prev in the API order, select with all args, launch flow arrow', { timeout: 90000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/timeline.html?id=${id.big}`);
  await ready(page);
  const P = `/api/v1/sessions/${id.big}/events`;
  const start = await viewOf(page);
  const a = await apiGet(`${P}?q=sgemm&ts_us=${start.s}`);
  const b = await apiGet(`${P}?q=sgemm&ref=${a.event.ref}`);
  await page.fill('#search-q', 'sgemm');
  const status = () => page.locator('#search-status').getAttribute('data-ref');
  await page.click('#search-next');
  await page.waitForFunction((r) => document.getElementById('search-status').dataset.ref === r, a.event.ref);
  await page.click('#search-next');
  await page.waitForFunction((r) => document.getElementById('search-status').dataset.ref === r, b.event.ref);
  await page.click('#search-prev');
  await page.waitForFunction((r) => document.getElementById('search-status').dataset.ref === r, a.event.ref);
  assert.equal(await status(), a.event.ref);
  const d = await page.locator('#details').innerText();
  assert.ok(d.includes(a.event.name));
  for (const [k, v] of Object.entries(a.event.args)) assert.ok(d.includes(k) && d.includes(typeof v === 'object' ? JSON.stringify(v) : String(v)), `arg ${k}`);
  assert.ok(d.includes(`Launched by ${a.launched_by.name}`), 'the runtime call that launched it');
  await page.waitForFunction(() => Number(document.getElementById('tl').dataset.flows) >= 1);
  // follow the flow back: the call's details list the kernel it launches
  await page.click('#details a.flow-link');
  await page.waitForFunction((r) => document.getElementById('details').dataset.ref === r, a.launched_by.ref);
  const back = await page.locator('#details').innerText();
  assert.ok(back.includes(`Launches ${a.event.name}`), back);
  assert.ok(!/\bnull\b|undefined/.test(back), `no stray null in the details: ${back}`);
  await shot(page, 'timeline-select-flow.png');

  // click-select on the canvas: zoom to the kernel, click its middle
  await page.focus('#tl');
  assertClean(problems, 'timeline search and select');
  await page.close();
});

test('timeline: W/A/S/D zoom and pan; a track resizes by its bottom edge; click selects', { timeout: 90000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/timeline.html?id=${id.big}`);
  await ready(page);
  await page.focus('#tl');
  const v0 = await viewOf(page);
  await page.keyboard.press('w');
  const v1 = await viewOf(page);
  near(v1.e - v1.s, (v0.e - v0.s) / 2, 'W halves the span');
  await page.keyboard.press('d');
  const v2 = await viewOf(page);
  near(v2.s - v1.s, (v1.e - v1.s) * 0.2, 'D pans right by a fifth');
  await page.keyboard.press('a');
  near((await viewOf(page)).s, v1.s, 'A pans back');
  await page.keyboard.press('s');
  near((await viewOf(page)).e - (await viewOf(page)).s, v0.e - v0.s, 'S zooms out');
  await ready(page);
  // resize: drag the first track's bottom edge down 40 px
  const h0 = await page.evaluate(() => document.getElementById('tl').clientHeight);
  const box = await page.locator('#tl').boundingBox();
  let edge = -1;
  for (let y = 60; y < box.height; y++) {
    await page.mouse.move(box.x + 100, box.y + y);
    if (await page.evaluate(() => document.getElementById('tl').style.cursor === 'row-resize')) { edge = y; break; }
  }
  assert.ok(edge > 0, 'a track edge shows the resize cursor');
  await page.mouse.down();
  await page.mouse.move(box.x + 100, box.y + edge + 40, { steps: 4 });
  await page.mouse.up();
  const h1 = await page.evaluate(() => document.getElementById('tl').clientHeight);
  assert.ok(h1 >= h0 + 35, `the canvas grew with the track: ${h0} -> ${h1}`);
  // click an event: zoom far in, then click where kernel green is drawn
  for (let i = 0; i < 10; i++) await page.keyboard.press('w');
  await ready(page);
  const at = await page.evaluate(() => {
    const c = document.getElementById('tl'), dpr = window.devicePixelRatio || 1, ctx = c.getContext('2d');
    for (let y = 0; y < c.height; y += 2) {
      const row = ctx.getImageData(0, y, c.width, 1).data;
      for (let x = 200 * dpr; x < c.width; x += 4) if (row[x * 4] === 0x59 && row[x * 4 + 1] === 0xa1 && row[x * 4 + 2] === 0x4f) return [x / dpr, y / dpr];
    }
    return null;
  });
  assert.ok(at, 'a kernel is drawn');
  const reply = page.waitForResponse((r) => r.url().includes('/events?'));
  await page.mouse.click(box.x + at[0] + 1, box.y + at[1] + 1);
  const j = await (await reply).json();
  assert.ok(j.event, 'the click names an event');
  await page.waitForSelector('#details:not([hidden])');
  assert.ok((await page.locator('#details .ev-name').innerText()) === j.event.name);
  await shot(page, 'timeline-click.png');
  assertClean(problems, 'timeline keys and resize');
  await page.close();
});

test('sessions list: sortable columns, a label click filters, pick two to compare', { timeout: 60000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/index.html`);
  await page.waitForFunction(() => document.querySelectorAll('#sessions tbody a.session-link').length > 1);
  const di = await headerIndex(page, '#sessions', 'Duration');
  await page.click('#sessions thead button.sort[data-key="duration_us"]');
  const list = (await apiGet('/api/v1/sessions?limit=1000')).sessions;
  const dur = new Map(list.map((s) => [`session.html?id=${s.id}`, s.duration_us]));
  const shown = (await page.$$eval('#sessions tbody a.session-link', (as) => as.map((a) => a.getAttribute('href')))).map((h) => dur.get(h));
  for (let i = 1; i < shown.length; i++) assert.ok(shown[i] <= shown[i - 1], `longest first: ${shown}`);
  assert.equal((await columnTexts(page, '#sessions', di)).length, shown.length);
  await page.click(`#sessions tbody button.badge.label:text-is("model:${tag}")`);
  await page.waitForFunction(() => document.getElementById('f-label').value.startsWith('model:views-'));
  await page.waitForFunction(() => document.querySelectorAll('#sessions tbody a.session-link').length === 1);
  assert.equal(await page.getAttribute('#sessions tbody a.session-link', 'href'), `session.html?id=${id.resnet}`);
  await page.click('#filters button[type=reset]');
  await page.waitForFunction(() => document.querySelectorAll('#sessions tbody a.session-link').length > 1);
  await page.check(`#sessions input.pick[data-id="${id.resnet}"]`);
  await page.check(`#sessions input.pick[data-id="${id.big}"]`);
  await page.click('#compare-picked');
  await page.waitForURL(/compare\.html/);
  const u = new URL(page.url());
  assert.deepEqual([u.searchParams.get('base'), u.searchParams.get('head')], [String(Math.min(id.resnet, id.big)), String(Math.max(id.resnet, id.big))]);
  await shot(page, 'compare-picked.png');
  assertClean(problems, 'sessions list');
  await page.close();
});
