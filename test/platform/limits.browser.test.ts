/**
 * Usage and limits (issue 21, finding 3) in headless Chromium, on both databases: member invitations
 * an hour are limited (the third of a limit of 2 is refused on the Members page, nothing made, no
 * mail); `/settings/limits` shows owners and admins each limit (default or set by the operator) with
 * what is used now, and is in the settings sub-menu; a plain member gets 403 and no menu entry; at
 * 390 px nothing scrolls sideways. Screenshots at 1280 and 390 px go to test-output/.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext } from 'playwright-core';
import { setWorkspaceLimits } from '../../server/limits.ts';
import { announceBrowser, launchBrowser, signedInPage } from '../support/browser.ts';
import { acme } from '../support/fixtures.ts';
import { forEachDatabase } from '../support/service.ts';
import { putFile } from '../signing/requestSupport.ts';

const shots = path.join(path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..'), 'test-output');

announceBrowser('the usage and limits browser test');

forEachDatabase('usage and limits in headless Chromium', (svc) => {
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

  it('member invitations an hour are limited; the page shows each limit with its usage to owners and admins only', async function () {
    this.timeout(90_000);
    const spec = acme();
    spec.keys!.sender = { name: 'Contracts integration', operations: ['signing.*', 'documents.*'], delegation: 'all', created_by: 'olga' };
    const ws = await svc().apply(spec);
    await setWorkspaceLimits(svc().db, svc().clock, ws.workspace_id, { member_invitations_per_hour: 2, stored_bytes: 10 * 1024 * 1024 });
    const { page, context, problems } = await signedInPage(browser!, svc(), { workspaceId: ws.workspace_id, memberId: ws.members.olga! }, '/settings/members');
    contexts.push(context);
    const invite = async (email: string) => {
      await page.goto(`${svc().origin}/settings/members`);
      await page.fill('#invite-email', email);
      await page.selectOption('#invite-role', 'member');
      await Promise.all([page.waitForURL(`${svc().origin}/settings/members`), page.click('button:has-text("Send invitation")')]);
    };
    await invite('p1@acme.test');
    await invite('p2@acme.test');
    assert.match((await page.locator('.flash').textContent())!, /Invited p2@acme\.test/);
    await invite('p3@acme.test');
    assert.match((await page.locator('.problem').textContent())!, /No invitation was made: the workspace's limit of 2 invitations an hour is reached; retry after 1800 s/);
    const open = await svc().db.sql.all<{ email: string }>(`SELECT email FROM member_invitations WHERE workspace_id = ? ORDER BY email`, [ws.workspace_id]);
    assert.deepEqual(open.map((r) => r.email), ['p1@acme.test', 'p2@acme.test'], 'the third was not made');
    const mails = await svc().db.sql.all<{ recipients: string }>(`SELECT recipients FROM mailbox_messages WHERE workspace_id = ?`, [ws.workspace_id]);
    assert.ok(!mails.some((m) => m.recipients.includes('p3@acme.test')), 'and not mailed');

    // Some usage to show: a signing request (2 mails) and a stored file.
    const { file } = await putFile(svc(), ws.workspace_id);
    const { data } = await svc().client(ws.keys.sender!.secret).signing.RequestFileSignatures({ file_id: file.id, signers: [{ email: 'x@customer.test', name: 'X' }, { email: 'y@customer.test', name: 'Y' }] });
    assert.ok(data);

    await page.setViewportSize({ width: 1280, height: 900 });
    await page.goto(`${svc().origin}/settings`);
    const entry = page.locator('.settings-index [data-settings="/settings/limits"]');
    assert.equal(await entry.count(), 1, 'the settings index lists the page');
    await Promise.all([page.waitForURL(`${svc().origin}/settings/limits`), entry.locator('a').click()]);
    assert.equal(await page.textContent('h1'), 'Usage and limits');
    const text = (await page.textContent('main'))!;
    assert.doesNotMatch(text, /\$\{/, 'no template placeholder is left unfilled');
    assert.match(text, /300 an hour: all at once, then one every 12 seconds/);
    assert.deepEqual(await page.locator('.topbar nav.subnav a[aria-current="page"]').allTextContents(), ['Usage and limits']);
    const cell = (name: string) => page.locator(`[data-limit="${name}"]`);
    assert.equal(await cell('mails_per_hour').locator('[data-value]').textContent(), '300');
    assert.match((await cell('mails_per_hour').textContent())!, /default/);
    // Two invitation mails and two signing mails.
    assert.equal(await cell('mails_per_hour').locator('[data-used]').textContent(), '4 used');
    assert.equal(await cell('mails_per_day').locator('[data-used]').textContent(), '4 used');
    assert.equal(await cell('member_invitations_per_hour').locator('[data-value]').textContent(), '2');
    assert.match((await cell('member_invitations_per_hour').textContent())!, /set by the operator/);
    assert.equal(await cell('member_invitations_per_hour').locator('[data-used]').textContent(), '2 used');
    assert.equal(await cell('recipients_per_request').locator('[data-value]').textContent(), '10');
    assert.equal(await cell('stored_bytes').locator('[data-value]').textContent(), '10.0 MiB');
    assert.match((await cell('stored_bytes').locator('[data-used]').textContent())!, /KiB used \(files [\d.]+ KiB, open uploads 0\.0 KiB\)/);
    assert.match((await page.textContent('main'))!, /removed 30 days after upload/);
    assert.match((await page.textContent('main'))!, new RegExp(`npm run admin -- workspace limits --workspace ${ws.workspace_id}`));
    await page.screenshot({ path: path.join(shots, `limits-1280-${svc().db.dialect}.png`), fullPage: true });

    await page.setViewportSize({ width: 390, height: 844 });
    await page.reload();
    const wide = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    assert.ok(wide <= 0, `nothing scrolls sideways at 390 px (${wide} px too wide)`);
    await page.screenshot({ path: path.join(shots, `limits-390-${svc().db.dialect}.png`), fullPage: true });
    assert.deepEqual(problems, []);

    const member = await signedInPage(browser!, svc(), { workspaceId: ws.workspace_id, memberId: ws.members.ada! }, '/settings');
    contexts.push(member.context);
    assert.equal(await member.page.locator('.settings-index [data-settings="/settings/limits"]').count(), 0, 'no entry for a plain member');
    const res = await member.page.goto(`${svc().origin}/settings/limits`);
    assert.equal(res!.status(), 403);
    assert.match((await member.page.textContent('main'))!, /Only owners and admins/);
  });
});
