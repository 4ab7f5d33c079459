/**
 * The "declined" mail: when a recipient declines, the request ends (`cancelled`, `declined by <name>`)
 * and every other party is told by mail: the other signers who were invited (whose links stopped
 * working, so nobody signs a contract that will not happen; CC recipients and signers of a later step
 * were never asked, and are not told) and the sender (as the completed mail finds them: the member
 * it was sent for, or the key's creator, or the workspace's owners and admins for a key the operator
 * made). Rendered from `mail/declined.{text,html}.eta`; the decliner's reason is quoted for the sender
 * only (other signers are told who declined, not why).
 *
 * Sent through the job queue, never from the decline's transaction: `recordDeclined` enqueues one
 * `signing.declined-mail` job per party, keyed by the request id and the address, so each is mailed
 * once; failures are retried by the job kit, a permanent refusal (5xx) is logged and dropped.
 */
import type { Sql } from '../../../db/database.ts';
import type { JobDefinition, JobQueue } from '../../../server/jobs.ts';
import { MailUnavailableError, mailTemplates } from '../../../server/mailer.ts';
import { completedMailParties } from '../archive/completedMail.ts';
import { type DbSigningRecipientRow, type DbSigningRequestRow, findRequestById, listRecipients } from '../queries.ts';
import { humanTime, type SigningRuntime, senderOf } from './invitationMail.ts';

export const DECLINED_MAIL_JOB = 'signing.declined-mail';

export interface DeclinedMailPayload {
  readonly requestId: string;
  readonly workspaceId: string;
  readonly to: string;
  readonly name: string;
  readonly role: 'recipient' | 'sender';
}

const templates = mailTemplates(new URL('./mail/', import.meta.url));

/** Enqueues the declined mails in `sql` (the decline's transaction): every party but the one who declined. */
export async function enqueueDeclinedMails(sql: Sql, jobs: Pick<JobQueue, 'enqueue'>, request: DbSigningRequestRow, decliner: DbSigningRecipientRow): Promise<number> {
  let n = 0;
  // Recipients of a later step of the signing order were never invited: they are not told either.
  // Nor are CC recipients: they get the completed copy, and there will be none.
  const uninvited = new Set((await listRecipients(sql, request.id)).filter((r) => r.invitation_status === 'waiting' || r.role === 'cc').map((r) => r.email.toLowerCase()));
  for (const party of await completedMailParties(sql, request, { senderFirst: true })) {
    if (party.to.toLowerCase() === decliner.email.toLowerCase() || (party.role === 'recipient' && uninvited.has(party.to.toLowerCase()))) continue;
    const payload: DeclinedMailPayload = { requestId: request.id, workspaceId: request.workspace_id, ...party };
    if (await jobs.enqueue(sql, DECLINED_MAIL_JOB, payload, { key: `${DECLINED_MAIL_JOB}:${request.id}:${party.to.toLowerCase()}` })) n++;
  }
  return n;
}

/** What a declined mail says. */
export interface DeclinedMailView {
  readonly name: string;
  readonly isSender: boolean;
  readonly sender: string;
  readonly workspace: string;
  readonly title: string;
  readonly requestId: string;
  readonly decliner: string;
  readonly declinedAt: string;
  /** The decliner's reason: for the sender's mail only (empty otherwise, or when none was given). */
  readonly reason: string;
}

export function composeDeclinedMail(view: DeclinedMailView): { subject: string; text: string; html: string } {
  const subject = `Declined: "${view.title}"`.replace(/[\r\n]+/g, ' ');
  return { subject, ...templates.render('declined', { subject, ...view }) };
}

function payloadOf(payload: unknown): DeclinedMailPayload {
  const p = payload as Partial<DeclinedMailPayload> | null;
  if (!p || typeof p.requestId !== 'string' || typeof p.workspaceId !== 'string' || typeof p.to !== 'string' || typeof p.name !== 'string') {
    throw new Error(`${DECLINED_MAIL_JOB} needs {requestId, workspaceId, to, name, role}`);
  }
  return { requestId: p.requestId, workspaceId: p.workspaceId, to: p.to, name: p.name, role: p.role === 'sender' ? 'sender' : 'recipient' };
}

/** Sends one party's declined mail; throws to be retried when the mail server could not take it for now. */
export async function sendDeclinedMail(deps: SigningRuntime, job: DeclinedMailPayload): Promise<'sent' | 'refused' | 'skipped'> {
  const { db, logger } = deps;
  const request = await findRequestById(db.sql, job.requestId);
  if (!request || request.workspace_id !== job.workspaceId) return 'skipped';
  const decliner = (await listRecipients(db.sql, request.id)).find((r) => r.status === 'declined');
  if (!decliner) return 'skipped';
  const who = await senderOf(db.sql, request);
  const mail = composeDeclinedMail({
    name: job.name,
    isSender: job.role === 'sender',
    sender: who.sender,
    workspace: who.workspace,
    title: request.title,
    requestId: request.id,
    decliner: decliner.name,
    declinedAt: humanTime(Number(decliner.declined_at ?? request.cancelled_at ?? 0)),
    reason: job.role === 'sender' ? (decliner.decline_reason ?? '') : '',
  });
  try {
    const result = await deps.mailer.send({ to: job.to, ...mail, tag: 'signing.declined', workspaceId: request.workspace_id, headers: { 'X-Signing-Request': request.id } });
    if (result.accepted.length) return 'sent';
    const refusal = result.rejected[0];
    if (refusal && !refusal.temporary) {
      logger.warn({ request: request.id, role: job.role, reason: refusal.reason.slice(0, 300) }, 'the declined mail was refused for good; not retried');
      return 'refused';
    }
    throw new Error(`the mail server refused the declined mail for now${refusal ? `: ${refusal.reason.slice(0, 300)}` : ''}`);
  } catch (err) {
    if (err instanceof MailUnavailableError) throw new Error(`the mail server is unavailable (${err.kind}); the declined mail is sent again later`);
    throw err;
  }
}

/** The job definition the signing module registers as `signing.declined-mail`. */
export function declinedMailJob(deps: SigningRuntime): JobDefinition {
  return {
    run: async (payload) => {
      await sendDeclinedMail(deps, payloadOf(payload));
    },
  };
}
