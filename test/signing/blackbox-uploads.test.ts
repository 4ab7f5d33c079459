/**
 * Black box of documents.* and signing.*: uploads: CreateUpload, the part PUTs, CompleteUpload, the scan,
 * isolation and receipts. One of the files split from one suite; the shared setup is blackboxKit.ts.
 * Written from the seed (sections 2.5, 3, 4.7-4.12, 5) and the OpenAPI document only: every call goes over
 * HTTP, the mail through a real SMTP server; the service's code and tables are never touched.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { PDFDocument } from 'pdf-lib';
import type { ApplyResult } from '../../server/admin.ts';
import { databases, type TestService } from '../support/service.ts';
import { makePdf } from '../documents/pdfs.ts';
import { onService } from './signerKit.ts';
import { DAY, MIB, sha, shape, documented, refused, blackboxService } from './blackboxKit.ts';

for (const database of databases) {
  describe(`documents and signing, black box [${database.name}]`, function () {
    this.timeout(60_000);
    const kit = blackboxService(database);
    const { secret, answer, call, put, partUrl, upload, addr, request } = kit;
    let svc: TestService;
    let ws: ApplyResult;
    let foreign: ApplyResult;
    let pdf: Buffer;
    before(() => ({ svc, ws, foreign, pdf } = kit.state()));

    // ---------------------------------------------------------------- uploads

    describe('uploads', () => {
      it('a rejected upload keeps the refusal\'s reason: the message is "The file was refused: <rejection_reason>."', async () => {
        const junk = Buffer.from('Plain text, not a PDF.\n');
        const created = await call('documents.CreateUpload', { filename: 'notes.pdf', content_type: 'application/pdf', size: junk.length });
        const id = created.body.upload_id;
        assert.equal((await put(await partUrl(id, 1), junk)).status, 200);
        const res = await call('documents.CompleteUpload', { upload_id: id });
        refused(res, 400, 'invalid_input');
        const read = await call('documents.GetUpload', { upload_id: id });
        assert.equal(read.body.state, 'rejected');
        assert.equal(res.body.message, `The file was refused: ${read.body.rejection_reason}.`);
      });

      it('CreateUpload, GetUploadPart, the PUT, GetUpload and CompleteUpload answer exactly the documented shapes', async () => {
        const bytes = Buffer.concat([pdf]);
        const created = await call('documents.CreateUpload', { filename: 'Avtal – åäö 契約.pdf', content_type: 'application/pdf', size: bytes.length, sha256: sha(bytes) });
        assert.equal(created.status, 200, JSON.stringify(created.body));
        documented(created.body, 'Upload', 'upload');
        assert.equal(created.body.state, 'open');
        assert.equal(created.body.filename, 'Avtal – åäö 契約.pdf');
        assert.equal(created.body.part_count, 1);
        assert.equal(created.body.part_size, 5 * MIB, 'default 5 MiB parts');
        assert.equal(created.body.expires_at, svc.clock.now() + DAY);
        assert.equal(created.body.created_at, svc.clock.now());
        documented(created.body.parts[0], 'UploadPart', 'part');
        assert.deepEqual(created.body.parts[0], { part_number: 1, size: bytes.length, received: false, sha256: null }, 'a file smaller than part_size is one part of its own size');

        const part = await call('documents.GetUploadPart', { upload_id: created.body.upload_id, part_number: 1 });
        assert.equal(part.status, 200);
        shape(part.body, { upload_id: 'string', part_number: 'integer', method: 'string', url: 'string', size: 'integer', expires_at: 'integer' }, 'part url');
        assert.equal(part.body.method, 'PUT');
        assert.equal(part.body.size, bytes.length);
        assert.equal(part.body.expires_at, svc.clock.now() + 15 * 60_000);
        const stored = await put(part.body.url, bytes);
        assert.equal(stored.status, 200, JSON.stringify(stored.body));
        assert.deepEqual(stored.body, { part_number: 1, size: bytes.length, sha256: sha(bytes) });

        const read = await call('documents.GetUpload', { upload_id: created.body.upload_id });
        assert.equal(read.status, 200);
        documented(read.body, 'Upload', 'upload read');
        assert.deepEqual(read.body.parts, [{ part_number: 1, size: bytes.length, received: true, sha256: sha(bytes) }]);

        const done = await call('documents.CompleteUpload', { upload_id: created.body.upload_id });
        assert.equal(done.status, 200, JSON.stringify(done.body));
        documented(done.body, 'DocumentFile', 'file');
        for (const r of [created, part, read, done]) {
          assert.equal(r.headers.get('cache-control'), 'no-store');
          assert.equal(r.headers.get('x-content-type-options'), 'nosniff');
          assert.match(r.headers.get('request-id') ?? '', /^[0-9a-f-]{36}$/);
        }
        assert.equal(done.body.sha256, sha(bytes));
        assert.equal(done.body.size, bytes.length);
        assert.equal(done.body.page_count, 2);
        assert.equal(done.body.scope, 'workspace');
        assert.equal(done.body.owner_member_id, null);
        assert.equal(done.body.source, 'upload');
        assert.equal(done.body.content_type, 'application/pdf');
        const after = await call('documents.GetUpload', { upload_id: created.body.upload_id });
        assert.equal(after.body.state, 'completed');
        assert.equal(after.body.file_id, done.body.file_id);
        // Completing again answers the same file; a part URL for a completed upload is 409.
        const again = await call('documents.CompleteUpload', { upload_id: created.body.upload_id });
        assert.equal(again.status, 200);
        assert.equal(again.body.file_id, done.body.file_id);
        refused(await call('documents.GetUploadPart', { upload_id: created.body.upload_id, part_number: 1 }), 409, 'conflict', 'part of a completed upload');
        refused(await put(part.body.url, bytes), 409, 'conflict', 'PUT to a completed upload');
      });

      it('CreateUpload refuses every bad size, part layout, filename, type and digest with 400 invalid_input (never 500)', async () => {
        const base = { filename: 'a.pdf', content_type: 'application/pdf', size: 3 * MIB };
        const cases: Array<[string, object]> = [
          ['size 0', { ...base, size: 0 }],
          ['negative size', { ...base, size: -5 }],
          ['size above 50 MiB', { ...base, size: 52_428_801 }],
          ['fractional size', { ...base, size: 1.5 }],
          ['size as a string', { ...base, size: '1000' }],
          ['size null', { ...base, size: null }],
          ['huge size', { ...base, size: 1e300 }],
          ['part_size and part_count', { ...base, part_size: MIB, part_count: 3 }],
          ['part_count 0', { ...base, part_count: 0 }],
          ['part_count 101', { ...base, part_count: 101 }],
          ['part_count negative', { ...base, part_count: -1 }],
          ['part_size below 1 MiB', { ...base, part_size: MIB - 1 }],
          ['part_size above 16 MiB', { ...base, part_size: 16 * MIB + 1 }],
          ['part_count giving parts below 1 MiB', { ...base, size: 2 * MIB + 1, part_count: 3 }],
          ['part_count giving parts above 16 MiB', { ...base, size: 50 * MIB, part_count: 3 }],
          ['more than 100 parts', { ...base, size: 50 * MIB, part_size: MIB / 2 }],
          ['one part above 16 MiB', { ...base, size: 17 * MIB, part_count: 1 }],
          ['100 parts below 1 MiB', { ...base, size: 50 * MIB, part_count: 100 }],
          ['a slash in the filename', { ...base, filename: 'a/b.pdf' }],
          ['a backslash in the filename', { ...base, filename: 'a\\b.pdf' }],
          ['a control character in the filename', { ...base, filename: 'a\u0007.pdf' }],
          ['DEL in the filename', { ...base, filename: 'a\u007f.pdf' }],
          ['a NUL in the filename', { ...base, filename: 'a\u0000.pdf' }],
          ['an empty filename', { ...base, filename: '' }],
          ['a 256-character filename', { ...base, filename: `${'x'.repeat(252)}.pdf` }],
          ['a 100,000-character filename', { ...base, filename: 'ü'.repeat(100_000) }],
          ['filename a number', { ...base, filename: 42 }],
          ['another content type', { ...base, content_type: 'text/plain' }],
          ['upper-case sha256', { ...base, sha256: 'A'.repeat(64) }],
          ['63-character sha256', { ...base, sha256: 'a'.repeat(63) }],
          ['65-character sha256', { ...base, sha256: 'a'.repeat(65) }],
          ['non-hex sha256', { ...base, sha256: 'g'.repeat(64) }],
          ['an unknown field', { ...base, colour: 'red' }],
          ['missing size', { filename: 'a.pdf', content_type: 'application/pdf' }],
        ];
        for (const [what, body] of cases) refused(await call('documents.CreateUpload', body), 400, 'invalid_input', what);
        // Bounds that are allowed.
        for (const body of [
          { ...base, size: 1 },
          { ...base, size: 52_428_800 },
          { ...base, part_count: 3 },
          { ...base, size: 50 * MIB, part_count: 50 },
          { ...base, filename: `${'x'.repeat(251)}.pdf` },
        ]) {
          const ok = await call('documents.CreateUpload', body);
          assert.equal(ok.status, 200, `${JSON.stringify(body).slice(0, 120)} ${JSON.stringify(ok.body)}`);
          assert.equal(ok.body.parts.length, ok.body.part_count);
          assert.equal(
            ok.body.parts.reduce((s: number, p: { size: number }) => s + p.size, 0),
            body.size,
            'the parts add up to the size',
          );
        }
        const three = await call('documents.CreateUpload', { ...base, size: 12 * MIB });
        assert.equal(three.body.part_size, 5 * MIB, 'default 5 MiB parts');
        assert.deepEqual(three.body.parts.map((p: { size: number }) => p.size), [5 * MIB, 5 * MIB, 2 * MIB]);
      });

      it('bodies that are not JSON objects are 400 invalid_json; a missing or over-long Idempotency-Key 400 invalid_input; a body over 1 MB 413', async () => {
        const body = { filename: 'a.pdf', content_type: 'application/pdf', size: 10 };
        refused(await call('documents.CreateUpload', '[1,2]'), 400, 'invalid_json', 'an array');
        refused(await call('documents.CreateUpload', '"text"'), 400, 'invalid_json', 'a string');
        refused(await call('documents.CreateUpload', '{"filename":'), 400, 'invalid_json', 'cut JSON');
        refused(await call('documents.CreateUpload', ''), 400, 'invalid_json', 'no body');
        refused(await call('documents.CreateUpload', JSON.stringify(body), { contentType: 'text/plain' }), 400, 'invalid_json', 'text/plain');
        refused(await call('documents.CreateUpload', JSON.stringify(body), { contentType: 'application/x-www-form-urlencoded' }), 400, 'invalid_json', 'a form');
        assert.equal((await call('documents.CreateUpload', JSON.stringify(body), { contentType: 'application/json; charset=utf-8' })).status, 200, 'a charset parameter is fine');
        refused(await call('documents.CreateUpload', body, { idem: null }), 400, 'invalid_input', 'no Idempotency-Key');
        refused(await call('documents.CreateUpload', body, { idem: 'k'.repeat(201) }), 400, 'invalid_input', '201-character key');
        assert.equal((await call('documents.CreateUpload', body, { idem: 'k'.repeat(200) })).status, 200, '200-character key');
        refused(await call('documents.CreateUpload', { ...body, filename: 'x'.repeat(1_100_000) }), 413, 'invalid_input', 'over 1 MB');
        refused(await call('signing.RequestFileSignatures', { file_id: 'x', signers: [{ email: 'a@b.c', name: 'y'.repeat(1_100_000) }] }), 413, 'invalid_input', 'over 1 MB');
      });

      it('compressed bodies: the 1 MB limit counts the decoded bytes (413), broken or unknown encodings are refused, never 500', async () => {
        const send = async (body: Buffer, encoding: string) => {
          const res = await fetch(`${svc.baseUrl}/operations/documents.ListDocuments`, {
            method: 'POST',
            headers: { 'Content-Type': 'application/json', 'Content-Encoding': encoding, Authorization: `Bearer ${secret('sender')}` },
            body: body as unknown as BodyInit,
          });
          return answer(res);
        };
        const ok = await send(zlib.gzipSync(JSON.stringify({ scope: 'workspace' })), 'gzip');
        assert.equal(ok.status, 200, JSON.stringify(ok.body));
        const bomb = zlib.gzipSync(JSON.stringify({ scope: 'workspace', cursor: 'a'.repeat(5 * MIB) }));
        assert.ok(bomb.length < 64 * 1024);
        refused(await send(bomb, 'gzip'), 413, 'invalid_input', 'a gzip bomb');
        const broken = await send(Buffer.from('not gzip at all'), 'gzip');
        assert.ok(broken.status >= 400 && broken.status < 500, `broken gzip: ${broken.status}`);
        const unknown = await send(Buffer.from(JSON.stringify({ scope: 'workspace' })), 'x-unknown');
        assert.ok(unknown.status >= 400 && unknown.status < 500, `unknown encoding: ${unknown.status}`);
      });

      it('GetUploadPart refuses part 0, negative, beyond the count or 101, wrong types and bad digests with 400', async () => {
        const created = await call('documents.CreateUpload', { filename: 'a.pdf', content_type: 'application/pdf', size: 3 * MIB, part_count: 3 });
        const id = created.body.upload_id;
        for (const [what, body] of [
          ['part 0', { upload_id: id, part_number: 0 }],
          ['part -1', { upload_id: id, part_number: -1 }],
          ['part beyond part_count', { upload_id: id, part_number: 4 }],
          ['part 101', { upload_id: id, part_number: 101 }],
          ['part 1.5', { upload_id: id, part_number: 1.5 }],
          ['part "1"', { upload_id: id, part_number: '1' }],
          ['upper-case sha256', { upload_id: id, part_number: 1, sha256: 'F'.repeat(64) }],
          ['short sha256', { upload_id: id, part_number: 1, sha256: 'f'.repeat(10) }],
          ['upload_id a number', { upload_id: 7, part_number: 1 }],
          ['upload_id 41 characters', { upload_id: `up_${'x'.repeat(38)}`, part_number: 1 }],
          ['an unknown field', { upload_id: id, part_number: 1, extra: true }],
        ] as Array<[string, object]>) {
          refused(await call('documents.GetUploadPart', body), 400, 'invalid_input', what);
        }
        refused(await call('documents.GetUploadPart', { upload_id: 'up_doesnotexist', part_number: 1 }), 404, 'not_found', 'unknown upload');
        refused(await call('documents.GetUpload', { upload_id: 'up_ünïcødé✓' }), 404, 'not_found', 'unicode id');
        refused(await call('documents.CompleteUpload', { upload_id: 'up_doesnotexist' }), 404, 'not_found', 'unknown upload');
      });

      it('parts: out of order, retried (the last good PUT wins), too long 413, too short 400, wrong bound digest 400, a changed URL 403, an expired URL 403', async () => {
        const padded = await makePdf(3, { payloadBytes: 2 * MIB + 4096, seed: 'three parts' });
        assert.ok(padded.length > 2 * MIB && padded.length <= 3 * MIB, String(padded.length));
        const created = await call('documents.CreateUpload', { filename: 'three.pdf', content_type: 'application/pdf', size: padded.length, part_size: MIB, sha256: sha(padded) });
        assert.equal(created.status, 200, JSON.stringify(created.body));
        const u = created.body;
        assert.equal(u.part_count, 3);
        const part = (k: number) => padded.subarray((k - 1) * MIB, k * MIB);
        // Part 3 first, then a wrong part 1 that is then replaced.
        assert.equal((await put(await partUrl(u.upload_id, 3), part(3))).status, 200);
        const wrong = Buffer.alloc(MIB, 0x41);
        assert.equal((await put(await partUrl(u.upload_id, 1), wrong)).status, 200);
        assert.equal((await call('documents.GetUpload', { upload_id: u.upload_id })).body.parts[0].sha256, sha(wrong));
        // A refused PUT keeps the part's earlier bytes.
        const url1 = await partUrl(u.upload_id, 1, { sha256: sha(part(1)) });
        refused(await put(url1, wrong), 400, 'invalid_input', 'bound digest on part 1');
        refused(await put(url1, part(1).subarray(10)), 400, 'invalid_input', 'short part 1');
        const kept = (await call('documents.GetUpload', { upload_id: u.upload_id })).body.parts[0];
        assert.deepEqual([kept.received, kept.sha256], [true, sha(wrong)], 'the earlier bytes stay');
        // Missing part 2: 409 naming it.
        const missing = await call('documents.CompleteUpload', { upload_id: u.upload_id });
        refused(missing, 409, 'conflict', 'missing part');
        assert.match(missing.body.message, /2/);
        // Too long, too short, wrong bound digest, changed URL: refused, nothing kept.
        const url2 = await partUrl(u.upload_id, 2);
        refused(await put(url2, Buffer.concat([part(2), Buffer.from('x')])), 413, 'invalid_input', 'too long');
        refused(await put(url2, part(2).subarray(1)), 400, 'invalid_input', 'too short');
        refused(await put(url2, new Uint8Array(0)), 400, 'invalid_input', 'an empty body');
        refused(await put(await partUrl(u.upload_id, 2, { sha256: sha(wrong) }), part(2)), 400, 'invalid_input', 'bound digest');
        const changed = url2.replace(/.$/, (c) => (c === 'A' ? 'B' : 'A'));
        refused(await put(changed, part(2)), 403, 'forbidden', 'changed URL');
        // An expired URL (15 minutes on the fake clock).
        const soon = await partUrl(u.upload_id, 2);
        svc.clock.advance(15 * 60_000 + 1);
        refused(await put(soon, part(2)), 403, 'forbidden', 'expired URL');
        const stillMissing = await call('documents.GetUpload', { upload_id: u.upload_id });
        assert.equal(stillMissing.body.parts[1].received, false, 'nothing was kept');
        assert.equal((await put(await partUrl(u.upload_id, 2, { sha256: sha(part(2)) }), part(2))).status, 200);
        // The whole digest is wrong (part 1 is wrong): 400 and the upload stays open; re-send part 1 and complete.
        refused(await call('documents.CompleteUpload', { upload_id: u.upload_id }), 400, 'invalid_input', 'digest of the whole');
        assert.equal((await call('documents.GetUpload', { upload_id: u.upload_id })).body.state, 'open');
        assert.equal((await put(await partUrl(u.upload_id, 1), part(1))).status, 200);
        // A different sha256 at completion than at creation: 400.
        refused(await call('documents.CompleteUpload', { upload_id: u.upload_id, sha256: sha(wrong) }), 400, 'invalid_input', 'two digests');
        const done = await call('documents.CompleteUpload', { upload_id: u.upload_id, sha256: sha(padded) });
        assert.equal(done.status, 200, JSON.stringify(done.body));
        assert.equal(done.body.sha256, sha(padded));
        assert.equal(done.body.size, padded.length);
      });

      it('a file that is not a PDF is refused 400 with its reason, the upload rejected; completing it again answers the same 400', async () => {
        const junk = Buffer.from('This is not a PDF at all, just text.\n');
        const created = await call('documents.CreateUpload', { filename: 'notes.pdf', content_type: 'application/pdf', size: junk.length });
        const id = created.body.upload_id;
        assert.equal((await put(await partUrl(id, 1), junk)).status, 200);
        const res = await call('documents.CompleteUpload', { upload_id: id });
        refused(res, 400, 'invalid_input', 'not a PDF');
        const read = await call('documents.GetUpload', { upload_id: id });
        assert.equal(read.body.state, 'rejected');
        assert.equal(read.body.file_id, null);
        assert.equal(typeof read.body.rejection_reason, 'string');
        const again = await call('documents.CompleteUpload', { upload_id: id });
        refused(again, 400, 'invalid_input', 'completing a rejected upload');
        assert.equal(again.body.message, res.body.message);
        refused(await call('documents.GetUploadPart', { upload_id: id, part_number: 1 }), 409, 'conflict', 'part of a rejected upload');
        const truncated = await upload(pdf.subarray(0, Math.floor(pdf.length / 2)), { filename: 'cut.pdf' });
        refused(truncated, 400, 'invalid_input', 'truncated PDF');
      });

      it('the scan: a user password is refused, an owner password only is accepted and kept byte-identical, a PDF without pages or over 500 pages is refused', async () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bb-scan-'));
        fs.writeFileSync(path.join(dir, 'plain.pdf'), pdf);
        const enc = (out: string, user: string) => {
          execFileSync('qpdf', ['--encrypt', user, 'owner-secret', '256', '--', path.join(dir, 'plain.pdf'), path.join(dir, out)]);
          return fs.readFileSync(path.join(dir, out));
        };
        refused(await upload(enc('user.pdf', 'user-secret'), { filename: 'user.pdf' }), 400, 'invalid_input', 'user password');
        const ownerOnly = enc('owner.pdf', '');
        const ok = await upload(ownerOnly, { filename: 'owner.pdf' });
        assert.equal(ok.status, 200, JSON.stringify(ok.body));
        assert.equal(ok.body.sha256, sha(ownerOnly), 'stored exactly as uploaded');
        const r = await request([{ email: addr(), name: 'Owner pw' }], { file_id: ok.body.file_id });
        const link = await call('signing.GetSigningDocument', { signing_request_id: r.signing_request_id, version: 'original' });
        assert.equal(sha(Buffer.from(await (await fetch(onService(link.body.url, svc.origin))).arrayBuffer())), sha(ownerOnly));

        const empty = await PDFDocument.create();
        const none = await upload(Buffer.from(await empty.save({ addDefaultPage: false })), { filename: 'empty.pdf' });
        refused(none, 400, 'invalid_input', 'a PDF without pages');
        const big = await PDFDocument.create();
        for (let i = 0; i < 501; i++) big.addPage([100, 100]);
        refused(await upload(Buffer.from(await big.save()), { filename: 'big.pdf' }), 400, 'invalid_input', '501 pages');
        const max = await PDFDocument.create();
        for (let i = 0; i < 500; i++) max.addPage([100, 100]);
        const fine = await upload(Buffer.from(await max.save()), { filename: 'max.pdf' });
        assert.equal(fine.status, 200, JSON.stringify(fine.body));
        assert.equal(fine.body.page_count, 500);
        fs.rmSync(dir, { recursive: true, force: true });
      });

      it('uploads are isolated per credential and member (seed 5.6): every other pairing answers 404; an expired upload 404', async () => {
        const { ada, olga } = ws.members;
        const created = await call('documents.CreateUpload', { filename: 'ada.pdf', content_type: 'application/pdf', size: pdf.length }, { actAs: ada });
        assert.equal(created.status, 200);
        const id = created.body.upload_id;
        const others: Array<[string, { key?: string; actAs?: string }]> = [
          ['same key, no member', {}],
          ['same key, another member', { actAs: olga! }],
          ['another key, same member', { key: secret('twin'), actAs: ada! }],
          ['another key, no member', { key: secret('twin') }],
          ['a key of another workspace', { key: foreign.keys.sender!.secret }],
        ];
        for (const [what, o] of others) {
          refused(await call('documents.GetUpload', { upload_id: id }, o), 404, 'not_found', `GetUpload: ${what}`);
          refused(await call('documents.GetUploadPart', { upload_id: id, part_number: 1 }, o), 404, 'not_found', `GetUploadPart: ${what}`);
          refused(await call('documents.CompleteUpload', { upload_id: id }, o), 404, 'not_found', `CompleteUpload: ${what}`);
        }
        assert.equal((await call('documents.GetUpload', { upload_id: id }, { actAs: ada })).status, 200);
        assert.equal((await put(await partUrl(id, 1, { actAs: ada }), pdf)).status, 200);
        const done = await call('documents.CompleteUpload', { upload_id: id }, { actAs: ada });
        assert.equal(done.status, 200, JSON.stringify(done.body));
        assert.equal(done.body.scope, 'user');
        assert.equal(done.body.owner_member_id, ada);

        const late = await call('documents.CreateUpload', { filename: 'late.pdf', content_type: 'application/pdf', size: pdf.length });
        svc.clock.advance(DAY + 1);
        refused(await call('documents.GetUpload', { upload_id: late.body.upload_id }), 404, 'not_found', 'expired upload');
        refused(await call('documents.GetUploadPart', { upload_id: late.body.upload_id, part_number: 1 }), 404, 'not_found', 'expired upload');
        refused(await call('documents.CompleteUpload', { upload_id: late.body.upload_id }), 404, 'not_found', 'expired upload');
      });

      it('CompleteUpload receipts: a 409 (missing parts) is replayed to the same key, a 400 (wrong digest) is not stored, so the same key completes after the fix', async () => {
        const created = await call('documents.CreateUpload', { filename: 'receipts.pdf', content_type: 'application/pdf', size: pdf.length, sha256: sha(pdf) });
        const id = created.body.upload_id;
        const k409 = `bb-complete-409-${id}`;
        refused(await call('documents.CompleteUpload', { upload_id: id }, { idem: k409 }), 409, 'conflict', 'missing part');
        const wrong = Buffer.from(pdf);
        wrong[wrong.length - 20] = wrong[wrong.length - 20]! ^ 0xff;
        assert.equal((await put(await partUrl(id, 1), wrong)).status, 200);
        const replayed = await call('documents.CompleteUpload', { upload_id: id }, { idem: k409 });
        refused(replayed, 409, 'conflict', 'the stored 409');
        assert.equal(replayed.headers.get('idempotency-replayed'), 'true');
        const k400 = `bb-complete-400-${id}`;
        const bad = await call('documents.CompleteUpload', { upload_id: id }, { idem: k400 });
        refused(bad, 400, 'invalid_input', 'wrong digest');
        assert.equal(bad.headers.get('idempotency-replayed'), null);
        assert.equal((await call('documents.GetUpload', { upload_id: id })).body.state, 'open');
        assert.equal((await put(await partUrl(id, 1), pdf)).status, 200);
        const done = await call('documents.CompleteUpload', { upload_id: id }, { idem: k400 });
        assert.equal(done.status, 200, `a 400 is not a stored answer (Idempotency-Replayed is only for 200, 404, 409): ${JSON.stringify(done.body)}`);
        const again = await call('documents.CompleteUpload', { upload_id: id }, { idem: k400 });
        assert.equal(again.headers.get('idempotency-replayed'), 'true');
        assert.equal(again.body.file_id, done.body.file_id);
      });

      it('the same Idempotency-Key replays CreateUpload (Idempotency-Replayed: true); the same key with another body is 400', async () => {
        const body = { filename: 'idem.pdf', content_type: 'application/pdf', size: 1234 };
        const first = await call('documents.CreateUpload', body, { idem: 'bb-upload-1' });
        const again = await call('documents.CreateUpload', body, { idem: 'bb-upload-1' });
        assert.equal(again.status, 200);
        assert.equal(again.headers.get('idempotency-replayed'), 'true');
        assert.equal(first.headers.get('idempotency-replayed'), null);
        assert.equal(again.body.upload_id, first.body.upload_id);
        refused(await call('documents.CreateUpload', { ...body, size: 1235 }, { idem: 'bb-upload-1' }), 400, 'invalid_input', 'same key, another body');
        // Receipts are per credential and member: the same key acting for a member is a new upload.
        const member = await call('documents.CreateUpload', body, { idem: 'bb-upload-1', actAs: ws.members.ada! });
        assert.equal(member.status, 200);
        assert.notEqual(member.body.upload_id, first.body.upload_id);
        const twin = await call('documents.CreateUpload', body, { idem: 'bb-upload-1', key: secret('twin') });
        assert.equal(twin.status, 200);
        assert.notEqual(twin.body.upload_id, first.body.upload_id);
      });
    });

    // ---------------------------------------------------------------- ListDocuments

  });
}
