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

const state = {
  site: '',
  days: 30 as number,
  /** The service's today (UTC day index), learnt from the first summary: the browser's clock may differ. */
  today: null as number | null,
  chart: null as uPlot | null,
  realtimeTimer: 0,
  generation: 0,
};

const root = document.getElementById('app')!;
const memberName = root.dataset.member ?? '';

const siteSelect = h('select', { id: 'site', 'aria-label': 'Site' });
const periodButtons = h('div', { class: 'periods', role: 'group', 'aria-label': 'Period' });
const realtime = h('div', { id: 'realtime', class: 'realtime', title: 'Distinct visitors in the last 5 minutes' });
const banner = h('div', { id: 'banner', class: 'banner', role: 'alert', hidden: '' });
const tiles = h('section', { id: 'tiles', class: 'tiles' });
const chartBox = h('section', { id: 'chart', class: 'card chart' });
const grid = h('section', { id: 'breakdowns', class: 'breakdowns' });
const range = h('span', { id: 'range', class: 'range' });

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
      void refresh();
    });
    periodButtons.append(b);
  }
  siteSelect.addEventListener('change', () => {
    state.site = siteSelect.value;
    void refresh();
  });
  const signout = h(
    'form',
    { method: 'post', action: '/signout', class: 'signout' },
    h('input', { type: 'hidden', name: '_csrf', value: root.dataset.csrf ?? '' }),
    h('button', { type: 'submit' }, 'Sign out'),
  );
  root.replaceChildren(
    h(
      'header',
      { class: 'top' },
      h('div', { class: 'brand' }, h('strong', {}, 'Analytics'), range),
      h('div', { class: 'controls' }, siteSelect, periodButtons, realtime),
      h('div', { class: 'who' }, memberName ? h('span', {}, memberName) : '', signout),
    ),
    banner,
    tiles,
    chartBox,
    grid,
  );
}

function renderTiles(s: Summary): void {
  const items: Array<[string, string, string, number]> = [
    ['visitors', 'Visitors', formatCount(s.visitors), s.visitors],
    ['pageviews', 'Pageviews', formatCount(s.pageviews), s.pageviews],
    ['sessions', 'Sessions', formatCount(s.sessions), s.sessions],
    ['bounce_rate', 'Bounce rate', formatPercent(s.bounce_rate), s.bounce_rate],
    ['avg_visit', 'Avg. visit', formatDuration(s.avg_visit_ms), s.avg_visit_ms],
    ['avg_engagement', 'Avg. engagement', formatDuration(s.avg_engagement_ms), s.avg_engagement_ms],
  ];
  tiles.replaceChildren(
    ...items.map(([key, label, text, raw]) =>
      h('div', { class: 'tile', 'data-tile': key }, h('div', { class: 'label' }, label), h('div', { class: 'value', 'data-value': String(raw) }, text)),
    ),
  );
  range.textContent = `${dayLabel(s.from)} – ${dayLabel(s.to)} (UTC)`;
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
  const top = Math.max(...b.rows.map((r) => r.pageviews), 1);
  const body = h('tbody');
  for (const row of b.rows) {
    const bar = h('span', { class: 'bar' });
    bar.style.width = `${(row.pageviews / top) * 100}%`;
    const label = h('td', { class: 'name', title: row.value }, bar, h('span', { class: 'text' }, row.value));
    body.append(h('tr', {}, label, h('td', { class: 'num' }, formatCount(row.visitors)), h('td', { class: 'num' }, formatCount(row.pageviews))));
  }
  card.append(h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, spec.column), h('th', { class: 'num' }, 'Visitors'), h('th', { class: 'num' }, spec.count))), body));
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

async function refresh(): Promise<void> {
  const generation = ++state.generation;
  const site = state.site;
  const url = new URL(location.href);
  url.searchParams.set('site', site);
  url.searchParams.set('days', String(state.days));
  history.replaceState(null, '', url);
  for (const b of Array.from(periodButtons.querySelectorAll('button'))) b.setAttribute('aria-pressed', String(b.dataset.days === String(state.days)));
  banner.hidden = true;
  document.body.classList.add('busy');
  try {
    let summary: Summary;
    if (state.today === null) {
      summary = await ok(api.analytics.GetSiteAnalyticsSummary({ bundle_id: site }));
      state.today = summary.to;
    }
    const to = state.today;
    const from = to - (state.days - 1);
    summary = await ok(api.analytics.GetSiteAnalyticsSummary({ bundle_id: site, from, to }));
    const breakdowns = await Promise.all(
      BREAKDOWNS.map((spec) => ok(api.analytics.GetSiteAnalyticsBreakdown({ bundle_id: site, dimension: spec.dimension, from, to, limit: TOP_ROWS })).catch((err: Error) => err)),
    );
    if (generation !== state.generation) return;
    renderTiles(summary);
    renderChart(summary);
    grid.replaceChildren(...BREAKDOWNS.map((spec, i) => renderBreakdown(spec, breakdowns[i]!)));
    await refreshRealtime();
    document.body.dataset.ready = 'true';
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
