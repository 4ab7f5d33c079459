/**
 * What one ingestion batch changes in the daily rollups and visitor sets (Deltas), and the
 * visitor-set rows a process knows to exist already (PresentRows).
 */
import type { Sql, SqlValue } from '../../db/database.ts';
import { dayOf, dimensionValue, EVENT_DIMENSIONS } from './input.ts';
import { addTo, deleteEmptyDimVisitors, insertAbsent } from './queries.ts';
import type { NewAnalyticsEvent } from './rows.ts';
import type { SessionShape } from './sessions.ts';

/** Rollup changes of one dimension value on one (bundle, day), with the visitors it saw. */
interface DimDelta {
  pageviews: number;
  engaged_ms: number;
  views: number;
  visitors: number;
  /** visitor -> pageviews (event dimensions) or sessions (entry_page, may be negative) of this batch. */
  seen: Map<string, number>;
}

/** Rollup changes of one (bundle, day). */
interface DayDelta {
  key: string;
  bundle: string;
  day: number;
  pageviews: number;
  sessions: number;
  bounces: number;
  duration_ms: number;
  engaged_ms: number;
  visitors: number;
  /** visitor -> pageviews of this batch (the visitor-day set). */
  seen: Map<string, number>;
  /** dimension -> value -> change. */
  dims: Map<string, Map<string, DimDelta>>;
}

const dayKey = (bundle: string, day: number) => `${bundle}\u0000${day}`;

/**
 * Accumulated rollup changes of one batch, nested by (bundle, day), dimension and value, so that
 * the per-event work is map lookups by strings the events already hold (no key built per
 * dimension and visitor: that, and the garbage it made, was most of the writer thread's time).
 */
export class Deltas {
  private readonly days = new Map<string, DayDelta>();
  private last: DayDelta | null = null;

  day(bundle: string, day: number): DayDelta {
    const last = this.last;
    if (last && last.day === day && last.bundle === bundle) return last;
    const key = dayKey(bundle, day);
    let d = this.days.get(key);
    if (!d) {
      d = { key, bundle, day, pageviews: 0, sessions: 0, bounces: 0, duration_ms: 0, engaged_ms: 0, visitors: 0, seen: new Map(), dims: new Map() };
      this.days.set(key, d);
    }
    return (this.last = d);
  }

  dim(d: DayDelta, dimension: string, value: string): DimDelta {
    let values = d.dims.get(dimension);
    if (!values) d.dims.set(dimension, (values = new Map()));
    let r = values.get(value);
    if (!r) values.set(value, (r = { pageviews: 0, engaged_ms: 0, views: 0, visitors: 0, seen: new Map() }));
    return r;
  }

  event(e: NewAnalyticsEvent) {
    const d = this.day(e.bundle_id, dayOf(e.ts));
    const pageview = e.type === 'pageview';
    d.engaged_ms += e.engaged_ms;
    if (pageview) {
      d.pageviews++;
      d.seen.set(e.visitor, (d.seen.get(e.visitor) ?? 0) + 1);
    }
    for (const dimension of EVENT_DIMENSIONS) {
      const r = this.dim(d, dimension, dimensionValue(e, dimension));
      r.engaged_ms += e.engaged_ms;
      if (pageview) {
        r.pageviews++;
        r.views++;
        r.seen.set(e.visitor, (r.seen.get(e.visitor) ?? 0) + 1);
      }
    }
  }

  session(bundle: string, visitor: string, s: SessionShape, sign: 1 | -1) {
    const d = this.day(bundle, s.day);
    d.sessions += sign;
    if (s.pageviews === 1) d.bounces += sign;
    d.duration_ms += sign * (s.end_ts - s.start_ts);
    const r = this.dim(d, 'entry_page', s.entry_page);
    r.pageviews += sign;
    r.views += sign * s.pageviews;
    r.engaged_ms += sign * s.engaged_ms;
    r.seen.set(visitor, (r.seen.get(visitor) ?? 0) + sign);
  }

  /**
   * Writes everything: visitor sets first (they decide the visitors deltas), then the rollups. Events
   * are only ever added, so visitor-day and event-dimension rows only need to exist (n = 1): one
   * insert-if-absent says which are new. Entry-page rows count the visitor's sessions there, which a
   * repair can take away, so they are added to and deleted at 0. Returns the visitor-set rows that
   * exist once this commits (for PresentRows).
   */
  async apply(sql: Sql, present: PresentRows): Promise<WrittenRows> {
    const visitorDays: Array<[string, number, string]> = [];
    const dimVisitors: Array<[string, string, number, string, string]> = [];
    const entries: Array<[string, string, number, string, string, number]> = [];
    for (const d of this.days.values()) {
      const known = present.of(d.key);
      for (const [visitor, n] of d.seen) if (n > 0 && !known?.visitors.has(visitor)) visitorDays.push([d.bundle, d.day, visitor]);
      for (const [dimension, values] of d.dims) {
        const entry = dimension === 'entry_page';
        const knownValues = known?.dims.get(dimension);
        for (const [value, r] of values) {
          const knownVisitors = knownValues?.get(value);
          for (const [visitor, n] of r.seen) {
            if (entry) {
              if (n !== 0) entries.push([d.bundle, dimension, d.day, value, visitor, n]);
            } else if (!knownVisitors?.has(visitor)) dimVisitors.push([d.bundle, dimension, d.day, value, visitor]);
          }
        }
      }
    }
    const fresh = await insertAbsent<{ bundle_id: string; day: number; visitor: string }>(sql, 'analytics_visitor_days', ['bundle_id', 'day', 'visitor'], visitorDays);
    for (const row of fresh) this.day(row.bundle_id, Number(row.day)).visitors++;
    const seen = await insertAbsent<{ bundle_id: string; dimension: string; day: number; value: string }>(
      sql, 'analytics_dim_visitors', ['bundle_id', 'dimension', 'day', 'value', 'visitor'], dimVisitors,
    );
    for (const row of seen) this.dim(this.day(row.bundle_id, Number(row.day)), row.dimension, row.value).visitors++;
    const after = await addTo<{ bundle_id: string; dimension: string; day: number; value: string; visitor: string; n: number }>(
      sql, 'analytics_dim_visitors', ['bundle_id', 'dimension', 'day', 'value', 'visitor'], ['n'], entries, ['bundle_id', 'dimension', 'day', 'value', 'visitor', 'n'],
    );
    const empty: Array<[string, string, number, string, string]> = [];
    for (const row of after) {
      const day = Number(row.day);
      const r = this.dim(this.day(row.bundle_id, day), row.dimension, row.value);
      const delta = r.seen.get(row.visitor)!;
      const n = Number(row.n);
      if (n === delta && delta > 0) r.visitors++;
      else if (n === 0) {
        r.visitors--;
        empty.push([row.bundle_id, row.dimension, day, row.value, row.visitor]);
      }
    }
    await deleteEmptyDimVisitors(sql, empty);
    const daily: SqlValue[][] = [];
    const dims: SqlValue[][] = [];
    for (const d of this.days.values()) {
      if (d.pageviews || d.sessions || d.bounces || d.duration_ms || d.engaged_ms || d.visitors) {
        daily.push([d.bundle, d.day, d.pageviews, d.visitors, d.sessions, d.bounces, d.duration_ms, d.engaged_ms]);
      }
      for (const [dimension, values] of d.dims) {
        for (const [value, r] of values) {
          if (r.pageviews || r.engaged_ms || r.views || r.visitors) dims.push([d.bundle, dimension, d.day, value, r.pageviews, r.visitors, r.engaged_ms, r.views]);
        }
      }
    }
    await addTo(sql, 'analytics_daily', ['bundle_id', 'day'], ['pageviews', 'visitors', 'sessions', 'bounces', 'duration_ms', 'engaged_ms'], daily);
    await addTo(sql, 'analytics_dim_daily', ['bundle_id', 'dimension', 'day', 'value'], ['pageviews', 'visitors', 'engaged_ms', 'views'], dims);
    return { visitorDays, dimVisitors };
  }
}

export interface WrittenRows {
  visitorDays: ReadonlyArray<readonly [bundle: string, day: number, visitor: string]>;
  dimVisitors: ReadonlyArray<readonly [bundle: string, dimension: string, day: number, value: string, visitor: string]>;
}

/** The visitor-set rows of one (bundle, day) known to exist. */
interface KnownRows {
  visitors: Set<string>;
  dims: Map<string, Map<string, Set<string>>>;
}

/**
 * Visitor-day and event-dimension visitor rows known to exist in the database (recorded after the
 * commit that wrote them). Such rows are never removed (events are only ever added; a bulk rebuild
 * writes them again), so a remembered row is never wrong, and live batches, which mostly continue
 * visits already seen today, skip most of their visitor-set writes. Bounded: past `max` rows, whole
 * (bundle, day) groups are forgotten, oldest first.
 */
export class PresentRows {
  private readonly groups = new Map<string, KnownRows>();
  private size = 0;

  constructor(private readonly max: number) {}

  of(key: string): KnownRows | undefined {
    return this.groups.get(key);
  }

  private group(bundle: string, day: number): KnownRows {
    const key = dayKey(bundle, day);
    let g = this.groups.get(key);
    if (!g) this.groups.set(key, (g = { visitors: new Set(), dims: new Map() }));
    return g;
  }

  addAll(rows: WrittenRows): void {
    for (const [bundle, day, visitor] of rows.visitorDays) {
      const set = this.group(bundle, day).visitors;
      if (!set.has(visitor)) {
        set.add(visitor);
        this.size++;
      }
    }
    for (const [bundle, dimension, day, value, visitor] of rows.dimVisitors) {
      const g = this.group(bundle, day);
      let values = g.dims.get(dimension);
      if (!values) g.dims.set(dimension, (values = new Map()));
      let set = values.get(value);
      if (!set) values.set(value, (set = new Set()));
      if (!set.has(visitor)) {
        set.add(visitor);
        this.size++;
      }
    }
    if (this.size <= this.max) return;
    for (const [key, g] of this.groups) {
      this.groups.delete(key);
      this.size -= g.visitors.size;
      for (const values of g.dims.values()) for (const set of values.values()) this.size -= set.size;
      if (this.size <= this.max * 0.9) break;
    }
  }
}

