/**
 * Analytics ingestion: stores batches of events and keeps sessions (sessions.ts) and daily rollups
 * (rollups.ts) equal to a from-scratch recomputation over the raw events (figures.ts). The
 * collection writer, the import CLI and the demo feed it.
 */
import type { Database, Sql } from '../../db/database.ts';
import { deleteSessions, eventsOfVisitors, insertEvents, latestOfVisitors, putSessions, sessionsInProgress, sessionsOfVisitors, visitorEvents } from './queries.ts';
import { Deltas, PresentRows, type WrittenRows } from './rollups.ts';
import type { DbAnalyticsSessionRow, NewAnalyticsEvent } from './rows.ts';
import { compareEvents, SESSION_GAP_MS } from './input.ts';
import { type SessionShape, sessionize, sessionKey, toEvent, toShape } from './sessions.ts';

// What code outside the module (tests, the demo, the contract run) stores events with.
export { type AnalyticsEventInput, DAY_MS, dayOf, normalizeEvent } from './input.ts';

const PRESENT_ROWS_MAX = 500_000;
const presentRows = new WeakMap<Database, PresentRows>();

type Span = { bundle: string; visitor: string; tmin: number; tmax: number };

const pairKey = (bundle: string, visitor: string) => `${bundle}\u0000${visitor}`;

function groupBy<T>(rows: readonly T[], key: (row: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const row of rows) {
    const k = key(row);
    const list = out.get(k);
    if (list) list.push(row);
    else out.set(k, [row]);
  }
  return out;
}

/**
 * Re-sessionizes each (bundle, visitor) around their new events [tmin, tmax]: from the session in
 * progress at tmin (or tmin itself) to the first gap of 30 minutes or more after tmax, where old and
 * new sessionization agree again. Old sessions of that window that differ are removed, new ones
 * added, and both recorded in deltas. Reads are set-based (three statements per batch on PostgreSQL,
 * per 100 visitors on SQLite), so in-order traffic costs a handful of statements per batch.
 */
async function repairVisitors(sql: Sql, deltas: Deltas, spans: readonly Span[]): Promise<{ added: number; removed: number }> {
  const inProgress = await sessionsInProgress(sql, spans.map((s) => [s.bundle, s.visitor, s.tmin, s.tmin - SESSION_GAP_MS] as const));
  const startOf = new Map(inProgress.map((s) => [pairKey(s.bundle_id, s.visitor), Number(s.start_ts)]));
  const windows = spans.map((s) => ({ ...s, from: startOf.get(pairKey(s.bundle, s.visitor)) ?? s.tmin, end: s.tmax + SESSION_GAP_MS, lastTs: s.tmax }));
  const loaded = groupBy(
    (await eventsOfVisitors(sql, windows.map((w) => [w.bundle, w.visitor, w.from, w.end] as const))).map(toEvent),
    (e) => pairKey(e.bundle_id, e.visitor),
  );
  const eventsOf = new Map<string, NewAnalyticsEvent[]>();
  for (const w of windows) {
    const key = pairKey(w.bundle, w.visitor);
    const events = loaded.get(key) ?? [];
    // Extend while the visitor has events less than 30 minutes after the last one loaded.
    for (;;) {
      const last = events.length ? events[events.length - 1]!.ts : w.tmax;
      if (last + SESSION_GAP_MS <= w.end) break;
      const more = (await visitorEvents(sql, w.bundle, w.visitor, w.end, last + SESSION_GAP_MS)).map(toEvent);
      w.end = last + SESSION_GAP_MS;
      events.push(...more);
    }
    events.sort(compareEvents);
    w.lastTs = events.length ? events[events.length - 1]!.ts : w.tmax;
    eventsOf.set(key, events);
  }
  const oldOf = groupBy(await sessionsOfVisitors(sql, windows.map((w) => [w.bundle, w.visitor, w.from, w.lastTs] as const)), (s) => pairKey(s.bundle_id, s.visitor));
  const removedKeys: Array<readonly [string, string, number]> = [];
  const addedRows: DbAnalyticsSessionRow[] = [];
  for (const w of windows) {
    const key = pairKey(w.bundle, w.visitor);
    const fresh = sessionize(eventsOf.get(key)!);
    const old = (oldOf.get(key) ?? []).map(toShape);
    const freshKeys = new Set(fresh.map(sessionKey));
    const oldKeys = new Set(old.map(sessionKey));
    for (const s of old) {
      if (freshKeys.has(sessionKey(s))) continue;
      removedKeys.push([w.bundle, w.visitor, s.start_ts]);
      deltas.session(w.bundle, w.visitor, s, -1);
    }
    for (const s of fresh) {
      if (oldKeys.has(sessionKey(s))) continue;
      addedRows.push({ bundle_id: w.bundle, visitor: w.visitor, ...s });
      deltas.session(w.bundle, w.visitor, s, 1);
    }
  }
  await deleteSessions(sql, removedKeys);
  await putSessions(sql, addedRows);
  return { added: addedRows.length, removed: removedKeys.length };
}

type AppendSpan = Span & { last: number | null; latest: SessionShape | null; events: NewAnalyticsEvent[] };

/**
 * The live-traffic path, for visitors whose new events all come after their latest stored event:
 * sessionization continues from the state the stored events left (the visitor's latest session when
 * it holds that latest event, or none), so no stored event is read again. Gives exactly what
 * repairVisitors would: sessionize is a left-to-right state machine whose whole state is that pair.
 * A continued session keeps its start, so it is stored over the old row (putSessions).
 */
async function appendVisitors(sql: Sql, deltas: Deltas, spans: readonly AppendSpan[]): Promise<{ added: number; removed: number }> {
  const rows: DbAnalyticsSessionRow[] = [];
  let added = 0;
  let removed = 0;
  for (const span of spans) {
    const current = span.latest && span.latest.end_ts === span.last ? span.latest : null;
    const fresh = sessionize(span.events.length > 1 ? [...span.events].sort(compareEvents) : span.events, { current, prevTs: span.last });
    for (const s of fresh) {
      if (current && s === fresh[0]) {
        if (sessionKey(s) === sessionKey(current)) continue;
        deltas.session(span.bundle, span.visitor, current, -1);
        removed++;
      }
      rows.push({ bundle_id: span.bundle, visitor: span.visitor, ...s });
      deltas.session(span.bundle, span.visitor, s, 1);
      added++;
    }
  }
  await putSessions(sql, rows);
  return { added, removed };
}

export interface IngestResult {
  events: number;
  sessions_added: number;
  sessions_removed: number;
}

/**
 * Stores a batch of events (any bundles, any order) in ONE transaction: raw events, then for each
 * affected (bundle, visitor) a local re-sessionization and the rollup differences. On PostgreSQL a
 * transaction-scoped advisory lock per bundle keeps concurrent batches from splitting a session, and
 * the commit does not wait for the disk unless `durable` (live batches; see below).
 */
export async function ingestEvents(db: Database, events: readonly NewAnalyticsEvent[], options: { durable?: boolean } = {}): Promise<IngestResult> {
  if (!events.length) return { events: 0, sessions_added: 0, sessions_removed: 0 };
  let present = presentRows.get(db);
  if (!present) presentRows.set(db, (present = new PresentRows(PRESENT_ROWS_MAX)));
  let written: WrittenRows = { visitorDays: [], dimVisitors: [] };
  // What needs no database is prepared before the transaction (and its locks): the rollup changes
  // of the events themselves and each visitor's span.
  const deltas = new Deltas();
  const spans = new Map<string, AppendSpan>();
  for (const e of events) {
    deltas.event(e);
    const key = pairKey(e.bundle_id, e.visitor);
    const span = spans.get(key);
    if (!span) spans.set(key, { bundle: e.bundle_id, visitor: e.visitor, tmin: e.ts, tmax: e.ts, last: null, latest: null, events: [e] });
    else {
      span.tmin = Math.min(span.tmin, e.ts);
      span.tmax = Math.max(span.tmax, e.ts);
      span.events.push(e);
    }
  }
  const bundles = [...new Set(events.map((e) => e.bundle_id))].sort();
  const result = await db.tx(async (sql) => {
    // A live batch was only buffered in memory until now, so a crash just after commit loses no more
    // than a crash just before: the commit need not wait for the disk (rollups stay exact, since
    // PostgreSQL never keeps part of a transaction). Imports ask for durable commits.
    if (sql.dialect === 'pg' && !options.durable) await sql.run('SET LOCAL synchronous_commit = off');
    for (const bundle of bundles) await db.lock(sql, `analytics:${bundle}`);
    // Before the new events are stored: each visitor's latest stored event decides the path.
    for (const row of await latestOfVisitors(sql, [...spans.values()].map((s) => [s.bundle, s.visitor] as const))) {
      if (row.last === null) continue;
      const span = spans.get(pairKey(row.bundle_id, row.visitor))!;
      span.last = Number(row.last);
      if (row.start_ts !== null) span.latest = toShape(row);
    }
    await insertEvents(sql, events);
    const appending = [...spans.values()].filter((s) => s.last === null || s.last < s.tmin);
    const repairing = [...spans.values()].filter((s) => !(s.last === null || s.last < s.tmin));
    const a = await appendVisitors(sql, deltas, appending);
    const r = await repairVisitors(sql, deltas, repairing);
    written = await deltas.apply(sql, present);
    return { events: events.length, sessions_added: a.added + r.added, sessions_removed: a.removed + r.removed };
  });
  present.addAll(written);
  return result;
}

