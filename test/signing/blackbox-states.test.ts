/**
 * Black box of documents.* and signing.*: the request's states, later mail, deadlines on the fake clock,
 * ClamAV down and rate limits. One of the files split from one suite; the shared setup is blackboxKit.ts.
 * Written from the seed (sections 2.5, 3, 4.7-4.12, 5) and the OpenAPI document only: every call goes over
 * HTTP, the mail through a real SMTP server; the service's code and tables are never touched.
 */
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import type { ApplyResult } from '../../server/admin.ts';
import { acme } from '../support/fixtures.ts';
import { databases, startTestService, type TestService } from '../support/service.ts';
import { freePort, type MailServer, runJobs, tokenIn } from './requestSupport.ts';
import { onService } from './signerKit.ts';
import { HOUR, DAY, sha, shape, documented, refused, blackboxService } from './blackboxKit.ts';

for (const database of databases) {
  describe(`documents and signing, black box [${database.name}]`, function () {
    this.timeout(60_000);
    const kit = blackboxService(database);
    const { call, upload, addr, request, linkOf, form, signAs, get, allEvents } = kit;
    let smtp: MailServer;
    let svc: TestService;
    let pdf: Buffer;
    before(() => ({ smtp, svc, pdf } = kit.state()));

    describe('states (seed section 3)', () => {
      it('all signed: completed, file_id null until the archive is ready; cancel, deadline and remind are then 409 and it stays completed', async () => {
        const a = addr();
        const b = addr();
        const r = await request([{ email: a, name: 'Anna' }, { email: b, name: 'Bert' }]);
        const id = r.signing_request_id;
        await signAs(a, 'Anna');
        assert.equal((await get(id)).body.recipients[0].status, 'signed');
        assert.equal((await get(id)).body.status, 'pending');
        await signAs(b, 'Bert');
        const done = await get(id);
        assert.equal(done.body.status, 'completed');
        assert.equal(typeof done.body.completed_at, 'number');
        assert.deepEqual(done.body.recipients.map((x: { status: string }) => x.status), ['signed', 'signed']);
        if (done.body.file_id === null) refused(await call('signing.GetSigningDocument', { signing_request_id: id, version: 'signed' }), 409, 'conflict', 'signed before the archive');
        refused(await call('signing.CancelSigningRequest', { signing_request_id: id }), 409, 'conflict', 'cancel completed');
        refused(await call('signing.UpdateSigningDeadline', { signing_request_id: id, deadline_at: svc.clock.now() + 5 * DAY }), 409, 'conflict', 'deadline of completed');
        refused(await call('signing.RemindSigners', { signing_request_id: id }), 409, 'conflict', 'remind completed');
        await runJobs(svc);
        const ready = await get(id);
        assert.equal(ready.body.status, 'completed', 'stays completed');
        assert.match(ready.body.file_id, /^file_/);
        const signed = await call('signing.GetSigningDocument', { signing_request_id: id, version: 'signed' });
        assert.equal(signed.status, 200, JSON.stringify(signed.body));
        shape(signed.body, { signing_request_id: 'string', version: 'string', url: 'string', filename: 'string', expires_at: 'integer', sha256: 'string', size: 'integer' }, 'document link');
        const bytes = Buffer.from(await (await fetch(onService(signed.body.url, svc.origin))).arrayBuffer());
        assert.equal(sha(bytes), signed.body.sha256);
        assert.equal(bytes.length, signed.body.size);
        assert.equal(bytes.subarray(0, 5).toString(), '%PDF-');
        // The archive is a signing_archive file the workspace lists.
        const listed = await call('documents.ListDocuments', { scope: 'workspace', limit: 100 });
        const archive = listed.body.items.find((f: { file_id: string }) => f.file_id === ready.body.file_id);
        assert.ok(archive, 'the archive is listed');
        assert.equal(archive.source, 'signing_archive');
        assert.equal(archive.sha256, signed.body.sha256);
        const kinds = (await allEvents(id, 100)).map((e) => e.kind);
        assert.ok(kinds.includes('request.completed') && kinds.includes('archive.completed'), kinds.join());
        refused(await call('signing.CancelSigningRequest', { signing_request_id: id }), 409, 'conflict', 'cancel after the archive');
        const verified = await call('signing.VerifySignedDocument', { file_id: ready.body.file_id });
        assert.equal(verified.status, 200, JSON.stringify(verified.body));
        assert.equal(verified.body.seal.present, true);
        assert.equal(verified.body.seal.valid, true);
        assert.equal(verified.body.seal.covers_whole_document, true);
        assert.equal(verified.body.signing_request?.signing_request_id, id);
        assert.deepEqual(verified.body.signing_request.signers.map((x: { typed_name: string }) => x.typed_name), ['Anna', 'Bert']);
        const original = await call('signing.VerifySignedDocument', { file_id: r.source_file_id });
        assert.equal(original.status, 200);
        assert.equal(original.body.seal.present, false);
        assert.equal(original.body.signing_request, null);
        assert.equal((await get(id)).body.status, 'completed');
      });

      it('verification: a changed byte breaks the seal and matches nothing; bytes appended after the seal are not covered', async () => {
        const a = addr();
        const r = await request([{ email: a, name: 'Anna' }]);
        await signAs(a, 'Anna');
        await runJobs(svc);
        const link = await call('signing.GetSigningDocument', { signing_request_id: r.signing_request_id, version: 'signed' });
        assert.equal(link.status, 200, JSON.stringify(link.body));
        const archive = Buffer.from(await (await fetch(onService(link.body.url, svc.origin))).arrayBuffer());
        // The second line of a PDF is a binary comment: changing one of its bytes keeps the file parseable.
        const nl = archive.indexOf(0x0a);
        assert.equal(archive[nl + 1], 0x25, 'a comment line follows the header');
        const changed = Buffer.from(archive);
        changed[nl + 2] = changed[nl + 2]! ^ 0x01;
        const up1 = await upload(changed, { filename: 'changed.pdf' });
        assert.equal(up1.status, 200, JSON.stringify(up1.body));
        const v1 = await call('signing.VerifySignedDocument', { file_id: up1.body.file_id });
        assert.equal(v1.status, 200);
        documented(v1.body, 'DocumentVerification', 'verification');
        assert.equal(v1.body.seal.present, true);
        assert.equal(v1.body.seal.valid, false, 'one changed byte: the seal no longer verifies');
        assert.equal(v1.body.signing_request, null, 'and nothing matches');
        const appended = Buffer.concat([archive, Buffer.from('\n% appended after sealing\n')]);
        const up2 = await upload(appended, { filename: 'appended.pdf' });
        assert.equal(up2.status, 200, JSON.stringify(up2.body));
        const v2 = await call('signing.VerifySignedDocument', { file_id: up2.body.file_id });
        assert.equal(v2.body.seal.covers_whole_document, false, 'bytes after the seal are not covered');
        assert.equal(v2.body.signing_request, null);
        const same = await upload(archive, { filename: 'copy.pdf' });
        const v3 = await call('signing.VerifySignedDocument', { file_id: same.body.file_id });
        assert.equal(v3.body.seal.valid, true);
        assert.equal(v3.body.seal.covers_whole_document, true);
        assert.equal(v3.body.signing_request?.signing_request_id, r.signing_request_id, 'an unchanged copy matches its request');
      });

      it('changing the deadline keeps the document and the signatures, later or earlier; out of bounds is 400', async () => {
        const a = addr();
        const b = addr();
        const r = await request([{ email: a, name: 'Anna' }, { email: b, name: 'Bert' }]);
        const id = r.signing_request_id;
        await signAs(a, 'Anna');
        const signedAt = (await get(id)).body.recipients[0].signed_at;
        for (const deadline of [svc.clock.now() + 2 * HOUR, svc.clock.now() + 100 * DAY]) {
          const moved = await call('signing.UpdateSigningDeadline', { signing_request_id: id, deadline_at: deadline });
          assert.equal(moved.status, 200, JSON.stringify(moved.body));
          documented(moved.body, 'SigningRequest', 'moved request');
          assert.equal(moved.body.deadline_at, deadline);
          assert.equal(moved.body.status, 'pending');
          assert.equal(moved.body.source_file_id, r.source_file_id);
          assert.equal(moved.body.recipients[0].status, 'signed');
          assert.equal(moved.body.recipients[0].signed_at, signedAt);
        }
        const now = svc.clock.now();
        for (const [what, deadline] of [['under an hour', now + HOUR - 1], ['past', now - 1], ['beyond 120 days', now + 120 * DAY + HOUR], ['negative', -5], ['a string', 'tomorrow'], ['null', null]] as Array<[string, unknown]>) {
          refused(await call('signing.UpdateSigningDeadline', { signing_request_id: id, deadline_at: deadline }), 400, 'invalid_input', what);
        }
        const changes = (await allEvents(id, 100)).filter((e) => e.kind === 'deadline.changed');
        assert.equal(changes.length, 2);
        assert.equal(changes[1].data.deadline_at, now + 100 * DAY);
        // The other signer can still sign with the old link.
        await signAs(b, 'Bert');
        assert.equal((await get(id)).body.status, 'completed');
      });

      it('reminders go to pending recipients only, at most once an hour (409 with a message), never after completion', async () => {
        const a = addr();
        const b = addr();
        const r = await request([{ email: a, name: 'Anna' }, { email: b, name: 'Bert' }]);
        const id = r.signing_request_id;
        await signAs(a, 'Anna');
        refused(await call('signing.RemindSigners', { signing_request_id: id }), 409, 'conflict', 'too soon');
        svc.clock.advance(HOUR);
        const mailsA = smtp.to(a).length;
        const reminded = await call('signing.RemindSigners', { signing_request_id: id, message: 'Bitte unterschreiben ✍️' });
        assert.equal(reminded.status, 200, JSON.stringify(reminded.body));
        documented(reminded.body, 'SigningRequest', 'reminded request');
        assert.deepEqual(reminded.body.invitation_failures, []);
        assert.equal(smtp.to(a).length, mailsA, 'the signer who signed gets nothing');
        assert.equal(smtp.to(b).length, 2, 'the pending signer gets a reminder');
        const reminder = smtp.to(b)[1]!.mail;
        assert.match(reminder.text ?? '', /Bitte unterschreiben ✍️/, 'the reminder quotes its message');
        assert.notEqual(tokenIn(reminder), tokenIn(smtp.to(b)[0]!.mail), 'with a fresh link');
        assert.equal(reminded.body.recipients[1].last_reminded_at, svc.clock.now());
        assert.equal(reminded.body.recipients[0].last_reminded_at, null);
        refused(await call('signing.RemindSigners', { signing_request_id: id }), 409, 'conflict', 'again at once');
        refused(await call('signing.RemindSigners', { signing_request_id: id, message: 'm'.repeat(2001) }), 400, 'invalid_input', 'long message');
        // The old link still works after a reminder.
        const first = `/sign/${tokenIn(smtp.to(b)[0]!.mail)}`;
        assert.equal(await form(`${first}/open`, {}), 303);
        assert.equal(await form(`${first}/sign`, { typed_name: 'Bert', agree: 'yes' }), 303);
        svc.clock.advance(HOUR);
        refused(await call('signing.RemindSigners', { signing_request_id: id }), 409, 'conflict', 'nobody left');
        assert.ok((await allEvents(id, 100)).some((e) => e.kind === 'reminder.sent' && e.recipient?.email === b));
      });

      it('cancel: pending becomes cancelled, links die at once, cancelling again is 409; the same key replays the answer', async () => {
        const a = addr();
        const r = await request([{ email: a, name: 'Anna' }]);
        const id = r.signing_request_id;
        const path = linkOf(a);
        const res = await call('signing.CancelSigningRequest', { signing_request_id: id, reason: 'Wrong version — ny version följer' }, { idem: `bb-cancel-${id}` });
        assert.equal(res.status, 200, JSON.stringify(res.body));
        documented(res.body, 'SigningRequest', 'cancelled request');
        assert.equal(res.body.status, 'cancelled');
        assert.equal(res.body.cancelled_at, svc.clock.now());
        assert.equal(res.body.cancel_reason, 'Wrong version — ny version följer');
        const replay = await call('signing.CancelSigningRequest', { signing_request_id: id, reason: 'Wrong version — ny version följer' }, { idem: `bb-cancel-${id}` });
        assert.equal(replay.status, 200);
        assert.equal(replay.headers.get('idempotency-replayed'), 'true');
        refused(await call('signing.CancelSigningRequest', { signing_request_id: id }), 409, 'conflict', 'cancel again');
        refused(await call('signing.RemindSigners', { signing_request_id: id }), 409, 'conflict', 'remind cancelled');
        refused(await call('signing.UpdateSigningDeadline', { signing_request_id: id, deadline_at: svc.clock.now() + DAY }), 409, 'conflict', 'deadline of cancelled');
        const page = await fetch(`${svc.origin}${path}`);
        assert.equal(page.status, 410, 'the link is dead');
        assert.match(await page.text(), /cancel/i, 'its page says the request was cancelled');
        assert.equal(await form(`${path}/open`, {}), 410);
        assert.equal(await form(`${path}/sign`, { typed_name: 'Anna', agree: 'yes' }), 410);
        refused(await call('signing.CancelSigningRequest', { signing_request_id: id, reason: 'r'.repeat(501) }), 400, 'invalid_input', 'long reason');
        assert.equal((await get(id)).body.recipients[0].status, 'pending');
        const kinds = (await allEvents(id, 100)).map((e) => e.kind);
        assert.equal(kinds.at(-1), 'request.cancelled');
      });

      it('expiry at the deadline on the fake clock: expired, the link dies, every command 409', async () => {
        const a = addr();
        const r = await request([{ email: a, name: 'Anna' }], { deadline_at: svc.clock.now() + HOUR + 60_000 });
        const id = r.signing_request_id;
        await svc.jobs.scheduleRecurring();
        svc.clock.advance(HOUR + 2 * 60_000);
        await runJobs(svc);
        const read = await get(id);
        assert.equal(read.body.status, 'expired');
        assert.equal(typeof read.body.expired_at, 'number');
        const page = await fetch(`${svc.origin}${linkOf(a)}`);
        await page.arrayBuffer();
        assert.equal(page.status, 410);
        refused(await call('signing.CancelSigningRequest', { signing_request_id: id }), 409, 'conflict', 'cancel expired');
        refused(await call('signing.UpdateSigningDeadline', { signing_request_id: id, deadline_at: svc.clock.now() + DAY }), 409, 'conflict', 'deadline of expired');
        refused(await call('signing.RemindSigners', { signing_request_id: id }), 409, 'conflict', 'remind expired');
        assert.ok((await allEvents(id, 100)).some((e) => e.kind === 'request.expired'));
      });
    });

    describe('mail that fails later, automatic reminders', () => {
      it('a temporary refusal is queued (not a failure yet), retried after 1, 5, 15, 60 minutes and 4 hours, then failed visibly', async () => {
        const ok = addr();
        const r = await request([{ email: 'greylist-bb@example.test', name: 'Grey' }, { email: ok, name: 'Olle' }]);
        assert.deepEqual(r.invitation_failures, [], 'a queued invitation is not a failure');
        assert.equal(r.recipients[0].invitation, 'queued');
        assert.equal(typeof r.recipients[0].invitation_error, 'string');
        assert.equal(r.recipients[0].invited_at, null);
        for (const wait of [60_000, 5 * 60_000, 15 * 60_000, 60 * 60_000]) {
          svc.clock.advance(wait);
          await runJobs(svc);
          const read = await get(r.signing_request_id);
          assert.equal(read.body.recipients[0].invitation, 'queued', `still queued after ${wait / 60_000} min`);
          assert.deepEqual(read.body.invitation_failures, []);
        }
        svc.clock.advance(4 * HOUR);
        await runJobs(svc);
        const read = await get(r.signing_request_id);
        assert.equal(read.body.recipients[0].invitation, 'failed');
        assert.deepEqual(read.body.invitation_failures, ['greylist-bb@example.test']);
        assert.equal(read.body.status, 'pending', 'the request still exists');
        const events = await allEvents(r.signing_request_id, 100);
        assert.ok(events.some((e) => e.kind === 'invitation.failed' && e.recipient?.email === 'greylist-bb@example.test'), 'never silently');
        assert.equal(smtp.to(ok).length, 1);
      });

      it('automatic reminders every reminder_interval_days reach only signers who have not signed, at most 3 each', async () => {
        const a = addr();
        const b = addr();
        const r = await request([{ email: a, name: 'Anna' }, { email: b, name: 'Bert' }], { reminder_interval_days: 1, deadline_at: svc.clock.now() + 20 * DAY });
        assert.equal(r.reminder_interval_days, 1);
        await signAs(a, 'Anna');
        await svc.jobs.scheduleRecurring();
        for (let d = 0; d < 8; d++) {
          svc.clock.advance(DAY);
          await runJobs(svc);
        }
        assert.equal(smtp.to(a).length, 1, 'the signer who signed gets no reminder');
        assert.equal(smtp.to(b).length, 4, 'the invitation and 3 reminders');
        assert.equal((await get(r.signing_request_id)).body.status, 'pending');
      });
    });

    describe('deadlines on the fake clock', () => {
      it('an extended deadline outlives the old one (links keep working); a shortened one expires the request at the new time', async () => {
        await svc.jobs.scheduleRecurring();
        const a = addr();
        const longer = await request([{ email: a, name: 'Anna' }], { deadline_at: svc.clock.now() + 2 * HOUR });
        const b = addr();
        const shorter = await request([{ email: b, name: 'Bert' }], { deadline_at: svc.clock.now() + 10 * DAY });
        assert.equal((await call('signing.UpdateSigningDeadline', { signing_request_id: longer.signing_request_id, deadline_at: svc.clock.now() + 5 * DAY })).status, 200);
        assert.equal((await call('signing.UpdateSigningDeadline', { signing_request_id: shorter.signing_request_id, deadline_at: svc.clock.now() + 90 * 60_000 })).status, 200);
        svc.clock.advance(3 * HOUR);
        await runJobs(svc);
        assert.equal((await get(longer.signing_request_id)).body.status, 'pending', 'not expired at the old deadline');
        const late = await get(shorter.signing_request_id);
        assert.equal(late.body.status, 'expired', 'expired at the new deadline');
        const dead = await fetch(`${svc.origin}${linkOf(b)}`);
        await dead.arrayBuffer();
        assert.equal(dead.status, 410);
        await signAs(a, 'Anna');
        assert.equal((await get(longer.signing_request_id)).body.status, 'completed', 'the old link still signs');
      });

      it('once the deadline has passed, before the expiry job runs, the request reads expired (since the deadline) and a deadline change is refused; the link stays dead', async () => {
        const a = addr();
        const deadline = svc.clock.now() + HOUR + 60_000;
        const r = await request([{ email: a, name: 'Anna' }], { deadline_at: deadline });
        svc.clock.advance(HOUR + 2 * 60_000); // past the deadline; the recurring job has not run yet
        const dead = await fetch(`${svc.origin}${linkOf(a)}`);
        await dead.arrayBuffer();
        assert.equal(dead.status, 410, 'the link died at the deadline');
        const read = await get(r.signing_request_id);
        assert.equal(read.body.status, 'expired', 'SigningRequest.yaml: expired = the deadline passed first; only pending moves');
        assert.equal(read.body.expired_at, deadline);
        refused(await call('signing.UpdateSigningDeadline', { signing_request_id: r.signing_request_id, deadline_at: svc.clock.now() + 5 * DAY }), 409, 'conflict');
        const after = await fetch(`${svc.origin}${linkOf(a)}`);
        await after.arrayBuffer();
        assert.equal(after.status, 410, 'a dead link stays dead');
        const again = await get(r.signing_request_id);
        assert.equal(again.body.status, 'expired');
        assert.equal(again.body.expired_at, deadline);
      });
    });

    describe('a configured ClamAV daemon that does not answer', () => {
      let scanned: TestService;
      let key: string;
      before(async () => {
        scanned = await startTestService(database.url(), { env: { CLAMAV_URL: `tcp://127.0.0.1:${await freePort()}` } });
        const spec = acme();
        spec.keys!.docs = { name: 'Documents', operations: ['documents.*'] };
        key = (await scanned.apply(spec)).keys.docs!.secret;
      });
      after(async () => {
        await scanned?.close();
      });
      it('CompleteUpload answers 503 unavailable and nothing changes: the upload stays open with its part', async () => {
        const op = (name: string, body: object, idem: string = crypto.randomUUID()) =>
          fetch(`${scanned.baseUrl}/operations/${name}`, {
            method: 'POST',
            headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}`, 'Idempotency-Key': idem },
            body: JSON.stringify(body),
          }).then(async (r) => ({ status: r.status, body: await r.json(), headers: r.headers }));
        const created = await op('documents.CreateUpload', { filename: 'a.pdf', content_type: 'application/pdf', size: pdf.length });
        const url = await op('documents.GetUploadPart', { upload_id: created.body.upload_id, part_number: 1 });
        const stored = await fetch(`${scanned.origin}${new URL(url.body.url).pathname}`, { method: 'PUT', body: pdf as unknown as BodyInit });
        assert.equal(stored.status, 200, await stored.text());
        const done = await op('documents.CompleteUpload', { upload_id: created.body.upload_id }, 'bb-clamav-retry');
        refused(done, 503, 'unavailable', 'ClamAV down');
        const retry = await op('documents.CompleteUpload', { upload_id: created.body.upload_id }, 'bb-clamav-retry');
        refused(retry, 503, 'unavailable', 'a retry with the same key tries again');
        assert.equal(retry.headers.get('idempotency-replayed'), null, 'a 503 is not a stored answer');
        const read = await op('documents.GetUpload', { upload_id: created.body.upload_id });
        assert.equal(read.body.state, 'open');
        assert.equal(read.body.parts[0].received, true);
        assert.equal(read.body.file_id, null);
      });
    });

    describe('rate limits (seed 5.6: shared per credential and workspace, changing members does not reset them)', () => {
      let limited: TestService;
      let lws: ApplyResult;
      before(async () => {
        limited = await startTestService(database.url(), { rateLimitPerSecond: 0.001, rateLimitBurst: 3 });
        const spec = acme();
        spec.keys!.docs = { name: 'Documents', operations: ['documents.*'], delegation: 'all' };
        spec.keys!.second = { name: 'Second', operations: ['documents.*'] };
        lws = await limited.apply(spec);
      });
      after(async () => {
        await limited?.close();
      });
      it('three calls as Ada, then Olga with the same key is 429 rate_limited with Retry-After; another key still answers', async () => {
        const at = (actAs?: string, key = lws.keys.docs!.secret) =>
          fetch(`${limited.baseUrl}/operations/documents.ListDocuments`, {
            method: 'POST',
            headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}`, ...(actAs ? { 'Service-Act-As': actAs } : {}) },
            body: JSON.stringify({ scope: 'user' }),
          });
        for (let i = 0; i < 3; i++) assert.equal((await at(lws.members.ada!)).status, 200);
        const res = await at(lws.members.olga!);
        assert.equal(res.status, 429);
        assert.ok(Number(res.headers.get('retry-after')) >= 1, `Retry-After ${res.headers.get('retry-after')}`);
        const body = await res.json();
        assert.equal(body.error, 'rate_limited');
        assert.equal(typeof body.message, 'string');
        const other = await fetch(`${limited.baseUrl}/operations/documents.ListDocuments`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${lws.keys.second!.secret}` },
          body: JSON.stringify({ scope: 'workspace' }),
        });
        assert.equal(other.status, 200, 'another credential has its own budget');
      });
    });

    // ---------------------------------------------------------------- history, documents, visibility

  });
}
