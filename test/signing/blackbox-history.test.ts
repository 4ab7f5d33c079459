/**
 * Black box of documents.* and signing.*: history, documents and visibility (events, downloads, odd text
 * and headers, decline, concurrency). One of the files split from one suite; the shared setup is
 * blackboxKit.ts. Written from the seed (sections 2.5, 3, 4.7-4.12, 5) and the OpenAPI document only:
 * every call goes over HTTP, the mail through a real SMTP server; the service's code and tables are never
 * touched.
 */
import assert from 'node:assert/strict';
import type { ApplyResult } from '../../server/admin.ts';
import { databases, type TestService } from '../support/service.ts';
import type { MailServer } from './requestSupport.ts';
import { onService, samplePdf } from './signerKit.ts';
import { HOUR, DAY, sha, shape, documented, refused, blackboxService } from './blackboxKit.ts';

for (const database of databases) {
  describe(`documents and signing, black box [${database.name}]`, function () {
    this.timeout(60_000);
    const kit = blackboxService(database);
    const { secret, call, put, partUrl, upload, fileId, addr, request, linkOf, form, signAs, get, allEvents } = kit;
    let smtp: MailServer;
    let svc: TestService;
    let ws: ApplyResult;
    let foreign: ApplyResult;
    let pdf: Buffer;
    before(() => ({ smtp, svc, ws, foreign, pdf } = kit.state()));

    describe('history, documents and visibility', () => {
      it('ListSigningEvents pages oldest first with stable event_ids; a new poll repeats them; tampered cursors are 400', async () => {
        const a = addr();
        const b = addr();
        const r = await request([{ email: a, name: 'Anna' }, { email: b, name: 'Bert' }]);
        const id = r.signing_request_id;
        await signAs(a, 'Anna');
        svc.clock.advance(HOUR);
        await call('signing.RemindSigners', { signing_request_id: id });
        await call('signing.UpdateSigningDeadline', { signing_request_id: id, deadline_at: svc.clock.now() + 10 * DAY });
        const one = await allEvents(id, 1);
        const two = await allEvents(id, 3);
        const all = await allEvents(id, 100);
        for (const e of all) {
          documented(e, 'SigningEvent', 'event');
        }
        assert.deepEqual(one.map((e) => e.event_id), all.map((e) => e.event_id), 'the same events by pages of 1');
        assert.deepEqual(two.map((e) => e.event_id), all.map((e) => e.event_id), 'and of 3');
        assert.equal(new Set(all.map((e) => e.event_id)).size, all.length, 'ids are unique');
        assert.deepEqual(one, all, 'a new poll answers the same events');
        const times = all.map((e) => e.occurred_at);
        assert.deepEqual(times, [...times].sort((x, y) => x - y), 'oldest first');
        assert.deepEqual(all.map((e) => e.kind).slice(0, 3), ['request.created', 'invitation.sent', 'invitation.sent']);
        for (const k of ['recipient.opened', 'recipient.signed', 'reminder.sent', 'deadline.changed']) assert.ok(all.some((e) => e.kind === k), k);
        const text = JSON.stringify(all);
        assert.doesNotMatch(text, /127\.0\.0\.1|::1|\/sign\/|node|undici/i, 'no IP address, link or user agent');

        const first = await call('signing.ListSigningEvents', { signing_request_id: id, limit: 2 });
        const cursor: string = first.body.next_cursor;
        const flip = (s: string, i: number) => s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1);
        for (const [what, c] of [['last character changed', flip(cursor, cursor.length - 1)], ['first character changed', flip(cursor, 0)], ['truncated', cursor.slice(0, -3)], ['made up', 'eyJ4IjoxfQ.abc'], ['non-ASCII', '✓'.repeat(10)]]) {
          refused(await call('signing.ListSigningEvents', { signing_request_id: id, limit: 2, cursor: c }), 400, 'invalid_input', what);
        }
        const other = await request([{ email: addr(), name: 'Other' }]);
        refused(await call('signing.ListSigningEvents', { signing_request_id: other.signing_request_id, limit: 2, cursor }), 400, 'invalid_input', 'a cursor of another request');
        for (const [what, body] of [['limit 0', { signing_request_id: id, limit: 0 }], ['limit 101', { signing_request_id: id, limit: 101 }], ['limit -1', { signing_request_id: id, limit: -1 }], ['id a number', { signing_request_id: 12 }], ['id null', { signing_request_id: null }]] as Array<[string, object]>) {
          refused(await call('signing.ListSigningEvents', body), 400, 'invalid_input', what);
        }
        // Every page re-checks access: another key holding the cursor gets 404.
        refused(await call('signing.ListSigningEvents', { signing_request_id: id, limit: 2, cursor }, { key: secret('twin') }), 404, 'not_found', 'another key with the cursor');
      });

      it('GetSigningDocument original: byte-identical to the upload; its URL expires on the fake clock; HEAD works; bad versions 400', async () => {
        const bytes = Buffer.from(await samplePdf('Byte identical', 3));
        const done = await upload(bytes, { filename: 'Byte identical.pdf' });
        assert.equal(done.status, 200);
        const r = await request([{ email: addr(), name: 'Anna' }], { file_id: done.body.file_id });
        const link = await call('signing.GetSigningDocument', { signing_request_id: r.signing_request_id, version: 'original' });
        assert.equal(link.status, 200, JSON.stringify(link.body));
        shape(link.body, { signing_request_id: 'string', version: 'string', url: 'string', filename: 'string', expires_at: 'integer', sha256: 'string', size: 'integer' }, 'document link');
        assert.equal(link.body.version, 'original');
        assert.equal(link.body.sha256, sha(bytes));
        assert.equal(link.body.size, bytes.length);
        assert.equal(link.body.filename, 'Byte identical.pdf');
        assert.equal(link.body.expires_at, svc.clock.now() + 15 * 60_000);
        const url = onService(link.body.url, svc.origin);
        const head = await fetch(url, { method: 'HEAD' });
        assert.equal(head.status, 200);
        const got = await fetch(url);
        assert.equal(got.status, 200);
        assert.match(got.headers.get('content-disposition') ?? '', /attachment/);
        const downloaded = Buffer.from(await got.arrayBuffer());
        assert.equal(Buffer.compare(downloaded, bytes), 0, 'byte-identical');
        refused(await call('signing.GetSigningDocument', { signing_request_id: r.signing_request_id, version: 'signed' }), 409, 'conflict', 'signed while pending');
        for (const v of ['Original', 'draft', '', 1, null]) refused(await call('signing.GetSigningDocument', { signing_request_id: r.signing_request_id, version: v }), 400, 'invalid_input', `version ${String(v)}`);
        refused(await call('signing.GetSigningDocument', { signing_request_id: r.signing_request_id }), 400, 'invalid_input', 'no version');
        svc.clock.advance(15 * 60_000 + 1);
        const late = await fetch(url);
        await late.arrayBuffer();
        assert.ok(late.status >= 400 && late.status < 500, `an expired download link is refused (got ${late.status})`);
        const tampered = await fetch(url.replace(/.$/, (c) => (c === 'A' ? 'B' : 'A')));
        await tampered.arrayBuffer();
        assert.ok(tampered.status >= 400 && tampered.status < 500, `a changed download link is refused (got ${tampered.status})`);
        const fresh = await call('signing.GetSigningDocument', { signing_request_id: r.signing_request_id, version: 'original' });
        const again = Buffer.from(await (await fetch(onService(fresh.body.url, svc.origin))).arrayBuffer());
        assert.equal(sha(again), sha(bytes), 'a fresh link works');
      });

      it('visibility: 404 for other keys, other workspaces and members who may not see; private requests only to owner and member recipients', async () => {
        const { ada, olga, cleo, bob } = ws.members;
        // A key's own request: another key of the workspace and a foreign key see nothing.
        const mine = await request([{ email: addr(), name: 'Anna' }]);
        for (const [what, o] of [['twin key', { key: secret('twin') }], ['foreign key', { key: foreign.keys.sender!.secret }]] as Array<[string, { key: string }]>) {
          for (const [op, body] of [
            ['signing.GetSigningRequest', { signing_request_id: mine.signing_request_id }],
            ['signing.ListSigningEvents', { signing_request_id: mine.signing_request_id }],
            ['signing.GetSigningDocument', { signing_request_id: mine.signing_request_id, version: 'original' }],
            ['signing.CancelSigningRequest', { signing_request_id: mine.signing_request_id }],
            ['signing.RemindSigners', { signing_request_id: mine.signing_request_id }],
            ['signing.UpdateSigningDeadline', { signing_request_id: mine.signing_request_id, deadline_at: svc.clock.now() + DAY }],
          ] as Array<[string, object]>) {
            refused(await call(op, body, o), 404, 'not_found', `${op} ${what}`);
          }
        }
        // A private request of Ada's file, to Cleo (a member) and an outsider.
        const adaFile = await fileId({ actAs: ada });
        const priv = await request([{ email: 'cleo@acme.test', name: 'Cleo' }, { email: addr(), name: 'Out' }], { file_id: adaFile }, { actAs: ada });
        assert.equal(priv.private, true);
        const id = priv.signing_request_id;
        assert.equal((await get(id, { actAs: ada })).status, 200, 'its owner');
        assert.equal((await get(id, { actAs: cleo })).status, 200, 'a member recipient');
        refused(await get(id), 404, 'not_found', 'the key without a member');
        refused(await get(id, { actAs: olga }), 404, 'not_found', 'the owner of the workspace');
        refused(await get(id, { actAs: bob }), 404, 'not_found', 'an admin');
        // Requests are seen with the member's signing access (seed 4.8), whichever key acts for them.
        assert.equal((await get(id, { key: secret('twin'), actAs: ada })).status, 200, 'another key acting for the owner');
        refused(await get(id, { key: foreign.keys.sender!.secret, actAs: foreign.members.ada! }), 404, 'not_found', 'a member of another workspace');
        // The recipient reads but may not manage.
        refused(await call('signing.CancelSigningRequest', { signing_request_id: id }, { actAs: cleo }), 403, 'forbidden', 'recipient cancels');
        refused(await call('signing.UpdateSigningDeadline', { signing_request_id: id, deadline_at: svc.clock.now() + DAY }, { actAs: cleo }), 403, 'forbidden', 'recipient moves the deadline');
        assert.equal((await call('signing.ListSigningEvents', { signing_request_id: id }, { actAs: cleo })).status, 200);
        // A request of the workspace file sent for Ada: the owner and admin (for themselves) see it, another member does not.
        const wsFile = await fileId();
        const shared = await request([{ email: addr(), name: 'Anna' }], { file_id: wsFile }, { actAs: ada });
        assert.equal(shared.private, false);
        assert.equal((await get(shared.signing_request_id, { actAs: olga })).status, 200, 'an owner');
        assert.equal((await get(shared.signing_request_id, { actAs: bob })).status, 200, 'an admin');
        refused(await get(shared.signing_request_id, { actAs: cleo }), 404, 'not_found', 'another member');
        assert.equal((await get(shared.signing_request_id)).status, 200, 'the key that created it, without a member');
        refused(await get(shared.signing_request_id, { key: secret('twin') }), 404, 'not_found', 'another key without a member');
        // A request of the key (no member) to Cleo: Cleo reads it but may not manage it; the owner manages it; Ada sees nothing.
        const keyMade = await request([{ email: 'cleo@acme.test', name: 'Cleo' }], { file_id: wsFile });
        const kid = keyMade.signing_request_id;
        assert.equal((await get(kid, { actAs: cleo })).status, 200, 'a recipient member');
        refused(await call('signing.RemindSigners', { signing_request_id: kid }, { actAs: cleo }), 403, 'forbidden', 'recipient reminds');
        refused(await get(kid, { actAs: ada }), 404, 'not_found', 'an unrelated member');
        refused(await call('signing.CancelSigningRequest', { signing_request_id: kid }, { actAs: ada }), 404, 'not_found', 'an unrelated member cancels');
        const byOwner = await call('signing.UpdateSigningDeadline', { signing_request_id: kid, deadline_at: svc.clock.now() + 9 * DAY }, { actAs: olga });
        assert.equal(byOwner.status, 200, `an owner acting for herself manages it: ${JSON.stringify(byOwner.body)}`);
        const byAdmin = await call('signing.CancelSigningRequest', { signing_request_id: kid }, { actAs: bob });
        assert.equal(byAdmin.status, 200, `an admin cancels it: ${JSON.stringify(byAdmin.body)}`);
      });

      it('odd but allowed text (unicode, quotes, line breaks) in filenames, titles and names: downloads, mails and the page work, nothing 500', async () => {
        const filename = 'Avtal "Q1"; v2 – åäö 契約 📄.pdf';
        const done = await upload(pdf, { filename });
        assert.equal(done.status, 200, JSON.stringify(done.body));
        assert.equal(done.body.filename, filename);
        const a = addr();
        const res = await call('signing.RequestFileSignatures', {
          file_id: done.body.file_id,
          title: 'Line one\r\nBcc: evil@attacker.test',
          message: '<script>alert(1)</script>\r\n\u0000',
          signers: [{ email: a, name: 'Zoë "Z" O\'Brien\r\nX-Injected: 1' }],
        });
        assert.ok(res.status === 200 || res.status === 400, `${res.status} ${JSON.stringify(res.body)}`);
        assert.equal(smtp.to('evil@attacker.test').length, 0, 'no header injection');
        if (res.status === 200) {
          const mail = smtp.to(a).at(-1)!.mail;
          assert.equal(mail.headers.get('x-injected'), undefined, 'no header injection from the name');
          assert.doesNotMatch(String(mail.html), /<script>alert/, 'the message is escaped in HTML');
          const page = await fetch(`${svc.origin}${linkOf(a)}`);
          assert.equal(page.status, 200);
          assert.doesNotMatch(await page.text(), /<script>alert/);
        }
        const r = await request([{ email: addr(), name: 'Ünïcødé Nämé 山田' }], { file_id: done.body.file_id });
        const link = await call('signing.GetSigningDocument', { signing_request_id: r.signing_request_id, version: 'original' });
        assert.equal(link.status, 200);
        assert.equal(link.body.filename, filename);
        const got = await fetch(onService(link.body.url, svc.origin));
        assert.equal(got.status, 200);
        const disposition = got.headers.get('content-disposition') ?? '';
        assert.match(disposition, /^attachment/);
        assert.equal(sha(Buffer.from(await got.arrayBuffer())), sha(pdf));
        // Odd addresses: refused or accepted, never 500.
        for (const email of ['a@b.c\r\nRCPT TO:<evil@attacker.test>', 'ü@exämple.test', '"quoted"@example.test', 'a@[127.0.0.1]', `${'l'.repeat(64)}@${'d'.repeat(250)}.test`, 'a@b', '@example.test', 'a@@example.test']) {
          const odd = await call('signing.RequestFileSignatures', { file_id: done.body.file_id, signers: [{ email, name: 'Odd' }] });
          assert.ok(odd.status === 200 || odd.status === 400, `${JSON.stringify(email)}: ${odd.status} ${JSON.stringify(odd.body)}`);
          if (odd.status === 400) refused(odd, 400, 'invalid_input', email);
        }
        assert.equal(smtp.to('evil@attacker.test').length, 0, 'no SMTP command injection');
      });

      it('headers and URLs: a query parameter 400, odd Service-Act-As and Idempotency-Key values 400/403, one key on two operations', async () => {
        const res = await fetch(`${svc.baseUrl}/operations/documents.ListDocuments?scope=user`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${secret('sender')}` },
          body: JSON.stringify({ scope: 'workspace' }),
        });
        assert.equal(res.status, 400);
        assert.equal((await res.json()).error, 'invalid_input');
        for (const actAs of ['x'.repeat(65), 'ü', `${ws.members.ada}x`, 'mb_' + 'é'.repeat(20)]) {
          const r = await call('documents.ListDocuments', { scope: 'user' }, { actAs });
          assert.ok(r.status === 400 || r.status === 403, `${JSON.stringify(actAs)}: ${r.status} ${JSON.stringify(r.body)}`);
          refused(r, r.status, r.status === 400 ? 'invalid_input' : 'forbidden', JSON.stringify(actAs));
        }
        const r = await request([{ email: addr(), name: 'Anna' }]);
        svc.clock.advance(HOUR);
        const key = `bb-shared-${r.signing_request_id}`;
        assert.equal((await call('signing.RemindSigners', { signing_request_id: r.signing_request_id }, { idem: key })).status, 200);
        const other = await call('signing.CancelSigningRequest', { signing_request_id: r.signing_request_id }, { idem: key });
        assert.ok(other.status === 400 || other.status === 200, `the same key on another operation: ${other.status} ${JSON.stringify(other.body)}`);
        if (other.status === 400) refused(other, 400, 'invalid_input');
        else assert.equal(other.body.status, 'cancelled', 'a separate action when receipts are per operation');
      });

      it('a decline through the page ends the request cancelled "declined by <name>"; the original still downloads, signed is 409', async () => {
        const a = addr();
        const b = addr();
        const r = await request([{ email: a, name: 'Anna' }, { email: b, name: 'Bert' }]);
        const id = r.signing_request_id;
        await signAs(a, 'Anna');
        const path = linkOf(b);
        assert.equal(await form(`${path}/open`, {}), 303);
        assert.equal(await form(`${path}/decline`, { reason: 'Wrong amount — fel belopp' }), 303);
        const read = await get(id);
        assert.equal(read.body.status, 'cancelled');
        assert.equal(read.body.cancel_reason, 'declined by Bert');
        assert.equal(read.body.recipients[1].status, 'declined');
        assert.equal(read.body.recipients[1].decline_reason, 'Wrong amount — fel belopp');
        assert.equal(read.body.recipients[0].status, 'signed', 'the signature given stays');
        refused(await call('signing.CancelSigningRequest', { signing_request_id: id }), 409, 'conflict', 'cancel declined');
        refused(await call('signing.GetSigningDocument', { signing_request_id: id, version: 'signed' }), 409, 'conflict', 'signed of a declined request');
        assert.equal((await call('signing.GetSigningDocument', { signing_request_id: id, version: 'original' })).status, 200);
        const events = await allEvents(id, 100);
        const declined = events.find((e) => e.kind === 'recipient.declined');
        assert.equal(declined?.data.reason, 'Wrong amount — fel belopp');
        assert.equal(events.at(-1)!.kind, 'request.cancelled');
      });

      it('concurrency: the same Idempotency-Key sent 5 times at once makes one request and one mail; 5 completions at once make one file', async () => {
        const file = await fileId();
        const a = addr('race');
        const body = { file_id: file, signers: [{ email: a, name: 'Race' }] };
        const answers = await Promise.all(Array.from({ length: 5 }, () => call('signing.RequestFileSignatures', body, { idem: `bb-race-${a}` })));
        for (const r of answers) assert.ok(r.status === 200 || r.status === 409, `${r.status} ${JSON.stringify(r.body)}`);
        const ids = new Set(answers.filter((r) => r.status === 200).map((r) => r.body.signing_request_id));
        assert.equal(ids.size, 1, 'one request');
        assert.equal(smtp.to(a).length, 1, 'one mail');
        const created = await call('documents.CreateUpload', { filename: 'race.pdf', content_type: 'application/pdf', size: pdf.length });
        assert.equal((await put(await partUrl(created.body.upload_id, 1), pdf)).status, 200);
        const done = await Promise.all(Array.from({ length: 5 }, () => call('documents.CompleteUpload', { upload_id: created.body.upload_id })));
        for (const d of done) assert.ok(d.status === 200, `${d.status} ${JSON.stringify(d.body)}`);
        assert.equal(new Set(done.map((d) => d.body.file_id)).size, 1, 'one file');
        // Parallel PUTs of the same part: one wins, the upload completes.
        const again = await call('documents.CreateUpload', { filename: 'race2.pdf', content_type: 'application/pdf', size: pdf.length });
        const url = await partUrl(again.body.upload_id, 1);
        const puts = await Promise.all(Array.from({ length: 5 }, () => put(url, pdf)));
        for (const r of puts) assert.equal(r.status, 200, JSON.stringify(r.body));
        assert.equal((await call('documents.CompleteUpload', { upload_id: again.body.upload_id })).status, 200);
        // A PUT racing a completion: stored before it (200) or refused after it (409), never 500; the file is the upload's bytes.
        const third = await call('documents.CreateUpload', { filename: 'race3.pdf', content_type: 'application/pdf', size: pdf.length });
        const url3 = await partUrl(third.body.upload_id, 1);
        assert.equal((await put(url3, pdf)).status, 200);
        const [c, p] = await Promise.all([call('documents.CompleteUpload', { upload_id: third.body.upload_id }), put(url3, pdf)]);
        assert.equal(c.status, 200, JSON.stringify(c.body));
        assert.ok(p.status === 200 || p.status === 409, `${p.status} ${JSON.stringify(p.body)}`);
        assert.equal(c.body.sha256, sha(pdf));
      });
    });
  });
}
