// Links into the trace (issue 51, item 3): each finding on the session page (the top suspect,
// a suspect bar, a step bar, an idle-gap row, a kernel row, an efficiency row) opens the
// timeline at its window with its event selected, and the timeline's view (start, end,
// selection, tracks) lives in its address, so a pasted address opens the same view. Every
// check reads the page and compares with the API. Trace: ResNet50, num_workers=0 (tb-profiler's
// sample: a data-loading suspect, six steps, idle gaps, kernels, a V100's roofs).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, T2, launch, openPage, assertClean, shot, uploadApi, apiGet } from './helpers.mjs';

let browser, id;
before(async () => {
  browser = await launch();
  id = await uploadApi(T2.resnet, 'links-resnet', ['suite:links']);
});
after(async () => { await browser?.close(); });

// The timeline after a link: ready, its selection's ref, its view and its address.
async function landed(page, { selected = true } = {}) {
  await page.waitForURL(/timeline\.html/);
  await page.waitForFunction(() => document.getElementById('tl').dataset.state === 'ready');
  if (selected) await page.waitForFunction(() => !!document.getElementById('tl').dataset.sel);
  // the address is written back (debounced) once the view settles
  await page.waitForFunction(() => location.search === (document.getElementById('tl').dataset.address || '').slice('timeline.html'.length));
  return page.evaluate(() => {
    const d = document.getElementById('tl').dataset;
    return { sel: d.sel || null, s: Number(d.viewStart), e: Number(d.viewEnd), url: location.href,
             name: document.querySelector('#details .ev-name')?.textContent ?? null };
  });
}
async function session(page) {
  await page.goto(`${BASE}/session.html?id=${id}`);
  await page.locator('#next-timeline').waitFor();
}
const event = (ref) => apiGet(`/api/v1/sessions/${id}/events?ref=${encodeURIComponent(ref)}`).then((j) => j.event);
const within = (ev, v) => ev.ts_us < v.e && ev.ts_us + ev.dur_us > v.s;

test('the top suspect opens the timeline with its culprit selected', { timeout: 90000 }, async () => {
  const sus = await apiGet(`/api/v1/sessions/${id}/suspects`);
  const top = sus.suspects[0];
  const { page, problems } = await openPage(browser.context);
  await session(page);
  assert.equal(await page.locator('#next-culprit').innerText(), top.culprit);
  await page.locator('#next-timeline').click();
  const t = await landed(page);
  const ev = await event(t.sel);
  assert.equal(ev.name, top.culprit, 'the selected event is the culprit');
  assert.equal(t.name, top.culprit, 'the details name it');
  assert.ok(within(ev, t), `the view ${t.s}..${t.e} shows it (${ev.ts_us}+${ev.dur_us})`);
  // the first instance: none earlier in the session
  const prev = await apiGet(`/api/v1/sessions/${id}/events?q=${encodeURIComponent(top.culprit)}&match=exact&dir=prev&ref=${encodeURIComponent(ev.ref)}`);
  assert.equal(prev.event, null, 'the first instance');
  const u = new URL(t.url);
  assert.equal(u.searchParams.get('sel'), ev.ref, 'the address holds the selection');
  assert.ok(Number(u.searchParams.get('start')) <= ev.ts_us && Number(u.searchParams.get('end')) >= ev.ts_us + ev.dur_us, 'and the window');
  await shot(page, 'links-suspect.png');
  assertClean(problems, 'suspect link');
  await page.close();
});

test('each suspect bar links its culprit', { timeout: 60000 }, async () => {
  const sus = await apiGet(`/api/v1/sessions/${id}/suspects`);
  const { page, problems } = await openPage(browser.context);
  await session(page);
  const hrefs = await page.$$eval('#suspects-chart a', (as) => as.map((a) => a.getAttribute('href')));
  assert.equal(hrefs.length, sus.suspects.length, 'one link a suspect');
  hrefs.forEach((h, i) => assert.equal(new URL(h, BASE).searchParams.get('find'), sus.suspects[i].culprit));
  await page.locator('#suspects-chart a').first().click();
  const t = await landed(page);
  assert.equal((await event(t.sel)).name, sus.suspects[0].culprit);
  assertClean(problems, 'suspect bar');
  await page.close();
});

test('a step bar opens its step, the ProfilerStep range selected', { timeout: 60000 }, async () => {
  const st = await apiGet(`/api/v1/sessions/${id}/steps`);
  const step = st.steps[1];
  const { page, problems } = await openPage(browser.context);
  await session(page);
  await page.locator('#steps-chart a', { hasText: step.name }).click();
  const t = await landed(page);
  assert.ok(Math.abs(t.s - step.start_us) < 1 && Math.abs(t.e - (step.start_us + step.dur_us)) < 1,
    `view ${t.s}..${t.e} is the step ${step.start_us}+${step.dur_us}`);
  const ev = await event(t.sel);
  assert.equal(ev.name, step.name, 'its own range, not the next step\'s');
  // tb-profiler's step starts where the last step's GPU work ended: its range opened before
  assert.ok(within(ev, t), `the range ${ev.ts_us}+${ev.dur_us} is in view`);
  assertClean(problems, 'step link');
  await page.close();
});

test('an idle-gap row opens the gap, the host operator at its end selected', { timeout: 60000 }, async () => {
  const g = await apiGet(`/api/v1/sessions/${id}/gpu`);
  const gap = g.devices[0].gaps.largest[0];
  const { page, problems } = await openPage(browser.context);
  await session(page);
  const link = page.locator('#gpu table').filter({ hasText: 'largest idle gaps' }).locator('tbody tr').first().locator('a.tl-link');
  await link.click();
  const t = await landed(page, { selected: !!gap.host_op });
  assert.ok(t.s <= gap.start_us && t.e >= gap.start_us + gap.dur_us, 'the whole gap in view');
  assert.ok(t.e - t.s <= gap.dur_us * 2 + 10.001, 'and not much more');
  if (gap.host_op) {
    const ev = await event(t.sel);
    assert.equal(ev.name, gap.host_op);
    assert.ok(ev.ts_us <= gap.start_us + gap.dur_us, 'running by the gap\'s end');
  }
  assertClean(problems, 'gap link');
  await page.close();
});

test('a kernel row and an efficiency row select their first call', { timeout: 90000 }, async () => {
  const k = await apiGet(`/api/v1/sessions/${id}/kernels?sort=total_us&limit=50`);
  const { page, problems } = await openPage(browser.context);
  await session(page);
  const kname = await page.locator('#kernels tbody tr').first().locator('th .name').getAttribute('title');
  assert.equal(kname, k.kernels[0].name, 'the top kernel row is the API\'s');
  await page.locator('#kernels tbody tr').first().locator('a.tl-link').click();
  let t = await landed(page);
  let ev = await event(t.sel);
  assert.equal(ev.name, k.kernels[0].name);
  assert.equal(ev.cat, 'kernel');
  assert.ok(within(ev, t));

  const eff = await apiGet(`/api/v1/sessions/${id}/efficiency`);
  await session(page);
  await page.locator('#effic tbody tr a.tl-link').first().waitFor();
  const row = page.locator('#effic tbody tr').first();
  const href = await row.locator('a.tl-link').getAttribute('href');
  const opName = new URL(href, BASE).searchParams.get('find');
  assert.ok((eff.operators || []).some((o) => o.name === opName), `${opName} is an efficiency row of the API`);
  await row.locator('a.tl-link').click();
  t = await landed(page);
  ev = await event(t.sel);
  assert.equal(ev.name, opName);
  assertClean(problems, 'kernel and efficiency links');
  await page.close();
});

test('the address holds the view: a pasted address opens the same view, selection and tracks', { timeout: 90000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/timeline.html?id=${id}`);
  await page.waitForFunction(() => document.getElementById('tl').dataset.state === 'ready');
  await page.locator('#zoom-in').click();
  await page.locator('#zoom-in').click();
  await page.locator('#pan-right').click();
  await page.fill('#search-q', 'aten::conv2d');
  await page.locator('#search-next').click();
  await page.waitForFunction(() => !!document.getElementById('tl').dataset.sel);
  const before = (await page.locator('#tracks tbody tr').count());
  await page.locator('#tracks tbody tr').last().locator('button.hide-track').click();
  // the address is rewritten 120 ms after the click (debounced): landed() alone could read the
  // address of the view before it, which already matched the location
  await page.waitForFunction(() => (document.getElementById('tl').dataset.address || '').includes('tracks='));
  const t = await landed(page);
  const u = new URL(t.url);
  assert.equal(u.searchParams.get('sel'), t.sel);
  assert.equal(u.searchParams.get('tracks').split(',').length, before - 1);
  const p2 = await browser.context.newPage();
  await p2.goto(t.url);
  const t2 = await landed(p2);
  assert.equal(t2.sel, t.sel, 'same selection');
  assert.ok(Math.abs(t2.s - t.s) < 0.01 && Math.abs(t2.e - t.e) < 0.01, `same view ${t2.s}..${t2.e} vs ${t.s}..${t.e}`);
  assert.equal(await p2.locator('#tracks tbody tr').count(), before - 1, 'same tracks');
  assert.equal((await event(t2.sel)).name.toLowerCase().includes('aten::conv2d'), true);
  await p2.locator('#all-tracks').click();
  await p2.waitForFunction((n) => document.querySelectorAll('#tracks tbody tr').length === n, before);
  await shot(p2, 'links-pasted.png');
  assertClean(problems, 'pasted address');
  await p2.close();
  await page.close();
});

test('the job page\'s straggler opens its step on the timeline; a rank\'s session links its job and back', { timeout: 90000 }, async () => {
  const JOB = `links-job-${process.pid}`;
  const { readFileSync } = await import('node:fs');
  const { join } = await import('node:path');
  const { REPO } = await import('./helpers.mjs');
  const sids = [];
  for (const r of [0, 1]) {
    const body = readFileSync(join(REPO, 'tests', 'triage', 'torch', `gloo_rank${r}.json.gz`));
    const res = await fetch(`${BASE}/api/v1/sessions?name=links-gloo-${r}&label=job:${JOB}&label=rank:${r}`, { method: 'POST', body });
    assert.equal(res.status, 201);
    sids.push((await res.json()).id);
  }
  const job = await apiGet(`/api/v1/jobs/${JOB}`);
  const strag = job.ranks.find((r) => r.session_id === job.straggler.session_id);
  const { page, problems } = await openPage(browser.context);
  // a rank's session page names its job, and the job page names the rank's session
  await page.goto(`${BASE}/session.html?id=${sids[1]}`);
  await page.locator('#to-job').click();
  await page.waitForURL(/job\.html\?job=/);
  await page.waitForFunction(() => document.querySelectorAll('#ranks tbody tr').length === 2);
  const back = await page.$$eval('#ranks tbody a', (as) => as.map((a) => a.getAttribute('href')));
  assert.ok(back.includes(`session.html?id=${sids[1]}`), `the job page links rank 1's session back: ${back}`);
  await page.locator('#straggler-timeline').click();
  const t = await landed(page);
  assert.equal(new URL(t.url).searchParams.get('id'), String(job.straggler.session_id), 'the straggler\'s own trace');
  const ev = (await apiGet(`/api/v1/sessions/${job.straggler.session_id}/events?ref=${encodeURIComponent(t.sel)}`)).event;
  const range = strag.steps.range;
  assert.ok(range.endsWith('*') ? ev.name.startsWith(range.slice(0, -1)) : ev.name === range, `${ev.name} is a step (${range})`);
  assertClean(problems, 'job links');
  await page.close();
});

test('an area selection gives Perfetto\'s summary: per track and by name, the API\'s numbers', { timeout: 90000 }, async () => {
  const st = await apiGet(`/api/v1/sessions/${id}/steps`);
  const step = st.steps[2];
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/timeline.html?id=${id}&start=${step.start_us}&end=${step.start_us + step.dur_us}`);
  await page.waitForFunction(() => document.getElementById('tl').dataset.state === 'ready');
  // shift+drag across the middle half of the plot
  const box = await page.locator('#tl').boundingBox();
  const x0 = box.x + 180 + (box.width - 180) * 0.25, x1 = box.x + 180 + (box.width - 180) * 0.75, y = box.y + 60;
  await page.keyboard.down('Shift');
  await page.mouse.move(x0, y);
  await page.mouse.down();
  await page.mouse.move((x0 + x1) / 2, y, { steps: 4 });
  await page.mouse.move(x1, y, { steps: 4 });
  await page.mouse.up();
  await page.keyboard.up('Shift');
  await page.waitForFunction(() => document.getElementById('area').dataset.state === 'ready');
  const a = await page.evaluate(() => ({ ...document.getElementById('area').dataset }));
  const s = Number(a.start), e = Number(a.end);
  const mid = step.start_us + step.dur_us / 2;
  assert.ok(s < mid && e > mid && e - s > step.dur_us * 0.4 && e - s < step.dur_us * 0.6, `the area ${s}..${e} is the middle half of the step`);
  const j = await apiGet(`/api/v1/sessions/${id}/area?start_us=${s}&end_us=${e}&names=10`);
  assert.equal(Number(a.count), j.count, 'the event count is the API\'s');
  const names = await page.$$eval('#area-names tbody th .name', (xs) => xs.map((x) => x.getAttribute('title')));
  assert.deepEqual(names, j.names.map((n) => n.name), 'the names, longest first');
  const tracks = await page.locator('#area-tracks tbody tr').count();
  assert.equal(tracks, j.tracks.length);
  const tl = await apiGet(`/api/v1/sessions/${id}/timeline?start_us=${s}&end_us=${e}&buckets=1`);
  assert.equal(j.count, tl.tracks.reduce((x, t) => x + t.count, 0), 'as many events as the timeline counts in the area');
  // the button: the view itself
  await page.locator('#area-view').click();
  await page.waitForFunction((n) => document.getElementById('area').dataset.state === 'ready' && document.getElementById('area').dataset.count !== n, a.count);
  const v = await page.evaluate(() => ({ ...document.getElementById('area').dataset, vs: document.getElementById('tl').dataset.viewStart }));
  assert.equal(Number(v.start), Number(v.vs));
  await shot(page, 'links-area.png');
  assertClean(problems, 'area selection');
  await page.close();
});

test('counter tracks: GPU busy per slice from /busy and allocated memory from /memory, under the tracks', { timeout: 60000 }, async () => {
  const mem = await apiGet(`/api/v1/sessions/${id}/memory`);
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/timeline.html?id=${id}`);
  await page.waitForFunction(() => document.getElementById('tl').dataset.state === 'ready' && document.getElementById('tl').dataset.counters !== undefined);
  const ids = (await page.evaluate(() => document.getElementById('tl').dataset.counters)).split(',');
  assert.ok(ids.includes('counter:busy:0'), `a GPU busy counter: ${ids}`);
  for (const d of mem.devices.filter((x) => x.samples.length)) assert.ok(ids.includes(`counter:mem:${d.device}`), `a memory counter for ${d.device}`);
  // hover the memory counter at its peak: the tooltip reads the API's peak
  const d = mem.devices.find((x) => x.device === 'cuda:0');
  const v = await page.evaluate(() => ({ s: Number(document.getElementById('tl').dataset.viewStart), e: Number(document.getElementById('tl').dataset.viewEnd) }));
  const box = await page.locator('#tl').boundingBox();
  const rows = JSON.parse(await page.evaluate(() => document.getElementById('tl').dataset.counterRows));
  const row = rows.find((r) => r.id === 'counter:mem:cuda:0');
  const x = box.x + 180 + (box.width - 180) * ((d.peak_ts_us - v.s) / (v.e - v.s)) + 1;
  await page.mouse.move(x, box.y + row.y + row.h / 2);
  await page.locator('#tip').waitFor();
  const tip = await page.locator('#tip').innerText();
  assert.ok(tip.includes('cuda:0 memory allocated'), tip);
  const fmt = await page.evaluate((b) => FP.fmtMem(b), d.peak_bytes);
  assert.ok(tip.includes(`peak: ${fmt}`), `${tip} names the API's peak ${fmt}`);
  // the busy counter over the whole session: its slices are /busy's
  const busyRow = rows.find((r) => r.id === 'counter:busy:0');
  assert.ok(busyRow, 'a busy row');
  assertClean(problems, 'counters');
  await page.close();
});

test('named slices at mid zoom: a bucket track names its wide events, as the server sends them', { timeout: 60000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/timeline.html?id=${id}`);
  await page.waitForFunction(() => document.getElementById('tl').dataset.state === 'ready');
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
  const named = JSON.parse(await page.evaluate(() => document.getElementById('tl').dataset.namedSlices || '[]'));
  const v = await page.evaluate(() => ({ s: Number(document.getElementById('tl').dataset.viewStart), e: Number(document.getElementById('tl').dataset.viewEnd) }));
  const tl = await apiGet(`/api/v1/sessions/${id}/timeline?start_us=${v.s}&end_us=${v.e}&buckets=1000`);
  const main = tl.tracks.find((t) => t.mode === 'buckets' && (t.slices || []).length);
  assert.ok(main, 'a bucketed track with slices in the whole session');
  const names = new Set(tl.tracks.flatMap((t) => (t.slices || []).map((x) => x.name)));
  assert.ok(named.length >= 3, `named slices drawn: ${named}`);
  for (const n of named) assert.ok(names.has(n), `${n} is a slice of the API`);
  assert.ok(named.some((n) => /^ProfilerStep#\d+$/.test(n)), 'the steps are named');
  for (const x of main.slices) assert.ok(x.dur_us >= ((v.e - v.s) / 1000) * 8 - 1e-6, 'only wide events');
  await shot(page, 'links-slices.png');
  assertClean(problems, 'named slices');
  await page.close();
});

test('a tail suspect opens its window; "(untraced)" selects nothing and says nothing is missing', { timeout: 60000 }, async () => {
  const { T } = await import('./helpers.mjs');
  const sid = await uploadApi(T.base, 'links-tail', ['suite:links']);
  const [sus, s] = await Promise.all([apiGet(`/api/v1/sessions/${sid}/suspects`), apiGet(`/api/v1/sessions/${sid}`)]);
  const tail = sus.suspects.find((x) => x.category === 'tail' && x.evidence && x.evidence.tail_us > 0);
  if (!tail) return; // the trace has no tail suspect: nothing to follow
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/session.html?id=${sid}`);
  const i = sus.suspects.indexOf(tail);
  const link = page.locator('#suspects-chart a').nth(i);
  await link.waitFor();
  await link.click();
  const t = await landed(page, { selected: !tail.culprit.startsWith('(') });
  assert.ok(Math.abs(t.s - (s.end_us - tail.evidence.tail_us)) < 1 && Math.abs(t.e - s.end_us) < 1, `the tail's window ${t.s}..${t.e}`);
  assert.equal(await page.locator('#search-status').innerText(), '', 'no "not found"');
  assertClean(problems, 'tail link');
  await page.close();
});
