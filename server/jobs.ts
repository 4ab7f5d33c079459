/**
 * Background jobs kept in the database (`jobs`), so any number of worker processes share them. A job
 * is added with `enqueue` inside the caller's transaction (it exists exactly when that commits; a
 * dedupe key keeps one job per key), claimed by exactly one worker under a lease through the
 * background kit (server/background.ts), and run beside other jobs: at most `concurrency` at a time,
 * each under its own lease, renewed while it runs, so a slow job costs only itself. Failures back off
 * exponentially (1 s doubling, at most 1 h); recurring jobs come back `everyMs` after a success.
 *
 * Declared effects: work a command must do after its transaction commits (a mail, a call to another
 * server) is enqueued in that transaction with `beforeAnswer`. The row is written already claimed by
 * this process, so it exists exactly when the command commits and no other worker takes it; right
 * after the commit this process runs it (`runAfterCommit` from the executor, which waits up to
 * `waitMs` before answering; `committed(sql)` from anyone else, without waiting). A process that dies
 * after the commit leaves the row to whoever claims it when its lease ends: the effect still runs,
 * at least once.
 */
import type { Logger } from 'pino';
import { type Database, isBusy, type Sql } from '../db/database.ts';
import { enqueueClaimedJob, enqueueJob } from '../db/queries/jobs.ts';
import type { DbJobRow } from '../db/rows.ts';
import {
  claim,
  deleteLeased,
  failLeased,
  finishLeased,
  JOB_BACKOFF,
  type LeaseColumns,
  leaseNow,
  nextAttempt,
  PROCESS_OWNER,
  renewLease,
  WorkPool,
} from './background.ts';
import type { Clock } from './clock.ts';
import { PollLoop } from './workers.ts';

export interface JobDefinition {
  run(payload: unknown): Promise<void>;
  /** For recurring jobs: the next run after a success. */
  everyMs?: number;
  /** How long a claim lasts without renewal before another worker may take the job over (renewed while it runs). */
  leaseMs?: number;
}

export interface EnqueueOptions {
  /** When it is due (Unix ms; default now). */
  readonly runAt?: number;
  /** De-duplication: while a job of this key waits or runs, enqueueing another of the key adds nothing. */
  readonly key?: string;
  /**
   * A declared effect of the caller's transaction: run by this process right after it commits (see
   * above); an operation's executor waits for it up to `waitMs` before the command answers. Only jobs
   * due now.
   */
  readonly beforeAnswer?: { readonly waitMs: number };
}

/** What became of a command's declared effects when its executor stopped waiting for them. */
export interface EffectReport {
  readonly kind: string;
  readonly key: string | null;
  readonly payload: unknown;
  /** The job ran to its end (done, or failed and due again later); false: still running. */
  readonly settled: boolean;
}

/** What handlers, consumers and modules enqueue jobs with (`ctx.jobs`, `deps.jobs`). */
export interface JobQueue {
  /**
   * Adds a job of a defined kind in `sql`, the caller's transaction: it exists exactly when that
   * transaction commits (a rollback leaves none). Returns false when the key's job exists already.
   * After a command or a consumer batch commits, this process's runner is woken; after a transaction
   * of your own, call `committed(sql)` (or the job is found at the next poll).
   */
  enqueue(sql: Sql, kind: string, payload: unknown, options?: EnqueueOptions): Promise<boolean>;
  /** Says that `sql`'s transaction committed: wakes the runner when it enqueued jobs, starts its declared effects. */
  committed(sql: Sql): void;
  /**
   * After `sql`'s transaction committed: runs its declared effects (`beforeAnswer`) and waits for each
   * up to its `waitMs`; says which ended. The executor calls it before the command answers.
   */
  runAfterCommit(sql: Sql): Promise<EffectReport[]>;
}

const JOBS: LeaseColumns = { table: 'jobs', owner: 'locked_by', until: 'locked_until' };
const DEFAULT_LEASE_MS = 5 * 60_000;
const errorText = (err: unknown) => String(err instanceof Error ? err.message : err).slice(0, 2000);

export interface JobRunnerOptions {
  /** Jobs run at once by this process (default 4). */
  concurrency?: number;
  /** Owner id in leases (default the process's). */
  owner?: string;
}

/**
 * Runs this process's share of the jobs on a PollLoop: each poll claims as many due jobs as it has
 * free lanes and starts them; a lane that frees up, or a commit that enqueued a job, polls again.
 */
export class JobRunner implements JobQueue {
  private readonly definitions = new Map<string, JobDefinition>();
  private readonly owner: string;
  private readonly pool: WorkPool<DbJobRow>;
  // Weak: a transaction that rolls back never reports its commit and must not be kept.
  private readonly enqueuedIn = new WeakSet<Sql>();
  private readonly declared = new WeakMap<Sql, Array<{ job: DbJobRow; waitMs: number }>>();
  private loop: PollLoop | null = null;
  private busy = false;

  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    private readonly logger: Logger,
    options: JobRunnerOptions = {},
  ) {
    this.owner = options.owner ?? PROCESS_OWNER;
    this.pool = new WorkPool<DbJobRow>(
      {
        claim: (n) => this.claim(n),
        perform: (job) => this.perform(job),
        renew: (job) => renewLease(this.db.sql, JOBS, job.id, leaseNow(this.clock, this.leaseOf(job.kind), this.owner)),
        onError: (err, job) => this.logger.error({ err, job: job.kind }, 'job bookkeeping failed; the job is taken again when its lease ends'),
      },
      { concurrency: options.concurrency ?? 4, renewEveryMs: (job) => this.leaseOf(job.kind) / 3 },
    );
  }

  define(kind: string, definition: JobDefinition): void {
    this.definitions.set(kind, definition);
  }

  /** Ensures each recurring job exists once (dedupe key = kind). */
  async scheduleRecurring(): Promise<void> {
    for (const [kind, def] of this.definitions) {
      if (def.everyMs) await enqueueJob(this.db.sql, { kind, payload: null, runAt: this.clock.now(), dedupeKey: `recurring:${kind}` });
    }
  }

  async enqueue(sql: Sql, kind: string, payload: unknown, options: EnqueueOptions = {}): Promise<boolean> {
    if (!this.definitions.has(kind)) throw new Error(`no job definition for ${kind}`);
    if (options.beforeAnswer) {
      const now = this.clock.now();
      const job = await enqueueClaimedJob(sql, { kind, payload, runAt: now, dedupeKey: options.key }, { owner: this.owner, until: now + this.leaseOf(kind) });
      if (!job) return false;
      const list = this.declared.get(sql) ?? [];
      list.push({ job, waitMs: options.beforeAnswer.waitMs });
      this.declared.set(sql, list);
      return true;
    }
    const added = await enqueueJob(sql, { kind, payload, runAt: options.runAt ?? this.clock.now(), dedupeKey: options.key });
    if (added) this.enqueuedIn.add(sql);
    return added;
  }

  committed(sql: Sql): void {
    this.startDeclared(sql);
    if (this.enqueuedIn.delete(sql)) this.wake();
  }

  async runAfterCommit(sql: Sql): Promise<EffectReport[]> {
    const started = this.startDeclared(sql);
    return Promise.all(
      started.map(async ({ job, waitMs, done }) => {
        let settled = false;
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([done.then(() => (settled = true)), new Promise<void>((resolve) => (timer = setTimeout(resolve, waitMs)))]);
        clearTimeout(timer);
        return { kind: job.kind, key: job.dedupe_key, payload: JSON.parse(job.payload) as unknown, settled };
      }),
    );
  }

  /** Starts the declared effects of a committed transaction, once (synchronously: no other claimer can be first). */
  private startDeclared(sql: Sql): Array<{ job: DbJobRow; waitMs: number; done: Promise<void> }> {
    const list = this.declared.get(sql);
    if (!list) return [];
    this.declared.delete(sql);
    return list.map(({ job, waitMs }) => ({ job, waitMs, done: this.pool.runClaimed(job) }));
  }

  /** Polls now (no-op unless started). */
  wake(): void {
    this.loop?.wake();
  }

  /** Jobs running in this process now. */
  get running(): number {
    return this.pool.running;
  }

  /** Runs every job due now, side by side, and waits for them; returns how many ran (tests, one-off runs). */
  runDue(): Promise<number> {
    return this.pool.runAll();
  }

  /**
   * One poll, waiting for the jobs it ran; never throws. A database that is busy for now (another
   * process holds the write lock) is said once, quietly, and the next poll tries again.
   */
  async poll(): Promise<number> {
    try {
      const count = await this.runDue();
      this.busy = false;
      return count;
    } catch (err) {
      if (!isBusy(err)) this.logger.error({ err }, 'job runner failed');
      else if (!this.busy) this.logger.info({ code: (err as { code: string }).code }, 'jobs wait: the database is busy (another process is writing); trying again at the next poll');
      this.busy = isBusy(err);
      return 0;
    }
  }

  /** Polls for due jobs at least every `intervalMs` until stopped. */
  start(intervalMs = 1000): void {
    if (this.loop) return;
    this.loop = new PollLoop('jobs', { runOnce: () => this.pool.runOnce(), intervalMs }, this.logger);
    this.pool.onFree(() => this.loop?.wake());
    this.loop.start();
  }

  /** Stops polling and waits for the jobs in flight. */
  async stop(): Promise<void> {
    const loop = this.loop;
    this.loop = null;
    await loop?.stop();
    await this.pool.drain();
  }

  private leaseOf(kind: string): number {
    return this.definitions.get(kind)?.leaseMs ?? DEFAULT_LEASE_MS;
  }

  private claim(n: number): Promise<DbJobRow[]> {
    const lease = leaseNow(this.clock, DEFAULT_LEASE_MS, this.owner);
    // Leases are per kind: jobs are claimed with the default and their own lease set at once if it differs.
    return claim<DbJobRow>(this.db.sql, { ...JOBS, due: { text: 'run_at <= ?', params: [lease.now] }, set: { text: 'attempts = attempts + 1' }, order: 'run_at, id', limit: n }, lease);
  }

  private async perform(job: DbJobRow): Promise<void> {
    const def = this.definitions.get(job.kind);
    const sql = this.db.sql;
    try {
      if (!def) throw new Error(`no job definition for ${job.kind}`);
      if (def.leaseMs && def.leaseMs !== DEFAULT_LEASE_MS) await renewLease(sql, JOBS, job.id, leaseNow(this.clock, def.leaseMs, this.owner));
      await def.run(JSON.parse(job.payload));
    } catch (err) {
      if (isBusy(err)) this.logger.info({ job: job.kind, code: (err as { code: string }).code }, 'job deferred: the database is busy (another process is writing)');
      else this.logger.warn({ err, job: job.kind, attempts: job.attempts }, 'job failed; retrying later');
      const retryAt = nextAttempt(JOB_BACKOFF, Number(job.attempts), { now: this.clock.now() })!;
      await failLeased(sql, JOBS, job.id, this.owner, { column: 'run_at', at: retryAt }, { text: 'last_error = ?', params: [errorText(err)] });
      return;
    }
    // The job succeeded: a failure to record that is not the job's failure (no backoff, no error on the job); the
    // row stays leased and the job is taken again only when the lease ends.
    try {
      if (def.everyMs) await finishLeased(sql, JOBS, job.id, this.owner, { text: 'run_at = ?, last_error = NULL, attempts = 0', params: [this.clock.now() + def.everyMs] });
      else await deleteLeased(sql, JOBS, job.id, this.owner);
    } catch (err) {
      this.logger.error({ err, job: job.kind }, 'job done, but its completion could not be recorded; it runs again when its lease ends');
    }
  }
}
