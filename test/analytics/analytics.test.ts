import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import type { WorkspaceSpec } from '../../server/admin.ts';
import { maintainedFigures, recomputeFigures } from '../../handlers/analytics/figures.ts';
import { ImportError, importEvents, parseEventLines } from '../../handlers/analytics/import.ts';
import { ingestEvents } from '../../handlers/analytics/ingest.ts';
import { type AnalyticsEventInput, dayOf, normalizeEvent } from '../../handlers/analytics/input.ts';
import { forEachDatabase, type TestService } from '../support/service.ts';
import { admin } from '../support/cli.ts';

const MIN = 60_000;
const DAY = 86_400_000;
/** 2026-11-22 00:00 UTC, the FakeClock's day. */
const TODAY_START = Date.UTC(2026, 10, 22);
const TODAY = dayOf(TODAY_START);

const site = (name: string) => ({ name, domain: `${name}.acme.test` });

const analyticsWorkspace = (): WorkspaceSpec => ({
  workspace: { name: 'Analytics Co' },
  bundles: { docs: site('docs'), shop: site('shop'), blog: site('blog') },
  keys: {
    reader: { name: 'Analytics reader', operations: ['analytics.*'] },
    bare: { name: 'No grants', operations: [] },
  },
});

type Ev = Partial<AnalyticsEventInput> & { ts: number; visitor: string };
const pv = (ts: number, visitor: string, extra: Partial<AnalyticsEventInput> = {}): Ev => ({ type: 'pageview', path: '/', ts, visitor, ...extra });
const eng = (ts: number, visitor: string, engaged_ms: number, extra: Partial<AnalyticsEventInput> = {}): Ev => ({ type: 'engagement', path: '/', ts, visitor, engaged_ms, ...extra });

async function load(svc: TestService, bundleId: string, events: Ev[]) {
  return ingestEvents(svc.db, events.map((e) => normalizeEvent(bundleId, { type: 'pageview', path: '/', ...e } as AnalyticsEventInput)));
}

async function assertConsistent(svc: TestService, bundleId: string) {
  assert.deepEqual(await maintainedFigures(svc.db.sql, bundleId), await recomputeFigures(svc.db.sql, bundleId));
}



forEachDatabase('analytics', (svc) => {
  async function setup() {
    svc().clock.set(Date.UTC(2026, 10, 22, 12, 0, 0));
    const ws = await svc().apply(analyticsWorkspace());
    const api = svc().client(ws.keys.reader!.secret);
    return { ws, api, docs: ws.bundles.docs!, shop: ws.bundles.shop!, blog: ws.bundles.blog! };
  }

  it('a gap of exactly 30 minutes starts a new session; a shorter one does not', async () => {
    const { api, docs } = await setup();
    const t = TODAY_START + 8 * 60 * MIN;
    await load(svc(), docs, [pv(t, 'a'), pv(t + 30 * MIN, 'a'), pv(t, 'b'), pv(t + 30 * MIN - 1, 'b')]);
    const { data } = await api.analytics.GetSiteAnalyticsSummary({ bundle_id: docs, from: TODAY, to: TODAY });
    assert.equal(data!.pageviews, 4);
    assert.equal(data!.visitors, 2);
    assert.equal(data!.sessions, 3); // a: 2 sessions (both bounces), b: 1 session of 2 pageviews
    assert.equal(data!.bounces, 2);
    assert.equal(data!.bounce_rate, 2 / 3);
    assert.equal(data!.avg_visit_ms, Math.round((30 * MIN - 1) / 3));
    assert.deepEqual(data!.series, [{ day: TODAY, pageviews: 4, visitors: 2, sessions: 3 }]);
    await assertConsistent(svc(), docs);
  });

  it('engagement pings extend a session and count as active time on their own day; an orphan ping starts nothing', async () => {
    const { api, docs } = await setup();
    const t = TODAY_START + 9 * 60 * MIN;
    await load(svc(), docs, [pv(t, 'a'), eng(t + 10 * MIN, 'a', 4000), eng(t + 3 * 60 * MIN, 'z', 999), pv(t + 5 * 60 * MIN, 'c')]);
    const { data } = await api.analytics.GetSiteAnalyticsSummary({ bundle_id: docs, from: TODAY, to: TODAY });
    assert.equal(data!.pageviews, 2);
    assert.equal(data!.visitors, 2); // z sent only a ping: not a visitor
    assert.equal(data!.sessions, 2);
    assert.equal(data!.bounces, 2); // one pageview each, however long
    assert.equal(data!.avg_visit_ms, (10 * MIN + 0) / 2);
    assert.equal(data!.avg_engagement_ms, Math.round((4000 + 999) / 2));
    await assertConsistent(svc(), docs);
  });

  it('a session crossing midnight belongs to its first day; its pageviews count on their own days', async () => {
    const { api, docs } = await setup();
    const t = TODAY_START - 10 * MIN; // 23:50 yesterday
    await load(svc(), docs, [pv(t, 'a'), pv(t + 20 * MIN, 'a'), eng(t + 25 * MIN, 'a', 500)]);
    const both = await api.analytics.GetSiteAnalyticsSummary({ bundle_id: docs, from: TODAY - 1, to: TODAY });
    assert.deepEqual(both.data!.series, [
      { day: TODAY - 1, pageviews: 1, visitors: 1, sessions: 1 },
      { day: TODAY, pageviews: 1, visitors: 1, sessions: 0 },
    ]);
    assert.equal(both.data!.visitors, 2);
    assert.equal(both.data!.sessions, 1);
    assert.equal(both.data!.bounces, 0);
    assert.equal(both.data!.avg_visit_ms, 25 * MIN);
    const today = await api.analytics.GetSiteAnalyticsSummary({ bundle_id: docs, from: TODAY, to: TODAY });
    assert.equal(today.data!.sessions, 0);
    assert.equal(today.data!.pageviews, 1);
    assert.equal(today.data!.avg_visit_ms, 0);
    assert.equal(today.data!.avg_engagement_ms, 500);
    const yesterday = await api.analytics.GetSiteAnalyticsSummary({ bundle_id: docs, from: TODAY - 1, to: TODAY - 1 });
    assert.equal(yesterday.data!.sessions, 1);
    assert.equal(yesterday.data!.avg_visit_ms, 25 * MIN);
    await assertConsistent(svc(), docs);
  });

  it('visitors are distinct per day and site, summed over days and sites', async () => {
    const { api, docs, shop, blog } = await setup();
    const t = TODAY_START + 10 * 60 * MIN;
    await load(svc(), docs, [pv(t, 'v'), pv(t + MIN, 'v'), pv(t - DAY, 'v'), pv(t, 'w')]);
    await load(svc(), shop, [pv(t, 'v'), pv(t - 2 * DAY, 'v')]);
    const docsSummary = await api.analytics.GetSiteAnalyticsSummary({ bundle_id: docs });
    assert.equal(docsSummary.data!.visitors, 3); // v today, v yesterday, w today
    const ws = await api.analytics.GetWorkspaceAnalyticsSummary({});
    assert.equal(ws.data!.visitors, 5);
    assert.equal(ws.data!.pageviews, 6);
    assert.deepEqual(ws.data!.series, [
      { day: TODAY - 2, pageviews: 1, visitors: 1, sessions: 1 },
      { day: TODAY - 1, pageviews: 1, visitors: 1, sessions: 1 },
      { day: TODAY, pageviews: 4, visitors: 3, sessions: 3 },
    ]);
    assert.deepEqual(ws.data!.bundles.map((b) => [b.bundle_id, b.visitors, b.pageviews]), [[docs, 3, 4], [shop, 2, 2]].sort((a, b) => (a[0]! < b[0]! ? -1 : 1)));
    assert.ok(!ws.data!.bundles.some((b) => b.bundle_id === blog));
  });

  it('applies the interval rules: defaults, from after to, the 366-day clamp', async () => {
    const { api, docs } = await setup();
    let r = await api.analytics.GetSiteAnalyticsSummary({ bundle_id: docs });
    assert.deepEqual([r.data!.from, r.data!.to], [TODAY - 29, TODAY]);
    r = await api.analytics.GetSiteAnalyticsSummary({ bundle_id: docs, to: 20000 });
    assert.deepEqual([r.data!.from, r.data!.to], [19971, 20000]);
    r = await api.analytics.GetSiteAnalyticsSummary({ bundle_id: docs, from: TODAY + 5 });
    assert.deepEqual([r.data!.from, r.data!.to], [TODAY, TODAY]);
    r = await api.analytics.GetSiteAnalyticsSummary({ bundle_id: docs, from: 20010, to: 20000 });
    assert.deepEqual([r.data!.from, r.data!.to], [20000, 20000]);
    r = await api.analytics.GetSiteAnalyticsSummary({ bundle_id: docs, from: 19000, to: 20000 });
    assert.deepEqual([r.data!.from, r.data!.to], [20000 - 365, 20000]);
    r = await api.analytics.GetSiteAnalyticsSummary({ bundle_id: docs, from: 20000 - 365, to: 20000 });
    assert.deepEqual([r.data!.from, r.data!.to], [20000 - 365, 20000]);
    const w = await api.analytics.GetWorkspaceAnalyticsSummary({ from: 1, to: 5000 });
    assert.deepEqual([w.data!.from, w.data!.to], [5000 - 365, 5000]);
    const b = await api.analytics.GetSiteAnalyticsBreakdown({ bundle_id: docs, dimension: 'page', from: 30 });
    assert.deepEqual([b.data!.from, b.data!.to], [TODAY - 365, TODAY]);
    // The clock decides "today".
    svc().clock.advance(DAY);
    r = await api.analytics.GetSiteAnalyticsSummary({ bundle_id: docs });
    assert.deepEqual([r.data!.from, r.data!.to], [TODAY - 28, TODAY + 1]);
  });

  it('answers an empty interval with an empty series and zero totals', async () => {
    const { api, docs } = await setup();
    await load(svc(), docs, [pv(TODAY_START - 40 * DAY, 'a')]);
    const r = await api.analytics.GetSiteAnalyticsSummary({ bundle_id: docs });
    assert.deepEqual(r.data, {
      bundle_id: docs, from: TODAY - 29, to: TODAY, series: [], pageviews: 0, visitors: 0, sessions: 0, bounces: 0, bounce_rate: 0, avg_visit_ms: 0, avg_engagement_ms: 0,
    });
    const w = await api.analytics.GetWorkspaceAnalyticsSummary({});
    assert.deepEqual(w.data, { from: TODAY - 29, to: TODAY, series: [], pageviews: 0, visitors: 0, sessions: 0, bounces: 0, bounce_rate: 0, avg_visit_ms: 0, avg_engagement_ms: 0, bundles: [] });
    const b = await api.analytics.GetSiteAnalyticsBreakdown({ bundle_id: docs, dimension: 'source' });
    assert.deepEqual(b.data!.rows, []);
    assert.equal(b.data!.has_more, false);
    assert.equal(b.data!.next_cursor, null);
  });

  it('repairs sessions when history arrives out of order, in any batches', async () => {
    const { api, docs, shop } = await setup();
    const t = TODAY_START + 6 * 60 * MIN;
    // In time order: one session of 4 pageviews (gaps of 20 minutes), then another 40 minutes later.
    const events = [pv(t, 'a', { path: '/a' }), pv(t + 20 * MIN, 'a', { path: '/b' }), pv(t + 40 * MIN, 'a', { path: '/c' }), eng(t + 50 * MIN, 'a', 700), pv(t + 60 * MIN, 'a', { path: '/d' }), pv(t + 100 * MIN, 'a', { path: '/e' })];
    await load(svc(), shop, events);
    // The same events in reverse, one per batch: at first they look like separate sessions.
    for (const e of [...events].reverse()) {
      await load(svc(), docs, [e]);
      await assertConsistent(svc(), docs);
    }
    const a = await api.analytics.GetSiteAnalyticsSummary({ bundle_id: shop });
    const b = await api.analytics.GetSiteAnalyticsSummary({ bundle_id: docs });
    assert.deepEqual({ ...b.data!, bundle_id: shop }, a.data);
    assert.equal(b.data!.sessions, 2);
    assert.equal(b.data!.bounces, 1);
    assert.equal(b.data!.avg_visit_ms, 30 * MIN);
    const entry = await api.analytics.GetSiteAnalyticsBreakdown({ bundle_id: docs, dimension: 'entry_page' });
    assert.deepEqual(entry.data!.rows, [
      { value: '/a', pageviews: 1, visitors: 1, avg_engagement_ms: Math.round(700 / 4) },
      { value: '/e', pageviews: 1, visitors: 1, avg_engagement_ms: 0 },
    ]);
    // A late pageview 20 minutes before a session joins it, and the chain after it (10 + 20 + 20 minutes).
    await load(svc(), shop, [pv(t - DAY + 20 * MIN, 'b'), eng(t - DAY + 40 * MIN, 'b', 5), pv(t - DAY + 60 * MIN, 'b')]);
    await load(svc(), shop, [pv(t - DAY, 'b')]);
    const chained = await api.analytics.GetSiteAnalyticsSummary({ bundle_id: shop, from: TODAY - 1, to: TODAY - 1 });
    assert.equal(chained.data!.sessions, 1);
    assert.equal(chained.data!.avg_visit_ms, 60 * MIN);
    await assertConsistent(svc(), shop);
    // A pageview in the middle of the gap joins the two sessions.
    await load(svc(), docs, [pv(t + 80 * MIN, 'a', { path: '/m' })]);
    const joined = await api.analytics.GetSiteAnalyticsSummary({ bundle_id: docs });
    assert.equal(joined.data!.sessions, 1);
    assert.equal(joined.data!.avg_visit_ms, 100 * MIN);
    await assertConsistent(svc(), docs);
  });

  it('keeps sessions whole when batches for one visitor are stored concurrently', async () => {
    const { api, docs } = await setup();
    const t = TODAY_START + 3 * 60 * MIN;
    // Ten pageviews 10 minutes apart (one session), sent as ten concurrent batches in shuffled order.
    const order = [7, 2, 9, 0, 5, 3, 8, 1, 6, 4];
    await Promise.all(order.map((k) => load(svc(), docs, [pv(t + k * 10 * MIN, 'a', { path: `/s${k}` })])));
    const r = await api.analytics.GetSiteAnalyticsSummary({ bundle_id: docs, from: TODAY, to: TODAY });
    assert.equal(r.data!.sessions, 1);
    assert.equal(r.data!.avg_visit_ms, 90 * MIN);
    await assertConsistent(svc(), docs);
  });

  it('breaks down by page, entry page, source, referrer, campaign and device, ordered and paged', async () => {
    const { api, docs } = await setup();
    const t = TODAY_START + 7 * 60 * MIN;
    await load(svc(), docs, [
      pv(t, 'a', { path: '/pricing', referrer: 'https://www.google.com/search?q=x', device: 'desktop' }),
      eng(t + MIN, 'a', 3000, { path: '/pricing' }),
      pv(t + 2 * MIN, 'a', { path: '/docs' }),
      pv(t, 'b', { path: '/docs', utm_source: 'newsletter', utm_campaign: 'nov', referrer: 'mail.example.com' }),
      pv(t + 3 * MIN, 'b', { path: '/pricing', device: 'mobile' }),
      pv(t, 'c', { path: '/pricing' }),
      pv(t + 60 * MIN, 'c', { path: '/pricing' }),
      pv(t, 'd', { path: '/about' }),
    ]);
    const page = await api.analytics.GetSiteAnalyticsBreakdown({ bundle_id: docs, dimension: 'page' });
    assert.deepEqual(page.data!.rows, [
      { value: '/pricing', pageviews: 4, visitors: 3, avg_engagement_ms: 750 },
      { value: '/docs', pageviews: 2, visitors: 2, avg_engagement_ms: 0 },
      { value: '/about', pageviews: 1, visitors: 1, avg_engagement_ms: 0 },
    ]);
    const entry = await api.analytics.GetSiteAnalyticsBreakdown({ bundle_id: docs, dimension: 'entry_page' });
    assert.deepEqual(entry.data!.rows, [
      { value: '/pricing', pageviews: 3, visitors: 2, avg_engagement_ms: Math.round(3000 / 4) },
      { value: '/about', pageviews: 1, visitors: 1, avg_engagement_ms: 0 },
      { value: '/docs', pageviews: 1, visitors: 1, avg_engagement_ms: 0 },
    ]);
    const source = await api.analytics.GetSiteAnalyticsBreakdown({ bundle_id: docs, dimension: 'source' });
    assert.deepEqual(source.data!.rows.map((r) => [r.value, r.pageviews]), [['Direct / None', 5], ['newsletter', 1], ['www.google.com', 1]]);
    const referrer = await api.analytics.GetSiteAnalyticsBreakdown({ bundle_id: docs, dimension: 'referrer' });
    assert.deepEqual(referrer.data!.rows.map((r) => [r.value, r.pageviews]), [['Direct / None', 5], ['mail.example.com', 1], ['www.google.com', 1]]);
    const campaign = await api.analytics.GetSiteAnalyticsBreakdown({ bundle_id: docs, dimension: 'campaign' });
    assert.deepEqual(campaign.data!.rows.map((r) => [r.value, r.pageviews]), [['(none)', 6], ['nov', 1]]);
    const device = await api.analytics.GetSiteAnalyticsBreakdown({ bundle_id: docs, dimension: 'device' });
    assert.deepEqual(device.data!.rows.map((r) => [r.value, r.pageviews]), [['(unknown)', 5], ['desktop', 1], ['mobile', 1]]);

    // Paging: two rows a page, the cursor bound to the filters.
    const p1 = await api.analytics.GetSiteAnalyticsBreakdown({ bundle_id: docs, dimension: 'page', limit: 2 });
    assert.deepEqual(p1.data!.rows.map((r) => r.value), ['/pricing', '/docs']);
    assert.equal(p1.data!.has_more, true);
    const p2 = await api.analytics.GetSiteAnalyticsBreakdown({ bundle_id: docs, dimension: 'page', limit: 2, cursor: p1.data!.next_cursor! });
    assert.deepEqual(p2.data!.rows.map((r) => r.value), ['/about']);
    assert.equal(p2.data!.has_more, false);
    assert.equal(p2.data!.next_cursor, null);
    const wrong = await api.analytics.GetSiteAnalyticsBreakdown({ bundle_id: docs, dimension: 'source', limit: 2, cursor: p1.data!.next_cursor! });
    assert.equal(wrong.response.status, 400);
    assert.equal(wrong.error!.error, 'invalid_input');
    const junk = await api.analytics.GetSiteAnalyticsBreakdown({ bundle_id: docs, dimension: 'page', cursor: 'not-a-cursor' });
    assert.equal(junk.response.status, 400);
    const tooMany = await svc().post('analytics.GetSiteAnalyticsBreakdown', { bundle_id: docs, dimension: 'page', limit: 101 }, { Authorization: `Bearer ${(await setupKey())}` });
    assert.equal(tooMany.status, 400);
    await assertConsistent(svc(), docs);

    async function setupKey() {
      const ws = await svc().apply(analyticsWorkspace());
      return ws.keys.reader!.secret;
    }
  });

  it('counts realtime visitors with any event in the last 5 minutes, once each', async () => {
    const { api, docs } = await setup();
    const now = svc().clock.now();
    await load(svc(), docs, [
      pv(now - 300_000, 'old'), // exactly 5 minutes ago: outside
      pv(now - 299_999, 'a'),
      eng(now - 1000, 'a', 100),
      eng(now - 2000, 'b', 100),
      pv(now, 'c'),
      pv(now + 1000, 'future'),
    ]);
    const r = await api.analytics.GetSiteAnalyticsRealtime({ bundle_id: docs });
    assert.deepEqual(r.data, { bundle_id: docs, visitors: 3, window_ms: 300000 });
    svc().clock.advance(10 * MIN);
    const later = await api.analytics.GetSiteAnalyticsRealtime({ bundle_id: docs });
    assert.equal(later.data!.visitors, 0);
  });

  it('answers 404 for an unknown site or another workspace\'s site, 403 without the grant', async () => {
    const { api, ws } = await setup();
    const other = await svc().apply(analyticsWorkspace());
    const foreign = other.bundles.docs!;
    await load(svc(), foreign, [pv(svc().clock.now(), 'x')]);
    for (const bundle_id of [foreign, 'bn_unknown']) {
      const s = await api.analytics.GetSiteAnalyticsSummary({ bundle_id });
      assert.equal(s.response.status, 404);
      assert.equal(s.error!.error, 'not_found');
      assert.equal((await api.analytics.GetSiteAnalyticsBreakdown({ bundle_id, dimension: 'page' })).response.status, 404);
      assert.equal((await api.analytics.GetSiteAnalyticsRealtime({ bundle_id })).response.status, 404);
    }
    const w = await api.analytics.GetWorkspaceAnalyticsSummary({});
    assert.equal(w.data!.pageviews, 0); // the other workspace's traffic is not summed in
    const bare = svc().client(ws.keys.bare!.secret);
    assert.equal((await bare.analytics.GetWorkspaceAnalyticsSummary({})).response.status, 403);
  });

  it('validates import lines strictly and names the bad line', async () => {
    const ok = '{"type":"pageview","ts":1795312800000,"visitor":"v1","path":"/p","referrer":"https://x.test/a","utm_source":"s","utm_campaign":"c","country":"SE","device":"desktop","browser":"Firefox","os":"Linux","engaged_ms":1234}';
    assert.equal(parseEventLines(`${ok}\n\n${ok}\n`, 'bn_x').length, 2);
    const bad = (text: string, message: RegExp) => assert.throws(() => parseEventLines(text, 'bn_x'), (err: unknown) => err instanceof ImportError && message.test(err.message));
    bad(`${ok}\n{"type":"click","ts":1,"visitor":"v","path":"/"}`, /^line 2: type must be equal to one of the allowed values/);
    bad(`${ok}\n${ok}\n{nope`, /^line 3: not valid JSON/);
    bad(`{"type":"pageview","ts":1.5,"visitor":"v","path":"/"}`, /^line 1: ts must be integer/);
    bad(`{"type":"pageview","ts":1,"visitor":"v","path":"/","extra":1}`, /^line 1: unknown field "extra"/);
    bad(`{"type":"pageview","ts":1,"path":"/"}`, /^line 1: missing field "visitor"/);
    bad(`{"type":"pageview","ts":1,"visitor":"v","path":"p"}`, /^line 1: path must start with "\/"/);
  });

  it('imports history in time order, in chunks, with the same figures as a recomputation', async () => {
    const { docs } = await setup();
    const lines = [];
    for (let i = 0; i < 300; i++) {
      const ts = TODAY_START - (i % 7) * DAY + ((i * 7919) % 1000) * MIN;
      lines.push(JSON.stringify({ type: i % 5 === 0 ? 'engagement' : 'pageview', ts, visitor: `v${i % 13}`, path: `/p${i % 4}`, engaged_ms: i % 5 === 0 ? 100 * i : 0 }));
    }
    const progress: number[] = [];
    const summary = await importEvents(svc().db, docs, parseEventLines(lines.reverse().join('\n'), docs), { chunkSize: 64, onProgress: (n) => progress.push(n) });
    assert.equal(summary.events, 300);
    assert.equal(summary.pageviews, 240);
    assert.deepEqual(progress, [64, 128, 192, 256, 300]);
    await assertConsistent(svc(), docs);
  });

  it('imports an NDJSON file from the CLI: JSON summary on stdout; a bad line is one line on stderr, exit 1, nothing stored', async function () {
    this.timeout(60_000);
    const { api, docs } = await setup();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wsops-import-'));
    const t = TODAY_START + 9 * 60 * MIN;
    const lines = [
      { type: 'engagement', ts: t + 5 * MIN, visitor: 'v1', path: '/p', engaged_ms: 1234 },
      { type: 'pageview', ts: t, visitor: 'v1', path: '/p', referrer: 'https://x.test/a', utm_source: 's', utm_campaign: 'c', country: 'SE', device: 'desktop', browser: 'Firefox', os: 'Linux' },
      { type: 'pageview', ts: t + 40 * MIN, visitor: 'v1', path: '/q' },
    ].map((l) => JSON.stringify(l));
    const bad = path.join(dir, 'bad.ndjson');
    fs.writeFileSync(bad, `${lines.join('\n')}\n{"type":"pageview","ts":"yesterday","visitor":"v","path":"/"}\n`);
    const refused = await admin(svc().databaseUrl, 'analytics', 'import', '--bundle', docs, bad);
    assert.equal(refused.code, 1);
    assert.equal(refused.stdout, '');
    assert.match(refused.stderr, /^admin: .*bad\.ndjson line 4: ts must be integer; nothing was stored\n$/);
    assert.equal((await api.analytics.GetSiteAnalyticsSummary({ bundle_id: docs })).data!.pageviews, 0);

    const good = path.join(dir, 'good.ndjson');
    fs.writeFileSync(good, `${lines.join('\n')}\n`);
    const done = await admin(svc().databaseUrl, 'analytics', 'import', '--bundle', docs, good);
    assert.equal(done.code, 0, done.stderr);
    assert.equal(done.stderr, ''); // no progress bar when stderr is not a terminal
    assert.deepEqual(JSON.parse(done.stdout), {
      bundle_id: docs, events: 3, pageviews: 2, engagements: 1, visitors: 1, sessions_added: 2, sessions_removed: 0, first_day: TODAY, last_day: TODAY,
    });
    const summary = await api.analytics.GetSiteAnalyticsSummary({ bundle_id: docs });
    assert.equal(summary.data!.sessions, 2);
    assert.equal(summary.data!.avg_visit_ms, Math.round(5 * MIN / 2));
    assert.equal(summary.data!.avg_engagement_ms, 617);

    const unknown = await admin(svc().databaseUrl, 'analytics', 'import', '--bundle', 'bn_nope', good);
    assert.equal(unknown.code, 1);
    assert.equal(unknown.stderr, 'admin: no site (bundle) bn_nope\n');
  });

  it('keeps maintained figures equal to a recomputation for random logs, orders (random, newest or oldest first) and batches (property)', async function () {
    this.timeout(120_000);
    const { docs, shop } = await setup();
    const bundles = [docs, shop];
    const base = TODAY_START - 2 * DAY;
    const event = fc.record({
      bundle: fc.integer({ min: 0, max: 1 }),
      visitor: fc.constantFrom('a', 'b'),
      type: fc.constantFrom('pageview', 'pageview', 'engagement'),
      // Minutes over three days, with a bias to 29/30/31-minute gaps and midnight.
      // chains of 10-minute steps that late events extend or join, exact 30-minute gaps, midnight.
      ts: fc.oneof(
        fc.integer({ min: 0, max: 3 * 1440 }).map((m) => base + m * MIN),
        fc.integer({ min: 0, max: 12 }).map((k) => base + DAY - 35 * MIN + k * 5 * MIN),
        { arbitrary: fc.integer({ min: 0, max: 30 }).map((k) => base + DAY + 6 * 60 * MIN + k * 10 * MIN), weight: 4 },
        fc.integer({ min: 0, max: 8 }).map((k) => base + 2 * DAY + k * 30 * MIN),
      ),
      path: fc.constantFrom('/', '/a', '/b'),
      utm_source: fc.option(fc.constantFrom('x', 'y'), { nil: undefined }),
      referrer: fc.option(fc.constantFrom('https://r1.test/', 'r2.test'), { nil: undefined }),
      device: fc.option(fc.constantFrom('desktop', 'mobile'), { nil: undefined }),
      engaged_ms: fc.integer({ min: 0, max: 5000 }),
    });
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(event, { minLength: 1, maxLength: 30 }), fc.array(fc.integer({ min: 1, max: 6 }), { minLength: 1, maxLength: 10 }), fc.constantFrom('random', 'newest first', 'oldest first'), async (log, splits, order) => {
        // As generated (random order); newest first: every batch then lands before what is stored;
        // oldest first, as live collection sends them: every batch continues what is stored.
        if (order === 'newest first') log = [...log].sort((a, b) => b.ts - a.ts);
        if (order === 'oldest first') log = [...log].sort((a, b) => a.ts - b.ts);
        // Each run writes into fresh visitor ids, so runs never disturb each other's figures.
        const tag = `r${run++}-`;
        const normalized = log.map((e) => normalizeEvent(bundles[e.bundle]!, { ...e, visitor: tag + e.visitor, type: e.type as 'pageview' | 'engagement' }));
        let i = 0;
        let s = 0;
        while (i < normalized.length) {
          const size = splits[s++ % splits.length]!;
          await ingestEvents(svc().db, normalized.slice(i, i + size));
          i += size;
        }
        for (const b of bundles) assert.deepEqual(await maintainedFigures(svc().db.sql, b), await recomputeFigures(svc().db.sql, b));
      }),
      { seed: 20261122, numRuns: 150, endOnFailure: true },
    );
  });
});
