/**
 * The signing module's background jobs: `signing.invite` sends a queued invitation or reminder again
 * (with backoff, then `failed`), `signing.expire` (every minute) expires pending requests past their
 * deadline, `signing.remind` (every 15 minutes) sends the automatic reminders (at most 3 per
 * recipient). Mails go out outside any transaction; their outcome is recorded in one afterwards. The first
 * attempt of an invitation or a reminder round is a `signing.invite` job its command declared
 * (handlers/signing/request/invitationMail.ts, `declareRound`), run right after the command commits.
 *
 * Automatic reminders speak for the credential and member that made the request, judged when each is
 * due (seed 5.6, server/atUse.ts): once that key is revoked (and no replacing key carries on), the
 * member is disabled, or the key may no longer act for them or call signing.RequestFileSignatures, the
 * request's automatic reminders stop for good (`reminder_interval_days` becomes null, event
 * `reminders.stopped` with the reason). The request itself stays valid: its signers' links work, and a
 * caller who may manage it can still remind by hand (signing.RemindSigners).
 */
import type { Sql } from '../../../db/database.ts';
import { type AtUseVerdict, judgeAtUse } from '../../../server/atUse.ts';
import type { JobDefinition } from '../../../server/jobs.ts';
import { applyOutcome, INVITE_JOB, type InviteJobPayload, mailRecipient, type Round, type SigningRuntime } from './invitationMail.ts';
import { appendEvent, type DbSigningRequestRow, findRecipient, findRequestById, overdueRequests, recipientsDueReminder, updateRecipient, updateRequest } from '../queries.ts';
import { expireRequest } from './lifecycle.ts';

export const EXPIRE_JOB = 'signing.expire';
export const REMIND_JOB = 'signing.remind';
/** Automatic reminders per recipient, at most. */
export const AUTO_REMINDER_CAP = 3;
const BATCH = 100;

/** Sends one recipient's mail now (a retry, or an automatic reminder) and records the outcome; false when nothing was due. */
async function mailOne(
  deps: SigningRuntime,
  recipientId: string,
  round: Round,
  attempt: (current: number) => number,
  still: (r: { invitation_status: string }) => boolean,
  firstAt?: number,
): Promise<boolean> {
  const { db, clock } = deps;
  const now = clock.now();
  const recipient = await findRecipient(db.sql, recipientId);
  const request = recipient ? await findRequestById(db.sql, recipient.request_id) : undefined;
  if (!recipient || !request || request.status !== 'pending' || now >= Number(request.deadline_at)) return false;
  if ((recipient.status !== 'pending' && recipient.status !== 'opened') || !still(recipient)) return false;
  // Autocommit: the link exists before the mail that carries it goes out; the send waits on no transaction.
  const outcome = await mailRecipient(db.sql, deps.mailer, request, recipient, round, { publicUrl: deps.config.publicUrl, now, logger: deps.logger });
  let txSql: Sql | null = null;
  await db.tx(async (sql) => {
    txSql = sql;
    const locked = await findRequestById(sql, request.id, true);
    const current = await findRecipient(sql, recipient.id);
    if (!locked || !current) return null;
    const n = attempt(Number(current.invitation_attempts));
    const at = clock.now();
    await applyOutcome(sql, deps.jobs, locked, current, outcome, round, n, at, firstAt);
    return n;
  });
  if (txSql) deps.jobs.committed(txSql);
  return true;
}

/** Whether automatic reminders may still go out for the request's credential and member (an operator's stop of API keys does not stop mails to signers). */
async function remindersMay(deps: SigningRuntime, request: DbSigningRequestRow): Promise<AtUseVerdict> {
  const verdict = await judgeAtUse(
    deps.db,
    deps.credentials,
    request.workspace_id,
    { credentialId: request.created_by_key_id, memberId: request.owner_member_id, operation: 'signing.RequestFileSignatures' },
    { followReplacements: true },
  );
  return !verdict.ok && verdict.loss === 'keys_stopped' ? { ok: true, credentialId: request.created_by_key_id } : verdict;
}

/** Turns the request's automatic reminders off for good, with the reason in its history (once); a queued automatic reminder of `recipientId` is dropped. */
async function stopReminders(deps: SigningRuntime, requestId: string, verdict: Extract<AtUseVerdict, { ok: false }>, recipientId?: string): Promise<void> {
  const now = deps.clock.now();
  await deps.db.tx(async (sql) => {
    const locked = await findRequestById(sql, requestId, true);
    if (!locked) return;
    if (recipientId) {
      // Its last mail that went out was the invitation or an earlier reminder: it stays the recipient's state.
      const r = await findRecipient(sql, recipientId);
      if (r?.invitation_status === 'queued') await updateRecipient(sql, r.id, { invitation_status: 'sent', invitation_error: null });
    }
    if (locked.reminder_interval_days === null) return;
    await updateRequest(sql, locked.id, { reminder_interval_days: null }, now);
    await appendEvent(sql, { requestId: locked.id, workspaceId: locked.workspace_id, kind: 'reminders.stopped', data: { reason: verdict.loss, detail: verdict.reason }, at: now });
  });
  deps.logger.info({ signing_request_id: requestId, reason: verdict.loss }, 'signing: automatic reminders stopped, the access they were sent with is gone');
}

export function signingJobs(deps: SigningRuntime): Record<string, JobDefinition> {
  return {
    [INVITE_JOB]: {
      run: async (payload) => {
        const p = payload as InviteJobPayload;
        if (p.automatic) {
          const recipient = await findRecipient(deps.db.sql, p.recipientId);
          const request = recipient ? await findRequestById(deps.db.sql, recipient.request_id) : undefined;
          const verdict = request ? await remindersMay(deps, request) : null;
          if (request && verdict && !verdict.ok) return stopReminders(deps, request.id, verdict, p.recipientId);
        }
        await mailOne(deps, p.recipientId, { reminder: p.reminder, automatic: p.automatic, message: p.message }, (n) => n + 1, (r) => r.invitation_status === 'queued', p.firstAt);
      },
    },
    [EXPIRE_JOB]: {
      everyMs: 60_000,
      run: async () => {
        for (;;) {
          const due = await overdueRequests(deps.db.sql, deps.clock.now(), BATCH);
          for (const { id } of due) await deps.db.tx((sql) => expireRequest(sql, id, deps.clock.now()));
          if (due.length < BATCH) return;
        }
      },
    },
    [REMIND_JOB]: {
      everyMs: 15 * 60_000,
      run: async () => {
        const due = await recipientsDueReminder(deps.db.sql, deps.clock.now(), AUTO_REMINDER_CAP, BATCH);
        const verdicts = new Map<string, AtUseVerdict>();
        for (const { recipient_id } of due) {
          const recipient = await findRecipient(deps.db.sql, recipient_id);
          const request = recipient ? await findRequestById(deps.db.sql, recipient.request_id) : undefined;
          if (!recipient || !request) continue;
          let verdict = verdicts.get(request.id);
          if (!verdict) {
            verdict = await remindersMay(deps, request);
            verdicts.set(request.id, verdict);
            if (!verdict.ok) await stopReminders(deps, request.id, verdict);
          }
          if (!verdict.ok) continue;
          // Counted before sending, so a failing mail server cannot make this recipient due again and again.
          await updateRecipient(deps.db.sql, recipient.id, { auto_reminders: Number(recipient.auto_reminders) + 1 });
          await mailOne(deps, recipient.id, { reminder: true, automatic: true, message: request.message }, () => 1, () => true);
        }
      },
    },
  };
}
