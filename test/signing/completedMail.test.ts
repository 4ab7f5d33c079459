/**
 * The "completed" mail (handlers/signing/archive/completedMail.ts) through a real SMTP server: when the signed
 * archive is ready, every recipient and the sender get exactly one mail with a download link of the
 * archive (its bytes are the archive: same SHA-256), valid 7 days on the service's clock, and the
 * address of the verification page; sent by jobs enqueued with the archive, retried while the mail
 * server is down, never twice.
 */
import assert from 'node:assert/strict';
import type { ParsedMail } from 'mailparser';
import pino from 'pino';
import { archiveRequest } from '../../handlers/signing/archive/archiveJob.ts';
import { testPersonalNumber } from '../../handlers/signing/bankid/personalNumber.ts';
import { sealSettingsFromEnv } from '../../handlers/signing/archive/sealSettings.ts';
import { COMPLETED_MAIL_JOB } from '../../handlers/signing/archive/completedMail.ts';
import { setCredit } from '../../handlers/signing/credit/credit.ts';
import { listRecipients } from '../../handlers/signing/queries.ts';
import { recordOpened, recordSigned } from '../../handlers/signing/request/lifecycle.ts';
import type { ApplyResult } from '../../server/admin.ts';
import { mailConfigFromEnv } from '../../server/mailer.ts';
import type { ModuleDeps } from '../../server/module.ts';
import { createBlobStore } from '../../server/storage.ts';
import { databases, startTestService, type TestService } from '../support/service.ts';
import { FROM, freePort, type MailServer, putFile, runJobs, sha256, signingService, signingWorkspace, startMailServer, tokenIn } from './requestSupport.ts';
import { onService } from './signerKit.ts';

const DAY = 86_400_000;
const COMPLETED = /^Signed by everyone: /;

/** The archive's download link in a completed mail (text part). */
function archiveLinkIn(mail: ParsedMail): string {
  const link = /https:\/\/sign\.acme\.example\/files\/[A-Za-z0-9_.-]+/.exec(mail.text ?? '')?.[0];
  assert.ok(link, `no download link in "${mail.subject ?? ''}"`);
  return link;
}

/** Every recipient opens and signs (what the signer's page does). */
async function signAll(svc: TestService, requestId: string): Promise<void> {
  for (const r of await listRecipients(svc.db.sql, requestId)) {
    svc.clock.advance(60_000);
    const now = svc.clock.now();
    await svc.db.tx(async (sql) => {
      assert.ok((await recordOpened(sql, { recipientId: r.id, now })).ok);
      assert.ok((await recordSigned(sql, svc, { recipientId: r.id, typedName: r.name, ip: '203.0.113.9', userAgent: 'Mozilla/5.0 (X11; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0', now })).ok);
    });
  }
}

for (const database of databases) {
  describe(`signing: the completed mail with the archive's link [${database.name}]`, function () {
    this.timeout(60_000);
    let smtp: MailServer;
    let svc: TestService;
    let ws: ApplyResult;

    before(async () => {
      smtp = await startMailServer();
      svc = await signingService(database.url(), smtp);
      ws = await signingWorkspace(svc);
    });
    after(async () => {
      await svc?.close();
      await smtp?.close();
    });

    const completedTo = (address: string) => smtp.to(address).filter((m) => COMPLETED.test(m.mail.subject ?? ''));

    async function create(options: { key?: 'sender' | 'other'; actAs?: string; signers: Array<{ email: string; name: string }>; title: string }): Promise<string> {
      const { file } = await putFile(svc, ws.workspace_id);
      const res = await svc.client(ws.keys[options.key ?? 'sender']!.secret, options.actAs).signing.RequestFileSignatures({ file_id: file.id, title: options.title, signers: options.signers });
      assert.equal(res.response.status, 200, JSON.stringify(res.error));
      return res.data!.signing_request_id;
    }

    it('every recipient and the sender member get one mail; its link downloads the archive (same SHA-256) for 7 days; /verify is named', async () => {
      const id = await create({
        actAs: ws.members.ada,
        title: 'Supply agreement',
        signers: [
          { email: 'cleo@acme.test', name: 'Cleo Member' },
          { email: 'ext-completed@example.test', name: 'Erik Extern' },
        ],
      });
      await signAll(svc, id);
      await runJobs(svc);
      const row = (await svc.db.sql.one<{ archive_file_id: string | null; archive_sha256: string | null }>(`SELECT archive_file_id, archive_sha256 FROM signing_requests WHERE id = ?`, [id]))!;
      assert.ok(row.archive_file_id && row.archive_sha256, 'the archive is ready');

      const parties = { 'cleo@acme.test': 'Cleo Member', 'ext-completed@example.test': 'Erik Extern', 'ada@acme.test': 'Ada Member' };
      const links: string[] = [];
      for (const [address, name] of Object.entries(parties)) {
        const mails = completedTo(address);
        assert.equal(mails.length, 1, `${address}: exactly one completed mail`);
        const mail = mails[0]!.mail;
        assert.equal(mail.subject, 'Signed by everyone: "Supply agreement"');
        assert.equal(mail.headers.get('x-signing-request'), id);
        const text = mail.text ?? '';
        assert.match(text, new RegExp(`^Hello ${name},`));
        assert.match(text, /Cleo Member, signed .* UTC/);
        assert.match(text, /Erik Extern, signed .* UTC/);
        assert.ok(text.includes('https://sign.acme.example/verify'), 'the verification page');
        assert.ok(text.includes(row.archive_sha256), 'the archive SHA-256');
        assert.ok(text.includes(address === 'ada@acme.test' ? 'the request you sent' : 'which Ada Member (Acme) sent you'), text);
        const html = String(mail.html);
        assert.ok(html.includes('href="https://sign.acme.example/verify"'));
        const link = archiveLinkIn(mail);
        assert.ok(html.includes(link.replace(/&/g, '&amp;')), 'the same link in the HTML part');
        links.push(link);
      }

      // The link downloads the archive itself.
      const sentAt = svc.clock.now();
      for (const link of links) {
        const res = await fetch(onService(link, svc.origin));
        assert.equal(res.status, 200);
        assert.match(res.headers.get('content-disposition') ?? '', /attachment; filename=".*\(signed\)\.pdf"/);
        assert.equal(sha256(Buffer.from(await res.arrayBuffer())), row.archive_sha256);
      }
      // Valid 7 days on the service's clock, then refused.
      svc.clock.set(sentAt + 7 * DAY - 1);
      assert.equal((await fetch(onService(links[0]!, svc.origin), { method: 'HEAD' })).status, 200, 'still valid just before 7 days');
      svc.clock.set(sentAt + 7 * DAY);
      const late = await fetch(onService(links[0]!, svc.origin));
      assert.equal(late.status, 403);
      assert.match(((await late.json()) as { message: string }).message, /expired/);

      // Never a second mail: later job runs, and the archive job again, send nothing.
      await runJobs(svc);
      const deps = { db: svc.db, clock: svc.clock, storage: createBlobStore(svc.db, svc.clock, svc.config.storage), config: svc.config, jobs: svc.jobs, logger: pino({ level: 'silent' }) } as unknown as ModuleDeps<unknown>;
      assert.equal((await archiveRequest(deps, sealSettingsFromEnv({}), { requestId: id, workspaceId: ws.workspace_id })).outcome, 'done');
      await runJobs(svc);
      for (const address of Object.keys(parties)) assert.equal(completedTo(address).length, 1, `${address}: still one`);
    });

    it('CC recipients are not invited, reminded or counted among the signers, and get the completed copy', async () => {
      const { file } = await putFile(svc, ws.workspace_id);
      const api = svc.client(ws.keys.sender!.secret);
      const res = await api.signing.RequestFileSignatures({ file_id: file.id, title: 'CC agreement', signers: [{ email: 'cc-signer@example.test', name: 'Sam Signer' }], cc: [{ email: 'legal@example.test', name: 'Legal' }, { email: 'archive@example.test' }] });
      assert.equal(res.response.status, 200, JSON.stringify(res.error));
      const made = res.data!;
      assert.deepEqual(made.recipients.map((r) => [r.email, r.role, r.invitation, r.name]), [
        ['cc-signer@example.test', 'signer', 'sent', 'Sam Signer'],
        ['legal@example.test', 'cc', 'none', 'Legal'],
        ['archive@example.test', 'cc', 'none', 'archive@example.test'],
      ]);
      await runJobs(svc);
      assert.equal(smtp.to('legal@example.test').length, 0, 'a CC is not invited to sign');
      svc.clock.advance(2 * 3_600_000);
      const reminded = await api.signing.RemindSigners({ signing_request_id: made.signing_request_id });
      assert.equal(reminded.response.status, 200);
      await runJobs(svc);
      assert.equal(smtp.to('legal@example.test').length, 0, 'nor reminded');
      // The one signer signing completes it (the CCs are not waited for).
      const signer = (await listRecipients(svc.db.sql, made.signing_request_id)).find((r) => r.role === 'signer')!;
      const now = svc.clock.now();
      await svc.db.tx(async (sql) => {
        assert.ok((await recordOpened(sql, { recipientId: signer.id, now })).ok);
        assert.ok((await recordSigned(sql, svc, { recipientId: signer.id, typedName: 'Sam Signer', ip: null, userAgent: null, now })).ok);
      });
      assert.equal((await api.signing.GetSigningRequest({ signing_request_id: made.signing_request_id })).data!.status, 'completed');
      await runJobs(svc);
      for (const cc of ['legal@example.test', 'archive@example.test']) assert.equal(completedTo(cc).length, 1, `${cc} gets the completed copy`);
      // A CC's address repeating a signer's is refused.
      const clash = await api.signing.RequestFileSignatures({ file_id: file.id, signers: [{ email: 'x@example.test', name: 'X' }], cc: [{ email: 'X@example.test' }] });
      assert.equal(clash.response.status, 400);
      assert.match(clash.error!.message, /cc\[0\]\.email repeats signers\[0\]\.email/);
    });

    it("sent by a key alone: its creator (an active member) is the sender; a key nobody created mails the owners and admins; a sender who signs gets one mail", async () => {
      const byKey = await create({ title: 'Key agreement', signers: [{ email: 'ext-key@example.test', name: 'Kim Key' }] });
      const byOther = await create({ key: 'other', title: 'Other agreement', signers: [{ email: 'ext-other@example.test', name: 'Otto Other' }] });
      const selfSigned = await create({ actAs: ws.members.bob, title: 'Self agreement', signers: [{ email: 'BOB@acme.test', name: 'Bob Admin' }] });
      const before = smtp.mails.filter((m) => COMPLETED.test(m.mail.subject ?? '')).length;
      for (const id of [byKey, byOther, selfSigned]) await signAll(svc, id);
      await runJobs(svc);
      const sent = smtp.mails.filter((m) => COMPLETED.test(m.mail.subject ?? '')).slice(before);
      const to = (title: string) => sent.filter((m) => m.mail.subject!.includes(title)).flatMap((m) => m.to).sort();
      assert.deepEqual(to('Key agreement'), ['ext-key@example.test', 'olga@acme.test'], 'the key was created by olga');
      assert.deepEqual(to('Other agreement'), ['bob@acme.test', 'ext-other@example.test', 'olga@acme.test'], 'no member created the other key: its owners and admins stand for the sender');
      assert.deepEqual(to('Self agreement'), ['BOB@acme.test'], 'the sender is the recipient: one mail');
    });
  });

  describe(`signing: the completed mail while the mail server is down [${database.name}]`, function () {
    this.timeout(60_000);
    let smtp: MailServer | undefined;
    let svc: TestService;
    let ws: ApplyResult;
    let port: number;

    before(async () => {
      port = await freePort();
      svc = await signingService(database.url(), { url: `smtp://127.0.0.1:${port}` });
      ws = await signingWorkspace(svc);
    });
    after(async () => {
      await svc?.close();
      await smtp?.close();
    });

    it('the archive is ready at once; the mails are retried with backoff and arrive once each when the server is back', async () => {
      const { file } = await putFile(svc, ws.workspace_id);
      const created = await svc.client(ws.keys.sender!.secret, ws.members.ada).signing.RequestFileSignatures({ file_id: file.id, title: 'Outage agreement', signers: [{ email: 'ext-outage@example.test', name: 'Olle Outage' }] });
      assert.equal(created.response.status, 200, JSON.stringify(created.error));
      const id = created.data!.signing_request_id;
      await signAll(svc, id);
      await runJobs(svc);
      const row = (await svc.db.sql.one<{ archive_file_id: string | null }>(`SELECT archive_file_id FROM signing_requests WHERE id = ?`, [id]))!;
      assert.ok(row.archive_file_id, 'the archive does not wait for the mail');
      const jobs = await svc.db.sql.all<{ attempts: number; run_at: number; last_error: string | null }>(`SELECT attempts, run_at, last_error FROM jobs WHERE kind = ? AND dedupe_key LIKE ?`, [
        COMPLETED_MAIL_JOB,
        `${COMPLETED_MAIL_JOB}:${id}:%`,
      ]);
      assert.equal(jobs.length, 2, 'the recipient and the sender');
      for (const j of jobs) {
        assert.equal(Number(j.attempts), 1);
        assert.ok(Number(j.run_at) > svc.clock.now(), 'retried later');
        assert.match(j.last_error ?? '', /mail server is unavailable/);
        assert.doesNotMatch(j.last_error ?? '', /\/files\//, 'never the link');
      }
      assert.equal(await svc.jobs.runDue(), 0, 'not before the backoff');
      smtp = await startMailServer(0, port);
      svc.clock.advance(2_000); // past the first backoff, before the queued invitation's retry
      await runJobs(svc);
      const completed = smtp.mails.filter((m) => COMPLETED.test(m.mail.subject ?? ''));
      assert.deepEqual(completed.flatMap((m) => m.to).sort(), ['ada@acme.test', 'ext-outage@example.test']);
      assert.equal((await svc.db.sql.all(`SELECT id FROM jobs WHERE kind = ?`, [COMPLETED_MAIL_JOB])).length, 0, 'done');
      svc.clock.advance(3_600_000);
      await runJobs(svc);
      assert.equal(smtp.mails.filter((m) => COMPLETED.test(m.mail.subject ?? '')).length, 2, 'never again');
    });
  });

  describe(`signing: the completed mail of a bankid request [${database.name}]`, function () {
    this.timeout(60_000);
    let smtp: MailServer;
    let svc: TestService;
    let ws: ApplyResult;

    before(async () => {
      smtp = await startMailServer();
      svc = await startTestService(database.url(), { mail: mailConfigFromEnv({ SMTP_URL: smtp.url, MAIL_FROM: FROM }), publicUrl: 'https://sign.acme.example', env: { BANKID_PROVIDER: 'test' } });
      ws = await signingWorkspace(svc);
    });
    after(async () => {
      await svc?.close();
      await smtp?.close();
    });

    /** A form post from the signer's page (same origin), without following the redirect. */
    async function form(pathName: string, fields: Record<string, string> = {}): Promise<{ status: number; location: string }> {
      const res = await fetch(`${svc.origin}${pathName}`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded', Origin: svc.origin },
        body: new URLSearchParams(fields).toString(),
      });
      await res.arrayBuffer();
      return { status: res.status, location: res.headers.get('location') ?? '' };
    }

    it('registered with the provider\'s last output when the last signer signs: the signer and the sender get one mail each, the link downloads that PDF', async () => {
      await setCredit(svc.db.sql, ws.workspace_id, 1, svc.clock.now());
      const { file } = await putFile(svc, ws.workspace_id);
      const created = await svc.client(ws.keys.sender!.secret, ws.members.ada).signing.RequestFileSignatures({
        file_id: file.id,
        title: 'BankID agreement',
        signature_method: 'bankid',
        signers: [{ email: 'ext-bankid@example.test', name: 'Bea BankID' }],
      });
      assert.equal(created.response.status, 200, JSON.stringify(created.error));
      const id = created.data!.signing_request_id;
      const token = tokenIn(smtp.to('ext-bankid@example.test')[0]!.mail);
      assert.equal((await form(`/sign/${token}/open`)).status, 303);
      const started = await form(`/sign/${token}/bankid/start`, { agree: 'yes' });
      assert.equal(started.status, 303);
      const order = /\/bankid\/test\/(spo_[0-9a-z]{24})$/.exec(started.location)?.[1];
      assert.ok(order, started.location);
      const done = await form(`/sign/${token}/bankid/return`, { order, personal_number: testPersonalNumber('19850615') });
      assert.equal(done.status, 303);
      const donePage = await fetch(`${svc.origin}${done.location}`);
      assert.match(await donePage.text(), /You receive it too, by e-mail; anyone with the file can check its seal on the <a href="\/verify">verification page<\/a>/);
      await runJobs(svc);
      const row = (await svc.db.sql.one<{ archive_sha256: string | null }>(`SELECT archive_sha256 FROM signing_requests WHERE id = ?`, [id]))!;
      assert.ok(row.archive_sha256);
      for (const address of ['ext-bankid@example.test', 'ada@acme.test']) {
        const mails = smtp.to(address).filter((m) => COMPLETED.test(m.mail.subject ?? ''));
        assert.equal(mails.length, 1, address);
        assert.match(mails[0]!.mail.text ?? '', /every signer's BankID signature/);
        const res = await fetch(onService(archiveLinkIn(mails[0]!.mail), svc.origin));
        assert.equal(res.status, 200);
        assert.equal(sha256(Buffer.from(await res.arrayBuffer())), row.archive_sha256);
      }
    });
  });
}
