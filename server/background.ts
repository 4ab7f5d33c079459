/**
 * The one kit for background work kept in database rows: jobs, outbox consumers, automation runs,
 * webhook deliveries. Their tables differ; how a row is taken under a lease, renewed, finished or
 * failed with a backoff does not, and is written here only.
 *
 * A claim is one statement: `UPDATE <table> SET <owner> = ?, <until> = ? ... WHERE <id> IN (SELECT
 * <id> ... ORDER BY ... LIMIT n) RETURNING ...`. On PostgreSQL the inner select takes `FOR UPDATE SKIP
 * LOCKED`, so concurrent claimers never wait for each other nor take the same row; on SQLite writers
 * are serial, so the same statement without it is enough. A row is claimable when it is due and
 * nobody holds it, or when the lease of its holder ended (`until <= now`: the holder died, and the work
 * is done at least once). Every finish, renewal or failure names the owner, so a holder whose lease was taken over
 * changes nothing.
 *
 * A pool (`WorkPool`) runs claimed items with bounded concurrency: it claims only as many as it has
 * free lanes and starts each at once, so one slow item occupies one lane and costs only itself; a long
 * item's lease is renewed while it runs.
 */
import os from 'node:os';
import type { Sql, SqlValue } from '../db/database.ts';
import type { Clock } from './clock.ts';
import { randomIdPart } from './ids.ts';

/** This process's name in every lease it takes (jobs, consumers, runs, deliveries): one id per process. */
export const PROCESS_OWNER = `${os.hostname().slice(0, 40)}-${process.pid}-${randomIdPart(8)}`;

/** A piece of SQL with its `?` parameters. */
export interface Fragment {
  readonly text: string;
  readonly params?: readonly SqlValue[];
}

/** Where a table keeps its lease (defaults: `id`, `leased_by`, `lease_until`). */
export interface LeaseColumns {
  readonly table: string;
  /** The primary key column. */
  readonly id?: string;
  /** Who holds the row (text, null when free). */
  readonly owner?: string;
  /** Until when (Unix ms) the holder holds it. */
  readonly until?: string;
}

/** Who claims, when, and for how long. */
export interface Lease {
  /** Usually PROCESS_OWNER. */
  readonly owner: string;
  /** Unix ms, from the service clock. */
  readonly now: number;
  /** How long the claim lasts without renewal. */
  readonly ms: number;
}

/** What a claim takes, beyond the lease columns. */
export interface ClaimQuery extends LeaseColumns {
  /** Rows ready to be taken (e.g. `status = 'pending' AND next_attempt_at <= ?`). */
  readonly due: Fragment;
  /**
   * Rows in their "being worked on" state (e.g. `status = 'running'`): taken over once their lease has
   * ended. Without it, a due row is taken when its lease is absent or has ended.
   */
  readonly held?: Fragment;
  /** Also take (renew) rows this owner holds already, before their lease ends (a consumer renewing its claim). */
  readonly ownAgain?: boolean;
  /** Further assignments of the claim, e.g. `status = 'running', attempts = attempts + 1`. */
  readonly set?: Fragment;
  /** ORDER BY of the candidates (oldest first). */
  readonly order: string;
  /** At most this many rows. */
  readonly limit: number;
  /** RETURNING list (default `*`). */
  readonly returning?: string;
}

const cols = (c: LeaseColumns) => ({ id: c.id ?? 'id', owner: c.owner ?? 'leased_by', until: c.until ?? 'lease_until' });

/** The lease's end for a claim or renewal made now. */
export const leaseEnd = (lease: Pick<Lease, 'now' | 'ms'>): number => lease.now + lease.ms;

/** Whether a row's lease (owner, until) is held by someone other than `owner` now (a lease has ended when until <= now). */
export const heldByOther = (row: { owner: string | null; until: number | string | null }, owner: string, now: number): boolean =>
  row.owner !== owner && row.until !== null && Number(row.until) > now;

/** Whether `owner` should (re)claim: it does not hold the lease, or less than half of `ms` is left. */
export const needsRenewal = (row: { owner: string | null; until: number | string | null }, lease: Lease): boolean =>
  row.owner !== lease.owner || row.until === null || Number(row.until) - lease.now < lease.ms / 2;

/**
 * Claims up to `q.limit` rows for `lease.owner` until `now + ms`, in one statement; returns them as
 * changed. Concurrent claimers (processes) never take the same row and never wait for each other.
 */
export function claim<T extends object>(sql: Sql, q: ClaimQuery, lease: Lease): Promise<T[]> {
  if (q.limit <= 0) return Promise.resolve([]);
  const c = cols(q);
  const params: SqlValue[] = [lease.owner, leaseEnd(lease), ...(q.set?.params ?? [])];
  const mine = q.ownAgain ? ` OR ${c.owner} = ?` : '';
  const ended = `${c.until} <= ?${mine}`;
  const free = q.held ? `(${q.due.text}) OR ((${q.held.text}) AND (${ended}))` : `(${q.due.text}) AND (${c.until} IS NULL OR ${ended})`;
  params.push(...(q.due.params ?? []), ...(q.held?.params ?? []), lease.now, ...(q.ownAgain ? [lease.owner] : []), q.limit);
  const skip = sql.dialect === 'pg' ? ' FOR UPDATE SKIP LOCKED' : '';
  return sql.all<T>(
    `UPDATE ${q.table} SET ${c.owner} = ?, ${c.until} = ?${q.set ? `, ${q.set.text}` : ''}
     WHERE ${c.id} IN (SELECT ${c.id} FROM ${q.table} WHERE ${free} ORDER BY ${q.order} LIMIT ?${skip})
     RETURNING ${q.returning ?? '*'}`,
    params,
  );
}

/**
 * Inside a transaction: the row if `lease.owner` still holds it with an unexpired lease, locked until
 * commit (PostgreSQL; a row locked by someone else is skipped, not waited for; on SQLite the write
 * transaction already excludes everyone else).
 */
export function lockHeld<T extends object>(sql: Sql, t: LeaseColumns, id: SqlValue, lease: Lease, returning = '*'): Promise<T | undefined> {
  const c = cols(t);
  const skip = sql.dialect === 'pg' ? ' FOR UPDATE SKIP LOCKED' : '';
  return sql.one<T>(`SELECT ${returning} FROM ${t.table} WHERE ${c.id} = ? AND ${c.owner} = ? AND ${c.until} > ?${skip}`, [id, lease.owner, lease.now]);
}

/** Extends the lease on a row `owner` still holds to `now + ms`; false when it no longer holds it. */
export async function renewLease(sql: Sql, t: LeaseColumns, id: SqlValue, lease: Lease): Promise<boolean> {
  const c = cols(t);
  return (await sql.run(`UPDATE ${t.table} SET ${c.until} = ? WHERE ${c.id} = ? AND ${c.owner} = ?`, [leaseEnd(lease), id, lease.owner])) > 0;
}

/**
 * Ends `owner`'s hold on a row and applies `set` (the outcome, e.g. `status = 'succeeded'`) in one
 * statement; false when the owner no longer holds it (another took it over: its outcome counts).
 */
export async function finishLeased(sql: Sql, t: LeaseColumns, id: SqlValue, owner: string, set?: Fragment): Promise<boolean> {
  const c = cols(t);
  const text = `UPDATE ${t.table} SET ${c.owner} = NULL, ${c.until} = NULL${set ? `, ${set.text}` : ''} WHERE ${c.id} = ? AND ${c.owner} = ?`;
  return (await sql.run(text, [...(set?.params ?? []), id, owner])) > 0;
}

/** Deletes a row `owner` still holds (work that leaves nothing behind); false when it no longer holds it. */
export async function deleteLeased(sql: Sql, t: LeaseColumns, id: SqlValue, owner: string): Promise<boolean> {
  const c = cols(t);
  return (await sql.run(`DELETE FROM ${t.table} WHERE ${c.id} = ? AND ${c.owner} = ?`, [id, owner])) > 0;
}

/** Gives up every row `owner` holds in a table (graceful stop), so another process takes them at once. */
export async function releaseAll(sql: Sql, t: LeaseColumns, owner: string, where?: Fragment): Promise<number> {
  const c = cols(t);
  return sql.run(`UPDATE ${t.table} SET ${c.owner} = NULL, ${c.until} = NULL WHERE ${c.owner} = ?${where ? ` AND (${where.text})` : ''}`, [owner, ...(where?.params ?? [])]);
}

/**
 * When failed work is tried again:
 * - `exponential`: `baseMs` after the first failure, doubling, at most `capMs`, measured from now.
 * - `offsets`: attempt k+1 is due `offsetsMs[k]` after the first attempt, later by up to `jitter` (a
 *   fraction, e.g. 0.1) of the gap since the previous offset, and never sooner than `minGap` (a
 *   fraction) of that gap from now (when an attempt ran late, after a deferral or a long
 *   `Retry-After`, the next offsets may be past: they do not fire back to back); after the last
 *   offset there is none.
 */
export type BackoffSchedule =
  | { readonly kind: 'exponential'; readonly baseMs: number; readonly capMs: number }
  | { readonly kind: 'offsets'; readonly offsetsMs: readonly number[]; readonly jitter?: number; readonly minGap?: number };

/** The schedule of jobs (1 s doubling to 1 h). */
export const JOB_BACKOFF: BackoffSchedule = { kind: 'exponential', baseMs: 1000, capMs: 3_600_000 };

/**
 * When to try again after `failures` failed attempts (1 after the first): a Unix ms time, or null when
 * the schedule has no further attempt. `firstAt` is when the first attempt was due (offset schedules
 * count from it); `random` returns [0, 1) (injected in tests).
 */
export function nextAttempt(schedule: BackoffSchedule, failures: number, at: { now: number; firstAt?: number }, random: () => number = Math.random): number | null {
  if (schedule.kind === 'exponential') {
    return at.now + Math.min(schedule.capMs, schedule.baseMs * 2 ** Math.min(Math.max(failures - 1, 0), 40));
  }
  const offset = schedule.offsetsMs[failures];
  if (offset === undefined) return null;
  const gap = offset - (schedule.offsetsMs[failures - 1] ?? 0);
  const due = (at.firstAt ?? at.now) + offset + Math.floor(random() * gap * (schedule.jitter ?? 0));
  return schedule.minGap === undefined ? due : Math.max(due, at.now + Math.floor(gap * schedule.minGap));
}

/**
 * Records a failure on a row `owner` holds: its lease ends and it is due again at `retryAt` (in
 * `retryColumn`), with `set` applied too (e.g. `last_error = ?`). False when the owner no longer holds it.
 */
export function failLeased(sql: Sql, t: LeaseColumns, id: SqlValue, owner: string, retry: { column: string; at: number }, set?: Fragment): Promise<boolean> {
  return finishLeased(sql, t, id, owner, { text: `${retry.column} = ?${set ? `, ${set.text}` : ''}`, params: [retry.at, ...(set?.params ?? [])] });
}

/** What a pool needs: how to claim items and how to run one. */
export interface PoolWork<T> {
  /** Claims up to `n` items under this process's lease (n ≥ 1). */
  claim(n: number): Promise<T[]>;
  /** Runs one claimed item; errors are the caller's to record (a throw here is logged by `onError`). */
  perform(item: T): Promise<void>;
  /** Renews an item's lease while it runs (every `renewEveryMs` of real time); false: it was lost. */
  renew?(item: T): Promise<boolean>;
  /** Called with an error `perform` or `renew` threw. */
  onError(err: unknown, item: T): void;
}

/**
 * Runs claimed items with at most `concurrency` at a time. `runOnce()` claims as many as there are free
 * lanes, starts them and returns how many it started without waiting for them (a poll loop calls it
 * again at once while it finds work; a lane that frees up calls `wake`). `drain()` waits for the items
 * in flight (tests, shutdown). It is a module worker as it stands (`runOnce`, `drain`, `onFree`, `intervalMs`).
 */
export class WorkPool<T> {
  private readonly inFlight = new Set<Promise<void>>();
  private wakeHook: (() => void) | null = null;

  constructor(
    private readonly work: PoolWork<T>,
    private readonly options: { readonly concurrency: number; readonly renewEveryMs?: number | ((item: T) => number); readonly intervalMs?: number },
  ) {}

  /** Longest wait between polls when idle, for the poll loop that runs the pool. */
  get intervalMs(): number | undefined {
    return this.options.intervalMs;
  }

  /** Items running now. */
  get running(): number {
    return this.inFlight.size;
  }

  /** Called when a lane frees up (the poll loop's `wake`). */
  onFree(wake: () => void): void {
    this.wakeHook = wake;
  }

  /** Claims and starts as many items as there are free lanes; returns how many it started. */
  async runOnce(): Promise<number> {
    const free = this.options.concurrency - this.inFlight.size;
    if (free <= 0) return 0;
    const items = await this.work.claim(free);
    for (const item of items) this.start(item);
    return items.length;
  }

  /** Waits until no item is in flight. */
  async drain(): Promise<void> {
    while (this.inFlight.size) await Promise.all([...this.inFlight]);
  }

  /** Claims and runs items until none is due and none is in flight (tests: everything due now, done). */
  async runAll(): Promise<number> {
    let total = 0;
    for (;;) {
      const started = await this.runOnce();
      total += started;
      if (!started && !this.inFlight.size) return total;
      if (!started || this.inFlight.size >= this.options.concurrency) await Promise.race([...this.inFlight]);
    }
  }

  /**
   * Runs an item claimed elsewhere (a job enqueued already claimed, run right after its transaction
   * commits), beside the pool's own, lanes or not; resolves when it is done (never rejects).
   */
  runClaimed(item: T): Promise<void> {
    return this.start(item);
  }

  private start(item: T): Promise<void> {
    const every = this.options.renewEveryMs;
    const renewEvery = typeof every === 'function' ? every(item) : every;
    const timer =
      renewEvery && this.work.renew
        ? setInterval(() => void this.work.renew!(item).catch((err: unknown) => this.work.onError(err, item)), renewEvery)
        : null;
    timer?.unref();
    const p: Promise<void> = this.work
      .perform(item)
      .catch((err: unknown) => this.work.onError(err, item))
      .finally(() => {
        if (timer) clearInterval(timer);
        this.inFlight.delete(p);
        this.wakeHook?.();
      });
    this.inFlight.add(p);
    return p;
  }
}

/** The current time of a clock as a lease for `owner` (default PROCESS_OWNER) lasting `ms`. */
export const leaseNow = (clock: Clock, ms: number, owner: string = PROCESS_OWNER): Lease => ({ owner, now: clock.now(), ms });
