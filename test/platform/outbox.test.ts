import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import pino, { type Logger } from 'pino';
import { type Database, openDatabase, type Sql } from '../../db/database.ts';
import { insertRecordEvent } from '../../db/queries/events.ts';
import { newId } from '../../server/ids.ts';
import { type EventConsumer, type OutboxEvent, type OutboxOptions, OutboxRunner, skipOutboxEvent } from '../../server/outbox.ts';
import { buildService } from '../../server/service.ts';
import { acme, createPipeline } from '../support/fixtures.ts';
import { forEachDatabase, type TestService } from '../support/service.ts';
import { admin } from '../support/cli.ts';

const LEASE_MS = 30_000;

interface Deferred<T = void> {
  promise: Promise<T>;
  resolve(value: T): void;
}

function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

function capturedLogger(): { logger: Logger; entries: () => Array<{ level: number; msg: string; consumer?: string; event?: string; attempts?: number }> } {
  let text = '';
  const sink = new Writable({
    write(chunk, _enc, done) {
      text += chunk.toString();
      done();
    },
  });
  return { logger: pino({ level: 'info' }, sink), entries: () => text.split('\n').filter(Boolean).map((l) => JSON.parse(l)) };
}

/** A test consumer: records every call, and its effect row in the batch's transaction (committed effects = delivered). */
function probe(name: string, before?: (event: OutboxEvent, attempt: number) => Promise<void> | void) {
  const calls: string[] = [];
  const events: OutboxEvent[] = [];
  const attempts = new Map<string, number>();
  const consumer: EventConsumer = {
    async handle(event, sql) {
      calls.push(event.id);
      events.push(event);
      const attempt = (attempts.get(event.id) ?? 0) + 1;
      attempts.set(event.id, attempt);
      await before?.(event, attempt);
      await sql.write('INSERT INTO outbox_test_effects (consumer, event_id) VALUES (?, ?)', [name, event.id]);
    },
  };
  return { name, consumer, calls, events };
}

let names = 0;
const consumerName = (what: string) => `test.${what}${++names}`;

function newEvent(id = newId('evt')) {
  return {
    id,
    workspace_id: 'ws_outbox',
    type: 'resource.updated' as const,
    resource_type: 'core:Test',
    record_id: 'rec_1',
    private: false,
    changed_fields: '["name"]',
    actor_key_id: null,
    actor_member_id: null,
    occurred_at: Date.UTC(2026, 10, 22),
  };
}

/** Commits `transactions` write transactions of `perTransaction` events each, one after another; returns the ids in order. */
async function writeEvents(db: Database, transactions: number, perTransaction = 1): Promise<string[]> {
  const ids: string[] = [];
  for (let t = 0; t < transactions; t++) {
    await db.tx(async (sql) => {
      for (let i = 0; i < perTransaction; i++) {
        const event = newEvent();
        await insertRecordEvent(sql, event);
        ids.push(event.id);
      }
    });
  }
  return ids;
}

/** Every committed event in seq order (the delivery order wherever events were written one transaction after another). */
async function committedIds(sql: Sql): Promise<string[]> {
  return (await sql.all<{ id: string }>('SELECT id FROM record_events ORDER BY seq')).map((r) => r.id);
}

/** What a consumer's committed effects say it handled, in the order it handled them. */
async function effects(sql: Sql, consumer: string): Promise<string[]> {
  return (await sql.all<{ event_id: string }>('SELECT event_id FROM outbox_test_effects WHERE consumer = ? ORDER BY n', [consumer])).map((r) => r.event_id);
}

/**
 * Runs until `done`. On PostgreSQL a reader takes only events of transactions older than the oldest
 * write transaction still running in the whole cluster, so a write of another session (another test
 * process) may hold the outbox back for a moment: this is the one wait on real time, bounded. On
 * SQLite the first run always suffices.
 */
async function runUntil(runners: OutboxRunner | OutboxRunner[], done: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    for (const r of Array.isArray(runners) ? runners : [runners]) await r.runOnce();
    if (await done()) return;
    if (Date.now() > deadline) throw new Error('the outbox did not deliver within 10 s');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}



async function sameAs(sql: Sql, consumer: string, expected: () => Promise<string[]>): Promise<boolean> {
  const [got, want] = await Promise.all([effects(sql, consumer), expected()]);
  return got.length === want.length && got.every((id, i) => id === want[i]);
}

forEachDatabase('change-event outbox', (svc) => {
  let log: ReturnType<typeof capturedLogger>;
  const runner = (consumers: Record<string, EventConsumer>, options: OutboxOptions = {}, db: Database = svc().db) =>
    new OutboxRunner(db, svc().clock, log.logger, consumers, { leaseMs: LEASE_MS, owner: newId('runner'), ...options }); // each runner plays a process of its own
  const delivered = (consumer: string, s: TestService = svc()) => () => sameAs(s.db.sql, consumer, () => committedIds(s.db.sql));
  /** Returns once every committed event is readable (on PostgreSQL: no older transaction holds it back), by reading them all. */
  const settle = async () => {
    const reader = probe(consumerName('settle'));
    const outbox = runner({ [reader.name]: reader.consumer });
    await runUntil(outbox, delivered(reader.name));
    await outbox.stop();
  };

  before(async () => {
    const pg = svc().db.dialect === 'pg';
    await svc().db.sql.run(
      `CREATE TABLE outbox_test_effects (n ${pg ? 'BIGSERIAL PRIMARY KEY' : 'INTEGER PRIMARY KEY AUTOINCREMENT'}, consumer VARCHAR(100) NOT NULL, event_id VARCHAR(40) NOT NULL, UNIQUE (consumer, event_id))`,
    );
  });
  beforeEach(() => {
    log = capturedLogger();
  });

  it('delivers every committed event to each consumer once, in commit order, and none from a rolled-back write', async () => {
    const ws = await svc().apply(acme());
    const api = svc().client(ws.keys.ci!.secret);
    const { item } = (await api.customers.CreateSalesPipeline(createPipeline('Outbox'))).data!;
    await api.customers.UpdateSalesPipeline({ id: item.id, data: { name: 'Outbox 2' } });
    const written = await writeEvents(svc().db, 2, 3);
    const rolledBack = [newEvent(), newEvent()];
    await assert.rejects(
      svc().db.tx(async (sql) => {
        for (const e of rolledBack) await insertRecordEvent(sql, e);
        await sql.one('SELECT 1 AS flushed');
        throw new Error('roll back');
      }),
      /roll back/,
    );
    written.push(...(await writeEvents(svc().db, 1)));

    const a = probe(consumerName('a'));
    const b = probe(consumerName('b'));
    const outbox = runner({ [a.name]: a.consumer, [b.name]: b.consumer });
    await runUntil(outbox, async () => (await delivered(a.name)()) && (await delivered(b.name)()));

    const all = await committedIds(svc().db.sql);
    assert.deepEqual(all.slice(-written.length), written, 'the direct writes are the last committed events, in order');
    for (const p of [a, b]) {
      assert.deepEqual(await effects(svc().db.sql, p.name), all);
      assert.deepEqual(p.calls, all, 'each event handled once, in order');
      assert.ok(!p.calls.some((id) => rolledBack.some((e) => e.id === id)), 'nothing of the rolled-back write');
    }
    const apiEvents = a.events.filter((e) => e.workspaceId === ws.workspace_id);
    assert.deepEqual(
      apiEvents.map((e) => [e.type, e.resourceType, e.recordId, e.changedFields, e.actorKeyId, e.private]),
      [
        ['resource.created', 'core:SalesPipeline', item.id, null, ws.keys.ci!.id, false],
        ['resource.updated', 'core:SalesPipeline', item.id, ['name'], ws.keys.ci!.id, false],
      ],
    );
    assert.equal(apiEvents[0]!.occurredAt, svc().clock.now());

    assert.equal(await outbox.runOnce(), 0, 'nothing is handled twice');
    const rows = (await outbox.status()).filter((r) => r.name === a.name || r.name === b.name);
    assert.equal(rows.length, 2);
    for (const row of rows) {
      assert.equal(row.leased_by, outbox.owner);
      assert.equal(row.attempts, 0);
      assert.equal(row.failing_event_id, null);
    }
    await outbox.stop();
    assert.ok((await outbox.status()).every((r) => r.leased_by === null), 'stop() releases the leases');
  });

  it('retries a failing handler with backoff, skips nothing, and holds back no other consumer', async () => {
    const before = await committedIds(svc().db.sql);
    const [first, poison, ...rest] = await writeEvents(svc().db, 4);
    const failing = probe(consumerName('failing'), (event, attempt) => {
      if (event.id === poison && attempt <= 2) throw new Error(`cannot handle ${event.id} (attempt ${attempt})`);
    });
    const healthy = probe(consumerName('healthy'));
    const outbox = runner({ [failing.name]: failing.consumer, [healthy.name]: healthy.consumer });
    const all = [...before, first!, poison!, ...rest];

    await runUntil(outbox, async () => (await delivered(healthy.name)()) && (await outbox.status()).some((r) => r.name === failing.name && r.attempts > 0));
    assert.deepEqual(await effects(svc().db.sql, healthy.name), all, 'the healthy consumer is not held back');
    assert.deepEqual(await effects(svc().db.sql, failing.name), [...before, first], 'the failing consumer stops before the failing event');
    let row = (await outbox.status()).find((r) => r.name === failing.name)!;
    assert.equal(row.attempts, 1);
    assert.equal(row.failing_event_id, poison);
    assert.match(row.last_error!, /cannot handle .* \(attempt 1\)/);
    assert.equal(Number(row.retry_at), svc().clock.now() + 1000);
    const warned = log.entries().filter((e) => e.consumer === failing.name);
    assert.deepEqual(warned.map((e) => [e.level, e.event, e.attempts]), [[40, poison, 1]]);

    const callsBefore = failing.calls.length;
    await outbox.runOnce();
    assert.equal(failing.calls.length, callsBefore, 'not retried before its backoff is over');

    svc().clock.advance(1000);
    await outbox.runOnce();
    assert.equal(failing.calls.at(-1), poison, 'retried after 1 s');
    row = (await outbox.status()).find((r) => r.name === failing.name)!;
    assert.equal(row.attempts, 2);
    assert.equal(Number(row.retry_at), svc().clock.now() + 2000, 'the backoff doubles');

    svc().clock.advance(1999);
    await outbox.runOnce();
    assert.equal(failing.calls.filter((id) => id === poison).length, 2);
    svc().clock.advance(1);
    await runUntil(outbox, delivered(failing.name));
    assert.deepEqual(await effects(svc().db.sql, failing.name), all, 'every event, in order, the failing one included');
    row = (await outbox.status()).find((r) => r.name === failing.name)!;
    assert.equal(row.attempts, 0);
    assert.equal(row.failing_event_id, null);
    assert.equal(row.retry_at, null);
    assert.match(row.last_error!, /attempt 2/, 'the last error stays visible');
    await outbox.stop();
  });

  it('says when a consumer is stuck on one event, and an operator may skip that event (npm run admin -- outbox status | skip)', async function () {
    this.timeout(90_000);
    const before = await committedIds(svc().db.sql);
    const [poison, after] = await writeEvents(svc().db, 2);
    const stuck = probe(consumerName('stuck'), (event) => {
      if (event.id === poison) throw new Error('never works');
    });
    const outbox = runner({ [stuck.name]: stuck.consumer }, { stuckAfterAttempts: 3 });
    await runUntil(outbox, async () => (await outbox.status()).some((r) => r.name === stuck.name && r.failing_event_id === poison));
    for (let i = 0; i < 3; i++) {
      svc().clock.advance(60_000);
      await outbox.runOnce();
    }
    const entries = log.entries().filter((e) => e.consumer === stuck.name);
    assert.deepEqual(entries.map((e) => [e.level, e.attempts]), [[40, 1], [40, 2], [50, 3], [50, 4]]);
    assert.match(entries.at(-1)!.msg, /stuck/);
    assert.deepEqual(await effects(svc().db.sql, stuck.name), before, 'nothing after the stuck event');

    const status = await admin(svc().databaseUrl, 'outbox', 'status');
    assert.equal(status.code, 0, status.stderr);
    const listed = (JSON.parse(status.stdout) as Array<{ name: string; failing_event_id: string | null; attempts: number; last_error: string | null }>).find((c) => c.name === stuck.name)!;
    assert.deepEqual([listed.failing_event_id, listed.attempts], [poison, 4]);
    assert.match(listed.last_error!, /never works/);
    const wrong = await admin(svc().databaseUrl, 'outbox', 'skip', '--consumer', stuck.name, '--event', after!);
    assert.equal(wrong.code, 1, 'only the event it is stuck on can be skipped');
    assert.match(wrong.stderr, /is not stuck on/);
    const skipped = await admin(svc().databaseUrl, 'outbox', 'skip', '--consumer', stuck.name, '--event', poison!);
    assert.equal(skipped.code, 0, skipped.stderr);
    assert.deepEqual(JSON.parse(skipped.stdout), { consumer: stuck.name, skipped: poison });
    assert.equal(await skipOutboxEvent(svc().db, svc().clock, stuck.name, poison!), false, 'skipped once');
    await runUntil(outbox, async () => (await effects(svc().db.sql, stuck.name)).length === before.length + 1);
    assert.deepEqual(await effects(svc().db.sql, stuck.name), [...before, after]);
    const row = (await outbox.status()).find((r) => r.name === stuck.name)!;
    assert.equal(row.failing_event_id, null);
    await outbox.stop();
  });

  it('resumes from the stored position after a restart, and takes over from a crashed holder when its lease expires', async () => {
    await writeEvents(svc().db, 3);
    const name = consumerName('resume');
    const first = probe(name);
    const one = runner({ [name]: first.consumer });
    await runUntil(one, delivered(name));
    await one.stop();

    // A restart: a new process (its own connections) on the same database.
    const fresh = await writeEvents(svc().db, 2);
    const db2 = openDatabase(svc().databaseUrl);
    try {
      const second = probe(name);
      const two = runner({ [name]: second.consumer }, {}, db2);
      await runUntil(two, delivered(name));
      assert.deepEqual(second.calls, fresh, 'only the events after the stored position');

      // It crashes (no stop, so the lease stays): nobody else runs the consumer until the lease expires.
      const more = await writeEvents(svc().db, 2);
      const third = probe(name);
      const three = runner({ [name]: third.consumer });
      assert.equal(await three.runOnce(), 0);
      assert.deepEqual(third.calls, []);
      svc().clock.advance(LEASE_MS);
      await runUntil(three, delivered(name));
      assert.deepEqual(third.calls, more);
      assert.equal((await three.status()).find((r) => r.name === name)!.leased_by, three.owner);
      await three.stop();
    } finally {
      await db2.close();
    }
  });

  it('lets one of two processes handle a consumer at a time, and together they lose nothing', async () => {
    const name = consumerName('pair');
    let inFlight = 0;
    let maxInFlight = 0;
    const handledBy = new Set<string>();
    let gate: { entered: Deferred; release: Deferred } | null = null;
    const pair = (owner: () => string, gated: boolean) =>
      probe(name, async () => {
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        handledBy.add(owner());
        try {
          if (gated && gate) {
            gate.entered.resolve();
            await gate.release.promise;
          }
          await new Promise((resolve) => setImmediate(resolve));
        } finally {
          inFlight--;
        }
      });
    const db2 = openDatabase(svc().databaseUrl);
    try {
      const a = pair(() => runnerA.owner, true);
      const b = pair(() => runnerB.owner, false);
      const runnerA = runner({ [name]: a.consumer });
      const runnerB = runner({ [name]: b.consumer }, {}, db2);

      // A is in the middle of a batch: B keeps out, even once A's lease has run out (the row is locked).
      await writeEvents(svc().db, 3);
      await settle();
      gate = { entered: deferred(), release: deferred() };
      const running = runnerA.runOnce();
      try {
        await gate.entered.promise;
        assert.equal(await runnerB.runOnce(), 0);
        if (svc().db.dialect === 'pg') {
          // (On SQLite the held write lock keeps B out the same way, but B's claim would wait for it.)
          svc().clock.advance(LEASE_MS + 1);
          assert.equal(await runnerB.runOnce(), 0);
        }
      } finally {
        gate.release.resolve();
        gate = null;
        await running;
      }
      assert.deepEqual(b.calls, []);

      // Both poll side by side while events keep coming; now and then the lease runs out and the other takes it.
      let [first, second] = [runnerA, runnerB];
      for (let round = 0; round < 16; round++) {
        await writeEvents(svc().db, 2, round % 3 === 0 ? 3 : 1);
        if (round % 4 === 3) {
          svc().clock.advance(LEASE_MS + 1);
          [first, second] = [second, first];
          const taker = first;
          await runUntil(taker, async () => (await taker.status()).find((r) => r.name === name)!.leased_by === taker.owner);
        }
        await Promise.all([first.runOnce(), second.runOnce()]);
      }
      await runUntil([runnerA, runnerB], delivered(name));
      assert.equal(maxInFlight, 1, 'never two handlers of one consumer at once');
      assert.deepEqual(handledBy, new Set([runnerA.owner, runnerB.owner]), 'both processes took part');
      assert.deepEqual(await effects(svc().db.sql, name), await committedIds(svc().db.sql), 'every event once, in order');
      await runnerA.stop();
      await runnerB.stop();
    } finally {
      await db2.close();
    }
  });

  it('starts a consumer new to the database at the end when it asks to', async () => {
    await writeEvents(svc().db, 2);
    await settle();
    const name = consumerName('late');
    const late = probe(name);
    const outbox = runner({ [name]: { ...late.consumer, startAt: 'end' } });
    assert.equal(await outbox.runOnce(), 0);
    const fresh = await writeEvents(svc().db, 1);
    await runUntil(outbox, async () => late.calls.length > 0);
    assert.deepEqual(late.calls, fresh);
    await outbox.stop();
  });

  it('runs the consumers of every module in the service', async () => {
    const seen = probe(consumerName('module'));
    const service = buildService({ db: svc().db, clock: svc().clock, config: svc().config, logger: log.logger }, [
      { namespace: 'outboxtest', handlers: {}, consumers: () => ({ [seen.name]: seen.consumer }) },
    ]);
    await runUntil(service.outbox, delivered(seen.name));
    assert.ok(seen.calls.length > 0);
    await service.outbox.stop();
  });

  // Last: it leaves events whose delivery order is not their seq order.
  it('skips no event when transactions commit out of seq order (PostgreSQL)', async function () {
    if (svc().db.dialect !== 'pg') this.skip();
    const db = svc().db;
    const name = consumerName('order');
    const p = probe(name);
    const outbox = runner({ [name]: p.consumer });
    await runUntil(outbox, delivered(name));
    const insert = async (sql: Sql) => {
      const event = newEvent();
      await insertRecordEvent(sql, event);
      const row = await sql.one<{ seq: number }>('SELECT seq FROM record_events WHERE id = ?', [event.id]);
      return { id: event.id, seq: Number(row!.seq) };
    };

    // Transactions left open by a failed assertion would keep the schema from being dropped.
    const open: Array<{ gate: Deferred; tx: Promise<unknown> }> = [];
    const hold = <T>(fn: (sql: Sql, gate: Promise<void>) => Promise<T>) => {
      const gate = deferred();
      const tx = db.tx((sql) => fn(sql, gate.promise));
      open.push({ gate, tx: tx.catch(() => undefined) });
      return { commit: () => (gate.resolve(), tx) };
    };
    try {
      // The lower seq's transaction is still open when the higher one commits and the consumer runs.
      const lowInserted = deferred<{ id: string; seq: number }>();
      const lowTx = hold(async (sql, gate) => {
        lowInserted.resolve(await insert(sql));
        await gate;
      });
      const low = await lowInserted.promise;
      const high = await db.tx(insert);
      assert.ok(high.seq > low.seq);
      await outbox.runOnce();
      assert.ok(!p.calls.includes(high.id) && !p.calls.includes(low.id), 'nothing is read past a transaction still running');
      svc().clock.advance(60_000);
      await outbox.runOnce();
      const held = log.entries().filter((e) => e.consumer === name);
      assert.deepEqual(held.map((e) => e.level), [40]);
      assert.match(held[0]!.msg, /waiting for an older transaction/, 'a transaction holding the outbox back for a minute is logged');
      await lowTx.commit();
      await runUntil(outbox, async () => p.calls.includes(high.id));
      assert.deepEqual(p.calls.slice(-2), [low.id, high.id]);

      // The transaction with the higher seq started writing first (lower transaction id), commits first
      // and is delivered while the lower seq's transaction is still open; that one still arrives after.
      const firstWriterStarted = deferred();
      const firstWriter = hold(async (sql, gate) => {
        await sql.one('SELECT pg_current_xact_id() AS xid');
        firstWriterStarted.resolve();
        await gate;
        return insert(sql);
      });
      await firstWriterStarted.promise;
      const laterInserted = deferred<{ id: string; seq: number }>();
      const laterWriter = hold(async (sql, gate) => {
        laterInserted.resolve(await insert(sql));
        await gate;
      });
      const lowSeq = await laterInserted.promise;
      const highSeq = await firstWriter.commit();
      assert.ok(highSeq.seq > lowSeq.seq);
      await runUntil(outbox, async () => p.calls.includes(highSeq.id));
      assert.ok(!p.calls.includes(lowSeq.id));
      await laterWriter.commit();
      await runUntil(outbox, async () => p.calls.includes(lowSeq.id));
      assert.deepEqual(p.calls.slice(-2), [highSeq.id, lowSeq.id], 'a reader by seq would have passed over the lower seq for good');
    } finally {
      for (const o of open) o.gate.resolve();
      await Promise.all(open.map((o) => o.tx));
    }

    const all = (await db.sql.all<{ id: string }>('SELECT id FROM record_events ORDER BY txid, seq')).map((r) => r.id);
    assert.deepEqual(await effects(db.sql, name), all, 'every committed event exactly once');
    await outbox.stop();
  });
});
