/**
 * The frame every member page shares, in headless Chromium: the navigation bar the modules contribute
 * to is on every page (the dashboard included) and marks the current one; the brand and `GET /` lead a
 * member home and anyone else to the API reference; paths no page answers get HTML 404 and 405 pages
 * (never the API's JSON, which /v1 keeps). Screenshots go to test-output/.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext } from 'playwright-core';
import { announceBrowser, launchBrowser, signedInPage } from '../support/browser.ts';
import { acme } from '../support/fixtures.ts';
import { forEachDatabase } from '../support/service.ts';

const shots = path.join(path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..'), 'test-output');

announceBrowser('the page frame browser test');

forEachDatabase('the page frame in headless Chromium', (svc) => {
  let browser: Browser | undefined;
  const contexts: BrowserContext[] = [];
  before(async function () {
    browser = await launchBrowser(this);
    fs.mkdirSync(shots, { recursive: true });
  });
  after(async () => {
    for (const c of contexts) await c.close();
    await browser?.close();
  });

  it('puts one navigation bar on every member page, the dashboard included; the brand and / lead home', async function () {
    this.timeout(60_000);
    const ws = await svc().apply(acme());
    const { page, context, problems } = await signedInPage(browser!, svc(), { workspaceId: ws.workspace_id, memberId: ws.members.ada! }, '/');
    contexts.push(context);
    assert.equal(new URL(page.url()).pathname, '/dashboard', '/ sends a member home');
    const nav = page.locator('.topbar nav[aria-label="Pages"] a');
    assert.deepEqual(await nav.allTextContents(), ['Analytics', 'Records', 'Documents', 'Automation', 'Webhooks', 'Inbox', 'Settings', 'API reference']);
    assert.equal(await page.locator('.topbar .brand').getAttribute('href'), '/dashboard');
    assert.equal(await page.locator('.topbar .who .name').textContent(), 'Ada Member');
    const current = () => page.locator('.topbar nav[aria-label="Pages"] a[aria-current]').allTextContents();
    assert.deepEqual(await current(), ['Analytics']);
    for (const [label, where] of [['Records', '/records'], ['Automation', '/settings/automation'], ['Webhooks', '/settings/webhooks'], ['Inbox', '/inbox'], ['Settings', '/settings'], ['Analytics', '/dashboard']] as const) {
      await Promise.all([page.waitForURL(`${svc().origin}${where}`), nav.filter({ hasText: label }).click()]);
      assert.deepEqual(await current(), [label], where);
      assert.equal(await nav.count(), 8, where);
    }
    await page.waitForSelector('body[data-ready="true"]', { timeout: 20_000 });
    await page.screenshot({ path: path.join(shots, `frame-dashboard-${svc().db.dialect}.png`) });
    await Promise.all([page.waitForURL(/\/settings\/webhooks\/wh_nothing$/), page.goto(`${svc().origin}/settings/webhooks/wh_nothing`)]);
    assert.equal(await page.textContent('h1'), 'No such webhook');
    assert.deepEqual(await current(), ['Webhooks'], 'an error page of a module keeps the frame');
    problems.splice(0);
    await Promise.all([page.waitForURL(`${svc().origin}/dashboard`), page.locator('.topbar .brand').click()]);
    assert.deepEqual(problems, []);
  });

  it('answers HTML 404 and 405 pages outside /v1, and sends people who are not signed in from / to the API reference', async function () {
    this.timeout(60_000);
    const context = await browser!.newContext();
    contexts.push(context);
    const page = await context.newPage();
    const missing = await page.goto(`${svc().origin}/settings/nothing/here`);
    assert.equal(missing!.status(), 404);
    assert.match(missing!.headers()['content-type']!, /^text\/html/);
    assert.equal(await page.textContent('h1'), 'Not found');
    await page.screenshot({ path: path.join(shots, `frame-404-${svc().db.dialect}.png`) });
    const home = await page.goto(`${svc().origin}/`);
    assert.equal(new URL(page.url()).pathname, '/docs');
    assert.equal(home!.status(), 200);

    for (const [method, where, allow] of [['POST', '/settings/automation', 'GET, HEAD'], ['GET', '/inbox/read', 'POST'], ['DELETE', '/dashboard', 'GET, HEAD']] as const) {
      const res = await fetch(`${svc().origin}${where}`, { method, redirect: 'manual' });
      assert.equal(res.status, 405, `${method} ${where}`);
      assert.equal(res.headers.get('allow'), allow);
      assert.match(res.headers.get('content-type')!, /^text\/html/);
      assert.match(await res.text(), /<h1>Not allowed here<\/h1>/);
    }
    const unknown = await fetch(`${svc().origin}/no/such/page`);
    assert.equal(unknown.status, 404);
    assert.match(await unknown.text(), /<h1>Not found<\/h1>/);
    // The API keeps its JSON errors (without a key: 401 before anything else).
    const api = await fetch(`${svc().baseUrl}/no-such-endpoint`);
    assert.equal(api.status, 401);
    assert.equal(((await api.clone().json()) as { error: string }).error, 'invalid_key');
    assert.match(api.headers.get('content-type')!, /^application\/json/);
  });
});
