/**
 * Verification on both databases: signing.VerifySignedDocument (visibility, the archive matched to its
 * request, the original and another workspace's view) and the public page `/verify` (multipart from the
 * form and a raw body; an archive with one changed byte, an unrelated PDF and the original; limits and
 * refusals; nothing stored; no e-mail or IP address shown), and the page in Chromium with screenshots.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { announceBrowser, launchBrowser } from '../support/browser.ts';
import { databases, startTestService, type TestService } from '../support/service.ts';
import { startTsa, type LocalTsa } from './tsa.ts';
import { archiveSpec, bytesOf, contractPdf, FIREFOX, IPHONE, putFile, requestRow, sha256, type Signer, signedRequest, writeTo } from './archiveKit.ts';

const OUT = path.resolve('test-output');
announceBrowser('the /verify page test');

const SIGNERS: Signer[] = [
  { email: 'anna@customer.test', name: 'Anna Lindqvist', typedName: 'Anna Lindqvist', ip: '203.0.113.7', userAgent: FIREFOX },
  { email: 'omar@supplier.test', name: 'Omar Haddad', typedName: 'Omar Haddad', ip: '198.51.100.23', userAgent: IPHONE },
];

/** Posts a file to /verify as the form does (multipart/form-data, field `file`). */
async function verifyForm(svc: TestService, bytes: Uint8Array, headers: Record<string, string> = {}): Promise<{ status: number; html: string }> {
  const form = new FormData();
  form.append('file', new Blob([Buffer.from(bytes)], { type: 'application/pdf' }), 'archive.pdf');
  const res = await fetch(`${svc.origin}/verify`, { method: 'POST', body: form, headers });
  return { status: res.status, html: await res.text() };
}

async function verifyRaw(svc: TestService, body: Uint8Array, type = 'application/pdf'): Promise<{ status: number; html: string }> {
  const res = await fetch(`${svc.origin}/verify`, { method: 'POST', body: Buffer.from(body), headers: { 'Content-Type': type } });
  return { status: res.status, html: await res.text() };
}

const heading = (html: string) => html.match(/<h1 id="verdict">([^<]*)<\/h1>/)?.[1];

for (const database of databases) {
  describe(`signing: verification [${database.name}]`, function () {
    this.timeout(60_000);
    let dir: string;
    let tsa: LocalTsa;
    let svc: TestService;
    let ws: Awaited<ReturnType<TestService['apply']>>;
    let original: Uint8Array;
    let archive: Buffer;
    let archiveId: string;
    let sourceId: string;
    let requestId: string;
    let signedAt: number[];
    const auth = () => ({ Authorization: `Bearer ${ws.keys.ci!.secret}` });

    before(async () => {
      dir = await fs.mkdtemp(path.join(os.tmpdir(), 'verify-test-'));
      tsa = await startTsa(dir);
      svc = await startTestService(database.url(), { publicUrl: 'https://sign.acme.example', env: { SIGNING_TSA_URL: tsa.url } });
      ws = await svc.apply(archiveSpec());
      original = await contractPdf('Consulting agreement', 2);
      const source = await putFile(svc, ws.workspace_id, original, { pages: 2, filename: 'consulting.pdf' });
      sourceId = source.id;
      ({ requestId, signedAt } = await signedRequest(svc, ws, source, SIGNERS, { title: 'Consulting agreement 2027' }));
      await svc.jobs.runDue();
      archiveId = (await requestRow(svc, requestId)).archive_file_id!;
      assert.ok(archiveId);
      archive = await bytesOf(svc, ws.workspace_id, archiveId);
    });
    after(async () => {
      await svc?.close();
      await tsa?.close();
      await fs.rm(dir, { recursive: true, force: true });
    });

    it('signing.VerifySignedDocument: the archive has a valid seal over the whole file and matches its request, signers and times', async () => {
      const res = await svc.post('signing.VerifySignedDocument', { file_id: archiveId }, auth());
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.deepEqual(res.body, {
        file_id: archiveId,
        sha256: sha256(archive),
        seal: {
          present: true,
          valid: true,
          covers_whole_document: true,
          signer: 'Workspace Operations seal (sign.acme.example)',
          signed_at: res.body.seal.signed_at,
          timestamp: { present: true, valid: true, time: res.body.seal.timestamp?.time },
        },
        signing_request: {
          signing_request_id: requestId,
          title: 'Consulting agreement 2027',
          status: 'completed',
          completed_at: signedAt[1],
          signers: SIGNERS.map((s, i) => ({ name: s.name, typed_name: s.typedName, signed_at: signedAt[i] })),
        },
      });
      assert.equal(Math.floor(res.body.seal.signed_at / 1000), Math.floor(svc.clock.now() / 1000), 'sealed at the service clock');
      assert.ok(Math.abs(res.body.seal.timestamp.time - Date.now()) < 120_000, "the timestamp authority's (real) time");
    });

    it('signing.VerifySignedDocument: the original has no seal and matches nothing; unknown and invisible files are 404', async () => {
      const res = await svc.post('signing.VerifySignedDocument', { file_id: sourceId }, auth());
      assert.equal(res.status, 200);
      assert.deepEqual(res.body.seal, { present: false, valid: false, covers_whole_document: false, signer: null, signed_at: null, timestamp: null });
      assert.equal(res.body.signing_request, null);
      assert.equal(res.body.sha256, sha256(original));
      const unknown = await svc.post('signing.VerifySignedDocument', { file_id: 'file_000000000000000000000000' }, auth());
      assert.equal(unknown.status, 404);
      assert.equal(unknown.body.error, 'not_found');
      // Ada's private file is not Olga's to check.
      const privateFile = await putFile(svc, ws.workspace_id, original, { pages: 2, owner: ws.members.ada! });
      assert.equal((await svc.post('signing.VerifySignedDocument', { file_id: privateFile.id }, { ...auth(), 'Service-Act-As': ws.members.olga! })).status, 404);
      assert.equal((await svc.post('signing.VerifySignedDocument', { file_id: privateFile.id }, { ...auth(), 'Service-Act-As': ws.members.ada! })).status, 200);
      const bad = await svc.post('signing.VerifySignedDocument', { file: archiveId }, auth());
      assert.equal(bad.status, 400);
      assert.equal(bad.body.error, 'invalid_input');
    });

    it("another workspace holding the same archive gets the seal but not this workspace's request", async () => {
      const other = await svc.apply({ ...archiveSpec(), workspace: { name: 'Other Oy' } });
      const copy = await putFile(svc, other.workspace_id, archive, { pages: 5 });
      const res = await svc.post('signing.VerifySignedDocument', { file_id: copy.id }, { Authorization: `Bearer ${other.keys.ci!.secret}` });
      assert.equal(res.status, 200);
      assert.equal(res.body.seal.valid, true);
      assert.equal(res.body.signing_request, null);
    });

    it('GET /verify: the form; POST the archive (multipart): signed and unchanged, with the request and signers, no e-mail or IP address', async () => {
      const page = await fetch(`${svc.origin}/verify`);
      assert.equal(page.status, 200);
      const form = await page.text();
      assert.match(form, /enctype="multipart\/form-data"/);
      assert.match(form, /nothing is stored/);
      const before = await svc.db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM document_files`);
      const { status, html } = await verifyForm(svc, archive);
      assert.equal(status, 200);
      assert.equal(heading(html), 'Signed and unchanged');
      assert.match(html, new RegExp(requestId));
      assert.match(html, /Consulting agreement 2027/);
      for (const [i, s] of SIGNERS.entries()) {
        assert.match(html, new RegExp(s.name));
        assert.match(html, new RegExp(new Date(signedAt[i]!).toISOString().slice(0, 19).replace('T', ' ')));
        assert.ok(!html.includes(s.email), 'no e-mail address');
        assert.ok(!html.includes(s.ip), 'no IP address');
      }
      assert.match(html, new RegExp(sha256(archive)));
      assert.match(html, /Workspace Operations seal \(sign\.acme\.example\)/);
      assert.match(html, /<dt>Timestamp<\/dt><dd>valid, 20\d\d-/);
      const after = await svc.db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM document_files`);
      assert.equal(Number(after!.n), Number(before!.n), 'nothing stored');
    });

    it('POST /verify: one changed byte breaks the seal and matches nothing; an unrelated PDF and the original have no seal', async () => {
      const tampered = Buffer.from(archive);
      const at = Math.floor(original.length / 2); // inside the original's bytes, which the seal covers
      tampered[at] = tampered[at]! ^ 0x01;
      const broken = await verifyForm(svc, tampered);
      assert.equal(broken.status, 200);
      assert.equal(heading(broken.html), 'The seal is broken');
      assert.doesNotMatch(broken.html, new RegExp(requestId));

      const unrelated = await verifyRaw(svc, await contractPdf('Unrelated memo', 1));
      assert.equal(unrelated.status, 200);
      assert.equal(heading(unrelated.html), 'No seal');

      const orig = await verifyRaw(svc, original, 'application/octet-stream');
      assert.equal(heading(orig.html), 'No seal');
      assert.doesNotMatch(orig.html, new RegExp(requestId));

      const appended = await verifyRaw(svc, Buffer.concat([archive, Buffer.from('\n%%EOF\n')]));
      assert.equal(heading(appended.html), 'Changed after sealing');
    });

    it('POST /verify: a raw body works too; refusals for no file, an empty file, another content type, another origin and over 50 MiB', async () => {
      const raw = await verifyRaw(svc, archive);
      assert.equal(heading(raw.html), 'Signed and unchanged');
      const noFile = new FormData();
      noFile.append('note', 'hello');
      const missing = await fetch(`${svc.origin}/verify`, { method: 'POST', body: noFile });
      assert.equal(missing.status, 400);
      assert.match(await missing.text(), /Choose a PDF file to check/);
      assert.equal((await verifyRaw(svc, new Uint8Array(0))).status, 400);
      const json = await verifyRaw(svc, Buffer.from('{}'), 'application/json');
      assert.equal(json.status, 415);
      const foreign = await verifyForm(svc, archive, { Origin: 'https://evil.example' });
      assert.equal(foreign.status, 403);
      const big = await verifyRaw(svc, new Uint8Array(50 * 1024 * 1024 + 1));
      assert.equal(big.status, 413);
      assert.match(big.html, /larger than the limit of 50 MiB/);
      // Still serving after the refusals.
      assert.equal((await fetch(`${svc.origin}/verify`)).status, 200);
    });

    it('the page in Chromium: choose the archive, check it, read the result (screenshots)', async function () {
      this.timeout(60_000);
      const browser: Browser = await launchBrowser(this);
      try {
        const file = await writeTo(dir, 'Consulting agreement (signed).pdf', archive);
        const broken = Buffer.from(archive);
        broken[Math.floor(original.length / 2)]! ^= 0x01;
        const brokenFile = await writeTo(dir, 'changed.pdf', broken);
        for (const [name, viewport] of [['desktop', { width: 1100, height: 1000 }], ['phone', { width: 390, height: 844 }]] as const) {
          const context = await browser.newContext({ viewport, deviceScaleFactor: 1 });
          const page = await context.newPage();
          const problems: string[] = [];
          page.on('pageerror', (err) => problems.push(err.message));
          page.on('console', (msg) => msg.type() === 'error' && problems.push(msg.text()));
          await page.goto(`${svc.origin}/verify`);
          await fs.mkdir(OUT, { recursive: true });
          await page.screenshot({ path: path.join(OUT, `verify-form-${name}-${database.name}.png`), fullPage: true });
          await page.setInputFiles('#file', file);
          await Promise.all([page.waitForURL(`${svc.origin}/verify`), page.getByRole('button', { name: 'Check the file' }).click()]);
          assert.equal(await page.locator('h1#verdict').textContent(), 'Signed and unchanged');
          assert.equal(await page.getByRole('cell', { name: 'Omar Haddad' }).first().isVisible(), true);
          await page.screenshot({ path: path.join(OUT, `verify-result-${name}-${database.name}.png`), fullPage: true });
          await page.getByRole('link', { name: 'Check another file' }).click();
          await page.setInputFiles('#file', brokenFile);
          await page.getByRole('button', { name: 'Check the file' }).click();
          await page.locator('h1#verdict').waitFor();
          assert.equal(await page.locator('h1#verdict').textContent(), 'The seal is broken');
          await page.screenshot({ path: path.join(OUT, `verify-broken-${name}-${database.name}.png`), fullPage: true });
          assert.deepEqual(problems, []);
          await context.close();
        }
      } finally {
        await browser.close();
      }
    });
  });
}
