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
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import type { ApplyResult } from '../../server/admin.ts';
import { announceBrowser, launchBrowser, signedInPage } from '../support/browser.ts';
import { databases, type TestService } from '../support/service.ts';
import { type MailServer, putFile, runJobs, sha256, signingService, signingWorkspace, startMailServer } from './requestSupport.ts';
import { onService, samplePdf, signerLinkIn, taggedPdf } from './signerKit.ts';

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

    it('places fields on the pages in the editor (mouse and keyboard), sends in order; signers follow "Next field", fill text and a check box, one draws her signature, one types it; the archive carries them', async () => {
      const { page } = owner;
      await page.goto(`${svc.origin}/documents/new`);
      await page.locator('[data-file-input]').setInputFiles(pdfPath);
      await page.waitForSelector('[data-dropzone][data-done]');
      const rows = page.locator('.signer-row');
      await rows.nth(0).locator('input[name=signer_name]').fill('Erik Engineer');
      await rows.nth(0).locator('input[name=signer_email]').fill('erik@fields.test');
      await page.getByRole('button', { name: 'Add a signer' }).click();
      await rows.nth(1).locator('input[name=signer_name]').fill('Fay Finance');
      await rows.nth(1).locator('input[name=signer_email]').fill('fay@fields.test');
      await page.locator('input[name=in_order]').check();
      await page.locator('input[name=title]').fill('Supply agreement with fields');
      // The editor draws the uploaded file's pages.
      await page.waitForSelector('[data-field-editor][data-pages="3"]');
      await page.locator('ol.field-pages li.sheet[data-page="1"][data-rendered="true"]').waitFor({ timeout: 20_000 });
      const fields = async () => JSON.parse((await page.locator('[data-fields-value]').inputValue()) || '[]') as Array<{ signer: number; kind: string; page: number; x: number; y: number; width: number; height: number; label?: string; required?: boolean }>;
      // Erik's signature, dragged down and left with the mouse, then made larger by its corner.
      await page.locator('[data-field-signer]').selectOption({ label: '1. Erik Engineer' });
      await page.getByRole('button', { name: '+ Signature' }).click();
      let placed = await fields();
      assert.deepEqual(placed.map((f) => [f.signer, f.kind, f.page]), [[0, 'signature', 1]]);
      const before = placed[0]!;
      const box = page.locator('ol.field-pages .field-box').first();
      const at = (await box.boundingBox())!;
      const scale = at.width / before.width; // screen pixels per PDF point
      await page.mouse.move(at.x + at.width / 2, at.y + at.height / 2);
      await page.mouse.down();
      await page.mouse.move(at.x + at.width / 2 - 60, at.y + at.height / 2 + 80, { steps: 5 });
      await page.mouse.up();
      placed = await fields();
      assert.ok(Math.abs(placed[0]!.x - (before.x - 60 / scale)) < 1.5, `dragged left: ${before.x} → ${placed[0]!.x}`);
      assert.ok(Math.abs(placed[0]!.y - (before.y - 80 / scale)) < 1.5, `dragged down (PDF y grows upwards): ${before.y} → ${placed[0]!.y}`);
      const handle = (await page.locator('ol.field-pages .field-box .handle').first().boundingBox())!;
      await page.mouse.move(handle.x + 4, handle.y + 4);
      await page.mouse.down();
      await page.mouse.move(handle.x + 4 + 40, handle.y + 4 + 20, { steps: 4 });
      await page.mouse.up();
      const resized = (await fields())[0]!;
      assert.ok(resized.width > placed[0]!.width + 20 && resized.height > placed[0]!.height + 8, `resized: ${JSON.stringify(resized)}`);
      assert.ok(Math.abs(resized.y + resized.height - (placed[0]!.y + placed[0]!.height)) < 0.5, 'its top edge stayed');
      // A text field with a label, and a check box moved by the keyboard alone.
      await page.getByRole('button', { name: '+ Text' }).click();
      await page.locator('[data-field-label]').fill('Company registration number');
      await page.getByRole('button', { name: '+ Check box' }).click();
      await page.locator('[data-field-label]').fill('I accept the delivery terms');
      const check = page.locator('ol.field-pages .field-box').nth(2);
      await check.focus();
      const start = (await fields())[2]!;
      await page.keyboard.press('Shift+ArrowRight');
      await page.keyboard.press('Shift+ArrowRight');
      await page.keyboard.press('ArrowUp');
      await page.keyboard.press('Alt+ArrowRight');
      const moved = (await fields())[2]!;
      assert.deepEqual([moved.x - start.x, moved.y - start.y, moved.width - start.width], [20, 2, 2], 'Shift+arrows move 10 points, arrows 2, Alt+arrows resize');
      // Fay's signature and the date, on page 1 too; one stray field removed with Delete.
      await page.locator('[data-field-signer]').selectOption({ label: '2. Fay Finance' });
      await page.getByRole('button', { name: '+ Signature' }).click();
      await page.getByRole('button', { name: '+ Date signed' }).click();
      await page.getByRole('button', { name: '+ Name' }).click();
      await page.keyboard.press('Delete');
      placed = await fields();
      assert.deepEqual(placed.map((f) => [f.signer, f.kind, f.label ?? null, f.required ?? null]), [
        [0, 'signature', null, null],
        [0, 'text', 'Company registration number', true],
        [0, 'checkbox', 'I accept the delivery terms', true],
        [1, 'signature', null, null],
        [1, 'date', null, null],
      ]);
      assert.equal(await page.locator('ol.field-list li').count(), 5);
      await shot(page, '6-fields');
      await page.setViewportSize({ width: 390, height: 844 });
      assert.equal(await noSideways(page), true, 'the field editor fits a phone');
      await shot(page, '6-fields-phone');
      await page.setViewportSize({ width: 1280, height: 900 });
      await Promise.all([page.waitForURL(/\/documents\/requests\/sr_/), page.locator('[data-send]').click()]);
      const id = /\/documents\/requests\/(sr_[0-9a-z]+)$/.exec(page.url())![1]!;
      const stored = await svc.db.sql.all<{ kind: string; page: number }>(`SELECT kind, page FROM signing_fields WHERE request_id = ? ORDER BY position`, [id]);
      assert.deepEqual(stored.map((f) => f.kind), ['signature', 'text', 'checkbox', 'signature', 'date']);

      // Erik, on a desktop window: the guide leads him from field to field.
      const erikContext = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      contexts.push(erikContext);
      const erik = await erikContext.newPage();
      const problems: string[] = [];
      erik.on('pageerror', (err) => problems.push(err.message));
      await erik.goto(onService(signerLinkIn(mailsTo('erik@fields.test')[0]!.mail), svc.origin));
      assert.equal(mailsTo('fay@fields.test').length, 0, 'Fay waits for her turn');
      await Promise.all([erik.waitForURL(/\/review$/), erik.getByRole('button', { name: 'Continue to the document' }).click()]);
      await erik.locator('.viewer .field-box').nth(2).waitFor();
      assert.equal(await erik.locator('.viewer .field-box').count(), 3, 'only his own fields');
      assert.match((await erik.locator('[data-field-count]').textContent())!, /^3 of 3 required fields left$/);
      await erik.getByRole('button', { name: 'Start: first field' }).click();
      // Reading order: the text field (highest on the page) first; typing goes into its input and shows in the box.
      assert.equal(await erik.evaluate(() => document.activeElement?.getAttribute('name')?.startsWith('field_')), true);
      await erik.keyboard.type('SE556677-8899');
      assert.match((await erik.locator('.viewer .field-box.current').textContent())!, /SE556677-8899/);
      // Sign with the check box left empty: refused, what he typed is kept.
      await erik.fill('#typed_name', 'Erik Engineer');
      await erik.check('#agree');
      await erik.getByRole('button', { name: 'Sign', exact: true }).click();
      await erik.locator('#sign-problem').waitFor();
      assert.deepEqual(await erik.locator('#sign-problem li').allTextContents(), ['Tick “I accept the delivery terms”.']);
      await erik.locator('.viewer .field-box').nth(2).waitFor();
      assert.match((await erik.locator('[data-field-count]').textContent())!, /^1 of 3 required fields left$/);
      await erik.getByRole('button', { name: 'Next field' }).click();
      await erik.keyboard.press('Space');
      assert.match((await erik.locator('[data-field-count]').textContent())!, /^All 3 fields filled$/);
      // He draws his signature on the pad with the mouse.
      await erik.locator('canvas[data-pad]').scrollIntoViewIfNeeded();
      const pad = (await erik.locator('canvas[data-pad]').boundingBox())!;
      await erik.mouse.move(pad.x + 20, pad.y + pad.height * 0.7);
      await erik.mouse.down();
      for (let i = 1; i <= 12; i++) await erik.mouse.move(pad.x + 20 + i * 25, pad.y + pad.height * (i % 2 ? 0.3 : 0.7));
      await erik.mouse.up();
      assert.match(await erik.locator('[data-pad-value]').inputValue(), /^\{"w":600,"h":200,"strokes":\[\[/);
      await erik.fill('#typed_name', 'Erik Engineer');
      await erik.check('#agree');
      await shot(erik, '7-signer-fields');
      await Promise.all([erik.waitForURL(/\/done$/), erik.getByRole('button', { name: 'Sign', exact: true }).click()]);
      assert.deepEqual(problems, []);

      // Fay, on a phone, types her name: her signature field takes it.
      for (let i = 0; i < 100 && mailsTo('fay@fields.test').length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 20));
      const fayContext = await browser.newContext({ viewport: { width: 390, height: 844 } });
      contexts.push(fayContext);
      const fay = await fayContext.newPage();
      await fay.goto(onService(signerLinkIn(mailsTo('fay@fields.test')[0]!.mail), svc.origin));
      await Promise.all([fay.waitForURL(/\/review$/), fay.getByRole('button', { name: 'Continue to the document' }).click()]);
      await fay.locator('.viewer .field-box').nth(1).waitFor();
      await fay.fill('#typed_name', 'Fay Finance');
      assert.match((await fay.locator('.viewer .field-box.kind-signature').textContent())!, /Fay Finance/);
      await fay.check('#agree');
      assert.equal(await noSideways(fay), true, 'the signer page with fields fits a phone');
      await shot(fay, '7-signer-fields-phone');
      await Promise.all([fay.waitForURL(/\/done$/), fay.getByRole('button', { name: 'Sign', exact: true }).click()]);
      await runJobs(svc);

      // The archive: the fields on page 1, the original's bytes first, one valid seal, qpdf clean.
      const read = await svc.db.sql.all<{ kind: string; value: string | null }>(`SELECT kind, value FROM signing_fields WHERE request_id = ? ORDER BY position`, [id]);
      assert.deepEqual(read.map((f) => f.value), [null, 'SE556677-8899', 'true', null, null]);
      const signed = await page.request.get(`${svc.origin}/documents/requests/${id}/download/signed`);
      assert.equal(signed.status(), 200);
      const archive = await signed.body();
      assert.ok(archive.subarray(0, pdfBytes.length).equals(pdfBytes), 'the upload is the archive\'s first revision, byte for byte');
      const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'wso-fields-')), 'signed.pdf');
      fs.writeFileSync(file, archive);
      const tool = (cmd: string, args: string[]) => execFileSync(cmd, args, { encoding: 'utf8', env: { ...process.env, TZ: 'UTC' } });
      const page1 = tool('pdftotext', ['-f', '1', '-l', '1', file, '-']);
      assert.match(page1, /SE556677-8899/);
      assert.match(page1, /Fay Finance/, 'her typed signature');
      assert.match(page1, new RegExp(new Date(svc.clock.now()).toISOString().slice(0, 10)), 'the date signed');
      assert.doesNotMatch(page1, /Erik Engineer/, 'his signature is drawn, not typed');
      const evidence = tool('pdftotext', ['-f', '4', file, '-']).replace(/\s+/g, ' ');
      assert.match(evidence, /drawn on the signing page/);
      assert.match(evidence, /Sent by Olga Owner <olga@[^>]+>/, 'the evidence pages say who sent the request');
      assert.match(tool('pdfsig', [file]), /Signature is Valid/);
      assert.match(tool('qpdf', ['--check', file]), /No syntax or stream encoding errors found/);
      execFileSync('pdftoppm', ['-r', '60', '-f', '1', '-l', '1', '-singlefile', '-png', file, path.join(shots, `documents-8-archive-fields-${database.name}`)]);
      // Anyone verifies it: the request page's verification link, the file chosen on the public page.
      await page.goto(`${svc.origin}/documents/requests/${id}`);
      // The request page lists the fields with what each signer gave.
      const rowsText = await page.locator('.request-fields tbody tr').allTextContents();
      assert.equal(rowsText.length, 5);
      assert.match(rowsText[1]!, /Text: Company registration number\s*Erik Engineer\s*1\s*SE556677-8899/);
      assert.match(rowsText[2]!, /Check box: I accept the delivery terms\s*Erik Engineer\s*1\s*Ticked/);
      assert.match(rowsText[3]!, /Signature\s*Fay Finance\s*1\s*Filled by the signature/);
      await page.setViewportSize({ width: 390, height: 844 });
      assert.equal(await noSideways(page), true, 'the request page with fields fits a phone');
      await shot(page, '8-request-fields-phone');
      await page.setViewportSize({ width: 1280, height: 900 });
      await Promise.all([page.waitForURL(`${svc.origin}/verify`), page.locator('a[href="/verify"]').click()]);
      await page.locator('input#file').setInputFiles(file);
      await Promise.all([page.waitForLoadState('load'), page.getByRole('button', { name: 'Check the file' }).click()]);
      await page.locator('#verdict').waitFor();
      await shot(page, '8-verified');
      assert.match((await page.locator('section.verdict').textContent())!, /Signed and unchanged/);
      assert.match((await page.locator('main').textContent())!, /Seal\s*valid/);
      assert.match((await page.locator('main').textContent())!, new RegExp(id));
      assert.match((await page.locator('main').textContent())!, /Erik Engineer[\s\S]*Fay Finance/);
      await shot(page, '8-verified');
      assert.deepEqual(owner.problems, []);
    });

    it('a PDF with text tags: the editor outlines them, the request takes its fields from them, and the signer sees the fields over the tags', async () => {
      const { page } = owner;
      const tagged = path.join(path.dirname(pdfPath), 'Purchase agreement.pdf');
      fs.writeFileSync(tagged, await taggedPdf());
      await page.goto(`${svc.origin}/documents/new`);
      await page.locator('[data-file-input]').setInputFiles(tagged);
      await page.waitForSelector('[data-dropzone][data-done]');
      await page.waitForSelector('[data-field-editor][data-pages="2"]');
      assert.match((await page.locator('[data-field-status]').textContent())!, /This PDF has 6 text tags/);
      assert.equal(await page.locator('ol.field-pages .tag-box').count(), 6);
      await page.locator('.signer-row input[name=signer_name]').first().fill('Bea Buyer');
      await page.locator('.signer-row input[name=signer_email]').first().fill('bea@tags.test');
      await page.getByRole('button', { name: 'Add a signer' }).click();
      await page.locator('.signer-row').nth(1).locator('input[name=signer_name]').fill('Sam Seller');
      await page.locator('.signer-row').nth(1).locator('input[name=signer_email]').fill('sam@tags.test');
      await shot(page, '9-tags');
      // Fields that cannot be read are refused, never dropped: nothing is sent.
      await page.locator('[data-fields-value]').evaluate((el) => {
        (el as HTMLInputElement).value = '[null]';
      });
      await Promise.all([page.waitForURL(`${svc.origin}/documents/send`), page.locator('[data-send]').click()]);
      assert.match((await page.locator('.problem').textContent())!, /The placed fields could not be read/);
      assert.equal(mailsTo('bea@tags.test').length, 0);
      assert.deepEqual(owner.problems.splice(0), ['console: Failed to load resource: the server responded with a status of 400 (Bad Request)']);
      await Promise.all([page.waitForURL(/\/documents\/requests\/sr_/), page.locator('[data-send]').click()]);
      const id = /\/documents\/requests\/(sr_[0-9a-z]+)$/.exec(page.url())![1]!;
      const stored = await svc.db.sql.all<{ kind: string; tag: string | null }>(`SELECT kind, tag FROM signing_fields WHERE request_id = ? ORDER BY position`, [id]);
      assert.deepEqual(stored.map((f) => [f.kind, f.tag !== null]), [['text', true], ['checkbox', true], ['signature', true], ['signature', true], ['date', true]]);
      const beaContext = await browser.newContext({ viewport: { width: 390, height: 844 } });
      contexts.push(beaContext);
      const bea = await beaContext.newPage();
      await bea.goto(onService(signerLinkIn(mailsTo('bea@tags.test')[0]!.mail), svc.origin));
      await Promise.all([bea.waitForURL(/\/review$/), bea.getByRole('button', { name: 'Continue to the document' }).click()]);
      await bea.locator('.viewer .field-box.covers').nth(2).waitFor();
      assert.equal(await bea.locator('.viewer .field-box.covers').count(), 3, 'her three fields, each over its tag');
      // The box hides the tag: it is opaque where the tag was written.
      const opaque = await bea.$eval('.viewer .field-box.covers', (el) => getComputedStyle(el).backgroundColor);
      assert.match(opaque, /^rgb\(/, `an opaque background (${opaque})`);
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
