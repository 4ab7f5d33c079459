/**
 * The development mailbox's pages in headless Chromium: an owner reads the mail the service kept for
 * their workspace (no SMTP_URL), follows a link in a mail addressed to them, and opens its HTML part
 * under its sandbox; a mail addressed to someone else is listed with its links hidden and no HTML part;
 * a plain member and another workspace's owner cannot read it. Screenshots go to test-output/.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import type { Browser } from 'playwright-core';
import { MailboxMailer } from '../../server/mailer/mailbox.ts';
import { announceBrowser, launchBrowser, signedInPage } from '../support/browser.ts';
import { acme } from '../support/fixtures.ts';
import { forEachDatabase } from '../support/service.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const shots = path.join(root, 'test-output');

announceBrowser('the development mailbox browser test');

forEachDatabase('development mailbox pages in headless Chromium', (svc) => {
  let browser: Browser | undefined;
  before(async function () {
    this.timeout(60_000);
    browser = await launchBrowser(this);
    fs.mkdirSync(shots, { recursive: true });
  });
  after(async () => {
    await browser?.close();
  });

  it('shows owners their workspace’s mail, with clickable links and a sandboxed HTML part in their own mail, links hidden in others’; members and other workspaces are refused', async function () {
    this.timeout(60_000);
    const ws = await svc().apply(acme());
    const other = await svc().apply(acme());
    const mailer = new MailboxMailer('Workspace Operations <ops@example.test>', { db: svc().db, clock: svc().clock, logger: pino({ level: 'silent' }) });
    const link = `${svc().origin}/inbox`;
    const sent = await mailer.send({
      to: 'olga@acme.test',
      subject: 'Please sign: Service agreement',
      text: `Olga asks you to sign “Service agreement”.\n\nOpen: ${link}\n`,
      html: `<p>Olga asks you to sign <b>Service agreement</b>.</p><p><a href="${link}">Open</a></p><script>document.title = 'script ran'</script>`,
      workspaceId: ws.workspace_id,
    });
    await mailer.send({ to: 'someone@example.test', subject: 'Another workspace’s mail', text: 'x', html: '<p>x</p>', workspaceId: other.workspace_id });
    const id = sent.messageId.slice(1, sent.messageId.indexOf('@'));
    // A signer's mail: addressed to someone else, so its link is never live here.
    const signLink = `${svc().origin}/sign/${'T'.repeat(43)}`;
    svc().clock.advance(1000);
    const theirs = await mailer.send({ to: 'rita@example.test', subject: 'Rita, please sign', text: `Open: ${signLink}\n`, html: `<p><a href="${signLink}">Open</a></p>`, workspaceId: ws.workspace_id });
    const theirId = theirs.messageId.slice(1, theirs.messageId.indexOf('@'));

    const owner = await signedInPage(browser!, svc(), { workspaceId: ws.workspace_id, memberId: ws.members.olga! }, '/mailbox');
    const { page } = owner;
    await page.getByRole('link', { name: 'Mailbox' }).first().waitFor();
    assert.equal(await page.getByRole('heading', { level: 1 }).innerText(), 'Development mailbox');
    const rows = page.locator('table.mailbox tbody tr');
    assert.equal(await rows.count(), 2, 'only this workspace’s mail is listed');
    assert.match(await rows.first().innerText(), /rita@example\.test.*hidden/s, 'newest first; links hidden in someone else’s mail');
    assert.match(await rows.nth(1).innerText(), /olga@acme\.test.*yours/s);
    await page.screenshot({ path: path.join(shots, 'mailbox-list.png'), fullPage: true });

    await page.getByRole('link', { name: 'Please sign: Service agreement' }).click();
    await page.waitForURL(`**/mailbox/${id}`);
    assert.match(await page.locator('pre.mail-text').innerText(), /Olga asks you to sign/);
    const inText = page.locator('pre.mail-text a');
    assert.equal(await inText.getAttribute('href'), link);
    await page.screenshot({ path: path.join(shots, 'mailbox-message.png'), fullPage: true });

    // The HTML part: its own document, sandboxed, running no script.
    const [popup] = await Promise.all([page.context().waitForEvent('page'), page.getByRole('link', { name: 'Open the HTML part' }).click()]);
    const response = await popup.waitForLoadState().then(() => popup.evaluate(() => document.title));
    assert.notEqual(response, 'script ran');
    const html = await fetch(`${svc().origin}/mailbox/${id}/html`, { headers: { cookie: owner.cookie } });
    assert.equal(html.status, 200);
    assert.match(html.headers.get('content-security-policy') ?? '', /^sandbox; default-src 'none'/);

    await inText.click();
    await page.waitForURL('**/inbox');

    // Someone else's mail: the wording, its link hidden, no HTML part.
    await page.goto(`${svc().origin}/mailbox`);
    await page.getByRole('link', { name: 'Rita, please sign' }).click();
    await page.waitForURL(`**/mailbox/${theirId}`);
    assert.match(await page.locator('pre.mail-text').innerText(), /Open: \[link hidden: it acts for the recipient\]/);
    assert.equal(await page.locator('pre.mail-text a').count(), 0);
    assert.ok(!(await page.content()).includes('T'.repeat(43)), 'the signer’s token is not on the page');
    assert.equal(await page.getByRole('link', { name: 'Open the HTML part' }).count(), 0);
    await page.screenshot({ path: path.join(shots, 'mailbox-message-hidden.png'), fullPage: true });
    const theirHtml = await fetch(`${svc().origin}/mailbox/${theirId}/html`, { headers: { cookie: owner.cookie } });
    assert.equal(theirHtml.status, 403);
    assert.ok(!(await theirHtml.text()).includes('T'.repeat(43)));
    assert.deepEqual(owner.problems, []);

    // A plain member: no entry in the bar, and the page refuses.
    const member = await signedInPage(browser!, svc(), { workspaceId: ws.workspace_id, memberId: ws.members.ada! }, '/inbox');
    assert.equal(await member.page.getByRole('link', { name: 'Mailbox' }).count(), 0);
    const refused = await member.page.goto(`${svc().origin}/mailbox/${id}`);
    assert.equal(refused!.status(), 403);
    // Another workspace's owner: the mail is as absent as an unknown one.
    const stranger = await signedInPage(browser!, svc(), { workspaceId: other.workspace_id, memberId: other.members.olga! }, '/mailbox');
    assert.equal(await stranger.page.locator('table.mailbox tbody tr').count(), 1);
    const absent = await stranger.page.goto(`${svc().origin}/mailbox/${id}`);
    assert.equal(absent!.status(), 404);
    for (const c of [owner, member, stranger]) await c.context.close();
  });
});
