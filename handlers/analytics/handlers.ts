import { DEFAULT_PAGE_LIMIT, decodeCursor, encodeCursor, positionField } from '../../server/cursor.ts';
import { notFound } from '../../server/errors.ts';
import type { NamespaceHandlers } from '../../server/module.ts';
import type { OperationContext } from '../../server/operation.ts';
import type { DayFigures } from './figures.ts';
import { DAY_MS, REALTIME_WINDOW_MS } from './input.ts';
import { breakdownPage, findWorkspaceBundle, realtimeVisitors, siteDaily, workspaceDaily } from './queries.ts';
import type { DbAnalyticsDailyRow } from './rows.ts';

const MAX_SPAN_DAYS = 366;
const DEFAULT_SPAN_DAYS = 30;

/** Interval rules: omitted to = today, omitted from = to − 29, from > to becomes to, span clamped to 366 days. */
export function effectiveInterval(now: number, from: number | undefined, to: number | undefined): { from: number; to: number } {
  const end = to ?? Math.floor(now / DAY_MS);
  let start = from ?? Math.max(0, end - (DEFAULT_SPAN_DAYS - 1));
  if (start > end) start = end;
  if (end - start + 1 > MAX_SPAN_DAYS) start = end - (MAX_SPAN_DAYS - 1);
  return { from: start, to: end };
}

async function siteOf(ctx: OperationContext, bundleId: string): Promise<void> {
  const bundle = await findWorkspaceBundle(ctx.sql, ctx.workspaceId, bundleId);
  if (!bundle) throw notFound(`No site (bundle) ${bundleId} in this workspace.`);
}

type Totals = DayFigures;

const zero = (): Totals => ({ pageviews: 0, visitors: 0, sessions: 0, bounces: 0, duration_ms: 0, engaged_ms: 0 });

function add(t: Totals, r: DbAnalyticsDailyRow): void {
  t.pageviews += Number(r.pageviews);
  t.visitors += Number(r.visitors);
  t.sessions += Number(r.sessions);
  t.bounces += Number(r.bounces);
  t.duration_ms += Number(r.duration_ms);
  t.engaged_ms += Number(r.engaged_ms);
}

const ratio = (a: number, b: number) => (b === 0 ? 0 : Math.round(a / b));

function figures(t: Totals) {
  return {
    pageviews: t.pageviews,
    visitors: t.visitors,
    sessions: t.sessions,
    bounces: t.bounces,
    bounce_rate: t.sessions === 0 ? 0 : t.bounces / t.sessions,
    avg_visit_ms: ratio(t.duration_ms, t.sessions),
    avg_engagement_ms: ratio(t.engaged_ms, t.pageviews),
  };
}

/** Daily series (days with pageviews, visitors or sessions), summed over the rows given. */
function series(rows: DbAnalyticsDailyRow[]) {
  const byDay = new Map<number, { day: number; pageviews: number; visitors: number; sessions: number }>();
  for (const r of rows) {
    const day = Number(r.day);
    const item = byDay.get(day) ?? { day, pageviews: 0, visitors: 0, sessions: 0 };
    item.pageviews += Number(r.pageviews);
    item.visitors += Number(r.visitors);
    item.sessions += Number(r.sessions);
    byDay.set(day, item);
  }
  return [...byDay.values()].filter((s) => s.pageviews || s.visitors || s.sessions).sort((a, b) => a.day - b.day);
}

const active = (r: DbAnalyticsDailyRow) => Number(r.pageviews) > 0 || Number(r.visitors) > 0 || Number(r.sessions) > 0;

/** A breakdown cursor: the last row's position, and the interval of the first page (kept while paging). */
const CURSOR = { p: { type: 'integer', minimum: 0 }, v: 'string', from: positionField.day, to: positionField.day } as const;

export const analyticsQueryHandlers = {
  'analytics.GetSiteAnalyticsSummary': async (input, ctx) => {
    await siteOf(ctx, input.bundle_id);
    const { from, to } = effectiveInterval(ctx.now, input.from, input.to);
    const rows = (await siteDaily(ctx.sql, input.bundle_id, from, to)).filter(active);
    const totals = zero();
    for (const r of rows) add(totals, r);
    return { bundle_id: input.bundle_id, from, to, series: series(rows), ...figures(totals) };
  },

  'analytics.GetWorkspaceAnalyticsSummary': async (input, ctx) => {
    const { from, to } = effectiveInterval(ctx.now, input.from, input.to);
    const rows = (await workspaceDaily(ctx.sql, ctx.workspaceId, from, to)).filter(active);
    const totals = zero();
    const perBundle = new Map<string, Totals>();
    for (const r of rows) {
      add(totals, r);
      let t = perBundle.get(r.bundle_id);
      if (!t) perBundle.set(r.bundle_id, (t = zero()));
      add(t, r);
    }
    const bundles = [...perBundle.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([bundle_id, t]) => ({ bundle_id, ...figures(t) }));
    return { from, to, series: series(rows), ...figures(totals), bundles };
  },

  'analytics.GetSiteAnalyticsBreakdown': async (input, ctx) => {
    await siteOf(ctx, input.bundle_id);
    const limit = input.limit ?? DEFAULT_PAGE_LIMIT;
    const filters = [input.bundle_id, input.dimension, input.from ?? null, input.to ?? null];
    const after = input.cursor
      ? await decodeCursor(ctx, input.cursor, CURSOR, filters, 'cursor belongs to a breakdown with other filters; send the same bundle_id, dimension, from and to.')
      : null;
    const { from, to } = after ?? effectiveInterval(ctx.now, input.from, input.to);
    const rows = await breakdownPage(ctx.sql, {
      bundleId: input.bundle_id,
      dimension: input.dimension,
      from,
      to,
      after: after ? { pageviews: after.p, value: after.v } : null,
      limit: limit + 1,
    });
    const page = rows.slice(0, limit).map((r) => ({
      value: r.value,
      pageviews: Number(r.pv),
      visitors: Number(r.visitors),
      avg_engagement_ms: ratio(Number(r.engaged_ms), Number(r.views)),
    }));
    const last = page[page.length - 1];
    const hasMore = rows.length > limit && last !== undefined;
    const nextCursor = hasMore ? await encodeCursor(ctx, CURSOR, { p: last.pageviews, v: last.value, from, to }, filters) : null;
    return { bundle_id: input.bundle_id, dimension: input.dimension, from, to, rows: page, has_more: hasMore, next_cursor: nextCursor };
  },

  'analytics.GetSiteAnalyticsRealtime': async (input, ctx) => {
    await siteOf(ctx, input.bundle_id);
    const visitors = await realtimeVisitors(ctx.sql, input.bundle_id, ctx.now - REALTIME_WINDOW_MS, ctx.now);
    return { bundle_id: input.bundle_id, visitors, window_ms: REALTIME_WINDOW_MS };
  },
} satisfies Partial<NamespaceHandlers<'analytics'>>;
