/**
 * The reading side of the change-event outbox. Record writes insert their event into `record_events`
 * in the change's own transaction (server/events.ts); named consumers (each module's `consumers`)
 * read those events here: in order, at least once, each with a durable position in
 * `outbox_consumers`, one process at a time per consumer.
 *
 * Order and completeness. On SQLite writers are serial and `seq` is AUTOINCREMENT, so seq order is
 * commit order and `seq > position` never misses an event. On PostgreSQL it would: a transaction
 * takes its seq at insert but may commit after a transaction with a higher seq has committed and been
 * read, and a reader at that higher seq would pass over the lower one forever. So every event also
 * stores the id of the transaction that wrote it (`txid`, a column default `pg_current_xact_id()`:
 * the insert has assigned the id already, so the write path pays nothing), and a reader takes only
 * events whose transaction is older than its snapshot's xmin, the oldest transaction still running
 * anywhere in the cluster. Every transaction below xmin has ended (committed or rolled back) and a
 * transaction that takes its id later gets a higher one, so the set of events below xmin never grows:
 * reading it in (txid, seq) order, with the position as the (txid, seq) pair, cannot be overtaken by
 * a late commit. Reading by `seq` with the same xmin filter would not do: a transaction with a lower
 * id can hold a higher seq. (PgQ builds its batches on the same transaction-id snapshots.)
 *
 * What this costs: delivery waits for the oldest write transaction still running in the cluster, so
 * one long transaction (a bulk load, a session left open in psql) delays every consumer but loses
 * nothing; the runner logs who holds it back after `heldBackWarnMs`. Across transactions the order is
 * the order in which they first wrote; within one, seq order. Two transactions that change the same
 * record commit in the order they lock it, which is the order they first wrote unless the later one
 * had written something else before waiting for the lock: consumers should read the record's current
 * state rather than rely on two events of one record from different transactions never swapping.
 *
 * Failures. A handler runs in the batch's transaction, which also advances the position: its writes
 * there and the advance commit together (exactly once); anything else it does may happen again. When
 * it throws, the batch rolls back, the events before the failing one are handled again and committed
 * (a failure at commit is narrowed down one event at a time), and the failing event blocks its
 * consumer: later events wait, none is skipped. It is retried with backoff (1 s doubling, at most
 * `maxBackoffMs`), each failure logged (a warning, an error from `stuckAfterAttempts` on) and recorded
 * on the consumer's row (`attempts`, `failing_event_id`, `last_error`) for operators;
 * `skipOutboxEvent` is the explicit way past an event that will never succeed. Other consumers go on.
 *
 * Leases. A process claims a consumer for `leaseMs` and renews the lease with every batch; other
 * processes leave it alone until the lease expires (a crashed holder) or is released (graceful stop).
 * Within a batch the consumer's row is also locked (FOR UPDATE on PostgreSQL; on SQLite the write
 * transaction excludes everyone), so even a holder that outlives its lease never runs a batch beside
 * its successor. An idle consumer costs two reads per poll and no transaction.
 *
 * Leases are taken, renewed and checked through the background kit (server/background.ts).
 *
 * Retention. A recurring job (`outbox.prune`, `pruneOutboxJob`) deletes events that every stored
 * consumer has passed (by the smallest position, in outbox order: (txid, seq) on PostgreSQL) and that
 * occurred more than the retention period ago (OUTBOX_RETENTION_DAYS, default 30). A consumer that
 * stops being run (its module removed) keeps its row and so holds pruning back at its position until
 * an operator deletes the row; with no consumer at all, age alone decides.
 */
import type { Logger } from 'pino';
import { type Database, isBusy, type Sql } from '../db/database.ts';
import {
  advanceOutboxConsumer,
  columns,
  type DbOutboxConsumerRow,
  type DbOutboxEventRow,
  ensureOutboxConsumer,
  getOutboxConsumer,
  listOutboxConsumers,
  lockOutboxConsumer,
  oldestRunningTransaction,
  OUTBOX_START,
  outboxEnd,
  peekOutbox,
  type OutboxPosition,
  pruneRecordEvents,
  readOutboxEvents,
  recordOutboxFailure,
  slowestOutboxPosition,
} from '../db/queries/outbox.ts';
import { claim, finishLeased, heldByOther, type LeaseColumns, leaseEnd, lockHeld, needsRenewal, nextAttempt, PROCESS_OWNER } from './background.ts';
import type { Clock } from './clock.ts';
import type { EventKind } from './events.ts';
import type { JobDefinition } from './jobs.ts';
import type { EventCause } from './operation.ts';
import { PollLoop } from './workers.ts';

const CONSUMERS: LeaseColumns = { table: 'outbox_consumers', id: 'name' };

/** A committed change event as consumers read it (the `record_events` outbox). */
export interface OutboxEvent {
  /**
   * The event's sequence number: unique; increasing in delivery order on SQLite and within one
   * transaction on PostgreSQL (where delivery goes by writing transaction first, see above).
   */
  readonly seq: number;
  readonly id: string;
  readonly workspaceId: string;
  /**
   * The event's kind: a record change (`resource.created`, `.updated`, `.deleted`), or a kind a module
   * declared and emits (`emitEvent`); consumers handle the kinds they know and pass over the others.
   */
  readonly type: EventKind;
  readonly resourceType: string;
  readonly recordId: string;
  readonly private: boolean;
  readonly changedFields: readonly string[] | null;
  readonly actorKeyId: string | null;
  readonly actorMemberId: string | null;
  readonly occurredAt: number;
  /** The automation run whose action made the change; null for writes by API calls. */
  readonly cause: EventCause | null;
  /** The payload of an event of a module's declared kind (`emitEvent`); null for record changes. */
  readonly data: Readonly<Record<string, unknown>> | null;
}

/** A named reader of the outbox: every committed event reaches it at least once, in order. */
export interface EventConsumer {
  /**
   * Handles one event inside `sql`, the transaction that also advances the consumer's position, so
   * its writes there happen exactly once. Keep it to database work: slow calls to other systems
   * belong in a job it enqueues (a batch holds its consumer, and on SQLite the database, until commit).
   * Throwing retries the event later (with backoff); later events wait.
   */
  handle(event: OutboxEvent, sql: Sql): Promise<void>;
  /**
   * Where a consumer new to this database starts: `beginning` (every stored event, the default) or
   * `end` (events committed from its first run on, and any an older transaction still held back then).
   */
  readonly startAt?: 'beginning' | 'end';
  /** Called after a batch that handled events has committed (e.g. to wake a worker for rows it queued). */
  afterCommit?(): void;
}

export interface OutboxOptions {
  /** How long a claim lasts without renewal before another process may take the consumer over. */
  leaseMs?: number;
  /** Events handled per transaction. */
  batchSize?: number;
  /** Longest wait between attempts at a failing event. */
  maxBackoffMs?: number;
  /** Failed attempts at one event from which each failure is logged as an error, not a warning. */
  stuckAfterAttempts?: number;
  /** How long events may be held back by an older running transaction before that is logged. */
  heldBackWarnMs?: number;
  /** This runner's name in leases (default: the process's, PROCESS_OWNER). */
  owner?: string;
  /** Called with a batch's transaction after it committed (the service wakes its job runner when a handler enqueued jobs). */
  onCommit?: (sql: Sql) => void;
}

type Defaulted = Required<Omit<OutboxOptions, 'onCommit'>> & Pick<OutboxOptions, 'onCommit'>;
const DEFAULTS: Defaulted = { leaseMs: 30_000, batchSize: 100, maxBackoffMs: 5 * 60_000, stuckAfterAttempts: 5, heldBackWarnMs: 60_000, owner: PROCESS_OWNER };

type BatchOutcome =
  | { kind: 'done'; handled: number }
  | { kind: 'lost' }
  /** `index`: the failing event's place in the batch; null when the failure came after the handlers (at commit). */
  | { kind: 'failed'; index: number | null; events: DbOutboxEventRow[]; error: unknown };

function toEvent(row: DbOutboxEventRow): OutboxEvent {
  return {
    seq: Number(row.seq),
    id: row.id,
    workspaceId: row.workspace_id,
    type: row.type as EventKind,
    resourceType: row.resource_type,
    recordId: row.record_id,
    private: Boolean(row.private),
    changedFields: row.changed_fields ? (JSON.parse(row.changed_fields) as string[]) : null,
    actorKeyId: row.actor_key_id,
    actorMemberId: row.actor_member_id,
    occurredAt: Number(row.occurred_at),
    cause: row.cause_run_id ? { runId: row.cause_run_id, rule: row.cause_rule ?? '', depth: Number(row.cause_depth ?? 0) } : null,
    data: row.data ? (JSON.parse(row.data) as Record<string, unknown>) : null,
  };
}

const positionOf = (row: DbOutboxConsumerRow): OutboxPosition => ({ xid: String(row.position_xid), seq: Number(row.position_seq) });
const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err)).slice(0, 2000);

/**
 * Runs this process's share of the named consumers: `runOnce()` handles everything that can be read
 * now for every consumer this process holds or can claim; `start()` polls.
 */
export class OutboxRunner {
  /** This runner's name in leases (`leased_by`). */
  readonly owner: string;
  private readonly options: Defaulted;
  private readonly names: string[];
  private ensured: Promise<void> | null = null;
  private chain: Promise<unknown> = Promise.resolve();
  private stopping = false;
  private readonly heldSince = new Map<string, { since: number; warned: boolean }>();

  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly consumers: Readonly<Record<string, EventConsumer>>,
    options: OutboxOptions = {},
  ) {
    this.options = { ...DEFAULTS, ...options };
    this.owner = this.options.owner;
    this.names = Object.keys(consumers).sort();
  }

  /** Handles every event readable now, for each consumer this process holds or can claim; returns how many. */
  runOnce(): Promise<number> {
    const run = this.chain.then(() => this.round());
    this.chain = run.catch(() => undefined);
    return run;
  }

  /** The consumers' rows (positions, leases, failures), every consumer stored in the database. */
  status(): Promise<DbOutboxConsumerRow[]> {
    return listOutboxConsumers(this.db.sql);
  }

  /** Polls every `intervalMs` until stopped (nothing to do when no module has consumers). */
  start(intervalMs = 1000): void {
    if (!this.names.length || this.loop) return;
    // A wake polls at most every 100 ms: under a steady stream of commands, events are read in batches
    // (one transaction each) instead of one transaction per command, which on SQLite would take the
    // one connection from the requests.
    this.loop = new PollLoop('outbox', { runOnce: () => this.runOnce(), intervalMs, wakeGapMs: 100 }, this.logger);
    this.loop.start();
  }

  private loop: PollLoop | null = null;

  /**
   * Polls now instead of at the next interval: this process just committed change events (a command).
   * Writes of other processes are found at the next poll. No-op unless started.
   */
  wake(): void {
    this.loop?.wake();
  }

  /** Stops polling, lets the batch in flight finish and releases this process's leases. */
  async stop(): Promise<void> {
    const loop = this.loop;
    this.loop = null;
    this.stopping = true;
    await loop?.stop();
    try {
      await this.chain;
      for (const name of this.names) {
        await finishLeased(this.db.sql, CONSUMERS, name, this.owner).catch((err: unknown) => this.logger.warn({ err, consumer: name }, 'outbox lease not released'));
      }
    } finally {
      this.stopping = false;
    }
  }

  /**
   * Creates the position of every consumer new to this database (where `startAt` says), as the first
   * poll would. A service calls it at start, so `end` means the events committed from then on.
   */
  prepare(): Promise<void> {
    return this.ensure();
  }

  private ensure(): Promise<void> {
    this.ensured ??= (async () => {
      for (const name of this.names) {
        if (await getOutboxConsumer(this.db.sql, name)) continue;
        const start = this.consumers[name]!.startAt === 'end' ? await outboxEnd(this.db.sql) : OUTBOX_START;
        await ensureOutboxConsumer(this.db.sql, name, start, this.clock.now());
      }
    })().catch((err: unknown) => {
      this.ensured = null;
      throw err;
    });
    return this.ensured;
  }

  /** Rounds over the consumers, a batch each, until none has more (or the runner stops). */
  private async round(): Promise<number> {
    if (!this.names.length) return 0;
    await this.ensure();
    let total = 0;
    let active = this.names;
    while (active.length && !this.stopping) {
      const next: string[] = [];
      for (const name of active) {
        try {
          const { handled, more } = await this.step(name);
          total += handled;
          if (more) next.push(name);
        } catch (err) {
          if (isBusy(err)) this.logger.info({ consumer: name, code: (err as { code: string }).code }, 'outbox consumer waits: the database is busy (another process is writing)');
          else this.logger.error({ err, consumer: name }, 'outbox consumer could not run; trying again at the next poll');
        }
      }
      active = next;
    }
    return total;
  }

  /** One batch of one consumer, when this process holds it or can claim it and it is not backing off. */
  private async step(name: string): Promise<{ handled: number; more: boolean }> {
    const now = this.clock.now();
    let row = await getOutboxConsumer(this.db.sql, name);
    if (!row) return { handled: 0, more: false };
    const held = { owner: row.leased_by, until: row.lease_until };
    const lease = { owner: this.owner, now, ms: this.options.leaseMs };
    // A read first, so that a consumer held elsewhere costs no write (and, on SQLite, no wait for the lock).
    if (heldByOther(held, this.owner, now)) return { handled: 0, more: false };
    if (row.retry_at !== null && Number(row.retry_at) > now) return { handled: 0, more: false };
    const ahead = await peekOutbox(this.db.sql, positionOf(row));
    await this.watchHeldBack(name, ahead === 'held');
    if (ahead !== 'ready') return { handled: 0, more: false };
    if (needsRenewal(held, lease)) {
      [row] = await claim<DbOutboxConsumerRow>(this.db.sql, { ...CONSUMERS, due: { text: 'name = ?', params: [name] }, ownAgain: true, order: 'name', limit: 1, returning: columns(this.db.sql) }, lease);
      if (!row) return { handled: 0, more: false };
    }

    let limit = this.options.batchSize;
    let handled = 0;
    // A failing event found behind events that succeed: those are committed first, then it is recorded.
    let failing: { event: DbOutboxEventRow; error: unknown } | null = null;
    // A batch that failed at commit is taken again one event at a time, to find the event that fails.
    let oneByOne = 0;
    for (;;) {
      const outcome = await this.batch(name, limit);
      if (outcome.kind === 'lost') return { handled, more: false };
      if (outcome.kind === 'done') {
        handled += outcome.handled;
        if (failing) {
          await this.recordFailure(name, failing.event, failing.error);
          return { handled, more: false };
        }
        if (--oneByOne > 0 && outcome.handled === limit) continue;
        return { handled, more: outcome.handled === limit };
      }
      if (outcome.index !== null && outcome.index > 0) {
        failing = { event: outcome.events[0]!, error: outcome.error };
        limit = outcome.index;
        continue;
      }
      if (outcome.index === null && outcome.events.length > 1) {
        oneByOne = outcome.events.length;
        limit = 1;
        continue;
      }
      await this.recordFailure(name, outcome.events[0]!, outcome.error);
      return { handled, more: false };
    }
  }

  private async batch(name: string, limit: number): Promise<BatchOutcome> {
    const consumer = this.consumers[name]!;
    let events: DbOutboxEventRow[] = [];
    let index: number | null = null;
    try {
      let batchSql: Sql | undefined;
      const outcome = await this.db.tx(async (sql): Promise<BatchOutcome> => {
        batchSql = sql;
        const row = await lockHeld<DbOutboxConsumerRow>(sql, CONSUMERS, name, { owner: this.owner, now: this.clock.now(), ms: 0 }, columns(sql));
        if (!row) return { kind: 'lost' };
        events = await readOutboxEvents(sql, positionOf(row), limit);
        for (let i = 0; i < events.length; i++) {
          index = i;
          await consumer.handle(toEvent(events[i]!), sql);
        }
        index = null;
        const last = events.at(-1);
        if (last) {
          const now = this.clock.now();
          await advanceOutboxConsumer(sql, name, { xid: last.txid, seq: Number(last.seq) }, now, leaseEnd({ now, ms: this.options.leaseMs }));
        }
        return { kind: 'done', handled: events.length };
      });
      if (outcome.kind === 'done' && outcome.handled) {
        consumer.afterCommit?.();
        if (batchSql) this.options.onCommit?.(batchSql);
      }
      return outcome;
    } catch (error) {
      // Before any event was read, the failure is not the consumer's: the round logs it.
      if (!events.length) throw error;
      return { kind: 'failed', index, events: index === null ? events : events.slice(index), error };
    }
  }

  private async recordFailure(name: string, event: DbOutboxEventRow, error: unknown): Promise<void> {
    const now = this.clock.now();
    const before = await getOutboxConsumer(this.db.sql, name);
    const attempts = before?.failing_event_id === event.id ? Number(before.attempts) + 1 : 1;
    const retryInMs = nextAttempt({ kind: 'exponential', baseMs: 1000, capMs: this.options.maxBackoffMs }, attempts, { now })! - now;
    await recordOutboxFailure(this.db.sql, name, this.owner, { eventId: event.id, attempts, error: errorText(error), now, retryAt: now + retryInMs });
    const details = { err: error, consumer: name, event: event.id, seq: Number(event.seq), attempts, retryInMs };
    if (attempts >= this.options.stuckAfterAttempts) {
      this.logger.error(details, 'outbox consumer is stuck on one event: later events wait until it succeeds or an operator skips it');
    } else {
      this.logger.warn(details, 'outbox consumer failed on an event; retrying it later (later events wait)');
    }
  }

  /** Says (once per episode) when events have waited longer than heldBackWarnMs for an older transaction (PostgreSQL). */
  private async watchHeldBack(name: string, held: boolean): Promise<void> {
    if (!held) {
      this.heldSince.delete(name);
      return;
    }
    const now = this.clock.now();
    const episode = this.heldSince.get(name) ?? { since: now, warned: false };
    this.heldSince.set(name, episode);
    if (episode.warned || now - episode.since < this.options.heldBackWarnMs) return;
    episode.warned = true;
    const oldest = await oldestRunningTransaction(this.db.sql).catch(() => undefined);
    this.logger.warn(
      { consumer: name, heldForMs: now - episode.since, oldestTransaction: oldest ?? 'none visible (a prepared transaction?)' },
      'outbox events are waiting for an older transaction that is still running (they are delivered once it ends)',
    );
  }
}

/**
 * Operator action: moves a consumer past `eventId` when that is the next event it would handle (the
 * one it is stuck on), without handling it. Waits for a batch in flight. Returns false otherwise.
 */
export async function skipOutboxEvent(db: Database, clock: Clock, name: string, eventId: string): Promise<boolean> {
  return db.tx(async (sql) => {
    const row = await lockOutboxConsumer(sql, name);
    if (!row || row.failing_event_id !== eventId) return false;
    const [next] = await readOutboxEvents(sql, positionOf(row), 1);
    if (next?.id !== eventId) return false;
    await advanceOutboxConsumer(sql, name, { xid: next.txid, seq: Number(next.seq) }, clock.now());
    return true;
  });
}

/**
 * The recurring job that prunes `record_events`: events every stored consumer has passed and that
 * occurred more than `retentionMs` ago, in batches.
 */
export function pruneOutboxJob(db: Database, clock: Clock, logger: Logger, retentionMs: number): JobDefinition {
  return {
    everyMs: 60 * 60_000,
    run: async () => {
      const upTo = (await slowestOutboxPosition(db.sql)) ?? { xid: '18446744073709551615', seq: Number.MAX_SAFE_INTEGER };
      let removed = 0;
      for (let batch = -1; batch !== 0; removed += batch) batch = await pruneRecordEvents(db.sql, upTo, clock.now() - retentionMs, 5000);
      if (removed) logger.info({ removed }, 'pruned change events that every consumer has passed');
    },
  };
}
