// Re-analysis in the dashboard (issue 52): the session page says which analysis version its
// figures come from and offers to re-analyse an older one; the compare page says when its two
// sides come from different versions and offers to re-analyse the older side.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { BASE, T, launch, openPage, assertClean, shot, uploadApi, apiGet } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

// What a database from before analysis versions holds: version 0 (straight in the file, as
// no API writes it; before any read of the session, so that no reply of it is cached).
function markOld(id) {
  assert.ok(process.env.FP_DB, 'FP_DB is not set (run.sh sets it)');
  execFileSync('python3', ['-c', 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1], timeout=30); '
    + 'c.execute("UPDATE sessions SET analysis_version = 0 WHERE id = ?", (int(sys.argv[2]),)); c.commit()', process.env.FP_DB, String(id)]);
}

test('session page: an older analysis is named, and re-analysed with one click', { timeout: 120000 }, async () => {
  const id = await uploadApi(T.small, 'reanalyse-page');
  markOld(id);
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/session.html?id=${id}`);
  const note = page.locator('#analysis-version');
  await note.waitFor();
  const current = (await apiGet(`/api/v1/sessions/${id}`)).current_analysis_version;
  assert.match(await note.innerText(), new RegExp(`analysed by version 0; current ${current}\\.`));
  await shot(page, 'reanalyse-session-before.png');
  await Promise.all([page.waitForEvent('load'), page.click('#reanalyse')]);
  await note.waitFor();
  assert.equal((await note.innerText()).trim(), `analysed by version ${current}.`);
  assert.equal(await page.locator('#reanalyse').count(), 0, 'no button once current');
  assert.equal((await apiGet(`/api/v1/sessions/${id}`)).analysis_version, current);
  assertClean(problems, 'session page');
});

test('compare page: sides of different versions are said so, the older one re-analysed from there', { timeout: 120000 }, async () => {
  const a = await uploadApi(T.base, 'reanalyse-cmp-base');
  const b = await uploadApi(T.test, 'reanalyse-cmp-head');
  markOld(a);
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/compare.html?base=${a}&head=${b}`);
  const note = page.locator('#cmp-versions');
  await note.waitFor();
  assert.match(await note.innerText(), /analysed by different versions \(base 0, head \d+/);
  await shot(page, 'reanalyse-compare-before.png');
  const done = page.waitForResponse((r) => r.url().endsWith(`/api/v1/sessions/${a}/reanalyse`) && r.request().method() === 'POST');
  await page.click(`#cmp-versions button:has-text("Re-analyse #${a}")`);
  assert.equal((await done).status(), 200);
  await note.waitFor({ state: 'detached' });
  const cmp = await apiGet(`/api/v1/compare?base=${a}&head=${b}`);
  assert.equal(cmp.analysis_versions.differ, false);
  assertClean(problems, 'compare page');
});
