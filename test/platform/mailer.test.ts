import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { type AddressObject, simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';
import { createService, migrations } from '../../app.ts';
import { type Database, openDatabase } from '../../db/database.ts';
import { FakeClock } from '../../server/clock.ts';
import { loadConfig } from '../../server/config.ts';
import { createMailer, mailConfigFromEnv, type Mailer, MailUnavailableError, mailTemplates } from '../../server/mailer.ts';
import { SmtpMailer } from '../../server/mailer/smtp.ts';
import { testCertificates } from '../support/receiver.ts';
import { capturedLogger, databases } from '../support/service.ts';
import { admin } from '../support/cli.ts';

const DAY = 86_400_000;
const USER = 'smtp-user-q7k2';
const PASS = 'pa55:w0rd/Secret!';
const FROM = 'Acme Contracts <contracts@acme.example>';

interface Received {
  envelopeFrom: string;
  envelopeTo: string[];
  raw: Buffer;
}

/**
 * A real SMTP server on 127.0.0.1 that wants USER/PASS, refuses `refused@...` at RCPT with 550 and defers
 * `greylist@...` with 450; a mail to `blocked@...` is refused after DATA with 554, to `busy@...` with 451.
 */
async function startSmtpServer() {
  const received: Received[] = [];
  const server = new SMTPServer({
    logger: false,
    disabledCommands: ['STARTTLS'],
    allowInsecureAuth: true,
    authMethods: ['PLAIN', 'LOGIN'],
    onAuth(auth, _session, callback) {
      if (auth.username === USER && auth.password === PASS) return callback(null, { user: USER });
      return callback(Object.assign(new Error('5.7.8 Authentication credentials invalid'), { responseCode: 535 }));
    },
    onRcptTo(address, _session, callback) {
      if (address.address.startsWith('refused@')) return callback(Object.assign(new Error('5.1.1 <' + address.address + '>: mailbox unavailable'), { responseCode: 550 }));
      if (address.address.startsWith('greylist@')) return callback(Object.assign(new Error('4.7.1 greylisted, try again later'), { responseCode: 450 }));
      return callback();
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const to = session.envelope.rcptTo.map((r) => r.address);
        if (to.some((a) => a.startsWith('blocked@'))) return callback(Object.assign(new Error('5.7.1 message refused as spam'), { responseCode: 554 }));
        if (to.some((a) => a.startsWith('busy@'))) return callback(Object.assign(new Error('4.3.0 try again later'), { responseCode: 451 }));
        received.push({
          envelopeFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          envelopeTo: session.envelope.rcptTo.map((r) => r.address),
          raw: Buffer.concat(chunks),
        });
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.server.address() as net.AddressInfo).port;
  return { port, received, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

/** One service process as the entry points build it, with its pino output captured. */
async function startService(databaseUrl: string, env: Record<string, string>) {
  const config = { ...loadConfig(env), databaseUrl };
  const clock = new FakeClock();
  const { logger, logs } = capturedLogger();
  const db = openDatabase(databaseUrl);
  await db.migrate(migrations);
  const service = createService({ db, clock, config, logger });
  return {
    db,
    clock,
    logger,
    service,
    mailer: service.mailer,
    logs,
    async close() {
      await service.closeEndpoints();
      const schema = db.dialect === 'pg' ? new URL(databaseUrl).searchParams.get('schema') : null;
      if (schema) await db.knex.raw(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await db.close();
    },
  };
}


const addresses = (field: AddressObject | AddressObject[] | undefined) => (Array.isArray(field) ? field : field ? [field] : []).flatMap((a) => a.value.map((v) => v.address));

function templatesFolder(): URL {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wsops-mail-'));
  fs.writeFileSync(path.join(dir, 'invite.text.eta'), 'Hello <%= it.name %>,\n\n<%= it.sender %> asks you to sign "<%= it.title %>".\n\nOpen: <%= it.link %>\n');
  fs.writeFileSync(path.join(dir, 'invite.html.eta'), '<p>Hello <%= it.name %>,</p>\n<p><%= it.sender %> asks you to sign <strong><%= it.title %></strong>.</p>\n<p><a href="<%= it.link %>">Open the document</a></p>\n');
  return pathToFileURL(dir + path.sep);
}

for (const database of databases) {
  describe(`mailer: SMTP through a real server [${database.name}]`, function () {
    this.timeout(30_000);
    let smtp: Awaited<ReturnType<typeof startSmtpServer>>;
    let svc: Awaited<ReturnType<typeof startService>>;
    let smtpUrl: string;

    before(async () => {
      smtp = await startSmtpServer();
      smtpUrl = `smtp://${encodeURIComponent(USER)}:${encodeURIComponent(PASS)}@127.0.0.1:${smtp.port}`;
      svc = await startService(database.url(), { SMTP_URL: smtpUrl, MAIL_FROM: FROM });
    });
    after(async () => {
      await svc?.close();
      await smtp?.close();
    });

    it('sends text and HTML from templates; a refused address comes back in rejected with the server reason, the others are delivered', async () => {
      assert.equal(svc.mailer.kind, 'smtp');
      const link = 'http://localhost:8080/sign/tok_4f9a';
      const body = mailTemplates(templatesFolder()).render('invite', { subject: 'Please sign: Q3 <MSA>', name: 'Åsa & Bo', sender: 'Kim', title: 'Q3 <MSA>', link });
      const before = smtp.received.length;
      const result = await svc.mailer.send({
        to: ['ana@example.test', 'refused@example.test', 'bo@example.test'],
        subject: 'Please sign: Q3 <MSA> — Åsa',
        ...body,
        headers: { 'X-Request-Id': 'sr_123' },
        tag: 'test.invite',
      });
      assert.deepEqual(result.accepted, ['ana@example.test', 'bo@example.test']);
      assert.equal(result.rejected.length, 1);
      assert.equal(result.rejected[0]!.address, 'refused@example.test');
      assert.match(result.rejected[0]!.reason, /^550 .*mailbox unavailable/);
      assert.equal(result.rejected[0]!.temporary, false);
      assert.match(result.messageId, /^<[0-9a-f-]+@acme\.example>$/);

      assert.equal(smtp.received.length, before + 1, 'one message for the accepted recipients');
      const got = smtp.received.at(-1)!;
      assert.equal(got.envelopeFrom, 'contracts@acme.example');
      assert.deepEqual(got.envelopeTo, ['ana@example.test', 'bo@example.test']);
      const parsed = await simpleParser(got.raw);
      assert.equal(parsed.subject, 'Please sign: Q3 <MSA> — Åsa');
      assert.deepEqual(addresses(parsed.from), ['contracts@acme.example']);
      assert.equal((parsed.from as AddressObject).value[0]!.name, 'Acme Contracts');
      assert.deepEqual(addresses(parsed.to), ['ana@example.test', 'refused@example.test', 'bo@example.test']);
      assert.equal(parsed.messageId, result.messageId);
      assert.equal(parsed.headers.get('x-request-id'), 'sr_123');
      assert.equal(parsed.text, `Hello Åsa & Bo,\n\nKim asks you to sign "Q3 <MSA>".\n\nOpen: ${link}\n`, 'the text part is not HTML-escaped');
      assert.ok(parsed.html, 'an HTML part');
      assert.match(parsed.html as string, /<p>Hello Åsa &amp; Bo,<\/p>/);
      assert.match(parsed.html as string, /<strong>Q3 &lt;MSA&gt;<\/strong>/);
      assert.match(parsed.html as string, /<a href="http:\/\/localhost:8080\/sign\/tok_4f9a">/);
      assert.match(parsed.html as string, /<title>Please sign: Q3 &lt;MSA&gt;<\/title>/, 'inside the mail layout');
    });

    it('every recipient refused, or none valid: an answer per address, nothing delivered, nothing thrown', async () => {
      const before = smtp.received.length;
      const all = await svc.mailer.send({ to: 'refused@example.test', subject: 'Hi', text: 'x', html: '<p>x</p>' });
      assert.deepEqual(all.accepted, []);
      assert.deepEqual(all.rejected.map((r) => r.address), ['refused@example.test']);
      assert.match(all.rejected[0]!.reason, /^550 /);
      const bad = await svc.mailer.send({ to: ['not an address', 'a@b@c', 'ok@example.test'], subject: 'Hi', text: 'x', html: '<p>x</p>' });
      assert.deepEqual(bad.accepted, ['ok@example.test']);
      assert.deepEqual(bad.rejected, [
        { address: 'not an address', reason: 'not an e-mail address', temporary: false },
        { address: 'a@b@c', reason: 'not an e-mail address', temporary: false },
      ]);
      assert.equal(smtp.received.length, before + 1);
      assert.deepEqual(smtp.received.at(-1)!.envelopeTo, ['ok@example.test']);
    });

    it('a deferred recipient is rejected as temporary; a message refused after DATA is refused for each recipient, or throws when deferred', async () => {
      const before = smtp.received.length;
      const grey = await svc.mailer.send({ to: ['greylist@example.test', 'ok2@example.test'], subject: 'Hi', text: 'x', html: 'x' });
      assert.deepEqual(grey.accepted, ['ok2@example.test']);
      assert.equal(grey.rejected[0]!.temporary, true);
      assert.match(grey.rejected[0]!.reason, /^450 /);
      const blocked = await svc.mailer.send({ to: ['blocked@example.test', 'ok3@example.test'], subject: 'Hi', text: 'x', html: 'x' });
      assert.deepEqual(blocked.accepted, []);
      assert.deepEqual(blocked.rejected.map((r) => [r.address, r.temporary]), [['blocked@example.test', false], ['ok3@example.test', false]]);
      assert.match(blocked.rejected[0]!.reason, /^554 .*spam/);
      const busy = await svc.mailer.send({ to: 'busy@example.test', subject: 'Hi', text: 'x', html: 'x' }).catch((e: unknown) => e);
      assert.ok(busy instanceof MailUnavailableError, String(busy));
      assert.equal(busy.kind, 'refused');
      assert.equal(busy.retryable, true);
      assert.match(busy.message, /451/);
      assert.equal(smtp.received.length, before + 1, 'only the greylisted mail was taken');
    });

    it("refuses a caller's malformed message (header injection, empty subject) before sending", async () => {
      await assert.rejects(svc.mailer.send({ to: 'a@example.test', subject: 'Hi\r\nBcc: x@evil.test', text: 'x', html: 'x' }), /subject must be one non-empty line/);
      await assert.rejects(svc.mailer.send({ to: 'a@example.test', subject: 'Hi', text: 'x', html: 'x', headers: { Bcc: 'x@evil.test' } }), /header "Bcc" is not allowed/);
      await assert.rejects(svc.mailer.send({ to: 'a@example.test', subject: 'Hi', text: 'x', html: 'x', headers: { 'X-A': 'one\nBcc: x@evil.test' } }), /must be one line/);
      await assert.rejects(svc.mailer.send({ to: [], subject: 'Hi', text: 'x', html: 'x' }), /at least one recipient/);
    });

    it('an unreachable server, refused credentials and a server that never greets throw MailUnavailableError', async () => {
      const deps = { db: svc.db, clock: svc.clock, logger: svc.logger };
      const unreachable = createMailer(mailConfigFromEnv({ SMTP_URL: `smtp://${USER}:${encodeURIComponent(PASS)}@127.0.0.1:${await closedPort()}`, MAIL_FROM: FROM }), deps);
      const err = await unreachable.send({ to: 'a@example.test', subject: 'Hi', text: 'x', html: 'x' }).then(
        () => assert.fail('sent'),
        (e: unknown) => e,
      );
      assert.ok(err instanceof MailUnavailableError, String(err));
      assert.equal(err.kind, 'connection');
      assert.equal(err.retryable, true);
      assert.match(err.message, /cannot be reached \(ECONNREFUSED\)/);
      await unreachable.close();

      const wrong = createMailer(mailConfigFromEnv({ SMTP_URL: `smtp://${USER}:wrong-password@127.0.0.1:${smtp.port}`, MAIL_FROM: FROM }), deps);
      const authErr = await wrong.send({ to: 'a@example.test', subject: 'Hi', text: 'x', html: 'x' }).catch((e: unknown) => e);
      assert.ok(authErr instanceof MailUnavailableError);
      assert.equal(authErr.kind, 'auth');
      assert.equal(authErr.retryable, false);
      assert.match(authErr.message, /refused the credentials: .*535/);
      await wrong.close();

      // Accepts the connection and says nothing: the greeting timeout ends the wait (here shortened).
      const silent = net.createServer(() => {});
      await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
      const silentPort = (silent.address() as net.AddressInfo).port;
      const settings = { ...mailConfigFromEnv({ SMTP_URL: `smtp://127.0.0.1:${silentPort}`, MAIL_FROM: FROM }).smtp!, greetingTimeoutMs: 300, auth: null };
      const mute = new SmtpMailer(settings, FROM, svc.logger);
      const timeoutErr = await mute.send({ to: 'a@example.test', subject: 'Hi', text: 'x', html: 'x' }).catch((e: unknown) => e);
      assert.ok(timeoutErr instanceof MailUnavailableError);
      assert.equal(timeoutErr.kind, 'connection');
      assert.match(timeoutErr.message, /ETIMEDOUT/);
      await mute.close();
      silent.close();

      // smtps:// verifies the server's certificate: one from an unknown CA is refused, nothing is sent.
      const certs = testCertificates();
      const tlsServer = new SMTPServer({ secure: true, key: certs.keyPem, cert: certs.certPem, logger: false, authOptional: true, onData: (s, _session, cb) => s.resume().on('end', () => cb()) });
      tlsServer.on('error', () => {}); // the client hanging up on its certificate, as expected
      await new Promise<void>((resolve) => tlsServer.listen(0, '127.0.0.1', resolve));
      const tlsPort = (tlsServer.server.address() as net.AddressInfo).port;
      const untrusted = createMailer(mailConfigFromEnv({ SMTP_URL: `smtps://127.0.0.1:${tlsPort}`, MAIL_FROM: FROM }), deps);
      const tlsErr = await untrusted.send({ to: 'a@example.test', subject: 'Hi', text: 'x', html: 'x' }).catch((e: unknown) => e);
      assert.ok(tlsErr instanceof MailUnavailableError, String(tlsErr));
      assert.equal(tlsErr.kind, 'connection');
      assert.match(tlsErr.message, /certificate/i);
      await untrusted.close();
      await new Promise<void>((resolve) => tlsServer.close(() => resolve()));
    });

    it('sends many mails at once over the pool; closing lets the sends in flight finish and refuses new ones', async () => {
      const before = smtp.received.length;
      const started = performance.now();
      const results = await Promise.all(
        Array.from({ length: 60 }, (_, i) => svc.mailer.send({ to: `r${i}@example.test`, subject: `Mail ${i}`, text: `n ${i}`, html: `<p>${i}</p>` })),
      );
      const ms = performance.now() - started;
      assert.deepEqual(results.map((r) => r.accepted[0]), Array.from({ length: 60 }, (_, i) => `r${i}@example.test`));
      assert.equal(smtp.received.length, before + 60);
      assert.equal(new Set(results.map((r) => r.messageId)).size, 60);
      console.log(`      60 mails through the pool in ${Math.round(ms)} ms`);

      const closing = createMailer(mailConfigFromEnv({ SMTP_URL: smtpUrl, MAIL_FROM: FROM }), { db: svc.db, clock: svc.clock, logger: svc.logger });
      const inFlight = Array.from({ length: 5 }, (_, i) => closing.send({ to: `late${i}@example.test`, subject: 'Late', text: 'x', html: 'x' }));
      await closing.close();
      assert.deepEqual((await Promise.all(inFlight)).map((r) => r.accepted.length), [1, 1, 1, 1, 1]);
      const afterClose = await closing.send({ to: 'x@example.test', subject: 'Too late', text: 'x', html: 'x' }).catch((e: unknown) => e);
      assert.ok(afterClose instanceof MailUnavailableError && afterClose.retryable, String(afterClose));
    });

    it('logs the SMTP host only: the credentials of SMTP_URL never appear', async () => {
      const logs = svc.logs();
      assert.match(logs, new RegExp(`mail: sent through SMTP at 127\\.0\\.0\\.1:${smtp.port}`));
      assert.match(logs, /"msg":"mail sent"/);
      assert.match(logs, /mail not sent: SMTP server 127\.0\.0\.1:\d+ refused the credentials/);
      for (const secret of [PASS, encodeURIComponent(PASS), USER, 'wrong-password', smtpUrl]) assert.ok(!logs.includes(secret), `logs hold ${secret}`);
      assert.ok(!JSON.stringify(mailConfigFromEnv({ SMTP_URL: smtpUrl, MAIL_FROM: FROM })).includes(PASS), 'the settings print without the password');
      assert.ok(!logs.includes('tok_4f9a'), 'links in mails are not logged');
    });
  });

  describe(`mailer: the development mailbox [${database.name}]`, function () {
    this.timeout(60_000);
    let svc: Awaited<ReturnType<typeof startService>>;
    let databaseUrl: string;
    let mailer: Mailer;

    before(async () => {
      databaseUrl = database.url();
      svc = await startService(databaseUrl, {});
      mailer = svc.mailer;
    });
    after(async () => svc?.close());

    it('is the default without SMTP_URL, and the start-up log says so and how to read it', () => {
      assert.equal(mailer.kind, 'mailbox');
      assert.match(svc.logs(), /mail is NOT delivered: it goes to the development mailbox/);
      assert.match(svc.logs(), /mailbox: operators read the development mailbox with `npm run admin -- mail list`/);
    });

    it('stores each mail for every process; the admin CLI lists and shows it; .invalid addresses are refused', async () => {
      const sent = await mailer.send({
        to: ['ana@example.test', 'ghost@nowhere.invalid'],
        subject: 'Please sign: NDA',
        text: 'Open http://localhost:8080/sign/tok_x1',
        html: '<p><a href="http://localhost:8080/sign/tok_x1">Open</a></p>',
        tag: 'test.invite',
        workspaceId: 'ws_mailbox_a',
        headers: { 'X-Request-Id': 'sr_1' },
      });
      assert.deepEqual(sent.accepted, ['ana@example.test']);
      assert.equal(sent.rejected[0]!.address, 'ghost@nowhere.invalid');
      assert.match(sent.rejected[0]!.reason, /^550 /);
      svc.clock.advance(1000);
      await mailer.send({ to: 'bo@example.test', subject: 'Reminder', text: 'later', html: '<p>later</p>', workspaceId: 'ws_mailbox_b' });
      const none = await mailer.send({ to: 'x@y.invalid', subject: 'Lost', text: 'x', html: 'x' });
      assert.deepEqual(none.accepted, []);

      // Another process (the admin CLI) reads the same mailbox.
      const list = await admin(databaseUrl, 'mail', 'list');
      assert.equal(list.code, 0, list.stderr);
      const rows = JSON.parse(list.stdout) as { id: string; to: string[]; subject: string; workspace_id: string | null; tag: string | null; created_at: string }[];
      assert.deepEqual(rows.map((r) => r.subject), ['Reminder', 'Please sign: NDA'], 'newest first; a mail refused for everyone is not stored');
      assert.deepEqual(rows[1]!.to, ['ana@example.test']);
      assert.equal(rows[1]!.tag, 'test.invite');
      assert.equal(rows[1]!.created_at, new Date(svc.clock.now() - 1000).toISOString());
      assert.ok(!('text' in rows[0]!), 'the list has no bodies');

      const filtered = JSON.parse((await admin(databaseUrl, 'mail', 'list', '--to', 'ANA@example.test')).stdout) as { id: string }[];
      assert.deepEqual(filtered.map((r) => r.id), [rows[1]!.id]);
      const byWorkspace = JSON.parse((await admin(databaseUrl, 'mail', 'list', '--workspace', 'ws_mailbox_b')).stdout) as { subject: string }[];
      assert.deepEqual(byWorkspace.map((r) => r.subject), ['Reminder']);

      const show = await admin(databaseUrl, 'mail', 'show', '--id', rows[1]!.id);
      assert.equal(show.code, 0, show.stderr);
      const mail = JSON.parse(show.stdout) as Record<string, unknown>;
      assert.equal(mail.text, 'Open http://localhost:8080/sign/tok_x1');
      assert.equal(mail.html, '<p><a href="http://localhost:8080/sign/tok_x1">Open</a></p>');
      assert.equal(mail.from, 'Workspace Operations <no-reply@localhost>');
      assert.equal(mail.message_id, sent.messageId);
      assert.deepEqual(mail.headers, { 'X-Request-Id': 'sr_1' });
      assert.equal(mail.workspace_id, 'ws_mailbox_a');

      const missing = await admin(databaseUrl, 'mail', 'show', '--id', 'ml_nope');
      assert.equal(missing.code, 1);
      assert.match(missing.stderr, /^admin: no mail ml_nope in the development mailbox/);
      const badLimit = await admin(databaseUrl, 'mail', 'list', '--limit', '0');
      assert.equal(badLimit.code, 1);
      assert.match(badLimit.stderr, /--limit must be a whole number from 1 to 500/);
      assert.ok(!svc.logs().includes('tok_x1'), 'links in mails are not logged');
    });

    it('prunes mail older than 7 days with the recurring job', async () => {
      const count = async (db: Database) => Number((await db.sql.one<{ n: number }>('SELECT COUNT(*) AS n FROM mailbox_messages'))!.n);
      const prune = async () => {
        svc.clock.advance(60 * 60_000);
        await svc.service.jobs.scheduleRecurring();
        await svc.service.jobs.runDue();
      };
      const before = await count(svc.db);
      assert.ok(before >= 2);
      svc.clock.advance(6 * DAY);
      await mailer.send({ to: 'late@example.test', subject: 'Six days later', text: 'x', html: 'x' });
      await prune();
      assert.equal(await count(svc.db), before + 1, 'nothing is 7 days old yet');
      svc.clock.advance(DAY);
      await prune();
      assert.equal(await count(svc.db), 1, 'the older mails are gone');
      svc.clock.advance(6 * DAY);
      await prune();
      assert.equal(await count(svc.db), 0);
    });
  });
}

describe('mailer settings', () => {
  it('reads SMTP_URL and MAIL_FROM with readable errors that never repeat the URL', () => {
    assert.equal(loadConfig({}).mail.smtp, null);
    const ok = mailConfigFromEnv({ SMTP_URL: 'smtps://u%40x:p%3Ass@mail.example.com', MAIL_FROM: 'ops@example.com' });
    assert.deepEqual({ ...ok.smtp, auth: ok.smtp!.auth }, {
      host: 'mail.example.com', port: 465, secure: true, display: 'mail.example.com:465', auth: { user: 'u@x', pass: 'p:ss' }, requireTls: false,
      connectionTimeoutMs: 10_000, greetingTimeoutMs: 10_000, socketTimeoutMs: 60_000, maxConnections: 3,
    });
    assert.equal(mailConfigFromEnv({ SMTP_URL: 'smtp://relay.internal', MAIL_FROM: 'a@b.example' }).smtp!.port, 587);
    // Credentials over smtp:// leave this machine only inside STARTTLS.
    const tls = (url: string) => mailConfigFromEnv({ SMTP_URL: url, MAIL_FROM: 'a@b.example' }).smtp!.requireTls;
    assert.equal(tls('smtp://u:p@mail.example.com'), true);
    assert.equal(tls('smtp://mail.example.com:25'), false);
    assert.equal(tls('smtp://u:p@127.0.0.1:2525'), false);
    assert.equal(tls('smtp://u:p@[::1]:2525'), false);
    assert.throws(() => loadConfig({ SMTP_URL: 'smtp://u:hunter22@mail.example.com' }), /MAIL_FROM is required when SMTP_URL is set/);
    const refusals: [Record<string, string>, RegExp][] = [
      [{ SMTP_URL: 'https://u:hunter22@mail.example.com', MAIL_FROM: 'a@b.example' }, /SMTP_URL must start with smtp:\/\/ or smtps:\/\/ \(got "https:\/\/"\)/],
      [{ SMTP_URL: 'not a url hunter22', MAIL_FROM: 'a@b.example' }, /SMTP_URL must be a URL/],
      [{ SMTP_URL: 'smtp://u:hunter22@mail.example.com/x?y=1', MAIL_FROM: 'a@b.example' }, /SMTP_URL takes no path/],
      [{ SMTP_URL: 'smtp://u:hunter22@mail.example.com', MAIL_FROM: 'not an address' }, /MAIL_FROM must be one sender address/],
      [{ SMTP_URL: 'smtp://u:hunter22@mail.example.com', MAIL_FROM: 'a@b.example, c@d.example' }, /MAIL_FROM must be one sender address/],
    ];
    for (const [env, expected] of refusals) {
      assert.throws(() => loadConfig(env), (err: Error) => expected.test(err.message) && !err.message.includes('hunter22'), JSON.stringify(env));
    }
  });
});
