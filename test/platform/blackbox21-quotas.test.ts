/**
 * Quotas (issue 21, finding 3), on both databases, through the running service on the fake clock:
 * - mail: with the defaults one key cannot send 1,000 invitation mails (300 an hour: the request past
 *   it is 429 with Retry-After and makes nothing); reminders spend the same budget; the day budget too;
 * - signers per request: the operator's lower cap is 400 invalid_input;
 * - open uploads per credential (429 with Retry-After until the first expires; another key unaffected);
 * - stored bytes per workspace (files plus open uploads' declared sizes; 413 past it);
 * - part PUTs per credential a minute (429 with Retry-After, nothing stored);
 * - the retention: uploaded files no request keeps go 30 days after upload; a request's original and
 *   archives stay;
 * - the operator's command `workspace limits` sets, resets and refuses values out of bounds.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { cleanupDocuments } from '../../handlers/documents/cleanup.ts';
import { createFile, findFile } from '../../handlers/documents/files.ts';
import { DEFAULT_LIMITS, LimitsError, setWorkspaceLimits } from '../../server/limits.ts';
import { createBlobStore } from '../../server/storage.ts';
import { acme } from '../support/fixtures.ts';
import { forEachDatabase, type TestService } from '../support/service.ts';
import { put } from '../documents/support.ts';
import { makePdf } from '../documents/pdfs.ts';
import { putFile } from '../signing/requestSupport.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const MIB = 1024 * 1024;

async function workspace(svc: TestService) {
  const spec = acme();
  spec.keys!.sender = { name: 'Contracts integration', operations: ['signing.*', 'documents.*'], delegation: 'all', created_by: 'olga' };
  spec.keys!.docs = { name: 'Documents', operations: ['documents.*'] };
  const ws = await svc.apply(spec);
  return { ws, sender: svc.client(ws.keys.sender!.secret), docs: svc.client(ws.keys.docs!.secret) };
}

const signers = (n: number, tag: string) => Array.from({ length: n }, (_, i) => ({ email: `s${i}.${tag}@relay.test`, name: `Signer ${i}` }));
const requestsOf = async (svc: TestService, workspaceId: string) => Number((await svc.db.sql.one<{ n: number | string }>(`SELECT COUNT(*) AS n FROM signing_requests WHERE workspace_id = ?`, [workspaceId]))!.n);
const mailsOf = async (svc: TestService, workspaceId: string) => Number((await svc.db.sql.one<{ n: number | string }>(`SELECT COUNT(*) AS n FROM mailbox_messages WHERE workspace_id = ?`, [workspaceId]))?.n ?? 0);

forEachDatabase('quotas per workspace (issue 21)', (svc) => {
  it('with the defaults one key cannot relay 1,000 invitation mails: 300 go, the next request is 429 with Retry-After and makes nothing', async function () {
    this.timeout(120_000);
    const { ws, sender } = await workspace(svc());
    const { file } = await putFile(svc(), ws.workspace_id);
    const mailsBefore = await mailsOf(svc(), ws.workspace_id);
    for (let i = 0; i < DEFAULT_LIMITS.mails_per_hour / 10; i++) {
      const { data, error } = await sender.signing.RequestFileSignatures({ file_id: file.id, signers: signers(10, `r${i}`), message: 'Please sign' });
      assert.ok(data, `request ${i}: ${JSON.stringify(error)}`);
    }
    const made = await requestsOf(svc(), ws.workspace_id);
    const res = await svc().post('signing.RequestFileSignatures', { file_id: file.id, signers: signers(10, 'over') }, { Authorization: `Bearer ${ws.keys.sender!.secret}`, 'Idempotency-Key': 'over-1' });
    assert.equal(res.status, 429, JSON.stringify(res.body));
    assert.equal((res.body as { error: string }).error, 'rate_limited');
    assert.match((res.body as { message: string }).message, /limit of 300 an hour/);
    // Ten mails come back one every 12 s.
    assert.equal(res.headers.get('retry-after'), '120');
    assert.equal(await requestsOf(svc(), ws.workspace_id), made, 'nothing was made');
    assert.equal((await mailsOf(svc(), ws.workspace_id)) - mailsBefore, DEFAULT_LIMITS.mails_per_hour);
    svc().clock.advance(120_000);
    const again = await svc().post('signing.RequestFileSignatures', { file_id: file.id, signers: signers(10, 'over') }, { Authorization: `Bearer ${ws.keys.sender!.secret}`, 'Idempotency-Key': 'over-1' });
    assert.equal(again.status, 200, JSON.stringify(again.body));
  });

  it('reminders spend the same budget, and the day budget holds when the hour has refilled; signers past the operator cap are 400', async () => {
    const { ws, sender } = await workspace(svc());
    await setWorkspaceLimits(svc().db, svc().clock, ws.workspace_id, { mails_per_hour: 3, mails_per_day: 3, recipients_per_request: 2 });
    const { file } = await putFile(svc(), ws.workspace_id);
    const three = await sender.signing.RequestFileSignatures({ file_id: file.id, signers: signers(3, 'cap') });
    assert.equal(three.response.status, 400);
    assert.match(JSON.stringify(three.error), /at most 2 per request/);
    const { data } = await sender.signing.RequestFileSignatures({ file_id: file.id, signers: signers(2, 'ok') });
    assert.ok(data);
    svc().clock.advance(61 * 60_000);
    const remind = await svc().post('signing.RemindSigners', { signing_request_id: data.signing_request_id }, { Authorization: `Bearer ${ws.keys.sender!.secret}`, 'Idempotency-Key': 'remind-1' });
    assert.equal(remind.status, 429, JSON.stringify(remind.body));
    assert.match((remind.body as { message: string }).message, /limit of 3 a day/);
    assert.ok(Number(remind.headers.get('retry-after')) > 3600, `waits for the day budget: ${remind.headers.get('retry-after')}`);
    const events = await sender.signing.ListSigningEvents({ signing_request_id: data.signing_request_id });
    assert.deepEqual(events.data!.items.map((e) => e.kind).filter((k) => /remind/.test(k)), [], 'no reminder was recorded');
    await setWorkspaceLimits(svc().db, svc().clock, ws.workspace_id, { mails_per_day: 100 });
    const now = await svc().post('signing.RemindSigners', { signing_request_id: data.signing_request_id }, { Authorization: `Bearer ${ws.keys.sender!.secret}`, 'Idempotency-Key': 'remind-1' });
    assert.equal(now.status, 200, JSON.stringify(now.body));
  });

  it('open uploads per credential: past the limit 429 with Retry-After until the first expires; completing one or another key is unaffected', async () => {
    const { ws, sender, docs } = await workspace(svc());
    await setWorkspaceLimits(svc().db, svc().clock, ws.workspace_id, { open_uploads_per_key: 2 });
    const create = (api = sender) => api.documents.CreateUpload({ filename: 'a.pdf', content_type: 'application/pdf', size: 2000 });
    assert.ok((await create()).data);
    svc().clock.advance(60_000);
    const pdf = await makePdf(1);
    const { data: u } = await sender.documents.CreateUpload({ filename: 'done.pdf', content_type: 'application/pdf', size: pdf.length });
    assert.ok(u);
    const { data: part } = await sender.documents.GetUploadPart({ upload_id: u.upload_id, part_number: 1 });
    assert.equal((await put(`${svc().origin}${new URL(part!.url).pathname}`, pdf)).status, 200);
    const done = await sender.documents.CompleteUpload({ upload_id: u.upload_id });
    assert.ok(done.data, JSON.stringify(done.error));
    assert.ok((await create()).data, 'a completed upload is not open');
    const refused = await create();
    assert.equal(refused.response.status, 429, JSON.stringify(refused.error));
    assert.match(JSON.stringify(refused.error), /2 open uploads, the workspace's limit of 2/);
    assert.equal(refused.response.headers.get('retry-after'), String(24 * 3600 - 60));
    assert.ok((await create(docs)).data, 'another key has its own count');
    svc().clock.advance(24 * 3_600_000 - 60_000);
    assert.ok((await create()).data, 'the first expired: room again');
  });

  it('stored bytes per workspace: files plus open uploads; an upload past the limit is 413 and nothing is made', async () => {
    const { ws, docs } = await workspace(svc());
    const { file } = await putFile(svc(), ws.workspace_id);
    await setWorkspaceLimits(svc().db, svc().clock, ws.workspace_id, { stored_bytes: file.size + 3 * MIB });
    const first = await docs.documents.CreateUpload({ filename: 'a.pdf', content_type: 'application/pdf', size: 2 * MIB });
    assert.ok(first.data, JSON.stringify(first.error));
    const second = await docs.documents.CreateUpload({ filename: 'b.pdf', content_type: 'application/pdf', size: MIB + 1 });
    assert.equal(second.response.status, 413, JSON.stringify(second.error));
    assert.equal(second.error?.error, 'invalid_input');
    assert.match(second.error!.message, /storage limit of 3\.\d+ MiB|storage limit of \d+ bytes/);
    const uploads = await svc().db.sql.one<{ n: number | string }>(`SELECT COUNT(*) AS n FROM document_uploads WHERE workspace_id = ?`, [ws.workspace_id]);
    assert.equal(Number(uploads!.n), 1);
    assert.ok((await docs.documents.CreateUpload({ filename: 'c.pdf', content_type: 'application/pdf', size: MIB })).data, 'exactly up to the limit fits');
  });

  it('part PUTs per credential a minute: past it 429 with Retry-After before the body is stored', async () => {
    const { ws, docs } = await workspace(svc());
    await setWorkspaceLimits(svc().db, svc().clock, ws.workspace_id, { part_puts_per_minute: 2 });
    const bytes = Buffer.alloc(3 * MIB, 7);
    const { data: u } = await docs.documents.CreateUpload({ filename: 'p.pdf', content_type: 'application/pdf', size: bytes.length, part_size: MIB });
    assert.ok(u);
    const url = async (n: number) => {
      const { data } = await docs.documents.GetUploadPart({ upload_id: u.upload_id, part_number: n });
      return `${svc().origin}${new URL(data!.url).pathname}`;
    };
    for (const n of [1, 2]) assert.equal((await put(await url(n), bytes.subarray((n - 1) * MIB, n * MIB))).status, 200);
    const third = await put(await url(3), bytes.subarray(2 * MIB));
    assert.equal(third.status, 429, JSON.stringify(third.body));
    assert.equal(third.headers.get('retry-after'), '30');
    assert.equal(third.body.error, 'rate_limited');
    const { data: state } = await docs.documents.GetUpload({ upload_id: u.upload_id });
    assert.deepEqual(state!.parts.filter((p) => p.received).map((p) => p.part_number), [1, 2], 'part 3 was not stored');
    svc().clock.advance(30_000);
    assert.equal((await put(await url(3), bytes.subarray(2 * MIB))).status, 200);
  });

  it('retention: uploaded files no request keeps go 30 days after upload; a request original and an archive stay', async () => {
    const { ws, sender } = await workspace(svc());
    const storage = createBlobStore(svc().db, svc().clock, svc().config.storage);
    const unused = (await putFile(svc(), ws.workspace_id, { filename: 'Unused' })).file;
    const used = (await putFile(svc(), ws.workspace_id, { filename: 'Used' })).file;
    const { data } = await sender.signing.RequestFileSignatures({ file_id: used.id, signers: signers(1, 'keep') });
    assert.ok(data);
    const archiveBlob = await storage.put(null, [Buffer.from('%PDF-1.7 sealed')], { contentType: 'application/pdf' });
    const archive = await createFile(
      svc().db.sql,
      { workspaceId: ws.workspace_id, ownerMemberId: null, createdByKeyId: null, filename: 'a.pdf', contentType: 'application/pdf', size: 15, sha256: archiveBlob.sha256, pageCount: 1, blobId: archiveBlob.id, source: 'signing_archive' },
      svc().clock.now(),
    );
    svc().clock.advance(29 * 86_400_000);
    const young = (await putFile(svc(), ws.workspace_id, { filename: 'Young' })).file;
    assert.equal((await cleanupDocuments({ db: svc().db, clock: svc().clock, storage })).files, 0, 'nothing is 30 days old yet');
    svc().clock.advance(86_400_000);
    const removed = await cleanupDocuments({ db: svc().db, clock: svc().clock, storage });
    assert.ok(removed.files >= 1);
    assert.equal(await findFile(svc().db.sql, ws.workspace_id, unused.id), null, 'the unused upload is gone');
    await assert.rejects(async () => {
      for await (const _ of await storage.get(unused.blobId)) void _;
    }, 'its bytes are gone');
    for (const kept of [used, archive, young]) assert.ok(await findFile(svc().db.sql, ws.workspace_id, kept.id), `${kept.filename} stays`);
    const doc = await sender.signing.GetSigningDocument({ signing_request_id: data.signing_request_id, version: 'original' });
    assert.ok(doc.data, JSON.stringify(doc.error));
  });

  it('the operator sets, resets and bounds the limits (setWorkspaceLimits and npm run admin -- workspace limits)', async function () {
    this.timeout(60_000);
    const { ws } = await workspace(svc());
    await assert.rejects(setWorkspaceLimits(svc().db, svc().clock, ws.workspace_id, { recipients_per_request: 11 }), LimitsError);
    await assert.rejects(setWorkspaceLimits(svc().db, svc().clock, 'ws_nope', { mails_per_hour: 1 }), /no workspace ws_nope/);
    if (svc().db.dialect !== 'sqlite') return;
    const cli = async (...args: string[]) => {
      try {
        const { stdout } = await promisify(execFile)(path.join(root, 'node_modules/.bin/tsx'), [path.join(root, 'scripts/admin.ts'), ...args], { env: { ...process.env, DATABASE_URL: svc().databaseUrl }, cwd: root });
        return { code: 0, stdout, stderr: '' };
      } catch (err) {
        const e = err as { code: number; stdout: string; stderr: string };
        return e;
      }
    };
    const set = await cli('workspace', 'limits', '--workspace', ws.workspace_id, '--mails-per-day', '2000', '--stored-bytes', '1048576', '--json');
    assert.equal(set.code, 0, set.stderr);
    const out = JSON.parse(set.stdout) as Record<string, unknown>;
    assert.equal(out.mails_per_day, 2000);
    assert.equal(out.stored_bytes, 1048576);
    assert.equal(out.mails_per_hour, DEFAULT_LIMITS.mails_per_hour);
    assert.equal(out.set_by_operator, 'mails_per_day, stored_bytes');
    const reset = JSON.parse((await cli('workspace', 'limits', '--workspace', ws.workspace_id, '--mails-per-day', 'default', '--json')).stdout) as Record<string, unknown>;
    assert.equal(reset.mails_per_day, DEFAULT_LIMITS.mails_per_day);
    const bad = await cli('workspace', 'limits', '--workspace', ws.workspace_id, '--recipients-per-request', '50');
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /--recipients-per-request must be a whole number from 1 to 10/);
  });
});
