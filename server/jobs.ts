import type { Logger } from 'pino';
import { type Database, isBusy } from '../db/database.ts';
import { claimDueJob, enqueueJob, finishJob, rescheduleJob } from '../db/queries/jobs.ts';
import type { Clock } from './clock.ts';
import { randomIdPart } from './ids.ts';

export interface JobDefinition {
  run(payload: unknown): Promise<void>;
  /** For recurring jobs: the next run after a success. */
  everyMs?: number;
  /** How long a claim lasts before another worker may take the job over. */
  leaseMs?: number;
}

/**
 * Background jobs kept in the database, so any number of worker processes share them; each due job is
 * claimed by exactly one worker. Failures back off exponentially (1 s doubling, at most 1 h).
 */
export class JobRunner {
  private readonly definitions = new Map<string, JobDefinition>();
  private readonly worker = `worker-${process.pid}-${randomIdPart(8)}`;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<number> | null = null;

  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  define(kind: string, definition: JobDefinition): void {
    this.definitions.set(kind, definition);
  }

  /** Ensures each recurring job exists once (dedupe key = kind). */
  async scheduleRecurring(): Promise<void> {
    for (const [kind, def] of this.definitions) {
      if (def.everyMs) await enqueueJob(this.db.sql, { kind, payload: null, runAt: this.clock.now(), dedupeKey: `recurring:${kind}` });
    }
  }

  enqueue(kind: string, payload: unknown, runAt = this.clock.now()): Promise<void> {
    return enqueueJob(this.db.sql, { kind, payload, runAt });
  }

  /** Runs every job due now; returns how many ran. */
  async runDue(): Promise<number> {
    let count = 0;
    for (;;) {
      const now = this.clock.now();
      const job = await claimDueJob(this.db.sql, this.worker, now, now + 5 * 60_000);
      if (!job) return count;
      const def = this.definitions.get(job.kind);
      count++;
      try {
        if (!def) throw new Error(`no job definition for ${job.kind}`);
        await def.run(JSON.parse(job.payload));
        if (def.everyMs) await rescheduleJob(this.db.sql, job.id, this.clock.now() + def.everyMs, null, true);
        else await finishJob(this.db.sql, job.id);
      } catch (err) {
        const delay = Math.min(3_600_000, 1000 * 2 ** Math.min(job.attempts, 12));
        if (isBusy(err)) this.logger.info({ job: job.kind, code: (err as { code: string }).code }, 'job deferred: the database is busy (another process is writing)');
        else this.logger.warn({ err, job: job.kind, attempts: job.attempts }, 'job failed; retrying later');
        await rescheduleJob(this.db.sql, job.id, this.clock.now() + delay, String(err instanceof Error ? err.message : err), false);
      }
    }
  }

  private busy = false;

  /**
   * One poll: runs the due jobs; never throws. A database that is busy for now (another process holds
   * the write lock) is said once, quietly, and the next poll tries again; other errors are logged.
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

  /** Polls for due jobs every `intervalMs` until stopped. */
  start(intervalMs = 1000): void {
    const tick = () => {
      this.running = this.poll();
      void this.running.finally(() => {
        if (this.timer) this.timer = setTimeout(tick, intervalMs);
      });
    };
    this.timer = setTimeout(tick, 0);
  }

  async stop(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running;
  }
}
