/**
 * Black box of documents.* and signing.*: ListDocuments, keys and grants, and
 * signing.RequestFileSignatures. One of the files split from one suite; the shared setup is
 * blackboxKit.ts. Written from the seed (sections 2.5, 3, 4.7-4.12, 5) and the OpenAPI document only:
 * every call goes over HTTP, the mail through a real SMTP server; the service's code and tables are never
 * touched.
 */
import assert from 'node:assert/strict';
import type { ApplyResult } from '../../server/admin.ts';
import { databases, type TestService } from '../support/service.ts';
import type { MailServer } from './requestSupport.ts';
import { HOUR, DAY, shape, documented, refused, blackboxService } from './blackboxKit.ts';

for (const database of databases) {
  describe(`documents and signing, black box [${database.name}]`, function () {
    this.timeout(60_000);
    const kit = blackboxService(database);
    const { secret, call, fileId, addr, request, get, allEvents } = kit;
    let smtp: MailServer;
    let svc: TestService;
    let ws: ApplyResult;
    let foreign: ApplyResult;
    before(() => ({ smtp, svc, ws, foreign } = kit.state()));

    describe('documents.ListDocuments', () => {
      it('scope user needs Service-Act-As (400 without); each member sees only their own files; workspace lists no private file', async () => {
        const { ada, olga } = ws.members;
        refused(await call('documents.ListDocuments', { scope: 'user' }), 400, 'invalid_input', 'user without a member');
        const adaFile = await fileId({ actAs: ada });
        const olgaFile = await fileId({ actAs: olga });
        const wsFile = await fileId();
        const list = async (scope: string, o: { actAs?: string; key?: string } = {}) => {
          const ids: string[] = [];
          let cursor: string | undefined;
          for (;;) {
            const page = await call('documents.ListDocuments', { scope, limit: 2, ...(cursor ? { cursor } : {}) }, o);
            assert.equal(page.status, 200, JSON.stringify(page.body));
            shape(page.body, { items: 'array', next_cursor: 'string|null', has_more: 'boolean' }, 'documents page');
            for (const f of page.body.items) documented(f, 'DocumentFile', 'listed file');
            ids.push(...page.body.items.map((f: { file_id: string }) => f.file_id));
            if (!page.body.has_more) return ids;
            cursor = page.body.next_cursor;
          }
        };
        const adaList = await list('user', { actAs: ada });
        assert.ok(adaList.includes(adaFile));
        assert.ok(!adaList.includes(olgaFile) && !adaList.includes(wsFile));
        const olgaList = await list('user', { actAs: olga });
        assert.ok(olgaList.includes(olgaFile) && !olgaList.includes(adaFile));
        const wsList = await list('workspace');
        assert.ok(wsList.includes(wsFile));
        assert.ok(!wsList.includes(adaFile) && !wsList.includes(olgaFile));
        assert.equal(new Set(wsList).size, wsList.length, 'no file twice across pages');
        const wsAsAda = await list('workspace', { actAs: ada });
        assert.ok(wsAsAda.includes(wsFile) && !wsAsAda.includes(olgaFile));
        const foreignList = await list('workspace', { key: foreign.keys.sender!.secret });
        assert.ok(!foreignList.includes(wsFile), 'another workspace never sees it');
      });

      it('refuses bad scope, limit and cursors with 400 (a tampered cursor, one of another scope)', async () => {
        for (const [what, body] of [
          ['no scope', {}],
          ['scope other', { scope: 'everyone' }],
          ['limit 0', { scope: 'workspace', limit: 0 }],
          ['limit 101', { scope: 'workspace', limit: 101 }],
          ['limit "5"', { scope: 'workspace', limit: '5' }],
          ['empty cursor', { scope: 'workspace', cursor: '' }],
          ['made-up cursor', { scope: 'workspace', cursor: 'not-a-cursor' }],
          ['huge cursor', { scope: 'workspace', cursor: 'x'.repeat(20_000) }],
        ] as Array<[string, object]>) {
          refused(await call('documents.ListDocuments', body), 400, 'invalid_input', what);
        }
        await fileId();
        await fileId();
        const page = await call('documents.ListDocuments', { scope: 'workspace', limit: 1 });
        assert.equal(page.body.has_more, true);
        const cursor: string = page.body.next_cursor;
        const flipped = cursor.slice(0, -2) + (cursor.at(-2) === 'a' ? 'b' : 'a') + cursor.at(-1);
        refused(await call('documents.ListDocuments', { scope: 'workspace', limit: 1, cursor: flipped }), 400, 'invalid_input', 'tampered cursor');
        refused(await call('documents.ListDocuments', { scope: 'user', limit: 1, cursor }, { actAs: ws.members.ada! }), 400, 'invalid_input', 'cursor of another scope');
        const sr = await request([{ email: addr(), name: 'Cursor' }]);
        refused(await call('signing.ListSigningEvents', { signing_request_id: sr.signing_request_id, cursor }), 400, 'invalid_input', 'cursor of another operation');
      });
    });

    // ---------------------------------------------------------------- authentication and delegation

    describe('keys, grants and Service-Act-As', () => {
      it('401 invalid_key without or with a wrong key, 403 forbidden without the grant or for a member the key may not act for', async () => {
        const ops: Array<[string, object]> = [
          ['documents.CreateUpload', { filename: 'a.pdf', content_type: 'application/pdf', size: 10 }],
          ['documents.ListDocuments', { scope: 'workspace' }],
          ['signing.GetSigningRequest', { signing_request_id: 'sr_x' }],
          ['signing.RequestFileSignatures', { file_id: 'file_x', signers: [{ email: 'a@example.test', name: 'A' }] }],
          ['signing.ListSigningEvents', { signing_request_id: 'sr_x' }],
        ];
        for (const [op, body] of ops) {
          const none = await call(op, body, { key: null });
          refused(none, 401, 'invalid_key', `${op} no key`);
          assert.ok(none.headers.get('www-authenticate'), 'a challenge with every 401');
          refused(await call(op, body, { key: 'wsk_not_a_real_key' }), 401, 'invalid_key', `${op} wrong key`);
          refused(await call(op, body, { key: secret('bare') }), 403, 'forbidden', `${op} key without grants`);
          refused(await call(op, body, { actAs: ws.members.max! }), 403, 'forbidden', `${op} a disabled member`);
          refused(await call(op, body, { actAs: foreign.members.ada! }), 403, 'forbidden', `${op} a member of another workspace`);
          refused(await call(op, body, { actAs: 'mem_nobody' }), 403, 'forbidden', `${op} an unknown member`);
          refused(await call(op, body, { actAs: 'ada@acme.test' }), 403, 'forbidden', `${op} an e-mail address is never an id`);
        }
        refused(await call('signing.GetSigningRequest', { signing_request_id: 'sr_x' }, { key: secret('docsOnly') }), 403, 'forbidden', 'documents key on signing');
        refused(await call('documents.ListDocuments', { scope: 'workspace' }, { key: secret('signOnly') }), 403, 'forbidden', 'signing key on documents');
        refused(await call('signing.GetSigningRequest', { signing_request_id: 'sr_x' }, { key: secret('signOnly'), actAs: ws.members.ada! }), 403, 'forbidden', 'key without delegation');
        refused(await call('documents.ListDocuments', { scope: 'workspace' }, { key: secret('ci'), actAs: ws.members.ada! }), 403, 'forbidden', 'delegating key without the grant');
        refused(await call('documents.ListDocuments', { scope: 'user' }, { key: secret('forAda'), actAs: ws.members.bob! }), 403, 'forbidden', 'a member outside the key\'s delegation');
        refused(await call('signing.GetSigningRequest', { signing_request_id: 'sr_x' }, { key: secret('forAda'), actAs: ws.members.olga! }), 403, 'forbidden', 'a member outside the key\'s delegation');
        assert.equal((await call('documents.ListDocuments', { scope: 'user' }, { key: secret('forAda'), actAs: ws.members.ada! })).status, 200);
        const foreignFile = await fileId({ key: foreign.keys.sender!.secret });
        refused(await call('signing.VerifySignedDocument', { file_id: foreignFile }), 404, 'not_found', 'verify a file of another workspace');
      });
    });

    // ---------------------------------------------------------------- signing requests

    describe('signing.RequestFileSignatures', () => {
      it('answers the whole request, flat: signing_request_id, status pending, invitation_failures [], file_id null, each recipient pending', async () => {
        const file = await fileId();
        const a = addr();
        const b = addr();
        const res = await call('signing.RequestFileSignatures', { file_id: file, title: 'Åtagande 📄 契約', message: 'Hej!\nSign please.', signers: [{ email: a, name: 'Åsa Öberg' }, { email: b, name: 'Bo' }] });
        assert.equal(res.status, 200, JSON.stringify(res.body));
        documented(res.body, 'SigningRequest', 'request');
        for (const k of ['signing_request_id', 'status', 'invitation_failures', 'file_id']) assert.ok(k in res.body, `seed 2.5 names ${k}`);
        assert.throws(() => documented({ ...res.body, colour: 'red' }, 'SigningRequest', 'x'), 'the checker refuses an undeclared field');
        assert.throws(() => documented({ ...res.body, status: 'draft' }, 'SigningRequest', 'x'), 'and a value outside the enum');
        for (const r of res.body.recipients) documented(r, 'SigningRecipient', 'recipient');
        assert.match(res.body.signing_request_id, /^sr_/);
        assert.equal(res.body.status, 'pending');
        assert.deepEqual(res.body.invitation_failures, []);
        assert.equal(res.body.file_id, null);
        assert.equal(res.body.source_file_id, file);
        assert.equal(res.body.title, 'Åtagande 📄 契約');
        assert.equal(res.body.message, 'Hej!\nSign please.');
        assert.equal(res.body.signature_method, 'standard', 'standard by default');
        assert.equal(res.body.private, false);
        assert.equal(res.body.deadline_at, svc.clock.now() + 30 * DAY, 'default deadline 30 days');
        assert.equal(res.body.reminder_interval_days, null);
        assert.equal(res.body.created_at, svc.clock.now());
        for (const k of ['completed_at', 'cancelled_at', 'cancel_reason', 'expired_at']) assert.equal(res.body[k], null, k);
        assert.deepEqual(res.body.recipients.map((r: { email: string; name: string; status: string; invitation: string }) => [r.email, r.name, r.status, r.invitation]), [
          [a, 'Åsa Öberg', 'pending', 'sent'],
          [b, 'Bo', 'pending', 'sent'],
        ]);
        assert.equal(smtp.to(a).length, 1);
        assert.equal(smtp.to(b).length, 1);
        const read = await get(res.body.signing_request_id);
        assert.equal(read.status, 200);
        documented(read.body, 'SigningRequest', 'read request');
        assert.deepEqual(read.body, res.body, 'the read answers what the creation answered');
        // The title defaults to the file name without .pdf.
        const named = await call('signing.RequestFileSignatures', { file_id: file, signers: [{ email: addr(), name: 'N' }] });
        assert.equal(named.body.title, 'agreement');
      });

      it('refuses bad input with 400 invalid_input and the files it cannot use with 404, never 500', async () => {
        const file = await fileId();
        const s = [{ email: 'x@example.test', name: 'X' }];
        const now = svc.clock.now();
        const cases: Array<[string, object]> = [
          ['no signers', { file_id: file, signers: [] }],
          ['11 signers', { file_id: file, signers: Array.from({ length: 11 }, (_, i) => ({ email: `s${i}@example.test`, name: `S${i}` })) }],
          ['the same address twice, different case', { file_id: file, signers: [{ email: 'Dup@example.test', name: 'A' }, { email: 'dup@EXAMPLE.test', name: 'B' }] }],
          ['not an address', { file_id: file, signers: [{ email: 'not an address', name: 'A' }] }],
          ['a display name', { file_id: file, signers: [{ email: 'Ana <ana@example.test>', name: 'A' }] }],
          ['an empty name', { file_id: file, signers: [{ email: 'a@example.test', name: '' }] }],
          ['a 201-character name', { file_id: file, signers: [{ email: 'a@example.test', name: 'n'.repeat(201) }] }],
          ['a signer without name', { file_id: file, signers: [{ email: 'a@example.test' }] }],
          ['a signer with another field', { file_id: file, signers: [{ email: 'a@example.test', name: 'A', phone: '1' }] }],
          ['signers an object', { file_id: file, signers: { email: 'a@example.test', name: 'A' } }],
          ['a 201-character title', { file_id: file, signers: s, title: 't'.repeat(201) }],
          ['an empty title', { file_id: file, signers: s, title: '' }],
          ['a 2001-character message', { file_id: file, signers: s, message: 'm'.repeat(2001) }],
          ['a deadline under an hour', { file_id: file, signers: s, deadline_at: now + HOUR - 1000 }],
          ['a deadline in the past', { file_id: file, signers: s, deadline_at: now - DAY }],
          ['a negative deadline', { file_id: file, signers: s, deadline_at: -1 }],
          ['a deadline beyond 120 days', { file_id: file, signers: s, deadline_at: now + 121 * DAY }],
          ['a deadline as a string', { file_id: file, signers: s, deadline_at: String(now + DAY) }],
          ['a fractional deadline', { file_id: file, signers: s, deadline_at: now + DAY + 0.5 }],
          ['reminder every 0 days', { file_id: file, signers: s, reminder_interval_days: 0 }],
          ['reminder every 31 days', { file_id: file, signers: s, reminder_interval_days: 31 }],
          ['another method', { file_id: file, signers: s, signature_method: 'drawn' }],
          ['bankid without a provider', { file_id: file, signers: s, signature_method: 'bankid' }],
          ['file_id a number', { file_id: 5, signers: s }],
          ['file_id 41 characters', { file_id: `file_${'x'.repeat(36)}`, signers: s }],
          ['no file_id', { signers: s }],
          ['an unknown field', { file_id: file, signers: s, cc: ['a@example.test'] }],
        ];
        const before = smtp.mails.length;
        for (const [what, body] of cases) refused(await call('signing.RequestFileSignatures', body), 400, 'invalid_input', what);
        assert.equal(smtp.mails.length, before, 'no refusal sent a mail');
        // Exactly at the bounds is accepted.
        for (const more of [{ deadline_at: now + HOUR + 60_000 }, { deadline_at: now + 120 * DAY - 60_000 }, { message: 'm'.repeat(2000) }, { title: 't'.repeat(200) }]) {
          const ok = await call('signing.RequestFileSignatures', { file_id: file, signers: [{ email: addr(), name: 'Edge' }], ...more });
          assert.equal(ok.status, 200, `${JSON.stringify(more).slice(0, 80)}: ${JSON.stringify(ok.body)}`);
        }
        // Files it cannot use: unknown, another workspace's, a member's private file without acting for them, or for another member.
        const adaFile = await fileId({ actAs: ws.members.ada! });
        const foreignFile = await fileId({ key: foreign.keys.sender!.secret });
        refused(await call('signing.RequestFileSignatures', { file_id: 'file_unknown', signers: s }), 404, 'not_found', 'unknown file');
        refused(await call('signing.RequestFileSignatures', { file_id: foreignFile, signers: s }), 404, 'not_found', 'another workspace');
        refused(await call('signing.RequestFileSignatures', { file_id: adaFile, signers: s }), 404, 'not_found', 'a private file without the member');
        refused(await call('signing.RequestFileSignatures', { file_id: adaFile, signers: s }, { actAs: ws.members.olga! }), 404, 'not_found', "another member's private file");
        assert.equal(smtp.mails.length, before + 4, 'only the four accepted requests mailed');
      });

      it('idempotency: the same key replays (Idempotency-Replayed, no mail), another body with it is 400, a new key is a new request', async () => {
        const file = await fileId();
        const a = addr('idem');
        const body = { file_id: file, signers: [{ email: a, name: 'Ida' }] };
        const first = await call('signing.RequestFileSignatures', body, { idem: 'bb-sign-1' });
        assert.equal(first.status, 200);
        const again = await call('signing.RequestFileSignatures', body, { idem: 'bb-sign-1' });
        assert.equal(again.status, 200);
        assert.equal(again.headers.get('idempotency-replayed'), 'true');
        assert.equal(again.body.signing_request_id, first.body.signing_request_id);
        assert.equal(smtp.to(a).length, 1, 'no second mail');
        refused(await call('signing.RequestFileSignatures', { ...body, title: 'Changed' }, { idem: 'bb-sign-1' }), 400, 'invalid_input', 'same key, other body');
        const fresh = await call('signing.RequestFileSignatures', body, { idem: 'bb-sign-2' });
        assert.notEqual(fresh.body.signing_request_id, first.body.signing_request_id);
        assert.equal(smtp.to(a).length, 2);
        // A 404 is stored with its key too.
        const missing = { file_id: 'file_missing', signers: [{ email: addr(), name: 'M' }] };
        refused(await call('signing.RequestFileSignatures', missing, { idem: 'bb-sign-404' }), 404, 'not_found');
        const replay404 = await call('signing.RequestFileSignatures', missing, { idem: 'bb-sign-404' });
        refused(replay404, 404, 'not_found', 'replayed 404');
        assert.equal(replay404.headers.get('idempotency-replayed'), 'true');
      });

      it('an address the mail server refuses is in invitation_failures; the request exists and is pending', async () => {
        const ok = addr();
        const res = await request([{ email: 'refused-bb@example.test', name: 'Rolf' }, { email: ok, name: 'Olle' }]);
        assert.equal(res.status, 'pending');
        assert.deepEqual(res.invitation_failures, ['refused-bb@example.test']);
        assert.equal(res.recipients[0].invitation, 'failed');
        assert.equal(typeof res.recipients[0].invitation_error, 'string');
        const read = await get(res.signing_request_id);
        assert.deepEqual(read.body.invitation_failures, ['refused-bb@example.test']);
        const events = await allEvents(res.signing_request_id, 100);
        assert.ok(events.some((e) => e.kind === 'invitation.failed' && e.recipient?.email === 'refused-bb@example.test'));
      });
    });

    // ---------------------------------------------------------------- the state machine

  });
}
