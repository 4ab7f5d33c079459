/**
 * The signing module's background jobs: `signing.invite` sends a queued invitation or reminder again
 * (with backoff, then `failed`), `signing.expire` (every minute) expires pending requests past their
 * deadline, `signing.remind` (every 15 minutes) sends the automatic reminders (at most 3 per
 * recipient). Mails go out outside any transaction; their outcome is recorded in one afterwards.
 */
import type { Sql } from '../../db/database.ts';
import type { JobDefinition } from '../../server/jobs.ts';
import { applyOutcome, INVITE_JOB, type InviteJobPayload, recordLate, type Round, type SigningRuntime, sendRound } from './mail.ts';
import { findRecipient, findRequestById, overdueRequests, recipientsDueReminder, updateRecipient } from './queries.ts';
import { expireRequest } from './requests.ts';

export const EXPIRE_JOB = 'signing.expire';
export const REMIND_JOB = 'signing.remind';
/** Automatic reminders per recipient, at most. */
export const AUTO_REMINDER_CAP = 3;
const BATCH = 100;

/** Sends one recipient's mail now (a retry, or an automatic reminder) and records the outcome; false when nothing was due. */
async function mailOne(deps: SigningRuntime, recipientId: string, round: Round, attempt: (current: number) => number, still: (r: { invitation_status: string }) => boolean): Promise<boolean> {
  const { db, clock } = deps;
  const now = clock.now();
  const recipient = await findRecipient(db.sql, recipientId);
  const request = recipient ? await findRequestById(db.sql, recipient.request_id) : undefined;
  if (!recipient || !request || request.status !== 'pending' || now >= Number(request.deadline_at)) return false;
  if ((recipient.status !== 'pending' && recipient.status !== 'opened') || !still(recipient)) return false;
  // Autocommit: the link exists before the mail that carries it goes out.
  const { outcomes, late } = await sendRound(db.sql, deps.mailer, request, [recipient], round, { publicUrl: deps.config.publicUrl, now, logger: deps.logger });
  let txSql: Sql | null = null;
  const made = await db.tx(async (sql) => {
    txSql = sql;
    const locked = await findRequestById(sql, request.id, true);
    const current = await findRecipient(sql, recipient.id);
    if (!locked || !current) return null;
    const n = attempt(Number(current.invitation_attempts));
    await applyOutcome(sql, deps.jobs, locked, current, outcomes.get(recipient.id)!, round, n, clock.now());
    return n;
  });
  if (txSql) deps.jobs.committed(txSql);
  if (made !== null) {
    const send = late.get(recipient.id);
    if (send) recordLate(deps, request.id, recipient.id, send, round, made);
  }
  return true;
}

export function signingJobs(deps: SigningRuntime): Record<string, JobDefinition> {
  return {
    [INVITE_JOB]: {
      run: async (payload) => {
        const p = payload as InviteJobPayload;
        await mailOne(deps, p.recipientId, { reminder: p.reminder, automatic: p.automatic, message: p.message }, (n) => n + 1, (r) => r.invitation_status === 'queued');
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
        for (const { recipient_id } of due) {
          const recipient = await findRecipient(deps.db.sql, recipient_id);
          const request = recipient ? await findRequestById(deps.db.sql, recipient.request_id) : undefined;
          if (!recipient || !request) continue;
          // Counted before sending, so a failing mail server cannot make this recipient due again and again.
          await updateRecipient(deps.db.sql, recipient.id, { auto_reminders: Number(recipient.auto_reminders) + 1 });
          await mailOne(deps, recipient.id, { reminder: true, automatic: true, message: request.message }, () => 1, () => true);
        }
      },
    },
  };
}
