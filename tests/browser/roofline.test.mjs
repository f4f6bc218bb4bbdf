// roofline.test.mjs: the session page's efficiency section (static/roofline.js) against
// GET /efficiency: one point per operator with known intensity and FLOP/s, at the API's
// figures; one roof per peak of the device; one table row per operator.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, T2, launch, openPage, assertClean, apiGet, uploadApi } from './helpers.mjs';

let browser, id;
const tag = `roofline-${process.pid}`;
before(async () => {
  browser = await launch();
  id = await uploadApi(T2.resnet, `${tag} resnet`, [`suite:${tag}`]);
});
after(async () => { await browser?.close(); });

test('roofline: points, roofs and table are the API\'s', { timeout: 60000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/session.html?id=${id}`);
  const eff = await apiGet(`/api/v1/sessions/${id}/efficiency`);
  const want = eff.operators.filter((o) => o.intensity > 0 && o.tflops > 0);
  assert.ok(want.length > 10, 'the ResNet50 sample has modelled operators');
  await page.waitForSelector('#roofline circle.op');
  const pts = await page.$$eval('#roofline circle.op', (cs) => cs.map((c) => [c.dataset.name, Number(c.dataset.tflops), Number(c.dataset.intensity)]));
  assert.equal(pts.length, want.length, 'one point per operator with known figures');
  want.forEach((o, i) => {
    assert.equal(pts[i][0], o.name);
    assert.ok(Math.abs(pts[i][1] - o.tflops) <= 1e-9 * o.tflops, `${o.name} TFLOP/s`);
    assert.ok(Math.abs(pts[i][2] - o.intensity) <= 1e-9 * o.intensity, `${o.name} intensity`);
  });
  const tip = await page.$eval('#roofline circle.op title', (t) => t.textContent);
  assert.ok(tip.includes(want[0].name) && tip.includes('TFLOP/s'), 'hover shows the figures');
  const roofs = await page.$$eval('#roofline polyline.roof', (ps) => ps.map((p) => [p.dataset.peak, Number(p.dataset.value)]));
  const peaks = Object.entries(eff.device.peaks).filter(([, v]) => v > 0);
  assert.deepEqual(roofs, peaks, 'a roof per peak of the device');
  const nrows = await page.$$eval('#effic tbody tr', (rs) => rs.length);
  assert.equal(nrows, eff.operators.length);
  const summary = await page.textContent('#effic-summary');
  assert.ok(summary.includes(`${(eff.session.gpu_utilization * 100).toFixed(1)}%`), summary);
  assertClean(problems);
});
