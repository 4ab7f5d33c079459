/**
 * Deterministic demo traffic: several sites, N days, a given number of events, shaped like real web
 * traffic (daily and weekly seasonality with growth, returning visitors, sessions of 1–8 pageviews
 * less than 30 minutes apart, some across midnight, about 45 % bounces, engagement pings, a long tail
 * of pages, search / social / news referrers, utm campaigns, countries, devices consistent per
 * visitor). The same seed gives the same events. Used by `npm run demo` and the analytics benchmark.
 */
import { type AnalyticsEventInput, DAY_MS } from '../handlers/analytics/input.ts';

export interface DemoTrafficOptions {
  seed?: number;
  sites?: number;
  days?: number;
  totalEvents?: number;
  /** Events happen before this instant (Unix ms); the last day is the UTC day holding it. Default: now. */
  end?: number;
  /** Instead of `end`: the last UTC day (day number), filled whole. */
  endDay?: number;
}

/** Share of the events per site: the first site is the busiest (about 40 %). */
export function siteShares(sites: number): number[] {
  const raw = Array.from({ length: sites }, (_, i) => (i === 0 ? 0.4 : 0.6 * Math.pow(0.62, i - 1)));
  const rest = raw.slice(1).reduce((a, b) => a + b, 0);
  return sites === 1 ? [1] : raw.map((w, i) => (i === 0 ? w : (w / rest) * 0.6));
}

/** mulberry32: small, fast, good enough for synthetic data. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Picks from weighted items with a precomputed cumulative table. */
function weighted<T>(items: ReadonlyArray<readonly [T, number]>): (r: number) => T {
  const cum: number[] = [];
  let sum = 0;
  for (const [, w] of items) cum.push((sum += w));
  return (r) => {
    const x = r * sum;
    let lo = 0;
    let hi = cum.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cum[mid]! > x) hi = mid;
      else lo = mid + 1;
    }
    return items[lo]![0];
  };
}

const COUNTRIES = weighted<string>([
  ['US', 30], ['DE', 10], ['GB', 9], ['IN', 7], ['FR', 5], ['CA', 5], ['SE', 4], ['NL', 4], ['BR', 4], ['JP', 3], ['ES', 3], ['AU', 3],
  ['IT', 2], ['PL', 2], ['CH', 1.5], ['NO', 1], ['DK', 1], ['FI', 1], ['AT', 1], ['IE', 1], ['MX', 1], ['KR', 1], ['SG', 0.8], ['ZA', 0.7],
]);

interface Profile { country: string; device: string; browser: string; os: string }

function profile(r: () => number): Profile {
  const country = COUNTRIES(r());
  const kind = r();
  if (kind < 0.55) {
    const os = weighted<string>([['Windows', 55], ['macOS', 33], ['Linux', 12]])(r());
    const browser = os === 'macOS' ? weighted<string>([['Safari', 40], ['Chrome', 45], ['Firefox', 10], ['Edge', 5]])(r()) : weighted<string>([['Chrome', 65], ['Firefox', 15], ['Edge', 20]])(r());
    return { country, device: 'desktop', browser: os === 'Linux' && browser === 'Edge' ? 'Firefox' : browser, os };
  }
  if (kind < 0.95) {
    const os = r() < 0.55 ? 'Android' : 'iOS';
    const browser = os === 'iOS' ? (r() < 0.85 ? 'Mobile Safari' : 'Chrome') : r() < 0.8 ? 'Chrome' : 'Samsung Internet';
    return { country, device: 'mobile', browser, os };
  }
  const os = r() < 0.6 ? 'iOS' : 'Android';
  return { country, device: 'tablet', browser: os === 'iOS' ? 'Mobile Safari' : 'Chrome', os };
}

const REFERRERS = weighted<string | undefined>([
  [undefined, 40], ['https://www.google.com/', 28], ['https://www.bing.com/', 3], ['https://duckduckgo.com/', 3], ['https://t.co/', 4], ['https://x.com/', 2],
  ['https://news.ycombinator.com/', 4], ['https://www.reddit.com/', 4], ['https://www.linkedin.com/', 2], ['https://techcrunch.com/', 1], ['https://www.theguardian.com/', 1],
  ['https://github.com/', 3], ['https://dev.to/', 1], ['https://www.youtube.com/', 1], ['https://stackoverflow.com/', 1], ['https://lobste.rs/', 0.5],
]);
const CAMPAIGNS = weighted<readonly [string, string]>([
  [['newsletter', 'weekly-digest'], 5], [['newsletter', 'black-friday'], 2], [['twitter', 'launch-week'], 2], [['linkedin', 'hiring'], 1], [['producthunt', 'launch'], 1], [['partner', 'webinar-nov'], 1],
]);

const SECTIONS = ['blog', 'docs', 'guides', 'changelog', 'customers', 'integrations'] as const;
const WORDS = ['getting-started', 'pricing-explained', 'api', 'webhooks', 'performance', 'privacy', 'security', 'migration', 'release', 'team', 'faq', 'analytics', 'sessions', 'export', 'sso', 'billing', 'limits', 'roadmap', 'design', 'search'];

/** A few hundred pages with Zipf-like popularity; the first ones are the big landing pages. */
function pages(r: () => number, count: number): (x: number) => string {
  const list = ['/', '/pricing', '/features', '/about', '/contact', '/signup', '/login', '/blog', '/docs'];
  while (list.length < count) {
    const section = SECTIONS[Math.floor(r() * SECTIONS.length)]!;
    const p = `/${section}/${WORDS[Math.floor(r() * WORDS.length)]}-${list.length}`;
    list.push(p);
  }
  return weighted(list.map((p, i) => [p, 1 / Math.pow(i + 1, 1.05)] as const));
}

/** Hour-of-day weights (UTC): quiet at night, peak in the afternoon. */
const HOURS = weighted(Array.from({ length: 24 }, (_, h) => [h, 0.35 + Math.pow(Math.sin(((h - 5) / 24) * Math.PI), 2) * 1.6] as const));

const PAGEVIEWS = weighted<number>([[1, 45], [2, 20], [3, 13], [4, 9], [5, 6], [6, 3.5], [7, 2], [8, 1.5]]);

/**
 * Events per site (index 0 the busiest), `totalEvents` in all, over the `days` UTC days ending with
 * the day of `end`. Each site's array is in time order.
 */
export function demoTraffic(options: DemoTrafficOptions = {}): AnalyticsEventInput[][] {
  const seed = options.seed ?? 20261122;
  const sites = options.sites ?? 5;
  const days = options.days ?? 90;
  const total = options.totalEvents ?? 1_000_000;
  const end = options.end ?? (options.endDay !== undefined ? (options.endDay + 1) * DAY_MS : Date.now());
  const lastDay = Math.floor((end - 1) / DAY_MS);
  const firstDay = lastDay - days + 1;
  const shares = siteShares(sites);
  const budgets = shares.map((s) => Math.floor(total * s));
  budgets[0]! += total - budgets.reduce((a, b) => a + b, 0);
  return budgets.map((budget, site) => siteTraffic(seed * 31 + site, site, budget, firstDay, lastDay, end));
}

function siteTraffic(seed: number, site: number, budget: number, firstDay: number, lastDay: number, end: number): AnalyticsEventInput[] {
  const r = prng(seed);
  const page = pages(r, 250 + Math.floor(r() * 200));
  const weekendDip = 0.55 + r() * 0.3;
  const growth = 0.3 + r() * 0.6;
  // Day weights: growth, weekly rhythm, noise, a spike or two; the last day only up to `end`.
  const weights: number[] = [];
  for (let d = firstDay; d <= lastDay; d++) {
    const t = (d - firstDay) / Math.max(1, lastDay - firstDay);
    const weekday = (d + 4) % 7; // 0 = Sunday
    let w = (1 + growth * t) * (weekday === 0 || weekday === 6 ? weekendDip : 1) * (0.85 + r() * 0.3);
    if (r() < 0.02) w *= 2 + r() * 2;
    if (d === lastDay) w *= Math.max(0.001, (end - d * DAY_MS) / DAY_MS);
    weights.push(w);
  }
  const sum = weights.reduce((a, b) => a + b, 0);
  const events: AnalyticsEventInput[] = [];
  const visitors: Array<{ id: string; p: Profile }> = [];
  let carry = 0;
  for (let d = firstDay; d <= lastDay; d++) {
    const exact = (budget * weights[d - firstDay]!) / sum + carry;
    let dayBudget = d === lastDay ? budget - events.length : Math.floor(exact);
    carry = exact - dayBudget;
    const dayStart = d * DAY_MS;
    const limit = d === lastDay ? end - dayStart : DAY_MS;
    const day: AnalyticsEventInput[] = [];
    while (dayBudget > 0) {
      const start = dayStart + Math.min(limit - 1, Math.floor((HOURS(r()) + r()) * 3_600_000 * (limit / DAY_MS)));
      const returning = visitors.length > 50 && r() < 0.35;
      const v = returning ? visitors[visitors.length - 1 - Math.floor(Math.pow(r(), 2) * visitors.length)]! : { id: `s${site}v${visitors.length.toString(36)}${Math.floor(r() * 1e6).toString(36)}`, p: profile(r) };
      if (!returning) visitors.push(v);
      const session = sessionEvents(r, page, v.id, v.p, start, end);
      const take = session.slice(0, dayBudget);
      day.push(...take);
      dayBudget -= take.length;
    }
    for (const e of day) events.push(e);
  }
  return events.sort((a, b) => a.ts - b.ts);
}

function sessionEvents(r: () => number, page: (x: number) => string, visitor: string, p: Profile, start: number, end: number): AnalyticsEventInput[] {
  const referrer = REFERRERS(r());
  const campaign = r() < 0.1 ? CAMPAIGNS(r()) : null;
  const common = {
    visitor,
    ...(referrer ? { referrer } : {}),
    ...(campaign ? { utm_source: campaign[0], utm_campaign: campaign[1] } : {}),
    country: p.country,
    device: p.device,
    browser: p.browser,
    os: p.os,
  };
  const views = PAGEVIEWS(r());
  const out: AnalyticsEventInput[] = [];
  let ts = start;
  let path = page(Math.pow(r(), 1.6)); // landings lean to the big pages
  for (let i = 0; i < views; i++) {
    out.push({ type: 'pageview', ts, path, ...common });
    // Time on the page: 5 s to ~12 min, always < 30 min before the next event.
    const stay = Math.floor(5_000 + Math.pow(r(), 2.2) * 700_000);
    if (r() < 0.8) out.push({ type: 'engagement', ts: ts + stay, path, engaged_ms: Math.floor(stay * (0.5 + r() * 0.5)), ...common });
    ts += stay + Math.floor(r() * 20_000) + 1;
    path = page(r());
  }
  // Sessions may run past midnight; nothing happens after `end` (the demo's "now").
  return out.filter((e) => e.ts < end);
}
