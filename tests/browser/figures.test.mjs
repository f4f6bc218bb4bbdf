// figures.test.mjs: issue 42, "one figure, one value, on every surface", on the page. Each number
// is read from the page (its text, or the data-value a mark carries) and compared with the API
// reply it is drawn from, formatted by the page's own formatters (static/app.js, loaded here).
//   - the first screen answers "what next" (item 8), the step chart's mean and shares (item 8)
//   - memory from the trace's own Total Allocated / Reserved (item 2)
//   - no runtime call in the GPU-time share chart, gloo's all_reduce as communication (item 7)
//   - labels cut with an ellipsis, whole on hover, inside their picture (item 8)
//   - the baselines page, jobs in the navigation and the job's overlap, each request once (item 9)
//   - the page part of the cross-surface check: every real trace's session page against the API
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { BASE, REPO, TRACES, launch, openPage, assertClean, shot, apiGet, uploadApi } from './helpers.mjs';

// The page's formatters, not a copy: a figure is compared as the page prints it.
const FP = new Function(`${readFileSync(join(REPO, 'static', 'app.js'), 'utf8')}; return FP;`)();

const tag = `figures-${process.pid}`;
const R = {
  nw0: 'kineto_tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz',
  nw4: 'kineto_tb_plugin/samples/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz',
  df: 'hta/df_index_resolver/df_index_resolver.json.gz',
  clover: 'pipit_nsys/perlmutter-cloverleaf-cuda.sqlite',
  cpu: 'hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz',
  cupti: 'hta/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz',
};
function realTraces(dir = TRACES) {
  const out = [];
  for (const f of readdirSync(dir).sort()) {
    const p = join(dir, f);
    if (statSync(p).isDirectory()) out.push(...realTraces(p));
    else if (/\.(json\.gz|json|sqlite)$/.test(f)) out.push(relative(TRACES, p));
  }
  return out;
}
let browser;
const id = {};
before(async () => {
  browser = await launch();
  for (const rel of realTraces()) id[rel] = await uploadApi(join(TRACES, rel), `${tag} ${rel.split('/').pop().slice(0, 40)}`, [`suite:${tag}`]);
}, { timeout: 240000 });
after(async () => { await browser?.close(); });

const near = (a, b, what, rel = 1e-9) => assert.ok(Math.abs(a - b) <= rel * Math.max(1, Math.abs(b)), `${what}: ${a} vs ${b}`);
async function sessionPage(rel) {
  const { page, problems } = await openPage(browser.context);
  await page.setViewportSize({ width: 1440, height: 900 });
  const urls = [];
  page.on('request', (r) => urls.push(r.url().replace(BASE, '')));
  await page.goto(`${BASE}/session.html?id=${id[rel]}`);
  await page.waitForSelector('#report .report-line');
  await page.waitForLoadState('networkidle');
  return { page, problems, urls };
}

test('the first screen answers "what next": the top suspect in full, at stake per step and of the wall, its next experiment, above the fold at 1440x900', { timeout: 90000 }, async () => {
  for (const rel of [R.nw0, R.nw4, R.df, R.clover]) {
    const { page, problems } = await sessionPage(rel);
    const sus = await apiGet(`/api/v1/sessions/${id[rel]}/suspects`);
    const top = sus.suspects[0];
    await page.waitForSelector('#next-culprit');
    assert.equal(await page.locator('#next-culprit').innerText(), top.culprit, `${rel}: the culprit whole`);
    assert.equal(await page.locator('#next-experiment').innerText(), top.next_experiment, `${rel}: its next experiment`);
    const stake = page.locator(top.at_stake_per_step_us === null ? '#next-once' : '#next-per-step');
    near(Number(await stake.getAttribute('data-value')), top.at_stake_per_step_us ?? top.at_stake_us, `${rel} at stake`);
    assert.ok((await stake.innerText()).startsWith(FP.fmtTime(top.at_stake_per_step_us ?? top.at_stake_us)));
    near(Number(await page.locator('#next-share').getAttribute('data-value')), top.at_stake_fraction, `${rel} share of the wall`);
    assert.equal(await page.locator('#next-share').innerText(), `${FP.fmtPct(top.at_stake_fraction)} of the wall`);
    // above the fold: the whole box within the first 900 px, the culprit not cut
    const box = await page.locator('#next').boundingBox();
    assert.ok(box && box.y >= 0 && box.y + box.height <= 900, `${rel}: "what next" ends at ${box && box.y + box.height}px`);
    const cut = await page.$eval('#next-culprit', (e) => e.scrollWidth > e.clientWidth + 1);
    assert.ok(!cut, `${rel}: the culprit is not cut`);
    if (rel === R.nw0) await shot(page, 'figures-first-screen.png');
    assertClean(problems, `first screen ${rel}`);
    await page.close();
  }
});

test('the step chart: the mean step, each role\'s share of it (tb-profiler\'s), the phases apart from the per-step bars', { timeout: 60000 }, async () => {
  const { page, problems } = await sessionPage(R.nw0);
  const st = await apiGet(`/api/v1/sessions/${id[R.nw0]}/steps`);
  await page.waitForSelector('#steps-chart g.row.mean');
  near(Number(await page.locator('#step-mean').getAttribute('data-value')), st.mean.dur_us, 'mean step');
  assert.equal(await page.locator('#step-mean').innerText(), `Mean step ${FP.fmtTime(st.mean.dur_us)}`);
  near(Number(await page.locator('#steps-chart g.row.mean').getAttribute('data-total')), st.mean.dur_us, 'the mean bar', 1e-9);
  // tb-profiler's published shares of the Average Step Time (kineto 4b3b2ed2, tb_plugin/test/result_check_file.txt)
  const tb = { kernel: '55.51%', memcpy: '1.08%', memset: '0.05%', runtime: '1.64%', data_loading: '33.37%', cpu_exec: '7.70%', other: '0.65%' };
  const legend = Object.fromEntries(await page.$$eval('#steps-chart .legend span', (ss) => ss.map((s) => [s.dataset.key, s.querySelector('.share')?.textContent.trim() ?? ''])));
  for (const [k, want] of Object.entries(tb)) {
    assert.ok(legend[k].startsWith(want), `${k}: ${legend[k]} against tb-profiler's ${want}`);
    assert.ok(legend[k].startsWith(FP.fmtShare(st.mean[`${k}_us`], st.mean.dur_us)), `${k}: the API's share`);
  }
  // the per-step chart holds the mean and the steps only: no phase total (416 ms) on the steps' axis
  const labels = await page.$$eval('#steps-chart g.row', (gs) => gs.map((g) => g.dataset.label));
  assert.deepEqual(labels, ['mean step', ...st.steps.map((s) => s.name)]);
  const totals = await page.$$eval('#steps-phases-chart g.row', (gs) => gs.map((g) => Number(g.dataset.total)));
  st.phases.forEach((p, i) => near(totals[i], p.dur_us, `phase ${p.name}`, 1e-9));
  assertClean(problems, 'step chart');
  await page.close();
});

test('memory: allocated and reserved from the trace\'s own Total Allocated and Total Reserved, peak and when', { timeout: 60000 }, async () => {
  const { page, problems } = await sessionPage(R.df);
  const mem = await apiGet(`/api/v1/sessions/${id[R.df]}/memory`);
  await page.waitForSelector('#memory .mem-dev');
  const cuda = mem.devices.find((d) => d.device === 'cuda:1');
  // the figures: 6.17 GiB allocated at the peak, 11.9 GiB reserved
  assert.equal(FP.fmtMem(cuda.peak_bytes), '6.17 GB');
  assert.equal(FP.fmtMem(cuda.reserved_peak_bytes), '11.9 GB');
  const facts = await page.$$eval('#memory .mem-dev[data-device="cuda:1"] dt', (dts) => Object.fromEntries(dts.map((dt) => [dt.textContent, dt.nextElementSibling.textContent])));
  assert.equal(facts['peak allocated'], '6.17 GB');
  assert.equal(facts['peak reserved'], '11.9 GB');
  const start = (await apiGet(`/api/v1/sessions/${id[R.df]}`)).start_us;
  assert.equal(facts['peak allocated at'], FP.fmtTime(cuda.peak_ts_us - start));
  assert.equal(facts['peak reserved at'], FP.fmtTime(cuda.reserved_peak_ts_us - start));
  const peaks = await page.$eval('#memory .mem-dev[data-device="cuda:1"] svg', (s) => [Number(s.querySelector('circle.peak').dataset.value), Number(s.querySelector('circle.peak2').dataset.value)]);
  assert.deepEqual(peaks, [cuda.peak_bytes, cuda.reserved_peak_bytes]);
  assertClean(problems, 'memory');
  await page.close();
});

test('pictures do not contradict the text: no runtime call in the GPU time, gloo\'s all_reduce is communication', { timeout: 60000 }, async () => {
  for (const rel of [R.clover, R.nw0]) {
    const { page, problems } = await sessionPage(rel);
    await page.waitForSelector('#share-chart rect.bar');
    const bars = await page.$$eval('#share-chart rect.bar', (rs) => rs.map((r) => [r.dataset.label, Number(r.dataset.value), r.querySelector('title').textContent]));
    const ops = await apiGet(`/api/v1/sessions/${id[rel]}/operators?limit=10000`);
    const runtime = new Set(ops.operators.filter((o) => /^cuda_(runtime|driver)$/.test(o.kind)).map((o) => o.name));
    for (const [label, , title] of bars) assert.ok(![...runtime].some((n) => title.startsWith(`${n}:`) || label === n), `${rel}: a runtime call in the GPU time: ${title}`);
    near(bars.reduce((a, b) => a + b[1], 0), ops.totals.self_cuda_time_total_us, `${rel}: the bars add up to the GPU time`, 1e-9);
    assertClean(problems, `share ${rel}`);
    await page.close();
  }
  const { page, problems } = await sessionPage(R.cpu);
  await page.waitForSelector('#steps-chart g.row');
  const st = await apiGet(`/api/v1/sessions/${id[R.cpu]}/steps`);
  const step = await page.$$eval('#steps-chart g.row:not(.mean) rect', (rs) => Object.fromEntries(rs.map((r) => [r.dataset.key, Number(r.dataset.value)])));
  assert.ok(!('cpu_exec' in step), `gloo's all_reduce drawn as cpu exec: ${JSON.stringify(step)}`);
  near(step.communication, st.steps[0].communication_us, 'communication');
  const gloo = await page.$$eval('#steps-phases-chart g.row', (gs) => gs.filter((g) => g.dataset.label.startsWith('gloo:')).map((g) => [...g.querySelectorAll('rect')].map((r) => r.dataset.key)));
  assert.deepEqual(gloo, [['communication']]);
  assertClean(problems, 'gloo');
  await page.close();
});

test('a trace with devices and no GPU activity is not called CPU-only on the page', { timeout: 60000 }, async () => {
  const { page, problems } = await sessionPage(R.cupti);
  await page.waitForSelector('#share-h');
  assert.equal(await page.locator('#share-h').innerText(), "Top operators' share of GPU time");
  const text = await page.locator('#pictures').innerText();
  assert.ok(!/CPU[- ]only/i.test(text), 'the pictures call it CPU-only');
  assertClean(problems, 'cupti');
  await page.close();
});

test('the session page makes each request once', { timeout: 60000 }, async () => {
  const { page, problems, urls } = await sessionPage(R.nw0);
  await page.waitForSelector('#trend-chart svg');
  await page.waitForLoadState('networkidle');
  const seen = new Map();
  for (const u of urls) seen.set(u, (seen.get(u) || 0) + 1);
  const twice = [...seen].filter(([, n]) => n > 1);
  assert.deepEqual(twice, [], `requested more than once: ${JSON.stringify(twice)}`);
  const s = `/api/v1/sessions/${id[R.nw0]}`;
  const count = (re) => urls.filter((u) => re.test(u)).length;
  assert.equal(count(new RegExp(`^${s}$`)), 1, 'the summary once');
  assert.equal(count(new RegExp(`^${s}/operators`)), 1, 'the operators once');
  assert.equal(count(new RegExp(`^${s}/kernels`)), 1, 'the kernels once');
  assert.ok(urls.length < 22, `${urls.length} requests: ${urls.join(' ')}`);
  assertClean(problems, 'requests');
  await page.close();
});

test('labels: cut ones end in an ellipsis and keep the whole name on hover; none leaves its picture', { timeout: 120000 }, async () => {
  for (const rel of [R.nw0, R.clover, R.df]) {
    const { page, problems } = await sessionPage(rel);
    await page.waitForSelector('#share-chart svg');
    const bad = await page.$$eval('svg.chart', (svgs) => svgs.flatMap((svg) => {
      const W = svg.viewBox.baseVal.width;
      return [...svg.querySelectorAll('text')].flatMap((t) => {
        const b = t.getBBox(), title = t.querySelector('title')?.textContent, txt = t.childNodes[0]?.textContent ?? t.textContent;
        const out = [];
        if (b.x < -0.5 || b.x + b.width > W + 0.5) out.push(`outside: "${txt}" [${b.x.toFixed(0)}, ${(b.x + b.width).toFixed(0)}] of ${W}`);
        if (t.classList.contains('lbl') && title && !title.startsWith(txt.replace(/ ×\d+$/, '')) && !txt.includes('…')) out.push(`cut with no ellipsis: "${txt}" of "${title}"`);
        return out;
      });
    }));
    assert.deepEqual(bad, [], rel);
    assertClean(problems, `labels ${rel}`);
    await page.close();
  }
});

test('baselines page: set a baseline from a session, see a run\'s verdict and why', { timeout: 90000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/session.html?id=${id[R.nw0]}`);
  await page.locator('#to-baselines').click();
  await page.waitForURL(/baselines\.html\?session=/);
  await page.waitForFunction(() => document.getElementById('set-session').value !== '');
  const name = `fig-nw0-${process.pid}`;
  await page.fill('#set-name', name);
  await page.locator('#set button[type=submit]').click();
  await page.locator('#baselines tbody th', { hasText: name }).waitFor();
  assert.equal((await apiGet(`/api/v1/baselines/${name}`)).session_id, id[R.nw0]);
  // the faster run (num_workers=4) against it: not regressed, though its memcpy per step rose
  for (const [head, want] of [[R.nw4, false]]) {
    await page.selectOption('#head', String(id[head]));
    await page.selectOption('#against', name);
    await page.locator('#check button[type=submit]').click();
    await page.waitForSelector('#verdict-box');
    const r = await apiGet(`/api/v1/sessions/${id[head]}/regressions?baseline=${name}`);
    assert.equal(r.regressed, want);
    assert.equal(await page.locator('#verdict-box').getAttribute('data-regressed'), String(r.regressed));
    assert.equal(await page.locator('#verdict-why').innerText(), r.verdict.why);
    assert.match(await page.locator('#verdict-box .head').innerText(), /^Not regressed/);
    assert.equal(await page.locator('#verdict-delta').innerText(),
      `${FP.fmtSigned(r.verdict.steps.delta_us, FP.fmtTime)} (${FP.fmtSigned(r.verdict.steps.relative, (x) => FP.fmtPct(x))}) against a noise floor of ${FP.fmtTime(r.verdict.noise_us)}: improved`);
    assert.ok(await page.locator('#verdict-items tbody tr').count() > 1, 'the operator movements, as the explanation');
  }
  // the slower run against a baseline of the faster one: regressed
  const fast = `fig-nw4-${process.pid}`;
  await fetch(`${BASE}/api/v1/baselines/${fast}`, { method: 'PUT', body: JSON.stringify({ session_id: id[R.nw4] }) });
  await page.goto(`${BASE}/baselines.html?head=${id[R.nw0]}&baseline=${fast}`);
  await page.waitForSelector('#verdict-box');
  assert.equal(await page.locator('#verdict-box').getAttribute('data-regressed'), 'true');
  assert.match(await page.locator('#verdict-box .head').innerText(), /^Regressed/);
  await shot(page, 'figures-baselines.png');
  assertClean(problems, 'baselines');
  await page.close();
});

test('jobs are in the navigation of every page, and the job page shows the comm/compute overlap the API has', { timeout: 60000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  for (const p of ['index.html', `session.html?id=${id[R.nw0]}`, 'compare.html', `timeline.html?id=${id[R.nw0]}`, 'job.html', 'baselines.html', 'targets.html']) {
    await page.goto(`${BASE}/${p}`);
    const nav = await page.$$eval('header nav a', (as) => as.map((a) => a.getAttribute('href')));
    assert.ok(nav.includes('job.html') && nav.includes('baselines.html'), `${p}: ${nav}`);
  }
  const job = `fig-job-${process.pid}`;
  for (const r of [0, 1]) {
    const body = readFileSync(join(TRACES, `hta/trace_filter/sampled_rank-${r}.json.gz`));
    const res = await fetch(`${BASE}/api/v1/sessions?name=tf-${r}&label=job:${job}&label=rank:${r}`, { method: 'POST', body });
    assert.equal(res.status, 201);
  }
  const j = await apiGet(`/api/v1/jobs/${job}`);
  await page.goto(`${BASE}/job.html?job=${job}`);
  await page.waitForFunction(() => document.querySelectorAll('#ranks tbody tr').length === 2);
  const heads = await page.$$eval('#ranks thead th', (ths) => ths.map((th) => th.textContent.replace(/[▲▼]/g, '').trim()));
  const oi = heads.indexOf('Overlapped with compute'), ki = heads.indexOf('Collective kernels');
  assert.ok(oi > 0 && ki > 0, heads.join(' | '));
  const cells = await page.$$eval('#ranks tbody tr', (trs, [o, k]) => trs.map((tr) => [tr.children[o].textContent, tr.children[k].textContent]), [oi, ki]);
  j.ranks.forEach((r, i) => {
    const c = r.communication;
    assert.equal(cells[i][0], `${FP.fmtTime(c.overlap_us)} (${FP.fmtPct(c.overlap_us / c.kernel_us)})`);
    assert.equal(cells[i][1], FP.fmtTime(c.kernel_us));
  });
  assertClean(problems, 'jobs');
  await page.close();
});

// The page part of the cross-surface check (the API part: tests/integration/test_surfaces.py):
// each real trace's session page, its rendered numbers against the API replies they come from.
test('every real trace: the session page\'s numbers are the API\'s', { timeout: 600000 }, async () => {
  for (const rel of realTraces()) {
    const { page, problems } = await sessionPage(rel);
    const api = (t) => apiGet(`/api/v1/sessions/${id[rel]}${t}`);
    const [s, sus, st, busy, ops, mem] = await Promise.all([api(''), api('/suspects'), api('/steps'), api('/busy?buckets=60'), api('/operators?limit=10000'), api('/memory')]);
    const meta = await page.$$eval('#meta > span', (ss) => Object.fromEntries(ss.map((x) => [x.firstChild?.textContent.replace(': ', ''), x.querySelector('b')?.textContent])));
    assert.equal(meta.duration, FP.fmtTime(s.duration_us), `${rel} duration`);
    // the header's GPU figure is GPU busy, tb-profiler's utilization (issue 51: it was 1 - busy of the wall)
    if (!FP.cpuOnly(s)) assert.equal(meta['GPU busy'], FP.fmtPct(s.gpu_utilization), `${rel} GPU busy`);
    // the suspects: the first screen and the bars
    if ((sus.suspects || []).length) {
      assert.equal(await page.locator('#next-culprit').innerText(), sus.suspects[0].culprit, rel);
      const bars = await page.$$eval('#suspects-chart rect.bar', (rs) => rs.map((r) => Number(r.dataset.value)));
      sus.suspects.forEach((x, i) => near(bars[i], x.at_stake_us, `${rel} suspect ${i}`));
    }
    // the step chart: the mean and every step, role by role
    if (st.steps.length) {
      near(Number(await page.locator('#step-mean').getAttribute('data-value')), st.mean.dur_us, `${rel} mean step`);
      const rows = await page.$$eval('#steps-chart g.row', (gs) => gs.map((g) => Object.fromEntries([...g.querySelectorAll('rect')].map((r) => [r.dataset.key, Number(r.dataset.value)]))));
      [st.mean, ...st.steps].forEach((x, i) => { for (const k of st.roles) near(rows[i][k] || 0, x[`${k}_us`], `${rel} ${x.name || 'mean'} ${k}`); });
    }
    // GPU busy: the note's share per device
    const note = await page.locator('#busy-note').innerText();
    for (const d of busy.devices || []) assert.ok(note.includes(`busy ${FP.fmtPct(d.busy_fraction)}`), `${rel}: ${note}`);
    // the share chart adds up to the GPU time (the CPU time on a CPU-only trace)
    const cpuOnly = FP.cpuOnly(s);
    const share = await page.$$eval('#share-chart rect.bar', (rs) => rs.map((r) => Number(r.dataset.value)));
    const total = ops.totals[cpuOnly ? 'self_cpu_time_total_us' : 'self_cuda_time_total_us'];
    if (total > 0) near(share.reduce((a, v) => a + v, 0), total, `${rel} share chart`, 1e-9);
    // memory: each device's peaks as printed
    for (const d of mem.devices) {
      const facts = await page.$$eval(`#memory .mem-dev[data-device="${d.device}"] dt`, (dts) => Object.fromEntries(dts.map((dt) => [dt.textContent, dt.nextElementSibling.textContent])));
      assert.equal(facts['peak allocated'], FP.fmtMem(d.peak_bytes), `${rel} ${d.device} allocated`);
      if (d.reserved_peak_bytes !== null) assert.equal(facts['peak reserved'], FP.fmtMem(d.reserved_peak_bytes), `${rel} ${d.device} reserved`);
    }
    assertClean(problems, `session page ${rel}`);
    await page.close();
  }
});
