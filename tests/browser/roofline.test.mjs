// roofline.test.mjs: the session page's efficiency section (static/roofline.js) against
// GET /efficiency (issue 49 item 6): the sentence that says what the picture shows, the
// efficiency line with coverage first, the axes' titles, each roof labelled with its value, a
// legend, one dot per operator shape at the API's figures, a dot's figures by keyboard (its
// table row highlighted), the top 20 rows with a filter and "show all", a reason on every
// row without a verdict; no roofs and the reason with no device; no section on a CPU-only
// trace; and every figure clamped to finite, bounded axes (issue 50 finding 5).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { BASE, T2, TRACES, launch, openPage, assertClean, apiGet, uploadApi, nameColumn, sameTime, headerIndex, columnTexts } from './helpers.mjs';

let browser, id, cpuId, noDevId, hostileId;
const tag = `roofline-${process.pid}`;
const NO_DEVICE = join(TRACES, 'hta/trace_filter/sampled_rank-0.json.gz');

// An H100 trace with one aten::mm whose kernel lasts 2e-293 us (legal JSON).
function hostileTrace() {
  const ev = (name, cat, ts, dur, args, pid = 1, tid = 1) => ({ ph: 'X', cat, name, ts, dur, pid, tid, args });
  return {
    deviceProperties: [{ id: 0, name: 'NVIDIA H100 80GB HBM3', totalGlobalMem: 85029158912, computeMajor: 9, computeMinor: 0, numSms: 132 }],
    traceEvents: [
      ev('aten::mm', 'cpu_op', 1000, 50, { 'Input Dims': [[1024, 1024], [1024, 1024]], 'Input type': ['float', 'float'] }),
      ev('cudaLaunchKernel', 'cuda_runtime', 1010, 5, { correlation: 7 }),
      ev('sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32', 'kernel', 1020, 2e-293, { correlation: 7, device: 0, stream: 7, grid: [64, 1, 1], block: [128, 1, 1] }, 0, 7),
      ev('aten::add', 'cpu_op', 2000, 50, { 'Input Dims': [[4096], [4096], []], 'Input type': ['float', 'float', 'Scalar'] }),
      ev('cudaLaunchKernel', 'cuda_runtime', 2010, 5, { correlation: 8 }),
      ev('void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float> >()', 'kernel', 2020, 3, { correlation: 8, device: 0, stream: 7 }, 0, 7),
    ],
  };
}

async function uploadDoc(doc, name) {
  const q = new URLSearchParams({ name, label: `suite:${tag}` });
  const r = await fetch(`${BASE}/api/v1/sessions?${q}`, { method: 'POST', body: gzipSync(JSON.stringify(doc)) });
  const j = await r.json();
  assert.equal(r.status, 201, JSON.stringify(j));
  return j.id;
}

before(async () => {
  browser = await launch();
  id = await uploadApi(T2.resnet, `${tag} resnet`, [`suite:${tag}`]);
  cpuId = await uploadApi(T2.cpuOnly, `${tag} cpu`, [`suite:${tag}`]);
  noDevId = await uploadApi(NO_DEVICE, `${tag} nodevice`, [`suite:${tag}`]);
  hostileId = await uploadDoc(hostileTrace(), `${tag} hostile`);
});
after(async () => { await browser?.close(); });

test('roofline: axes, labelled roofs, dots and the first rows are the API\'s', { timeout: 90000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/session.html?id=${id}`);
  const eff = await apiGet(`/api/v1/sessions/${id}/efficiency`);
  await page.waitForSelector('#roofline circle.op');
  // the sentence, the axes' titles with their units
  assert.match(await page.textContent('#effic-explain'), /Each dot is one operator shape/);
  const titles = await page.$$eval('#roofline .axis-title', (ts) => ts.map((t) => [t.dataset.axis, t.textContent]));
  assert.deepEqual(titles, [['x', 'Arithmetic intensity (FLOP per byte)'], ['y', 'Achieved TFLOP/s']]);
  // one roof per distinct peak of the device, labelled with its name and value; the bandwidth's slope too
  const peaks = [...new Set(Object.values(eff.device.peaks).filter((v) => v > 0))].sort((a, b) => a - b);
  const roofs = await page.$$eval('#roofline polyline.roof', (ps) => ps.map((p) => Number(p.dataset.value)));
  assert.deepEqual(roofs, peaks);
  const labels = await page.$$eval('#roofline text.roof-label', (ts) => ts.map((t) => t.textContent));
  assert.ok(labels.includes('FP32 15.7 TFLOP/s'), labels.join(' | '));
  assert.ok(labels.includes('FP16 tensor 125 TFLOP/s'), labels.join(' | ')); // a V100: no BF16 roof
  assert.ok(labels.includes('DRAM 0.9 TB/s'), labels.join(' | '));
  assert.ok(!labels.some((l) => /BF16/.test(l)));
  const legend = await page.textContent('#roofline-legend');
  for (const w of ['compute-bound', 'memory-bound', 'no verdict', 'dot area: GPU time']) assert.ok(legend.includes(w), legend);
  // one dot per row with known intensity and TFLOP/s, at the API's figures
  const want = eff.operators.filter((o) => o.intensity > 0 && o.tflops > 0);
  const pts = await page.$$eval('#roofline circle.op', (cs) => cs.map((c) => [c.dataset.name, Number(c.dataset.tflops), Number(c.dataset.intensity)]));
  assert.equal(pts.length, want.length);
  want.forEach((o, i) => {
    assert.equal(pts[i][0], o.name);
    assert.ok(Math.abs(pts[i][1] - o.tflops) <= 1e-9 * o.tflops && Math.abs(pts[i][2] - o.intensity) <= 1e-9 * o.intensity);
  });
  // the efficiency line: coverage first, then the conventional MFU with its window
  const summary = await page.textContent('#effic-summary');
  assert.ok(summary.startsWith(`Modelled: ${(eff.session.coverage * 100).toFixed(1)}% of the GPU time`), summary);
  assert.ok(summary.includes(`MFU ${(eff.session.mfu * 100).toFixed(2)}% of one fp32 peak`), summary);
  assert.ok(summary.includes(`occupancy ${(eff.session.achieved_occupancy * 100).toFixed(1)}%`), summary);
  assert.ok(summary.includes('tensor cores 0.0% of kernel time'), summary);
  assert.ok(summary.includes(`GPU busy ${(eff.session.gpu_utilization * 100).toFixed(1)}%`), summary);
  // the table: the 20 rows with the most GPU time, the API's, every one without a verdict says why
  const names = await nameColumn(page, '#effic');
  assert.equal(names.length, 20);
  assert.deepEqual(names, eff.operators.slice(0, 20).map((o) => o.name));
  const gi = await headerIndex(page, '#effic', 'GPU time');
  const times = await columnTexts(page, '#effic', gi);
  eff.operators.slice(0, 20).forEach((o, i) => assert.ok(sameTime(times[i], o.gpu_us), `${times[i]} vs ${o.gpu_us}`));
  const bi = await headerIndex(page, '#effic', 'Bound'), ri = await headerIndex(page, '#effic', 'Why no verdict');
  const bounds = await columnTexts(page, '#effic', bi), reasons = await columnTexts(page, '#effic', ri);
  eff.operators.slice(0, 20).forEach((o, i) => {
    assert.equal(bounds[i], o.bound || { not_judged: 'not judged', unknown: 'unknown', in_doubt: 'in doubt', upper_bound: 'upper bound', impossible: 'impossible' }[o.status]);
    if (!o.bound) assert.ok(reasons[i].length > 10 && reasons[i] === o.bound_reason, `${o.name}: ${reasons[i]}`);
  });
  assert.equal(bounds[names.indexOf('aten::copy_')], 'not judged'); // copies: not "assumption wrong"
  // show all, then the filter
  await page.click('#effic-more');
  assert.equal((await nameColumn(page, '#effic')).length, eff.operators.length);
  await page.fill('#effic-filter', 'clamp_min');
  await page.waitForFunction(() => [...document.querySelectorAll('#effic tbody tr')].every((tr) => tr.textContent.includes('clamp_min')));
  assert.equal((await nameColumn(page, '#effic')).length, eff.operators.filter((o) => o.name.includes('clamp_min')).length);
  await page.fill('#effic-filter', '');
  // a dot by keyboard: its figures in words, its row highlighted
  await page.focus('#roofline circle.op');
  const first = want[0];
  const detail = await page.textContent('#roofline-detail');
  assert.ok(detail.startsWith(`${first.name} ${first.shape}`) && detail.includes('TFLOP/s'), detail);
  await page.waitForSelector('#effic tbody tr.hl');
  const hl = await page.$$eval('#effic tbody tr.hl', (trs) => trs.map((tr) => tr.querySelector('.name').getAttribute('title')));
  assert.deepEqual(hl, [first.name]);
  await page.keyboard.press('Tab');
  const second = await page.textContent('#roofline-detail');
  assert.ok(second.startsWith(`${want[1].name} ${want[1].shape}`), second);
  assertClean(problems);
});

test('roofline: no device, no roofs and the reason in words', { timeout: 60000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/session.html?id=${noDevId}`);
  const eff = await apiGet(`/api/v1/sessions/${noDevId}/efficiency`);
  assert.equal(eff.device, null);
  await page.waitForSelector('#roofline-noroof');
  assert.equal(await page.$$eval('#roofline polyline.roof', (p) => p.length), 0);
  const note = await page.textContent('#roofline-noroof');
  assert.ok(note.includes(eff.device_reason), note);
  assert.ok((await page.textContent('#effic-summary')).includes(`Device unknown: ${eff.device_reason}`));
  assertClean(problems);
});

test('roofline: a CPU-only trace has no efficiency section', { timeout: 60000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/session.html?id=${cpuId}`);
  await page.waitForFunction(() => document.getElementById('efficiency-section').hidden === true);
  assertClean(problems);
});

test('roofline: figures no device reaches stay inside bounded axes (issue 50 finding 5)', { timeout: 60000 }, async () => {
  // the server nulls the 2e-293 us kernel's rates: the page draws what is left
  const eff = await apiGet(`/api/v1/sessions/${hostileId}/efficiency`);
  const mm = eff.operators.find((o) => o.name === 'aten::mm');
  assert.equal(mm.tflops, null);
  assert.equal(mm.status, 'impossible');
  // and the page clamps whatever reaches it: the same document with the figures the server used to send
  const { page, problems } = await openPage(browser.context);
  const forged = JSON.parse(JSON.stringify(eff));
  Object.assign(forged.operators.find((o) => o.name === 'aten::mm'), { tflops: 1e296, gbps: 1e300, intensity: 1e-300 });
  forged.operators.push({ ...forged.operators[0], name: 'aten::huge', tflops: 1.7e308, intensity: 1e308, gpu_us: 1e300 });
  await page.route(`**/api/v1/sessions/${hostileId}/efficiency`, (r) => r.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify(forged) }));
  const t0 = Date.now();
  await page.goto(`${BASE}/session.html?id=${hostileId}`);
  await page.waitForSelector('#roofline circle.op', { timeout: 20000 });
  assert.ok(Date.now() - t0 < 20000);
  const geo = await page.$$eval('#roofline circle.op', (cs) => cs.map((c) => [Number(c.getAttribute('cx')), Number(c.getAttribute('cy')), Number(c.getAttribute('r'))]));
  const [, , w, h] = (await page.getAttribute('#roofline svg', 'viewBox')).split(' ').map(Number);
  for (const [cx, cy, r] of geo) assert.ok(isFinite(cx) && isFinite(cy) && isFinite(r) && cx >= 0 && cx <= w && cy >= 0 && cy <= h, `${cx},${cy},${r}`);
  const ticks = await page.$$eval('#roofline text.tick-x, #roofline text.tick-y', (ts) => ts.length);
  assert.ok(ticks > 0 && ticks <= 24, `${ticks} ticks`);
  assertClean(problems);
});
