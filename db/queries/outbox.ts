import type { Sql } from '../database.ts';
import type { DbRecordEventRow } from '../rows.ts';

/**
 * Where a consumer stands in the outbox: the last event it handled. On PostgreSQL events are read in
 * (writing transaction id, seq) order (see server/outbox.ts for why); on SQLite in seq order, and
 * `xid` stays '0'.
 */
export interface OutboxPosition {
  /** xid8 as decimal text (64-bit, so not a JS number). */
  readonly xid: string;
  readonly seq: number;
}

export const OUTBOX_START: OutboxPosition = { xid: '0', seq: 0 };

/** A row of `outbox_consumers`: one named consumer's durable position, lease and failure state. */
export interface DbOutboxConsumerRow {
  name: string;
  position_xid: string;
  position_seq: number;
  leased_by: string | null;
  lease_until: number | null;
  /** Failed attempts at the event after the position (0 once it succeeds). */
  attempts: number;
  failing_event_id: string | null;
  retry_at: number | null;
  last_error: string | null;
  last_error_at: number | null;
  created_at: number;
  updated_at: number;
}

/** An event as the outbox reads it: the stored row and, on PostgreSQL, its writing transaction. */
export type DbOutboxEventRow = DbRecordEventRow & { txid: string };

const CONSUMER_COLUMNS = `name, position_xid, position_seq, leased_by, lease_until, attempts, failing_event_id, retry_at, last_error, last_error_at, created_at, updated_at`;
const PG_CONSUMER_COLUMNS = CONSUMER_COLUMNS.replace('position_xid', 'position_xid::text AS position_xid');
/** The columns of a consumer's row as read (PostgreSQL's xid8 as text). */
export const columns = (sql: Sql) => (sql.dialect === 'pg' ? PG_CONSUMER_COLUMNS : CONSUMER_COLUMNS);
const xid = (sql: Sql) => (sql.dialect === 'pg' ? '?::xid8' : '?');

/** Creates a consumer's row at `start` unless it exists (its stored position wins). */
export async function ensureOutboxConsumer(sql: Sql, name: string, start: OutboxPosition, now: number): Promise<void> {
  await sql.run(
    `INSERT INTO outbox_consumers (name, position_xid, position_seq, attempts, created_at, updated_at) VALUES (?, ${xid(sql)}, ?, 0, ?, ?)
     ON CONFLICT (name) DO NOTHING`,
    [name, start.xid, start.seq, now, now],
  );
}

export function getOutboxConsumer(sql: Sql, name: string): Promise<DbOutboxConsumerRow | undefined> {
  return sql.one<DbOutboxConsumerRow>(`SELECT ${columns(sql)} FROM outbox_consumers WHERE name = ?`, [name]);
}

export function listOutboxConsumers(sql: Sql): Promise<DbOutboxConsumerRow[]> {
  return sql.all<DbOutboxConsumerRow>(`SELECT ${columns(sql)} FROM outbox_consumers ORDER BY name`);
}

/**
 * Committed events after a position, in outbox order. On PostgreSQL only events of transactions older
 * than the oldest transaction still running (this statement's snapshot xmin) are read: that set can no
 * longer grow, so a position inside it is never overtaken by a late commit (server/outbox.ts).
 */
export function readOutboxEvents(sql: Sql, after: OutboxPosition, limit: number): Promise<DbOutboxEventRow[]> {
  if (sql.dialect === 'pg') {
    return sql.all<DbOutboxEventRow>(
      `SELECT seq, id, workspace_id, type, resource_type, record_id, private, changed_fields, actor_key_id, actor_member_id, occurred_at, cause_run_id, cause_rule, cause_depth, data, txid::text AS txid
       FROM record_events
       WHERE (txid, seq) > (?::xid8, ?) AND txid < pg_snapshot_xmin(pg_current_snapshot())
       ORDER BY txid, seq LIMIT ?`,
      [after.xid, after.seq, limit],
    );
  }
  return sql.all<DbOutboxEventRow>(
    `SELECT seq, id, workspace_id, type, resource_type, record_id, private, changed_fields, actor_key_id, actor_member_id, occurred_at, cause_run_id, cause_rule, cause_depth, data, '0' AS txid
     FROM record_events WHERE seq > ? ORDER BY seq LIMIT ?`,
    [after.seq, limit],
  );
}

/** The last event a reader may take now (the start of a consumer that begins at the end). */
export async function outboxEnd(sql: Sql): Promise<OutboxPosition> {
  const row =
    sql.dialect === 'pg'
      ? await sql.one<{ xid: string; seq: number }>(
          `SELECT txid::text AS xid, seq FROM record_events WHERE txid < pg_snapshot_xmin(pg_current_snapshot()) ORDER BY txid DESC, seq DESC LIMIT 1`,
        )
      : await sql.one<{ xid: string; seq: number }>(`SELECT '0' AS xid, seq FROM record_events ORDER BY seq DESC LIMIT 1`);
  return row ? { xid: row.xid, seq: Number(row.seq) } : OUTBOX_START;
}

/**
 * What follows a position, in one cheap read (so an idle consumer costs no transaction): nothing,
 * events the reader may take now, or (PostgreSQL) events held back by an older transaction still
 * running.
 */
export async function peekOutbox(sql: Sql, after: OutboxPosition): Promise<'none' | 'ready' | 'held'> {
  const row =
    sql.dialect === 'pg'
      ? await sql.one<{ ready: boolean }>(
          `SELECT txid < pg_snapshot_xmin(pg_current_snapshot()) AS ready FROM record_events WHERE (txid, seq) > (?::xid8, ?) ORDER BY txid, seq LIMIT 1`,
          [after.xid, after.seq],
        )
      : await sql.one<{ ready: number }>(`SELECT 1 AS ready FROM record_events WHERE seq > ? LIMIT 1`, [after.seq]);
  return !row ? 'none' : row.ready ? 'ready' : 'held';
}

/**
 * Moves a consumer past its handled events (in the batch's transaction) and clears its failure state;
 * with `leaseUntil`, renews the lease too.
 */
export async function advanceOutboxConsumer(sql: Sql, name: string, to: OutboxPosition, now: number, leaseUntil?: number): Promise<void> {
  await sql.write(
    `UPDATE outbox_consumers SET position_xid = ${xid(sql)}, position_seq = ?, attempts = 0, failing_event_id = NULL, retry_at = NULL, updated_at = ?${leaseUntil === undefined ? '' : ', lease_until = ?'}
     WHERE name = ?`,
    leaseUntil === undefined ? [to.xid, to.seq, now, name] : [to.xid, to.seq, now, leaseUntil, name],
  );
}

/** A consumer's row, locked until commit, waiting for a batch in flight to finish (operator actions). */
export function lockOutboxConsumer(sql: Sql, name: string): Promise<DbOutboxConsumerRow | undefined> {
  return sql.one<DbOutboxConsumerRow>(`SELECT ${columns(sql)} FROM outbox_consumers WHERE name = ? FOR UPDATE`, [name]);
}

/** Records a failed attempt at the event after the position; it is tried again from `retryAt`. */
export function recordOutboxFailure(
  sql: Sql,
  name: string,
  owner: string,
  failure: { eventId: string; attempts: number; error: string; now: number; retryAt: number },
): Promise<DbOutboxConsumerRow | undefined> {
  return sql.one<DbOutboxConsumerRow>(
    `UPDATE outbox_consumers SET attempts = ?, failing_event_id = ?, retry_at = ?, last_error = ?, last_error_at = ?, updated_at = ?
     WHERE name = ? AND leased_by = ?
     RETURNING ${columns(sql)}`,
    [failure.attempts, failure.eventId, failure.retryAt, failure.error, failure.now, failure.now, name, owner],
  );
}

/** PostgreSQL: the oldest transaction still running in the cluster (what holds the outbox back). */
export function oldestRunningTransaction(sql: Sql): Promise<{ pid: number; xid: string; started_at: number | null; state: string | null; database: string | null } | undefined> {
  return sql.one(
    `SELECT pid, backend_xid::text AS xid, (extract(epoch FROM xact_start) * 1000)::bigint AS started_at, state, datname AS database
     FROM pg_stat_activity WHERE backend_xid IS NOT NULL ORDER BY age(backend_xid) DESC LIMIT 1`,
  );
}

/**
 * The position every stored consumer has passed: the smallest of their positions, in outbox order;
 * undefined when there is no consumer.
 */
export function slowestOutboxPosition(sql: Sql): Promise<OutboxPosition | undefined> {
  return sql
    .one<{ xid: string; seq: number }>(
      sql.dialect === 'pg'
        ? `SELECT position_xid::text AS xid, position_seq AS seq FROM outbox_consumers ORDER BY position_xid, position_seq LIMIT 1`
        : `SELECT '0' AS xid, position_seq AS seq FROM outbox_consumers ORDER BY position_seq LIMIT 1`,
    )
    .then((row) => row && { xid: String(row.xid), seq: Number(row.seq) });
}

/**
 * Deletes up to `limit` events at or before `upTo` (in outbox order: (txid, seq) on PostgreSQL, seq on
 * SQLite) that occurred before `before`; returns how many.
 */
export function pruneRecordEvents(sql: Sql, upTo: OutboxPosition, before: number, limit: number): Promise<number> {
  return sql.dialect === 'pg'
    ? sql.run(
        `DELETE FROM record_events WHERE seq IN (SELECT seq FROM record_events WHERE (txid, seq) <= (?::xid8, ?) AND occurred_at < ? ORDER BY txid, seq LIMIT ?)`,
        [upTo.xid, upTo.seq, before, limit],
      )
    : sql.run(`DELETE FROM record_events WHERE seq IN (SELECT seq FROM record_events WHERE seq <= ? AND occurred_at < ? ORDER BY seq LIMIT ?)`, [upTo.seq, before, limit]);
}
