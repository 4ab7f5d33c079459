/**
 * The sender's Documents pages (handlers/signing/sender/) in headless Chromium, on both databases, as a
 * sender and signers would use them: an owner drops a PDF on the send page (uploaded in parts by the
 * browser through the documents operations with her session), adds two signers and sends; the mails
 * arrive through a real SMTP server; one signer signs on the signer's page; the owner reminds, changes
 * the deadline, watches each recipient's timeline, downloads the original (byte-identical to the file)
 * and, once the other signer signed, the sealed archive; a second request is cancelled after the
 * confirmation page after a signer's address was replaced. The list filters by state and searches by title or signer; a plain member sees only
 * what she sent or must sign; a request a key sent shows under that key with its creator. Screenshots
 * at 1280 and 390 px (test-output/documents-*.png), no sideways scrolling on a phone.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import type { ApplyResult } from '../../server/admin.ts';
import { announceBrowser, launchBrowser, signedInPage } from '../support/browser.ts';
import { databases, type TestService } from '../support/service.ts';
import { type MailServer, putFile, runJobs, sha256, signingService, signingWorkspace, startMailServer } from './requestSupport.ts';
import { onService, samplePdf, signerLinkIn } from './signerKit.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const shots = path.join(root, 'test-output');
const HOUR = 3_600_000;

announceBrowser('the Documents pages browser test');

for (const database of databases) {
  describe(`the sender's Documents pages [${database.name}]`, function () {
    this.timeout(120_000);
    let smtp: MailServer;
    let svc: TestService;
    let ws: ApplyResult;
    let browser: Browser;
    let owner: { context: BrowserContext; page: Page; problems: string[] };
    const contexts: BrowserContext[] = [];
    let pdfPath = '';
    let pdfBytes: Buffer;

    const noSideways = (page: Page) => page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth);
    const shot = async (page: Page, name: string) => {
      await page.screenshot({ path: path.join(shots, `documents-${name}-${database.name}.png`), fullPage: true });
    };
    const mailsTo = (address: string) => smtp.mails.filter((m) => m.to.includes(address));

    before(async function () {
      fs.mkdirSync(shots, { recursive: true });
      browser = await launchBrowser(this);
      smtp = await startMailServer(0);
      svc = await signingService(database.url(), smtp);
      ws = await signingWorkspace(svc);
      owner = await signedInPage(browser, svc, { workspaceId: ws.workspace_id, memberId: ws.members.olga! }, '/documents');
      await owner.page.setViewportSize({ width: 1280, height: 900 });
      contexts.push(owner.context);
      pdfBytes = Buffer.from(await samplePdf('Supply agreement 2027', 3));
      pdfPath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'wso-send-')), 'Supply agreement 2027.pdf');
      fs.writeFileSync(pdfPath, pdfBytes);
    });
    after(async () => {
      for (const c of contexts) await c.close().catch(() => undefined);
      await browser?.close();
      await svc?.close();
      await smtp?.close();
    });

    let requestId = '';
    it('uploads a PDF by choosing it on the send page, sends it to two signers, and lands on the request page', async () => {
      const { page } = owner;
      assert.equal(await page.locator('h1').textContent(), 'Documents');
      assert.match((await page.locator('.empty').textContent())!, /Nothing here yet/);
      await shot(page, '0-empty');
      await Promise.all([page.waitForURL(`${svc.origin}/documents/new`), page.getByRole('link', { name: 'Send a document' }).first().click()]);
      assert.equal(await page.locator('[data-send]').isDisabled(), true, 'nothing to send before the upload');
      await page.locator('[data-file-input]').setInputFiles(pdfPath);
      await page.waitForSelector('[data-dropzone][data-done]');
      assert.equal((await page.locator('[data-drop-label]').textContent())!, 'Uploaded: Supply agreement 2027.pdf');
      assert.equal(await page.locator('[data-title]').inputValue(), 'Supply agreement 2027', 'the title comes from the file name');
      assert.equal(await page.locator('[data-send]').isDisabled(), false);
      // Privacy belongs to the upload: ticking Private now asks for the file again.
      await page.locator('[data-private]').check();
      assert.equal(await page.locator('[data-file-id]').inputValue(), '');
      assert.equal(await page.locator('[data-send]').isDisabled(), true);
      await page.locator('[data-private]').uncheck();
      await page.locator('[data-file-input]').setInputFiles(pdfPath);
      await page.waitForSelector('[data-dropzone][data-done]');
      assert.notEqual(await page.locator('[data-file-id]').inputValue(), '');
      const fileId = await page.locator('[data-file-id]').inputValue();
      assert.match(fileId, /^file_/);
      // The file the browser uploaded is the workspace's (not private), with the bytes of the file chosen.
      const stored = await svc.db.sql.one<{ sha256: string; owner_member_id: string | null }>(`SELECT sha256, owner_member_id FROM document_files WHERE id = ?`, [fileId]);
      assert.equal(stored!.sha256, sha256(pdfBytes));
      assert.equal(stored!.owner_member_id, null);

      // Refused first: a signer without an address keeps what was typed.
      const rows = page.locator('.signer-row');
      await rows.nth(0).locator('input[name=signer_name]').fill('Carla Client');
      await page.getByRole('button', { name: 'Add a signer' }).click();
      await rows.nth(1).locator('input[name=signer_name]').fill('Dan Dealer');
      // The browser's own check would stop the form: switch it off to see the service's.
      await page.evaluate(() => {
        (document.querySelector('[data-send-form]') as HTMLFormElement).noValidate = true;
      });
      await Promise.all([page.waitForURL(`${svc.origin}/documents/send`), page.locator('[data-send]').click()]);
      assert.match((await page.locator('.problem').textContent())!, /Signer 1 needs both a name and an e-mail address/);
      assert.equal(await page.locator('.signer-row').nth(1).locator('input[name=signer_name]').inputValue(), 'Dan Dealer', 'what was typed is kept');
      assert.equal(await page.locator('[data-file-id]').inputValue(), fileId, 'the upload is kept');
      assert.equal(await page.locator('[data-send]').isDisabled(), false);
      await page.locator('.signer-row').nth(0).locator('input[name=signer_email]').fill('carla@client.test');
      await page.locator('.signer-row').nth(1).locator('input[name=signer_email]').fill('dan@dealer.test');
      await page.locator('textarea[name=message]').fill('Please sign before Friday.');
      await page.locator('input[name=in_order]').check();
      await page.locator('input[name=cc]').fill('legal@supply.test');
      await page.setViewportSize({ width: 390, height: 844 });
      assert.equal(await noSideways(page), true, 'the send page fits a phone');
      await shot(page, '1-send-phone');
      await page.setViewportSize({ width: 1280, height: 900 });
      await shot(page, '1-send');
      await Promise.all([page.waitForURL(/\/documents\/requests\/sr_/), page.locator('[data-send]').click()]);
      requestId = /\/documents\/requests\/(sr_[0-9a-z]+)$/.exec(page.url())![1]!;
      assert.match((await page.locator('.flash').textContent())!, /Sent "Supply agreement 2027" to 2 signers/);
      assert.equal(await page.locator('.request-page').getAttribute('data-status'), 'pending');
      assert.match((await page.locator('.lede').textContent())!, /Sent by Olga Owner/);
      assert.equal(await page.locator('.recipient').count(), 3);
      assert.match((await page.locator('.recipient').nth(2).textContent())!, /legal@supply\.test[\s\S]*Gets a copy/);
      assert.match((await page.locator('h2', { hasText: 'Signers:' }).textContent())!, /0 of 2 signed/, 'a CC is not a signer');
      assert.equal(mailsTo('legal@supply.test').length, 0, 'a CC is not asked to sign');
      assert.match((await page.locator('.recipient').nth(0).textContent())!, /Carla Client[\s\S]*Not opened yet[\s\S]*Invited/);
      // The request is the member's own, made through the operations with her session.
      const row = await svc.db.sql.one<{ owner_member_id: string; private: unknown; message: string }>(`SELECT owner_member_id, private, message FROM signing_requests WHERE id = ?`, [requestId]);
      assert.equal(row!.owner_member_id, ws.members.olga);
      assert.equal(Boolean(row!.private), false);
      assert.equal(row!.message, 'Please sign before Friday.');
      // One after another: Carla is invited now, Dan once she has signed.
      assert.match((await page.locator('.recipient').nth(1).textContent())!, /Step 2[\s\S]*Dan Dealer[\s\S]*Waiting for their turn/);
      assert.equal(mailsTo('carla@client.test').length, 1);
      assert.equal(mailsTo('dan@dealer.test').length, 0);
      // Chromium logs the refused post's 400 as a console error: expected in this test, and only this one.
      assert.deepEqual(owner.problems, ['console: Failed to load resource: the server responded with a status of 400 (Bad Request)']);
      owner.problems.length = 0;
    });

    it('shows each signer’s timeline as they open and sign; reminds, changes the deadline; downloads the original byte for byte', async () => {
      const { page } = owner;
      // Carla signs on the signer's page, from the link in her mail.
      const carla = await browser.newContext({ viewport: { width: 390, height: 844 } });
      contexts.push(carla);
      const signer = await carla.newPage();
      await signer.goto(onService(signerLinkIn(mailsTo('carla@client.test')[0]!.mail), svc.origin));
      await Promise.all([signer.waitForURL(/\/review$/), signer.getByRole('button', { name: 'Continue to the document' }).click()]);
      await signer.fill('#typed_name', 'Carla Client');
      await signer.check('#agree');
      await Promise.all([signer.waitForURL(/\/done$/), signer.getByRole('button', { name: 'Sign', exact: true }).click()]);

      // Her signature invites Dan (mailed after the commit).
      for (let i = 0; i < 100 && mailsTo('dan@dealer.test').length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 20));
      assert.equal(mailsTo('dan@dealer.test').length, 1, 'Dan is invited once Carla signed');
      svc.clock.advance(HOUR + 1);
      await page.reload();
      assert.match((await page.locator('.recipient').nth(0).textContent())!, /Signed[\s\S]*Opened[\s\S]*Signed/);
      assert.match((await page.locator('h2', { hasText: 'Signers:' }).textContent())!, /1 of 2 signed/);
      // Remind: only Dan has not signed.
      assert.match((await page.locator('.actions-card').textContent())!, /the 1 signer who has not signed/);
      await Promise.all([page.waitForURL(`${svc.origin}/documents/requests/${requestId}`), page.getByRole('button', { name: 'Remind signers' }).click()]);
      assert.match((await page.locator('.flash').textContent())!, /Reminders sent/);
      assert.equal(mailsTo('dan@dealer.test').length, 2, 'a reminder with a fresh link');
      assert.equal(mailsTo('carla@client.test').length, 1, 'no reminder for who signed');
      assert.match((await page.locator('.recipient').nth(1).textContent())!, /Last reminded/);
      // A new deadline.
      const newDeadline = new Date(svc.clock.now() + 10 * 24 * HOUR).toISOString().slice(0, 16);
      await page.locator('input[name=deadline]').fill(newDeadline);
      await Promise.all([page.waitForURL(`${svc.origin}/documents/requests/${requestId}`), page.getByRole('button', { name: 'Change the deadline' }).click()]);
      assert.match((await page.locator('.flash').textContent())!, new RegExp(`The deadline is now ${newDeadline.replace('T', ' ')}:00 UTC`));
      assert.match((await page.locator('.history').textContent())!, /Deadline changed/);
      // The original downloads as the bytes uploaded.
      const original = await page.request.get(`${svc.origin}/documents/requests/${requestId}/download/original`);
      assert.equal(original.status(), 200);
      assert.equal(sha256(await original.body()), sha256(pdfBytes));
      assert.equal(await page.locator('a', { hasText: 'Download the signed document' }).count(), 0, 'no archive before everyone signed');
      await shot(page, '2-request');
      await page.setViewportSize({ width: 390, height: 844 });
      assert.equal(await noSideways(page), true, 'the request page fits a phone');
      await shot(page, '2-request-phone');
      await page.setViewportSize({ width: 1280, height: 900 });
      assert.deepEqual(owner.problems, []);
    });

    it('once everyone signed: the sealed archive downloads from the request page, and the inbox notice opens it', async () => {
      const { page } = owner;
      const dan = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      contexts.push(dan);
      const signer = await dan.newPage();
      const danMails = mailsTo('dan@dealer.test');
      await signer.goto(onService(signerLinkIn(danMails[danMails.length - 1]!.mail), svc.origin));
      await Promise.all([signer.waitForURL(/\/review$/), signer.getByRole('button', { name: 'Continue to the document' }).click()]);
      await signer.fill('#typed_name', 'Dan Dealer');
      await signer.check('#agree');
      await Promise.all([signer.waitForURL(/\/done$/), signer.getByRole('button', { name: 'Sign', exact: true }).click()]);
      await page.reload();
      assert.equal(await page.locator('.request-page').getAttribute('data-status'), 'completed');
      assert.match((await page.locator('.downloads').textContent())!, /being prepared/);
      await runJobs(svc);
      // The inbox notice links to this page.
      await page.goto(`${svc.origin}/inbox`);
      const open = page.locator(`a[href="/documents/requests/${requestId}"]`).first();
      assert.equal(await open.count(), 1, 'the completion notice opens the request page');
      await Promise.all([page.waitForURL(`${svc.origin}/documents/requests/${requestId}`), open.click()]);
      const signed = await page.request.get(`${svc.origin}/documents/requests/${requestId}/download/signed`);
      assert.equal(signed.status(), 200);
      const archive = await signed.body();
      assert.equal(archive.subarray(0, 5).toString(), '%PDF-');
      // The original's bytes are the start of the archive's (the seal is an incremental update over them).
      const stored = await svc.db.sql.one<{ archive_sha256: string }>(`SELECT archive_sha256 FROM signing_requests WHERE id = ?`, [requestId]);
      assert.equal(sha256(archive), stored!.archive_sha256);
      assert.match((await page.locator('.history').textContent())!, /Signed by everyone[\s\S]*Signed archive ready/);
      assert.equal(mailsTo('legal@supply.test').filter((m) => /^Signed by everyone/.test(m.mail.subject ?? '')).length, 1, 'the CC gets the completed copy');
      assert.equal(await page.locator('a[href="/verify"]').count(), 1);
      assert.equal(await page.locator('.actions-card').count(), 0, 'nothing to change on a completed request');
      await shot(page, '3-completed');
    });

    it('cancels a request only after the confirmation page; the list filters by state and finds by title or signer', async () => {
      const { page } = owner;
      // A second request, sent by the API with a key acting for Olga (the page and the API are one).
      const { file } = await putFile(svc, ws.workspace_id, { filename: 'Office lease' });
      const made = await svc.client(ws.keys.sender!.secret, ws.members.olga).signing.RequestFileSignatures({ file_id: file.id, title: 'Office lease', signers: [{ email: 'lena@landlord.test', name: 'Lena Landlord' }] });
      assert.equal(made.response.status, 200, JSON.stringify(made.error));
      const lease = made.data!.signing_request_id;
      await page.goto(`${svc.origin}/documents/requests/${lease}`);
      assert.match((await page.locator('.lede').textContent())!, /Sent by Olga Owner \(through the key Contracts integration\)/);
      // A mistyped address is replaced on the page: the new one is invited, the change is in the history.
      await page.locator('.replace summary').click();
      await page.locator('.replace-form input[name=email]').fill('lena@landlord-group.test');
      await Promise.all([page.waitForURL(`${svc.origin}/documents/requests/${lease}`), page.getByRole('button', { name: 'Send to this address' }).click()]);
      assert.match((await page.locator('.flash').textContent())!, /Lena Landlord now signs at lena@landlord-group\.test: a new invitation went out/);
      assert.equal(mailsTo('lena@landlord-group.test').length, 1);
      assert.match((await page.locator('.history').textContent())!, /Signer given another address: Lena Landlord/);
      await Promise.all([page.waitForURL(`${svc.origin}/documents/requests/${lease}/cancel`), page.getByRole('link', { name: 'Cancel the request…' }).click()]);
      assert.match((await page.locator('h1').textContent())!, /Cancel “Office lease”\?/);
      // Keeping it changes nothing.
      await Promise.all([page.waitForURL(`${svc.origin}/documents/requests/${lease}`), page.getByRole('link', { name: 'Keep it' }).click()]);
      assert.equal(await page.locator('.request-page').getAttribute('data-status'), 'pending');
      await page.getByRole('link', { name: 'Cancel the request…' }).click();
      await page.locator('input[name=reason]').fill('Wrong floor plan');
      await Promise.all([page.waitForURL(`${svc.origin}/documents/requests/${lease}`), page.getByRole('button', { name: 'Yes, cancel the request' }).click()]);
      assert.equal(await page.locator('.request-page').getAttribute('data-status'), 'cancelled');
      assert.match((await page.locator('.info').textContent())!, /Cancelled .*: Wrong floor plan/);

      await page.goto(`${svc.origin}/documents`);
      assert.deepEqual(await page.locator('.request-item').evaluateAll((els) => els.map((e) => e.getAttribute('data-status'))), ['cancelled', 'completed']);
      await page.selectOption('select[name=status]', 'completed');
      await Promise.all([page.waitForURL(/status=completed/), page.getByRole('button', { name: 'Filter' }).click()]);
      assert.deepEqual(await page.locator('.request-item h2').allTextContents(), ['Supply agreement 2027']);
      await page.goto(`${svc.origin}/documents`);
      await page.fill('input[name=q]', 'landlord-group');
      await Promise.all([page.waitForURL(/q=landlord-group/), page.getByRole('button', { name: 'Filter' }).click()]);
      assert.deepEqual(await page.locator('.request-item h2').allTextContents(), ['Office lease']);
      await page.fill('input[name=q]', 'nothing like this');
      await Promise.all([page.waitForURL(/q=nothing/), page.getByRole('button', { name: 'Filter' }).click()]);
      assert.match((await page.locator('.empty').textContent())!, /No request matches these filters/);
      await page.goto(`${svc.origin}/documents`);
      await shot(page, '4-list');
      await page.setViewportSize({ width: 390, height: 844 });
      assert.equal(await noSideways(page), true, 'the list fits a phone');
      await shot(page, '4-list-phone');
      await page.setViewportSize({ width: 1280, height: 900 });
      assert.deepEqual(owner.problems, []);
    });

    it('saves a request as a template and sends it again with other people in its roles', async () => {
      const { page } = owner;
      await page.goto(`${svc.origin}/documents/requests/${requestId}`);
      await page.locator('input[name=name]').fill('Supply agreement (template)');
      await Promise.all([page.waitForURL(`${svc.origin}/documents/requests/${requestId}`), page.getByRole('button', { name: 'Save as a template' }).click()]);
      assert.match((await page.locator('.flash').textContent())!, /Saved the template "Supply agreement \(template\)"/);
      await page.goto(`${svc.origin}/documents`);
      await Promise.all([page.waitForURL(`${svc.origin}/documents/templates`), page.getByRole('link', { name: 'Templates' }).click()]);
      const item = page.locator('[data-template]');
      assert.equal(await item.count(), 1);
      assert.match((await item.textContent())!, /Roles: Signer 1, Signer 2, Copy 1 \(copy\)/);
      await Promise.all([page.waitForURL(/\/documents\/templates\/tpl_/), item.getByRole('link', { name: 'Use' }).click()]);
      const rows = page.locator('.signer-row');
      assert.deepEqual(await rows.evaluateAll((els) => els.map((e) => e.getAttribute('data-role'))), ['Signer 1', 'Signer 2', 'Copy 1']);
      const people = [['Erin Early', 'erin@early.test'], ['Finn Final', 'finn@final.test'], ['Gil Copy', 'gil@copy.test']];
      for (const [i, [name, email]] of people.entries()) {
        await rows.nth(i).locator('input[name^=name_]').fill(name!);
        await rows.nth(i).locator('input[name^=email_]').fill(email!);
      }
      await page.setViewportSize({ width: 390, height: 844 });
      assert.equal(await noSideways(page), true, 'the template form fits a phone');
      await shot(page, '5-template-phone');
      await page.setViewportSize({ width: 1280, height: 900 });
      await Promise.all([page.waitForURL(/\/documents\/requests\/sr_/), page.getByRole('button', { name: 'Send for signing' }).click()]);
      assert.match((await page.locator('.flash').textContent())!, /from the template Supply agreement \(template\)/);
      assert.match((await page.locator('.recipient').nth(1).textContent())!, /Step 2[\s\S]*Finn Final[\s\S]*Waiting for their turn/);
      assert.match((await page.locator('.recipient').nth(2).textContent())!, /Gil Copy[\s\S]*Gets a copy/);
      assert.equal(mailsTo('erin@early.test').length, 1);
      assert.equal(mailsTo('finn@final.test').length, 0);
      // Deleting it from the list.
      await page.goto(`${svc.origin}/documents/templates`);
      await Promise.all([page.waitForURL(`${svc.origin}/documents/templates`), page.getByRole('button', { name: 'Delete' }).click()]);
      assert.match((await page.locator('.flash').textContent())!, /Deleted the template/);
      assert.equal(await page.locator('[data-template]').count(), 0);
      assert.deepEqual(owner.problems, []);
    });

    it('a plain member sees only what she sent or must sign; a key’s request shows under the key with its creator', async () => {
      // A request the key sent with workspace access (no member): Olga created the key.
      const { file } = await putFile(svc, ws.workspace_id);
      const byKey = await svc.client(ws.keys.sender!.secret).signing.RequestFileSignatures({ file_id: file.id, title: 'Key contract', signers: [{ email: 'ada@acme.test', name: 'Ada Member' }] });
      assert.equal(byKey.response.status, 200);
      const ada = await signedInPage(browser, svc, { workspaceId: ws.workspace_id, memberId: ws.members.ada! }, '/documents');
      contexts.push(ada.context);
      assert.deepEqual(await ada.page.locator('.request-item h2').allTextContents(), ['Key contract'], 'Ada must sign it; the others are not hers');
      assert.match((await ada.page.locator('.request-item').textContent())!, /Sent by the key Contracts integration, created by Olga Owner/);
      // She reads it but may not change it: no actions; a forged post is refused by the operation.
      await ada.page.goto(`${svc.origin}/documents/requests/${byKey.data!.signing_request_id}`);
      assert.equal(await ada.page.locator('.actions-card').count(), 0);
      assert.equal((await ada.page.goto(`${svc.origin}/documents/requests/${requestId}`))!.status(), 404, "Olga's request is not Ada's to see");
      assert.deepEqual(ada.problems.filter((p) => !/status of 404/.test(p)), []);
    });
  });
}
