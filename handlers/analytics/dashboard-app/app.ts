/**
 * The analytics dashboard in the browser (bundled by server/dashboard.ts with esbuild). It reads the
 * analytics and workspace operations through the generated client with no API key: the browser sends
 * the member's `wso_session` cookie. Every value shown comes from visitors, so text only ever goes in
 * through `textContent` (never HTML).
 */
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import './app.css';
import { createClient, type ResponseBody } from '../../../generated/client.ts';

type Summary = ResponseBody<'analytics.GetSiteAnalyticsSummary'>;
type Breakdown = ResponseBody<'analytics.GetSiteAnalyticsBreakdown'>;
type Bundle = ResponseBody<'workspace.ListBundles'>['items'][number];
type Dimension = Breakdown['dimension'];

const PERIODS = [7, 30, 90] as const;
const TOP_ROWS = 10;
const REALTIME_EVERY_MS = 30_000;
const DAY_S = 86_400;
/** The API's interval rules (GetSiteAnalyticsSummary): omitted from = to − 29, a span of at most 366 days. */
const DEFAULT_SPAN_DAYS = 30;
const MAX_SPAN_DAYS = 366;
/** The document's UtcDay bounds (9999-12-31). */
const MAX_DAY = 2_932_896;

const BREAKDOWNS: ReadonlyArray<{ dimension: Dimension; title: string; column: string; count: string }> = [
  { dimension: 'page', title: 'Top pages', column: 'Page', count: 'Pageviews' },
  { dimension: 'entry_page', title: 'Entry pages', column: 'Page', count: 'Sessions' },
  { dimension: 'source', title: 'Sources', column: 'Source', count: 'Pageviews' },
  { dimension: 'referrer', title: 'Referrers', column: 'Referrer', count: 'Pageviews' },
  { dimension: 'campaign', title: 'Campaigns', column: 'Campaign', count: 'Pageviews' },
  { dimension: 'country', title: 'Countries', column: 'Country', count: 'Pageviews' },
  { dimension: 'device', title: 'Devices', column: 'Device', count: 'Pageviews' },
  { dimension: 'browser', title: 'Browsers', column: 'Browser', count: 'Pageviews' },
  { dimension: 'os', title: 'Operating systems', column: 'System', count: 'Pageviews' },
];

const api = createClient({ baseUrl: `${location.origin}/v1` });
const numberFormat = new Intl.NumberFormat('en-US');

/** Builds an element; children that are strings become text nodes (never parsed as HTML). */
function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string> = {}, ...children: Array<Node | string>): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, value);
  for (const child of children) el.append(child);
  return el;
}

export const formatCount = (n: number) => numberFormat.format(n);
export const formatPercent = (rate: number) => `${Math.round(rate * 100)}%`;

/** 95000 → "1m 35s"; 3_725_000 → "1h 2m"; under a second → "0s". */
export function formatDuration(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

const dayLabel = (day: number) => new Date(day * DAY_S * 1000).toISOString().slice(0, 10);
/** "2026-11-16" → its UTC day index; null for anything else (also impossible dates such as 2026-02-30). */
export function parseDay(text: string | null | undefined): number | null {
  if (!text || !/^\d{4}-\d{2}-\d{2}$/.test(text)) return null;
  const ms = Date.parse(`${text}T00:00:00Z`);
  if (Number.isNaN(ms)) return null;
  const day = ms / (DAY_S * 1000);
  return dayLabel(day) === text && day >= 0 && day <= MAX_DAY ? day : null;
}

/**
 * A custom range under the API's rules, so that what the page shows, the URL and the service agree:
 * omitted to = today, omitted from = to − 29, from after to becomes to, and a span over 366 days keeps
 * its end and moves from to to − 365 (inclusive UTC days). The notes say what was changed.
 */
export function clampRange(from: number | null, to: number | null, today: number): { from: number; to: number; notes: string[] } {
  const notes: string[] = [];
  const end = to ?? today;
  let start = from ?? Math.max(0, end - (DEFAULT_SPAN_DAYS - 1));
  if (start > end) {
    notes.push(`The start date ${dayLabel(start)} was after the end date, so the range is ${dayLabel(end)} only.`);
    start = end;
  }
  if (end - start + 1 > MAX_SPAN_DAYS) {
    notes.push(`A range covers at most ${MAX_SPAN_DAYS} days, so it starts on ${dayLabel(end - (MAX_SPAN_DAYS - 1))} instead of ${dayLabel(start)}.`);
    start = end - (MAX_SPAN_DAYS - 1);
  }
  return { from: start, to: end, notes };
}

const regionNames = new Intl.DisplayNames(['en'], { type: 'region', fallback: 'code' });
/** "SE" → "Sweden"; null for a value that is not a known ISO 3166 code ("(unknown)", "AA", "ZZ"). */
export function countryName(code: string): string | null {
  if (!/^[A-Z]{2}$/.test(code)) return null;
  try {
    const name = regionNames.of(code);
    return name && name !== code && name !== 'Unknown Region' ? name : null;
  } catch {
    return null;
  }
}

export type Tone = 'good' | 'bad' | 'neutral';
export interface Change {
  /** What the tile shows: "↑ 50%", "↓ 25%", "↑ 42 pp", "0%", "new" or "—". */
  text: string;
  direction: 'up' | 'down' | 'flat' | 'new' | 'none';
  tone: Tone;
  /** The same in words, for screen readers and the tooltip. */
  words: string;
}

/**
 * The change of one figure against the previous period, never Infinity or NaN. A count is its own
 * base; a rate or an average has one (sessions or pageviews) and means nothing without it. Nothing
 * to compare with (a previous base or value of 0) is "new" when this period has some, else "—"; a rate
 * or average of a period without its base is "—" too (the API reports 0 there, which is no fall).
 * Counts and averages change in % of the previous value, the bounce rate in percentage points of the
 * shown (rounded) rates. `lowerIsBetter` colours a fall as good; the arrow shows the real direction.
 */
export function change(
  kind: 'relative' | 'points',
  current: number,
  previous: number,
  options: { base?: { now: number; prev: number }; lowerIsBetter?: boolean } = {},
): Change {
  const { base = { now: current, prev: previous }, lowerIsBetter = false } = options;
  const fresh: Change = { text: 'new', direction: 'new', tone: 'neutral', words: 'nothing to compare with in the previous period' };
  const none: Change = { text: '—', direction: 'none', tone: 'neutral', words: 'nothing to compare' };
  if (base.prev === 0) return base.now > 0 ? fresh : none;
  if (base.now === 0 && options.base) return none;
  if (kind === 'relative' && previous === 0) return current > 0 ? fresh : none;
  const delta = kind === 'points' ? Math.round(current * 100) - Math.round(previous * 100) : Math.sign(current - previous) * Math.round((Math.abs(current - previous) / previous) * 100);
  const unit = kind === 'points' ? ' pp' : '%';
  const unitWords = kind === 'points' ? ' percentage points' : '%';
  if (delta === 0) return { text: `0${unit}`, direction: 'flat', tone: 'neutral', words: 'no change from the previous period' };
  const up = delta > 0;
  return {
    text: `${up ? '↑' : '↓'} ${Math.abs(delta)}${unit}`,
    direction: up ? 'up' : 'down',
    tone: up !== lowerIsBetter ? 'good' : 'bad',
    words: `${up ? 'up' : 'down'} ${Math.abs(delta)}${unitWords} from the previous period${lowerIsBetter ? ' (lower is better)' : ''}`,
  };
}
const tickFormat = new Intl.DateTimeFormat('en', { month: 'short', day: 'numeric', timeZone: 'UTC' });
/** Whole-number tick steps of the count axis: 1, 2, 5, 10, 20, 50, ... */
const COUNT_STEPS = Array.from({ length: 30 }, (_, i) => [1, 2, 5][i % 3]! * 10 ** Math.floor(i / 3));
/** A chart tick: the UTC day as "Nov 16". */
const tickLabel = (day: number) => tickFormat.format(new Date(day * DAY_S * 1000));

class ApiProblem extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** The 200 body of a client call, or an ApiProblem carrying the service's message. */
async function ok<T>(call: Promise<{ data?: T; error?: { message: string }; response: Response }>): Promise<T> {
  const { data, error, response } = await call;
  if (data === undefined) throw new ApiProblem(response.status, error?.message ?? `HTTP ${response.status}`);
  return data;
}

type SortKey = 'visitors' | 'pageviews';
type SortOrder = 'descending' | 'ascending';

const state = {
  site: '',
  /** A preset (7, 30 or 90 days ending today), or null when a custom range is shown. */
  days: 30 as number | null,
  /** The custom range as asked for (null = the API's default for that end), clamped by refresh(). */
  custom: null as { from: number | null; to: number | null } | null,
  /** Why the custom range shown differs from the one asked for (shown until the next change). */
  rangeNotes: [] as string[],
  /** Each breakdown's order; the service's order (pageviews, descending) until a header is clicked. */
  sort: new Map<Dimension, { key: SortKey; order: SortOrder }>(),
  /** The service's today (UTC day index), learnt from the first summary: the browser's clock may differ. */
  today: null as number | null,
  chart: null as uPlot | null,
  realtimeTimer: 0,
  generation: 0,
};

const root = document.getElementById('app')!;

const siteSelect = h('select', { id: 'site', 'aria-label': 'Site' });
const periodButtons = h('div', { class: 'periods', role: 'group', 'aria-label': 'Period' });
const realtime = h('div', { id: 'realtime', class: 'realtime', title: 'Distinct visitors in the last 5 minutes' });
const banner = h('div', { id: 'banner', class: 'banner', role: 'alert', hidden: '' });
const tiles = h('section', { id: 'tiles', class: 'tiles' });
const chartBox = h('section', { id: 'chart', class: 'card chart' });
const grid = h('section', { id: 'breakdowns', class: 'breakdowns' });
const range = h('span', { id: 'range', class: 'range' });
const previousRange = h('span', { id: 'previous', class: 'range' });
const fromInput = h('input', { type: 'date', id: 'from', name: 'from', required: '', min: '1970-01-01', max: '9999-12-31' });
const toInput = h('input', { type: 'date', id: 'to', name: 'to', required: '', min: '1970-01-01', max: '9999-12-31' });
const customForm = h(
  'form',
  { id: 'custom', class: 'custom', 'aria-label': 'Custom range (UTC days)' },
  h('label', { class: 'field' }, h('span', {}, 'From'), fromInput),
  h('label', { class: 'field' }, h('span', {}, 'To'), toInput),
  h('button', { type: 'submit', id: 'apply' }, 'Apply'),
);
const rangeNote = h('div', { id: 'range-note', class: 'note', role: 'status', hidden: '' });

function showProblem(err: unknown): void {
  const message =
    err instanceof ApiProblem && err.status === 401
      ? 'Your sign-in session has ended. Ask an operator for a new sign-in link (npm run admin -- signin-link).'
      : err instanceof Error
        ? err.message
        : String(err);
  banner.textContent = message;
  banner.hidden = false;
}

function layout(): void {
  for (const days of PERIODS) {
    const b = h('button', { type: 'button', 'data-days': String(days) }, `${days} days`);
    b.addEventListener('click', () => {
      state.days = days;
      state.custom = null;
      state.rangeNotes = [];
      void refresh();
    });
    periodButtons.append(b);
  }
  customForm.addEventListener('submit', (event) => {
    event.preventDefault();
    state.days = null;
    state.custom = { from: parseDay(fromInput.value), to: parseDay(toInput.value) };
    state.rangeNotes = [];
    void refresh();
  });
  siteSelect.addEventListener('change', () => {
    state.site = siteSelect.value;
    void refresh();
  });
  // The navigation bar above (the page frame) names the member and signs out.
  root.replaceChildren(
    h('div', { class: 'top' }, h('div', { class: 'title' }, h('h1', {}, 'Analytics'), range, previousRange)),
    h('div', { class: 'controls' }, siteSelect, periodButtons, customForm, realtime),
    banner,
    rangeNote,
    tiles,
    chartBox,
    grid,
  );
}

function renderTiles(s: Summary, p: Summary | null): void {
  const none = { pageviews: 0, visitors: 0, sessions: 0, bounce_rate: 0, avg_visit_ms: 0, avg_engagement_ms: 0 };
  const q = p ?? none;
  const sessions = { now: s.sessions, prev: q.sessions };
  const items: Array<[string, string, string, number, Change]> = [
    ['visitors', 'Visitors', formatCount(s.visitors), s.visitors, change('relative', s.visitors, q.visitors)],
    ['pageviews', 'Pageviews', formatCount(s.pageviews), s.pageviews, change('relative', s.pageviews, q.pageviews)],
    ['sessions', 'Sessions', formatCount(s.sessions), s.sessions, change('relative', s.sessions, q.sessions)],
    ['bounce_rate', 'Bounce rate', formatPercent(s.bounce_rate), s.bounce_rate, change('points', s.bounce_rate, q.bounce_rate, { base: sessions, lowerIsBetter: true })],
    ['avg_visit', 'Avg. visit', formatDuration(s.avg_visit_ms), s.avg_visit_ms, change('relative', s.avg_visit_ms, q.avg_visit_ms, { base: sessions })],
    ['avg_engagement', 'Avg. engagement', formatDuration(s.avg_engagement_ms), s.avg_engagement_ms, change('relative', s.avg_engagement_ms, q.avg_engagement_ms, { base: { now: s.pageviews, prev: q.pageviews } })],
  ];
  const before: Record<string, string> = {
    visitors: formatCount(q.visitors),
    pageviews: formatCount(q.pageviews),
    sessions: formatCount(q.sessions),
    bounce_rate: formatPercent(q.bounce_rate),
    avg_visit: formatDuration(q.avg_visit_ms),
    avg_engagement: formatDuration(q.avg_engagement_ms),
  };
  tiles.replaceChildren(
    ...items.map(([key, label, text, raw, c]) => {
      const title = p ? `${label}: ${text}, ${c.words}; previous period ${before[key]} (${dayLabel(p.from)} – ${dayLabel(p.to)})` : `${label}: ${text}; no previous period to compare with`;
      return h(
        'div',
        { class: 'tile', 'data-tile': key, title },
        h('div', { class: 'label' }, label),
        h('div', { class: 'value', 'data-value': String(raw) }, text),
        h('div', { class: `change ${c.direction} ${c.tone}`, 'data-direction': c.direction, 'data-tone': c.tone }, h('span', { class: 'delta', 'aria-hidden': 'true' }, c.text), h('span', { class: 'sr-only' }, c.words)),
      );
    }),
  );
  range.textContent = `${dayLabel(s.from)} – ${dayLabel(s.to)} (UTC)`;
  previousRange.textContent = p ? `vs ${dayLabel(p.from)} – ${dayLabel(p.to)}` : '';
}

function renderChart(s: Summary): void {
  const byDay = new Map(s.series.map((d) => [d.day, d]));
  const xs: number[] = [];
  const visitors: number[] = [];
  const pageviews: number[] = [];
  for (let day = s.from; day <= s.to; day++) {
    const d = byDay.get(day);
    xs.push(day * DAY_S);
    visitors.push(d?.visitors ?? 0);
    pageviews.push(d?.pageviews ?? 0);
  }
  state.chart?.destroy();
  chartBox.replaceChildren(h('h2', {}, 'Visitors and pageviews per day'));
  const width = Math.max(300, chartBox.clientWidth - 32);
  state.chart = new uPlot(
    {
      width,
      height: 260,
      tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
      cursor: { drag: { x: false, y: false } },
      scales: { y: { range: (_u, _min, max) => [0, Math.max(1, max * 1.1)] } },
      axes: [
        {
          stroke: '#667085',
          grid: { stroke: '#eef0f3' },
          // One point per UTC day: ticks fall on whole days (1, 2, 7, 14 or 30 apart), labelled by date.
          incrs: [DAY_S, 2 * DAY_S, 7 * DAY_S, 14 * DAY_S, 30 * DAY_S],
          values: (_u, splits) => {
            const labels = splits.map((v) => tickLabel(Math.round(v / DAY_S)));
            chartBox.dataset.ticks = labels.join('|');
            return labels;
          },
        },
        // Counts: whole-number ticks only.
        { stroke: '#667085', grid: { stroke: '#eef0f3' }, incrs: COUNT_STEPS, values: (_u, splits) => splits.map((v) => formatCount(v)) },
      ],
      series: [
        { label: 'Day', value: (_u, v) => (v == null ? '' : dayLabel(Math.round(v / DAY_S))) },
        { label: 'Visitors', stroke: '#4f46e5', fill: 'rgba(79,70,229,0.08)', width: 2, points: { show: xs.length <= 31 } },
        { label: 'Pageviews', stroke: '#0ea5e9', width: 2, points: { show: xs.length <= 31 } },
      ],
    },
    [xs, visitors, pageviews],
    chartBox,
  );
  // A one-day range (a custom range can be one): uPlot would put the day at the left edge of a day-wide
  // axis with no tick; half a day either side centres it under its date.
  if (xs.length === 1) state.chart.setScale('x', { min: xs[0]! - DAY_S / 2, max: xs[0]! + DAY_S / 2 });
}

/** The label cell's content: the value as text; for a country its English name beside the ISO code. */
function labelOf(dimension: Dimension, value: string): { nodes: Array<Node | string>; title: string } {
  const name = dimension === 'country' ? countryName(value) : null;
  if (!name) return { nodes: [value], title: value };
  return { nodes: [h('span', { class: 'code' }, value), ' ', h('span', { class: 'country' }, name)], title: `${name} (${value})` };
}

/** Rows in the chosen order; ties keep the service's order (pageviews descending, then value). */
export function sortRows<R extends { visitors: number; pageviews: number }>(rows: readonly R[], key: SortKey, order: SortOrder): R[] {
  const sign = order === 'descending' ? -1 : 1;
  return rows
    .map((row, i) => ({ row, i }))
    .sort((x, y) => sign * (x.row[key] - y.row[key]) || x.i - y.i)
    .map(({ row }) => row);
}

function renderBreakdown(spec: (typeof BREAKDOWNS)[number], b: Breakdown | Error): HTMLElement {
  const card = h('div', { class: 'card breakdown', 'data-breakdown': spec.dimension }, h('h2', {}, spec.title));
  if (b instanceof Error) {
    card.append(h('p', { class: 'empty' }, `Could not load: ${b.message}`));
    return card;
  }
  if (!b.rows.length) {
    card.append(h('p', { class: 'empty' }, 'No data for this period.'));
    return card;
  }
  const body = h('tbody');
  // Sortable columns (the WAI-ARIA sortable table pattern): a button in each count header, aria-sort
  // on the header that orders the rows. The buttons stay in place, so focus stays on the one pressed.
  const columns: Array<{ key: SortKey; th: HTMLTableCellElement; arrow: HTMLSpanElement }> = [];
  const header = (key: SortKey, text: string) => {
    const arrow = h('span', { class: 'arrow', 'aria-hidden': 'true' });
    const button = h('button', { type: 'button', class: 'sort', 'data-sort': key }, text, arrow);
    const th = h('th', { class: 'num', scope: 'col' }, button);
    button.addEventListener('click', () => {
      const now = state.sort.get(spec.dimension) ?? { key: 'pageviews', order: 'descending' };
      state.sort.set(spec.dimension, { key, order: now.key === key && now.order === 'descending' ? 'ascending' : 'descending' });
      fill();
    });
    columns.push({ key, th, arrow });
    return th;
  };
  const fill = () => {
    const { key, order } = state.sort.get(spec.dimension) ?? { key: 'pageviews', order: 'descending' };
    for (const c of columns) {
      if (c.key === key) c.th.setAttribute('aria-sort', order);
      else c.th.removeAttribute('aria-sort');
      c.arrow.textContent = c.key === key ? (order === 'descending' ? ' ↓' : ' ↑') : '';
    }
    const top = Math.max(...b.rows.map((r) => r[key]), 1);
    body.replaceChildren(
      ...sortRows(b.rows, key, order).map((row) => {
        const bar = h('span', { class: 'bar' });
        bar.style.width = `${(row[key] / top) * 100}%`;
        const { nodes, title } = labelOf(spec.dimension, row.value);
        const label = h('td', { class: 'name', title }, bar, h('span', { class: 'text' }, ...nodes));
        return h('tr', {}, label, h('td', { class: 'num' }, formatCount(row.visitors)), h('td', { class: 'num' }, formatCount(row.pageviews)));
      }),
    );
  };
  const thead = h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, spec.column), header('visitors', 'Visitors'), header('pageviews', spec.count)));
  fill();
  card.append(h('table', {}, h('caption', { class: 'sr-only' }, `${spec.title}, top ${TOP_ROWS} by ${spec.count.toLowerCase()}; the column headers sort these rows`), thead, body));
  return card;
}

async function refreshRealtime(): Promise<void> {
  const site = state.site;
  try {
    const r = await ok(api.analytics.GetSiteAnalyticsRealtime({ bundle_id: site }));
    if (site !== state.site) return;
    realtime.replaceChildren(h('span', { class: 'dot' }), h('strong', { 'data-value': String(r.visitors) }, formatCount(r.visitors)), ` ${r.visitors === 1 ? 'visitor' : 'visitors'} now`);
  } catch (err) {
    showProblem(err);
  }
}

/** The interval to show: a preset ending today, or the custom range under the API's rules. */
function interval(today: number): { from: number; to: number } {
  if (state.custom) {
    const r = clampRange(state.custom.from, state.custom.to, today);
    state.custom = { from: r.from, to: r.to };
    state.rangeNotes.push(...r.notes);
    return r;
  }
  const days = state.days ?? DEFAULT_SPAN_DAYS;
  return { from: Math.max(0, today - (days - 1)), to: today };
}

function showRange(from: number, to: number): void {
  const url = new URL(location.href);
  url.searchParams.set('site', state.site);
  if (state.custom) {
    url.searchParams.delete('days');
    url.searchParams.set('from', dayLabel(from));
    url.searchParams.set('to', dayLabel(to));
  } else {
    url.searchParams.set('days', String(state.days));
    url.searchParams.delete('from');
    url.searchParams.delete('to');
  }
  history.replaceState(null, '', url);
  for (const b of Array.from(periodButtons.querySelectorAll('button'))) b.setAttribute('aria-pressed', String(state.custom === null && b.dataset.days === String(state.days)));
  customForm.classList.toggle('active', state.custom !== null);
  // The inputs always show the interval on screen, so a preset is a starting point for a custom range.
  fromInput.value = dayLabel(from);
  toInput.value = dayLabel(to);
  rangeNote.textContent = state.rangeNotes.join(' ');
  rangeNote.hidden = state.rangeNotes.length === 0;
}

async function refresh(): Promise<void> {
  const generation = ++state.generation;
  const site = state.site;
  banner.hidden = true;
  document.body.classList.add('busy');
  try {
    let summary: Summary;
    if (state.today === null) {
      summary = await ok(api.analytics.GetSiteAnalyticsSummary({ bundle_id: site }));
      state.today = summary.to;
      // No data lies ahead: a later end date is refused by the inputs (the API would show zeros).
      fromInput.max = toInput.max = dayLabel(state.today);
    }
    const { from, to } = interval(state.today);
    showRange(from, to);
    // The previous period: as many days, just before (none before 1970-01-01).
    const span = to - from + 1;
    const [current, before, breakdowns] = await Promise.all([
      ok(api.analytics.GetSiteAnalyticsSummary({ bundle_id: site, from, to })),
      from - span >= 0 ? ok(api.analytics.GetSiteAnalyticsSummary({ bundle_id: site, from: from - span, to: from - 1 })) : null,
      Promise.all(
        BREAKDOWNS.map((spec) => ok(api.analytics.GetSiteAnalyticsBreakdown({ bundle_id: site, dimension: spec.dimension, from, to, limit: TOP_ROWS })).catch((err: Error) => err)),
      ),
    ]);
    summary = current;
    if (generation !== state.generation) return;
    renderTiles(summary, before);
    renderChart(summary);
    grid.replaceChildren(...BREAKDOWNS.map((spec, i) => renderBreakdown(spec, breakdowns[i]!)));
    await refreshRealtime();
    document.body.dataset.ready = 'true';
    document.body.dataset.shown = `${site} ${dayLabel(from)} ${dayLabel(to)}`;
  } catch (err) {
    if (generation === state.generation) showProblem(err);
  } finally {
    if (generation === state.generation) document.body.classList.remove('busy');
  }
}

async function start(): Promise<void> {
  layout();
  const params = new URLSearchParams(location.search);
  const days = Number(params.get('days'));
  if ((PERIODS as readonly number[]).includes(days)) state.days = days;
  // A shared custom range (?from=2026-11-01&to=2026-11-14); a missing or unreadable date follows the API's default.
  const fromParam = params.get('from');
  const toParam = params.get('to');
  if (fromParam !== null || toParam !== null) {
    state.days = null;
    state.custom = { from: parseDay(fromParam), to: parseDay(toParam) };
    for (const [name, value, day] of [['from', fromParam, state.custom.from], ['to', toParam, state.custom.to]] as const) {
      if (value !== null && day === null) state.rangeNotes.push(`The link's ${name} date "${value}" is not a date (YYYY-MM-DD) and was left out.`);
    }
  }
  let bundles: Bundle[];
  try {
    bundles = (await ok(api.workspace.ListBundles({}))).items;
  } catch (err) {
    showProblem(err);
    return;
  }
  if (!bundles.length) {
    showProblem(new Error('This workspace has no sites yet.'));
    return;
  }
  siteSelect.replaceChildren(...bundles.map((b) => h('option', { value: b.content_id }, `${b.name} (${b.domain})`)));
  const wanted = params.get('site');
  const known = wanted === null || bundles.some((b) => b.content_id === wanted);
  state.site = wanted !== null && known ? wanted : bundles[0]!.content_id;
  siteSelect.value = state.site;
  await refresh();
  // A link naming a site this workspace does not have says so, instead of quietly showing another.
  if (!known) showProblem(new Error(`This workspace has no site ${wanted}; showing ${bundles[0]!.name} (${bundles[0]!.domain}) instead.`));
  state.realtimeTimer = window.setInterval(() => void refreshRealtime(), REALTIME_EVERY_MS);
  let resizeTimer = 0;
  window.addEventListener('resize', () => {
    clearTimeout(resizeTimer);
    resizeTimer = window.setTimeout(() => state.chart?.setSize({ width: Math.max(300, chartBox.clientWidth - 32), height: 260 }), 150);
  });
}

void start();
