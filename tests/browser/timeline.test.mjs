// The timeline page: a non-blank canvas, zoom (buttons, wheel, keys) and pan change the view
// and re-fetch level-of-detail data; hover shows the event.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, T, launch, openPage, assertClean, shot, uploadThroughPage, parseTime } from './helpers.mjs';

let browser, id;
before(async () => {
  browser = await launch();
  const { page } = await openPage(browser.context);
  id = await uploadThroughPage(page, T.big, 'suite:timeline-page');
  await page.close();
});
after(async () => { await browser?.close(); });

async function ready(page) {
  await page.waitForFunction(() => document.getElementById('tl').dataset.state === 'ready');
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
}
// Distinct colours and the share of pixels that are not white, over the plot area.
async function pixels(page) {
  return page.evaluate(() => {
    const c = document.getElementById('tl');
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    const colours = new Set();
    let nonWhite = 0, red = 0, kernel = 0, cpu = 0;
    for (let i = 0; i < d.length; i += 4) {
      colours.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
      if (d[i] < 245 || d[i + 1] < 245 || d[i + 2] < 245) nonWhite++;
      if (d[i] > 170 && d[i + 1] < 110 && d[i + 2] < 110) red++;
      if (d[i] === 0x59 && d[i + 1] === 0xa1 && d[i + 2] === 0x4f) kernel++; // kernel / GPU buckets
      if (d[i] === 0x4e && d[i + 1] === 0x79 && d[i + 2] === 0xa7) cpu++;    // cpu_op / CPU buckets
    }
    return { colours: colours.size, nonWhite: nonWhite / (d.length / 4), red, kernel, cpu, url: c.toDataURL() };
  });
}
const range = (page) => page.locator('#range').innerText();
async function viewOf(page) {
  return page.evaluate(() => {
    const d = document.getElementById('tl').dataset;
    return { s: Number(d.viewStart), e: Number(d.viewEnd) };
  });
}

test('the canvas is drawn, not blank, and shows GPU idle gaps', { timeout: 60000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/timeline.html?id=${id}`);
  await ready(page);
  const p = await pixels(page);
  assert.ok(p.colours > 8, `canvas has ${p.colours} colours`);
  assert.ok(p.nonWhite > 0.05, `canvas is ${(p.nonWhite * 100).toFixed(1)}% non-white`);
  assert.ok(p.red > 0, 'GPU idle gaps are drawn in red');
  // the tracks themselves, not just the axis and phases: a 96%-busy GPU stream and a busy CPU thread
  assert.ok(p.kernel > 20000, `GPU stream drawn (${p.kernel} kernel-green pixels)`);
  assert.ok(p.cpu > 20000, `CPU threads drawn (${p.cpu} cpu-blue pixels)`);
  assert.equal(await page.locator('#tl-help').count(), 1);
  assert.equal(await page.locator('body *').count() < 2000, true, 'no DOM node per event');
  const rows = await page.$$eval('#tracks tbody tr', (trs) => trs.map((t) => t.textContent));
  assert.ok(rows.some((r) => r.startsWith('GPU')), `a GPU track is listed: ${rows}`);
  assert.match(await page.locator('#glance').innerText(), /busy/);
  const r = await range(page);
  assert.match(r, /^0(\.0+)?(µs|ms|s) – /, `range label starts at the session start: ${r}`);
  await shot(page, 'timeline.png');
  assertClean(problems, 'timeline');
  await page.close();
});

test('zoom changes the view, re-fetches a window, and changes the pixels', { timeout: 90000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/timeline.html?id=${id}`);
  await ready(page);
  const r0 = await range(page), v0 = await viewOf(page), p0 = await pixels(page);

  // buttons
  const fetched = [];
  page.on('request', (q) => { if (q.url().includes('/timeline?') && q.url().includes('start_us=')) fetched.push(q.url()); });
  await page.click('#zoom-in');
  await page.click('#zoom-in');
  await page.click('#zoom-in');
  await ready(page);
  assert.ok(fetched.length > 0, 'zooming re-fetches a window');
  const req = new URL(fetched[fetched.length - 1]);
  const r1 = await range(page), v1 = await viewOf(page), p1 = await pixels(page);
  assert.notEqual(r1, r0, 'the range label changed');
  assert.ok(Math.abs((v1.e - v1.s) - (v0.e - v0.s) / 8) < 1e-3 * (v0.e - v0.s), 'three zoom-ins: 1/8 of the span');
  assert.notEqual(p1.url, p0.url, 'the pixels changed');
  assert.ok(p1.colours > 8 && p1.kernel > 1000, 'still drawn after the zoom');
  const s = Number(req.searchParams.get('start_us')), e = Number(req.searchParams.get('end_us'));
  assert.ok(e - s < v0.e - v0.s, 'the re-fetch asks for a narrower window than the session');
  assert.ok(Number(req.searchParams.get('buckets')) > 0);
  // the spanned time in the label matches the view
  const span = parseTime(/\(([^ ]+) of/.exec(r1)[1]);
  assert.ok(Math.abs(span - (v1.e - v1.s)) <= 0.001 * (v1.e - v1.s) + 0.001, `label span ${span}`);
  await shot(page, 'timeline-zoomed.png');

  // wheel over the canvas zooms around the pointer
  const box = await page.locator('#tl').boundingBox();
  await page.mouse.move(box.x + box.width * 0.6, box.y + 60);
  await page.mouse.wheel(0, -400);
  await ready(page);
  const v2 = await viewOf(page);
  assert.ok(v2.e - v2.s < v1.e - v1.s, 'wheel up zooms in');

  // drag pans
  await page.mouse.move(box.x + box.width * 0.6, box.y + 60);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * 0.4, box.y + 60, { steps: 5 });
  await page.mouse.up();
  await ready(page);
  const v3 = await viewOf(page);
  assert.ok(v3.s > v2.s, 'dragging left moves later in time');
  assert.ok(Math.abs((v3.e - v3.s) - (v2.e - v2.s)) < 1e-6 * (v2.e - v2.s) + 1e-6, 'panning keeps the span');
  assert.notEqual(await range(page), r1);

  // keyboard: 0 goes back to the whole session, - zooms out
  await page.focus('#tl');
  await page.keyboard.press('0');
  await ready(page);
  assert.equal(await range(page), r0, '0 shows the whole session');
  await page.keyboard.press('+');
  await ready(page);
  const v4 = await viewOf(page);
  assert.ok(Math.abs((v4.e - v4.s) * 2 - (v0.e - v0.s)) < 1e-3 * (v0.e - v0.s), '+ halves the span');
  assertClean(problems, 'timeline zoom');
  await page.close();
});

test('hover shows name and duration; zooming in far enough gives single events', { timeout: 60000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/timeline.html?id=${id}`);
  await ready(page);
  for (let i = 0; i < 6; i++) await page.click('#zoom-in'); // 1/64 of ~495ms: ~7.7ms
  await ready(page);
  const tracks = await page.$$eval('#tracks tbody tr', (trs) => trs.map((t) => t.textContent));
  assert.ok(tracks.some((t) => t.includes('events')), `some track is drawn as events: ${tracks}`);
  // find a GPU event under the pointer by sweeping across the first GPU row
  const box = await page.locator('#tl').boundingBox();
  const gpuY = await page.evaluate(() => {
    // the layout is not in the DOM; scan for the first row with kernel green in the plot
    const c = document.getElementById('tl'), dpr = window.devicePixelRatio || 1;
    const ctx = c.getContext('2d');
    for (let y = 0; y < c.height; y += 2) {
      const row = ctx.getImageData(0, y, c.width, 1).data;
      for (let x = 200 * dpr; x < c.width; x += 4) {
        const i = x * 4;
        if (row[i] === 0x59 && row[i + 1] === 0xa1 && row[i + 2] === 0x4f) return y / dpr;
      }
    }
    return -1;
  });
  assert.ok(gpuY > 0, 'a kernel is drawn in kernel green');
  let shown = false;
  for (let x = 190; x < box.width && !shown; x += 6) {
    await page.mouse.move(box.x + x, box.y + gpuY + 1);
    shown = await page.locator('#tip').isVisible();
  }
  assert.ok(shown, 'hovering a kernel shows the tooltip');
  const tip = await page.locator('#tip').innerText();
  assert.match(tip, /duration: \d+(\.\d+)?(s|ms|µs)/, tip);
  await shot(page, 'timeline-hover.png');
  assertClean(problems, 'timeline hover');
  await page.close();
});
