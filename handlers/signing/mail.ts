/**
 * Invitation and reminder mails: one mail per recipient (each carries that recipient's own link),
 * rendered from `mail/invitation.{text,html}.eta`, and what each send's result does to the recipient:
 * taken -> `sent` (event `invitation.sent` or `reminder.sent`); refused for good -> `failed` (event
 * `invitation.failed`); refused for now, the mail server unreachable, or still in flight after the
 * wait -> `queued`, retried by the `signing.invite` job after 1, 5, 15 and 60 minutes and 4 hours,
 * then `failed`. Nothing fails silently.
 */
import type { Logger } from 'pino';
import type { Sql } from '../../db/database.ts';
import type { JobQueue } from '../../server/jobs.ts';
import { type Mailer, MailUnavailableError, mailTemplates } from '../../server/mailer.ts';
import type { ModuleDeps } from '../../server/module.ts';
import { mintSignerLink, signerUrl } from './links.ts';
import type { SigningSettings } from './settings.ts';
import { appendEvent, type DbSigningRecipientRow, type DbSigningRequestRow, findMember, findRecipient, findRequestById, keyCreator, updateRecipient, workspaceName } from './queries.ts';

/** The job that sends a queued invitation or reminder again. */
export const INVITE_JOB = 'signing.invite';

/** Waits before the retries of a mail refused for now: after the first attempt, 1 min, 5 min, 15 min, 1 h, 4 h; then it has failed. */
export const RETRY_DELAYS_MS = [60_000, 300_000, 900_000, 3_600_000, 14_400_000] as const;

/**
 * How long a request waits for its mails before answering (the rest stay queued and are retried), and
 * how a mail the server takes after that wait is still recorded as sent (so its retry sends nothing):
 * tried every `lateRecordEveryMs`, at most `lateRecordTries` times, until the request's transaction has
 * committed. Tests shorten them.
 */
export const mailTiming = { roundWaitMs: 10_000, lateRecordTries: 30, lateRecordEveryMs: 1_000 };

export interface InviteJobPayload {
  readonly recipientId: string;
  readonly reminder: boolean;
  readonly automatic: boolean;
  readonly message: string | null;
}

const templates = mailTemplates(new URL('./mail/', import.meta.url));

/** What the operations and jobs need of the module's dependencies. */
export type SigningRuntime = Pick<ModuleDeps<SigningSettings>, 'db' | 'mailer' | 'logger' | 'clock' | 'config' | 'jobs' | 'settings' | 'credentials'>;
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

/** What a round answered: each recipient's outcome, and the sends still in flight when the wait ended (counted as queued). */
export interface RoundResult {
  readonly outcomes: Map<string, Outcome>;
  readonly late: Map<string, Promise<Outcome>>;
}

/**
 * Mints a link for each recipient in `sql`, sends their mails side by side, and waits at most
 * `mailTiming.roundWaitMs`: a mail still in flight then counts as queued (the job sends it again
 * later, unless `recordLate` records it sent first).
 */
export async function sendRound(
  sql: Sql,
  mailer: Mailer | null,
  request: DbSigningRequestRow,
  recipients: readonly DbSigningRecipientRow[],
  round: Round,
  ctx: { publicUrl: string; now: number; logger: Logger | null },
): Promise<RoundResult> {
  const outcomes = new Map<string, Outcome>();
  const late = new Map<string, Promise<Outcome>>();
  if (!mailer) {
    for (const r of recipients) outcomes.set(r.id, { status: 'queued', error: 'waiting for the mail sender' });
    return { outcomes, late };
  }
  const who = await senderOf(sql, request);
  const mails: Array<{ id: string; mail: ReturnType<typeof composeMail> }> = [];
  for (const r of recipients) {
    const token = await mintSignerLink(sql, { recipientId: r.id, requestId: request.id }, ctx.now);
    mails.push({ id: r.id, mail: composeMail(request, r, who, signerUrl(ctx.publicUrl, token), round) });
  }
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, mailTiming.roundWaitMs);
    timer.unref();
  });
  const sends = new Map(mails.map(({ id, mail }) => [id, sendOne(mailer, mail, ctx.logger)] as const));
  let waiting = true;
  for (const [id, send] of sends) void send.then((o) => waiting && outcomes.set(id, o));
  await Promise.race([Promise.all(sends.values()), timeout]);
  waiting = false;
  clearTimeout(timer);
  const answered = new Map(outcomes);
  for (const r of recipients) {
    if (answered.has(r.id)) continue;
    answered.set(r.id, { status: 'queued', error: 'the mail server did not answer in time; sending again later' });
    late.set(r.id, sends.get(r.id)!);
  }
  return { outcomes: answered, late };
}

/**
 * A mail the server took after the round stopped waiting: records it sent (event and all) once the
 * transaction that wrote its recipient as queued has committed, so the retry finds nothing to do. A
 * late refusal is left to the retry, which meets it again and records it.
 */
export function recordLate(runtime: SigningRuntime, requestId: string, recipientId: string, late: Promise<Outcome>, round: Round, attempt: number): void {
  void late.then(async (outcome) => {
    if (outcome.status !== 'sent') return;
    for (let i = 0; i < mailTiming.lateRecordTries; i++) {
      const done = await runtime.db
        .tx(async (sql) => {
          const request = await findRequestById(sql, requestId, true);
          const recipient = request ? await findRecipient(sql, recipientId) : undefined;
          if (!request || !recipient) return false; // not committed yet
          if (recipient.invitation_status === 'queued' && Number(recipient.invitation_attempts) === attempt) {
            await applyOutcome(sql, runtime.jobs, request, recipient, outcome, round, attempt, runtime.clock.now());
          }
          return true;
        })
        .catch((err: unknown) => {
          runtime.logger.warn({ err, request: requestId }, 'could not record a late invitation as sent; its retry sends it again');
          return true;
        });
      if (done) return;
      await new Promise((resolve) => setTimeout(resolve, mailTiming.lateRecordEveryMs).unref());
    }
  });
}

/**
 * Records what became of one mail to a recipient (in `sql`): the recipient's invitation state, the
 * history event, and for a mail refused for now the next try (`signing.invite`), until the last one.
 * `attempt` is 1 for a new mail. Returns the recipient's invitation state.
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
  const retryIn = outcome.status === 'queued' ? RETRY_DELAYS_MS[attempt - 1] : undefined;
  if (retryIn !== undefined) {
    await updateRecipient(sql, recipient.id, { invitation_status: 'queued', invitation_error: outcome.error, invitation_attempts: attempt });
    const payload: InviteJobPayload = { recipientId: recipient.id, reminder: round.reminder, automatic: round.automatic, message: round.message };
    await jobs.enqueue(sql, INVITE_JOB, payload, { runAt: now + retryIn, key: `${INVITE_JOB}:${recipient.id}:${now}:${attempt}` });
    return 'queued';
  }
  const error = outcome.status === 'queued' ? `${outcome.error} (gave up after ${attempt} attempts)` : outcome.error;
  await updateRecipient(sql, recipient.id, { invitation_status: 'failed', invitation_error: error.slice(0, 1000), invitation_attempts: attempt });
  await appendEvent(sql, { ...base, kind: 'invitation.failed', data: { error: error.slice(0, 1000), reminder: round.reminder, attempts: attempt } });
  return 'failed';
}
