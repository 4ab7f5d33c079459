/**
 * Uploads end to end through the generated client and real HTTP PUTs of the parts, on both databases:
 * parts out of order and retried, checksums, a connection dropped mid-part and resumed, size limits,
 * qpdf-encrypted files, damaged and foreign files, EICAR through a real clamd, isolation per credential
 * and member, the file listing, the cleanup job and the download links on the fake clock.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import http from 'node:http';
import { freePort } from '../support/smtp.ts';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { downloadUrl, findFile } from '../../handlers/documents/files.ts';
import { signToken } from '../../handlers/documents/tokens.ts';
import { revokeKey } from '../../server/admin.ts';
import { forEachDatabase, type TestService } from '../support/service.ts';
import { clamdMissing, EICAR, type LocalClamd, startClamd } from './clamd.ts';
import { makePdf, sha256 } from './pdfs.ts';
import { docsWorkspace, partBytes, partUrl, put, sendPart, uploadFile } from './support.ts';

const run = promisify(execFile);
const MiB = 1024 * 1024;

const tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'uploads-test-'));
after(() => fs.rm(tmp, { recursive: true, force: true }));

/** A 3.5 MiB PDF (4 parts of 1 MiB) and a small one. */
const big = await makePdf(6, { payloadBytes: 3.5 * MiB, seed: 'big' });
const small = await makePdf(2, { seed: 'small' });

async function qpdfEncrypt(userPassword: string): Promise<Buffer> {
  const src = path.join(tmp, 'src.pdf');
  const out = path.join(tmp, `enc-${userPassword || 'owner'}.pdf`);
  await fs.writeFile(src, small);
  await run('qpdf', ['--encrypt', userPassword, 'OWNERPW', '256', '--', src, out]);
  return fs.readFile(out);
}

/** Waits (real time, bounded) for the server to finish what a dropped connection left it doing. */
async function waitUntil(done: () => Promise<boolean>, ms: number): Promise<void> {
  const until = Date.now() + ms;
  while (!(await done()) && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 10));
}

const incompleteBlobs = async (svc: TestService) => Number((await svc.db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM blobs WHERE completed_at IS NULL`))!.n);

forEachDatabase('documents: uploads in parts', (svc) => {
  it('takes parts out of order and retried (the last good write wins), completes, and the file downloads byte-identical', async () => {
    const { ws, api } = await docsWorkspace(svc());
    const created = await api.documents.CreateUpload({ filename: 'Vertrag – März.pdf', content_type: 'application/pdf', size: big.length, part_size: MiB });
    assert.ok(created.data, JSON.stringify(created.error));
    const u = created.data;
    assert.equal(u.state, 'open');
    assert.equal(u.part_count, 4);
    assert.match(u.upload_id, /^up_[0-9a-z]{24}$/);
    assert.deepEqual(u.parts.map((p) => p.size), [MiB, MiB, MiB, big.length - 3 * MiB]);
    assert.equal(u.expires_at, svc().clock.now() + 24 * 3600_000);

    // 3, 1, 4 first; part 2 first with wrong bytes of the right size, then again with the right ones.
    for (const n of [3, 1, 4]) await sendPart(api, u, big, n);
    const wrong = Buffer.alloc(MiB, 7);
    const first = await put(await partUrl(api, u.upload_id, 2), wrong);
    assert.equal(first.status, 200);
    assert.deepEqual(first.body, { part_number: 2, size: MiB, sha256: sha256(wrong) });
    const blobsBefore = Number((await svc().db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM blobs`))!.n);
    // Sent as a form type on purpose: the raw route sees it before any page router's form parser.
    const again = await put(await partUrl(api, u.upload_id, 2), partBytes(u, big, 2), { 'Content-Type': 'application/x-www-form-urlencoded' });
    assert.equal(again.status, 200, JSON.stringify(again.body));
    assert.equal(again.headers.get('access-control-allow-origin'), '*');
    assert.equal(Number((await svc().db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM blobs`))!.n), blobsBefore, 'the replaced bytes are gone');
    const state = (await api.documents.GetUpload({ upload_id: u.upload_id })).data!;
    assert.deepEqual(state.parts.map((p) => [p.received, p.sha256]), [1, 2, 3, 4].map((n) => [true, sha256(partBytes(u, big, n))]));

    const done = await api.documents.CompleteUpload({ upload_id: u.upload_id, sha256: sha256(big) });
    assert.ok(done.data, JSON.stringify(done.error));
    const file = done.data;
    assert.match(file.file_id, /^file_[0-9a-z]{24}$/);
    assert.deepEqual({ ...file, file_id: 'x' }, {
      file_id: 'x',
      filename: 'Vertrag – März.pdf',
      content_type: 'application/pdf',
      size: big.length,
      sha256: sha256(big),
      page_count: 6,
      text_tags: [],
      scope: 'workspace',
      owner_member_id: null,
      source: 'upload',
      created_at: svc().clock.now(),
    });
    const after = (await api.documents.GetUpload({ upload_id: u.upload_id })).data!;
    assert.equal(after.state, 'completed');
    assert.equal(after.file_id, file.file_id);
    // Completing again (a new key) answers the same file; no more parts are taken.
    assert.deepEqual((await api.documents.CompleteUpload({ upload_id: u.upload_id })).data, file);
    const closed = await api.documents.GetUploadPart({ upload_id: u.upload_id, part_number: 1 });
    assert.equal(closed.response.status, 409);
    assert.equal((await put(await partUrlUnchecked(svc(), u.upload_id), partBytes(u, big, 1))).status, 409);

    // The download link: attachment with the name, the exact bytes; HEAD the same headers and no body.
    const stored = (await findFile(svc().db.sql, ws.workspace_id, file.file_id))!;
    const link = await downloadUrl(svc().db.sql, svc().origin, stored, svc().clock.now());
    assert.equal(link.expiresAt, svc().clock.now() + 15 * 60_000);
    const got = await fetch(link.url);
    assert.equal(got.status, 200);
    assert.equal(got.headers.get('content-type'), 'application/pdf');
    assert.equal(got.headers.get('content-length'), String(big.length));
    assert.equal(got.headers.get('cache-control'), 'no-store');
    assert.match(got.headers.get('content-disposition')!, /^attachment; filename="Vertrag \? M\?rz\.pdf"; filename\*=UTF-8''Vertrag%20%E2%80%93%20M%C3%A4rz\.pdf$/);
    assert.equal(sha256(Buffer.from(await got.arrayBuffer())), sha256(big));
    const head = await fetch(link.url, { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(head.headers.get('content-length'), String(big.length));
    assert.equal((await head.arrayBuffer()).byteLength, 0);
    const renamed = await downloadUrl(svc().db.sql, svc().origin, stored, svc().clock.now(), { filename: 'signed.pdf', ttlMs: 60_000 });
    assert.match((await fetch(renamed.url, { method: 'HEAD' })).headers.get('content-disposition')!, /^attachment; filename="?signed\.pdf"?$/);
    // Expired links and changed tokens are refused.
    svc().clock.advance(60_001);
    const expired = await fetch(renamed.url);
    assert.equal(expired.status, 403);
    assert.match(((await expired.json()) as { message: string }).message, /expired/);
    const token = link.url.split('/files/')[1]!;
    const changed = `${svc().origin}/files/${token.slice(0, -2)}${token.endsWith('AA') ? 'BA' : 'AA'}`;
    assert.equal((await fetch(changed)).status, 403);
    assert.equal((await fetch(`${svc().origin}/files/not-a-token`)).status, 403);
    assert.equal((await fetch(`${svc().origin}/files/not-a-token`, { method: 'HEAD' })).status, 403);
    svc().clock.advance(15 * 60_000);
    assert.equal((await fetch(link.url)).status, 403);
    // No token reached the log.
    assert.ok(!svc().logs().includes(token), 'the download token is not logged');
    const partToken = (await partUrl(api, (await api.documents.CreateUpload({ filename: 'x.pdf', content_type: 'application/pdf', size: 10 })).data!.upload_id, 1)).split('/files/parts/')[1]!;
    assert.equal((await put(`${svc().origin}/files/parts/${partToken}`, Buffer.alloc(10))).status, 200);
    assert.ok(!svc().logs().includes(partToken.split('.')[1]!), 'the part token is not logged');
    assert.match(svc().logs(), /"url":"\/files\/parts\/\[token\]"/);
  });

  it('completes once under concurrent completions and a part sent again meanwhile: one file, the same answer', async () => {
    const { api } = await docsWorkspace(svc());
    const u = (await api.documents.CreateUpload({ filename: 'race.pdf', content_type: 'application/pdf', size: big.length, part_size: MiB })).data!;
    for (const n of [1, 2, 3, 4]) await sendPart(api, u, big, n);
    const again = await partUrl(api, u.upload_id, 2);
    const [a, b, resent] = await Promise.all([
      api.documents.CompleteUpload({ upload_id: u.upload_id }),
      api.documents.CompleteUpload({ upload_id: u.upload_id }),
      put(again, partBytes(u, big, 2)),
    ]);
    assert.ok(a.data && b.data, JSON.stringify([a.error, b.error]));
    assert.deepEqual(a.data, b.data);
    assert.equal(a.data.sha256, sha256(big));
    assert.ok([200, 409].includes(resent.status), `the part sent again answered ${resent.status} ${JSON.stringify(resent.body)}`);
    const files = await svc().db.sql.all(`SELECT id FROM document_files WHERE workspace_id = (SELECT workspace_id FROM document_uploads WHERE id = ?)`, [u.upload_id]);
    assert.equal(files.length, 1);
  });

  it("refuses a part whose bytes are not its URL's SHA-256, or too long, or too short; nothing is kept", async () => {
    const { api } = await docsWorkspace(svc());
    const u = (await api.documents.CreateUpload({ filename: 'a.pdf', content_type: 'application/pdf', size: big.length, part_size: MiB })).data!;
    const right = partBytes(u, big, 1);
    const bound = await partUrl(api, u.upload_id, 1, { sha256: sha256(right) });
    const bad = await put(bound, Buffer.alloc(MiB, 1));
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error, 'invalid_input');
    assert.match(bad.body.message, /SHA-256 .* not the .* its URL was made for/);
    const tooLong = await put(await partUrl(api, u.upload_id, 1), Buffer.alloc(MiB + 1, 1));
    assert.equal(tooLong.status, 413);
    assert.equal(tooLong.body.error, 'invalid_input');
    const tooShort = await put(await partUrl(api, u.upload_id, 1), Buffer.alloc(MiB - 1, 1));
    assert.equal(tooShort.status, 400);
    assert.match(tooShort.body.message, /exactly 1048576 bytes/);
    // Streamed without Content-Length: the limit is counted while reading.
    const stream = new ReadableStream({
      start(c) {
        for (let i = 0; i < 5; i++) c.enqueue(new Uint8Array(256 * 1024).fill(2));
        c.close();
      },
    });
    const chunked = await fetch(await partUrl(api, u.upload_id, 1), { method: 'PUT', body: stream, duplex: 'half' } as RequestInit);
    assert.equal(chunked.status, 413);
    assert.equal((await api.documents.GetUpload({ upload_id: u.upload_id })).data!.parts[0]!.received, false);
    assert.equal(await incompleteBlobs(svc()), 0);
    // The bound URL takes the right bytes.
    assert.equal((await put(bound, right)).status, 200);
    // A part number past the last is refused when asking for its URL.
    const beyond = await api.documents.GetUploadPart({ upload_id: u.upload_id, part_number: 5 });
    assert.equal(beyond.response.status, 400);
    assert.match(beyond.error!.message, /has 4 parts/);
  });

  it('keeps an upload open when the whole-file SHA-256 differs, and completes it with the right one', async () => {
    const { api } = await docsWorkspace(svc());
    const u = (await api.documents.CreateUpload({ filename: 'a.pdf', content_type: 'application/pdf', size: small.length })).data!;
    assert.equal(u.part_count, 1);
    await sendPart(api, u, small, 1);
    const wrong = await api.documents.CompleteUpload({ upload_id: u.upload_id, sha256: '0'.repeat(64) });
    assert.equal(wrong.response.status, 400);
    assert.match(wrong.error!.message, /SHA-256 is [0-9a-f]{64}, not 0{64}; the upload stays open/);
    assert.equal((await api.documents.GetUpload({ upload_id: u.upload_id })).data!.state, 'open');
    const right = await api.documents.CompleteUpload({ upload_id: u.upload_id, sha256: sha256(small) });
    assert.equal(right.data?.sha256, sha256(small));

    // Given at creation: checked at completion, and a different one at completion is refused.
    const v = (await api.documents.CreateUpload({ filename: 'b.pdf', content_type: 'application/pdf', size: small.length, sha256: 'f'.repeat(64) })).data!;
    await sendPart(api, v, small, 1);
    const mismatch = await api.documents.CompleteUpload({ upload_id: v.upload_id });
    assert.equal(mismatch.response.status, 400);
    assert.match(mismatch.error!.message, /not f{64}/);
    const differs = await api.documents.CompleteUpload({ upload_id: v.upload_id, sha256: sha256(small) });
    assert.equal(differs.response.status, 400);
    assert.match(differs.error!.message, /differs from the sha256 given when the upload was created/);
  });

  it('resumes after a connection dropped mid-part: the part is not received until sent again', async () => {
    const { api } = await docsWorkspace(svc());
    const u = (await api.documents.CreateUpload({ filename: 'a.pdf', content_type: 'application/pdf', size: big.length, part_size: MiB })).data!;
    for (const n of [1, 2, 4]) await sendPart(api, u, big, n);
    const url = new URL(await partUrl(api, u.upload_id, 3));
    // Half the body, then the connection dies.
    await new Promise<void>((resolve) => {
      const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: 'PUT', headers: { 'Content-Length': String(MiB) } });
      req.on('error', () => resolve());
      req.write(partBytes(u, big, 3).subarray(0, MiB / 2), () => setTimeout(() => req.destroy(), 50));
      req.on('close', () => resolve());
    });
    await waitUntil(async () => (await incompleteBlobs(svc())) === 0, 5000);
    assert.equal(await incompleteBlobs(svc()), 0, 'the half part left nothing behind');
    const state = (await api.documents.GetUpload({ upload_id: u.upload_id })).data!;
    assert.deepEqual(state.parts.map((p) => p.received), [true, true, false, true]);
    const early = await api.documents.CompleteUpload({ upload_id: u.upload_id });
    assert.equal(early.response.status, 409);
    assert.match(early.error!.message, /missing part 3;/);
    await sendPart(api, u, big, 3);
    const done = await api.documents.CompleteUpload({ upload_id: u.upload_id });
    assert.equal(done.data?.sha256, sha256(big));
  });

  it('refuses a PDF that needs a user password and accepts one with only an owner password, stored as uploaded', async () => {
    const { api } = await docsWorkspace(svc());
    const locked = await qpdfEncrypt('USERPW');
    const refused = await uploadFile(api, locked);
    assert.equal(refused.response.status, 400);
    assert.deepEqual(refused.error && { error: refused.error.error, message: refused.error.message }, { error: 'invalid_input', message: 'The file was refused: the PDF needs a password to open.' });
    const state = (await api.documents.GetUpload({ upload_id: refused.upload.upload_id })).data!;
    assert.equal(state.state, 'rejected');
    assert.equal(state.rejection_reason, 'the PDF needs a password to open');
    assert.equal(state.file_id, null);
    // Completing again answers the same refusal; the upload takes no more parts.
    const again = await api.documents.CompleteUpload({ upload_id: refused.upload.upload_id });
    assert.equal(again.response.status, 400);
    assert.equal(again.error!.message, 'The file was refused: the PDF needs a password to open.');
    assert.equal((await api.documents.GetUploadPart({ upload_id: refused.upload.upload_id, part_number: 1 })).response.status, 409);

    const ownerOnly = await qpdfEncrypt('');
    const accepted = await uploadFile(api, ownerOnly);
    assert.ok(accepted.data, JSON.stringify(accepted.error));
    assert.equal(accepted.data.sha256, sha256(ownerOnly), 'the original bytes, not decrypted');
    assert.equal(accepted.data.page_count, 2);
  });

  it('refuses damaged, truncated and foreign files, each with its reason and no file', async () => {
    const { api } = await docsWorkspace(svc());
    const png = Buffer.from('89504e470d0a1a0a0000000d4948445200000001000000010806000000', 'hex');
    const damaged = Buffer.from(small);
    damaged.write('garbage!', Math.floor(damaged.length * 0.6), 'latin1');
    const cases: Array<[Buffer, RegExp]> = [
      [small.subarray(0, Math.floor(small.length / 2)), /^the PDF is truncated/],
      [png, /^the file is a PNG image, not a PDF$/],
      [Buffer.from('hello, this is plain text\n'), /^the file is not a PDF/],
    ];
    for (const [bytes, reason] of cases) {
      const out = await uploadFile(api, bytes);
      assert.equal(out.response.status, 400, reason.source);
      assert.match(out.error!.message, new RegExp(`^The file was refused: ${reason.source.slice(1, reason.source.endsWith('$') ? -1 : undefined)}`));
      const state = (await api.documents.GetUpload({ upload_id: out.upload.upload_id })).data!;
      assert.equal(state.state, 'rejected');
      assert.match(state.rejection_reason!, reason);
      assert.equal(state.file_id, null);
    }
    const listed = (await api.documents.ListDocuments({ scope: 'workspace' })).data!;
    assert.equal(listed.items.length, 0, 'no file was made');
  });

  it('isolates uploads per credential and per member acted for (404 for everyone else)', async () => {
    const { api, other, ada, olga } = await docsWorkspace(svc());
    const mine = (await api.documents.CreateUpload({ filename: 'w.pdf', content_type: 'application/pdf', size: small.length })).data!;
    const adas = (await api.documents.CreateUpload({ filename: 'a.pdf', content_type: 'application/pdf', size: small.length }, { actAs: ada })).data!;
    const tries = async (id: string, actAs: string | null, client = api) => [
      (await client.documents.GetUpload({ upload_id: id }, { actAs })).response.status,
      (await client.documents.GetUploadPart({ upload_id: id, part_number: 1 }, { actAs })).response.status,
      (await client.documents.CompleteUpload({ upload_id: id }, { actAs })).response.status,
    ];
    assert.deepEqual(await tries(mine.upload_id, null, other), [404, 404, 404], 'another key');
    assert.deepEqual(await tries(mine.upload_id, ada), [404, 404, 404], 'the same key acting for a member');
    assert.deepEqual(await tries(adas.upload_id, null), [404, 404, 404], 'the same key without the member');
    assert.deepEqual(await tries(adas.upload_id, olga), [404, 404, 404], 'the same key for another member');
    assert.deepEqual(await tries(adas.upload_id, ada, other), [404, 404, 404], 'another key for the same member');
    // Its owner sees it and completes it: ada's private file.
    await sendPart(api, adas, small, 1, ada);
    const file = (await api.documents.CompleteUpload({ upload_id: adas.upload_id }, { actAs: ada })).data!;
    assert.equal(file.scope, 'user');
    assert.equal(file.owner_member_id, ada);
  });

  it('lists files by scope, newest first, in pages', async () => {
    const { api, other, ada, olga } = await docsWorkspace(svc());
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      ids.push((await uploadFile(api, small, { filename: `w${i}.pdf` })).data!.file_id);
      svc().clock.advance(1000);
    }
    const adaFile = (await uploadFile(api, small, { filename: 'ada.pdf', actAs: ada })).data!;
    const page1 = (await api.documents.ListDocuments({ scope: 'workspace', limit: 2 })).data!;
    assert.deepEqual(page1.items.map((f) => f.file_id), [ids[2], ids[1]]);
    assert.equal(page1.has_more, true);
    const page2 = (await api.documents.ListDocuments({ scope: 'workspace', limit: 2, cursor: page1.next_cursor! })).data!;
    assert.deepEqual(page2.items.map((f) => f.file_id), [ids[0]]);
    assert.equal(page2.has_more, false);
    assert.equal(page2.next_cursor, null);
    // Workspace files are every caller's; a private file only its member's.
    assert.deepEqual((await other.documents.ListDocuments({ scope: 'workspace' })).data!.items.map((f) => f.file_id), [...ids].reverse());
    assert.deepEqual((await api.documents.ListDocuments({ scope: 'workspace' }, { actAs: ada })).data!.items.length, 3);
    assert.deepEqual((await api.documents.ListDocuments({ scope: 'user' }, { actAs: ada })).data!.items.map((f) => f.file_id), [adaFile.file_id]);
    assert.deepEqual((await other.documents.ListDocuments({ scope: 'user' }, { actAs: ada })).data!.items.map((f) => f.file_id), [adaFile.file_id]);
    assert.deepEqual((await api.documents.ListDocuments({ scope: 'user' }, { actAs: olga })).data!.items, []);
    const noMember = await api.documents.ListDocuments({ scope: 'user' });
    assert.equal(noMember.response.status, 400);
    assert.match(noMember.error!.message, /Service-Act-As/);
    const mixed = await api.documents.ListDocuments({ scope: 'user', cursor: page1.next_cursor! }, { actAs: ada });
    assert.equal(mixed.response.status, 400);
  });

  it('checks the part layout: part_size or part_count (not both), their bounds, the file size and name', async () => {
    const { api } = await docsWorkspace(svc());
    const create = (body: Record<string, unknown>) => api.documents.CreateUpload({ filename: 'a.pdf', content_type: 'application/pdf', size: 10 * MiB, ...body } as never);
    const byCount = (await create({ part_count: 4 })).data!;
    assert.deepEqual([byCount.part_size, byCount.part_count], [2.5 * MiB, 4]);
    const byDefault = (await create({})).data!;
    assert.deepEqual([byDefault.part_size, byDefault.part_count, byDefault.parts.at(-1)!.size], [5 * MiB, 2, 5 * MiB]);
    const refusals: Array<[Record<string, unknown>, RegExp]> = [
      [{ part_count: 2, part_size: 5 * MiB }, /give one of them, not both/],
      [{ part_count: 20 }, /less than the minimum part/],
      [{ size: 50 * MiB, part_count: 3 }, /more than the part limit/],
      [{ part_size: MiB - 1 }, /part_size/],
      [{ size: 50 * MiB + 1 }, /size/],
      [{ size: 0 }, /size/],
      [{ filename: 'a/b.pdf' }, /filename: must not contain/],
      [{ filename: 'a\u0007.pdf' }, /filename: must not contain/],
      [{ content_type: 'image/png' }, /content_type/],
    ];
    for (const [body, message] of refusals) {
      const out = await create(body);
      assert.equal(out.response.status, 400, JSON.stringify(body));
      assert.match(out.error!.message, message, JSON.stringify(body));
    }
    // One part may be smaller than the minimum: the whole file.
    const one = (await api.documents.CreateUpload({ filename: 'a.pdf', content_type: 'application/pdf', size: 1000, part_count: 1 })).data!;
    assert.deepEqual([one.part_size, one.part_count], [1000, 1]);
  });

  it('refuses bad, changed and expired part URLs with 403; an expired upload is gone; the cleanup job removes it with its parts', async () => {
    const { api } = await docsWorkspace(svc());
    const u = (await api.documents.CreateUpload({ filename: 'a.pdf', content_type: 'application/pdf', size: big.length, part_size: MiB })).data!;
    await sendPart(api, u, big, 1);
    const url = await partUrl(api, u.upload_id, 2);
    assert.equal((await put(`${svc().origin}/files/parts/nonsense`, partBytes(u, big, 2))).status, 403);
    const [head, tag] = url.split('/files/parts/')[1]!.split('.');
    const changed = await put(`${svc().origin}/files/parts/${head}.${tag!.startsWith('A') ? 'B' : 'A'}${tag!.slice(1)}`, partBytes(u, big, 2));
    assert.equal(changed.status, 403);
    assert.equal(changed.body.error, 'forbidden');
    svc().clock.advance(15 * 60_000);
    const late = await put(url, partBytes(u, big, 2));
    assert.equal(late.status, 403);
    assert.match(late.body.message, /expired/);
    // A revoked key's part URLs die with it.
    const { ws: other, api: otherApi } = await docsWorkspace(svc());
    const v = (await otherApi.documents.CreateUpload({ filename: 'a.pdf', content_type: 'application/pdf', size: small.length })).data!;
    const vUrl = await partUrl(otherApi, v.upload_id, 1);
    await revokeKey(svc().db, svc().clock, other.keys.docs!.id);
    const revoked = await put(vUrl, small);
    assert.equal(revoked.status, 403);
    assert.match(revoked.body.message, /revoked/);
    const preflight = await fetch(url, { method: 'OPTIONS' });
    assert.equal(preflight.status, 204);
    assert.equal(preflight.headers.get('access-control-allow-methods'), 'PUT');

    const fresh = await partUrl(api, u.upload_id, 2);
    svc().clock.advance(24 * 3600_000 - 15 * 60_000);
    assert.equal((await api.documents.GetUpload({ upload_id: u.upload_id })).response.status, 404, 'gone at expires_at');
    assert.equal((await put(fresh, partBytes(u, big, 2))).status, 403, 'a part URL never outlives its upload');
    const blobIds = (await svc().db.sql.all<{ blob_id: string }>(`SELECT blob_id FROM document_upload_parts WHERE upload_id = ?`, [u.upload_id])).map((r) => r.blob_id);
    assert.equal(blobIds.length, 1);
    await svc().jobs.scheduleRecurring();
    await svc().jobs.runDue();
    svc().clock.advance(60 * 60_000);
    await svc().jobs.runDue();
    assert.equal((await svc().db.sql.all(`SELECT id FROM document_uploads WHERE id = ?`, [u.upload_id])).length, 0);
    assert.equal((await svc().db.sql.all(`SELECT upload_id FROM document_upload_parts WHERE upload_id = ?`, [u.upload_id])).length, 0);
    assert.equal((await svc().db.sql.all(`SELECT id FROM blobs WHERE id = ?`, [blobIds[0]!])).length, 0, 'the part bytes are gone');
  });
});

/** A live part URL of an upload that no longer takes parts (the operation refuses to make one): signed as the operation signs them. */
async function partUrlUnchecked(svc: TestService, uploadId: string): Promise<string> {
  const token = await signToken(svc.db, 'part', { u: uploadId, p: 1, s: MiB, h: null }, svc.clock.now() + 60_000);
  return `${svc.origin}/files/parts/${token}`;
}

// ClamAV: a real clamd with a local EICAR signature (skipped only when clamd is missing and REQUIRE_CLAMAV unset).
const missing = clamdMissing();
if (missing && process.env.REQUIRE_CLAMAV) throw new Error(`ClamAV is required (REQUIRE_CLAMAV) but ${missing}`);
const clamd: LocalClamd | null = missing ? null : await startClamd({ streamMaxLength: 64 * MiB });
after(() => clamd?.stop());

if (clamd) {
  forEachDatabase(
    'documents: uploads scanned by ClamAV',
    (svc) => {
      it('refuses a PDF carrying EICAR with the signature named, and accepts a clean one', async () => {
        const { api } = await docsWorkspace(svc());
        const infected = await makePdf(1, { rawStream: EICAR });
        const out = await uploadFile(api, infected);
        assert.equal(out.response.status, 400);
        assert.equal(out.error!.message, 'The file was refused: the file contains malware (ClamAV found Test.EICAR-Body.UNOFFICIAL).');
        assert.equal((await api.documents.GetUpload({ upload_id: out.upload.upload_id })).data!.state, 'rejected');
        const clean = await uploadFile(api, small);
        assert.equal(clean.data?.sha256, sha256(small));
      });
    },
    { env: { CLAMAV_URL: `tcp://127.0.0.1:${clamd.port}` } },
  );
} else {
  describe('documents: uploads scanned by ClamAV', () => {
    it.skip(`skipped: ${missing}`);
  });
}

const deadPort = await freePort();
forEachDatabase(
  'documents: ClamAV configured but not answering',
  (svc) => {
    it('answers 503 unavailable and changes nothing (the upload stays open with its part)', async () => {
      const { api } = await docsWorkspace(svc());
      const u = (await api.documents.CreateUpload({ filename: 'a.pdf', content_type: 'application/pdf', size: small.length })).data!;
      await sendPart(api, u, small, 1);
      const out = await api.documents.CompleteUpload({ upload_id: u.upload_id }, { idempotencyKey: 'complete-1' } as never);
      assert.equal(out.response.status, 503);
      assert.equal(out.error!.error, 'unavailable');
      assert.match(out.error!.message, /virus scanner is not available/);
      const state = (await api.documents.GetUpload({ upload_id: u.upload_id })).data!;
      assert.equal(state.state, 'open');
      assert.equal(state.parts[0]!.received, true);
      assert.equal((await api.documents.ListDocuments({ scope: 'workspace' })).data!.items.length, 0);
    });
  },
  { env: { CLAMAV_URL: `tcp://127.0.0.1:${deadPort}` } },
);

const volume = await fs.mkdtemp(path.join(os.tmpdir(), 'uploads-volume-'));
after(() => fs.rm(volume, { recursive: true, force: true }));
forEachDatabase(
  'documents: uploads on a shared volume (STORAGE=filesystem)',
  (svc) => {
    it('stores parts and the file on the volume, downloads it, and the cleanup removes the parts', async () => {
      const { ws, api } = await docsWorkspace(svc());
      const out = await uploadFile(api, big, { partSize: MiB });
      assert.ok(out.data, JSON.stringify(out.error));
      const stored = (await findFile(svc().db.sql, ws.workspace_id, out.data.file_id))!;
      const got = await fetch((await downloadUrl(svc().db.sql, svc().origin, stored, svc().clock.now())).url);
      assert.equal(sha256(Buffer.from(await got.arrayBuffer())), sha256(big));
      const parts = (await svc().db.sql.all<{ blob_id: string }>(`SELECT blob_id FROM document_upload_parts WHERE upload_id = ?`, [out.upload.upload_id])).map((r) => r.blob_id);
      assert.equal(parts.length, 4);
      svc().clock.advance(24 * 3600_000);
      await svc().jobs.scheduleRecurring();
      await svc().jobs.runDue();
      const { createBlobStore } = await import('../../server/storage.ts');
      const store = createBlobStore(svc().db, svc().clock, svc().config.storage);
      for (const id of parts) assert.equal(await store.stat(id), null, 'a part is gone from the volume');
      assert.ok(await store.stat(stored.blobId), 'the file stays');
    });
  },
  { storage: { backend: 'filesystem', path: volume } },
);
