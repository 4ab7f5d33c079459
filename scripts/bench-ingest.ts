/**
 * Live ingestion throughput: feeds ingestEvents batches the way the collection endpoint flushes them
 * (a few hundred in-order events from many visitors, mostly continuing sessions of earlier batches)
 * and reports events/s. Run against a database that already holds traffic (e.g. after `npm run demo`):
 *
 *   DATABASE_URL=... npx tsx scripts/bench-ingest.ts [--events 50000] [--batch 500] [--workspace ws_...]
 *
 * The events are one generated day of traffic for the workspace's sites, on the day after the newest
 * stored event, sent in time order. Prints one JSON line.
 */
import { parseArgs } from 'node:util';
import { migrations } from '../app.ts';
import { openDatabase, type Database } from '../db/database.ts';
import { ingestEvents } from '../handlers/analytics/ingest.ts';
import { DAY_MS, normalizeEvent } from '../handlers/analytics/input.ts';
import type { NewAnalyticsEvent } from '../handlers/analytics/rows.ts';
import { demoTraffic } from './demo-traffic.ts';

export interface IngestBenchResult {
  events: number;
  batches: number;
  batch: number;
  ms: number;
  events_per_s: number;
  batch_ms_p50: number;
  batch_ms_p99: number;
}

/** A day of traffic over the sites (the first the busiest) in time order, the day after `afterTs`. */
export function liveTraffic(bundleIds: readonly string[], events: number, afterTs: number, seed = 7): NewAnalyticsEvent[] {
  const day = Math.floor(afterTs / DAY_MS) + 1;
  const sites = demoTraffic({ seed, sites: bundleIds.length, days: 1, totalEvents: events, endDay: day });
  return sites.flatMap((list, i) => list.map((e) => normalizeEvent(bundleIds[i]!, e))).sort((a, b) => a.ts - b.ts);
}

/** Sends the events through ingestEvents in batches, one after another, and times them. */
export async function benchIngest(db: Database, events: readonly NewAnalyticsEvent[], batch: number): Promise<IngestBenchResult> {
  const times: number[] = [];
  const started = performance.now();
  for (let i = 0; i < events.length; i += batch) {
    const t = performance.now();
    await ingestEvents(db, events.slice(i, i + batch));
    times.push(performance.now() - t);
  }
  const ms = performance.now() - started;
  times.sort((a, b) => a - b);
  return {
    events: events.length,
    batches: times.length,
    batch,
    ms: Math.round(ms),
    events_per_s: Math.round(events.length / (ms / 1000)),
    batch_ms_p50: Number(times[Math.floor(times.length / 2)]!.toFixed(1)),
    batch_ms_p99: Number(times[Math.min(times.length - 1, Math.floor(times.length * 0.99))]!.toFixed(1)),
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({ options: { events: { type: 'string', default: '50000' }, batch: { type: 'string', default: '500' }, workspace: { type: 'string' }, seed: { type: 'string', default: '7' } } });
  const db = openDatabase();
  await db.migrate(migrations);
  const workspace = values.workspace ?? (await db.sql.one<{ workspace_id: string }>(`SELECT b.workspace_id FROM analytics_daily d JOIN bundles b ON b.id = d.bundle_id ORDER BY d.pageviews DESC LIMIT 1`))?.workspace_id;
  if (!workspace) throw new Error('no analytics data: run `npm run demo` first, or pass --workspace');
  const sites = await db.sql.all<{ id: string; pv: number }>(
    `SELECT b.id, COALESCE(SUM(d.pageviews), 0) AS pv FROM bundles b LEFT JOIN analytics_daily d ON d.bundle_id = b.id WHERE b.workspace_id = ? GROUP BY b.id ORDER BY pv DESC, b.id`,
    [workspace],
  );
  const newest = Number((await db.sql.one<{ ts: number }>(`SELECT MAX(ts) AS ts FROM analytics_events`))?.ts ?? Date.now());
  const events = liveTraffic(sites.map((s) => s.id), Number(values.events), newest, Number(values.seed));
  const result = await benchIngest(db, events, Number(values.batch));
  console.log(JSON.stringify({ database: db.dialect, workspace, ...result }));
  await db.close();
}
