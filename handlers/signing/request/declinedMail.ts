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
import { mailTemplates } from '../../../server/mailer.ts';
import { type CompletedMailPayload, completedMailParties, partyPayloadOf, sendPartyMail } from '../archive/completedMail.ts';
import { type DbSigningRecipientRow, type DbSigningRequestRow, findRequestById, listRecipients } from '../queries.ts';
import { humanTime, type SigningRuntime, senderOf } from './invitationMail.ts';

export const DECLINED_MAIL_JOB = 'signing.declined-mail';

/** The same payload as the completed mail's: one party of one request. */
export type DeclinedMailPayload = CompletedMailPayload;

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

/** Sends one party's declined mail; throws to be retried when the mail server could not take it for now. */
export async function sendDeclinedMail(deps: SigningRuntime, job: DeclinedMailPayload): Promise<'sent' | 'refused' | 'skipped'> {
  const { db } = deps;
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
  return sendPartyMail(deps, 'declined', job, mail);
}

/** The job definition the signing module registers as `signing.declined-mail`. */
export function declinedMailJob(deps: SigningRuntime): JobDefinition {
  return {
    run: async (payload) => {
      await sendDeclinedMail(deps, partyPayloadOf(payload, DECLINED_MAIL_JOB));
    },
  };
}
