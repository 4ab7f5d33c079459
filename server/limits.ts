/**
 * Per-workspace limits on what a key or a person can spend (mail, invitations, uploads, storage), with
 * the defaults below; the operator changes them per workspace (`npm run admin -- workspace limits`,
 * the `workspace_limits` table) and owners and admins read them with their usage on /settings/limits.
 *
 * The rate-like limits are budgets in the platform's shared `rate_limits` table (one GCRA bucket per
 * workspace or key, `quota-...`), so every API process on one PostgreSQL spends the same budget: a
 * budget of N per hour is N at once, then refilling continuously (one every hour/N). Counted limits
 * (open uploads, stored bytes) are counted from their own rows by the module that owns them.
 */
import type { Database, Sql } from '../db/database.ts';
import { takeGcraToken } from '../db/queries/credentials.ts';
import type { Clock } from './clock.ts';

export interface WorkspaceLimits {
  /** Mails sent on the workspace's behalf (signing invitations and reminders, member invitations), per hour. */
  mails_per_hour: number;
  /** The same mails per day. */
  mails_per_day: number;
  /** Signers of one signing.RequestFileSignatures (the document's schema allows at most 10). */
  recipients_per_request: number;
  /** Member invitations (the Members page) per hour. */
  member_invitations_per_hour: number;
  /** Uploads one credential has open (not completed, not rejected, not expired). */
  open_uploads_per_key: number;
  /** Part PUTs per minute for the uploads of one credential. */
  part_puts_per_minute: number;
  /** Bytes of stored document files plus the declared sizes of open uploads. */
  stored_bytes: number;
}

export type LimitName = keyof WorkspaceLimits;

export const LIMIT_NAMES: readonly LimitName[] = ['mails_per_hour', 'mails_per_day', 'recipients_per_request', 'member_invitations_per_hour', 'open_uploads_per_key', 'part_puts_per_minute', 'stored_bytes'];

/** The defaults: generous for real use, far below a relay's or a disk filler's needs. */
export const DEFAULT_LIMITS: Readonly<WorkspaceLimits> = {
  mails_per_hour: 300,
  mails_per_day: 1000,
  recipients_per_request: 10,
  member_invitations_per_hour: 30,
  open_uploads_per_key: 20,
  part_puts_per_minute: 120,
  stored_bytes: 5 * 1024 ** 3,
};

/** What an operator may set each limit to (recipients: the document's schema caps signers at 10). */
export const LIMIT_BOUNDS: Readonly<Record<LimitName, { min: number; max: number }>> = {
  mails_per_hour: { min: 0, max: 1_000_000 },
  mails_per_day: { min: 0, max: 10_000_000 },
  recipients_per_request: { min: 1, max: 10 },
  member_invitations_per_hour: { min: 0, max: 10_000 },
  open_uploads_per_key: { min: 0, max: 10_000 },
  part_puts_per_minute: { min: 1, max: 100_000 },
  stored_bytes: { min: 0, max: 2 ** 50 },
};

type DbLimitsRow = { [K in LimitName]: number | string | null } & { workspace_id: string; updated_at: number | string };

/** The workspace's limits (its own where the operator set one, the default elsewhere) and which are its own. */
export async function workspaceLimits(sql: Sql, workspaceId: string): Promise<WorkspaceLimits & { own: LimitName[] }> {
  const row = await sql.one<DbLimitsRow>(`SELECT * FROM workspace_limits WHERE workspace_id = ?`, [workspaceId]);
  const out = { ...DEFAULT_LIMITS, own: [] as LimitName[] };
  for (const name of LIMIT_NAMES) {
    const v = row?.[name];
    if (v !== null && v !== undefined) {
      out[name] = Number(v);
      out.own.push(name);
    }
  }
  return out;
}

export class LimitsError extends Error {}

/**
 * Sets (a number) or resets to the default (null) some of a workspace's limits; answers them all
 * after the change with the ones before. Throws LimitsError for an unknown workspace or a value out
 * of its bounds.
 */
export async function setWorkspaceLimits(db: Database, clock: Clock, workspaceId: string, changes: Partial<Record<LimitName, number | null>>) {
  for (const [name, value] of Object.entries(changes) as Array<[LimitName, number | null]>) {
    const bounds = LIMIT_BOUNDS[name];
    if (!bounds) throw new LimitsError(`unknown limit ${name} (one of ${LIMIT_NAMES.join(', ')})`);
    if (value !== null && (!Number.isSafeInteger(value) || value < bounds.min || value > bounds.max)) {
      throw new LimitsError(`${name} must be a whole number from ${bounds.min} to ${bounds.max} (got ${value})`);
    }
  }
  return db.tx(async (sql) => {
    if (!(await sql.one(`SELECT id FROM workspaces WHERE id = ?`, [workspaceId]))) throw new LimitsError(`no workspace ${workspaceId}`);
    const before = await workspaceLimits(sql, workspaceId);
    const names = Object.keys(changes) as LimitName[];
    if (names.length) {
      const own: Partial<Record<LimitName, number | null>> = {};
      for (const n of before.own) own[n] = before[n];
      Object.assign(own, changes);
      const values = LIMIT_NAMES.map((n) => own[n] ?? null);
      await sql.run(
        `INSERT INTO workspace_limits (workspace_id, ${LIMIT_NAMES.join(', ')}, updated_at) VALUES (?, ${LIMIT_NAMES.map(() => '?').join(', ')}, ?)
         ON CONFLICT (workspace_id) DO UPDATE SET ${LIMIT_NAMES.map((n) => `${n} = excluded.${n}`).join(', ')}, updated_at = excluded.updated_at`,
        [workspaceId, ...values, clock.now()],
      );
    }
    const after = await workspaceLimits(sql, workspaceId);
    return { workspace_id: workspaceId, limits: limitsOnly(after), own: after.own, before: limitsOnly(before) };
  });
}

const limitsOnly = (l: WorkspaceLimits): WorkspaceLimits => Object.fromEntries(LIMIT_NAMES.map((n) => [n, l[n]])) as unknown as WorkspaceLimits;

/** A budget: `cap` units per `perMs`, all of them at once, refilling continuously. */
export interface Budget {
  cap: number;
  perMs: number;
}

export type QuotaAnswer = { ok: true } | { ok: false; retryAfterS: number };

const intervalUs = (b: Budget) => (b.perMs * 1000) / Math.max(b.cap, 1);

/**
 * Takes `n` units of the bucket's budget, or none when fewer are left (then: when enough will be back).
 * One statement on the shared `rate_limits` table (every process spends one budget); in a caller's
 * transaction it rolls back with it.
 */
export async function takeQuota(sql: Sql, bucket: string, budget: Budget, n: number, nowMs: number): Promise<QuotaAnswer> {
  const i = intervalUs(budget);
  const nowUs = Math.round(nowMs * 1000);
  if (n > budget.cap || budget.cap <= 0) return { ok: false, retryAfterS: Math.ceil(budget.perMs / 1000) };
  if (n <= 0) return { ok: true };
  const row = await takeGcraToken(
    sql,
    { id: 'w.bucket', from: '(SELECT CAST(? AS VARCHAR(100)) AS bucket, 0 AS auth_version) w WHERE TRUE', params: [bucket] },
    { nowUs, intervalUs: Math.round(n * i), toleranceUs: Math.round((budget.cap - n) * i) },
  );
  if (row?.allowed) return { ok: true };
  // Units come back one per interval: enough for n are back when tat - now <= (cap - n) * interval.
  const waitUs = Number(row?.tat ?? nowUs) - nowUs - (budget.cap - n) * i;
  return { ok: false, retryAfterS: Math.max(1, Math.ceil(waitUs / 1_000_000)) };
}

/** Gives back `n` units taken with takeQuota (when a second budget refused what the first allowed). */
export async function returnQuota(sql: Sql, bucket: string, budget: Budget, n: number): Promise<void> {
  await sql.run(`UPDATE rate_limits SET tat = tat - CAST(? AS BIGINT) WHERE bucket = ?`, [Math.round(n * intervalUs(budget)), bucket]);
}

/** How much of a budget is spent now (what will have come back by when, rounded up), 0 to cap. */
export async function quotaUsed(sql: Sql, bucket: string, budget: Budget, nowMs: number): Promise<number> {
  const row = await sql.one<{ tat: number | string }>(`SELECT tat FROM rate_limits WHERE bucket = ?`, [bucket]);
  if (!row || budget.cap <= 0) return 0;
  const ahead = Number(row.tat) - nowMs * 1000;
  return Math.min(budget.cap, Math.max(0, Math.ceil(ahead / intervalUs(budget) - 1e-9)));
}

/** Deletes quota buckets whose budget is full again (nothing of them is remembered that matters). */
export function deleteIdleQuotaBuckets(sql: Sql, nowMs: number): Promise<number> {
  return sql.run(`DELETE FROM rate_limits WHERE bucket LIKE 'quota-%' AND tat < CAST(? AS BIGINT)`, [Math.round(nowMs * 1000)]);
}

export const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;

export const mailBuckets = (workspaceId: string, l: Pick<WorkspaceLimits, 'mails_per_hour' | 'mails_per_day'>) => [
  { bucket: `quota-mail-hour:${workspaceId}`, budget: { cap: l.mails_per_hour, perMs: HOUR_MS }, label: `${l.mails_per_hour} an hour` },
  { bucket: `quota-mail-day:${workspaceId}`, budget: { cap: l.mails_per_day, perMs: DAY_MS }, label: `${l.mails_per_day} a day` },
];

export const invitationBucket = (workspaceId: string, l: Pick<WorkspaceLimits, 'member_invitations_per_hour'>) => ({
  bucket: `quota-invite-hour:${workspaceId}`,
  budget: { cap: l.member_invitations_per_hour, perMs: HOUR_MS },
});

export const partPutBucket = (keyId: string, l: Pick<WorkspaceLimits, 'part_puts_per_minute'>) => ({
  bucket: `quota-parts:${keyId}`,
  budget: { cap: l.part_puts_per_minute, perMs: 60_000 },
});

/** A refusal in words with the seconds to wait, or null when every budget gave what was asked. */
export type Refused = { retryAfterS: number; message: string } | null;

/** Takes `n` from each of the budgets, all or none (a later refusal gives back what earlier ones took). */
export async function takeAll(sql: Sql, budgets: ReadonlyArray<{ bucket: string; budget: Budget; label?: string }>, n: number, nowMs: number, what: string): Promise<Refused> {
  const taken: Array<{ bucket: string; budget: Budget }> = [];
  for (const b of budgets) {
    const answer = await takeQuota(sql, b.bucket, b.budget, n, nowMs);
    if (!answer.ok) {
      for (const t of taken) await returnQuota(sql, t.bucket, t.budget, n);
      const over = n > b.budget.cap ? ` (${n} at once is more than the whole budget)` : '';
      return { retryAfterS: answer.retryAfterS, message: `${what}: the workspace's limit of ${b.label ?? `${b.budget.cap}`} is reached${over}; retry after ${answer.retryAfterS} s.` };
    }
    taken.push(b);
  }
  return null;
}

/**
 * Takes `n` mails of the workspace's hourly and daily mail budgets (all or none): every mail an
 * operation sends on the workspace's behalf goes through here before it is sent.
 */
export async function takeMailQuota(sql: Sql, workspaceId: string, n: number, nowMs: number): Promise<Refused> {
  const limits = await workspaceLimits(sql, workspaceId);
  return takeAll(sql, mailBuckets(workspaceId, limits), n, nowMs, `${n} mail${n === 1 ? '' : 's'}`);
}
