/**
 * Invitation and reminder mails: one mail per recipient (each carries that recipient's own link),
 * rendered from `mail/invitation.{text,html}.eta`, and what each send's result does to the recipient:
 * taken -> `sent` (event `invitation.sent` or `reminder.sent`); refused for good -> `failed` (event
 * `invitation.failed`); refused for now or the mail server unreachable -> `queued`, retried by the
 * `signing.invite` job 1, 6, 21, 81 and 321 minutes after the first attempt (MAIL_RETRY, the kernel's
 * backoff helper), then `failed`. Nothing fails silently.
 *
 * Every mail goes out from a `signing.invite` job with no transaction open: a command (an invitation
 * round, a reminder round) declares one job per recipient in its transaction (`beforeAnswer`), the
 * executor runs them right after the commit and waits up to `mailTiming.roundWaitMs` before answering;
 * a mail still in flight then keeps going in its job, which records the outcome when the server answers.
 */
import type { Logger } from 'pino';
import type { Sql } from '../../../db/database.ts';
import type { JobQueue } from '../../../server/jobs.ts';
import { type BackoffSchedule, nextAttempt } from '../../../server/background.ts';
import { type Mailer, MailUnavailableError, mailTemplates } from '../../../server/mailer.ts';
import type { ModuleDeps } from '../../../server/module.ts';
import { mintSignerLink, signerUrl } from '../signer/links.ts';
import type { SigningSettings } from '../settings.ts';
import { appendEvent, type DbSigningRecipientRow, type DbSigningRequestRow, findMember, keyCreator, updateRecipient, workspaceName } from '../queries.ts';

/** The job that sends a queued invitation or reminder again. */
export const INVITE_JOB = 'signing.invite';

/**
 * When a mail refused for now is tried again, counted from its first attempt: after 1, 6, 21, 81 and 321
 * minutes (waits of 1 min, 5 min, 15 min, 1 h, 4 h); after the sixth attempt it has failed.
 */
const RETRY_OFFSETS_MS = [0, 60_000, 360_000, 1_260_000, 4_860_000, 19_260_000] as const;
export const MAIL_RETRY: BackoffSchedule = { kind: 'offsets', offsetsMs: RETRY_OFFSETS_MS };

/**
 * How long a command waits for its mails (after its commit) before answering; a mail still in flight then
 * is answered as queued and its job records the outcome when the server answers. Tests shorten it.
 */
export const mailTiming = { roundWaitMs: 10_000 };

export interface InviteJobPayload {
  readonly recipientId: string;
  readonly reminder: boolean;
  readonly automatic: boolean;
  readonly message: string | null;
  /** When this mail's first attempt was made (its retries are counted from it); absent on a first attempt. */
  readonly firstAt?: number;
}

/** What a recipient's answer says while the mail is still in flight when its command answers. */
export const STILL_SENDING = 'the mail server did not answer in time; sending again later';

const templates = mailTemplates(new URL('./mail/', import.meta.url));

/** What the operations and jobs need of the module's dependencies. */
export type SigningRuntime = Pick<ModuleDeps<SigningSettings>, 'db' | 'mailer' | 'logger' | 'clock' | 'config' | 'jobs' | 'settings' | 'credentials' | 'services'>;
const DATE = new Intl.DateTimeFormat('en-GB', { timeZone: 'UTC', weekday: 'long', day: 'numeric', month: 'long', year: 'numeric', hour: '2-digit', minute: '2-digit', hour12: false });
/** A deadline as people read it: `Friday 25 December 2026, 12:00 UTC`. */
export const humanTime = (ms: number) => `${DATE.format(new Date(ms)).replace(' at ', ', ')} UTC`;

/**
 * Who asks: the member it was sent for (or who created the key that sent it), with the workspace's
 * name, while that member is active; otherwise the workspace (no mail says a disabled member "is still
 * waiting").
 */
export async function senderOf(sql: Sql, request: DbSigningRequestRow): Promise<{ sender: string; senderName: string; workspace: string }> {
  const workspace = await workspaceName(sql, request.workspace_id);
  const memberId = request.owner_member_id ?? (request.created_by_key_id ? await keyCreator(sql, request.created_by_key_id) : null);
  const member = memberId ? await findMember(sql, request.workspace_id, memberId) : undefined;
  return member && member.disabled_at === null ? { sender: `${member.name} (${workspace})`, senderName: member.name, workspace } : { sender: workspace, senderName: workspace, workspace };
}

export interface Round {
  readonly reminder: boolean;
  readonly automatic: boolean;
  /** The message quoted in the mail (a reminder's own, else the request's). */
  readonly message: string | null;
}

/** The mail to one recipient with this link. */
export function composeMail(request: DbSigningRequestRow, recipient: DbSigningRecipientRow, who: { sender: string; senderName: string; workspace: string }, link: string, round: Round) {
  const subject = (round.reminder ? `Reminder: please sign "${request.title}"` : `${who.senderName} asks you to sign "${request.title}"`).replace(/[\r\n]+/g, ' ');
  const body = templates.render('invitation', {
    subject,
    recipientName: recipient.name,
    sender: who.sender,
    senderName: who.senderName,
    workspace: who.workspace,
    title: request.title,
    message: round.message,
    deadline: humanTime(Number(request.deadline_at)),
    link,
    reminder: round.reminder,
    methodText: request.signature_method === 'bankid' ? 'with BankID' : 'by typing your name',
  });
  return { to: recipient.email, subject, ...body, tag: round.reminder ? 'signing.reminder' : 'signing.invitation', workspaceId: request.workspace_id, headers: { 'X-Signing-Request': request.id } };
}

export type Outcome = { readonly status: 'sent' } | { readonly status: 'queued' | 'failed'; readonly error: string };

/**
 * Why no mail could be sent, as recipients' `invitation_error` shows it: the kind and the server's
 * answer, never the mail server's address (the log has the details).
 */
function unavailableReason(err: MailUnavailableError): string {
  const cause = /\(([A-Z][A-Z_]+)\)/.exec(err.message)?.[1];
  if (err.kind === 'connection') return `the mail server cannot be reached${cause ? ` (${cause})` : ''}; sending again later`;
  if (err.kind === 'auth') return 'the mail server refused this service\'s credentials; sending again later';
  const answer = /: (\d{3}\b.*)$/.exec(err.message)?.[1];
  return `the mail server refused the mail for now${answer ? `: ${answer.slice(0, 500)}` : ''}; sending again later`;
}

/** Sends one mail and says what became of it; never throws. */
export async function sendOne(mailer: Mailer, message: ReturnType<typeof composeMail>, logger: Logger | null): Promise<Outcome> {
  try {
    const result = await mailer.send(message);
    if (result.accepted.length) return { status: 'sent' };
    const refusal = result.rejected[0];
    if (!refusal) return { status: 'queued', error: 'the mail server took no recipient' };
    return { status: refusal.temporary ? 'queued' : 'failed', error: refusal.reason.slice(0, 1000) };
  } catch (err) {
    if (err instanceof MailUnavailableError) return { status: 'queued', error: unavailableReason(err) };
    logger?.error({ err, tag: message.tag }, 'signing mail could not be sent');
    return { status: 'failed', error: (err instanceof Error ? err.message : String(err)).slice(0, 1000) };
  }
}

/**
 * Mints the recipient's link (in `sql`, autocommitting: it exists before the mail that carries it goes
 * out) and sends their mail, waiting for the server's answer. Called from the job, with no transaction open.
 */
export async function mailRecipient(
  sql: Sql,
  mailer: Mailer,
  request: DbSigningRequestRow,
  recipient: DbSigningRecipientRow,
  round: Round,
  ctx: { publicUrl: string; now: number; logger: Logger | null },
): Promise<Outcome> {
  const who = await senderOf(sql, request);
  const token = await mintSignerLink(sql, { recipientId: recipient.id, requestId: request.id }, ctx.now);
  return sendOne(mailer, composeMail(request, recipient, who, signerUrl(ctx.publicUrl, token), round), ctx.logger);
}

/**
 * Declares, in a command's transaction, one mail per recipient: each is queued (no attempt yet) and its
 * `signing.invite` job runs right after the commit, before the command answers (at most
 * `mailTiming.roundWaitMs`). Nothing is sent inside the transaction.
 */
export async function declareRound(sql: Sql, jobs: JobQueue, recipients: readonly DbSigningRecipientRow[], round: Round, now: number): Promise<void> {
  for (const r of recipients) {
    await updateRecipient(sql, r.id, { invitation_status: 'queued', invitation_error: null, invitation_attempts: 0 });
    const payload: InviteJobPayload = { recipientId: r.id, reminder: round.reminder, automatic: round.automatic, message: round.message };
    await jobs.enqueue(sql, INVITE_JOB, payload, { key: `${INVITE_JOB}:${r.id}:${now}:0`, beforeAnswer: { waitMs: mailTiming.roundWaitMs } });
  }
}

/**
 * Records what became of one mail to a recipient (in `sql`): the recipient's invitation state, the
 * history event, and for a mail refused for now the next try (`signing.invite`), until the last one.
 * `attempt` is 1 for a new mail; `firstAt` is when its first attempt was made (the retries count from it).
 * Returns the recipient's invitation state.
 */
export async function applyOutcome(
  sql: Sql,
  jobs: JobQueue,
  request: DbSigningRequestRow,
  recipient: DbSigningRecipientRow,
  outcome: Outcome,
  round: Round,
  attempt: number,
  now: number,
  firstAt?: number,
): Promise<'sent' | 'queued' | 'failed'> {
  const base = { requestId: request.id, workspaceId: request.workspace_id, recipientId: recipient.id, at: now };
  if (outcome.status === 'sent') {
    await updateRecipient(sql, recipient.id, {
      invitation_status: 'sent',
      invitation_error: null,
      invitation_attempts: attempt,
      ...(round.reminder ? { last_reminded_at: now } : { invited_at: now }),
    });
    await appendEvent(sql, round.reminder ? { ...base, kind: 'reminder.sent', data: { automatic: round.automatic, attempt } } : { ...base, kind: 'invitation.sent', data: { reminder: false, attempt } });
    return 'sent';
  }
  // A retry enqueued without its first attempt's time (before it was kept) counts as on schedule.
  firstAt ??= now - (RETRY_OFFSETS_MS[attempt - 1] ?? 0);
  const retryAt = outcome.status === 'queued' ? nextAttempt(MAIL_RETRY, attempt, { now, firstAt }) : null;
  if (retryAt !== null) {
    await updateRecipient(sql, recipient.id, { invitation_status: 'queued', invitation_error: outcome.error, invitation_attempts: attempt });
    const payload: InviteJobPayload = { recipientId: recipient.id, reminder: round.reminder, automatic: round.automatic, message: round.message, firstAt };
    await jobs.enqueue(sql, INVITE_JOB, payload, { runAt: retryAt, key: `${INVITE_JOB}:${recipient.id}:${now}:${attempt}` });
    return 'queued';
  }
  const error = outcome.status === 'queued' ? `${outcome.error} (gave up after ${attempt} attempts)` : outcome.error;
  await updateRecipient(sql, recipient.id, { invitation_status: 'failed', invitation_error: error.slice(0, 1000), invitation_attempts: attempt });
  await appendEvent(sql, { ...base, kind: 'invitation.failed', data: { error: error.slice(0, 1000), reminder: round.reminder, attempts: attempt } });
  return 'failed';
}
