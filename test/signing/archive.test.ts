/**
 * The signed archive (signing.archive job) on both databases, checked with the tools a recipient or an
 * auditor uses: `pdfinfo` (original pages + evidence pages), `pdftotext` (each typed name, time, IP
 * address and device), `pdfsig` (valid, whole document signed), `qpdf --check`, the RFC 3161 token
 * of a local `openssl ts` responder verified with `openssl ts -verify`; the original pages unchanged
 * (the archive starts with the original's bytes; page 1 rasterised identically); an owner-password
 * original; a private source; reruns and a failing timestamp authority (archive_error, backoff, then
 * done); the installation certificate shared through the database; and a service process killed with
 * SIGKILL while the job runs, after which a second process finishes it with exactly one archive file.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import pino from 'pino';
import { PDFDocument } from 'pdf-lib';
import { migrations } from '../../app.ts';
import { openDatabase } from '../../db/database.ts';
import { findFile } from '../../handlers/documents/files.ts';
import { archiveRequest } from '../../handlers/signing/archive/archiveJob.ts';
import { installationCertificate, sealingCertificate, sealSettingsFromEnv } from '../../handlers/signing/archive/sealSettings.ts';
import { createServiceCertificate, loadStoredCertificate } from '../../handlers/signing/archive/sealCertificate.ts';
import { storedPdfChecks } from '../../handlers/documents/pdf.ts';
import { buildArchive, deviceSummary, utc } from '../../handlers/signing/archive/evidence.ts';
import { seal } from '../../handlers/signing/archive/seal.ts';
import { inspectSeal } from '../../handlers/signing/verify/verifyDocument.ts';
import type { ModuleDeps } from '../../server/module.ts';
import { createBlobStore } from '../../server/storage.ts';
import { killFixtureWhen } from '../support/process.ts';
import { databases, startTestService, type TestService } from '../support/service.ts';
import { archiveSpec, bytesOf, contractPdf, FIREFOX, IPHONE, pdfPages, pdfsig, putFile, requestRow, run, type Signer, signedRequest, writeTo } from './archiveKit.ts';
import { startTsa, type LocalTsa } from './tsa.ts';

const TIMESTAMP_OID = '1.2.840.113549.1.9.16.2.14';

const SIGNERS: Signer[] = [
  { email: 'anna@customer.test', name: 'Anna Lindqvist', typedName: 'Anna Lindqvist', ip: '203.0.113.7', userAgent: FIREFOX },
  { email: 'lukasz@supplier.test', name: 'Łukasz Żółć', typedName: 'Łukasz Żółć', ip: '2001:db8::1', userAgent: IPHONE },
];

const archiveFiles = async (svc: TestService, workspaceId: string) =>
  Number((await svc.db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM document_files WHERE workspace_id = ? AND source = 'signing_archive'`, [workspaceId]))!.n);

for (const database of databases) {
  describe(`signing: the sealed archive [${database.name}]`, function () {
    this.timeout(60_000);
    let dir: string;
    let tsa: LocalTsa;
    let svc: TestService;
    let ws: Awaited<ReturnType<TestService['apply']>>;
    let workspaceId: string;

    before(async () => {
      dir = await fs.mkdtemp(path.join(os.tmpdir(), 'archive-test-'));
      tsa = await startTsa(dir);
      svc = await startTestService(database.url(), { publicUrl: 'https://sign.acme.example', env: { SIGNING_TSA_URL: tsa.url } });
      ws = await svc.apply(archiveSpec());
      workspaceId = ws.workspace_id;
    });
    after(async () => {
      await svc?.close();
      await tsa?.close();
      await fs.rm(dir, { recursive: true, force: true });
    });

    it('two signers: original pages unchanged + evidence pages, typed names and times, one valid seal over the whole file with a verified timestamp', async () => {
      const original = await contractPdf('Services agreement', 3);
      const source = await putFile(svc, workspaceId, original, { pages: 3, filename: 'Services agreement.pdf' });
      const { requestId, signedAt } = await signedRequest(svc, ws, source, SIGNERS);
      assert.equal((await requestRow(svc, requestId)).archive_file_id, null, 'built by the job, not in the signing transaction');
      const stampsBefore = tsa.requests;
      await svc.jobs.runDue();
      assert.equal(tsa.requests, stampsBefore + 1, 'one timestamp per archive');

      const row = await requestRow(svc, requestId);
      assert.equal(row.status, 'completed');
      assert.ok(row.archive_file_id, `archive_file_id set (error: ${row.archive_error})`);
      assert.equal(row.archive_error, null);
      const file = (await findFile(svc.db.sql, workspaceId, row.archive_file_id))!;
      assert.equal(file.source, 'signing_archive');
      assert.equal(file.ownerMemberId, null, 'a workspace file, as its source');
      assert.equal(file.filename, 'Services agreement (signed).pdf');
      const bytes = await bytesOf(svc, workspaceId, file.id);
      assert.equal(createHash('sha256').update(bytes).digest('hex'), row.archive_sha256);
      assert.equal(file.sha256, row.archive_sha256);

      // The original pages are the original file itself: the archive begins with its bytes.
      assert.ok(bytes.subarray(0, original.length).equals(Buffer.from(original)), 'the archive starts with the original, byte for byte');
      const archivePath = await writeTo(dir, 'archive.pdf', bytes);
      const originalPath = await writeTo(dir, 'original.pdf', original);
      const pages = await pdfPages(archivePath);
      const event = await svc.db.sql.one<{ data: string }>(`SELECT data FROM signing_events WHERE request_id = ? AND kind = 'archive.completed'`, [requestId]);
      const data = JSON.parse(event!.data) as { evidence_pages: number; pages: number; file_id: string; timestamped: boolean };
      assert.ok(data.evidence_pages >= 1);
      assert.equal(pages, 3 + data.evidence_pages, 'pdfinfo: original pages + evidence pages');
      assert.equal(file.pageCount, pages);
      assert.deepEqual({ file: data.file_id, stamped: data.timestamped }, { file: file.id, stamped: true });
      for (const page of [1, 3]) {
        const [a, b] = await Promise.all(
          [originalPath, archivePath].map(async (p, i) => {
            await run('pdftoppm', ['-r', '40', '-f', String(page), '-l', String(page), '-png', p, path.join(dir, `page${page}-${i}`)]);
            const [png] = (await fs.readdir(dir)).filter((n) => n.startsWith(`page${page}-${i}`));
            return fs.readFile(path.join(dir, png!));
          }),
        );
        assert.ok(a!.equals(b!), `page ${page} rasterises identically`);
      }

      const text = (await run('pdftotext', ['-f', '4', '-layout', archivePath, '-'])).stdout;
      console.log(`      evidence (first lines):\n${text.split('\n').filter((l) => l.trim()).slice(0, 30).map((l) => `        ${l}`).join('\n')}`);
      assert.match(text, new RegExp(requestId));
      assert.match(text, /Services agreement 2027/);
      assert.match(text, new RegExp(source.sha256));
      assert.match(text.replace(/\s+/g, ' '), new RegExp(`The first ${original.length} bytes of this file are the original file itself`));
      for (const [i, s] of SIGNERS.entries()) {
        assert.ok(text.split(s.typedName).length >= 3, `${s.typedName}: as text and drawn in the handwriting font`);
        assert.match(text, new RegExp(s.email.replace('.', '\\.')));
        assert.match(text, new RegExp(utc(signedAt[i]!)));
        assert.ok(text.includes(s.ip), s.ip);
      }
      assert.match(text, /Firefox 132 on Windows 10/);
      assert.match(text, /Safari 17 on iOS 17\.1 \(mobile\)/);
      for (const label of ['Request created', 'Invitation sent', 'Opened the request', 'Signed', 'All parties signed']) assert.match(text, new RegExp(label));
      // For a reviewer: the first evidence page as an image, and the archive itself.
      await fs.mkdir(path.resolve('test-output'), { recursive: true });
      await run('pdftoppm', ['-r', '80', '-f', '4', '-l', '4', '-singlefile', '-png', archivePath, path.resolve('test-output', `archive-evidence-${database.name}`)]);
      await fs.copyFile(archivePath, path.resolve('test-output', `archive-${database.name}.pdf`));
      const fonts = (await run('pdffonts', ['-f', '4', archivePath])).stdout;
      assert.match(fonts, /KaushanScript-Regular/, 'the handwriting font is embedded');

      const sig = await pdfsig(archivePath);
      console.log(`      pdfsig:\n${sig.replace(/^/gm, '        ')}`);
      assert.match(sig, /Signature Validation: Signature is Valid\./);
      assert.match(sig, /Total document signed/);
      assert.equal(sig.match(/^Signature #/gm)?.length, 1, 'one seal');
      assert.match(sig, /Signer Certificate Common Name: Workspace Operations seal \(sign\.acme\.example\)/);
      assert.match((await run('qpdf', ['--check', archivePath])).stdout, /No syntax or stream encoding errors found/);

      // The timestamp token: openssl ts -verify over the seal's signature value, with the TSA's certificate.
      const text2 = bytes.toString('latin1');
      const range = text2.match(/\/ByteRange\s*\[\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*\]/)!.slice(1, 5).map(Number);
      const der = Buffer.from(bytes.subarray(range[1]! + 1, range[2]! - 1).toString('latin1'), 'hex');
      const signer = new pkijs.SignedData({ schema: new pkijs.ContentInfo({ schema: asn1js.fromBER(der).result }).content }).signerInfos[0]!;
      const token = signer.unsignedAttrs!.attributes.find((a) => a.type === TIMESTAMP_OID)!;
      const tokenFile = await writeTo(dir, 'token.der', new Uint8Array(token.values[0].toBER(false)));
      const valueFile = await writeTo(dir, 'signature.bin', signer.signature.valueBlock.valueHexView);
      const verified = await run('openssl', ['ts', '-verify', '-in', tokenFile, '-token_in', '-data', valueFile, '-CAfile', tsa.certFile, '-untrusted', tsa.certFile]);
      assert.match(verified.stdout, /Verification: OK/);
      const report = await inspectSeal(bytes);
      assert.deepEqual({ valid: report.valid, whole: report.covers_whole_document, ts: report.timestamp?.valid }, { valid: true, whole: true, ts: true });

      // The history ends with archive.completed; the request answers file_id.
      const kinds = (await svc.db.sql.all<{ kind: string }>(`SELECT kind FROM signing_events WHERE request_id = ? ORDER BY seq`, [requestId])).map((r) => r.kind);
      assert.equal(kinds.at(-1), 'archive.completed');
      const got = await svc.post('signing.GetSigningRequest', { signing_request_id: requestId }, { Authorization: `Bearer ${ws.keys.ci!.secret}` });
      assert.equal((got.body as { file_id: string }).file_id, file.id);

      // A second run (a job enqueued again, a process that retries) finds it done: still one archive file.
      const deps = { db: svc.db, clock: svc.clock, storage: createBlobStore(svc.db, svc.clock, svc.config.storage), config: svc.config, logger: pino({ level: 'silent' }) } as unknown as ModuleDeps<unknown>;
      const again = await archiveRequest(deps, sealSettingsFromEnv({ SIGNING_TSA_URL: tsa.url }), { requestId, workspaceId });
      assert.deepEqual(again, { outcome: 'done', fileId: file.id });
      assert.equal(await svc.jobs.enqueue(svc.db.sql, 'signing.archive', { requestId, workspaceId }, { key: requestId }), true);
      await svc.jobs.runDue();
      assert.equal(await archiveFiles(svc, workspaceId), 1);
      assert.equal((await requestRow(svc, requestId)).archive_file_id, file.id);
    });

    it('fields on the page: each signer\'s signature, initials, name and date drawn in their boxes after the original bytes, one valid seal, qpdf clean', async () => {
      const original = await contractPdf('Fields agreement', 2);
      const source = await putFile(svc, workspaceId, original, { pages: 2, filename: 'Fields agreement.pdf' });
      const fields = [
        { signer: 0, kind: 'signature', page: 1, x: 60, y: 150, width: 220, height: 40 },
        { signer: 0, kind: 'date', page: 1, x: 300, y: 150, width: 120, height: 20 },
        { signer: 1, kind: 'name', page: 2, x: 60, y: 150, width: 220, height: 20 },
        { signer: 1, kind: 'initials', page: 2, x: 500, y: 40, width: 60, height: 30 },
      ];
      const { requestId, signedAt } = await signedRequest(svc, ws, source, SIGNERS, { title: 'Fields agreement', fields });
      const read = await svc.post('signing.GetSigningRequest', { signing_request_id: requestId }, { Authorization: `Bearer ${ws.keys.ci!.secret}` });
      assert.deepEqual((read.body as { fields: Array<{ kind: string; page: number }> }).fields.map((f) => [f.kind, f.page]), fields.map((f) => [f.kind, f.page]));
      await svc.jobs.runDue();
      const row = await requestRow(svc, requestId);
      assert.ok(row.archive_file_id, `archive made (error: ${row.archive_error})`);
      const bytes = await bytesOf(svc, workspaceId, row.archive_file_id);
      assert.ok(bytes.subarray(0, original.length).equals(Buffer.from(original)), 'the original is the first bytes, byte for byte');
      const archivePath = await writeTo(dir, 'fields.pdf', bytes);
      const page1 = (await run('pdftotext', ['-f', '1', '-l', '1', archivePath, '-'])).stdout;
      const page2 = (await run('pdftotext', ['-f', '2', '-l', '2', archivePath, '-'])).stdout;
      assert.ok(page1.includes(SIGNERS[0]!.typedName), `page 1 carries the first signature: ${page1}`);
      assert.ok(page1.includes(new Date(signedAt[0]!).toISOString().slice(0, 10)), 'and its date');
      assert.ok(page2.includes(SIGNERS[1]!.typedName), 'page 2 carries the second name');
      const initials = SIGNERS[1]!.typedName.split(/\s+/).map((w) => w[0]!.toUpperCase()).slice(0, 3).join('');
      assert.ok(page2.includes(initials), `and the initials ${initials}`);
      const evidence = (await run('pdftotext', ['-f', '3', archivePath, '-'])).stdout.replace(/\s+/g, ' ');
      assert.match(evidence, /with the signers' 4 fields/);
      // Sent by the key without a member: the key is named (the operator made it, so no member is).
      assert.match(evidence, /Sent by API key "Contracts" \(ak_[0-9a-z]+\)/);
      const sig = await pdfsig(archivePath);
      assert.match(sig, /Signature Validation: Signature is Valid\./);
      assert.match(sig, /Total document signed/);
      assert.match((await run('qpdf', ['--check', archivePath])).stdout, /No syntax or stream encoding errors found/);
      await run('pdftoppm', ['-r', '60', '-f', '1', '-l', '1', '-singlefile', '-png', archivePath, path.resolve('test-output', `archive-fields-${database.name}`)]);
      // Refused: a signer or a page that is not there, and fields with BankID.
      const refused = async (body: Record<string, unknown>, pattern: RegExp) => {
        const res = await svc.post('signing.RequestFileSignatures', { file_id: source.id, signers: [{ email: 'f@example.test', name: 'F' }], ...body }, { Authorization: `Bearer ${ws.keys.ci!.secret}`, 'Idempotency-Key': `fields-${Math.random()}` });
        assert.equal(res.status, 400, JSON.stringify(res.body));
        assert.match((res.body as { message: string }).message, pattern);
      };
      await refused({ fields: [{ signer: 1, kind: 'signature', page: 1, x: 0, y: 0, width: 10, height: 10 }] }, /fields\[0\]\.signer is 1, but there is 1 signer/);
      await refused({ fields: [{ signer: 0, kind: 'signature', page: 3, x: 0, y: 0, width: 10, height: 10 }] }, /fields\[0\]\.page is 3, but the document has 2 pages/);
      await refused({ fields: [{ signer: 0, kind: 'stamp', page: 1, x: 0, y: 0, width: 10, height: 10 }] }, /kind/);
      await refused({ signature_method: 'bankid', fields: [{ signer: 0, kind: 'signature', page: 1, x: 0, y: 0, width: 10, height: 10 }] }, /BankID|bankid/);
    });

    it('text and check box fields and a drawn signature: drawn on the pages, the values on the request, the drawing on the evidence page', async () => {
      const original = await contractPdf('Order form', 1);
      const source = await putFile(svc, workspaceId, original, { pages: 1, filename: 'Order form.pdf' });
      const fields = [
        // Right of the clauses (which end before x = 320), so the ink counted below is the fields' own.
        { signer: 0, kind: 'signature', page: 1, x: 340, y: 150, width: 220, height: 50 },
        { signer: 0, kind: 'text', page: 1, x: 340, y: 300, width: 220, height: 20, label: 'Company registration number' },
        { signer: 0, kind: 'checkbox', page: 1, x: 340, y: 340, width: 16, height: 16, label: 'I accept the terms' },
        { signer: 0, kind: 'checkbox', page: 1, x: 340, y: 370, width: 16, height: 16, label: 'Newsletter', required: false },
        { signer: 1, kind: 'text', page: 1, x: 340, y: 420, width: 200, height: 20, required: false },
      ];
      // A wave: two strokes on a 600×200 pad.
      const drawn = JSON.stringify({ w: 600, h: 200, strokes: [[20, 150, 80, 60, 140, 140, 200, 50, 260, 150], [300, 100, 560, 100]] });
      const signers: Signer[] = [
        { ...SIGNERS[0]!, drawn, fieldValues: { 1: 'SE556677-8899', 2: 'true', 3: 'false' } },
        { ...SIGNERS[1]!, fieldValues: { 4: '' } },
      ];
      const { requestId } = await signedRequest(svc, ws, source, signers, { title: 'Order form', fields });
      const read = await svc.post('signing.GetSigningRequest', { signing_request_id: requestId }, { Authorization: `Bearer ${ws.keys.ci!.secret}` });
      const got = (read.body as { fields: Array<{ kind: string; required: boolean; label: string | null; value: string | null }> }).fields;
      assert.deepEqual(
        got.map((f) => [f.kind, f.required, f.label, f.value]),
        [
          ['signature', true, null, null],
          ['text', true, 'Company registration number', 'SE556677-8899'],
          ['checkbox', true, 'I accept the terms', 'true'],
          ['checkbox', false, 'Newsletter', 'false'],
          ['text', false, null, ''],
        ],
      );
      await svc.jobs.runDue();
      const row = await requestRow(svc, requestId);
      assert.ok(row.archive_file_id, `archive made (error: ${row.archive_error})`);
      const bytes = await bytesOf(svc, workspaceId, row.archive_file_id);
      assert.ok(bytes.subarray(0, original.length).equals(Buffer.from(original)), 'the original is the first bytes, byte for byte');
      const archivePath = await writeTo(dir, 'filled.pdf', bytes);
      const page1 = (await run('pdftotext', ['-f', '1', '-l', '1', archivePath, '-'])).stdout;
      assert.ok(page1.includes('SE556677-8899'), `page 1 carries the text field: ${page1}`);
      assert.ok(!page1.includes(SIGNERS[0]!.typedName), 'the drawn signature replaces the typed name in the signature field');
      const evidence = (await run('pdftotext', ['-f', '2', archivePath, '-'])).stdout.replace(/\s+/g, ' ');
      assert.match(evidence, /with the signers' 3 fields/, 'the signature, the text and the one ticked box (empty ones draw nothing)');
      assert.match(evidence, /drawn on the signing page/);
      assert.match(await pdfsig(archivePath), /Signature Validation: Signature is Valid\./);
      assert.match((await run('qpdf', ['--check', archivePath])).stdout, /No syntax or stream encoding errors found/);
      // The drawing and the tick are ink where they were placed: page 1 rasterised has dark pixels in the signature box.
      await run('pdftoppm', ['-r', '72', '-f', '1', '-l', '1', '-singlefile', '-gray', archivePath, path.join(dir, 'filled')]);
      const pgm = await fs.readFile(path.join(dir, 'filled.pgm'));
      const [, w, h] = /^P5\s+(\d+)\s+(\d+)\s+255\s/.exec(pgm.subarray(0, 40).toString('latin1'))!.map(Number);
      const pixels = pgm.subarray(pgm.length - w! * h!);
      const inkIn = (x: number, y: number, bw: number, bh: number) => {
        let n = 0;
        for (let py = Math.round(h! - y - bh); py < h! - y; py++) for (let px = x; px < x + bw; px++) if (pixels[py * w! + px]! < 128) n++;
        return n;
      };
      assert.ok(inkIn(340, 150, 220, 50) > 50, 'the drawn signature is in its box');
      assert.ok(inkIn(340, 340, 16, 16) > 5, 'the tick is in the ticked box');
      await run('pdftoppm', ['-r', '60', '-f', '1', '-l', '1', '-singlefile', '-png', archivePath, path.resolve('test-output', `archive-filled-${database.name}`)]);
      assert.equal(inkIn(340, 370, 16, 16), 0, 'the box left empty has no tick');
    });

    it('an original encrypted with an owner password only: the archive carries its pages decrypted, the original stays as uploaded', async () => {
      const plain = await writeTo(dir, 'plain.pdf', await contractPdf('Owner-locked lease', 2));
      const locked = path.join(dir, 'locked.pdf');
      await run('qpdf', ['--encrypt', '', 'owner-secret', '256', '--print=none', '--modify=none', '--', plain, locked]);
      const original = await fs.readFile(locked);
      const source = await putFile(svc, workspaceId, original, { pages: 2, filename: 'lease.pdf' });
      const { requestId } = await signedRequest(svc, ws, source, [SIGNERS[0]!], { title: 'Lease' });
      await svc.jobs.runDue();
      const row = await requestRow(svc, requestId);
      assert.ok(row.archive_file_id, `archived (error: ${row.archive_error})`);
      const archivePath = await writeTo(dir, 'locked-archive.pdf', await bytesOf(svc, workspaceId, row.archive_file_id));
      assert.doesNotMatch((await run('qpdf', ['--show-encryption', archivePath])).stdout, /R = /, 'not encrypted');
      const sig = await pdfsig(archivePath);
      assert.match(sig, /Signature is Valid\./);
      assert.match(sig, /Total document signed/);
      assert.ok((await pdfPages(archivePath)) > 2);
      assert.match((await run('pdftotext', ['-f', '1', '-l', '1', archivePath, '-'])).stdout, /Owner-locked lease, page 1 of 2/);
      assert.match((await run('pdftotext', ['-f', '3', archivePath, '-'])).stdout, /owner-password/);
      assert.ok((await bytesOf(svc, workspaceId, source.id)).equals(original), 'the original file is unchanged');
    });

    it("a member's private file: the archive is that member's private file too", async () => {
      const source = await putFile(svc, workspaceId, await contractPdf('Private offer', 1), { pages: 1, owner: ws.members.ada!, filename: 'offer.pdf' });
      const { requestId } = await signedRequest(svc, ws, source, [SIGNERS[1]!], { title: 'Offer', actAs: ws.members.ada! });
      await svc.jobs.runDue();
      const row = await requestRow(svc, requestId);
      const file = (await findFile(svc.db.sql, workspaceId, row.archive_file_id!))!;
      assert.equal(file.ownerMemberId, ws.members.ada!);
      assert.equal(file.source, 'signing_archive');
    });

    it('a failing timestamp authority: archive_error recorded and shown, archive.failed written once (not per retry), the request stays completed, the job retries with backoff and then succeeds; the evidence pages leave the failure out', async () => {
      const source = await putFile(svc, workspaceId, await contractPdf('Retry agreement', 1), { pages: 1 });
      const { requestId } = await signedRequest(svc, ws, source, [SIGNERS[0]!], { title: 'Retry' });
      const auth = { Authorization: `Bearer ${ws.keys.ci!.secret}` };
      const read = async () => (await svc.post('signing.GetSigningRequest', { signing_request_id: requestId }, auth)).body as { status: string; file_id: string | null; archive_error: string | null };
      const history = async () =>
        ((await svc.post('signing.ListSigningEvents', { signing_request_id: requestId, limit: 100 }, auth)).body as { items: Array<{ kind: string; data: Record<string, unknown> }> }).items;
      assert.equal((await read()).archive_error, null, 'no error before an attempt');
      const jobRow = () => svc.db.sql.one<{ attempts: number; run_at: number; last_error: string }>(`SELECT attempts, run_at, last_error FROM jobs WHERE kind = 'signing.archive' AND dedupe_key = ?`, [requestId]);
      tsa.stampOtherValue = true;
      try {
        await svc.jobs.runDue();
        // The API shows the reason while the job retries; the first failure is in the history once.
        const shown = await read();
        assert.equal(shown.status, 'completed');
        assert.equal(shown.file_id, null);
        // Shown without the authority's address (the service's infrastructure; the job's log keeps it).
        assert.match(shown.archive_error ?? '', /timestamp authority at <address> gave a token that cannot be used/);
        assert.doesNotMatch(shown.archive_error ?? '', /127\.0\.0\.1|:\d{2,5}\b/);
        assert.match((await jobRow())!.last_error, /127\.0\.0\.1:\d+/, 'the job keeps the full text for operators');
        const failures = (await history()).filter((e) => e.kind === 'archive.failed');
        assert.equal(failures.length, 1);
        assert.equal(failures[0]!.data.error, shown.archive_error);
        // A second failing attempt (after its backoff): the error stays, no second event.
        const first = (await jobRow())!;
        svc.clock.advance(Number(first.run_at) - svc.clock.now());
        await svc.jobs.runDue();
        assert.equal(Number((await jobRow())!.attempts), 2, 'tried again');
        assert.match((await read()).archive_error ?? '', /gave a token that cannot be used/);
        assert.equal((await history()).filter((e) => e.kind === 'archive.failed').length, 1, 'retries write no event');
      } finally {
        tsa.stampOtherValue = false;
      }
      const failed = await requestRow(svc, requestId);
      assert.equal(failed.status, 'completed');
      assert.equal(failed.archive_file_id, null);
      assert.match(failed.archive_error ?? '', /timestamp authority at <address> gave a token that cannot be used/);
      const job = await jobRow();
      assert.ok(job && Number(job.attempts) === 2 && Number(job.run_at) > svc.clock.now(), 'retried later');
      assert.equal(await svc.jobs.runDue(), 0, 'not before its backoff');
      assert.equal(Number((await svc.db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM signing_archive_blobs WHERE request_id = ?`, [requestId]))!.n), 0, 'no blob left over');
      svc.clock.advance(Number(job.run_at) - svc.clock.now());
      await svc.jobs.runDue();
      const done = await requestRow(svc, requestId);
      assert.ok(done.archive_file_id);
      assert.equal(done.archive_error, null, 'a success clears the error');
      const after = await read();
      assert.equal(after.archive_error, null);
      assert.equal(after.file_id, done.archive_file_id);
      assert.deepEqual(
        (await history()).map((e) => e.kind).filter((k) => k.startsWith('archive.')),
        ['archive.failed', 'archive.completed'],
      );
      const text = (await run('pdftotext', ['-layout', await writeTo(dir, 'retried.pdf', await bytesOf(svc, workspaceId, done.archive_file_id!)), '-'])).stdout;
      assert.match(text, /All parties signed/);
      assert.doesNotMatch(text, /archive\.failed|cannot be used/);
    });

    it('the installation certificate: made once, stored, the same for every process (two racing makers agree)', async () => {
      const db2 = openDatabase(svc.databaseUrl);
      try {
        await db2.migrate(migrations);
        const [a, b] = await Promise.all([
          installationCertificate(svc.db.sql, svc.clock.now(), 'Workspace Operations seal (sign.acme.example)'),
          installationCertificate(db2.sql, svc.clock.now(), 'Workspace Operations seal (sign.acme.example)'),
        ]);
        assert.equal(a.certificatePem, b.certificatePem);
        const rows = await svc.db.sql.all<{ id: string }>(`SELECT id FROM signing_certificates`);
        assert.deepEqual(rows.map((r) => r.id), ['installation']);
      } finally {
        await db2.close();
      }
    });

    it('a service process killed (SIGKILL) while the archive job runs: a second process finishes it, one archive file, file_id set', async function () {
      this.timeout(120_000);
      const source = await putFile(svc, workspaceId, await contractPdf('Crash agreement', 2), { pages: 2 });
      const { requestId } = await signedRequest(svc, ws, source, SIGNERS, { title: 'Crash test' });
      await killFixtureWhen('test/signing/fixtures/archiveThenDie.ts', [svc.databaseUrl, String(svc.clock.now()), tsa.url], 'paused', 90_000);
      // The dead process wrote the sealed archive's blob and listed it, but registered nothing.
      const [leftover] = await svc.db.sql.all<{ blob_id: string }>(`SELECT blob_id FROM signing_archive_blobs WHERE request_id = ?`, [requestId]);
      assert.ok(leftover, 'the killed run left its blob listed');
      assert.equal((await requestRow(svc, requestId)).archive_file_id, null);
      assert.equal(await svc.jobs.runDue(), 0, 'the job is leased to the dead process until its lease ends');
      svc.clock.advance(2 * 60_000 + 1);
      await svc.jobs.runDue();
      const row = await requestRow(svc, requestId);
      assert.ok(row.archive_file_id, `finished by the second process (error: ${row.archive_error})`);
      const files = await svc.db.sql.all<{ id: string; blob_id: string }>(`SELECT id, blob_id FROM document_files WHERE source = 'signing_archive' AND workspace_id = ? AND filename = ?`, [
        workspaceId,
        'Services agreement (signed).pdf',
      ]);
      assert.equal(files.filter((f) => f.id === row.archive_file_id).length, 1);
      assert.equal(
        Number((await svc.db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM signing_events WHERE request_id = ? AND kind = 'archive.completed'`, [requestId]))!.n),
        1,
        'one archive.completed',
      );
      const storage = createBlobStore(svc.db, svc.clock, svc.config.storage);
      assert.equal(await storage.stat(leftover.blob_id), null, "the dead run's blob was removed");
      assert.equal(Number((await svc.db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM signing_archive_blobs WHERE request_id = ?`, [requestId]))!.n), 0);
      const sig = await pdfsig(await writeTo(dir, 'crash.pdf', await bytesOf(svc, workspaceId, row.archive_file_id)));
      assert.match(sig, /Signature is Valid\./);
      assert.equal(await svc.jobs.runDue(), 0);
    });
  });
}

describe('signing: seal settings (SIGNING_TSA_URL, SIGNING_CERTIFICATE_P12_PATH, SIGNING_CERTIFICATE_P12_PASSWORD)', () => {
  it('unset: the installation certificate, no timestamp authority; bad values stop the start with a readable error, never the password', async () => {
    assert.deepEqual(sealSettingsFromEnv({}), { tsaUrl: null, p12: null });
    assert.equal(sealSettingsFromEnv({ SIGNING_TSA_URL: ' https://tsa.example/tsr ' }).tsaUrl, 'https://tsa.example/tsr');
    assert.throws(() => sealSettingsFromEnv({ SIGNING_TSA_URL: 'not a url' }), /SIGNING_TSA_URL must be an http\(s\) URL/);
    assert.throws(() => sealSettingsFromEnv({ SIGNING_TSA_URL: 'ftp://tsa.example/' }), /must be http or https/);
    assert.throws(() => sealSettingsFromEnv({ SIGNING_TSA_URL: 'https://u:p@tsa.example/' }), /must not carry credentials/);
    assert.throws(() => sealSettingsFromEnv({ SIGNING_CERTIFICATE_P12_PASSWORD: 'hunter2' }), (err: Error) => /without SIGNING_CERTIFICATE_P12_PATH/.test(err.message) && !err.message.includes('hunter2'));
    assert.throws(() => sealSettingsFromEnv({ SIGNING_CERTIFICATE_P12_PATH: '/nonexistent/seal.p12', SIGNING_CERTIFICATE_P12_PASSWORD: 'hunter2' }), (err: Error) => /cannot be read \(ENOENT\)/.test(err.message) && !err.message.includes('hunter2'));
  });

  it("an operator's PKCS#12 seals instead of the installation certificate", async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'p12-'));
    try {
      const key = path.join(dir, 'op.key');
      const crt = path.join(dir, 'op.crt');
      const p12 = path.join(dir, 'op.p12');
      await run('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', crt, '-days', '30', '-subj', '/CN=Acme operator seal/O=Acme AB']);
      await run('openssl', ['pkcs12', '-export', '-inkey', key, '-in', crt, '-out', p12, '-passout', 'pass:s3cret']);
      const settings = sealSettingsFromEnv({ SIGNING_CERTIFICATE_P12_PATH: p12, SIGNING_CERTIFICATE_P12_PASSWORD: 's3cret' });
      const cert = await sealingCertificate(null as never, { now: () => Date.now() }, settings, 'https://sign.acme.example');
      assert.match(cert.subject, /CN=Acme operator seal/);
      const wrong = sealSettingsFromEnv({ SIGNING_CERTIFICATE_P12_PATH: p12, SIGNING_CERTIFICATE_P12_PASSWORD: 'nope' });
      await assert.rejects(sealingCertificate(null as never, { now: () => Date.now() }, wrong, 'https://sign.acme.example'), /PKCS#12 file cannot be opened/);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});

describe('signing: evidence pages for awkward input', () => {
  it('names in other scripts, emoji and control characters, a 200-character word as title, 60 events: drawn without failing, text extractable, qpdf clean', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'evidence-'));
    try {
      const original = await contractPdf('Awkward', 1);
      const names = ['Дмитрий Петров', 'Ελένη Παπαδοπούλου', '山田 太郎', 'Zoë 👩‍💼 Ng', 'Tab\tand\nnewline'];
      const built = await buildArchive(original, {
        requestId: 'sr_awkwardawkwardawkwardaw',
        title: 'X'.repeat(200),
        signatureMethod: 'Standard',
        source: { filename: 'a.pdf', sha256: 'f'.repeat(64), size: original.length, pages: 1 },
        createdAt: Date.UTC(2026, 0, 1),
        completedAt: Date.UTC(2026, 0, 2),
        signers: names.map((name, i) => ({ name, email: `s${i}@x.test`, typedName: name, signedAt: Date.UTC(2026, 0, 2, i), ip: null, userAgent: null })),
        events: Array.from({ length: 60 }, (_, i) => ({ occurredAt: Date.UTC(2026, 0, 1, 0, i), kind: i % 2 ? 'reminder.sent' : 'unknown.kind', recipient: null, data: { note: 'y'.repeat(300), n: i } })),
        sealedBy: 'CN=Test',
        verifyUrl: 'https://x.test/verify',
      }, storedPdfChecks);
      assert.ok(built.appended && built.evidencePages >= 3, `evidence pages: ${built.evidencePages}`);
      const file = await writeTo(dir, 'awkward.pdf', built.bytes);
      assert.equal(await pdfPages(file), 1 + built.evidencePages);
      const text = (await run('pdftotext', ['-f', '2', file, '-'])).stdout;
      assert.match(text, /Дмитрий Петров/);
      assert.match(text, /Ελένη Παπαδοπούλου/);
      assert.match(text, /not recorded/);
      await run('qpdf', ['--check', file]);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});

describe('signing: archives of PDFs written other ways keep their pages', () => {
  it('pdf-lib (object streams or not, a form), qpdf (linearized, object streams), owner-encrypted: the original pages rasterise identically, the seal is valid, qpdf --check clean', async function () {
    this.timeout(60_000);
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'variants-'));
    try {
      const base = await contractPdf('Variant', 2);
      const withForm = await PDFDocument.load(base);
      const form = withForm.getForm();
      form.createTextField('company').addToPage(withForm.getPage(0), { x: 56, y: 60, width: 200, height: 20 });
      form.getTextField('company').setText('Acme AB');
      form.createCheckBox('agree').addToPage(withForm.getPage(1), { x: 56, y: 60, width: 16, height: 16 });
      form.getCheckBox('agree').check();
      const variants: Array<[string, Uint8Array]> = [
        ['pdf-lib', base],
        ['pdf-lib, no object streams', await (await PDFDocument.load(base)).save({ useObjectStreams: false })],
        ['pdf-lib form', await withForm.save()],
      ];
      const plain = await writeTo(dir, 'plain.pdf', base);
      for (const [name, args] of [
        ['qpdf linearized', ['--linearize']],
        ['qpdf object streams', ['--object-streams=generate']],
        ['owner-encrypted', ['--encrypt', '', 'owner', '256', '--']],
      ] as const) {
        const out = path.join(dir, `${name.replace(/\W/g, '')}.pdf`);
        await run('qpdf', [...args, plain, out]);
        variants.push([name, await fs.readFile(out)]);
      }
      const certificate = await loadStoredCertificate(await createServiceCertificate({ commonName: 'Variant seal', now: new Date() }));
      for (const [name, bytes] of variants) {
        const built = await buildArchive(bytes, {
          requestId: 'sr_variantvariantvariantva',
          title: name,
          signatureMethod: 'Standard',
          source: { filename: 'v.pdf', sha256: 'a'.repeat(64), size: bytes.length, pages: 2 },
          createdAt: Date.UTC(2026, 0, 1),
          completedAt: Date.UTC(2026, 0, 2),
          signers: [{ name: 'Anna Lindqvist', email: 'anna@x.test', typedName: 'Anna Lindqvist', signedAt: Date.UTC(2026, 0, 2), ip: '203.0.113.7', userAgent: FIREFOX }],
          events: [],
          sealedBy: 'CN=Variant seal',
          verifyUrl: 'https://x.test/verify',
        }, storedPdfChecks);
        assert.equal(built.decrypted, name === 'owner-encrypted', name);
        if (built.appended) assert.ok(Buffer.from(built.bytes.subarray(0, bytes.length)).equals(Buffer.from(bytes)), `${name}: starts with the original`);
        const sealed = await seal(built.bytes, { certificate, reason: 'variant', signedAt: new Date() });
        const archive = await writeTo(dir, `archive-${name.replace(/\W/g, '')}.pdf`, sealed);
        const original = await writeTo(dir, `original-${name.replace(/\W/g, '')}.pdf`, bytes);
        assert.equal(await pdfPages(archive), 2 + built.evidencePages, name);
        for (const page of [1, 2]) {
          const render = async (file: string, tag: string) => {
            const prefix = path.join(dir, `${name.replace(/\W/g, '')}-${tag}-${page}`);
            await run('pdftoppm', ['-r', '30', '-f', String(page), '-l', String(page), '-singlefile', '-png', file, prefix]);
            return fs.readFile(`${prefix}.png`);
          };
          assert.ok((await render(original, 'o')).equals(await render(archive, 'a')), `${name}: page ${page} rasterises identically`);
        }
        const sig = await pdfsig(archive);
        assert.match(sig, /Signature is Valid\./, name);
        assert.match(sig, /Total document signed/, name);
        await run('qpdf', ['--check', archive]);
      }
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});

describe('signing: evidence helpers', () => {
  it('deviceSummary reads common user agents', () => {
    assert.equal(deviceSummary(FIREFOX), 'Firefox 132 on Windows 10');
    assert.equal(deviceSummary(IPHONE), 'Safari 17 on iOS 17.1 (mobile)');
    assert.equal(deviceSummary('Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36'), 'Chrome 131 on Linux');
    assert.equal(deviceSummary(null), 'not recorded');
    assert.equal(deviceSummary('curl/8.5.0'), 'unrecognised (curl/8.5.0)');
  });

  it('utc formats Unix ms as the evidence pages print it', () => {
    assert.equal(utc(Date.UTC(2026, 10, 24, 9, 30, 5)), '2026-11-24 09:30:05 UTC');
  });
});
