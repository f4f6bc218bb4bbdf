// The sessions page: upload through the file input, the list, filters, delete with confirmation.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { basename } from 'node:path';
import { BASE, T, launch, openPage, assertClean, shot, uploadThroughPage, apiGet } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const tag = `run${process.pid}`;

test('upload through the page: the session appears with its columns', { timeout: 60000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/index.html`);
  await page.locator('#sessions caption').filter({ hasText: /session/ }).waitFor();
  const id = await uploadThroughPage(page, T.small, `suite:${tag}, kind:small`);
  const s = await apiGet(`/api/v1/sessions/${id}`);
  assert.equal(s.name, basename(T.small), 'the page sends ?name=<file name>');
  assert.deepEqual(s.labels, { suite: tag, kind: 'small' }, 'the page sends the typed labels');

  // newest first: the row we just made comes after only newer ones. (The other test files run
  // at the same time and upload too: a session of theirs may be newer than this one, so the
  // row is not always the first; it failed in CI when one was.)
  const link = `a[href="session.html?id=${id}"]`;
  const row = page.locator('#sessions tbody tr', { has: page.locator(link) });
  await assert.doesNotReject(row.locator(link).waitFor());
  const ids = await page.$$eval('#sessions tbody a.session-link', (as) => as.map((a) => Number(/id=(\d+)/.exec(a.getAttribute('href'))[1])));
  const at = ids.indexOf(id);
  assert.ok(at >= 0 && ids.slice(0, at).every((x) => x > id), `newest first, ${id} after newer ones only: ${ids}`);
  const text = await row.innerText();
  assert.ok(text.includes(basename(T.small)), 'name column');
  assert.ok(text.includes(`suite:${tag}`), 'labels column');
  assert.ok(text.includes(s.source), 'source (under the hardware)');
  if (s.hardware) assert.equal(await row.locator('.hw').getAttribute('title'), s.hardware, 'hardware column, whole on hover');
  if (s.top_cuda_operator) assert.ok(text.includes(s.top_cuda_operator), 'top CUDA operator column');
  // smells in words (issue 51): the badge's hover keeps the id
  for (const smell of s.smells) assert.equal(await row.locator(`.badge.smell[title="${smell}"]`).count(), 1, `smell badge ${smell}`);
  const headers = await page.$$eval('#sessions thead th', (ths) => ths.map((t) => [t.textContent, t.getAttribute('scope')]));
  for (const h of ['Name', 'Labels', 'Hardware, source', 'Duration', 'Mean step', 'GPU busy', 'Top suspect', 'Top GPU operator', 'Smells']) {
    assert.ok(headers.some(([t, scope]) => t === h && scope === 'col'), `header ${h} with scope=col`);
  }
  await page.locator('#progress').waitFor({ state: 'hidden' });
  await shot(page, 'sessions.png');
  assertClean(problems, 'sessions page');
  await page.close();
});

test('filters by label and by name', { timeout: 60000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/index.html`);
  const a = await uploadThroughPage(page, T.base, `suite:${tag}-f, which:base`);
  const b = await uploadThroughPage(page, T.test, `suite:${tag}-f, which:test`);

  let reply = page.waitForResponse((r) => r.url().includes('label=which%3Abase'), { timeout: 60000 });
  await page.fill('#f-label', `which:base`);
  await page.click('#filters button[type=submit]');
  await reply;
  // Why wait for the other session to go, not for rows: the list before the filter has rows
  // too, and the reply may still be drawing (or be a stale one the page drops, sessions.js's
  // seq) when its response event fires. The page never draws the filtered list: a timeout.
  await page.waitForFunction((b) => {
    const hrefs = [...document.querySelectorAll('#sessions tbody a.session-link')].map((x) => x.getAttribute('href'));
    return hrefs.length > 0 && !hrefs.includes(b);
  }, `session.html?id=${b}`);
  let ids = await page.$$eval('#sessions tbody a.session-link', (as) => as.map((x) => x.getAttribute('href')));
  assert.ok(ids.includes(`session.html?id=${a}`), 'label filter keeps the match');
  assert.ok(!ids.includes(`session.html?id=${b}`), 'label filter drops the other');

  await page.click('#filters button[type=reset]');
  reply = page.waitForResponse((r) => r.url().includes(`q=${encodeURIComponent(basename(T.test))}`) && !r.url().includes('label='),
                              { timeout: 60000 });
  await page.fill('#f-name', basename(T.test));
  await page.click('#filters button[type=submit]');
  await reply;
  // the same: the reset drew every session first (this failed once with the reset's list)
  await page.waitForFunction((n) => {
    const t = [...document.querySelectorAll('#sessions tbody a.session-link')].map((x) => x.textContent);
    return t.length > 0 && t.every((x) => x.includes(n));
  }, basename(T.test));
  const names = await page.$$eval('#sessions tbody a.session-link', (as) => as.map((x) => x.textContent));
  assert.ok(names.length > 0 && names.every((n) => n.includes(basename(T.test))), `name filter: ${names}`);
  ids = await page.$$eval('#sessions tbody a.session-link', (as) => as.map((x) => x.getAttribute('href')));
  assert.ok(ids.includes(`session.html?id=${b}`));
  assertClean(problems, 'sessions filters');
  await page.close();
});

test('delete asks first and removes the session', { timeout: 60000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  await page.goto(`${BASE}/index.html`);
  const id = await uploadThroughPage(page, T.base, `suite:${tag}-del`);
  const link = page.locator(`#sessions a[href="session.html?id=${id}"]`);
  const del = page.locator('#sessions tbody tr', { has: page.locator(`a[href="session.html?id=${id}"]`) }).locator('button.delete');

  page.removeAllListeners('dialog');
  page.once('dialog', (d) => { assert.equal(d.type(), 'confirm'); d.dismiss(); });
  await del.click();
  await page.waitForTimeout(300);
  assert.equal(await link.count(), 1, 'dismissing the confirmation keeps the session');
  assert.equal((await fetch(`${BASE}/api/v1/sessions/${id}`)).status, 200);

  page.once('dialog', (d) => d.accept());
  const gone = page.waitForResponse((r) => r.url().endsWith(`/api/v1/sessions/${id}`) && r.request().method() === 'DELETE');
  await del.click();
  assert.equal((await gone).status(), 204);
  await link.waitFor({ state: 'detached' });
  // Deleted on the server. The server reuses the highest id after a delete (SQLite rowid), so
  // another test file's upload may hold this id by now: then it must be a different session.
  const after = await fetch(`${BASE}/api/v1/sessions/${id}`);
  if (after.status !== 404) {
    assert.equal(after.status, 200);
    assert.notEqual((await after.json()).labels?.suite, `${tag}-del`, 'deleted on the server');
  }
  assertClean(problems, 'sessions delete');
  await page.close();
});

test('an error body from the server shows in the banner', { timeout: 30000 }, async () => {
  const { page, problems } = await openPage(browser.context);
  // (a missing session is one message in the page: truth.test.mjs; a missing job uses the banner)
  await page.goto(`${BASE}/job.html?job=no-such-job-${process.pid}`);
  const banner = page.locator('#banner');
  await banner.waitFor({ state: 'visible' });
  assert.match(await banner.innerText(), /404/);
  // the failed requests here are the point of this test
  assert.ok(problems.some((p) => p.includes('HTTP 404')));
  await page.close();
});
