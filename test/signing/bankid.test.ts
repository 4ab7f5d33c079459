/**
 * bankid signing on both databases: refused without a provider (nothing charged), the workspace's credit
 * charged once per request (short credit 409 with nothing created; idempotent retries never charge
 * twice), the whole test-provider flow for two signers through the signer's pages over HTTP (the archive
 * is the provider's output byte for byte, `pdfsig` valid for each signer), the admin commands, and the
 * settings page in Chromium (screenshots in test-output/).
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { PDFDocument, StandardFonts } from 'pdf-lib';
import type { Browser } from 'playwright-core';
import { createFile, findFile } from '../../handlers/documents/files.ts';
import { bankIdSettings, BANKID_UNAVAILABLE, prepareBankId } from '../../handlers/signing/bankid.ts';
import { parsePersonalNumber, testPersonalNumber } from '../../handlers/signing/bankidTest.ts';
import { getCredit, listCharges, setCredit } from '../../handlers/signing/credit.ts';
import { mintSignerLink } from '../../handlers/signing/links.ts';
import { verifyDocument } from '../../handlers/signing/verify.ts';
import { createBlobStore } from '../../server/storage.ts';
import { announceBrowser, launchBrowser, signedInPage } from '../support/browser.ts';
import { admin } from '../support/cli.ts';
import { forEachDatabase, type TestService } from '../support/service.ts';

const run = promisify(execFile);
const OUT = path.resolve('test-output');
announceBrowser('the signing settings page test');

const spec = () => ({
  workspace: { name: 'Bankid Oy' },
  members: {
    olga: { name: 'Olga Owner', email: 'olga@bankid.test', role: 'owner' as const },
    ada: { name: 'Ada Member', email: 'ada@bankid.test', role: 'member' as const },
  },
  keys: {
    ci: { name: 'Contracts', operations: ['signing.*', 'documents.*'], delegation: ['olga', 'ada'] },
    other: { name: 'Second integration', operations: ['signing.*', 'documents.*'] },
  },
});

async function samplePdf(pages = 2): Promise<Uint8Array> {
  const doc = await PDFDocument.create();
  const font = await doc.embedFont(StandardFonts.Helvetica);
  for (let i = 1; i <= pages; i++) doc.addPage([595, 842]).drawText(`Supply agreement, page ${i} of ${pages}`, { x: 56, y: 780, size: 16, font });
  return doc.save();
}

/** A workspace file made directly in the store (the upload path has its own tests). */
async function workspaceFile(svc: TestService, workspaceId: string, bytes: Uint8Array, filename = 'supply-agreement.pdf'): Promise<string> {
  const storage = createBlobStore(svc.db, svc.clock, { backend: 'database' });
  const blob = await storage.put(null, [Buffer.from(bytes)], { contentType: 'application/pdf' });
  const file = await createFile(
    svc.db.sql,
    { workspaceId, ownerMemberId: null, createdByKeyId: null, filename, contentType: 'application/pdf', size: blob.size, sha256: blob.sha256, pageCount: 2, blobId: blob.id, source: 'upload' },
    svc.clock.now(),
  );
  return file.id;
}

async function fileBytes(svc: TestService, workspaceId: string, fileId: string): Promise<Buffer> {
  const file = await findFile(svc.db.sql, workspaceId, fileId);
  assert.ok(file, `file ${fileId}`);
  const storage = createBlobStore(svc.db, svc.clock, { backend: 'database' });
  const chunks: Buffer[] = [];
  for await (const c of await storage.get(file.blobId)) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
let keySeq = 0;
const idemKey = () => `bankid-test-${process.pid}-${++keySeq}`;

async function requestSignatures(svc: TestService, secret: string, body: Record<string, unknown>, key = idemKey()) {
  return svc.post('signing.RequestFileSignatures', body, { Authorization: `Bearer ${secret}`, 'Idempotency-Key': key });
}

const count = async (svc: TestService, sql: string, params: (string | number)[] = []) => Number((await svc.db.sql.one<{ n: number }>(sql, params))!.n);

/** A form post from the signer's page (same origin), without following the redirect. */
async function form(svc: TestService, pathName: string, fields: Record<string, string> = {}): Promise<{ status: number; location: string; text: string }> {
  const res = await fetch(`${svc.origin}${pathName}`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', Origin: svc.origin, 'User-Agent': 'bankid-test/1.0' },
    body: new URLSearchParams(fields).toString(),
  });
  return { status: res.status, location: res.headers.get('location') ?? '', text: await res.text() };
}

async function pdfsig(file: string): Promise<string> {
  try {
    return (await run('pdfsig', [file], { env: { ...process.env, TZ: 'UTC' } })).stdout;
  } catch (err) {
    return (err as { stdout?: string }).stdout ?? '';
  }
}

describe('bankid settings (BANKID_PROVIDER)', () => {
  it('unset or empty is no provider; test is the test provider; production refuses it; unknown values stop the start', () => {
    assert.equal(bankIdSettings({}).bankidProvider, null);
    assert.equal(bankIdSettings({ BANKID_PROVIDER: ' ' }).bankidProvider, null);
    assert.equal(bankIdSettings({ BANKID_PROVIDER: 'test' }).bankidProvider, 'test');
    assert.throws(() => bankIdSettings({ BANKID_PROVIDER: 'test', NODE_ENV: 'production' }), /test provider .* refused when NODE_ENV=production/);
    assert.throws(() => bankIdSettings({ BANKID_PROVIDER: 'signicat' }), /BANKID_PROVIDER must be empty \(no bankid\) or one of: test \(got "signicat"\)/);
  });

  it('the test personal number: 12 digits, a real date, the check digit', () => {
    const now = Date.UTC(2026, 10, 24);
    assert.equal(testPersonalNumber('19900101'), '199001011239');
    assert.equal(parsePersonalNumber('19900101-1239', now), '199001011239');
    assert.throws(() => parsePersonalNumber('199001011238', now), /check digit/);
    assert.throws(() => parsePersonalNumber('19901301' + '1234', now), /date of birth/);
    assert.throws(() => parsePersonalNumber('abc', now), /12 digits/);
    assert.throws(() => parsePersonalNumber(testPersonalNumber('20991231'), now), /date of birth/);
  });
});

forEachDatabase('bankid without a provider', (svc) => {
  let ws: Awaited<ReturnType<TestService['apply']>>;
  let fileId: string;
  before(async () => {
    ws = await svc().apply(spec());
    fileId = await workspaceFile(svc(), ws.workspace_id, await samplePdf());
    await setCredit(svc().db.sql, ws.workspace_id, 5, svc().clock.now());
  });

  it('refuses bankid with 400 invalid_input and charges nothing; standard works and costs nothing', async () => {
    const refused = await requestSignatures(svc(), ws.keys.ci!.secret, { file_id: fileId, signers: [{ email: 'sara@example.com', name: 'Sara' }], signature_method: 'bankid' });
    assert.equal(refused.status, 400, JSON.stringify(refused.body));
    assert.equal(refused.body.error, 'invalid_input');
    assert.match(refused.body.message, /bankid is not available/);
    assert.equal((await getCredit(svc().db.sql, ws.workspace_id)).balance, 5);
    assert.equal(await count(svc(), `SELECT COUNT(*) AS n FROM signing_charges WHERE workspace_id = ?`, [ws.workspace_id]), 0);
    assert.equal(await count(svc(), `SELECT COUNT(*) AS n FROM signing_requests WHERE workspace_id = ?`, [ws.workspace_id]), 0);

    const standard = await requestSignatures(svc(), ws.keys.ci!.secret, { file_id: fileId, signers: [{ email: 'sara@example.com', name: 'Sara' }] });
    assert.equal(standard.status, 200, JSON.stringify(standard.body));
    assert.equal(standard.body.signature_method, 'standard');
    assert.equal((await getCredit(svc().db.sql, ws.workspace_id)).balance, 5);
    assert.equal(await count(svc(), `SELECT COUNT(*) AS n FROM signing_charges WHERE workspace_id = ?`, [ws.workspace_id]), 0);
  });

  it('the settings page says bankid is not available', async function () {
    const browser = await launchBrowser(this);
    try {
      const { page, problems, context } = await signedInPage(browser, svc(), { workspaceId: ws.workspace_id, memberId: ws.members.olga! }, '/settings/signing');
      assert.match(await page.locator('.signing-provider').innerText(), /Not available[\s\S]*BANKID_PROVIDER/);
      assert.equal(await page.locator('[data-balance]').getAttribute('data-balance'), '5');
      assert.match(await page.locator('.signing-charges').innerText(), /No bankid request has been charged yet/);
      await fs.mkdir(OUT, { recursive: true });
      await page.screenshot({ path: path.join(OUT, `signing-settings-no-provider-${svc().db.dialect}.png`), fullPage: true });
      assert.deepEqual(problems, []);
      await context.close();
    } finally {
      await browser.close();
    }
  });

  it('prepareBankId throws the same 400 before touching the credit', async () => {
    await assert.rejects(
      svc().db.tx((sql) => prepareBankId(sql, { bankidProvider: null }, { workspaceId: ws.workspace_id, requestId: 'sr_none', now: svc().clock.now() })),
      (err: { status: number; code: string; message: string }) => err.status === 400 && err.code === 'invalid_input' && err.message === BANKID_UNAVAILABLE,
    );
    assert.equal((await getCredit(svc().db.sql, ws.workspace_id)).balance, 5);
  });
});

forEachDatabase(
  'bankid with the test provider',
  (svc) => {
    let ws: Awaited<ReturnType<TestService['apply']>>;
    let fileId: string;
    let original: Uint8Array;
    before(async () => {
      ws = await svc().apply(spec());
      original = await samplePdf();
      fileId = await workspaceFile(svc(), ws.workspace_id, original);
    });
    const bankid = (signers = [{ email: 'sara@example.com', name: 'Sara Signer' }]) => ({ file_id: fileId, title: 'Supply agreement', signers, signature_method: 'bankid' });
    const charges = () => count(svc(), `SELECT COUNT(*) AS n FROM signing_charges WHERE workspace_id = ?`, [ws.workspace_id]);
    const requests = () => count(svc(), `SELECT COUNT(*) AS n FROM signing_requests WHERE workspace_id = ?`, [ws.workspace_id]);
    const mails = () => count(svc(), `SELECT COUNT(*) AS n FROM mailbox_messages`);

    it('credit 0: 409 conflict naming the balance; nothing is created, charged or sent', async () => {
      const [r0, m0] = [await requests(), await mails()];
      const res = await requestSignatures(svc(), ws.keys.ci!.secret, bankid());
      assert.equal(res.status, 409, JSON.stringify(res.body));
      assert.equal(res.body.error, 'conflict');
      assert.match(res.body.message, /^insufficient signing credit: balance 0, needed 1/);
      assert.equal(await requests(), r0);
      assert.equal(await charges(), 0);
      assert.equal(await mails(), m0);
    });

    it('credit 2: two requests charge 2 (one each, keyed by the request), a third is refused', async () => {
      await setCredit(svc().db.sql, ws.workspace_id, 2, svc().clock.now());
      const a = await requestSignatures(svc(), ws.keys.ci!.secret, bankid());
      const b = await requestSignatures(svc(), ws.keys.other!.secret, bankid());
      assert.equal(a.status, 200, JSON.stringify(a.body));
      assert.equal(b.status, 200, JSON.stringify(b.body));
      assert.equal(a.body.signature_method, 'bankid');
      assert.equal((await getCredit(svc().db.sql, ws.workspace_id)).balance, 0);
      const list = await listCharges(svc().db.sql, ws.workspace_id, 10);
      assert.deepEqual(list.map((c) => c.requestId).sort(), [a.body.signing_request_id, b.body.signing_request_id].sort());
      assert.ok(list.every((c) => c.amount === 1));
      const c = await requestSignatures(svc(), ws.keys.ci!.secret, bankid());
      assert.equal(c.status, 409);
      assert.match(c.body.message, /balance 0, needed 1/);
      assert.equal(await charges(), 2);
    });

    it('two requests racing for the last credit: one is charged, the other refused with 409', async () => {
      await setCredit(svc().db.sql, ws.workspace_id, 1, svc().clock.now());
      const [r0, c0] = [await requests(), await charges()];
      const answers = await Promise.all([ws.keys.ci!.secret, ws.keys.other!.secret].map((secret) => requestSignatures(svc(), secret, bankid())));
      assert.deepEqual(answers.map((a) => a.status).sort(), [200, 409], JSON.stringify(answers.map((a) => a.body)));
      assert.equal(await requests(), r0 + 1);
      assert.equal(await charges(), c0 + 1);
      assert.equal((await getCredit(svc().db.sql, ws.workspace_id)).balance, 0);
    });

    it('the same Idempotency-Key retried: one request, charged once; a new key is a new charge', async () => {
      await setCredit(svc().db.sql, ws.workspace_id, 3, svc().clock.now());
      const before = await charges();
      const key = idemKey();
      const first = await requestSignatures(svc(), ws.keys.ci!.secret, bankid(), key);
      const again = await requestSignatures(svc(), ws.keys.ci!.secret, bankid(), key);
      assert.equal(first.status, 200);
      assert.equal(again.status, 200);
      assert.equal(again.body.signing_request_id, first.body.signing_request_id);
      assert.equal(again.headers.get('idempotency-replayed'), 'true');
      assert.equal(await charges(), before + 1);
      assert.equal((await getCredit(svc().db.sql, ws.workspace_id)).balance, 2);
      const fresh = await requestSignatures(svc(), ws.keys.ci!.secret, bankid());
      assert.equal(fresh.status, 200);
      assert.notEqual(fresh.body.signing_request_id, first.body.signing_request_id);
      assert.equal(await charges(), before + 2);
      assert.equal((await getCredit(svc().db.sql, ws.workspace_id)).balance, 1);
    });

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

    it('the admin commands show, set and add credit (and refuse what they must)', async function () {
      this.timeout(120_000); // seven CLI processes, each starting tsx
      const url = svc().databaseUrl;
      const set = await admin(url, 'signing', 'credit', 'set', '--workspace', ws.workspace_id, '--balance', '7');
      assert.equal(set.code, 0, `${set.stderr}\n${set.stdout}`);
      assert.equal(JSON.parse(set.stdout).balance, 7);
      const add = await admin(url, 'signing', 'credit', 'add', '--workspace', ws.workspace_id, '--amount', '3');
      assert.equal(add.code, 0, add.stderr);
      assert.equal(JSON.parse(add.stdout).previous_balance, 7);
      assert.equal(JSON.parse(add.stdout).balance, 10);
      const take = await admin(url, 'signing', 'credit', 'add', '--workspace', ws.workspace_id, '--amount=-4');
      assert.equal(take.code, 0, take.stderr);
      assert.equal(JSON.parse(take.stdout).balance, 6);
      const show = await admin(url, 'signing', 'credit', 'show', '--workspace', ws.workspace_id);
      assert.equal(show.code, 0, show.stderr);
      const shown = JSON.parse(show.stdout);
      assert.equal(shown.balance, 6);
      assert.equal(shown.price_per_bankid_request, 1);
      assert.deepEqual(
        shown.recent_charges.map((c: { signing_request_id: string }) => c.signing_request_id),
        (await listCharges(svc().db.sql, ws.workspace_id, 20)).map((c) => c.requestId),
      );
      assert.equal((await getCredit(svc().db.sql, ws.workspace_id)).balance, 6);

      const below = await admin(url, 'signing', 'credit', 'add', '--workspace', ws.workspace_id, '--amount=-7');
      assert.equal(below.code, 1);
      assert.match(below.stderr, /below 0/);
      const bad = await admin(url, 'signing', 'credit', 'set', '--workspace', ws.workspace_id, '--balance', 'lots');
      assert.equal(bad.code, 1);
      assert.match(bad.stderr, /whole number/);
      const nobody = await admin(url, 'signing', 'credit', 'show', '--workspace', 'ws_doesnotexist');
      assert.equal(nobody.code, 1);
      assert.match(nobody.stderr, /no workspace ws_doesnotexist/);
      assert.equal((await getCredit(svc().db.sql, ws.workspace_id)).balance, 6);
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
