/**
 * What the signing request tests share: a real SMTP server with scripted refusals (permanent,
 * temporary, temporary a few times), a workspace with signing keys, files put straight into the
 * documents tables (the upload path has its own tests), and reading links out of the mails.
 */
import crypto from 'node:crypto';
import net from 'node:net';
import { type ParsedMail, simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';
import { createFile, type StoredFile } from '../../handlers/documents/files.ts';
import type { ApplyResult } from '../../server/admin.ts';
import { mailConfigFromEnv } from '../../server/mailer.ts';
import { createBlobStore } from '../../server/storage.ts';
import { acme } from '../support/fixtures.ts';
import { startTestService, type TestService } from '../support/service.ts';
import { samplePdf, signerLinkIn } from './signerKit.ts';

export const FROM = 'Acme Contracts <contracts@acme.example>';
/** How long the test server takes to answer a mail to `slow...@`. */
export const SLOW_MS = 400;

export interface Mail {
  to: string[];
  mail: ParsedMail;
}

/**
 * A real SMTP server on 127.0.0.1: `refused...@` is refused at RCPT with 550 (for good),
 * `greylist...@` always with 450 (for now), `flaky...@` with 450 the first `flakyTimes` tries and
 * then taken; `slow...@` is taken but answered after SLOW_MS. Every taken mail is kept, parsed.
 */
export async function startMailServer(flakyTimes = 2, port = 0) {
  const mails: Mail[] = [];
  const tries = new Map<string, number>();
  const server = new SMTPServer({
    logger: false,
    disabledCommands: ['STARTTLS', 'AUTH'],
    onRcptTo(address, _session, callback) {
      const a = address.address;
      if (a.startsWith('refused')) return callback(Object.assign(new Error(`5.1.1 <${a}>: mailbox unavailable`), { responseCode: 550 }));
      if (a.startsWith('greylist')) return callback(Object.assign(new Error('4.7.1 greylisted, try again later'), { responseCode: 450 }));
      if (a.startsWith('flaky')) {
        const n = (tries.get(a) ?? 0) + 1;
        tries.set(a, n);
        if (n <= flakyTimes) return callback(Object.assign(new Error('4.2.2 mailbox full, try again later'), { responseCode: 452 }));
      }
      return callback();
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const to = session.envelope.rcptTo.map((r) => r.address);
        simpleParser(Buffer.concat(chunks)).then(
          (mail) => {
            mails.push({ to, mail });
            // slow...@: taken, but answered only after SLOW_MS (a server slower than the request's wait).
            if (to.some((a) => a.startsWith('slow'))) setTimeout(() => callback(), SLOW_MS);
            else callback();
          },
          (err: Error) => callback(err),
        );
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const bound = (server.server.address() as net.AddressInfo).port;
  return {
    url: `smtp://127.0.0.1:${bound}`,
    mails,
    /** The mails taken for an address, oldest first. */
    to: (address: string) => mails.filter((m) => m.to.includes(address)),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
export type MailServer = Awaited<ReturnType<typeof startMailServer>>;

/** A loopback port nothing listens on (for now). */
export async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

/** A test service whose mail goes through `smtp`. */
export function signingService(databaseUrl: string, smtp: Pick<MailServer, 'url'>): Promise<TestService> {
  return startTestService(databaseUrl, { mail: mailConfigFromEnv({ SMTP_URL: smtp.url, MAIL_FROM: FROM }), publicUrl: 'https://sign.acme.example' });
}

/**
 * Acme (an owner olga, admin bob, members ada and cleo) with keys: `sender` (signing.*, may act for
 * everyone), `other` (signing.*, no delegation) and `docs` (documents.*).
 */
export async function signingWorkspace(svc: TestService): Promise<ApplyResult> {
  const spec = acme();
  spec.members!.cleo = { name: 'Cleo Member', email: 'cleo@acme.test', role: 'member' };
  spec.keys!.sender = { name: 'Contracts integration', operations: ['signing.*', 'documents.*'], delegation: 'all', created_by: 'olga' };
  spec.keys!.other = { name: 'Another integration', operations: ['signing.*'] };
  return svc.apply(spec);
}

/** A PDF file of the workspace (or `owner`'s private file), as a completed upload leaves it. */
export async function putFile(svc: TestService, workspaceId: string, options: { owner?: string | null; filename?: string; pages?: number; keyId?: string | null } = {}): Promise<{ file: StoredFile; bytes: Buffer }> {
  const bytes = Buffer.from(await samplePdf(options.filename ?? 'Services agreement', options.pages ?? 2));
  const storage = createBlobStore(svc.db, svc.clock, svc.config.storage);
  const blob = await storage.put(null, [bytes], { contentType: 'application/pdf' });
  const file = await createFile(
    svc.db.sql,
    {
      workspaceId,
      ownerMemberId: options.owner ?? null,
      createdByKeyId: options.keyId ?? null,
      filename: `${options.filename ?? 'Services agreement'}.pdf`,
      contentType: 'application/pdf',
      size: bytes.length,
      sha256: blob.sha256,
      pageCount: options.pages ?? 2,
      blobId: blob.id,
      source: 'upload',
    },
    svc.clock.now(),
  );
  return { file, bytes };
}

export const sha256 = (b: Uint8Array) => crypto.createHash('sha256').update(b).digest('hex');

/** The token of the signer's link in a mail. */
export function tokenIn(mail: ParsedMail): string {
  return signerLinkIn(mail).split('/sign/')[1]!;
}

/** Runs every job due now, again until none is left (a job may enqueue another due now). */
export async function runJobs(svc: TestService): Promise<void> {
  for (let i = 0; i < 10; i++) if (!(await svc.jobs.runDue())) return;
}

/** The request's history as stored (kinds in order). */
export async function eventKinds(svc: TestService, requestId: string): Promise<string[]> {
  const rows = await svc.db.sql.all<{ kind: string }>(`SELECT kind FROM signing_events WHERE request_id = ? ORDER BY seq`, [requestId]);
  return rows.map((r) => r.kind);
}

export async function notices(svc: TestService, workspaceId: string, kind: string) {
  return svc.db.sql.all<{ member_id: string; title: string; body: string }>(`SELECT member_id, title, body FROM inbox_notifications WHERE workspace_id = ? AND kind = ? ORDER BY member_id`, [
    workspaceId,
    kind,
  ]);
}
