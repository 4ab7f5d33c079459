import assert from 'node:assert/strict';
import type { Sql } from '../../db/database.ts';
import { advanceOutboxConsumer, ensureOutboxConsumer, listOutboxConsumers, type OutboxPosition } from '../../db/queries/outbox.ts';
import { emitEvent, eventKind } from '../../server/events.ts';
import { readOutbox } from '../support/outbox.ts';
import { forEachDatabase } from '../support/service.ts';

const DAY = 86_400_000;
const HAPPENED = eventKind('test.happened');
const LAGGARD = 'test.laggard';

forEachDatabase('change events are pruned once every consumer passed them and they are old', (svc) => {
  const emit = async (sql: Sql, subject: string, occurredAt: number) => {
    const id = await emitEvent(sql, { kind: HAPPENED, workspaceId: 'ws_retention', subjectType: 'test', subjectId: subject, occurredAt });
    await sql.one('SELECT 1 AS flushed'); // queued writes are sent now, so the transaction has its id
    return id;
  };
  const stored = async () => (await svc().db.sql.all<{ record_id: string }>(`SELECT record_id FROM record_events WHERE workspace_id = 'ws_retention' ORDER BY seq`)).map((r) => r.record_id);
  const positionOf = async (subject: string): Promise<OutboxPosition> => {
    const sql = svc().db.sql;
    const row = await sql.one<{ xid: string; seq: number }>(
      `SELECT ${sql.dialect === 'pg' ? 'txid::text' : `'0'`} AS xid, seq FROM record_events WHERE workspace_id = 'ws_retention' AND record_id = ?`,
      [subject],
    );
    return { xid: row!.xid, seq: Number(row!.seq) };
  };
  /** Every consumer the service runs reads everything committed; the laggard (run by nobody here) stays where it is put. */
  const consumersCatchUp = async () => {
    for (const c of await listOutboxConsumers(svc().db.sql)) if (c.name !== LAGGARD) await readOutbox(svc(), c.name);
  };
  /** The recurring job, run as a worker process would when it is due. */
  const prune = async () => {
    svc().clock.advance(60 * 60_000);
    await svc().jobs.scheduleRecurring();
    await svc().jobs.runDue();
  };

  it('keeps what a consumer has not passed (by (txid, seq) on PostgreSQL) and what is younger than the retention, 30 days by default', async () => {
    assert.equal(svc().config.outboxRetentionDays, 30);
    const db = svc().db;
    const old = svc().clock.now() - 31 * DAY;
    // a1 and a2 in one transaction that began before b1's and commits after it: on PostgreSQL the outbox
    // order is a1, a2, b1 although b1's seq lies between theirs.
    let aWrote!: () => void;
    let bDone!: () => void;
    const aStarted = new Promise<void>((r) => (aWrote = r));
    const bCommitted = new Promise<void>((r) => (bDone = r));
    const a = db.tx(async (sql) => {
      await emit(sql, 'a1', old);
      aWrote();
      await bCommitted;
      await emit(sql, 'a2', old);
    });
    await aStarted;
    if (db.dialect === 'pg') await db.tx((sql) => emit(sql, 'b1', old));
    bDone();
    await a;
    if (db.dialect === 'sqlite') await db.tx((sql) => emit(sql, 'b1', old)); // SQLite writers are serial: b1 after a's commit
    await db.tx((sql) => emit(sql, 'recent', svc().clock.now()));
    await consumersCatchUp();
    if (db.dialect === 'pg') assert.ok((await positionOf('b1')).seq < (await positionOf('a2')).seq, 'b1 took its seq between a1 and a2');

    // A consumer that has handled a2 and nothing after it.
    await ensureOutboxConsumer(db.sql, LAGGARD, await positionOf('a2'), svc().clock.now());
    await prune();
    assert.deepEqual(await stored(), ['b1', 'recent'], 'only what every consumer has passed is gone');

    await advanceOutboxConsumer(db.sql, LAGGARD, await positionOf('recent'), svc().clock.now());
    await prune();
    assert.deepEqual(await stored(), ['recent'], 'passed by all, but younger than 30 days: kept');

    svc().clock.advance(30 * DAY);
    await prune();
    assert.deepEqual(await stored(), []);
  });

  it('refuses a retention under 30 days (as long as webhook deliveries are kept)', async () => {
    const { loadConfig } = await import('../../server/config.ts');
    assert.throws(() => loadConfig({ OUTBOX_RETENTION_DAYS: '7' }), /OUTBOX_RETENTION_DAYS must be a number >= 30/);
    assert.equal(loadConfig({ OUTBOX_RETENTION_DAYS: '90' }).outboxRetentionDays, 90);
  });
});
