// issue51.test.mjs: issue 51's items on the pages (1, 2, 5, 6, 7, 8 and the cross-page check),
// each read from the page (its text, a data-value, a link, a downloaded file) and checked against
// the API reply it comes from, formatted by the page's own formatters (static/app.js).
//   1 one busy figure: "GPU busy" is tb-profiler's utilization wherever it is said; the other
//     figures carry the name of what they divide by; the DataLoader's three per-step values
//     are named apart
//   2 compare leads with the step; percent against points; hardware warning; the head suggested;
//     pickers grouped and filtered; tables inside 1440 px; the memory gate on the baselines page
//   5 an empty Targets page: the agent command with this server's address, a copy button, the
//     serving guide served; the token box only with tokens
//   6 a CSV button on every table, its numbers the API's; the .json.gz download
//   7 the navigation written once; the list's step, top suspect and short rows; one-GPU runs;
//     smells in words; a short Top CUDA line; distinct share labels; the first screen's time
//   8 the charts reachable by keyboard
//   cross-page: a figure shown on two pages of one session has one value under one name
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync, readdirSync, statSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { createServer } from 'node:net';
import { BASE, REPO, TRACES, OUT, launch, openPage, assertClean, shot, apiGet, uploadApi } from './helpers.mjs';

const FP = new Function(`${readFileSync(join(REPO, 'static', 'app.js'), 'utf8')}; return FP;`)();
const tag = `i51-${process.pid}`;
const R = {
  nw0: 'kineto_tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz',
  nw4: 'kineto_tb_plugin/samples/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz',
  clover: 'pipit_nsys/perlmutter-cloverleaf-cuda.sqlite',
  df: 'hta/df_index_resolver/df_index_resolver.json.gz',
};
let browser;
const id = {};
before(async () => {
  browser = await launch();
  id.nw0 = await uploadApi(join(TRACES, R.nw0), `${tag} nw0`, [`model:resnet50-${tag}`]);
  id.nw4 = await uploadApi(join(TRACES, R.nw4), `${tag} nw4`, [`model:resnet50-${tag}`]);
  id.clover = await uploadApi(join(TRACES, R.clover), `${tag} clover`, [`suite:${tag}`]);
  id.df = await uploadApi(join(TRACES, R.df), `${tag} df`, [`suite:${tag}`]);
}, { timeout: 240000 });
after(async () => { await browser?.close(); });

const near = (a, b, what, rel = 1e-9) => assert.ok(Math.abs(a - b) <= rel * Math.max(1, Math.abs(b)), `${what}: ${a} vs ${b}`);
async function page1440(url) {
  const { page, problems } = await openPage(browser.context);
  await page.setViewportSize({ width: 1440, height: 900 });
  if (url) await page.goto(`${BASE}/${url}`);
  return { page, problems };
}
async function sessionPage(sid) {
  const r = await page1440(`session.html?id=${sid}`);
  await r.page.waitForSelector('#report .report-line');
  await r.page.waitForLoadState('networkidle');
  return r;
}
// Every [data-fig] of a page for session sid: [name, value, text]
const figs = (page, sid) => page.$$eval(`[data-fig][data-session="${sid}"]`, (es) => es.map((e) => [e.dataset.fig, e.dataset.value, e.textContent.trim()]));

// ---- item 1 ------------------------------------------------------------------------------------

test('item 1: "GPU busy" is tb-profiler\'s utilization wherever the session page says it; the others are named by their divisor', { timeout: 120000 }, async () => {
  for (const k of ['nw0', 'clover']) {
    const { page, problems } = await sessionPage(id[k]);
    const [s, g, sus, busy] = await Promise.all([apiGet(`/api/v1/sessions/${id[k]}`), apiGet(`/api/v1/sessions/${id[k]}/gpu`),
      apiGet(`/api/v1/sessions/${id[k]}/suspects`), apiGet(`/api/v1/sessions/${id[k]}/busy?buckets=60`)]);
    assert.equal(s.gpu_utilization, g.gpu_utilization);
    await page.waitForSelector('#gpu [data-fig="GPU busy"]');
    // the header and the GPU section: the headline, by name
    const head = await page.locator('#meta [data-fig="GPU busy"]');
    near(Number(await head.getAttribute('data-value')), s.gpu_utilization, `${k} header`);
    assert.equal(await head.innerText(), FP.fmtPct(s.gpu_utilization));
    assert.equal(await page.locator('#meta').innerText().then((t) => /GPU idle/.test(t)), false, `${k}: the header's idle of the wall is gone`);
    // every "GPU busy N%" on the page is the headline; any other busy figure says what it divides by
    const text = await page.locator('main').innerText();
    const said = [...text.matchAll(/GPU busy:?\s+(\d+\.\d)%/g)].map((m) => `${m[1]}%`);
    assert.ok(said.length >= 2, `${k}: GPU busy said ${said.length} times`);
    for (const x of said) assert.equal(x, FP.fmtPct(s.gpu_utilization), `${k}: "GPU busy ${x}"`);
    assert.ok(!/of its window/.test(text), `${k}: a figure "of its window"`);
    // the trace question: busy after its first work (the suspects' busy_fraction)
    const q = await page.locator('#questions li[data-question="kernels_packed"]').innerText();
    assert.ok(q.includes(`busy ${(sus.gpu.busy_fraction * 100).toFixed(1)}% after its first work`), q);
    // the busy chart's note: busy of the wall, per device
    for (const d of busy.devices) {
      const el = page.locator(`#busy-note [data-fig="GPU ${d.device} busy of the wall"]`);
      near(Number(await el.getAttribute('data-value')), d.busy_fraction, `${k} busy of the wall`);
      assert.equal(await el.innerText(), `busy ${FP.fmtPct(d.busy_fraction)} of the wall`);
    }
    near(Number(await page.locator('#gpu [data-fig="busy of the wall"]').getAttribute('data-value')), g.busy_fraction_of_wall, `${k} /gpu busy of the wall`);
    assertClean(problems, `busy ${k}`);
    await page.close();
  }
});

test('item 1: ResNet50 w0\'s three figures are 55.5% (GPU busy), 56.6% (of the wall), 60.6% (after its first work); DataLoader per step named three ways', { timeout: 90000 }, async () => {
  const { page, problems } = await sessionPage(id.nw0);
  assert.equal(await page.locator('#meta [data-fig="GPU busy"]').innerText(), '55.5%');
  assert.match(await page.locator('#busy-note').innerText(), /busy 56\.6% of the wall/);
  assert.match(await page.locator('#questions').innerText(), /busy 60\.6% after its first work/);
  // 58.7 ms: the GPU idle at stake; 59.3 ms: the step role; 69.3 ms: a range's wall time
  const [sus, st, ph] = await Promise.all([apiGet(`/api/v1/sessions/${id.nw0}/suspects`), apiGet(`/api/v1/sessions/${id.nw0}/steps`),
    apiGet(`/api/v1/sessions/${id.nw0}/phases`)]);
  const stake = await page.locator('.next-stake').innerText();
  assert.ok(stake.startsWith('GPU idle at stake: 58.7ms per step'), stake);
  near(Number(await page.locator('#next-per-step').getAttribute('data-value')), sus.suspects[0].at_stake_per_step_us, 'at stake');
  const role = await page.locator('#steps-chart .legend span[data-key="data_loading"]').innerText();
  assert.equal(role, `data loading ${FP.fmtShare(st.mean.data_loading_us, st.mean.dur_us)} (${FP.fmtTime(st.mean.data_loading_us)})`);
  assert.equal(FP.fmtTime(st.mean.data_loading_us), '59.3ms');
  const heads = await page.$$eval('#phases thead th', (ths) => ths.map((t) => t.textContent.replace(/[▲▼]/g, '').trim()));
  const mi = heads.indexOf('Mean range');
  assert.ok(mi > 0, heads.join('|'));
  const dl = ph.phases.find((p) => p.name.startsWith('enumerate(DataLoader)'));
  const cell = await page.$$eval('#phases tbody tr', (trs, [mi, n]) => trs.filter((tr) => tr.children[0].querySelector('.name')?.title === n)
    .map((tr) => tr.children[mi].textContent), [mi, dl.name]);
  assert.deepEqual(cell, ['69.3ms']);
  assert.equal(FP.fmtTime(dl.mean_us), '69.3ms');
  assert.ok(!heads.includes('GPU busy'), 'the phases table has no second "GPU busy"');
  assertClean(problems, 'three figures');
  await page.close();
});

test('item 1: the trend offers GPU busy, the same value as the header', { timeout: 60000 }, async () => {
  const { page, problems } = await sessionPage(id.nw0);
  await page.waitForSelector('#trend-chart svg');
  const reply = page.waitForResponse((r) => r.url().includes('/api/v1/trends') && r.url().includes('metric=gpu_utilization'));
  await page.selectOption('#trend-metric', 'gpu_utilization');
  await reply;
  await page.waitForFunction(() => /GPU busy/.test(document.getElementById('trend-summary').textContent));
  const mine = await page.$eval('#trend-chart circle.current', (c) => Number(c.dataset.value));
  near(mine, (await apiGet(`/api/v1/sessions/${id.nw0}`)).gpu_utilization, 'trend point');
  assertClean(problems, 'trend');
  await page.close();
});

// ---- item 2 ------------------------------------------------------------------------------------

test('item 2: compare leads with the step: mean step, roles, memory, then phases (the renamed DataLoader as one) and operators', { timeout: 90000 }, async () => {
  // "Compare with another session" gives the base; the head is suggested from its labels
  const { page, problems } = await sessionPage(id.nw0);
  await page.locator('#to-compare').click();
  await page.waitForURL(/compare\.html/);
  await page.waitForSelector('#cmp-steps tbody tr');
  assert.equal(await page.inputValue('#head'), String(id.nw4), 'the newest other session with the same labels');
  assert.match(await page.locator('#suggested').innerText(), /Head suggested: #\d+/);
  assert.ok(page.url().endsWith(`compare.html?base=${id.nw0}&head=${id.nw4}`), page.url());
  const c = await apiGet(`/api/v1/compare?base=${id.nw0}&head=${id.nw4}`);
  // the summary: the mean step first, its delta in time and percent
  const rows = await page.$$eval('#cmp-summary tbody tr', (trs) => trs.map((tr) => [...tr.children].map((x) => x.textContent.trim())));
  assert.equal(rows[0][0], 'Mean step');
  const b = c.steps.base.mean.dur_us, h = c.steps.head.mean.dur_us;
  assert.deepEqual(rows[0].slice(1), [FP.fmtTime(b), FP.fmtTime(h), `${FP.fmtSigned(h - b, FP.fmtTime)} ▼ (${FP.fmtSigned((h - b) / b, (x) => FP.fmtPct(x))})`]);
  assert.deepEqual(rows[0].slice(1, 3), ['178ms', '141ms']);
  // a share moves in points, not percent: GPU busy and idle of the wall
  const busy = rows.find((r) => r[0] === 'GPU busy'), idle = rows.find((r) => r[0] === 'Idle of the wall');
  const pts = (d) => `${FP.fmtSigned(d * 100, (x) => `${x.toFixed(1)} pts`)} ${d < 0 ? '▼' : '▲'}`;
  assert.equal(busy[3], pts(c.head.gpu_utilization - c.base.gpu_utilization));
  assert.equal(idle[3], pts(c.head.gpu_idle_fraction - c.base.gpu_idle_fraction));
  assert.equal(idle[3], '−15.9 pts ▼');
  assert.ok(!rows.some((r) => /%\s*[▲▼]$/.test(r[3]) && /busy|idle/i.test(r[0])), 'no share said in percent');
  // the memory peak in the summary
  const mem = rows.find((r) => r[0].startsWith('Memory peak'));
  const gpuPeak = (side) => Math.max(...c.memory.filter((m) => m.device !== 'cpu' && m[side]).map((m) => m[side].peak_bytes));
  assert.deepEqual(mem.slice(1, 3), [FP.fmtMem(gpuPeak('base')), FP.fmtMem(gpuPeak('head'))]);
  // the roles: each row the API's, DataLoader 59.3 -> 1.19 ms a step the role that moved most
  const roles = await page.$$eval('#cmp-steps tbody tr', (trs) => trs.map((tr) => [...tr.children].map((x) => x.textContent.trim())));
  for (const k of c.steps.roles) {
    const r = roles.find((x) => x[0] === k.replace(/_/g, ' '));
    assert.deepEqual(r.slice(1, 3), [FP.fmtTime(c.steps.base.mean[`${k}_us`]), FP.fmtTime(c.steps.head.mean[`${k}_us`])], k);
  }
  assert.equal(await page.locator('#cmp-top-role').innerText(), 'data loading');
  assert.deepEqual(roles.find((x) => x[0] === 'data loading').slice(1, 3), ['59.3ms', '1.19ms']);
  // the order: summary, steps, memory, phases, operators
  const ys = await page.$$eval('#cmp-summary, #cmp-steps, #cmp-memory, #cmp-phases, #cmp-ops', (ts) => ts.map((t) => t.getBoundingClientRect().top));
  assert.deepEqual(ys, [...ys].sort((x, y) => x - y), `order ${ys}`);
  // the renamed DataLoader is one row: its head name, "was" its base name
  const dl = c.phases.find((p) => p.base_name);
  const ph = await page.$$eval('#cmp-phases tbody tr', (trs) => trs.map((tr) => [tr.children[0].querySelector('.name')?.title,
    tr.querySelector('.renamed .name')?.title, tr.children[1].textContent]));
  assert.deepEqual(ph.filter((p) => /DataLoader/.test(p[0])), [[dl.name, dl.base_name, 'changed (renamed)']]);
  // the memory table
  const mrows = await page.$$eval('#cmp-memory tbody tr', (trs) => trs.map((tr) => [...tr.children].map((x) => x.textContent.trim())));
  assert.deepEqual(mrows.map((r) => r[0]), c.memory.map((m) => m.device));
  c.memory.forEach((m, i) => assert.deepEqual(mrows[i].slice(1, 3), [FP.fmtMem(m.base?.peak_bytes), FP.fmtMem(m.head?.peak_bytes)]));
  assert.equal(await page.locator('#hw-warning').isVisible(), false, 'same hardware: no warning');
  // every table inside the page at 1440 px
  for (const t of ['#cmp-summary', '#cmp-steps', '#cmp-memory', '#cmp-phases', '#cmp-ops']) {
    const [sw, cw] = await page.$eval(t, (e) => [e.scrollWidth, e.closest('.table-wrap').clientWidth]);
    assert.ok(sw <= cw + 1, `${t} is ${sw}px in ${cw}px`);
  }
  await shot(page, 'issue51-compare.png');
  assertClean(problems, 'compare');
  await page.close();
});

test('item 2: a hardware mismatch is said; the pickers group the base\'s labels first and filter', { timeout: 60000 }, async () => {
  const { page, problems } = await page1440(`compare.html?base=${id.nw0}&head=${id.clover}`);
  await page.waitForSelector('#cmp-summary tbody tr');
  const c = await apiGet(`/api/v1/compare?base=${id.nw0}&head=${id.clover}`);
  assert.equal(c.hardware.same, false);
  const w = page.locator('#hw-warning');
  assert.ok(await w.isVisible());
  const text = await w.innerText();
  assert.ok(text.includes(c.hardware.base) && text.includes(c.hardware.head) && /Different hardware/.test(text), text);
  assert.match(await page.locator('#cmp-steps-note').innerText(), /Not both sessions have ProfilerStep steps/);
  // the head picker: the sessions with the base's labels first
  const groups = await page.$$eval('#head optgroup', (gs) => gs.map((g) => [g.label, [...g.querySelectorAll('option')].map((o) => o.value)]));
  assert.equal(groups[0][0], "With the base's labels");
  assert.deepEqual(groups[0][1], [String(id.nw4)]);
  await page.fill('#pick-filter', `${tag} nw`);
  await page.waitForFunction(() => /filtered by/.test(document.getElementById('pick-note').textContent));
  const base = await page.$$eval('#base option', (os) => os.map((o) => o.value).filter(Boolean));
  assert.deepEqual(base.sort(), [String(id.nw0), String(id.nw4)].sort(), 'the filter keeps the matches and the one picked');
  assertClean(problems, 'compare pickers');
  await page.close();
});

test('item 2: the baselines page checks the memory peak with gate=memory', { timeout: 60000 }, async () => {
  const name = `${tag}-mem`;
  await fetch(`${BASE}/api/v1/baselines/${name}`, { method: 'PUT', body: JSON.stringify({ session_id: id.nw0 }) });
  const { page, problems } = await page1440(`baselines.html?head=${id.nw4}&baseline=${name}&gate=memory`);
  await page.waitForSelector('#verdict-box');
  const r = await apiGet(`/api/v1/sessions/${id.nw4}/regressions?baseline=${name}&gate=memory`);
  assert.equal(await page.locator('#verdict-box').getAttribute('data-gate'), 'memory');
  assert.equal(await page.inputValue('#gate'), 'memory');
  assert.equal(await page.locator('#verdict-why').innerText(), r.verdict.why);
  const peaks = await page.$$eval('#verdict-memory tbody span[data-value]', (ss) => ss.map((s) => Number(s.dataset.value)));
  assert.deepEqual(peaks, [r.verdict.memory.base_peak_bytes, r.verdict.memory.head_peak_bytes]);
  assert.match(await page.locator('#verdict-memory-delta').innerText(), new RegExp(`: ${r.verdict.memory.direction}$`));
  assertClean(problems, 'memory gate');
  await page.close();
});

// ---- item 5: a server of its own (empty targets; one with tokens) -------------------------------

function freePort() {
  return new Promise((res) => { const s = createServer(); s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => res(p)); }); });
}
async function ownServer(extra = []) {
  const dir = mkdtempSync(join(tmpdir(), 'fp-i51-'));
  const port = await freePort();
  const bin = process.env.FP_SERVER_BIN || join(REPO, 'build', 'firstpass-server');
  const proc = spawn(bin, ['--bind', '127.0.0.1', '--port', String(port), '--db', join(dir, 'db.sqlite'), '--static', join(REPO, 'static'), '--quiet', ...extra],
    { stdio: 'ignore' });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    if (await fetch(`${url}/healthz`).then((r) => r.ok, () => false)) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return { url, dir, stop: () => { proc.kill('SIGTERM'); rmSync(dir, { recursive: true, force: true }); } };
}

test('item 5: an empty Targets page gives the agent command with this server\'s address, a copy button and the served guide; no token box without tokens', { timeout: 60000 }, async () => {
  const srv = await ownServer();
  try {
    const { page, problems } = await openPage(browser.context);
    await page.setViewportSize({ width: 1440, height: 900 });
    await page.goto(`${srv.url}/targets.html`);
    await page.locator('#howto').waitFor();
    assert.equal((await (await fetch(`${srv.url}/api/v1/targets`)).json()).targets.length, 0);
    const cmd = await page.locator('#agent-cmd').innerText();
    assert.ok(cmd.startsWith(`firstpass-upload --server ${srv.url} --watch `), cmd);
    assert.ok(!cmd.includes('--token'), 'no token without tokens');
    assert.equal(await page.locator('#token-form').isVisible(), false, 'no token box on a server without tokens');
    assert.match(await page.locator('#targets tbody td.empty').innerText(), /start the agent/);
    // copy: the clipboard holds the command (localhost is a secure context)
    await browser.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: srv.url });
    await page.click('#copy-cmd');
    await page.locator('#copy-status', { hasText: 'Copied.' }).waitFor();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), cmd);
    // the guide: a link that answers 200 with docs/serving.md
    const href = await page.getAttribute('#serving-guide', 'href');
    const g = await fetch(new URL(href, page.url()));
    assert.equal(g.status, 200);
    assert.match(g.headers.get('content-type'), /^text\/plain/);
    assert.equal(await g.text(), readFileSync(join(REPO, 'docs', 'serving.md'), 'utf8'), 'static/docs/serving.md is docs/serving.md');
    assertClean(problems, 'empty targets');
    await page.close();
  } finally { srv.stop(); }
  const dir = mkdtempSync(join(tmpdir(), 'fp-i51-tok-'));
  writeFileSync(join(dir, 'tokens'), 'ci ci-0123456789abcdefXYZ\n', { mode: 0o600 });
  const tok = await ownServer(['--tokens-file', join(dir, 'tokens')]);
  try {
    const { page, problems } = await openPage(browser.context);
    await page.goto(`${tok.url}/targets.html`);
    await page.locator('#token-form').waitFor();
    assert.ok(await page.locator('#token-form').isVisible(), 'the token box with tokens on');
    assert.match(await page.locator('#agent-cmd').innerText(), /--token "\$FIRSTPASS_TOKEN"/);
    assertClean(problems, 'targets with tokens');
    await page.close();
  } finally { tok.stop(); rmSync(dir, { recursive: true, force: true }); }
});

// ---- item 6 ------------------------------------------------------------------------------------

function parseCsv(text) {
  const rows = [];
  let row = [], cell = '', q = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (q) { if (c === '"' && text[i + 1] === '"') { cell += '"'; i++; } else if (c === '"') q = false; else cell += c; continue; }
    if (c === '"') q = true;
    else if (c === ',') { row.push(cell); cell = ''; } else if (c === '\n') { row.push(cell.replace(/\r$/, '')); rows.push(row); row = []; cell = ''; } else cell += c;
  }
  return rows;
}
async function downloadCsv(page, tableSel) {
  const dl = page.waitForEvent('download');
  await page.click(`${tableSel} caption button.csv`);
  const d = await dl;
  const rows = parseCsv(readFileSync(await d.path(), 'utf8'));
  return { name: d.suggestedFilename(), head: rows[0], rows: rows.slice(1) };
}

test('item 6: every table has a CSV button; the operators\' and compare\'s CSV are flat, their numbers the API\'s', { timeout: 120000 }, async () => {
  const pages = [`session.html?id=${id.nw0}`, 'index.html', `compare.html?base=${id.nw0}&head=${id.nw4}`, `baselines.html?head=${id.nw4}&baseline=${tag}-mem`, 'job.html'];
  for (const p of pages) {
    const { page, problems } = await page1440(p);
    await page.waitForLoadState('networkidle');
    const bare = await page.$$eval('main table', (ts) => ts.filter((t) => t.offsetParent !== null && !t.querySelector('caption button.csv')).map((t) => t.id || t.outerHTML.slice(0, 80)));
    assert.deepEqual(bare, [], `${p}: tables without a CSV button`);
    assertClean(problems, `csv buttons ${p}`);
    await page.close();
  }
  const { page, problems } = await sessionPage(id.nw0);
  await page.waitForSelector('#operators tbody tr th');
  const ops = await apiGet(`/api/v1/sessions/${id.nw0}/operators?sort=cuda_time_total&limit=10000`);
  const csv = await downloadCsv(page, '#operators');
  assert.match(csv.name, /operators\.csv$/);
  const ni = csv.head.indexOf('Name'), ci = csv.head.indexOf('CUDA total (µs)'), ki = csv.head.indexOf('# of Calls');
  assert.ok(ni >= 0 && ci > 0 && ki > 0, csv.head.join('|'));
  assert.equal(csv.rows.length, 25);
  csv.rows.forEach((r, i) => {
    assert.equal(r[ni], ops.operators[i].name, 'full names');
    assert.equal(Number(r[ci]), ops.operators[i].cuda_time_total_us, `row ${i} CUDA total`);
    assert.equal(Number(r[ki]), ops.operators[i].calls);
  });
  assert.ok(!csv.rows.flat().some((c) => c.startsWith('{')), 'no JSON in a cell');
  // the download: the .json.gz file, the same trace as the plain one
  const gz = await page.getAttribute('#download-gz', 'href');
  assert.equal(gz, `/api/v1/sessions/${id.nw0}/trace?format=gzip`);
  const [a, b] = await Promise.all([fetch(BASE + gz).then((r) => r.arrayBuffer()), fetch(BASE + `/api/v1/sessions/${id.nw0}/trace`).then((r) => r.text())]);
  assert.equal(gunzipSync(Buffer.from(a)).toString(), b);
  assertClean(problems, 'operators csv');
  await page.close();

  const c = await apiGet(`/api/v1/compare?base=${id.nw0}&head=${id.nw4}`);
  const cp = await page1440(`compare.html?base=${id.nw0}&head=${id.nw4}`);
  await cp.page.waitForSelector('#cmp-ops tbody tr th');
  const cc = await downloadCsv(cp.page, '#cmp-ops');
  const di = cc.head.indexOf('Δ CUDA (µs)'), oi = cc.head.indexOf('Operator'), kd = cc.head.indexOf('Kind');
  assert.ok(di > 0 && oi >= 0 && kd > 0, cc.head.join('|'));
  cc.rows.forEach((r, i) => {
    assert.equal(r[oi], c.operators[i].name);
    assert.equal(r[kd], c.operators[i].kind);
    near(Number(r[di]), c.operators[i].delta.cuda_time_total_us, `compare row ${i}`);
  });
  const sc = await downloadCsv(cp.page, '#cmp-summary');
  const step = sc.rows.find((r) => r[0] === 'Mean step (µs)');
  near(Number(step[1]), c.steps.base.mean.dur_us, 'summary csv base step');
  near(Number(step[3]), c.steps.head.mean.dur_us - c.steps.base.mean.dur_us, 'summary csv delta');
  assertClean(cp.problems, 'compare csv');
  await cp.page.close();
});

// ---- item 7 ------------------------------------------------------------------------------------

test('item 7: the navigation is written once (nav.js), the current page marked on every page', { timeout: 60000 }, async () => {
  const htmls = readdirSync(join(REPO, 'static')).filter((f) => f.endsWith('.html'));
  for (const f of htmls) {
    const src = readFileSync(join(REPO, 'static', f), 'utf8');
    assert.ok(src.includes('<script src="nav.js"></script>'), `${f} loads nav.js`);
    assert.ok(!/<nav|<header/.test(src), `${f} writes no navigation of its own`);
  }
  const { page, problems } = await openPage(browser.context);
  const want = ['index.html', 'job.html', 'compare.html', 'baselines.html', 'targets.html'];
  for (const f of htmls) {
    await page.goto(`${BASE}/${f}${/session|timeline/.test(f) ? `?id=${id.nw0}` : ''}`);
    const nav = await page.$$eval('header.top nav a', (as) => as.map((a) => [a.getAttribute('href'), a.getAttribute('aria-current')]));
    assert.deepEqual(nav.map((x) => x[0]), want, f);
    assert.deepEqual(nav.filter((x) => x[1] === 'page').map((x) => x[0]), want.includes(f) ? [f] : [], `${f}: aria-current`);
    assert.equal(await page.locator('a.skip[href="#main"]').count(), 1);
    assert.equal(await page.locator('#banner[role="alert"]').count(), 1);
  }
  await page.goto(`${BASE}/`);
  assert.equal(await page.getAttribute('header.top nav a[aria-current="page"]', 'href'), 'index.html');
  assertClean(problems, 'nav');
  await page.close();
});

test('item 7: the list shows the step and the top suspect, one-GPU runs as x1, smells in words, a nine-label row short', { timeout: 60000 }, async () => {
  const labels = ['capture:9', 'job:capture-9', 'rank:0', 'engine:vllm', 'host:gpu-node-7', 'model:llama-3.1-70b', 'agent:n7', 'cluster:prod-eu', `suite:${tag}`];
  const nine = await uploadApi(join(TRACES, R.nw0), `${tag} nine labels`, labels);
  const { page, problems } = await page1440(`index.html?label=suite:${tag}`);
  const row = (sid) => page.locator('#sessions tbody tr', { has: page.locator(`a[href="session.html?id=${sid}"]`) });
  await row(nine).waitFor();
  const s = await apiGet(`/api/v1/sessions/${nine}`);
  const heads = await page.$$eval('#sessions thead th', (ths) => ths.map((t) => t.textContent.replace(/[▲▼]/g, '').trim()));
  const cell = async (sid, h) => row(sid).locator(`td:nth-child(${heads.indexOf(h) + 1}), th:nth-child(${heads.indexOf(h) + 1})`).innerText();
  assert.equal(await cell(nine, 'Mean step'), FP.fmtTime(s.step_mean_us));
  assert.equal(await cell(nine, 'GPU busy'), FP.fmtPct(s.gpu_utilization));
  const top = await cell(nine, 'Top suspect');
  assert.ok(top.startsWith(`${s.top_suspect.category.replace(/_/g, ' ')} `) && top.includes(`(${FP.fmtPct(s.top_suspect.at_stake_fraction, 0)})`), top);
  assert.equal(await row(nine).locator('.suspect').getAttribute('title'),
    `${s.top_suspect.category.replace(/_/g, ' ')}: ${s.top_suspect.culprit} (${FP.fmtPct(s.top_suspect.at_stake_fraction)} of the wall at stake)`);
  // one GPU of four: x1, not x4
  const hw = await cell(nine, 'Hardware, source');
  assert.ok(/x1\b/.test(hw) && !/x4\b/.test(hw), hw);
  assert.equal(s.hardware, 'Tesla V100-DGXS-32GB x1 (of 4 on the node)');
  // smells as words
  for (const sm of s.smells) {
    const t = await row(nine).locator(`.badge.smell[title="${sm}"]`).innerText();
    assert.equal(t, FP.smellText(sm));
    assert.ok(!t.includes('_') && t !== sm.replace(/_/g, ' '), `${sm}: "${t}"`);
  }
  // nine labels: three badges and "+6 more", a row of at most three lines
  assert.equal(await row(nine).locator('button.badge.label:visible').count(), 3);
  const h = await row(nine).evaluate((tr) => tr.offsetHeight);
  const line = await page.$eval('#sessions tbody td', (td) => parseFloat(getComputedStyle(td).lineHeight));
  assert.ok(h <= 3.5 * line + 10, `row ${h}px, a line ${line}px`);
  await row(nine).locator('button.badge.more').click();
  assert.equal(await row(nine).locator('button.badge.label:visible').count(), 9);
  // the list inside 1440 px
  const [sw, cw] = await page.$eval('#sessions', (t) => [t.scrollWidth, t.closest('.table-wrap').clientWidth]);
  assert.ok(sw <= cw + 1, `the list is ${sw}px in ${cw}px`);
  await shot(page, 'issue51-sessions.png');
  assertClean(problems, 'sessions list');
  await page.close();
});

test('item 7: the Top CUDA line quotes a short kernel name (the whole one on hover); distinct kernels keep distinct share labels', { timeout: 120000 }, async () => {
  const { page, problems } = await sessionPage(id.clover);
  const k = (await apiGet(`/api/v1/sessions/${id.clover}/kernels?sort=total_us&limit=50`)).kernels;
  const line = page.locator('#line-top_cuda_time');
  const full = await line.getAttribute('title');
  assert.ok(full.length > 300, 'the stored line quotes the long signatures');
  const names = await line.locator('.name').evaluateAll((ns) => ns.map((n) => [n.textContent, n.getAttribute('title')]));
  assert.ok(names.length >= 1);
  for (const [short, title] of names) {
    assert.ok(k.some((x) => x.name === title), `hover has a kernel's whole name: ${title.slice(0, 80)}`);
    assert.ok(short.length <= 70, `short: ${short}`);
  }
  assert.ok((await line.innerText()).length < 240, await line.innerText());
  assertClean(problems, 'top cuda');
  await page.close();
  // the share chart's labels: as many as distinct names, on every trace where names are long
  for (const sid of [id.clover, id.df, id.nw0]) {
    const p = await sessionPage(sid);
    await p.page.waitForSelector('#share-chart rect.bar');
    const bars = await p.page.$$eval('#share-chart rect.bar', (rs) => rs.map((r) => [r.dataset.label, r.querySelector('title').textContent.replace(/: [^:]*$/, '')]));
    const titles = new Set(bars.map((b) => b[1])), labels = new Set(bars.map((b) => b[0]));
    assert.equal(labels.size, titles.size, `${sid}: ${JSON.stringify(bars)}`);
    assertClean(p.problems, `share ${sid}`);
    await p.page.close();
  }
});

function realTraces(dir = TRACES) {
  const out = [];
  for (const f of readdirSync(dir).sort()) {
    const p = join(dir, f);
    if (statSync(p).isDirectory()) out.push(...realTraces(p));
    else if (/\.(json\.gz|json|sqlite)$/.test(f)) out.push(relative(TRACES, p));
  }
  return out;
}

test('item 7: the session page\'s first screen on every real trace (measured, reported in out/first-screen.json; not a timed assertion)', { timeout: 600000 }, async () => {
  const times = {};
  for (const rel of realTraces()) {
    const sid = await uploadApi(join(TRACES, rel), `${tag} fs ${rel.split('/').pop().slice(0, 30)}`, [`suite:${tag}-fs`]);
    const { page, problems } = await page1440();
    const t0 = Date.now();
    await page.goto(`${BASE}/session.html?id=${sid}`);
    // useful: the header's figures and the "what next" answer (a suspect, or why none)
    await page.waitForFunction(() => document.querySelector('#meta b') && !/Reading the suspects/.test(document.getElementById('next-body').textContent));
    times[rel] = Date.now() - t0;
    await page.waitForLoadState('networkidle');
    assertClean(problems, `first screen ${rel}`);
    await page.close();
  }
  const sorted = Object.values(times).sort((a, b) => a - b);
  const out = { machine_load: (await import('node:os')).loadavg(), median_ms: sorted[sorted.length >> 1], max_ms: sorted[sorted.length - 1], ms: times };
  writeFileSync(join(OUT, 'first-screen.json'), JSON.stringify(out, null, 2));
  console.log('first screen:', JSON.stringify({ median_ms: out.median_ms, max_ms: out.max_ms, load: out.machine_load }));
  assert.equal(Object.keys(times).length, realTraces().length);
});

// ---- item 8 ------------------------------------------------------------------------------------

test('item 8: a chart is one Tab stop; the arrow keys walk its marks and show each one\'s number', { timeout: 60000 }, async () => {
  const { page, problems } = await sessionPage(id.nw0);
  await page.waitForSelector('#steps-chart svg');
  const svg = page.locator('#steps-chart svg.chart');
  assert.equal(await svg.getAttribute('tabindex'), '0');
  await svg.focus();
  await page.keyboard.press('ArrowRight');
  const first = await page.evaluate(() => [document.activeElement.dataset.key, document.activeElement.dataset.value, document.activeElement.getAttribute('aria-label')]);
  const st = await apiGet(`/api/v1/sessions/${id.nw0}/steps`);
  assert.equal(first[0], 'kernel');
  near(Number(first[1]), st.mean.kernel_us, 'the first mark: the mean step\'s kernel time');
  const tip = page.locator('.chart-tip');
  assert.ok(await tip.isVisible());
  assert.equal(await tip.innerText(), first[2]);
  assert.ok(first[2].includes(FP.fmtTime(st.mean.kernel_us)), first[2]);
  await page.keyboard.press('ArrowRight');
  assert.equal(await page.evaluate(() => document.activeElement.dataset.key), 'memcpy');
  await page.keyboard.press('End');
  assert.equal(await page.evaluate(() => document.activeElement.closest('g.row').dataset.label), st.steps[st.steps.length - 1].name);
  assertClean(problems, 'keyboard charts');
  await page.close();
});

// ---- the cross-page check ------------------------------------------------------------------------

test('cross-page: a figure shown on two pages of one session has one value, or another name', { timeout: 180000 }, async () => {
  const name = `${tag}-x`;
  await fetch(`${BASE}/api/v1/baselines/${name}`, { method: 'PUT', body: JSON.stringify({ session_id: id.nw0 }) });
  for (const sid of [id.nw0, id.nw4, id.clover]) {
    const seen = new Map(); // name -> [page, value, text]
    const note = (where, list) => {
      for (const [fig, value, text] of list) {
        const was = seen.get(fig);
        if (!was) { seen.set(fig, [where, value, text]); continue; }
        if (value === '' || was[1] === '') assert.equal(value, was[1], `${sid} "${fig}": ${where} ${value} vs ${was[0]} ${was[1]}`);
        else near(Number(value), Number(was[1]), `${sid} "${fig}": ${where} against ${was[0]}`, 1e-9);
        assert.equal(text.replace(/^Mean step /, ''), was[2].replace(/^Mean step /, ''), `${sid} "${fig}" reads alike on ${where} and ${was[0]}`);
      }
    };
    const other = sid === id.nw4 ? id.nw0 : id.nw4;
    for (const url of [`session.html?id=${sid}`, `index.html?label=${sid === id.clover ? `suite:${tag}` : `model:resnet50-${tag}`}`,
      `compare.html?base=${sid}&head=${other}`, `compare.html?base=${other}&head=${sid}`, `baselines.html?head=${sid}&baseline=${name}`]) {
      const { page, problems } = await page1440(url);
      await page.waitForLoadState('networkidle');
      await page.waitForTimeout(200);
      note(url, await figs(page, sid));
      assertClean(problems, `cross-page ${url}`);
      await page.close();
    }
    for (const f of ['GPU busy', 'mean step', 'duration']) {
      if (f === 'mean step' && sid === id.clover) continue;
      assert.ok(seen.has(f), `${sid}: "${f}" shown somewhere`);
    }
    const s = await apiGet(`/api/v1/sessions/${sid}`);
    near(Number(seen.get('GPU busy')[1]), s.gpu_utilization, `${sid} GPU busy is the API's`);
  }
});
