/**
 * Signing requests end to end through a real SMTP server: creation with one mail per signer and
 * idempotency, refused and temporarily refused addresses, reminders, deadline changes, cancellation,
 * expiry on the fake clock, the history, the original document, and the state moves the signer's page
 * makes (recordSigned / recordDeclined called directly here; the page has its own tests).
 */
import assert from 'node:assert/strict';
import { resolveSignerLink } from '../../handlers/signing/signer/links.ts';
import { mailTiming } from '../../handlers/signing/request/invitationMail.ts';
import { recordDeclined, recordOpened, recordSigned } from '../../handlers/signing/request/lifecycle.ts';
import type { ApplyResult } from '../../server/admin.ts';
import { databases, startTestService, type TestService } from '../support/service.ts';
import { eventKinds, freePort, type MailServer, notices, putFile, runJobs, SLOW_MS, sha256, signingService, signingWorkspace, startMailServer, tokenIn } from './requestSupport.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

for (const database of databases) {
  describe(`signing requests [${database.name}]`, function () {
    this.timeout(30_000);
    let smtp: MailServer;
    let svc: TestService;
    let ws: ApplyResult;
    let api: ReturnType<TestService['client']>;

    before(async () => {
      smtp = await startMailServer();
      svc = await signingService(database.url(), smtp);
      ws = await signingWorkspace(svc);
      api = svc.client(ws.keys.sender!.secret);
    });
    after(async () => {
      await svc?.close();
      await smtp?.close();
    });

    async function create(body: Partial<Parameters<typeof api.signing.RequestFileSignatures>[0]> = {}, options: { idempotencyKey?: string; actAs?: string | null } = {}) {
      const fileId = body.file_id ?? (await putFile(svc, ws.workspace_id)).file.id;
      const res = await api.signing.RequestFileSignatures(
        { file_id: fileId, signers: [{ email: 'ana@example.test', name: 'Ana Lind' }], ...body } as Parameters<typeof api.signing.RequestFileSignatures>[0],
        options,
      );
      assert.equal(res.response.status, 200, JSON.stringify(res.error));
      return res.data!;
    }

    it('creates a pending request and mails each signer their own link, saying who asks, the title, the message and the deadline', async () => {
      const { file } = await putFile(svc, ws.workspace_id, { filename: 'Master services agreement' });
      const before = smtp.mails.length;
      const deadline = svc.clock.now() + 10 * DAY;
      const created = await create({
        file_id: file.id,
        title: 'MSA 2027 <final>',
        message: 'Please sign before Monday.\nThanks!',
        deadline_at: deadline,
        signers: [
          { email: 'ana@example.test', name: 'Ana Lind' },
          { email: 'bo@example.test', name: 'Bo Ek' },
        ],
      });
      assert.match(created.signing_request_id, /^sr_[0-9a-z]{24}$/);
      assert.equal(created.status, 'pending');
      assert.deepEqual(created.invitation_failures, []);
      assert.equal(created.file_id, null);
      assert.equal(created.source_file_id, file.id);
      assert.equal(created.private, false);
      assert.equal(created.deadline_at, deadline);
      assert.equal(created.signature_method, 'standard');
      assert.deepEqual(
        created.recipients.map((r) => [r.email, r.status, r.invitation, r.invited_at]),
        [
          ['ana@example.test', 'pending', 'sent', svc.clock.now()],
          ['bo@example.test', 'pending', 'sent', svc.clock.now()],
        ],
      );
      assert.equal(smtp.mails.length, before + 2, 'one mail per signer');
      const ana = smtp.to('ana@example.test').at(-1)!.mail;
      const bo = smtp.to('bo@example.test').at(-1)!.mail;
      assert.notEqual(tokenIn(ana), tokenIn(bo), 'each signer has their own link');
      assert.equal(ana.subject, 'Olga Owner asks you to sign "MSA 2027 <final>"');
      assert.match(ana.text!, /Hello Ana Lind,/);
      assert.match(ana.text!, /Olga Owner \(Acme\) asks you to sign "MSA 2027 <final>"\./);
      assert.match(ana.text!, /asks you to sign "MSA 2027 <final>"\.\n\nMessage from Olga Owner:\nPlease sign before Monday\.\nThanks!\n\nPlease sign by/);
      assert.match(ana.text!, /Please sign by Wednesday, 2 December 2026, 12:00 UTC\.\n\nOpen the document to read and sign it:\n/);
      assert.match(ana.text!, /https:\/\/sign\.acme\.example\/sign\/[A-Za-z0-9_-]{43}\n/);
      assert.match(ana.html as string, /<strong>MSA 2027 &lt;final&gt;<\/strong>/, 'the HTML part is escaped');
      assert.match(ana.html as string, /href="https:\/\/sign\.acme\.example\/sign\/[A-Za-z0-9_-]{43}"/);
      assert.equal(ana.headers.get('x-signing-request'), created.signing_request_id);
      // The link is live and belongs to Ana; only its hash is stored.
      const link = await resolveSignerLink(svc.db.sql, tokenIn(ana), svc.clock.now());
      assert.equal(link.state, 'live');
      assert.equal(link.state === 'live' && link.recipient.email, 'ana@example.test');
      const stored = await svc.db.sql.all<{ token_hash: string }>(`SELECT token_hash FROM signing_links WHERE request_id = ?`, [created.signing_request_id]);
      assert.equal(stored.length, 2);
      assert.ok(stored.every((s) => /^[0-9a-f]{64}$/.test(s.token_hash) && s.token_hash !== tokenIn(ana)));
      assert.deepEqual(await eventKinds(svc, created.signing_request_id), ['request.created', 'invitation.sent', 'invitation.sent']);
      assert.doesNotMatch(svc.logs(), new RegExp(tokenIn(ana)), 'the token is never logged');
    });

    it('the same Idempotency-Key answers the same request and mails nothing again; a new key makes a new request and new mails', async () => {
      const { file } = await putFile(svc, ws.workspace_id);
      const body = { file_id: file.id, signers: [{ email: 'idem@example.test', name: 'Ida Idem' }] };
      const first = await create(body, { idempotencyKey: 'contract-42' });
      assert.equal(smtp.to('idem@example.test').length, 1);
      const again = await api.signing.RequestFileSignatures(body, { idempotencyKey: 'contract-42' });
      assert.equal(again.response.status, 200);
      assert.equal(again.response.headers.get('idempotency-replayed'), 'true');
      assert.equal(again.data!.signing_request_id, first.signing_request_id);
      assert.equal(smtp.to('idem@example.test').length, 1, 'no second mail');
      const fresh = await create(body, { idempotencyKey: 'contract-43' });
      assert.notEqual(fresh.signing_request_id, first.signing_request_id);
      assert.equal(smtp.to('idem@example.test').length, 2, 'a new request mails again');
      assert.notEqual(tokenIn(smtp.to('idem@example.test')[0]!.mail), tokenIn(smtp.to('idem@example.test')[1]!.mail));
    });

    it('an address the mail server refuses is listed in invitation_failures and the history; the request exists and the others are mailed', async () => {
      const created = await create({
        signers: [
          { email: 'refused-1@example.test', name: 'Rolf Refused' },
          { email: 'ok-1@example.test', name: 'Olle Ok' },
        ],
      });
      assert.equal(created.status, 'pending');
      assert.deepEqual(created.invitation_failures, ['refused-1@example.test']);
      const refused = created.recipients[0]!;
      assert.equal(refused.invitation, 'failed');
      assert.match(refused.invitation_error!, /^550 .*mailbox unavailable/);
      assert.equal(refused.invited_at, null);
      assert.equal(created.recipients[1]!.invitation, 'sent');
      assert.equal(smtp.to('ok-1@example.test').length, 1);
      const read = await api.signing.GetSigningRequest({ signing_request_id: created.signing_request_id });
      assert.deepEqual(read.data!.invitation_failures, ['refused-1@example.test']);
      const events = await api.signing.ListSigningEvents({ signing_request_id: created.signing_request_id });
      const failed = events.data!.items.find((e) => e.kind === 'invitation.failed')!;
      assert.deepEqual(failed.recipient, { recipient_id: refused.recipient_id, email: 'refused-1@example.test', name: 'Rolf Refused' });
      assert.match(String(failed.data.error), /^550 /);
    });

    it('a temporary refusal is queued and retried later with backoff; a mail that never goes through ends failed, visibly', async () => {
      const created = await create({
        signers: [
          { email: 'flaky-1@example.test', name: 'Fia Flaky' },
          { email: 'greylist-1@example.test', name: 'Greta Grey' },
        ],
      });
      assert.deepEqual(created.invitation_failures, [], 'queued is not failed');
      assert.deepEqual(created.recipients.map((r) => r.invitation), ['queued', 'queued']);
      assert.match(created.recipients[0]!.invitation_error!, /^452 /);
      await runJobs(svc);
      assert.equal(smtp.to('flaky-1@example.test').length, 0, 'nothing before the first retry is due');
      svc.clock.advance(60_000);
      await runJobs(svc);
      assert.equal(smtp.to('flaky-1@example.test').length, 0, 'the second try is refused too');
      svc.clock.advance(5 * 60_000);
      await runJobs(svc);
      assert.equal(smtp.to('flaky-1@example.test').length, 1, 'the third try goes through');
      let read = (await api.signing.GetSigningRequest({ signing_request_id: created.signing_request_id })).data!;
      assert.equal(read.recipients[0]!.invitation, 'sent');
      assert.equal(read.recipients[0]!.invitation_error, null);
      assert.equal(read.recipients[0]!.invited_at, svc.clock.now());
      assert.equal(read.recipients[1]!.invitation, 'queued');
      for (const wait of [15 * 60_000, HOUR, 4 * HOUR]) {
        svc.clock.advance(wait);
        await runJobs(svc);
      }
      read = (await api.signing.GetSigningRequest({ signing_request_id: created.signing_request_id })).data!;
      assert.equal(read.recipients[1]!.invitation, 'failed');
      assert.match(read.recipients[1]!.invitation_error!, /^450 .*greylisted.*\(gave up after 6 attempts\)$/);
      assert.deepEqual(read.invitation_failures, ['greylist-1@example.test']);
      assert.equal(read.status, 'pending');
      const kinds = await eventKinds(svc, created.signing_request_id);
      assert.deepEqual(kinds, ['request.created', 'invitation.sent', 'invitation.failed']);
      svc.clock.advance(DAY);
      await runJobs(svc);
      assert.equal(smtp.to('greylist-1@example.test').length, 0);
      assert.deepEqual(await eventKinds(svc, created.signing_request_id), kinds, 'no more tries');
    });

    it('a mail the server takes only after the request stopped waiting is recorded as sent, and not sent again', async () => {
      const saved = { ...mailTiming };
      // The request waits 1 s for its mails; the slow one is answered after 3 s (its job records it then).
      Object.assign(mailTiming, { roundWaitMs: 1000 });
      smtp.delays.slowMs = 3000;
      try {
        const created = await create({ signers: [{ email: 'slow-1@example.test', name: 'Sam Slow' }, { email: 'quick-1@example.test', name: 'Quinn Quick' }] });
        assert.deepEqual(created.recipients.map((r) => r.invitation), ['queued', 'sent']);
        assert.match(created.recipients[0]!.invitation_error!, /did not answer in time/);
        const until = Date.now() + 10_000;
        let read = created;
        while (read.recipients[0]!.invitation !== 'sent' && Date.now() < until) {
          await new Promise((resolve) => setTimeout(resolve, 20));
          read = (await api.signing.GetSigningRequest({ signing_request_id: created.signing_request_id })).data!;
        }
        assert.equal(read.recipients[0]!.invitation, 'sent', 'recorded once the server answered');
        assert.equal(read.recipients[0]!.invitation_error, null);
        svc.clock.advance(60_000);
        await runJobs(svc);
        assert.equal(smtp.to('slow-1@example.test').length, 1, 'the retry found it sent and mailed nothing');
        assert.deepEqual(await eventKinds(svc, created.signing_request_id), ['request.created', 'invitation.sent', 'invitation.sent']);
      } finally {
        Object.assign(mailTiming, saved);
        smtp.delays.slowMs = SLOW_MS;
      }
    });

    it('refuses bad input with 400 and a plain reason, a file it cannot see with 404, bankid without a provider with 400', async () => {
      const { file } = await putFile(svc, ws.workspace_id);
      const base = { file_id: file.id, signers: [{ email: 'ana@example.test', name: 'Ana' }] };
      const cases: Array<[object, RegExp]> = [
        [{ ...base, signers: [{ email: 'Ana@Example.test', name: 'A' }, { email: 'ana@example.TEST', name: 'B' }] }, /signers\[1\]\.email repeats signers\[0\]\.email/],
        [{ ...base, signers: [{ email: 'not an address', name: 'A' }] }, /signers\[0\]\.email is not an e-mail address/],
        [{ ...base, signers: [{ email: 'a@example.test', name: '   ' }] }, /signers\[0\]\.name is blank/],
        [{ ...base, deadline_at: svc.clock.now() + HOUR - 1 }, /deadline_at must be at least 1 hour from now/],
        [{ ...base, deadline_at: svc.clock.now() + 120 * DAY + 1 }, /deadline_at must be at most 120 days from now/],
        [{ ...base, signers: [] }, /signers/],
        [{ ...base, reminder_interval_days: 31 }, /reminder_interval_days/],
        [{ ...base, signature_method: 'bankid' }, /^bankid is not available/],
      ];
      for (const [body, message] of cases) {
        const res = await svc.post('signing.RequestFileSignatures', body, { Authorization: `Bearer ${ws.keys.sender!.secret}`, 'Idempotency-Key': crypto.randomUUID() });
        assert.equal(res.status, 400, JSON.stringify(body));
        assert.equal(res.body.error, 'invalid_input');
        assert.match(res.body.message, message);
      }
      const missing = await api.signing.RequestFileSignatures({ ...base, file_id: 'file_000000000000000000000000' });
      assert.equal(missing.response.status, 404);
      assert.equal((await svc.db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM signing_requests WHERE source_file_id = ?`, [file.id]))!.n, 0, 'nothing was created');
    });

    it('reminds pending signers only, with a fresh link (old links keep working), at most once an hour', async () => {
      const created = await create({
        signers: [
          { email: 'rem-a@example.test', name: 'Rem A' },
          { email: 'rem-b@example.test', name: 'Rem B' },
        ],
      });
      const id = created.signing_request_id;
      const firstToken = tokenIn(smtp.to('rem-a@example.test')[0]!.mail);
      await svc.db.tx((sql) => recordSigned(sql, svc, { recipientId: created.recipients[1]!.recipient_id, typedName: 'Rem B', ip: '203.0.113.9', userAgent: 'Test', now: svc.clock.now() }));
      const early = await api.signing.RemindSigners({ signing_request_id: id });
      assert.equal(early.response.status, 409);
      assert.match(early.error!.message, new RegExp(`next reminder is possible at ${new Date(svc.clock.now() + HOUR).toISOString()}`));
      svc.clock.advance(HOUR);
      const reminded = await api.signing.RemindSigners({ signing_request_id: id, message: 'Friendly nudge' });
      assert.equal(reminded.response.status, 200, JSON.stringify(reminded.error));
      assert.deepEqual(reminded.data!.invitation_failures, []);
      assert.equal(reminded.data!.recipients[0]!.last_reminded_at, svc.clock.now());
      assert.equal(reminded.data!.recipients[1]!.last_reminded_at, null, 'a signer who signed is not reminded');
      assert.equal(smtp.to('rem-a@example.test').length, 2);
      assert.equal(smtp.to('rem-b@example.test').length, 1);
      const mail = smtp.to('rem-a@example.test')[1]!.mail;
      assert.equal(mail.subject, 'Reminder: please sign "Services agreement"');
      assert.match(mail.text!, /Friendly nudge/);
      assert.notEqual(tokenIn(mail), firstToken, 'a fresh link');
      assert.equal((await resolveSignerLink(svc.db.sql, firstToken, svc.clock.now())).state, 'live', 'the first link still works');
      assert.equal((await resolveSignerLink(svc.db.sql, tokenIn(mail), svc.clock.now())).state, 'live');
      const again = await api.signing.RemindSigners({ signing_request_id: id });
      assert.equal(again.response.status, 409);
      assert.ok((await eventKinds(svc, id)).includes('reminder.sent'));
      // Nobody left: 409.
      await svc.db.tx((sql) => recordSigned(sql, svc, { recipientId: created.recipients[0]!.recipient_id, typedName: 'Rem A', ip: null, userAgent: null, now: svc.clock.now() }));
      svc.clock.advance(HOUR);
      const done = await api.signing.RemindSigners({ signing_request_id: id });
      assert.equal(done.response.status, 409);
      assert.match(done.error!.message, /is completed; only a pending request can be reminded/);
    });

    it('reminds a signer whose invitation failed at once, and lists only this round in invitation_failures', async () => {
      const created = await create({ signers: [{ email: 'refused-2@example.test', name: 'R' }, { email: 'fine-2@example.test', name: 'F' }] });
      const res = await api.signing.RemindSigners({ signing_request_id: created.signing_request_id });
      assert.equal(res.response.status, 200);
      assert.deepEqual(res.data!.invitation_failures, ['refused-2@example.test']);
      assert.equal(smtp.to('fine-2@example.test').length, 1, 'mailed less than an hour ago: not again');
    });

    it('sends automatic reminders every reminder_interval_days, at most 3 per signer', async () => {
      const created = await create({ signers: [{ email: 'auto@example.test', name: 'Auto' }], reminder_interval_days: 2, deadline_at: svc.clock.now() + 30 * DAY });
      await svc.jobs.scheduleRecurring();
      svc.clock.advance(DAY);
      await runJobs(svc);
      assert.equal(smtp.to('auto@example.test').length, 1, 'not yet');
      for (let i = 0; i < 5; i++) {
        svc.clock.advance(2 * DAY);
        await runJobs(svc);
      }
      assert.equal(smtp.to('auto@example.test').length, 4, 'the invitation and 3 reminders');
      const read = (await api.signing.GetSigningRequest({ signing_request_id: created.signing_request_id })).data!;
      assert.ok(read.recipients[0]!.last_reminded_at! > read.recipients[0]!.invited_at!);
      const events = (await api.signing.ListSigningEvents({ signing_request_id: created.signing_request_id })).data!.items.filter((e) => e.kind === 'reminder.sent');
      assert.equal(events.length, 3);
      assert.ok(events.every((e) => e.data.automatic === true));
      await api.signing.CancelSigningRequest({ signing_request_id: created.signing_request_id });
    });

    it('moves the deadline later or earlier within bounds, keeping signatures; only while pending', async () => {
      const created = await create({ signers: [{ email: 'dl-a@example.test', name: 'A' }, { email: 'dl-b@example.test', name: 'B' }] });
      const id = created.signing_request_id;
      await svc.db.tx((sql) => recordSigned(sql, svc, { recipientId: created.recipients[0]!.recipient_id, typedName: 'A', ip: null, userAgent: null, now: svc.clock.now() }));
      const later = svc.clock.now() + 60 * DAY;
      const extended = await api.signing.UpdateSigningDeadline({ signing_request_id: id, deadline_at: later });
      assert.equal(extended.response.status, 200);
      assert.equal(extended.data!.deadline_at, later);
      assert.equal(extended.data!.recipients[0]!.status, 'signed', 'signatures kept');
      const sooner = svc.clock.now() + 2 * HOUR;
      const shortened = await api.signing.UpdateSigningDeadline({ signing_request_id: id, deadline_at: sooner });
      assert.equal(shortened.data!.deadline_at, sooner);
      for (const bad of [svc.clock.now() + HOUR - 1, svc.clock.now() + 120 * DAY + 1]) {
        const res = await api.signing.UpdateSigningDeadline({ signing_request_id: id, deadline_at: bad });
        assert.equal(res.response.status, 400);
      }
      const events = (await api.signing.ListSigningEvents({ signing_request_id: id })).data!.items.filter((e) => e.kind === 'deadline.changed');
      assert.deepEqual(
        events.map((e) => e.data),
        [
          { previous_deadline_at: created.deadline_at, deadline_at: later },
          { previous_deadline_at: later, deadline_at: sooner },
        ],
      );
      await api.signing.CancelSigningRequest({ signing_request_id: id });
      const closed = await api.signing.UpdateSigningDeadline({ signing_request_id: id, deadline_at: later });
      assert.equal(closed.response.status, 409);
    });

    it('cancels a pending request (links die at once); a completed request cannot be cancelled and stays completed', async () => {
      const created = await create({ signers: [{ email: 'cx@example.test', name: 'Cx' }] });
      const token = tokenIn(smtp.to('cx@example.test').at(-1)!.mail);
      const cancelled = await api.signing.CancelSigningRequest({ signing_request_id: created.signing_request_id, reason: 'Wrong version' });
      assert.equal(cancelled.response.status, 200);
      assert.equal(cancelled.data!.status, 'cancelled');
      assert.equal(cancelled.data!.cancel_reason, 'Wrong version');
      assert.equal(cancelled.data!.cancelled_at, svc.clock.now());
      const link = await resolveSignerLink(svc.db.sql, token, svc.clock.now());
      assert.equal(link.state === 'ended' && link.reason, 'cancelled');
      const signing = await svc.db.tx((sql) => recordSigned(sql, svc, { recipientId: created.recipients[0]!.recipient_id, typedName: 'Cx', ip: null, userAgent: null, now: svc.clock.now() }));
      assert.deepEqual(signing, { ok: false, reason: 'cancelled' });
      const twice = await api.signing.CancelSigningRequest({ signing_request_id: created.signing_request_id });
      assert.equal(twice.response.status, 409);

      const done = await create({ signers: [{ email: 'cy@example.test', name: 'Cy' }] });
      const signed = await svc.db.tx((sql) => recordSigned(sql, svc, { recipientId: done.recipients[0]!.recipient_id, typedName: 'Cy', ip: null, userAgent: null, now: svc.clock.now() }));
      assert.equal(signed.ok && signed.completed, true);
      const refused = await api.signing.CancelSigningRequest({ signing_request_id: done.signing_request_id });
      assert.equal(refused.response.status, 409);
      assert.match(refused.error!.message, /^A completed request cannot be cancelled/);
      const read = (await api.signing.GetSigningRequest({ signing_request_id: done.signing_request_id })).data!;
      assert.equal(read.status, 'completed');
      assert.equal(read.completed_at, svc.clock.now());
      const job = await svc.db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM jobs WHERE kind = 'signing.archive' AND dedupe_key = ?`, [done.signing_request_id]);
      assert.equal(Number(job!.n), 1, 'the archive job is enqueued, keyed by the request id');
      const told = await notices(svc, ws.workspace_id, 'signing.completed');
      assert.ok(told.some((n) => n.member_id === ws.members.olga && n.body.includes(done.signing_request_id)), 'the key creator is told');
    });

    it('signing order: the first step is invited at once, the next when everyone before it signed; later steps are neither reminded nor told of a decline', async () => {
      // As the signer's page does: sign in a transaction, then start what it declared.
      const signed = async (id: string, now: number) => {
        let used: Parameters<typeof svc.jobs.committed>[0] | undefined;
        const outcome = await svc.db.tx((sql) => {
          used = sql;
          return recordSigned(sql, svc, { recipientId: id, typedName: 'x', ip: null, userAgent: null, now });
        });
        svc.jobs.committed(used!);
        for (let i = 0; i < 200 && svc.jobs.running > 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
        return outcome;
      };
      const created = await create({
        signers: [
          { email: 'step1@example.test', name: 'First', order: 1 },
          { email: 'step2a@example.test', name: 'Second A', order: 2 },
          { email: 'step2b@example.test', name: 'Second B', order: 2 },
          { email: 'step3@example.test', name: 'Third', order: 3 },
        ],
      });
      await runJobs(svc);
      assert.deepEqual(created.recipients.map((r) => [r.signing_order, r.invitation]), [[1, 'sent'], [2, 'waiting'], [2, 'waiting'], [3, 'waiting']]);
      assert.equal(smtp.to('step1@example.test').length, 1);
      for (const a of ['step2a@example.test', 'step2b@example.test', 'step3@example.test']) assert.equal(smtp.to(a).length, 0, `${a} is not invited yet`);
      // A reminder reaches only who was invited.
      svc.clock.advance(HOUR + 1);
      const reminded = await api.signing.RemindSigners({ signing_request_id: created.signing_request_id });
      assert.equal(reminded.response.status, 200, JSON.stringify(reminded.error));
      await runJobs(svc);
      assert.equal(smtp.to('step1@example.test').length, 2);
      assert.equal(smtp.to('step2a@example.test').length, 0);
      // Step 1 signs: both of step 2 are invited (after the commit), not step 3.
      assert.ok((await signed(created.recipients[0]!.recipient_id, svc.clock.now())).ok);
      await runJobs(svc);
      assert.equal(smtp.to('step2a@example.test').length, 1);
      assert.equal(smtp.to('step2b@example.test').length, 1);
      assert.equal(smtp.to('step3@example.test').length, 0);
      const read = (await api.signing.GetSigningRequest({ signing_request_id: created.signing_request_id })).data!;
      assert.deepEqual(read.recipients.map((r) => r.invitation), ['sent', 'sent', 'sent', 'waiting']);
      // One of step 2 signing is not enough; the second opens step 3.
      assert.ok((await signed(created.recipients[1]!.recipient_id, svc.clock.now())).ok);
      await runJobs(svc);
      assert.equal(smtp.to('step3@example.test').length, 0);
      // The other of step 2 declines instead: the request ends; step 3, never invited, is not told.
      const declined = await svc.db.tx((sql) => recordDeclined(sql, { recipientId: created.recipients[2]!.recipient_id, reason: 'no', now: svc.clock.now() }, svc.jobs));
      assert.deepEqual(declined, { ok: true });
      await runJobs(svc);
      assert.equal(smtp.to('step3@example.test').length, 0);
      assert.equal(smtp.to('step1@example.test').filter((m) => /^Declined:/.test(m.mail.subject ?? '')).length, 1, 'who signed is told');
      // Order numbers out of range are refused.
      for (const order of [0, 11, 1.5]) {
        const res = await api.signing.RequestFileSignatures({ file_id: (await putFile(svc, ws.workspace_id)).file.id, signers: [{ email: 'o@example.test', name: 'O', order }] } as never);
        assert.equal(res.response.status, 400, String(order));
      }
    });

    it('replaces a pending recipient: old links die, the new address is invited, the history and the audit log say so', async () => {
      const created = await create({ signers: [{ email: 'typo@exmaple.test', name: 'Rita Typo' }, { email: 'rp-other@example.test', name: 'Other' }] });
      await runJobs(svc);
      const oldToken = tokenIn(smtp.to('typo@exmaple.test').at(-1)!.mail);
      const rita = created.recipients[0]!.recipient_id;
      assert.equal((await svc.db.tx((sql) => recordOpened(sql, { recipientId: rita, now: svc.clock.now() }))).ok, true);
      const replaced = await api.signing.ReplaceRecipient({ signing_request_id: created.signing_request_id, recipient_id: rita, email: 'rita@example.test', name: 'Rita Right' });
      assert.equal(replaced.response.status, 200, JSON.stringify(replaced.error));
      const now = replaced.data!.recipients[0]!;
      assert.deepEqual([now.email, now.name, now.status, now.invitation, now.opened_at], ['rita@example.test', 'Rita Right', 'pending', 'sent', null]);
      assert.equal((await resolveSignerLink(svc.db.sql, oldToken, svc.clock.now())).state, 'unknown', 'the old link no longer works');
      const fresh = tokenIn(smtp.to('rita@example.test').at(-1)!.mail);
      const live = await resolveSignerLink(svc.db.sql, fresh, svc.clock.now());
      assert.equal(live.state, 'live');
      const events = (await api.signing.ListSigningEvents({ signing_request_id: created.signing_request_id })).data!.items;
      const event = events.find((e) => e.kind === 'recipient.replaced')!;
      assert.deepEqual(event.data, { previous_email: 'typo@exmaple.test', previous_name: 'Rita Typo' });
      // What happened before the replacement names who it happened to then.
      const before = events.filter((e) => e.recipient?.recipient_id === rita && e.kind !== 'recipient.replaced').map((e) => [e.kind, e.recipient!.email]);
      assert.deepEqual(before, [['invitation.sent', 'typo@exmaple.test'], ['recipient.opened', 'typo@exmaple.test'], ['invitation.sent', 'rita@example.test']]);
      assert.equal(event.recipient!.email, 'rita@example.test');
      const audit = await svc.db.sql.one<{ action: string; actor_type: string; details: string }>(`SELECT action, actor_type, details FROM audit_log WHERE workspace_id = ? AND action = 'signing.recipient_replaced'`, [ws.workspace_id]);
      assert.equal(audit!.actor_type, 'key');
      assert.equal(JSON.parse(audit!.details).email, 'rita@example.test');
      // The same again changes nothing and sends nothing; another recipient's address is refused.
      const mails = smtp.mails.length;
      const again = await api.signing.ReplaceRecipient({ signing_request_id: created.signing_request_id, recipient_id: rita, email: 'rita@example.test' });
      assert.equal(again.response.status, 200);
      await runJobs(svc);
      assert.equal(smtp.mails.length, mails);
      const clash = await api.signing.ReplaceRecipient({ signing_request_id: created.signing_request_id, recipient_id: rita, email: 'RP-OTHER@example.test' });
      assert.equal(clash.response.status, 400);
      assert.match(clash.error!.message, /already the address of another recipient/);
      for (const email of ['not an address', 'A <a@example.test>']) {
        assert.equal((await api.signing.ReplaceRecipient({ signing_request_id: created.signing_request_id, recipient_id: rita, email })).response.status, 400, email);
      }
      assert.equal((await api.signing.ReplaceRecipient({ signing_request_id: created.signing_request_id, recipient_id: 'rcp_nobody', email: 'x@example.test' })).response.status, 404);
      // Who signed cannot be replaced; nor anyone on a request that is not pending.
      assert.ok((await svc.db.tx((sql) => recordSigned(sql, svc, { recipientId: rita, typedName: 'Rita Right', ip: null, userAgent: null, now: svc.clock.now() }))).ok);
      const signedOne = await api.signing.ReplaceRecipient({ signing_request_id: created.signing_request_id, recipient_id: rita, email: 'z@example.test' });
      assert.equal(signedOne.response.status, 409);
      assert.equal((await api.signing.CancelSigningRequest({ signing_request_id: created.signing_request_id })).response.status, 200);
      const cancelled = await api.signing.ReplaceRecipient({ signing_request_id: created.signing_request_id, recipient_id: created.recipients[1]!.recipient_id, email: 'z@example.test' });
      assert.equal(cancelled.response.status, 409);
    });

    it('a decline ends the request cancelled "declined by <name>", kills every link and tells the sender', async () => {
      const created = await create({ signers: [{ email: 'dc-a@example.test', name: 'Dana Decline' }, { email: 'dc-b@example.test', name: 'Bert' }] }, { actAs: ws.members.ada });
      const other = tokenIn(smtp.to('dc-b@example.test').at(-1)!.mail);
      const opened = await svc.db.tx((sql) => recordOpened(sql, { recipientId: created.recipients[0]!.recipient_id, now: svc.clock.now() }));
      assert.deepEqual(opened, { ok: true, first: true });
      const declined = await svc.db.tx((sql) => recordDeclined(sql, { recipientId: created.recipients[0]!.recipient_id, reason: 'Clause 4 is wrong', now: svc.clock.now() }, svc.jobs));
      assert.deepEqual(declined, { ok: true });
      const read = (await api.signing.GetSigningRequest({ signing_request_id: created.signing_request_id }, { actAs: ws.members.ada })).data!;
      assert.equal(read.status, 'cancelled');
      assert.equal(read.cancel_reason, 'declined by Dana Decline');
      assert.equal(read.recipients[0]!.status, 'declined');
      assert.equal(read.recipients[0]!.decline_reason, 'Clause 4 is wrong');
      const link = await resolveSignerLink(svc.db.sql, other, svc.clock.now());
      assert.equal(link.state === 'ended' && link.reason, 'declined');
      assert.deepEqual((await eventKinds(svc, created.signing_request_id)).slice(-3), ['recipient.opened', 'recipient.declined', 'request.cancelled']);
      const told = (await notices(svc, ws.workspace_id, 'signing.declined')).filter((n) => n.body.includes(created.signing_request_id));
      assert.deepEqual(told.map((n) => n.member_id), [ws.members.ada], 'the member it was sent for');
      assert.match(told[0]!.body, /Dana Decline \(dc-a@example\.test\) declined to sign "Services agreement" .*: "Clause 4 is wrong"/);
      // The other signer and the sender are told by mail, after the commit; the reason goes to the sender only.
      await runJobs(svc);
      const declinedTo = (address: string) => smtp.to(address).filter((m) => /^Declined: "Services agreement"/.test(m.mail.subject ?? ''));
      assert.equal(declinedTo('dc-a@example.test').length, 0, 'not the one who declined');
      const bert = declinedTo('dc-b@example.test');
      assert.equal(bert.length, 1);
      assert.match(bert[0]!.mail.text!, /Dana Decline declined to sign "Services agreement", which .* sent you/);
      assert.ok(!bert[0]!.mail.text!.includes('Clause 4'), "another signer is not told the decliner's reason");
      const ada = declinedTo('ada@acme.test');
      assert.equal(ada.length, 1, 'the sender');
      assert.match(ada[0]!.mail.text!, /Their reason: "Clause 4 is wrong"/);
      await runJobs(svc);
      assert.equal(declinedTo('dc-b@example.test').length, 1, 'once');
    });

    it('expires pending requests at their deadline (the recurring job on the fake clock): links die, the sender is told', async () => {
      const created = await create({ signers: [{ email: 'ex@example.test', name: 'Ex' }], deadline_at: svc.clock.now() + 2 * HOUR }, { actAs: ws.members.bob });
      const token = tokenIn(smtp.to('ex@example.test').at(-1)!.mail);
      await svc.jobs.scheduleRecurring();
      svc.clock.advance(2 * HOUR - 1);
      await runJobs(svc);
      assert.equal((await api.signing.GetSigningRequest({ signing_request_id: created.signing_request_id })).data!.status, 'pending');
      svc.clock.advance(1);
      assert.equal((await resolveSignerLink(svc.db.sql, token, svc.clock.now())).state, 'ended', 'dead at the deadline, before the job runs');
      const deadline = svc.clock.now();
      // Before the job: already read as expired, since the deadline.
      const early = (await api.signing.GetSigningRequest({ signing_request_id: created.signing_request_id })).data!;
      assert.equal(early.status, 'expired');
      assert.equal(early.expired_at, deadline);
      svc.clock.advance(60_000);
      await runJobs(svc);
      const read = (await api.signing.GetSigningRequest({ signing_request_id: created.signing_request_id })).data!;
      assert.equal(read.status, 'expired');
      assert.equal(read.expired_at, deadline, 'expired at its deadline, not when the job ran');
      const link = await resolveSignerLink(svc.db.sql, token, svc.clock.now());
      assert.equal(link.state === 'ended' && link.reason, 'expired');
      assert.equal((await eventKinds(svc, created.signing_request_id)).at(-1), 'request.expired');
      const told = await notices(svc, ws.workspace_id, 'signing.expired');
      assert.ok(told.some((n) => n.member_id === ws.members.bob && n.body.includes(created.signing_request_id)));
      assert.equal((await api.signing.CancelSigningRequest({ signing_request_id: created.signing_request_id })).response.status, 409);
    });

    it('lists the history oldest first in pages, with stable ids and no IP addresses, user agents, links or tokens', async () => {
      const created = await create({ signers: [{ email: 'h1@example.test', name: 'H One' }, { email: 'h2@example.test', name: 'H Two' }] });
      const id = created.signing_request_id;
      const tokens = [tokenIn(smtp.to('h1@example.test').at(-1)!.mail), tokenIn(smtp.to('h2@example.test').at(-1)!.mail)];
      await svc.db.tx((sql) => recordOpened(sql, { recipientId: created.recipients[0]!.recipient_id, now: svc.clock.now() }));
      await svc.db.tx((sql) => recordSigned(sql, svc, { recipientId: created.recipients[0]!.recipient_id, typedName: 'H One', ip: '198.51.100.23', userAgent: 'Mozilla/5.0 (X11) Firefox/140.0', now: svc.clock.now() }));
      await svc.db.tx((sql) => recordSigned(sql, svc, { recipientId: created.recipients[1]!.recipient_id, typedName: 'H Two', ip: '198.51.100.24', userAgent: 'Mozilla/5.0 (Mac) Safari', now: svc.clock.now() }));
      const seen: Array<{ event_id: string; kind: string }> = [];
      let cursor: string | undefined;
      let pages = 0;
      for (;;) {
        const page = await api.signing.ListSigningEvents({ signing_request_id: id, limit: 2, ...(cursor ? { cursor } : {}) });
        assert.equal(page.response.status, 200);
        pages++;
        seen.push(...page.data!.items);
        const text = JSON.stringify(page.data);
        for (const secret of ['198.51.100', 'Mozilla', 'Firefox', '/sign/', ...tokens]) assert.ok(!text.includes(secret), `the history shows no ${secret}`);
        if (!page.data!.has_more) break;
        cursor = page.data!.next_cursor!;
      }
      assert.deepEqual(seen.map((e) => e.kind), ['request.created', 'invitation.sent', 'invitation.sent', 'recipient.opened', 'recipient.signed', 'recipient.signed', 'request.completed']);
      assert.equal(pages, 4);
      assert.equal(new Set(seen.map((e) => e.event_id)).size, seen.length);
      assert.ok(seen.every((e) => /^sev_[0-9a-z]{24}$/.test(e.event_id)));
      const whole = await api.signing.ListSigningEvents({ signing_request_id: id });
      assert.deepEqual(whole.data!.items.map((e) => e.event_id), seen.map((e) => e.event_id), 'stable ids');
      const foreign = await api.signing.ListSigningEvents({ signing_request_id: id, cursor: 'bm90IGEgY3Vyc29y' });
      assert.equal(foreign.response.status, 400);
      // Access is checked on every page: another key's cursor-following gets 404.
      const first = await api.signing.ListSigningEvents({ signing_request_id: id, limit: 2 });
      const stranger = await svc.client(ws.keys.other!.secret).signing.ListSigningEvents({ signing_request_id: id, limit: 2, cursor: first.data!.next_cursor! });
      assert.equal(stranger.response.status, 404);
    });

    it('GetSigningDocument: the original downloads byte-identical; signed is 409 until the archive is ready', async () => {
      const { file, bytes } = await putFile(svc, ws.workspace_id, { filename: 'Byte check', pages: 3 });
      const created = await create({ file_id: file.id, signers: [{ email: 'doc@example.test', name: 'Doc' }] });
      const original = await api.signing.GetSigningDocument({ signing_request_id: created.signing_request_id, version: 'original' });
      assert.equal(original.response.status, 200, JSON.stringify(original.error));
      assert.equal(original.data!.filename, 'Byte check.pdf');
      assert.equal(original.data!.sha256, sha256(bytes));
      assert.equal(original.data!.size, bytes.length);
      assert.equal(original.data!.expires_at, svc.clock.now() + 15 * 60_000);
      const url = new URL(original.data!.url);
      assert.equal(url.origin, 'https://sign.acme.example');
      const download = await fetch(`${svc.origin}${url.pathname}`);
      assert.equal(download.status, 200);
      const got = Buffer.from(await download.arrayBuffer());
      assert.equal(sha256(got), sha256(bytes), 'byte-identical');
      const signed = await api.signing.GetSigningDocument({ signing_request_id: created.signing_request_id, version: 'signed' });
      assert.equal(signed.response.status, 409);
      assert.match(signed.error!.message, /is pending/);
    });
  });
}

for (const database of databases) {
  describe(`signing requests without SMTP: the development mailbox [${database.name}]`, function () {
    this.timeout(30_000);
    let svc: TestService;
    let ws: ApplyResult;

    before(async () => {
      svc = await startTestService(database.url(), { publicUrl: 'https://sign.acme.example' });
      ws = await signingWorkspace(svc);
    });
    after(() => svc?.close());

    it('keeps each invitation in the mailbox, written right after the request commits; a .invalid address is refused like a server would', async () => {
      const { file } = await putFile(svc, ws.workspace_id);
      const api = svc.client(ws.keys.sender!.secret);
      const created = await api.signing.RequestFileSignatures({
        file_id: file.id,
        title: 'Mailbox check',
        signers: [
          { email: 'box@example.test', name: 'Box' },
          { email: 'nobody@nowhere.invalid', name: 'Nobody' },
        ],
      });
      assert.equal(created.response.status, 200, JSON.stringify(created.error));
      assert.deepEqual(created.data!.invitation_failures, ['nobody@nowhere.invalid']);
      const stored = await svc.db.sql.all<{ recipients: string; subject: string; body_text: string; tag: string; workspace_id: string }>(
        `SELECT recipients, subject, body_text, tag, workspace_id FROM mailbox_messages WHERE workspace_id = ? ORDER BY created_at`,
        [ws.workspace_id],
      );
      assert.equal(stored.length, 1);
      assert.deepEqual(JSON.parse(stored[0]!.recipients), ['box@example.test']);
      assert.equal(stored[0]!.subject, 'Olga Owner asks you to sign "Mailbox check"');
      assert.equal(stored[0]!.tag, 'signing.invitation');
      const token = /\/sign\/([A-Za-z0-9_-]{43})/.exec(stored[0]!.body_text)![1]!;
      assert.equal((await resolveSignerLink(svc.db.sql, token, svc.clock.now())).state, 'live');
    });
  });
}

for (const database of databases) {
  describe(`signing requests while the mail server is down [${database.name}]`, function () {
    this.timeout(30_000);
    let port: number;
    let smtp: MailServer | undefined;
    let svc: TestService;
    let ws: ApplyResult;

    before(async () => {
      port = await freePort();
      svc = await signingService(database.url(), { url: `smtp://127.0.0.1:${port}` });
      ws = await signingWorkspace(svc);
    });
    after(async () => {
      await svc?.close();
      await smtp?.close();
    });

    it('answers with the invitations queued, and sends them once the server is back', async () => {
      const { file } = await putFile(svc, ws.workspace_id);
      const api = svc.client(ws.keys.sender!.secret);
      const created = await api.signing.RequestFileSignatures({ file_id: file.id, signers: [{ email: 'later@example.test', name: 'Later' }] });
      assert.equal(created.response.status, 200, JSON.stringify(created.error));
      assert.equal(created.data!.status, 'pending');
      assert.deepEqual(created.data!.invitation_failures, []);
      assert.equal(created.data!.recipients[0]!.invitation, 'queued');
      assert.equal(created.data!.recipients[0]!.invitation_error, 'the mail server cannot be reached (ECONNREFUSED); sending again later');
      assert.doesNotMatch(JSON.stringify(created.data), new RegExp(`127\\.0\\.0\\.1|:${port}\\b`), "never the mail server's address");
      smtp = await startMailServer(0, port);
      svc.clock.advance(60_000);
      await runJobs(svc);
      assert.equal(smtp.to('later@example.test').length, 1);
      const read = (await api.signing.GetSigningRequest({ signing_request_id: created.data!.signing_request_id })).data!;
      assert.equal(read.recipients[0]!.invitation, 'sent');
      assert.equal((await resolveSignerLink(svc.db.sql, tokenIn(smtp.to('later@example.test')[0]!.mail), svc.clock.now())).state, 'live');
      assert.deepEqual(await eventKinds(svc, read.signing_request_id), ['request.created', 'invitation.sent']);
    });
  });
}
