/**
 * What the signing request tests share: the SMTP server of test/support/smtp.ts (scripted refusals:
 * permanent, temporary, temporary a few times), a workspace with signing keys, files put straight into the
 * documents tables (the upload path has its own tests), and reading links out of the mails.
 */
import crypto from 'node:crypto';
import type { ParsedMail } from 'mailparser';
import { createFile, type StoredFile } from '../../handlers/documents/files.ts';
import type { ApplyResult } from '../../server/admin.ts';
import { mailConfigFromEnv } from '../../server/mailer.ts';
import { createBlobStore } from '../../server/storage.ts';
import { acme } from '../support/fixtures.ts';
import { startTestService, type TestService } from '../support/service.ts';
import type { MailServer } from '../support/smtp.ts';
import { samplePdf, signerLinkIn } from './signerKit.ts';

export const FROM = 'Acme Contracts <contracts@acme.example>';
// The SMTP server lives with the shared test support; the signing tests import it from here too.
export { freePort, type Mail, type MailServer, SLOW_MS, startMailServer } from '../support/smtp.ts';

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
