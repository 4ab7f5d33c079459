/**
 * One analytics event as collected (an import line or a tracker request): its shape and checks, the
 * fields derived from it (referrer host, source, campaign, unknowns) and the order of a visitor's
 * events, shared by ingestion, the bulk rebuild and the from-scratch figures.
 */
import { createAjv } from '../../server/ajv.cjs';
import { document } from '../../generated/document.ts';
import type { components } from '../../generated/openapi.ts';
import { textProblem } from '../../server/validation.ts';
import type { AnalyticsEventType, NewAnalyticsEvent } from './rows.ts';

export const SESSION_GAP_MS = 30 * 60_000;
export const DAY_MS = 86_400_000;
export const REALTIME_WINDOW_MS = 300_000;
export const DIRECT = 'Direct / None';
export const NO_CAMPAIGN = '(none)';
export const UNKNOWN = '(unknown)';

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
const ajv = createAjv();
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

export const cmpStr = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

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

