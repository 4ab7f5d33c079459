/**
 * The "completed" mail: when a request's signed archive is ready, every recipient and the sender get
 * one mail with a signed download link of the archive (valid 7 days) and the address of the public
 * verification page. Rendered from `mail/completed.{text,html}.eta`.
 *
 * Sent through the job queue, never from the transaction that registers the archive: that transaction
 * (archiveJob.ts for standard, bankid/flow.ts for bankid) enqueues one `signing.completed-mail` job per
 * party, keyed by the request id and the address, so each party is mailed once even when the archive
 * is registered by a retried job; the mail's own failures are retried by the job kit with its backoff
 * (1 s doubling, at most an hour apart) and never hold up or undo the archive. A permanent refusal
 * of an address (5xx) is logged and not retried. The link is minted when the mail is sent, so it is
 * valid 7 days from then.
 */
import type { Sql } from '../../../db/database.ts';
import type { JobDefinition, JobQueue } from '../../../server/jobs.ts';
import { MailUnavailableError, mailTemplates } from '../../../server/mailer.ts';
import { filesOf } from '../files.ts';
import { humanTime, type SigningRuntime, senderOf } from '../request/invitationMail.ts';
import { type DbSigningRequestRow, findMember, findRequestById, keyCreator, listRecipients, signersOf } from '../queries.ts';

export const COMPLETED_MAIL_JOB = 'signing.completed-mail';
/** How long the archive's link in the mail works. */
export const COMPLETED_LINK_TTL_MS = 7 * 86_400_000;

export interface CompletedMailPayload {
  readonly requestId: string;
  readonly workspaceId: string;
  readonly to: string;
  readonly name: string;
  readonly role: 'recipient' | 'sender';
}

const templates = mailTemplates(new URL('./mail/', import.meta.url));

/**
 * Who gets the completed mail: every recipient, and the sender: the member the request was sent for,
 * or else the member who created the key that sent it, each only while an active member; a request a
 * key with no member creator sent (one the operator made) goes to the workspace's active owners and
 * admins instead. An address is mailed once (a sender who is also a recipient gets one mail).
 */
export async function completedMailParties(sql: Sql, request: DbSigningRequestRow, options: { senderFirst?: boolean } = {}): Promise<Array<{ to: string; name: string; role: 'recipient' | 'sender' }>> {
  const parties: Array<{ to: string; name: string; role: 'recipient' | 'sender' }> = [];
  const seen = new Set<string>();
  const add = (to: string, name: string, role: 'recipient' | 'sender') => {
    if (seen.has(to.toLowerCase())) return;
    seen.add(to.toLowerCase());
    parties.push({ to, name, role });
  };
  const recipients = await listRecipients(sql, request.id);
  // `senderFirst`: a sender who is also a recipient is mailed as the sender (the declined mail says why to the sender only).
  if (!options.senderFirst) for (const r of recipients) add(r.email, r.name, 'recipient');
  const memberId = request.owner_member_id ?? (request.created_by_key_id ? await keyCreator(sql, request.created_by_key_id) : null);
  const member = memberId ? await findMember(sql, request.workspace_id, memberId) : undefined;
  if (member && member.disabled_at === null) {
    add(member.email, member.name, 'sender');
  } else if (memberId === null && !request.private) {
    // A key the operator made (no member creator) sent it: its workspace's owners and admins stand for the sender.
    const admins = await sql.all<{ email: string; name: string }>(
      `SELECT email, name FROM members WHERE workspace_id = ? AND role IN ('owner', 'admin') AND disabled_at IS NULL ORDER BY created_at, id`,
      [request.workspace_id],
    );
    for (const a of admins) add(a.email, a.name, 'sender');
  }
  if (options.senderFirst) for (const r of recipients) add(r.email, r.name, 'recipient');
  return parties;
}

/**
 * Enqueues the completed mails of a request whose archive was just registered, in `sql` (that
 * transaction): one job per party, so the mails exist exactly when the archive does.
 */
export async function enqueueCompletedMails(sql: Sql, jobs: Pick<JobQueue, 'enqueue'>, request: DbSigningRequestRow): Promise<number> {
  let n = 0;
  for (const party of await completedMailParties(sql, request)) {
    const payload: CompletedMailPayload = { requestId: request.id, workspaceId: request.workspace_id, ...party };
    if (await jobs.enqueue(sql, COMPLETED_MAIL_JOB, payload, { key: `${COMPLETED_MAIL_JOB}:${request.id}:${party.to.toLowerCase()}` })) n++;
  }
  return n;
}

/** A party mail job's payload (completed and declined mails share it), checked; `job` names the job in the error. */
export function partyPayloadOf(payload: unknown, job: string): CompletedMailPayload {
  const p = payload as Partial<CompletedMailPayload> | null;
  if (!p || typeof p.requestId !== 'string' || typeof p.workspaceId !== 'string' || typeof p.to !== 'string' || typeof p.name !== 'string') {
    throw new Error(`${job} needs {requestId, workspaceId, to, name, role}`);
  }
  return { requestId: p.requestId, workspaceId: p.workspaceId, to: p.to, name: p.name, role: p.role === 'sender' ? 'sender' : 'recipient' };
}

/**
 * Sends one party's mail about a request (`what`: `completed`, `declined`): `sent`; `refused` for good
 * (5xx: logged, not retried); throws for the job kit to retry when the server refused it for now or
 * could not be reached.
 */
export async function sendPartyMail(
  deps: Pick<SigningRuntime, 'mailer' | 'logger'>,
  what: 'completed' | 'declined',
  job: CompletedMailPayload,
  mail: { subject: string; text: string; html: string },
): Promise<'sent' | 'refused'> {
  try {
    const result = await deps.mailer.send({ to: job.to, ...mail, tag: `signing.${what}`, workspaceId: job.workspaceId, headers: { 'X-Signing-Request': job.requestId } });
    if (result.accepted.length) return 'sent';
    const refusal = result.rejected[0];
    if (refusal && !refusal.temporary) {
      deps.logger.warn({ request: job.requestId, role: job.role, reason: refusal.reason.slice(0, 300) }, `the ${what} mail was refused for good; not retried`);
      return 'refused';
    }
    throw new Error(`the mail server refused the ${what} mail for now${refusal ? `: ${refusal.reason.slice(0, 300)}` : ''}`);
  } catch (err) {
    if (err instanceof MailUnavailableError) throw new Error(`the mail server is unavailable (${err.kind}); the ${what} mail is sent again later`);
    throw err;
  }
}

/** What a completed mail says (completed.{text,html}.eta). */
export interface CompletedMailView {
  readonly name: string;
  readonly isSender: boolean;
  /** Who sent the request, as the invitation named them. */
  readonly sender: string;
  readonly workspace: string;
  readonly title: string;
  readonly requestId: string;
  readonly bankid: boolean;
  readonly signers: ReadonlyArray<{ readonly name: string; readonly signedAt: string | null }>;
  readonly link: string;
  readonly filename: string;
  readonly expires: string;
  readonly sha256: string;
  readonly verifyUrl: string;
}

/** The completed mail's subject, text and HTML. */
export function composeCompletedMail(view: CompletedMailView): { subject: string; text: string; html: string } {
  const subject = `Signed by everyone: "${view.title}"`.replace(/[\r\n]+/g, ' ');
  return { subject, ...templates.render('completed', { subject, ...view }) };
}

/** Sends one party's completed mail (the job); throws to be retried when the mail server could not take it for now. */
export async function sendCompletedMail(deps: SigningRuntime, job: CompletedMailPayload): Promise<'sent' | 'refused' | 'skipped'> {
  const { db, clock, config } = deps;
  const request = await findRequestById(db.sql, job.requestId);
  if (!request || request.workspace_id !== job.workspaceId || !request.archive_file_id) return 'skipped';
  const files = filesOf(deps);
  const file = await files.find(db.sql, request.workspace_id, request.archive_file_id);
  if (!file) return 'skipped';
  const now = clock.now();
  const link = await files.downloadUrl(db.sql, config.publicUrl, file, now, { ttlMs: COMPLETED_LINK_TTL_MS, filename: file.filename });
  const who = await senderOf(db.sql, request);
  const signers = signersOf(await listRecipients(db.sql, request.id)).map((r) => ({ name: r.name, signedAt: r.signed_at === null ? null : humanTime(Number(r.signed_at)) }));
  const mail = composeCompletedMail({
    name: job.name,
    isSender: job.role === 'sender',
    sender: who.sender,
    workspace: who.workspace,
    title: request.title,
    requestId: request.id,
    bankid: request.signature_method === 'bankid',
    signers,
    link: link.url,
    filename: file.filename,
    expires: humanTime(link.expiresAt),
    sha256: file.sha256,
    verifyUrl: new URL('/verify', config.publicUrl).toString(),
  });
  return sendPartyMail(deps, 'completed', job, mail);
}

/** The job definition the signing module registers as `signing.completed-mail`. */
export function completedMailJob(deps: SigningRuntime): JobDefinition {
  return {
    run: async (payload) => {
      await sendCompletedMail(deps, partyPayloadOf(payload, COMPLETED_MAIL_JOB));
    },
  };
}
