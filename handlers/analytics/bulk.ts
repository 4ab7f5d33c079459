/**
 * Bulk load: raw events in large inserts, then the bundle's sessions and rollups rebuilt from all of
 * its raw events in one pass (for imports of many events, where per-batch repair is slow).
 */
import type { Database, Sql, SqlValue } from '../../db/database.ts';
import type { DayFigures } from './figures.ts';
import { type ImportSummary, summarize } from './import.ts';
import { cmpStr, compareEvents, dayOf, dimensionValue, EVENT_DIMENSIONS } from './input.ts';
import {
  bulkInsert,
  type Columns,
  countEvents,
  DAILY_TABLE_COLUMNS,
  deleteMaintained,
  DIM_DAILY_TABLE_COLUMNS,
  DIM_VISITOR_TABLE_COLUMNS,
  eventsFromVisitor,
  insertEvents,
  SESSION_TABLE_COLUMNS,
  VISITOR_DAY_TABLE_COLUMNS,
} from './queries.ts';
import type { NewAnalyticsEvent } from './rows.ts';
import { sessionize, toEvent } from './sessions.ts';

/** From this many events the import CLI uses bulkLoadEvents (below, incremental batches are cheaper). */
export const BULK_IMPORT_MIN = 20_000;
const BULK_EVENT_ROWS = 10_000;
const REBUILD_PAGE_ROWS = 20_000;
const REBUILD_FLUSH_ROWS = 20_000;

interface DimRow { dimension: string; day: number; value: string; pageviews: number; visitors: number; engaged_ms: number; views: number; who: string[]; n: number[] }
type DayRow = DayFigures & { who: string[] };

/**
 * Sessions and rollups of one bundle, fed one whole visitor at a time (in visitor order): distinct
 * visitor counts are then plain increments. Each rollup row keeps its visitors so that the visitor
 * tables can be written in primary-key order at the end, several times faster than in visitor order
 * (n = 1 for visitor days and event dimensions, the session count for entry pages, as in Deltas.apply).
 */
class BundleRebuild {
  private readonly daily = new Map<number, DayRow>();
  private readonly dims = new Map<string, DimRow>();
  private sessions: SqlValue[][] = [];
  sessionCount = 0;

  constructor(private readonly bundle: string) {}

  private day(day: number): DayRow {
    let d = this.daily.get(day);
    if (!d) this.daily.set(day, (d = { pageviews: 0, visitors: 0, sessions: 0, bounces: 0, duration_ms: 0, engaged_ms: 0, who: [] }));
    return d;
  }

  private dim(dimension: string, day: number, value: string): DimRow {
    const key = `${dimension}\u0000${day}\u0000${value}`;
    let d = this.dims.get(key);
    if (!d) this.dims.set(key, (d = { dimension, day, value, pageviews: 0, visitors: 0, engaged_ms: 0, views: 0, who: [], n: [] }));
    return d;
  }

  /** One visitor's events, all of them (any order). */
  visitor(visitor: string, events: NewAnalyticsEvent[]): void {
    events.sort(compareEvents);
    const days = new Set<DayRow>();
    const dimCounts = new Map<DimRow, number>();
    for (const e of events) {
      const d = this.day(dayOf(e.ts));
      d.engaged_ms += e.engaged_ms;
      const isView = e.type === 'pageview';
      if (isView) {
        d.pageviews++;
        days.add(d);
      }
      for (const dimension of EVENT_DIMENSIONS) {
        const r = this.dim(dimension, dayOf(e.ts), dimensionValue(e, dimension));
        r.engaged_ms += e.engaged_ms;
        if (isView) {
          r.pageviews++;
          r.views++;
          dimCounts.set(r, (dimCounts.get(r) ?? 0) + 1);
        }
      }
    }
    for (const s of sessionize(events)) {
      this.sessionCount++;
      this.sessions.push([this.bundle, visitor, s.start_ts, s.end_ts, s.day, s.pageviews, s.entry_page, s.engaged_ms]);
      const d = this.day(s.day);
      d.sessions++;
      if (s.pageviews === 1) d.bounces++;
      d.duration_ms += s.end_ts - s.start_ts;
      const r = this.dim('entry_page', s.day, s.entry_page);
      r.pageviews++;
      r.views += s.pageviews;
      r.engaged_ms += s.engaged_ms;
      dimCounts.set(r, (dimCounts.get(r) ?? 0) + 1);
    }
    for (const d of days) {
      d.visitors++;
      d.who.push(visitor);
    }
    for (const [r, n] of dimCounts) {
      r.visitors++;
      r.who.push(visitor);
      r.n.push(n);
    }
  }

  /** Writes the sessions gathered so far when there are many (they come in primary-key order). */
  async flushSessions(sql: Sql, atLeast = 0): Promise<void> {
    if (this.sessions.length < atLeast) return;
    await bulkInsert(sql, 'analytics_sessions', SESSION_TABLE_COLUMNS, this.sessions);
    this.sessions = [];
  }

  /** Writes the remaining sessions, the visitor sets and the rollups. */
  async finish(sql: Sql): Promise<void> {
    await this.flushSessions(sql);
    const days = [...this.daily.entries()].sort(([a], [b]) => a - b);
    await writeInOrder(sql, 'analytics_visitor_days', VISITOR_DAY_TABLE_COLUMNS, days, ([day, d]) => d.who.map((v) => [this.bundle, day, v, 1]));
    const dims = [...this.dims.values()].sort((a, b) => cmpStr(a.dimension, b.dimension) || a.day - b.day || cmpStr(a.value, b.value));
    await writeInOrder(sql, 'analytics_dim_visitors', DIM_VISITOR_TABLE_COLUMNS, dims, (r) => r.who.map((v, i) => [this.bundle, r.dimension, r.day, r.value, v, r.dimension === 'entry_page' ? r.n[i]! : 1]));
    const daily = days.filter(([, d]) => d.pageviews || d.visitors || d.sessions || d.bounces || d.duration_ms || d.engaged_ms);
    await bulkInsert(sql, 'analytics_daily', DAILY_TABLE_COLUMNS, daily.map(([day, d]) => [this.bundle, day, d.pageviews, d.visitors, d.sessions, d.bounces, d.duration_ms, d.engaged_ms]));
    const rollups = dims.filter((r) => r.pageviews || r.visitors || r.engaged_ms || r.views);
    await bulkInsert(sql, 'analytics_dim_daily', DIM_DAILY_TABLE_COLUMNS, rollups.map((r) => [this.bundle, r.dimension, r.day, r.value, r.pageviews, r.visitors, r.engaged_ms, r.views]));
  }
}

/** Inserts the rows of each group, in order, REBUILD_FLUSH_ROWS at a time. */
async function writeInOrder<G>(sql: Sql, table: string, columns: Columns, groups: readonly G[], rowsOf: (group: G) => SqlValue[][]): Promise<void> {
  let rows: SqlValue[][] = [];
  for (const g of groups) {
    for (const row of rowsOf(g)) rows.push(row);
    if (rows.length >= REBUILD_FLUSH_ROWS) {
      await bulkInsert(sql, table, columns, rows);
      rows = [];
    }
  }
  await bulkInsert(sql, table, columns, rows);
}

/** Feeds every stored event of the bundle to `rebuild`, one visitor at a time, in pages. */
async function rebuildFromStored(sql: Sql, bundleId: string, rebuild: BundleRebuild, total: number, options: BulkLoadOptions): Promise<void> {
  let read = 0;
  let from = '';
  const page = options.pageRows ?? REBUILD_PAGE_ROWS;
  let limit = page;
  for (;;) {
    const rows = await eventsFromVisitor(sql, bundleId, from, limit);
    const full = rows.length === limit;
    const lastVisitor = rows.length ? rows[rows.length - 1]!.visitor : '';
    if (full && rows[0]!.visitor === lastVisitor) {
      limit *= 2; // one visitor fills the page: read more at once
      continue;
    }
    // A full page may end inside a visitor: that visitor is read again, whole, with the next page.
    let i = 0;
    while (i < rows.length) {
      const visitor = rows[i]!.visitor;
      let j = i + 1;
      while (j < rows.length && rows[j]!.visitor === visitor) j++;
      if (full && j === rows.length) break;
      rebuild.visitor(visitor, rows.slice(i, j).map(toEvent));
      i = j;
    }
    read += i;
    options.onProgress?.(read, total, 'rebuild');
    await rebuild.flushSessions(sql, REBUILD_FLUSH_ROWS);
    if (!full) break;
    from = lastVisitor;
    limit = page;
  }
}

export interface BulkLoadOptions {
  /** Called as raw events are stored (phase 'store') and as the bundle's events are re-read (phase 'rebuild'). */
  onProgress?: (done: number, total: number, phase: 'store' | 'rebuild') => void;
  /** Events read per page when stored events are re-read (tests make it small). */
  pageRows?: number;
}

/**
 * Stores validated events of one bundle in ONE transaction with large multi-row inserts, then
 * rebuilds that bundle's sessions and rollups from all of its raw events (those stored before
 * included): the maintained rows are deleted and recomputed in one pass over the events ordered by
 * visitor, with the same sessionize/dimension code as incremental ingestion. Cost grows with the
 * bundle's whole history, so it suits imports of many events; ingestEvents suits small batches.
 * `sessions_removed` counts the bundle's sessions before, `sessions_added` after.
 */
export async function bulkLoadEvents(db: Database, bundleId: string, events: readonly NewAnalyticsEvent[], options: BulkLoadOptions = {}): Promise<ImportSummary> {
  let removed = 0;
  let added = 0;
  await db.tx(async (sql) => {
    await db.lock(sql, `analytics:${bundleId}`);
    const before = await countEvents(sql, bundleId);
    // In visitor order: the (bundle, visitor, ts) index then grows at its end, and a bundle without
    // earlier events is rebuilt from these very events, with no read back.
    const sorted = [...events].sort((a, b) => cmpStr(a.visitor, b.visitor) || a.ts - b.ts);
    for (let i = 0; i < sorted.length; i += BULK_EVENT_ROWS) {
      const part = sorted.slice(i, i + BULK_EVENT_ROWS);
      await insertEvents(sql, part, { queue: false });
      options.onProgress?.(i + part.length, sorted.length, 'store');
    }
    removed = await deleteMaintained(sql, bundleId);
    const rebuild = new BundleRebuild(bundleId);
    if (before === 0) {
      let report = 0;
      for (let i = 0; i < sorted.length; ) {
        const visitor = sorted[i]!.visitor;
        let j = i + 1;
        while (j < sorted.length && sorted[j]!.visitor === visitor) j++;
        rebuild.visitor(visitor, sorted.slice(i, j));
        i = j;
        if (i >= report || i === sorted.length) {
          report = i + REBUILD_PAGE_ROWS;
          options.onProgress?.(i, sorted.length, 'rebuild');
          await rebuild.flushSessions(sql, REBUILD_FLUSH_ROWS);
        }
      }
    } else {
      await rebuildFromStored(sql, bundleId, rebuild, before + sorted.length, options);
    }
    await rebuild.finish(sql);
    added = rebuild.sessionCount;
  });
  if (db.dialect === 'pg') {
    // Fresh planner statistics for the tables the query operations read (autovacuum gets there later).
    for (const table of ['analytics_events', 'analytics_daily', 'analytics_dim_daily']) {
      await db.sql.run(`ANALYZE ${table}`);
    }
  }
  return summarize(bundleId, events, added, removed);
}
