/**
 * From-scratch recomputation of a site's figures (tests, the benchmark's baseline) and the
 * maintained sessions and rollups in the same shape.
 */
import type { Sql } from '../../db/database.ts';
import { compareEvents, DAY_MS, dayOf, dimensionValue, EVENT_DIMENSIONS, SESSION_GAP_MS } from './input.ts';
import { allDaily, allDimDaily, allEvents, allSessions, queryTimeEventDays, queryTimeSessions } from './queries.ts';
import type { DbAnalyticsDailyRow, NewAnalyticsEvent } from './rows.ts';
import { sessionize, sessionKey, toEvent } from './sessions.ts';

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
