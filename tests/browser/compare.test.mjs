// The compare page: the HTA base/test pair, picked from the selects, deltas coloured.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, T, launch, openPage, assertClean, shot, uploadThroughPage, apiGet, parseTime, headerIndex, columnTexts, nameColumn } from './helpers.mjs';

let browser, a, b;
before(async () => {
  browser = await launch();
  const { page } = await openPage(browser.context);
  a = await uploadThroughPage(page, T.base, 'suite:compare, side:base');
  b = await uploadThroughPage(page, T.test, 'suite:compare, side:test');
  await page.close();
});
after(async () => { await browser?.close(); });

test('compare shows operator and phase deltas, biggest movers first, coloured', { timeout: 60000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/compare.html?base=${a}&head=${b}`);
  await page.waitForFunction(() => document.querySelectorAll('#cmp-ops tbody tr').length > 1);
  assert.equal(await page.inputValue('#base'), String(a));
  assert.equal(await page.inputValue('#head'), String(b));

  const cmp = await apiGet(`/api/v1/compare?base=${a}&head=${b}`);
  const names = await nameColumn(page, '#cmp-ops');
  assert.deepEqual(names, cmp.operators.slice(0, 50).map((o) => o.name), 'server order: biggest movers first');
  const di = await headerIndex(page, '#cmp-ops', 'Δ CUDA');
  const deltas = (await columnTexts(page, '#cmp-ops', di)).map((t) => {
    const m = /^([+−±])(\S+)/.exec(t);
    return m ? (m[1] === '−' ? -1 : 1) * parseTime(m[2]) : NaN;
  });
  cmp.operators.slice(0, 50).forEach((o, i) => {
    const want = o.delta.cuda_time_total_us;
    assert.ok(Math.abs(deltas[i] - want) <= Math.abs(want) * 0.001 + 0.001, `row ${i} Δ CUDA ${deltas[i]} vs ${want}`);
  });
  for (let i = 1; i < deltas.length; i++) assert.ok(Math.abs(deltas[i]) <= Math.abs(deltas[i - 1]) + 1e-9, 'sorted by |Δ|');

  // colours follow the sign: faster green, slower red
  const cells = await page.$$eval('#cmp-ops tbody td.delta', (tds) => tds.map((td) => [td.textContent, td.className, getComputedStyle(td).color]));
  const faster = cells.filter(([t]) => t.startsWith('−'));
  const slower = cells.filter(([t]) => t.startsWith('+'));
  assert.ok(faster.length > 0 && slower.length > 0, 'the pair has both faster and slower operators');
  for (const [t, c] of faster) assert.match(c, /\bfaster\b/, `${t} is faster`);
  for (const [t, c] of slower) assert.match(c, /\bslower\b/, `${t} is slower`);
  assert.notEqual(faster[0][2], slower[0][2], 'faster and slower have different colours');
  // the status, the kind under it (issue 51: one column fewer, so that the table fits 1440 px)
  assert.ok((await page.locator('#cmp-ops tbody td.status-appeared', { hasText: /^appeared/ }).count()) > 0, 'appeared operators shown');

  const phaseRows = await columnTexts(page, '#cmp-phases', 0);
  assert.deepEqual(phaseRows, cmp.phases.length ? cmp.phases.map((p) => p.name) : ['Nothing to show.']);
  assert.match(await page.locator('#summary').innerText(), /Duration/);
  await shot(page, 'compare.png');
  assertClean(problems, 'compare');
  await page.close();
});

test('picking two sessions from the selects runs the compare', { timeout: 60000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/compare.html`);
  await page.waitForFunction((x) => [...document.querySelectorAll('#base option')].some((o) => o.value === String(x)), a);
  assert.equal(await page.locator('#cmp-ops tbody tr').count(), 0);
  await page.selectOption('#base', String(b));
  await page.selectOption('#head', String(a));
  const reply = page.waitForResponse((r) => r.url().includes(`/api/v1/compare?base=${b}&head=${a}`));
  await page.click('#pick button[type=submit]');
  assert.equal((await reply).status(), 200);
  await page.waitForFunction(() => document.querySelectorAll('#cmp-ops tbody tr').length > 1);
  assert.ok(page.url().endsWith(`compare.html?base=${b}&head=${a}`), 'the address keeps the pair');
  // swapped: an operator that appeared (head only) before has disappeared now
  assert.ok((await page.locator('#cmp-ops tbody td.status-disappeared', { hasText: /^disappeared/ }).count()) > 0);
  assertClean(problems, 'compare picker');
  await page.close();
});
