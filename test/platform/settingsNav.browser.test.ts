/**
 * The settings area in headless Chromium: the bar keeps the work pages and one Settings entry, on
 * one line at 1100 px; `/settings` lists the settings pages this viewer may open with what each is
 * for; a settings page carries the settings sub-menu (its own entry current, Settings marked in the
 * bar); at 390 px nothing scrolls sideways. Screenshots go to test-output/.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { announceBrowser, launchBrowser, phoneMisfits, signedInPage } from '../support/browser.ts';
import { acme } from '../support/fixtures.ts';
import { forEachDatabase } from '../support/service.ts';

const shots = path.join(path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..'), 'test-output');

announceBrowser('the settings navigation browser test');

/** The bar's items (brand, each entry, the member and sign-out): how far their middles spread, and the bar's height. */
const barShape = (page: Page) =>
  page.evaluate(() => {
    const bar = document.querySelector('.topbar .bar')!;
    const items = [bar.querySelector('.brand')!, ...Array.from(bar.querySelectorAll('nav a')), bar.querySelector('.who')!];
    const middles = items.map((e) => {
      const r = e.getBoundingClientRect();
      return Math.round(r.top + r.height / 2);
    });
    return { height: bar.getBoundingClientRect().height, spread: Math.max(...middles) - Math.min(...middles), linkHeight: bar.querySelector('nav a')!.getBoundingClientRect().height };
  });

forEachDatabase('the settings area in headless Chromium', (svc) => {
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

  it('gathers the settings pages under one Settings entry: the index, the sub-menu, the bar on one line at 1100 px', async function () {
    this.timeout(60_000);
    const ws = await svc().apply(acme());
    const { page, context, problems } = await signedInPage(browser!, svc(), { workspaceId: ws.workspace_id, memberId: ws.members.olga! }, '/dashboard');
    contexts.push(context);
    const bar = page.locator('.topbar nav[aria-label="Pages"] a');
    const labels = await bar.allTextContents();
    assert.ok(labels.includes('Settings'), labels.join(', '));
    for (const moved of ['Members', 'Signing', 'Mailbox', 'API keys', 'Audit log']) assert.ok(!labels.includes(moved), `${moved} is not in the bar`);
    assert.equal(await page.locator('.topbar .subnav').count(), 0, 'no sub-menu on a work page');

    await Promise.all([page.waitForURL(`${svc().origin}/settings`), bar.filter({ hasText: 'Settings' }).click()]);
    assert.equal(await page.textContent('h1'), 'Settings');
    assert.equal(await page.locator('.topbar nav a[aria-current="page"]').allTextContents().then((a) => a.join()), 'Settings');
    const cards = page.locator('.settings-index [data-settings]');
    const listed = await cards.locator('h2').allTextContents();
    for (const label of ['Members', 'Signing']) assert.ok(listed.includes(label), `${label} is on the index: ${listed.join(', ')}`);
    for (const path of await cards.evaluateAll((els) => els.map((e) => e.getAttribute('data-settings')))) {
      assert.ok((await cards.filter({ has: page.locator(`a[href="${path}"]`) }).locator('p').textContent())!.length > 10, `${path} says what it is for`);
    }
    const shape = await barShape(page);
    assert.ok(shape.spread < shape.linkHeight / 2, `every item of the bar on one line: ${JSON.stringify(shape)}`);
    assert.ok(shape.height < 2 * shape.linkHeight + 12, `the bar is one line high at 1100 px: ${JSON.stringify(shape)}`);
    await page.screenshot({ path: path.join(shots, `settings-index-1100-${svc().db.dialect}.png`), fullPage: true });

    await Promise.all([page.waitForURL(`${svc().origin}/settings/members`), cards.locator('a', { hasText: 'Members' }).click()]);
    const sub = page.locator('.topbar nav.subnav a');
    assert.deepEqual(await sub.allTextContents(), listed, 'the sub-menu lists the same pages in the same order');
    assert.deepEqual(await page.locator('.topbar nav.subnav a[aria-current="page"]').allTextContents(), ['Members']);
    assert.deepEqual(await page.locator('.topbar nav[aria-label="Pages"] a[aria-current]').allTextContents(), ['Settings']);
    assert.equal(await page.locator('.topbar nav[aria-label="Pages"] a[aria-current]').getAttribute('aria-current'), 'true');
    const after = await barShape(page);
    assert.ok(after.height < 2 * after.linkHeight + 12, `the bar stays one line with the sub-menu: ${JSON.stringify(after)}`);
    await page.screenshot({ path: path.join(shots, `settings-members-1100-${svc().db.dialect}.png`) });
    await Promise.all([page.waitForURL(`${svc().origin}/settings/signing`), sub.filter({ hasText: 'Signing' }).click()]);
    assert.deepEqual(await page.locator('.topbar nav.subnav a[aria-current="page"]').allTextContents(), ['Signing']);

    // Webhooks and Automation stay work pages of the bar, though their paths are under /settings.
    await Promise.all([page.waitForURL(`${svc().origin}/settings/webhooks`), bar.filter({ hasText: 'Webhooks' }).click()]);
    assert.deepEqual(await page.locator('.topbar nav[aria-label="Pages"] a[aria-current]').allTextContents(), ['Webhooks']);
    assert.equal(await page.locator('.topbar .subnav').count(), 0);

    // Rows for the tables: an invitation (its mail in the development mailbox, an audit entry).
    await page.goto(`${svc().origin}/settings/members`);
    await page.fill('#invite-email', 'a.very.long.address.for.the.phone.test@subsidiary.acme-example.test');
    await page.selectOption('#invite-role', 'member');
    await Promise.all([page.waitForURL(`${svc().origin}/settings/members`), page.locator('button:has-text("Send invitation")').click()]);
    await page.setViewportSize({ width: 390, height: 844 });
    for (const where of ['/settings', '/settings/signing', '/settings/members', '/settings/keys', '/settings/audit', '/settings/limits', '/settings/connections', '/settings/automation', '/settings/webhooks', '/mailbox', '/inbox', '/documents']) {
      const res = await page.goto(`${svc().origin}${where}`);
      assert.equal(res!.status(), 200, where);
      // No sideways scrolling, and no table wider than the screen or cut off inside a box.
      assert.deepEqual(await phoneMisfits(page), [], `everything fits at 390 px on ${where}`);
      assert.equal(await page.evaluate(() => Array.from(document.querySelectorAll('.topbar a, .topbar button')).every((e) => e.getBoundingClientRect().right <= window.innerWidth)), true, `the bar and sub-menu fit at 390 px on ${where}`);
      await page.screenshot({ path: path.join(shots, `settings${where.replace(/\//g, '-')}-390-${svc().db.dialect}.png`), fullPage: true });
    }
    assert.deepEqual(problems, []);
  });

  it('shows a plain member the settings pages they may open, and nobody signed out', async function () {
    this.timeout(60_000);
    const ws = await svc().apply(acme());
    const { page, context } = await signedInPage(browser!, svc(), { workspaceId: ws.workspace_id, memberId: ws.members.ada! }, '/settings');
    contexts.push(context);
    const listed = await page.locator('.settings-index [data-settings] h2').allTextContents();
    assert.ok(listed.includes('Members'), listed.join(', '));
    assert.ok(!listed.includes('Mailbox'), 'the mailbox is for owners and admins');
    assert.match((await page.locator('.lede').textContent())!, /owners and admins change them/);
    const anonymous = await fetch(`${svc().origin}/settings`, { redirect: 'manual' });
    assert.equal(anonymous.status, 401);
    assert.match(await anonymous.text(), /Sign-in needed/);
  });
});
