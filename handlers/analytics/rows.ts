/** The analytics module's rows (its migrations are in ./migrations). */
export type AnalyticsEventType = 'pageview' | 'engagement';

/** A stored analytics event (derived fields already resolved at ingestion). */
export interface DbAnalyticsEventRow {
  id: number;
  bundle_id: string;
  ts: number;
  visitor: string;
  type: AnalyticsEventType;
  path: string;
  referrer_host: string | null;
  source: string;
  campaign: string;
  country: string;
  device: string;
  browser: string;
  os: string;
  engaged_ms: number;
}

export interface DbAnalyticsSessionRow {
  bundle_id: string;
  visitor: string;
  start_ts: number;
  end_ts: number;
  /** UTC day of the first pageview. */
  day: number;
  pageviews: number;
  entry_page: string;
  engaged_ms: number;
}

export interface DbAnalyticsDailyRow {
  bundle_id: string;
  day: number;
  pageviews: number;
  visitors: number;
  sessions: number;
  bounces: number;
  duration_ms: number;
  engaged_ms: number;
}

export interface DbAnalyticsDimDailyRow {
  bundle_id: string;
  day: number;
  dimension: string;
  value: string;
  pageviews: number;
  visitors: number;
  engaged_ms: number;
  views: number;
}

/** An event before it is stored (no id yet). */
export type NewAnalyticsEvent = Omit<DbAnalyticsEventRow, 'id'>;
