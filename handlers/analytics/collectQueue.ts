/**
 * The collection queue of one process: events validated by the HTTP path wait here and are written
 * in batches through ingestEvents (one transaction per batch, sessions and rollups included), every
 * `collectFlushIntervalMs` or as soon as a batch is full, by a writer thread (or inline).
 */
import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import type { Database } from '../../db/database.ts';
import { ingestEvents } from './ingest.ts';
import type { WriterReply, WriterRequest } from './ingestWorker.ts';
import type { NewAnalyticsEvent } from './rows.ts';
import type { AnalyticsSettings } from './settings.ts';
import type { UnwrittenEvents } from './visitors.ts';

/** Batches handed to the writer at once (see drain). */
const WRITES_IN_FLIGHT = 2;
/** A batch that takes this long to write is logged (the queue grows meanwhile). */
const SLOW_BATCH_MS = 2000;

/** Writes one batch of events (sessions and rollups included) in one transaction. */
export interface BatchWriter {
  write(events: NewAnalyticsEvent[]): Promise<void>;
  close(): Promise<void>;
}

/** Writes on this thread, on the service's own connection. */
export function inlineWriter(db: Database): BatchWriter {
  return { write: async (events) => void (await ingestEvents(db, events)), close: async () => {} };
}

/**
 * Writes on a worker thread (ingestWorker.ts) with its own connection: the HTTP thread keeps
 * answering while a batch is written, and the sessionization runs on another core. A thread that
 * dies fails its pending batches (they stay queued) and is started again for the next one.
 */
export function threadWriter(databaseUrl: string, logger: Logger): BatchWriter {
  let worker: Worker | null = null;
  let next = 0;
  const pending = new Map<number, { resolve: () => void; reject: (err: Error) => void }>();
  const failAll = (err: Error) => {
    for (const p of pending.values()) p.reject(err);
    pending.clear();
  };
  const start = () => {
    const w = new Worker(new URL('./ingestWorker.boot.mjs', import.meta.url), { workerData: { databaseUrl } });
    w.on('message', (reply: WriterReply) => {
      const p = pending.get(reply.id);
      pending.delete(reply.id);
      if (!p) return;
      if (reply.ok) p.resolve();
      else p.reject(Object.assign(new Error(reply.message), { stack: reply.stack }));
    });
    w.on('error', (err) => logger.error({ err }, 'collection: the writer thread failed'));
    w.on('exit', (code) => {
      if (worker === w) worker = null;
      failAll(new Error(`the collection writer thread exited (code ${code})`));
    });
    return w;
  };
  return {
    write(events) {
      worker ??= start();
      const id = ++next;
      const done = new Promise<void>((resolve, reject) => pending.set(id, { resolve, reject }));
      worker.postMessage({ id, events } satisfies WriterRequest);
      return done;
    },
    async close() {
      const w = worker;
      if (!w) return;
      worker = null;
      const exited = new Promise((resolve) => w.once('exit', resolve));
      w.postMessage({ close: true } satisfies WriterRequest);
      await exited;
    },
  };
}

type Settings = Pick<AnalyticsSettings, 'collectBatchSize' | 'collectBufferMax' | 'collectFlushIntervalMs'>;

export class CollectQueue implements UnwrittenEvents {
  private queue: NewAnalyticsEvent[] = [];
  private running: Promise<void> | null = null;
  // Queued or being written, per site and visitor: what the database cannot answer yet.
  private readonly unwritten = new Map<string, { n: number; lastTs: number }>();
  private deciding: Promise<void> = Promise.resolve();
  // While the queue is full: since when, and how many events were refused (logged when it ends).
  private shedding: { since: number; refused: number } | null = null;
  private refusedTotal = 0;
  private readonly timer: NodeJS.Timeout | null;

  /** `prepare` runs on each batch, in queue order, before it is written (the visitor decisions). */
  constructor(
    private readonly settings: Settings,
    private readonly writer: BatchWriter,
    private readonly logger: Logger,
    private readonly prepare: (batch: readonly NewAnalyticsEvent[]) => Promise<void>,
  ) {
    this.timer = settings.collectFlushIntervalMs > 0
      ? setInterval(() => {
          if (this.queue.length && !this.running) this.kick().catch(() => {});
        }, settings.collectFlushIntervalMs)
      : null;
    this.timer?.unref();
  }

  get length(): number {
    return this.queue.length;
  }

  /** Events refused because the queue was full, since the process started. */
  get refused(): number {
    return this.refusedTotal;
  }

  /** True (and the refusal counted) when the queue is full. */
  full(): boolean {
    if (this.queue.length < this.settings.collectBufferMax) return false;
    if (!this.shedding) {
      this.shedding = { since: performance.now(), refused: 0 };
      this.logger.warn({ queued: this.queue.length }, 'collection: the queue is full; refusing events (503) until the writer catches up');
    }
    this.shedding.refused++;
    this.refusedTotal++;
    return true;
  }

  push(event: NewAnalyticsEvent): void {
    this.queue.push(event);
    this.remember(event);
    if (this.queue.length >= this.settings.collectBatchSize && !this.running) this.kick().catch(() => {});
  }

  lastTs(bundleId: string, visitor: string): number | undefined {
    return this.unwritten.get(`${bundleId}\n${visitor}`)?.lastTs;
  }

  rekey(event: NewAnalyticsEvent, visitor: string): void {
    this.forget(event);
    event.visitor = visitor;
    this.remember(event);
  }

  private remember(e: NewAnalyticsEvent): void {
    const k = `${e.bundle_id}\n${e.visitor}`;
    const u = this.unwritten.get(k);
    if (u) {
      u.n++;
      if (e.ts > u.lastTs) u.lastTs = e.ts;
    } else this.unwritten.set(k, { n: 1, lastTs: e.ts });
  }

  private forget(e: NewAnalyticsEvent): void {
    const k = `${e.bundle_id}\n${e.visitor}`;
    const u = this.unwritten.get(k);
    if (u && --u.n === 0) this.unwritten.delete(k);
  }

  /** Hands one batch to the writer; a failed batch goes back to the head of the queue. */
  private write(batch: NewAnalyticsEvent[]): Promise<unknown> {
    // Decisions run one batch at a time, in queue order (the midnight carry-over reads what the
    // earlier batch decided); a batch that arrives at the writer out of order is still exact.
    let started = 0;
    const decided = (this.deciding = this.deciding.catch(() => {}).then(() => this.prepare(batch)));
    return decided
      .then(() => {
        started = performance.now();
        return this.writer.write(batch);
      })
      .then(
        () => {
          for (const e of batch) this.forget(e);
          const ms = Math.round(performance.now() - started);
          if (ms >= SLOW_BATCH_MS) this.logger.warn({ events: batch.length, ms, queued: this.queue.length }, 'collection: a batch was slow to write');
          if (this.shedding && this.queue.length < this.settings.collectBufferMax) {
            this.logger.warn({ refused: this.shedding.refused, ms: Math.round(performance.now() - this.shedding.since) }, 'collection: taking events again');
            this.shedding = null;
          }
          return null;
        },
        (err: unknown) => {
          this.queue = batch.concat(this.queue); // retried by the next flush, first in line
          this.logger.error({ err, events: batch.length, queued: this.queue.length }, 'collection: storing a batch failed; it stays queued and is retried');
          return err ?? new Error('the batch failed');
        },
      );
  }

  /**
   * Writes a batch, then more while full batches are waiting (`all`: until the queue is empty), with
   * up to WRITES_IN_FLIGHT batches handed to the writer at once: while one batch's transaction waits
   * on the database, the next is prepared. Order stays exact: each batch takes the site's advisory
   * lock (PostgreSQL) or the write lock (SQLite) and then reads what the earlier batch committed.
   */
  private async drain(all: boolean): Promise<void> {
    const inFlight = new Set<Promise<unknown>>();
    let failure: unknown = null;
    let taken = 0;
    const size = this.settings.collectBatchSize;
    for (;;) {
      const more = failure === null && this.queue.length > 0 && (taken === 0 || all || this.queue.length >= size);
      if (!more || inFlight.size >= WRITES_IN_FLIGHT) {
        if (!inFlight.size) break;
        await Promise.race(inFlight);
        continue;
      }
      const batch = this.queue.slice(0, size);
      this.queue = this.queue.slice(batch.length);
      taken++;
      const write: Promise<unknown> = this.write(batch)
        .then((err) => void (err !== null && (failure ??= err)))
        .finally(() => inFlight.delete(write));
      inFlight.add(write);
      // SQLite writes synchronously (inline writer): let waiting requests in between two batches.
      // A partial batch waits for the next tick: small batches cost more per event.
      await new Promise((resolve) => setImmediate(resolve));
    }
    if (failure !== null) throw failure;
  }

  private kick(all = false): Promise<void> {
    if (!this.running) this.running = this.drain(all).finally(() => (this.running = null));
    return this.running;
  }

  /** Writes every queued event now (waits for a write in progress first); rejects when a batch fails (it stays queued). */
  async flush(): Promise<void> {
    for (;;) {
      if (this.running) {
        await this.running.catch(() => {});
        continue;
      }
      if (!this.queue.length) return;
      await this.kick(true);
    }
  }

  /** Stops the timer and writes what is queued (shutdown). */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    try {
      await this.flush();
    } finally {
      await this.writer.close();
    }
  }
}
