// The session page: operator table (columns, sorting, filters), report editing, other sections.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  BASE, T, launch, openPage, assertClean, shot, uploadThroughPage, apiGet,
  parseTime, parseMem, parseCount, fmt3, nameColumn, parsePct, isSorted, columnTexts, headerIndex,
} from './helpers.mjs';

let browser, id;
before(async () => {
  browser = await launch();
  const { page } = await openPage(browser.context);
  id = await uploadThroughPage(page, T.big, 'suite:session-page');
  await page.close();
});
after(async () => { await browser?.close(); });

const TORCH_COLUMNS = ['Name', 'Self CPU %', 'Self CPU', 'CPU total %', 'CPU total', 'CPU time avg', 'Self CUDA',
  'Self CUDA %', 'CUDA total', 'CUDA time avg', 'CPU Mem', 'Self CPU Mem', 'CUDA Mem', 'Self CUDA Mem', '# of Calls'];

async function opsReady(page) {
  await page.waitForFunction(() => document.querySelectorAll('#operators tbody tr').length > 1);
}
// Clicks a header and waits for the table drawn after it: the sorted header is `label` and
// the sort state is not the one before the click. Why the second condition: clicking the
// sorted header again only flips its direction, so "label is sorted" already held before the
// click, and the wait passed while the reply was still being drawn (a flaky 'descending').
// renderTable draws the header and the rows together, so the rows are the new ones too.
// No wait for an /operators reply: a sort the page does itself over every row reuses the rows
// it already has (issue 42: each request once), and makes no request.
async function clickHeader(page, label) {
  const before = JSON.stringify(await sortedHeader(page));
  const i = await headerIndex(page, '#operators', label);
  await page.locator(`#operators thead th:nth-child(${i + 1}) button.sort`).click();
  await page.waitForFunction(([l, b]) => {
    const s = [...document.querySelectorAll('#operators thead th[aria-sort]')]
      .map((th) => [th.textContent.replace(/[▲▼]/g, '').trim(), th.getAttribute('aria-sort')]);
    return s.some(([t]) => t === l) && JSON.stringify(s) !== b;
  }, [label, before]);
  await opsReady(page);
}
async function sortedHeader(page) {
  return page.$$eval('#operators thead th[aria-sort]', (ths) => ths.map((th) => [th.textContent.replace(/[▲▼]/g, '').trim(), th.getAttribute('aria-sort')]));
}

test('operator table: torch columns, default sort by CUDA total, percentages like torch', { timeout: 60000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/session.html?id=${id}`);
  await opsReady(page);
  const headers = await page.$$eval('#operators thead th', (ths) => ths.map((th) => th.textContent.replace(/[▲▼]/g, '').trim()));
  for (const c of TORCH_COLUMNS) assert.ok(headers.includes(c), `column ${c}`);
  assert.deepEqual(await sortedHeader(page), [['CUDA total', 'descending']]);

  const ci = await headerIndex(page, '#operators', 'CUDA total');
  const cuda = (await columnTexts(page, '#operators', ci)).map(parseTime);
  assert.ok(cuda.every(isFinite), `CUDA total cells parse as times: ${cuda.slice(0, 5)}`);
  assert.ok(isSorted(cuda, 'descending'), `CUDA total descending: ${cuda.slice(0, 10)}`);

  // Self CUDA % of each row = self_cuda_time_total_us / totals.self_cuda_time_total_us, like torch.
  const api = await apiGet(`/api/v1/sessions/${id}/operators?sort=cuda_time_total&limit=25`);
  const names = await nameColumn(page, '#operators');
  assert.deepEqual(names, api.operators.map((o) => o.name), 'rows are the server\'s, in its order');
  const pi = await headerIndex(page, '#operators', 'Self CUDA %');
  const pct = (await columnTexts(page, '#operators', pi)).map(parsePct);
  api.operators.forEach((o, i) => {
    const want = (o.self_cuda_time_total_us * 100) / api.totals.self_cuda_time_total_us;
    assert.ok(Math.abs(pct[i] - want) < 0.006, `row ${i} Self CUDA % ${pct[i]} vs ${want}`);
  });
  const ti = await headerIndex(page, '#operators', 'CPU total');
  const first = (await columnTexts(page, '#operators', ti))[0];
  assert.match(first, /^\d+(\.\d+)?(s|ms|µs)$/, 'times in s, ms or µs');
  assert.equal(first, fmt3(api.operators[0].cpu_time_total_us), 'three significant digits');
  await shot(page, 'session.png');
  assertClean(problems, 'session page');
  await page.close();
});

test('clicking a header sorts by that column (server-side and client-side)', { timeout: 60000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/session.html?id=${id}`);
  await opsReady(page);
  const before = await columnTexts(page, '#operators', 0);

  await clickHeader(page, '# of Calls');
  assert.deepEqual(await sortedHeader(page), [['# of Calls', 'descending']]);
  const ci = await headerIndex(page, '#operators', '# of Calls');
  let calls = (await columnTexts(page, '#operators', ci)).map(parseCount);
  assert.ok(isSorted(calls, 'descending'), `calls descending: ${calls}`);
  assert.notDeepEqual(await columnTexts(page, '#operators', 0), before, 'the row order changed');
  const top = await apiGet(`/api/v1/sessions/${id}/operators?sort=calls&limit=1`);
  assert.equal(calls[0], Math.max(...(await apiGet(`/api/v1/sessions/${id}/operators?limit=10000`)).operators.map((o) => o.calls)),
               'the first row has the most calls of all operators');
  assert.equal(calls[0], top.operators[0].calls);

  await clickHeader(page, '# of Calls');
  assert.deepEqual(await sortedHeader(page), [['# of Calls', 'ascending']]);
  calls = (await columnTexts(page, '#operators', ci)).map(parseCount);
  assert.ok(isSorted(calls, 'ascending'), `calls ascending: ${calls}`);

  await clickHeader(page, 'Self CPU');
  const si = await headerIndex(page, '#operators', 'Self CPU');
  const selfCpu = (await columnTexts(page, '#operators', si)).map(parseTime);
  assert.ok(isSorted(selfCpu, 'descending'), `Self CPU descending: ${selfCpu}`);

  // not a server sort field: the page sorts all rows itself
  await clickHeader(page, 'CPU time avg');
  const ai = await headerIndex(page, '#operators', 'CPU time avg');
  const avg = (await columnTexts(page, '#operators', ai)).map(parseTime);
  assert.ok(isSorted(avg, 'descending'), `CPU time avg descending: ${avg}`);
  const all = (await apiGet(`/api/v1/sessions/${id}/operators?limit=10000`)).operators;
  const maxAvg = Math.max(...all.map((o) => o.cpu_time_avg_us));
  assert.ok(Math.abs(avg[0] - maxAvg) <= Math.max(0.001, maxAvg * 0.001), `top CPU time avg ${avg[0]} vs ${maxAvg}`);

  await clickHeader(page, 'CUDA Mem');
  const mi = await headerIndex(page, '#operators', 'CUDA Mem');
  const mem = (await columnTexts(page, '#operators', mi)).map(parseMem);
  assert.ok(mem.every(isFinite) && isSorted(mem, 'descending'), `CUDA Mem descending: ${mem}`);

  // keyboard: the header buttons take Enter (a sort by name is the page's, over the rows it has)
  await page.locator('#operators thead th:nth-child(1) button.sort').focus();
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.querySelector('#operators thead th[aria-sort]')?.textContent.startsWith('Name'));
  const names = await columnTexts(page, '#operators', 0);
  assert.ok(names.every((n, i) => i === 0 || names[i - 1].localeCompare(n) <= 0), `names ascending: ${names}`);
  assertClean(problems, 'session sorting');
  await page.close();
});

test('row limit, name filter, kind filter, group by input shape', { timeout: 60000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/session.html?id=${id}`);
  await opsReady(page);
  assert.equal((await columnTexts(page, '#operators', 0)).length, 25, 'default limit 25');
  await page.selectOption('#op-limit', '10');
  await page.waitForFunction(() => document.querySelectorAll('#operators tbody tr').length === 10);

  await page.fill('#op-name', 'aten::');
  await page.waitForFunction(() => [...document.querySelectorAll('#operators tbody tr')].every((tr) => tr.children[0].textContent.includes('aten::')));
  const ci = await headerIndex(page, '#operators', 'CUDA total');
  assert.ok(isSorted((await columnTexts(page, '#operators', ci)).map(parseTime), 'descending'));
  await page.fill('#op-name', '');

  const reply = page.waitForResponse((r) => r.url().includes('kind=kernel'));
  await page.selectOption('#op-kind', 'kernel');
  await reply;
  await page.waitForFunction(() => {
    const rows = [...document.querySelectorAll('#operators tbody tr')];
    return rows.length > 0 && rows.every((tr) => tr.children[1].textContent === 'kernel');
  });
  await page.selectOption('#op-kind', '');

  const grouped = page.waitForResponse((r) => r.url().includes('group_by=input_shape'));
  await page.check('#op-group');
  await grouped;
  await page.waitForFunction(() => [...document.querySelectorAll('#operators thead th')].some((th) => th.textContent.startsWith('Input Shapes')));
  assertClean(problems, 'session filters');
  await page.close();
});

test('editing a report line persists after reload; restore brings the draft back', { timeout: 60000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/session.html?id=${id}`);
  const line = page.locator('#line-next_experiment');
  await line.waitFor();
  const draft = await line.innerText();
  assert.ok(draft.length > 0, 'the draft line is shown');
  for (const k of ['workload', 'hardware', 'top_cuda_time', 'top_cpu_cost', 'next_experiment']) {
    assert.equal(await page.locator(`#line-${k}`).count(), 1, `report line ${k}`);
  }

  const text = `try CUDA graphs for the small kernels (${Date.now()})`;
  await page.click('.report-line[data-key="next_experiment"] button.edit');
  await page.fill('#edit-next_experiment', text);
  const put = page.waitForResponse((r) => r.url().endsWith('/report') && r.request().method() === 'PUT');
  await page.keyboard.press('Enter');
  assert.equal((await put).status(), 200);
  await page.locator('#line-next_experiment').filter({ hasText: text }).waitFor();

  await page.reload();
  await page.locator('#line-next_experiment').filter({ hasText: text }).waitFor();
  assert.equal(await page.locator('.report-line[data-key="next_experiment"] .badge.edited').count(), 1, 'marked edited');
  const rep = await apiGet(`/api/v1/sessions/${id}/report`);
  assert.equal(rep.lines.next_experiment, text);
  assert.ok(rep.edited.includes('next_experiment'));
  await shot(page, 'session-report-edited.png');

  // Escape cancels an edit
  await page.click('.report-line[data-key="workload"] button.edit');
  await page.fill('#edit-workload', 'not saved');
  await page.keyboard.press('Escape');
  await page.locator('#line-workload').waitFor();
  assert.notEqual(await page.locator('#line-workload').innerText(), 'not saved');

  const put2 = page.waitForResponse((r) => r.url().endsWith('/report') && r.request().method() === 'PUT');
  await page.click('.report-line[data-key="next_experiment"] button.restore');
  await put2;
  await page.locator('#line-next_experiment').filter({ hasText: draft }).waitFor();
  assertClean(problems, 'session report');
  await page.close();
});

test('smells, kernels, phases, GPU facts and the trace download', { timeout: 60000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/session.html?id=${id}`);
  await page.waitForFunction(() => document.querySelectorAll('#kernels tbody tr').length > 1
    && document.querySelectorAll('#phases tbody tr').length > 1 && document.querySelector('#copies'));
  const rep = await apiGet(`/api/v1/sessions/${id}/report`);
  const fired = rep.smells.filter((s) => s.fired);
  if (fired.length) assert.equal(await page.locator('#smells li[data-smell]').count(), fired.length);
  else assert.match(await page.locator('#smells').innerText(), /No smell fired/);
  assert.equal(await page.locator('#smells-off li').count(), rep.smells.length - fired.length);

  const kernels = (await apiGet(`/api/v1/sessions/${id}/kernels?sort=total_us&limit=50`)).kernels;
  assert.equal(await page.locator('#kernels tbody tr:first-child th .name').getAttribute('title'), kernels[0].name, 'full name on hover');
  const gpu = await apiGet(`/api/v1/sessions/${id}/gpu`);
  const gpuText = await page.locator('#gpu').innerText();
  assert.ok(gpuText.includes(`${(gpu.gpu_idle_fraction * 100).toFixed(1)}%`), 'GPU idle fraction shown');
  for (const c of gpu.copies) assert.ok(gpuText.includes(c.direction), `copy ${c.direction}`);

  const href = await page.getAttribute('#download', 'href');
  assert.equal(href, `/api/v1/sessions/${id}/trace`);
  assert.match(await page.locator('#trace-note').innerText(), /Perfetto UI.*chrome:\/\/tracing/s);
  const tr = await fetch(BASE + href);
  assert.equal(tr.status, 200);
  const doc = await tr.json();
  assert.ok(Array.isArray(doc.traceEvents) && doc.traceEvents.length > 0, 'the download is a Chrome trace');
  assertClean(problems, 'session sections');
  await page.close();
});

test('GPU time by kind per phase: each phase, its GPU time and each kind as /suspects gives them', { timeout: 60000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/session.html?id=${id}`);
  await page.waitForSelector('#gpu-kinds-phases tbody tr [data-kind]');
  const sus = await apiGet(`/api/v1/sessions/${id}/suspects`);
  const rows = sus.gpu_time_by_kind_by_phase, kinds = sus.gpu_time_by_kind;
  assert.ok(rows && rows.length, 'the trace has phases with GPU work');
  assert.ok(await page.locator('#gpu-kinds-phases-box').isVisible());
  // the first 10 drawn, the rest behind a button
  assert.equal(await page.locator('#gpu-kinds-phases tbody tr').count(), Math.min(10, rows.length));
  if (rows.length > 10) {
    await page.click('#gpu-kinds-phases-all');
    await page.waitForFunction((n) => document.querySelectorAll('#gpu-kinds-phases tbody tr').length === n, rows.length);
  }
  const shown = await page.locator('#gpu-kinds-phases tbody tr').evaluateAll((trs) => trs.map((tr) => ({
    phase: tr.querySelector('th .name').getAttribute('title'),
    us: Number(tr.querySelector('[data-us]:not([data-kind])').dataset.us),
    time: tr.querySelector('[data-us]:not([data-kind])').textContent,
    kinds: [...tr.querySelectorAll('[data-kind]')].map((x) => [x.dataset.kind, Number(x.dataset.us), x.textContent, x.title]) })));
  assert.deepEqual(shown.map((r) => r.phase), rows.map((r) => r.phase), 'the rows are the reply\'s, in its order');
  const cols = ['math', 'data_movement', 'elementwise', 'communication', 'other'].filter((k) => kinds[k].us > 0);
  shown.forEach((r, i) => {
    const want = rows[i];
    assert.equal(r.us, want.gpu_us, `${r.phase}: GPU time`);
    assert.equal(r.time, fmt3(want.gpu_us), `${r.phase}: ${r.time}`);
    assert.deepEqual(r.kinds.map(([k]) => k), cols, `${r.phase}: a column per kind the session has time of`);
    for (const [k, us, text] of r.kinds) {
      assert.equal(us, want[k].us, `${r.phase} ${k}`);
      assert.equal(text, `${(want[k].fraction * 100).toFixed(1)}%`, `${r.phase} ${k}: ${text}`);
    }
  });
  assertClean(problems);
  await page.close();
});

test('GPU time by kind of work: each kind as /suspects gives it', { timeout: 60000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/session.html?id=${id}`);
  await page.waitForSelector('#gpu-kinds span[data-kind]');
  const kinds = (await apiGet(`/api/v1/sessions/${id}/suspects`)).gpu_time_by_kind;
  assert.ok(kinds, 'a GPU trace has gpu_time_by_kind');
  const spans = await page.locator('#gpu-kinds span[data-kind]').evaluateAll((xs) => xs.map((x) => [x.dataset.kind, Number(x.dataset.us), x.textContent]));
  assert.deepEqual(spans.map(([k]) => k), ['math', 'data_movement', 'elementwise', 'communication', 'other'].filter((k) => kinds[k]));
  for (const [k, us, text] of spans) {
    assert.equal(us, kinds[k].us, k);
    assert.ok(text.includes(`${(kinds[k].fraction * 100).toFixed(1)}%`), `${k}: ${text}`);
  }
  assertClean(problems);
  await page.close();
});
