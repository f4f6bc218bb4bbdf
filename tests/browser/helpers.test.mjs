// helpers.test.mjs: the problem recorder of helpers.mjs's openPage() (a flaky make test,
// 2026-12-06: the session page's trend fetch, still in flight when a test went on to the
// timeline, was aborted by the navigation and counted as a failed request).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, T, launch, openPage, uploadApi } from './helpers.mjs';

let browser, id;
before(async () => {
  browser = await launch();
  id = await uploadApi(T.small, `helpers-${process.pid}`, [`suite:helpers-${process.pid}`]);
});
after(async () => { await browser?.close(); });

test('leaving a page aborts its fetches in flight without a problem; any other failure is one', { timeout: 60000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  // hold the trend chart's request until the page is left: its abort is then certain
  let held;
  const asked = new Promise((res) => { held = res; });
  await page.route('**/api/v1/trends*', (route) => held(route));
  await page.goto(`${BASE}/session.html?id=${id}`);
  await asked;
  await page.goto(`${BASE}/timeline.html?id=${id}`);
  assert.deepEqual(problems, [], 'a fetch aborted by leaving the page is not a problem');
  // the same request failing while the page stays is one
  await page.unroute('**/api/v1/trends*');
  await page.route('**/api/v1/trends*', (route) => route.abort());
  await page.goto(`${BASE}/session.html?id=${id}`);
  const failed = (p) => /^request failed: GET .*\/api\/v1\/trends\?.* net::ERR_FAILED$/.test(p);
  const deadline = Date.now() + 10000;
  while (!problems.some(failed) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  assert.ok(problems.some(failed), `the failed trend request is recorded: ${problems.join('\n')}`);
  await page.close();
});
