/**
 * Analytics ingestion core (platform level, no HTTP): stores events and keeps sessions and daily
 * rollups equal to a from-scratch recomputation over the raw events. The import CLI uses it now; the
 * public collection endpoint will feed it batches later.
 *
 * Sessions (also written in the operation descriptions): per site and visitor, events are ordered by
 * (ts, pageviews before engagement pings, path, ...). A pageview starts a new session when the
 * previous event is 30 minutes or more earlier, when there is none, or when the previous event
 * belongs to no session; otherwise it continues the current one. An engagement ping continues the
 * current session when it is less than 30 minutes after the previous event, else it belongs to no
 * session. Hence consecutive sessions are at least 30 minutes apart, and a gap of 30 minutes or more
 * between two events resets the state: that is what makes a local repair exact.
 */
import { Ajv } from 'ajv';
import { textProblem } from '../../server/validation.ts';
import { document } from '../../generated/document.ts';
import type { components } from '../../generated/openapi.ts';
import type { Database, Sql, SqlValue } from '../../db/database.ts';
import {
  addTo,
  allDaily,
  allDimDaily,
  allEvents,
  allSessions,
  bulkInsert,
  type Columns,
  countEvents,
  DAILY_TABLE_COLUMNS,
  deleteEmptyDimVisitors,
  deleteMaintained,
  DIM_DAILY_TABLE_COLUMNS,
  DIM_VISITOR_TABLE_COLUMNS,
  eventsFromVisitor,
  deleteSessions,
  eventsOfVisitors,
  insertAbsent,
  insertEvents,
  putSessions,
  latestOfVisitors,
  type NewAnalyticsEvent,
  queryTimeEventDays,
  queryTimeSessions,
  sessionsInProgress,
  SESSION_TABLE_COLUMNS,
  sessionsOfVisitors,
  VISITOR_DAY_TABLE_COLUMNS,
  visitorEvents,
} from '../../db/queries/analytics.ts';
import type { AnalyticsEventType, DbAnalyticsDailyRow, DbAnalyticsEventRow, DbAnalyticsSessionRow } from '../../db/rows.ts';

export const SESSION_GAP_MS = 30 * 60_000;
export const DAY_MS = 86_400_000;
export const REALTIME_WINDOW_MS = 300_000;
export const DIRECT = 'Direct / None';
export const NO_CAMPAIGN = '(none)';
export const UNKNOWN = '(unknown)';

/** Dimensions that group events by their own attribute (entry_page comes from sessions). */
/** A breakdown dimension (components/schemas/AnalyticsDimension.yaml). */
export type Dimension = components['schemas']['AnalyticsDimension'];
/** Every breakdown dimension, in the document's order. */
export const DIMENSIONS = document.components.schemas.AnalyticsDimension.enum as readonly Dimension[]; // the type is generated from this very enum
/** Dimensions read off each event; `entry_page` is the first page of each session instead. */
export const EVENT_DIMENSIONS = DIMENSIONS.filter((d): d is Exclude<Dimension, 'entry_page'> => d !== 'entry_page');

export const dayOf = (ts: number) => Math.floor(ts / DAY_MS);

/** One event as collected (an import line, later a tracker batch item). */
export interface AnalyticsEventInput {
  type: AnalyticsEventType;
  ts: number;
  visitor: string;
  path: string;
  referrer?: string;
  utm_source?: string;
  utm_campaign?: string;
  country?: string;
  device?: string;
  browser?: string;
  os?: string;
  engaged_ms?: number;
}

const text = (max: number) => ({ type: 'string', maxLength: max, nullable: true }) as const;
const ajv = new Ajv({ allErrors: false, strict: true });
const validateInput = ajv.compile<AnalyticsEventInput>({
  type: 'object',
  additionalProperties: false,
  required: ['type', 'ts', 'visitor', 'path'],
  properties: {
    type: { type: 'string', enum: ['pageview', 'engagement'] },
    ts: { type: 'integer', minimum: 0, maximum: 8_640_000_000_000_000 },
    visitor: { type: 'string', minLength: 1, maxLength: 200 },
    path: { type: 'string', minLength: 1, maxLength: 2000, pattern: '^/' },
    referrer: text(2000),
    utm_source: text(500),
    utm_campaign: text(500),
    country: text(100),
    device: text(100),
    browser: text(100),
    os: text(100),
    engaged_ms: { type: 'integer', minimum: 0, maximum: 86_400_000, nullable: true },
  },
});

/** Checks one event; returns a readable problem or null. */
export function eventProblem(value: unknown): string | null {
  if (validateInput(value)) return textProblem('event', value); // the document's string rule (a NUL would fail PostgreSQL)
  const err = validateInput.errors?.[0];
  if (!err) return 'invalid event';
  const where = err.instancePath ? err.instancePath.slice(1) : 'event';
  if (err.keyword === 'additionalProperties') return `unknown field "${(err.params as { additionalProperty: string }).additionalProperty}"`;
  if (err.keyword === 'required') return `missing field "${(err.params as { missingProperty: string }).missingProperty}"`;
  if (err.keyword === 'pattern') return `${where} must start with "/"`;
  return `${where} ${err.message}`;
}

/** Host of a referrer URL (lower-case, no port); a value without a scheme is read as http://. */
export function referrerHost(referrer: string | undefined): string | null {
  const raw = referrer?.trim();
  if (!raw) return null;
  try {
    const url = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(raw) ? raw : `http://${raw}`);
    // A host name has at most 253 characters (and the stored host at most 255); a longer one is none.
    return (url.hostname.length <= 253 && url.hostname.toLowerCase()) || null;
  } catch {
    return null;
  }
}

const orElse = (value: string | undefined, fallback: string) => {
  const v = value?.trim();
  return v ? v : fallback;
};

/** Resolves the derived fields (referrer host, source, campaign, unknowns) of a valid input. */
export function normalizeEvent(bundleId: string, e: AnalyticsEventInput): NewAnalyticsEvent {
  const host = referrerHost(e.referrer);
  return {
    bundle_id: bundleId,
    ts: e.ts,
    visitor: e.visitor,
    type: e.type,
    path: e.path,
    referrer_host: host,
    source: orElse(e.utm_source, host ?? DIRECT),
    campaign: orElse(e.utm_campaign, NO_CAMPAIGN),
    country: orElse(e.country, UNKNOWN),
    device: orElse(e.device, UNKNOWN),
    browser: orElse(e.browser, UNKNOWN),
    os: orElse(e.os, UNKNOWN),
    engaged_ms: e.engaged_ms ?? 0,
  };
}

/** The value of an event-level dimension. */
export function dimensionValue(e: NewAnalyticsEvent, dimension: (typeof EVENT_DIMENSIONS)[number]): string {
  switch (dimension) {
    case 'page':
      return e.path;
    case 'referrer':
      return e.referrer_host ?? DIRECT;
    default:
      return e[dimension];
  }
}

const cmpStr = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** Total order of one visitor's events, independent of arrival order. */
export function compareEvents(a: NewAnalyticsEvent, b: NewAnalyticsEvent): number {
  return (
    a.ts - b.ts ||
    (a.type === b.type ? 0 : a.type === 'pageview' ? -1 : 1) ||
    cmpStr(a.path, b.path) ||
    cmpStr(a.source, b.source) ||
    cmpStr(a.referrer_host ?? '', b.referrer_host ?? '') ||
    cmpStr(a.campaign, b.campaign) ||
    a.engaged_ms - b.engaged_ms
  );
}

export type SessionShape = Omit<DbAnalyticsSessionRow, 'bundle_id' | 'visitor'>;

/**
 * Sessions of one visitor's events, which must be sorted with compareEvents. `from` continues after
 * earlier events: the state they left is the session holding the latest of them (or null when that
 * event belongs to no session) and that event's time; the continued session is returned first.
 */
export function sessionize(
  events: readonly NewAnalyticsEvent[],
  from: { current: SessionShape | null; prevTs: number | null } = { current: null, prevTs: null },
): SessionShape[] {
  const sessions: SessionShape[] = [];
  // Continuing after earlier events: the session holding the latest of them (or none) and its time.
  let current: SessionShape | null = from.current ? { ...from.current } : null;
  if (current) sessions.push(current);
  let prevTs: number | null = from.prevTs;
  for (const e of events) {
    const gapOk = prevTs !== null && e.ts - prevTs < SESSION_GAP_MS;
    prevTs = e.ts;
    if (e.type === 'pageview') {
      if (current && gapOk) {
        current.end_ts = e.ts;
        current.pageviews++;
        current.engaged_ms += e.engaged_ms;
      } else {
        current = { start_ts: e.ts, end_ts: e.ts, day: dayOf(e.ts), pageviews: 1, entry_page: e.path, engaged_ms: e.engaged_ms };
        sessions.push(current);
      }
    } else if (current && gapOk) {
      current.end_ts = e.ts;
      current.engaged_ms += e.engaged_ms;
    } else {
      current = null; // an engagement ping outside any session
    }
  }
  return sessions;
}

const sessionKey = (s: SessionShape) => `${s.start_ts}|${s.end_ts}|${s.pageviews}|${s.entry_page}|${s.engaged_ms}`;

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
class Deltas {
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

interface WrittenRows {
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
class PresentRows {
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

const PRESENT_ROWS_MAX = 500_000;
const presentRows = new WeakMap<Database, PresentRows>();

const toEvent = (row: NewAnalyticsEvent): NewAnalyticsEvent => ({ ...row, ts: Number(row.ts), engaged_ms: Number(row.engaged_ms) });

type Span = { bundle: string; visitor: string; tmin: number; tmax: number };

const pairKey = (bundle: string, visitor: string) => `${bundle}\u0000${visitor}`;

const toShape = (s: DbAnalyticsSessionRow): SessionShape => ({
  start_ts: Number(s.start_ts), end_ts: Number(s.end_ts), day: Number(s.day), pageviews: Number(s.pageviews), entry_page: s.entry_page, engaged_ms: Number(s.engaged_ms),
});

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

// ---------------------------------------------------------------------------------------------
// From-scratch recomputation (tests, benchmark) and the maintained figures in the same shape.
// ---------------------------------------------------------------------------------------------

/** A site's figures of one day (or summed over days): the daily rollup without its key. */
export type DayFigures = Omit<DbAnalyticsDailyRow, 'bundle_id' | 'day'>;

export interface DimFigures {
  pageviews: number;
  visitors: number;
  engaged_ms: number;
  views: number;
}

export interface Figures {
  /** day -> figures (days with any non-zero figure). */
  daily: Record<string, DayFigures>;
  /** `dimension|day|value` -> figures (rows with any non-zero figure). */
  dims: Record<string, DimFigures>;
  /** `visitor|start|end|pageviews|entry|engaged`, sorted. */
  sessions: string[];
}

const nonZero = (o: object) => Object.values(o).some((v) => v !== 0);

/** Straightforward recomputation over every raw event of a bundle. */
export async function recomputeFigures(sql: Sql, bundleId: string): Promise<Figures> {
  const rows = (await allEvents(sql, bundleId)).map(toEvent);
  const byVisitor = new Map<string, NewAnalyticsEvent[]>();
  for (const e of rows) {
    const list = byVisitor.get(e.visitor) ?? [];
    list.push(e);
    byVisitor.set(e.visitor, list);
  }
  const daily: Record<string, DayFigures> = {};
  const dims: Record<string, DimFigures> = {};
  const dayVisitors = new Set<string>();
  const dimVisitors = new Set<string>();
  const sessions: string[] = [];
  const day = (d: number) => (daily[d] ??= { pageviews: 0, visitors: 0, sessions: 0, bounces: 0, duration_ms: 0, engaged_ms: 0 });
  const dim = (k: string) => (dims[k] ??= { pageviews: 0, visitors: 0, engaged_ms: 0, views: 0 });
  for (const [visitor, list] of byVisitor) {
    list.sort(compareEvents);
    for (const e of list) {
      const d = dayOf(e.ts);
      day(d).engaged_ms += e.engaged_ms;
      if (e.type === 'pageview') {
        day(d).pageviews++;
        if (!dayVisitors.has(`${d}|${visitor}`)) {
          dayVisitors.add(`${d}|${visitor}`);
          day(d).visitors++;
        }
      }
      for (const dimension of EVENT_DIMENSIONS) {
        const k = `${dimension}|${d}|${dimensionValue(e, dimension)}`;
        dim(k).engaged_ms += e.engaged_ms;
        if (e.type === 'pageview') {
          dim(k).pageviews++;
          dim(k).views++;
          if (!dimVisitors.has(`${k}|${visitor}`)) {
            dimVisitors.add(`${k}|${visitor}`);
            dim(k).visitors++;
          }
        }
      }
    }
    for (const s of sessionize(list)) {
      sessions.push(`${visitor}|${sessionKey(s)}`);
      const d = day(s.day);
      d.sessions++;
      if (s.pageviews === 1) d.bounces++;
      d.duration_ms += s.end_ts - s.start_ts;
      const k = `entry_page|${s.day}|${s.entry_page}`;
      dim(k).pageviews++;
      dim(k).views += s.pageviews;
      dim(k).engaged_ms += s.engaged_ms;
      if (!dimVisitors.has(`${k}|${visitor}`)) {
        dimVisitors.add(`${k}|${visitor}`);
        dim(k).visitors++;
      }
    }
  }
  for (const k of Object.keys(daily)) if (!nonZero(daily[k]!)) delete daily[k];
  for (const k of Object.keys(dims)) if (!nonZero(dims[k]!)) delete dims[k];
  return { daily, dims, sessions: sessions.sort() };
}

/** The maintained sessions and rollups of a bundle, in the shape of recomputeFigures. */
export async function maintainedFigures(sql: Sql, bundleId: string): Promise<Figures> {
  const daily: Record<string, DayFigures> = {};
  for (const r of await allDaily(sql, bundleId)) {
    const f = { pageviews: Number(r.pageviews), visitors: Number(r.visitors), sessions: Number(r.sessions), bounces: Number(r.bounces), duration_ms: Number(r.duration_ms), engaged_ms: Number(r.engaged_ms) };
    if (nonZero(f)) daily[Number(r.day)] = f;
  }
  const dims: Record<string, DimFigures> = {};
  for (const r of await allDimDaily(sql, bundleId)) {
    const f = { pageviews: Number(r.pageviews), visitors: Number(r.visitors), engaged_ms: Number(r.engaged_ms), views: Number(r.views) };
    if (nonZero(f)) dims[`${r.dimension}|${Number(r.day)}|${r.value}`] = f;
  }
  const sessions = (await allSessions(sql, bundleId))
    .map((s) => `${s.visitor}|${Number(s.start_ts)}|${Number(s.end_ts)}|${Number(s.pageviews)}|${s.entry_page}|${Number(s.engaged_ms)}`)
    .sort();
  return { daily, dims, sessions };
}

/**
 * The site summary computed the straightforward way at query time, from raw events with window
 * functions in SQL (the benchmark's baseline against the maintained rollups): figures per UTC day of
 * [fromDay, toDay] and their totals. Sessions are read from one day before the interval to one day
 * after it, which is exact unless a visitor stays continuously active (events less than 30 minutes
 * apart) for more than a day across the interval's edges.
 */
export async function queryTimeSiteSummary(sql: Sql, bundleId: string, fromDay: number, toDay: number): Promise<{ daily: Record<string, DayFigures>; totals: DayFigures }> {
  const from = fromDay * DAY_MS;
  const to = (toDay + 1) * DAY_MS;
  const daily: Record<string, DayFigures> = {};
  const day = (d: number) => (daily[d] ??= { pageviews: 0, visitors: 0, sessions: 0, bounces: 0, duration_ms: 0, engaged_ms: 0 });
  for (const r of await queryTimeEventDays(sql, { bundleId, from, to, dayMs: DAY_MS })) {
    Object.assign(day(Number(r.day)), { pageviews: Number(r.pageviews), visitors: Number(r.visitors), engaged_ms: Number(r.engaged_ms) });
  }
  for (const r of await queryTimeSessions(sql, { bundleId, readFrom: from - DAY_MS, readTo: to + DAY_MS, from, to, gapMs: SESSION_GAP_MS, dayMs: DAY_MS })) {
    Object.assign(day(Number(r.day)), { sessions: Number(r.sessions), bounces: Number(r.bounces), duration_ms: Number(r.duration_ms) });
  }
  const totals: DayFigures = { pageviews: 0, visitors: 0, sessions: 0, bounces: 0, duration_ms: 0, engaged_ms: 0 };
  for (const k of Object.keys(daily)) {
    const f = daily[k]!;
    if (!nonZero(f)) delete daily[k];
    for (const key of Object.keys(totals) as Array<keyof DayFigures>) totals[key] += f[key];
  }
  return { daily, totals };
}

// ---------------------------------------------------------------------------------------------
// History import (NDJSON).
// ---------------------------------------------------------------------------------------------

export class ImportError extends Error {}

/** Parses and validates every line first; throws ImportError naming the first bad line. */
export function parseEventLines(content: string, bundleId: string): NewAnalyticsEvent[] {
  const out: NewAnalyticsEvent[] = [];
  const lines = content.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (!line) continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (err) {
      throw new ImportError(`line ${i + 1}: not valid JSON (${(err as Error).message})`);
    }
    const problem = eventProblem(value);
    if (problem) throw new ImportError(`line ${i + 1}: ${problem}`);
    out.push(normalizeEvent(bundleId, value as AnalyticsEventInput));
  }
  return out;
}

export interface ImportSummary {
  bundle_id: string;
  events: number;
  pageviews: number;
  engagements: number;
  visitors: number;
  sessions_added: number;
  sessions_removed: number;
  first_day: number | null;
  last_day: number | null;
}

/**
 * Applies validated events in time order, `chunkSize` events per transaction (each chunk is one
 * ingestEvents batch). Calls onProgress after every chunk.
 */
export async function importEvents(
  db: Database,
  bundleId: string,
  events: NewAnalyticsEvent[],
  options: { chunkSize?: number; onProgress?: (stored: number, total: number) => void } = {},
): Promise<ImportSummary> {
  const chunkSize = options.chunkSize ?? 2000;
  const sorted = [...events].sort((a, b) => a.ts - b.ts);
  let added = 0;
  let removed = 0;
  for (let i = 0; i < sorted.length; i += chunkSize) {
    const r = await ingestEvents(db, sorted.slice(i, i + chunkSize), { durable: true });
    added += r.sessions_added;
    removed += r.sessions_removed;
    options.onProgress?.(Math.min(i + chunkSize, sorted.length), sorted.length);
  }
  return summarize(bundleId, sorted, added, removed);
}

// ---------------------------------------------------------------------------------------------
// Bulk load: raw events in large inserts, then the bundle's sessions and rollups rebuilt from all
// of its raw events in one pass (for imports of many events, where per-batch repair is slow).
// ---------------------------------------------------------------------------------------------

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

function summarize(bundleId: string, events: readonly NewAnalyticsEvent[], added: number, removed: number): ImportSummary {
  let pageviews = 0;
  let first = Infinity;
  let last = -Infinity;
  const visitors = new Set<string>();
  for (const e of events) {
    if (e.type === 'pageview') pageviews++;
    if (e.ts < first) first = e.ts;
    if (e.ts > last) last = e.ts;
    visitors.add(e.visitor);
  }
  return {
    bundle_id: bundleId,
    events: events.length,
    pageviews,
    engagements: events.length - pageviews,
    visitors: visitors.size,
    sessions_added: added,
    sessions_removed: removed,
    first_day: events.length ? dayOf(first) : null,
    last_day: events.length ? dayOf(last) : null,
  };
}
