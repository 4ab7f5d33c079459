/**
 * bankid signing on both databases through the test provider: the whole flow for two signers through the
 * signer's pages over HTTP (the archive is the provider's output byte for byte, `pdfsig` valid for each
 * signer), two signers finishing at once, the prune job, and the settings page and the signer's pages in
 * Chromium (screenshots in test-output/). Split from one suite; the shared setup is bankidKit.ts.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { testPersonalNumber } from '../../handlers/signing/bankid/personalNumber.ts';
import { getCredit, listCharges, setCredit } from '../../handlers/signing/credit/credit.ts';
import { mintSignerLink } from '../../handlers/signing/signer/links.ts';
import { verifyDocument } from '../../handlers/signing/verify/verifyDocument.ts';
import { createBlobStore } from '../../server/storage.ts';
import { announceBrowser, launchBrowser, signedInPage } from '../support/browser.ts';
import { forEachDatabase, type TestService } from '../support/service.ts';
import { run, OUT, fileBytes, sha256, keySeq, idemKey, requestSignatures, count, form, pdfsig, testProviderSuite } from './bankidKit.ts';

announceBrowser('the signing settings page test');

forEachDatabase(
  'bankid with the test provider',
  (svc) => {
    const suite = testProviderSuite(svc);
    const { bankid } = suite;
    let ws: Awaited<ReturnType<TestService['apply']>>;
    let original: Uint8Array;
    before(() => ({ ws, original } = suite.state()));

    it('two signers sign through the test provider: the archive is the provider output, unmodified, with one valid signature per signer', async () => {
      await setCredit(svc().db.sql, ws.workspace_id, 1, svc().clock.now());
      const created = await requestSignatures(
        svc(),
        ws.keys.ci!.secret,
        bankid([
          { email: 'sara@example.com', name: 'Sara Signer' },
          { email: 'tom@example.com', name: 'Tom Tester' },
        ]),
      );
      assert.equal(created.status, 200, JSON.stringify(created.body));
      const requestId: string = created.body.signing_request_id;
      const recipients: Array<{ recipient_id: string; name: string }> = created.body.recipients;
      const tokens = await Promise.all(recipients.map((r) => svc().db.tx((sql) => mintSignerLink(sql, { recipientId: r.recipient_id, requestId }, svc().clock.now()))));
      const outputs: string[] = [];
      let firstOrder = '';

      for (const [i, token] of tokens.entries()) {
        svc().clock.advance(60_000);
        const opened = await form(svc(), `/sign/${token}/open`);
        assert.equal(opened.status, 303);
        const review = await fetch(`${svc().origin}/sign/${token}/review`);
        assert.equal(review.status, 200);
        assert.match(await review.text(), new RegExp(`/sign/${token}/bankid/start`), 'the review page offers the provider');

        const unticked = await form(svc(), `/sign/${token}/bankid/start`);
        assert.equal(unticked.status, 400);
        assert.match(unticked.text, /I agree to sign this document electronically/);
        const started = await form(svc(), `/sign/${token}/bankid/start`, { agree: 'yes' });
        assert.equal(started.status, 303, started.text);
        const match = new RegExp(`^/sign/${token}/bankid/test/(spo_[0-9a-z]{24})$`).exec(started.location);
        assert.ok(match, started.location);
        const order = match[1]!;

        const providerPage = await fetch(`${svc().origin}${started.location}`);
        const html = await providerPage.text();
        assert.equal(providerPage.status, 200);
        assert.match(html, /TEST SIGNING PROVIDER/);
        assert.match(html, /Confirm and sign \(TEST\)/);
        // A GET of the provider's page records nothing.
        assert.equal(await count(svc(), `SELECT COUNT(*) AS n FROM signing_recipients WHERE request_id = ? AND status = 'signed'`, [requestId]), i);

        const wrong = await form(svc(), `/sign/${token}/bankid/return`, { order, personal_number: '199001011238' });
        assert.equal(wrong.status, 400);
        assert.match(wrong.text, /check digit/);

        // Another recipient's order, a made-up one, and a start from another site are refused.
        if (i === 1) {
          const foreign = await form(svc(), `/sign/${token}/bankid/return`, { order: firstOrder, personal_number: testPersonalNumber('19850615') });
          assert.equal(foreign.status, 404);
          assert.match(foreign.text, /does not belong to this signing link/);
        }
        const madeUp = await form(svc(), `/sign/${token}/bankid/return`, { order: 'spo_000000000000000000000000', personal_number: testPersonalNumber('19850615') });
        assert.equal(madeUp.status, 404);
        const crossSite = await fetch(`${svc().origin}/sign/${token}/bankid/start`, {
          method: 'POST',
          redirect: 'manual',
          headers: { 'Content-Type': 'application/x-www-form-urlencoded', Origin: 'https://evil.example' },
          body: 'agree=yes',
        });
        assert.equal(crossSite.status, 403);
        if (i === 0) firstOrder = order;

        const done = await form(svc(), `/sign/${token}/bankid/return`, { order, personal_number: testPersonalNumber('19850615', String(100 + i)) });
        assert.equal(done.status, 303, done.text);
        assert.equal(done.location, `/sign/${token}/done`);
        const working = await svc().db.sql.one<{ sha256: string; signatures: number }>(`SELECT sha256, signatures FROM signing_provider_documents WHERE request_id = ?`, [requestId]);
        assert.equal(Number(working!.signatures), i + 1);
        outputs.push(working!.sha256);

        // The order is used: posting it again signs nothing more.
        const replay = await form(svc(), `/sign/${token}/bankid/return`, { order, personal_number: testPersonalNumber('19850615') });
        assert.equal(replay.status, 303);
        assert.equal(replay.location, `/sign/${token}/done`);

        const got = await svc().post('signing.GetSigningRequest', { signing_request_id: requestId }, { Authorization: `Bearer ${ws.keys.ci!.secret}` });
        assert.equal(got.status, 200);
        if (i === 0) {
          assert.equal(got.body.status, 'pending');
          assert.equal(got.body.file_id, null);
        }
      }

      const got = await svc().post('signing.GetSigningRequest', { signing_request_id: requestId }, { Authorization: `Bearer ${ws.keys.ci!.secret}` });
      assert.equal(got.body.status, 'completed');
      assert.ok(got.body.file_id, 'file_id is set when the last signer signs');
      const archive = await fileBytes(svc(), ws.workspace_id, got.body.file_id);
      assert.equal(sha256(archive), outputs.at(-1), 'the archive is the provider output, byte for byte');
      assert.ok(archive.subarray(0, original.length).equals(Buffer.from(original)), 'the original bytes are the start of the archive');
      const row = await svc().db.sql.one<{ archive_sha256: string }>(`SELECT archive_sha256 FROM signing_requests WHERE id = ?`, [requestId]);
      assert.equal(row!.archive_sha256, outputs.at(-1));

      // The service's own verification matches the archive to its request and finds the last signature valid.
      const verified = await verifyDocument(svc().db.sql, archive, ws.workspace_id);
      assert.deepEqual(
        { valid: verified.seal.valid, whole: verified.seal.covers_whole_document, signer: verified.seal.signer, request: verified.signing_request?.signing_request_id },
        { valid: true, whole: true, signer: 'Tom Tester (BankID TEST)', request: requestId },
      );
      assert.deepEqual(verified.signing_request!.signers.map((x) => x.typed_name), ['Sara Signer', 'Tom Tester']);

      // Evidence is on the recipients, never in the history.
      const evidence = await svc().db.sql.all<{ provider_evidence: string; typed_name: string }>(`SELECT provider_evidence, typed_name FROM signing_recipients WHERE request_id = ? ORDER BY position`, [requestId]);
      assert.deepEqual(evidence.map((e) => JSON.parse(e.provider_evidence).signed_sha256), outputs);
      assert.equal(JSON.parse(evidence[0]!.provider_evidence).personal_number, testPersonalNumber('19850615', '100'));
      const history = await svc().db.sql.all<{ kind: string; data: string }>(`SELECT kind, data FROM signing_events WHERE request_id = ? ORDER BY seq`, [requestId]);
      assert.ok(history.some((e) => e.kind === 'archive.completed'));
      assert.ok(!history.some((e) => e.data.includes('19850615')), 'no personal number in the history');

      // The archive job that completion enqueued finds the archive done: still one archive file.
      await svc().jobs.runDue();
      const after = await svc().db.sql.one<{ archive_file_id: string }>(`SELECT archive_file_id FROM signing_requests WHERE id = ?`, [requestId]);
      assert.equal(after!.archive_file_id, got.body.file_id);
      assert.equal(await count(svc(), `SELECT COUNT(*) AS n FROM document_files WHERE workspace_id = ? AND source = 'signing_archive'`, [ws.workspace_id]), 1);

      // The signed document through the API is the same bytes.
      const doc = await svc().post('signing.GetSigningDocument', { signing_request_id: requestId, version: 'signed' }, { Authorization: `Bearer ${ws.keys.ci!.secret}` });
      assert.equal(doc.status, 200, JSON.stringify(doc.body));
      // The URL names PUBLIC_URL (localhost:8080 here): the same path on the test server.
      const link = new URL(doc.body.url);
      const downloaded = Buffer.from(await (await fetch(`${svc().origin}${link.pathname}`)).arrayBuffer());
      assert.equal(sha256(downloaded), outputs.at(-1));

      const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'bankid-'));
      const file = path.join(dir, 'archive.pdf');
      await fs.writeFile(file, archive);
      const sig = await pdfsig(file);
      assert.equal((sig.match(/Signature Validation: Signature is Valid\./g) ?? []).length, 2, sig);
      assert.match(sig, /Signer Certificate Common Name: Sara Signer \(BankID TEST\)/);
      assert.match(sig, /Signer Certificate Common Name: Tom Tester \(BankID TEST\)/);
      assert.match(sig, /Total document signed/);
      const check = await run('qpdf', ['--check', file]).then((r) => r.stdout, (e: { stdout: string }) => e.stdout);
      assert.match(check, /No syntax or stream encoding errors found/);
      await fs.rm(dir, { recursive: true, force: true });
    });

    /** A bankid request with these signers, opened and started by each: their tokens and open orders. */
    async function startedRequest(names: string[]): Promise<{ requestId: string; tokens: string[]; orders: string[] }> {
      await setCredit(svc().db.sql, ws.workspace_id, (await getCredit(svc().db.sql, ws.workspace_id)).balance + 1, svc().clock.now());
      const created = await requestSignatures(svc(), ws.keys.ci!.secret, bankid(names.map((name, i) => ({ email: `s${i}-${keySeq}@example.com`, name }))));
      assert.equal(created.status, 200, JSON.stringify(created.body));
      const requestId: string = created.body.signing_request_id;
      const tokens: string[] = [];
      const orders: string[] = [];
      for (const r of created.body.recipients as Array<{ recipient_id: string }>) {
        const token = await svc().db.tx((sql) => mintSignerLink(sql, { recipientId: r.recipient_id, requestId }, svc().clock.now()));
        assert.equal((await form(svc(), `/sign/${token}/open`)).status, 303);
        const started = await form(svc(), `/sign/${token}/bankid/start`, { agree: 'yes' });
        assert.equal(started.status, 303);
        tokens.push(token);
        orders.push(started.location.split('/').at(-1)!);
      }
      return { requestId, tokens, orders };
    }

    it('two signers finishing at the same moment: both signatures land, one after the other, both valid', async () => {
      const { requestId, tokens, orders } = await startedRequest(['Vera Fast', 'Walt Faster']);
      const results = await Promise.all(tokens.map((token, i) => form(svc(), `/sign/${token}/bankid/return`, { order: orders[i]!, personal_number: testPersonalNumber('19700101', String(200 + i)) })));
      assert.deepEqual(results.map((r) => r.status), [303, 303], results.map((r) => r.text).join('\n'));
      const row = await svc().db.sql.one<{ archive_file_id: string; status: string }>(`SELECT archive_file_id, status FROM signing_requests WHERE id = ?`, [requestId]);
      assert.equal(row!.status, 'completed');
      const working = await svc().db.sql.one<{ signatures: number; blob_id: string }>(`SELECT signatures, blob_id FROM signing_provider_documents WHERE request_id = ?`, [requestId]);
      assert.equal(Number(working!.signatures), 2);
      const archive = await fileBytes(svc(), ws.workspace_id, row!.archive_file_id);
      const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'bankid-'));
      await fs.writeFile(path.join(dir, 'a.pdf'), archive);
      const sig = await pdfsig(path.join(dir, 'a.pdf'));
      await fs.rm(dir, { recursive: true, force: true });
      assert.equal((sig.match(/Signature is Valid\./g) ?? []).length, 2, sig);
      assert.match(sig, /Vera Fast \(BankID TEST\)/);
      assert.match(sig, /Walt Faster \(BankID TEST\)/);
      // Only the archive's blob is left of the request's outputs (superseded ones were deleted). Both posts
      // usually read the original before either commits: then the later one's round-0 output is discarded
      // and it signs again over the first signature (its round 1 is the archive).
      const storage = createBlobStore(svc().db, svc().clock, { backend: 'database' });
      const left = [];
      for (const order of orders) for (let round = 0; round < 3; round++) if (await storage.stat(`${order}-${round}`)) left.push(`${order}-${round}`);
      assert.deepEqual(left, [working!.blob_id]);
    });

    it('the prune job removes the working PDF of a cancelled request and day-old orders with unused outputs', async () => {
      const { requestId, tokens, orders } = await startedRequest(['Xena Early', 'Yuri Late']);
      const first = await form(svc(), `/sign/${tokens[0]}/bankid/return`, { order: orders[0]!, personal_number: testPersonalNumber('19700101') });
      assert.equal(first.status, 303);
      const working = await svc().db.sql.one<{ blob_id: string }>(`SELECT blob_id FROM signing_provider_documents WHERE request_id = ?`, [requestId]);
      const storage = createBlobStore(svc().db, svc().clock, { backend: 'database' });
      assert.ok(await storage.stat(working!.blob_id));
      // An output a dead process stored but never committed, named as the flow names them.
      const orphan = await storage.put(`${orders[1]}-0`, [Buffer.from('%PDF-1.7 orphan')], { contentType: 'application/pdf' });
      const cancel = await svc().post('signing.CancelSigningRequest', { signing_request_id: requestId, reason: 'wrong counterparty' }, { Authorization: `Bearer ${ws.keys.ci!.secret}`, 'Idempotency-Key': idemKey() });
      assert.equal(cancel.status, 200, JSON.stringify(cancel.body));

      svc().clock.advance(25 * 3600_000);
      await svc().jobs.scheduleRecurring();
      await svc().jobs.runDue();
      assert.equal(await storage.stat(working!.blob_id), null, 'the cancelled request’s working PDF is gone');
      assert.equal(await storage.stat(orphan.id), null, 'the orphaned output is gone');
      assert.equal(await count(svc(), `SELECT COUNT(*) AS n FROM signing_provider_documents WHERE request_id = ?`, [requestId]), 0);
      assert.equal(await count(svc(), `SELECT COUNT(*) AS n FROM signing_provider_orders WHERE request_id = ?`, [requestId]), 0);
      // Completed requests keep theirs: every archive's bytes are still there.
      const archives = await svc().db.sql.all<{ archive_file_id: string }>(`SELECT archive_file_id FROM signing_requests WHERE workspace_id = ? AND status = 'completed'`, [ws.workspace_id]);
      assert.ok(archives.length >= 2);
      for (const a of archives) assert.ok((await fileBytes(svc(), ws.workspace_id, a.archive_file_id)).length > 0);
    });

    describe('the settings page', function () {
      let browser: Browser;
      before(async function () {
        browser = await launchBrowser(this);
        await fs.mkdir(OUT, { recursive: true });
      });
      after(async () => browser?.close());

      it('shows owners the provider, the credit, the price and the charges; members read the same', async () => {
        const db = svc().db.dialect;
        await setCredit(svc().db.sql, ws.workspace_id, (await getCredit(svc().db.sql, ws.workspace_id)).balance + 1, svc().clock.now());
        assert.equal((await requestSignatures(svc(), ws.keys.ci!.secret, bankid())).status, 200);
        const charged = (await listCharges(svc().db.sql, ws.workspace_id, 20)).length;
        const owner = await signedInPage(browser, svc(), { workspaceId: ws.workspace_id, memberId: ws.members.olga! }, '/settings/signing');
        const { page, problems } = owner;
        await page.waitForSelector('.signing-credit');
        assert.equal(await page.locator('[data-balance]').getAttribute('data-balance'), String((await getCredit(svc().db.sql, ws.workspace_id)).balance));
        assert.match(await page.locator('.signing-provider').innerText(), /BankID \(test\)/);
        assert.match(await page.locator('.signing-provider').innerText(), /TEST/);
        assert.match(await page.locator('[data-price]').innerText(), /^1$/);
        assert.equal(await page.locator('tr[data-charge]').count(), charged);
        assert.match(await page.locator('.signing-charges').innerText(), /Supply agreement/);
        assert.equal(await page.locator('nav a[aria-current="page"]').innerText(), 'Signing');
        await page.screenshot({ path: path.join(OUT, `signing-settings-owner-${db}.png`), fullPage: true });
        assert.deepEqual(problems, []);
        await owner.context.close();

        const member = await signedInPage(browser, svc(), { workspaceId: ws.workspace_id, memberId: ws.members.ada! }, '/settings/signing');
        await member.page.waitForSelector('.signing-credit');
        assert.match(await member.page.locator('p.info').innerText(), /An operator sets the credit/);
        // Requests a member did not send show only their id.
        assert.doesNotMatch(await member.page.locator('.signing-charges').innerText(), /Supply agreement/);
        await member.page.setViewportSize({ width: 390, height: 844 });
        await member.page.screenshot({ path: path.join(OUT, `signing-settings-member-phone-${db}.png`), fullPage: true });
        assert.deepEqual(member.problems, []);
        await member.context.close();
      });

      it('a signer signs with the test provider in Chromium: review, the TEST page, a wrong number, done', async () => {
        const db = svc().db.dialect;
        await setCredit(svc().db.sql, ws.workspace_id, (await getCredit(svc().db.sql, ws.workspace_id)).balance + 1, svc().clock.now());
        const created = await requestSignatures(svc(), ws.keys.ci!.secret, bankid([{ email: 'uma@example.com', name: 'Uma Browser' }]));
        assert.equal(created.status, 200, JSON.stringify(created.body));
        const requestId: string = created.body.signing_request_id;
        const token = await svc().db.tx((sql) => mintSignerLink(sql, { recipientId: created.body.recipients[0].recipient_id, requestId }, svc().clock.now()));
        const context = await browser.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 1 });
        const page = await context.newPage();
        const problems: string[] = [];
        page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
        await page.goto(`${svc().origin}/sign/${token}`);
        await page.getByRole('button', { name: /Continue/ }).click();
        await page.waitForURL(/\/review$/);
        await page.getByLabel('I agree to sign this document electronically').check();
        await page.getByRole('button', { name: 'Sign with BankID (test)' }).click();
        await page.waitForURL(/\/bankid\/test\/spo_/);
        assert.match(await page.title(), /^TEST: /);
        await page.getByLabel('Test personal number').fill('199001011238');
        await page.screenshot({ path: path.join(OUT, `bankid-test-provider-phone-${db}.png`), fullPage: true });
        await page.getByRole('button', { name: 'Confirm and sign (TEST)' }).click();
        await page.waitForSelector('.bankid-panel');
        assert.match(await page.locator('.bankid-panel').innerText(), /check digit/);
        await page.screenshot({ path: path.join(OUT, `bankid-test-provider-refused-phone-${db}.png`), fullPage: true });
        // "Try again" opens a new order with the agreement already given on the review page.
        await page.getByRole('button', { name: 'Try again' }).click();
        await page.waitForURL(/\/bankid\/test\/spo_/);
        await page.getByLabel('Test personal number').fill(testPersonalNumber('19900101'));
        await page.getByRole('button', { name: 'Confirm and sign (TEST)' }).click();
        await page.waitForURL(/\/done$/);
        await page.screenshot({ path: path.join(OUT, `bankid-signed-done-phone-${db}.png`), fullPage: true });
        const got = await svc().post('signing.GetSigningRequest', { signing_request_id: requestId }, { Authorization: `Bearer ${ws.keys.ci!.secret}` });
        assert.equal(got.body.status, 'completed');
        assert.ok(got.body.file_id);
        assert.deepEqual(problems, []);
        await context.close();
      });
    });
  },
  { env: { BANKID_PROVIDER: 'test' } },
);
