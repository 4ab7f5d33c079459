/**
 * Background workers of modules (e.g. webhook delivery): a `runOnce()` that does what is due and says
 * how much, run in a loop: again at once while it finds work, else after its interval, or when woken
 * (`wake`, after this process committed work for it). Work is claimed through the database under
 * leases (server/background.ts), so any number of processes run the same workers.
 */
import type { Logger } from 'pino';
import { isBusy } from '../db/database.ts';

export interface BackgroundWorker {
  /** Does what is due now; returns how many items it handled (0: nothing was due). */
  runOnce(): Promise<number>;
  /** Longest wait between polls when idle (default 1000 ms). */
  readonly intervalMs?: number;
  /**
   * For a worker whose `runOnce` starts items and returns before they finish (a WorkPool of the
   * background kit): waits until none is in flight (tests, shutdown).
   */
  drain?(): Promise<void>;
  /** Given the loop's `wake`, for a worker to call when it can take more (a lane freed up). */
  onFree?(wake: () => void): void;
}

/**
 * Runs `runOnce` in a loop: again at once while it finds work, else after `intervalMs`, or when woken.
 * With `wakeGapMs`, polls start at most that often after a wake or a busy round, so a stream of wakes
 * is served in batches. Failures are logged (a busy database quietly) and the loop goes on.
 */
export class PollLoop {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<unknown> = Promise.resolve();
  private busy = false;
  private again = false;
  private started = false;
  private lastPoll = 0;

  constructor(
    private readonly name: string,
    private readonly worker: BackgroundWorker & { readonly wakeGapMs?: number },
    private readonly logger: Logger,
  ) {
    worker.onFree?.(() => this.wake());
  }

  private soon(): number {
    return Math.max(0, this.lastPoll + (this.worker.wakeGapMs ?? 0) - Date.now());
  }

  private readonly tick = () => {
    this.timer = null;
    this.busy = true;
    this.again = false;
    this.lastPoll = Date.now();
    const run = this.worker.runOnce().catch((err: unknown) => {
      if (isBusy(err)) this.logger.info({ worker: this.name }, `${this.name} waits: the database is busy (another process is writing)`);
      else this.logger.error({ err, worker: this.name }, `${this.name} failed; trying again at the next poll`);
      return 0;
    });
    this.running = run.then((handled) => {
      this.busy = false;
      if (this.started) this.timer = setTimeout(this.tick, handled > 0 || this.again ? this.soon() : (this.worker.intervalMs ?? 1000));
    });
  };

  start(): void {
    if (this.started) return;
    this.started = true;
    this.timer = setTimeout(this.tick, 0);
  }

  wake(): void {
    if (!this.started) return;
    if (this.busy) {
      this.again = true;
      return;
    }
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(this.tick, this.soon());
  }

  /** Stops polling and waits for the poll in flight and the items it started. */
  async stop(): Promise<void> {
    this.started = false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running;
    await this.worker.drain?.();
  }
}

/** The workers of one process, by name (`<namespace>.<what>`). */
export class Workers {
  private readonly loops = new Map<string, PollLoop>();

  constructor(
    private readonly workers: Readonly<Record<string, BackgroundWorker>>,
    logger: Logger,
  ) {
    for (const [name, w] of Object.entries(workers)) this.loops.set(name, new PollLoop(name, w, logger));
  }

  start(): void {
    for (const l of this.loops.values()) l.start();
  }

  /** Polls the named worker now (no-op unless started). */
  wake(name: string): void {
    this.loops.get(name)?.wake();
  }

  /** Runs one worker once, in the caller's time, and waits for the items it started (tests). */
  async runOnce(name: string): Promise<number> {
    const w = this.workers[name];
    if (!w) throw new Error(`no worker ${name}`);
    const handled = await w.runOnce();
    await w.drain?.();
    return handled;
  }

  async stop(): Promise<void> {
    await Promise.all([...this.loops.values()].map((l) => l.stop()));
  }
}
