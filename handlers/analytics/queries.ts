import type { Sql, SqlValue } from '../../db/database.ts';
import type { DbBundleRow } from '../../db/rows.ts';
import type { DbAnalyticsDailyRow, DbAnalyticsEventRow, DbAnalyticsSessionRow, NewAnalyticsEvent } from './rows.ts';

const CHUNK = 200;

function chunks<T>(rows: readonly T[], size = CHUNK): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < rows.length; i += size) out.push(rows.slice(i, i + size));
  return out;
}

const placeholders = (columns: number, rows: number) => Array.from({ length: rows }, () => `(${Array(columns).fill('?').join(', ')})`).join(', ');

export function findWorkspaceBundle(sql: Sql, workspaceId: string, bundleId: string): Promise<DbBundleRow | undefined> {
  return sql.one<DbBundleRow>(`SELECT * FROM bundles WHERE id = ? AND workspace_id = ?`, [bundleId, workspaceId]);
}

export function findBundle(sql: Sql, bundleId: string): Promise<DbBundleRow | undefined> {
  return sql.one<DbBundleRow>(`SELECT * FROM bundles WHERE id = ?`, [bundleId]);
}


/** Stores raw events (queued on PostgreSQL unless `queue: false`, as the bulk load's progress needs). */
export async function insertEvents(sql: Sql, events: readonly NewAnalyticsEvent[], options = { queue: true }): Promise<void> {
  await bulkInsert(sql, 'analytics_events', EVENT_TABLE_COLUMNS, events.map((e) => EVENT_TABLE_COLUMNS.map(([c]) => e[c as keyof NewAnalyticsEvent])), options);
}

/** A visitor's events with from <= ts < to, in time order. */
export function visitorEvents(sql: Sql, bundleId: string, visitor: string, from: number, to: number): Promise<DbAnalyticsEventRow[]> {
  return sql.all<DbAnalyticsEventRow>(
    `SELECT * FROM analytics_events WHERE bundle_id = ? AND visitor = ? AND ts >= ? AND ts < ? ORDER BY ts, id`,
    [bundleId, visitor, from, to],
  );
}

/**
 * Stores sessions; one with the (bundle, visitor, start_ts) of a stored session replaces it (a
 * session in progress that new events continue keeps its start: one update instead of a delete and
 * an insert).
 */
export async function putSessions(sql: Sql, sessions: readonly DbAnalyticsSessionRow[]): Promise<void> {
  await bulkInsert(sql, 'analytics_sessions', SESSION_TABLE_COLUMNS, sessions.map((r) => SESSION_TABLE_COLUMNS.map(([c]) => r[c as keyof DbAnalyticsSessionRow])), {
    queue: true,
    onConflict: ' ON CONFLICT (bundle_id, visitor, start_ts) DO UPDATE SET end_ts = excluded.end_ts, day = excluded.day, pageviews = excluded.pageviews, entry_page = excluded.entry_page, engaged_ms = excluded.engaged_ms',
  });
}

/** PostgreSQL array types of a table's columns, from the declared column lists (TABLE_COLUMNS). */
function typesOf(table: string, names: readonly string[]): Columns {
  const declared = new Map(TABLE_COLUMNS[table]);
  return names.map((name) => {
    const type = declared.get(name);
    if (!type) throw new Error(`no declared type for ${table}.${name}`);
    return [name, type] as const;
  });
}

function unnestInsert(table: string, columns: Columns, rows: readonly (readonly SqlValue[])[]): { text: string; params: string[] } {
  return {
    text: `INSERT INTO ${table} (${columns.map(([n]) => n).join(', ')}) SELECT * FROM unnest(${columns.map(([, type]) => `CAST(? AS ${type}[])`).join(', ')})`,
    params: columns.map(([, type], k) => pgArray(rows, k, type)),
  };
}

/**
 * Adds to counters: INSERT ... ON CONFLICT DO UPDATE SET c = c + excluded.c, for rows with distinct
 * keys. Returns the rows' `returning` columns after the change when asked. On PostgreSQL one
 * statement for all rows (queued when nothing is returned).
 */
export async function addTo<R extends object = Record<string, unknown>>(
  sql: Sql,
  table: string,
  keys: readonly string[],
  counters: readonly string[],
  rows: readonly (readonly SqlValue[])[],
  returning?: readonly string[],
): Promise<R[]> {
  if (!rows.length) return [];
  const columns = [...keys, ...counters];
  const conflict =
    ` ON CONFLICT (${keys.join(', ')}) DO UPDATE SET ${counters.map((c) => `${c} = ${table}.${c} + excluded.${c}`).join(', ')}` +
    (returning ? ` RETURNING ${returning.join(', ')}` : '');
  if (sql.dialect === 'pg') {
    const { text, params } = unnestInsert(table, typesOf(table, columns), rows);
    if (returning) return sql.all<R>(text + conflict, params);
    await sql.write(text + conflict, params);
    return [];
  }
  const out: R[] = [];
  for (const part of chunks(rows)) {
    const text = `INSERT INTO ${table} (${columns.join(', ')}) VALUES ${placeholders(columns.length, part.length)}${conflict}`;
    if (returning) out.push(...(await sql.all<R>(text, part.flat())));
    else await sql.run(text, part.flat());
  }
  return out;
}

/** Inserts the keys not there yet (with n = 1); returns the keys inserted. */
export async function insertAbsent<R extends object>(sql: Sql, table: string, keys: readonly string[], rows: readonly (readonly SqlValue[])[]): Promise<R[]> {
  if (!rows.length) return [];
  const withN = rows.map((r) => [...r, 1]);
  const columns = [...keys, 'n'];
  const conflict = ` ON CONFLICT (${keys.join(', ')}) DO NOTHING RETURNING ${keys.join(', ')}`;
  if (sql.dialect === 'pg') {
    const { text, params } = unnestInsert(table, typesOf(table, columns), withN);
    return sql.all<R>(text + conflict, params);
  }
  const out: R[] = [];
  for (const part of chunks(withN)) {
    out.push(...(await sql.all<R>(`INSERT INTO ${table} (${columns.join(', ')}) VALUES ${placeholders(columns.length, part.length)}${conflict}`, part.flat())));
  }
  return out;
}

/** Deletes visitor rows of (bundle, dimension, day, value, visitor) whose count reached 0. */
export async function deleteEmptyDimVisitors(sql: Sql, keys: ReadonlyArray<readonly [bundleId: string, dimension: string, day: number, value: string, visitor: string]>): Promise<void> {
  if (!keys.length) return;
  if (sql.dialect === 'pg') {
    const cols = typesOf('analytics_dim_visitors', ['bundle_id', 'dimension', 'day', 'value', 'visitor']);
    await sql.write(
      `DELETE FROM analytics_dim_visitors d USING unnest(${cols.map(([, t]) => `CAST(? AS ${t}[])`).join(', ')}) AS k(bundle_id, dimension, day, value, visitor) ` +
        `WHERE d.bundle_id = k.bundle_id AND d.dimension = k.dimension AND d.day = k.day AND d.value = k.value AND d.visitor = k.visitor AND d.n = 0`,
      cols.map(([, t], i) => pgArray(keys, i, t)),
    );
    return;
  }
  for (const k of keys) await sql.run(`DELETE FROM analytics_dim_visitors WHERE bundle_id = ? AND dimension = ? AND day = ? AND value = ? AND visitor = ? AND n = 0`, [...k]);
}

// ---- reads for the query operations ----

export function siteDaily(sql: Sql, bundleId: string, from: number, to: number): Promise<DbAnalyticsDailyRow[]> {
  return sql.all<DbAnalyticsDailyRow>(`SELECT * FROM analytics_daily WHERE bundle_id = ? AND day >= ? AND day <= ? ORDER BY day`, [bundleId, from, to]);
}

export function workspaceDaily(sql: Sql, workspaceId: string, from: number, to: number): Promise<DbAnalyticsDailyRow[]> {
  return sql.all<DbAnalyticsDailyRow>(
    `SELECT d.* FROM analytics_daily d JOIN bundles b ON b.id = d.bundle_id WHERE b.workspace_id = ? AND d.day >= ? AND d.day <= ? ORDER BY d.bundle_id, d.day`,
    [workspaceId, from, to],
  );
}

export interface BreakdownRow {
  value: string;
  pv: number;
  visitors: number;
  engaged_ms: number;
  views: number;
}

/** Rows by pageviews descending, then value; `after` continues after that row. Returns up to limit rows. */
export function breakdownPage(
  sql: Sql,
  q: { bundleId: string; dimension: string; from: number; to: number; after: { pageviews: number; value: string } | null; limit: number },
): Promise<BreakdownRow[]> {
  const params: SqlValue[] = [q.bundleId, q.dimension, q.from, q.to];
  let having = 'HAVING SUM(pageviews) > 0';
  if (q.after) {
    having += ' AND (SUM(pageviews) < ? OR (SUM(pageviews) = ? AND value > ?))';
    params.push(q.after.pageviews, q.after.pageviews, q.after.value);
  }
  params.push(q.limit);
  return sql.all<BreakdownRow>(
    `SELECT value, CAST(SUM(pageviews) AS BIGINT) AS pv, CAST(SUM(visitors) AS BIGINT) AS visitors, ` +
      `CAST(SUM(engaged_ms) AS BIGINT) AS engaged_ms, CAST(SUM(views) AS BIGINT) AS views ` +
      `FROM analytics_dim_daily WHERE bundle_id = ? AND dimension = ? AND day >= ? AND day <= ? ` +
      `GROUP BY value ${having} ORDER BY pv DESC, value LIMIT ?`,
    params,
  );
}

export async function realtimeVisitors(sql: Sql, bundleId: string, after: number, until: number): Promise<number> {
  const row = await sql.one<{ n: number }>(
    `SELECT CAST(COUNT(DISTINCT visitor) AS BIGINT) AS n FROM analytics_events WHERE bundle_id = ? AND ts > ? AND ts <= ?`,
    [bundleId, after, until],
  );
  return Number(row?.n ?? 0);
}

// ---- whole-table reads for the recomputation check ----

export function allEvents(sql: Sql, bundleId: string): Promise<DbAnalyticsEventRow[]> {
  return sql.all<DbAnalyticsEventRow>(`SELECT * FROM analytics_events WHERE bundle_id = ? ORDER BY visitor, ts, id`, [bundleId]);
}

export function allSessions(sql: Sql, bundleId: string): Promise<DbAnalyticsSessionRow[]> {
  return sql.all<DbAnalyticsSessionRow>(`SELECT * FROM analytics_sessions WHERE bundle_id = ? ORDER BY visitor, start_ts`, [bundleId]);
}

export function allDaily(sql: Sql, bundleId: string): Promise<DbAnalyticsDailyRow[]> {
  return sql.all<DbAnalyticsDailyRow>(`SELECT * FROM analytics_daily WHERE bundle_id = ? ORDER BY day`, [bundleId]);
}

export function allDimDaily(sql: Sql, bundleId: string): Promise<Array<BreakdownRow & { dimension: string; day: number; pageviews: number }>> {
  return sql.all(`SELECT * FROM analytics_dim_daily WHERE bundle_id = ? ORDER BY dimension, day, value`, [bundleId]);
}

// ---- set-based reads for a batch of (bundle, visitor) pairs ----

const VISITOR_CHUNK = 100;

type VisitorBounds = ReadonlyArray<readonly [bundleId: string, visitor: string, lo: number, hi: number]>;

/**
 * Runs `SELECT ... FROM v CROSS JOIN ...`, where `v(bundle_id, visitor, lo, hi)` holds each visitor's
 * bounds: on PostgreSQL once, from unnest arrays; on SQLite once per chunk of visitors. `tail` follows the CTE.
 */
async function perVisitor<T extends object>(sql: Sql, rows: VisitorBounds, tail: string): Promise<T[]> {
  if (!rows.length) return [];
  if (sql.dialect === 'pg') {
    const cte = `WITH v(bundle_id, visitor, lo, hi) AS (SELECT * FROM unnest(CAST(? AS text[]), CAST(? AS text[]), CAST(? AS bigint[]), CAST(? AS bigint[])))`;
    return sql.all<T>(`${cte} ${tail}`, [pgArray(rows, 0, 'text'), pgArray(rows, 1, 'text'), pgArray(rows, 2, 'bigint'), pgArray(rows, 3, 'bigint')]);
  }
  const out: T[] = [];
  for (const part of chunks(rows, VISITOR_CHUNK)) {
    const cte = `WITH v(bundle_id, visitor, lo, hi) AS (VALUES ${part.map(() => '(?, ?, CAST(? AS BIGINT), CAST(? AS BIGINT))').join(', ')})`;
    out.push(...(await sql.all<T>(`${cte} ${tail}`, part.flat())));
  }
  return out;
}

// CROSS JOIN: SQLite then loops over the visitors outside and uses the (bundle_id, visitor, ...) indexes inside; PostgreSQL plans it as an inner join.

/** The time of the latest stored event of the visitor in the `v` row (null when there is none), as `last`. */
const LAST_EVENT_OF_V = '(SELECT MAX(e.ts) FROM analytics_events e WHERE e.bundle_id = v.bundle_id AND e.visitor = v.visitor) AS last';

/** For each visitor: the time of their latest stored event (null when they have none). */
export function lastEventOfVisitors(sql: Sql, rows: ReadonlyArray<readonly [bundleId: string, visitor: string]>): Promise<Array<{ bundle_id: string; visitor: string; last: number | string | null }>> {
  return perVisitor(
    sql,
    rows.map(([bundle, visitor]) => [bundle, visitor, 0, 0] as const),
    `SELECT v.bundle_id, v.visitor, ${LAST_EVENT_OF_V} FROM v`,
  );
}

/** A visitor's latest stored event and, when they have one, their latest session's columns. */
export type VisitorLatest = { last: number | string | null } & (
  | DbAnalyticsSessionRow
  | ({ bundle_id: string; visitor: string } & { [K in Exclude<keyof DbAnalyticsSessionRow, 'bundle_id' | 'visitor'>]: null })
);

/**
 * For each visitor, in one statement: the time of their latest stored event (`last`, null when none)
 * and their latest session. That session holds the latest event exactly when its end_ts = last
 * (sessions do not overlap; an engagement ping outside any session is the other case).
 */
export function latestOfVisitors(sql: Sql, rows: ReadonlyArray<readonly [bundleId: string, visitor: string]>): Promise<VisitorLatest[]> {
  return perVisitor<VisitorLatest>(
    sql,
    rows.map(([bundle, visitor]) => [bundle, visitor, 0, 0] as const),
    `SELECT v.bundle_id, v.visitor, ${LAST_EVENT_OF_V}, s.start_ts, s.end_ts, s.day, s.pageviews, s.entry_page, s.engaged_ms FROM v ` +
      // One primary-key probe per visitor: PostgreSQL needs LATERAL for that (a join condition on a
      // subquery became a hash join over every session); SQLite has no LATERAL and loops over v anyway.
      (sql.dialect === 'pg'
        ? `LEFT JOIN LATERAL (SELECT * FROM analytics_sessions s2 WHERE s2.bundle_id = v.bundle_id AND s2.visitor = v.visitor ORDER BY s2.start_ts DESC LIMIT 1) s ON TRUE`
        : `LEFT JOIN analytics_sessions s ON s.bundle_id = v.bundle_id AND s.visitor = v.visitor ` +
          `AND s.start_ts = (SELECT MAX(s2.start_ts) FROM analytics_sessions s2 WHERE s2.bundle_id = v.bundle_id AND s2.visitor = v.visitor)`),
  );
}

/** For each visitor: the session with start_ts <= lo and end_ts > hi (the `hi` column carries the lower end bound). */
export function sessionsInProgress(sql: Sql, rows: ReadonlyArray<readonly [bundleId: string, visitor: string, startAtMost: number, endAfter: number]>): Promise<DbAnalyticsSessionRow[]> {
  return perVisitor<DbAnalyticsSessionRow>(sql, rows, `SELECT s.* FROM v CROSS JOIN analytics_sessions s WHERE s.bundle_id = v.bundle_id AND s.visitor = v.visitor AND s.start_ts <= v.lo AND s.end_ts > v.hi`);
}

/** For each visitor: their events with lo <= ts < hi, ordered by bundle, visitor, ts, id. */
export function eventsOfVisitors(sql: Sql, rows: ReadonlyArray<readonly [bundleId: string, visitor: string, from: number, to: number]>): Promise<DbAnalyticsEventRow[]> {
  return perVisitor<DbAnalyticsEventRow>(sql, rows, `SELECT e.* FROM v CROSS JOIN analytics_events e${sql.dialect === 'sqlite' ? ' INDEXED BY analytics_events_visitor' : ''} WHERE e.bundle_id = v.bundle_id AND e.visitor = v.visitor AND e.ts >= v.lo AND e.ts < v.hi ORDER BY e.bundle_id, e.visitor, e.ts, e.id`);
}

/** For each visitor: sessions with lo <= start_ts <= hi. */
export function sessionsOfVisitors(sql: Sql, rows: ReadonlyArray<readonly [bundleId: string, visitor: string, from: number, to: number]>): Promise<DbAnalyticsSessionRow[]> {
  return perVisitor<DbAnalyticsSessionRow>(sql, rows, `SELECT s.* FROM v CROSS JOIN analytics_sessions s WHERE s.bundle_id = v.bundle_id AND s.visitor = v.visitor AND s.start_ts >= v.lo AND s.start_ts <= v.hi`);
}

export async function deleteSessions(sql: Sql, keys: ReadonlyArray<readonly [bundleId: string, visitor: string, startTs: number]>): Promise<void> {
  if (sql.dialect === 'sqlite') {
    // Statements are cheap in process; a row-value IN list would not use the primary key here.
    for (const key of keys) await sql.run(`DELETE FROM analytics_sessions WHERE bundle_id = ? AND visitor = ? AND start_ts = ?`, [...key]);
    return;
  }
  if (!keys.length) return;
  await sql.write(
    `DELETE FROM analytics_sessions s USING unnest(CAST(? AS text[]), CAST(? AS text[]), CAST(? AS bigint[])) AS k(bundle_id, visitor, start_ts) ` +
      `WHERE s.bundle_id = k.bundle_id AND s.visitor = k.visitor AND s.start_ts = k.start_ts`,
    [pgArray(keys, 0, 'text'), pgArray(keys, 1, 'text'), pgArray(keys, 2, 'bigint')],
  );
}

// ---- bulk load: whole-bundle rebuild ----

export type ColumnType = 'text' | 'bigint';
export type Columns = ReadonlyArray<readonly [name: string, type: ColumnType]>;

const SQLITE_MAX_VARIABLES = 32_766;

/** A PostgreSQL array literal (sent as text, cast in SQL): one parameter for a whole column. */
function pgArray(rows: readonly (readonly SqlValue[])[], column: number, type: ColumnType): string {
  let out = '{';
  for (let i = 0; i < rows.length; i++) {
    const v = rows[i]![column];
    if (i) out += ',';
    if (v === null || v === undefined) out += 'NULL';
    else if (type === 'bigint') out += v;
    else {
      const text = String(v);
      out += NEEDS_ESCAPE.test(text) ? `"${text.replace(/[\\"]/g, '\\$&')}"` : `"${text}"`;
    }
  }
  return out + '}';
}

const NEEDS_ESCAPE = /[\\"]/;

/**
 * Inserts many rows: on SQLite as multi-row VALUES statements (under its 32,766 variable limit, one
 * prepared statement reused), on PostgreSQL as one `INSERT ... SELECT FROM unnest(column arrays)`
 * (one parameter per column, so no 65,535-parameter limit, and one short statement for any number
 * of rows); `queue`: on PostgreSQL sent with the transaction's next read or its commit (live batches).
 */
export async function bulkInsert(
  sql: Sql,
  table: string,
  columns: Columns,
  rows: readonly (readonly SqlValue[])[],
  options: { queue?: boolean; onConflict?: string } = {},
): Promise<void> {
  if (!rows.length) return;
  const names = columns.map(([name]) => name);
  const conflict = options.onConflict ?? '';
  if (sql.dialect === 'pg') {
    const { text, params } = unnestInsert(table, columns, rows);
    if (options.queue) await sql.write(text + conflict, params);
    else await sql.run(text + conflict, params);
    return;
  }
  const perStatement = Math.min(500, Math.floor(SQLITE_MAX_VARIABLES / names.length));
  const width = names.length;
  let text = '';
  let textRows = 0;
  for (let i = 0; i < rows.length; i += perStatement) {
    const count = Math.min(perStatement, rows.length - i);
    if (count !== textRows) {
      text = `INSERT INTO ${table} (${names.join(', ')}) VALUES ${placeholders(width, count)}${conflict}`;
      textRows = count;
    }
    const params: SqlValue[] = new Array(count * width);
    for (let r = 0; r < count; r++) {
      const row = rows[i + r]!;
      for (let c = 0; c < width; c++) params[r * width + c] = row[c];
    }
    await sql.run(text, params);
  }
}

export const EVENT_TABLE_COLUMNS: Columns = [
  ['bundle_id', 'text'], ['ts', 'bigint'], ['visitor', 'text'], ['type', 'text'], ['path', 'text'], ['referrer_host', 'text'], ['source', 'text'],
  ['campaign', 'text'], ['country', 'text'], ['device', 'text'], ['browser', 'text'], ['os', 'text'], ['engaged_ms', 'bigint'],
];
export const SESSION_TABLE_COLUMNS: Columns = [
  ['bundle_id', 'text'], ['visitor', 'text'], ['start_ts', 'bigint'], ['end_ts', 'bigint'], ['day', 'bigint'], ['pageviews', 'bigint'], ['entry_page', 'text'], ['engaged_ms', 'bigint'],
];
export const DAILY_TABLE_COLUMNS: Columns = [
  ['bundle_id', 'text'], ['day', 'bigint'], ['pageviews', 'bigint'], ['visitors', 'bigint'], ['sessions', 'bigint'], ['bounces', 'bigint'], ['duration_ms', 'bigint'], ['engaged_ms', 'bigint'],
];
export const VISITOR_DAY_TABLE_COLUMNS: Columns = [['bundle_id', 'text'], ['day', 'bigint'], ['visitor', 'text'], ['n', 'bigint']];
export const DIM_DAILY_TABLE_COLUMNS: Columns = [
  ['bundle_id', 'text'], ['dimension', 'text'], ['day', 'bigint'], ['value', 'text'], ['pageviews', 'bigint'], ['visitors', 'bigint'], ['engaged_ms', 'bigint'], ['views', 'bigint'],
];
export const DIM_VISITOR_TABLE_COLUMNS: Columns = [['bundle_id', 'text'], ['dimension', 'text'], ['day', 'bigint'], ['value', 'text'], ['visitor', 'text'], ['n', 'bigint']];

/** Deletes a bundle's sessions and rollups (not its raw events); returns how many sessions there were. */
export async function deleteMaintained(sql: Sql, bundleId: string): Promise<number> {
  const sessions = await sql.run(`DELETE FROM analytics_sessions WHERE bundle_id = ?`, [bundleId]);
  for (const table of ['analytics_daily', 'analytics_visitor_days', 'analytics_dim_daily', 'analytics_dim_visitors']) {
    await sql.run(`DELETE FROM ${table} WHERE bundle_id = ?`, [bundleId]);
  }
  return sessions;
}

export async function countEvents(sql: Sql, bundleId: string): Promise<number> {
  return Number((await sql.one<{ n: number }>(`SELECT CAST(COUNT(*) AS BIGINT) AS n FROM analytics_events WHERE bundle_id = ?`, [bundleId]))?.n ?? 0);
}

/** Up to `limit` events of visitors >= `fromVisitor`, ordered by visitor, ts (for a paged pass over a bundle). */
export function eventsFromVisitor(sql: Sql, bundleId: string, fromVisitor: string, limit: number): Promise<NewAnalyticsEvent[]> {
  return sql.all<NewAnalyticsEvent>(
    `SELECT bundle_id, ts, visitor, type, path, referrer_host, source, campaign, country, device, browser, os, engaged_ms FROM analytics_events ` +
      `WHERE bundle_id = ? AND visitor >= ? ORDER BY visitor, ts LIMIT ?`,
    [bundleId, fromVisitor, limit],
  );
}

// ---- the straightforward query-time computation (benchmark baseline, tests) ----

/**
 * Sessions per start day computed from raw events at query time: a window function flags events that
 * follow the visitor's previous event by 30 minutes or more (or have none), a running sum numbers the
 * gap runs (peers of equal ts share a run: RANGE frame), and a run with a pageview is a session from
 * its first pageview to its last event. Reads events in [readFrom, readTo); counts sessions starting
 * in [from, to).
 */
export function queryTimeSessions(sql: Sql, q: { bundleId: string; readFrom: number; readTo: number; from: number; to: number; gapMs: number; dayMs: number }) {
  return sql.all<{ day: number; sessions: number; bounces: number; duration_ms: number }>(
    `WITH e AS (
       SELECT visitor, ts, type, CASE WHEN ts - LAG(ts) OVER (PARTITION BY visitor ORDER BY ts) < ? THEN 0 ELSE 1 END AS brk
       FROM analytics_events WHERE bundle_id = ? AND ts >= ? AND ts < ?
     ), r AS (
       SELECT visitor, ts, type, SUM(brk) OVER (PARTITION BY visitor ORDER BY ts) AS run FROM e
     ), s AS (
       SELECT MIN(CASE WHEN type = 'pageview' THEN ts END) AS start_ts, MAX(ts) AS end_ts, SUM(CASE WHEN type = 'pageview' THEN 1 ELSE 0 END) AS pv
       FROM r GROUP BY visitor, run
     )
     SELECT day, CAST(COUNT(*) AS BIGINT) AS sessions, CAST(SUM(CASE WHEN pv = 1 THEN 1 ELSE 0 END) AS BIGINT) AS bounces, CAST(SUM(end_ts - start_ts) AS BIGINT) AS duration_ms
     FROM (SELECT CAST(start_ts / ? AS BIGINT) AS day, start_ts, end_ts, pv FROM s WHERE pv > 0 AND start_ts >= ? AND start_ts < ?) AS d
     GROUP BY day ORDER BY day`,
    [q.gapMs, q.bundleId, q.readFrom, q.readTo, q.dayMs, q.from, q.to],
  );
}

/** Pageviews, distinct visitors (with a pageview) and active time per UTC day, from raw events in [from, to). */
export function queryTimeEventDays(sql: Sql, q: { bundleId: string; from: number; to: number; dayMs: number }) {
  return sql.all<{ day: number; pageviews: number; visitors: number; engaged_ms: number }>(
    `SELECT day, CAST(SUM(CASE WHEN type = 'pageview' THEN 1 ELSE 0 END) AS BIGINT) AS pageviews,
       CAST(COUNT(DISTINCT CASE WHEN type = 'pageview' THEN visitor END) AS BIGINT) AS visitors, CAST(SUM(engaged_ms) AS BIGINT) AS engaged_ms
     FROM (SELECT CAST(ts / ? AS BIGINT) AS day, type, visitor, engaged_ms FROM analytics_events WHERE bundle_id = ? AND ts >= ? AND ts < ?) AS e
     GROUP BY day ORDER BY day`,
    [q.dayMs, q.bundleId, q.from, q.to],
  );
}

const TABLE_COLUMNS: Record<string, Columns> = {
  analytics_events: EVENT_TABLE_COLUMNS,
  analytics_sessions: SESSION_TABLE_COLUMNS,
  analytics_daily: DAILY_TABLE_COLUMNS,
  analytics_visitor_days: VISITOR_DAY_TABLE_COLUMNS,
  analytics_dim_daily: DIM_DAILY_TABLE_COLUMNS,
  analytics_dim_visitors: DIM_VISITOR_TABLE_COLUMNS,
};

/** The analytics tables: raw events and everything maintained from them. */
export const ANALYTICS_TABLES: readonly string[] = Object.keys(TABLE_COLUMNS);
