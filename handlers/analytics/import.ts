/** History import (NDJSON lines), stored in incremental batches through ingestEvents. */
import type { Database } from '../../db/database.ts';
import { ingestEvents } from './ingest.ts';
import { type AnalyticsEventInput, dayOf, eventProblem, normalizeEvent } from './input.ts';
import type { NewAnalyticsEvent } from './rows.ts';

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

/** What an import stored (the CLI prints it). */
export function summarize(bundleId: string, events: readonly NewAnalyticsEvent[], added: number, removed: number): ImportSummary {
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
