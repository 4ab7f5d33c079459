/**
 * The dashboard in headless Chromium (Debian's /usr/bin/chromium driven by playwright-core): a member
 * opens a sign-in link minted by the CLI's code and sees exact figures. Skipped, loudly, when Chromium
 * is missing, unless REQUIRE_BROWSER=1. The screenshot goes to test-output/dashboard.png.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import type { WorkspaceSpec } from '../../server/admin.ts';
import { type AnalyticsEventInput, ingestEvents, normalizeEvent } from '../../handlers/analytics/ingest.ts';
import { createSigninLink } from '../../server/signin.ts';
import { announceBrowser, launchBrowser } from '../support/browser.ts';
import { forEachDatabase } from '../support/service.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const MIN = 60_000;
/** 2026-11-22 00:00 UTC; the FakeClock stands at 12:00 that day. */
const TODAY = Date.UTC(2026, 10, 22);
const DAY = 86_400_000;
const at = (daysAgo: number, h: number, m: number) => TODAY - daysAgo * DAY + h * 3_600_000 + m * MIN;

/** A value a visitor controls, shown as text and never run. */
const HOSTILE_PATH = '/<img src=x onerror="window.__xss=1">';

type Who = Pick<AnalyticsEventInput, 'country' | 'device' | 'browser' | 'os'>;
const a: Who = { country: 'SE', device: 'desktop', browser: 'Firefox', os: 'Linux' };
const b: Who = { country: 'DE', device: 'mobile', browser: 'Safari', os: 'iOS' };
const c: Who = { country: 'US', device: 'desktop', browser: 'Chrome', os: 'Windows' };
const d: Who = { country: 'SE', device: 'tablet', browser: 'Chrome', os: 'Android' };

/**
 * Three days of traffic. Sessions: a 2 days ago (/, /pricing, +2 min engaged; 5 min long), b 2 days
 * ago (/pricing, bounce), a yesterday (/, 30 s engaged; 1 min long, bounce), c yesterday (/docs,
 * /docs/install, /; 20 min long), d and b today within the last 5 minutes (bounces).
 * Totals: 9 pageviews, 6 visitors (2 + 2 + 2 daily), 6 sessions, 4 bounces (67 %), avg visit
 * 1,560,000 / 6 = 260,000 ms (4m 20s), avg engagement 150,000 / 9 = 16,667 ms (17s), 2 visitors now.
 */
const events: AnalyticsEventInput[] = [
  { type: 'pageview', ts: at(2, 10, 0), visitor: 'a', path: '/', referrer: 'https://news.example/post', ...a },
  { type: 'pageview', ts: at(2, 10, 2), visitor: 'a', path: '/pricing', referrer: 'https://news.example/post', ...a },
  { type: 'engagement', ts: at(2, 10, 5), visitor: 'a', path: '/pricing', engaged_ms: 120_000, ...a },
  { type: 'pageview', ts: at(2, 11, 0), visitor: 'b', path: '/pricing', utm_source: 'newsletter', utm_campaign: 'launch', ...b },
  { type: 'pageview', ts: at(1, 9, 0), visitor: 'a', path: '/', ...a },
  { type: 'engagement', ts: at(1, 9, 1), visitor: 'a', path: '/', engaged_ms: 30_000, ...a },
  { type: 'pageview', ts: at(1, 15, 0), visitor: 'c', path: '/docs', referrer: 'https://search.example/?q=ops', ...c },
  { type: 'pageview', ts: at(1, 15, 10), visitor: 'c', path: '/docs/install', referrer: 'https://search.example/?q=ops', ...c },
  { type: 'pageview', ts: at(1, 15, 20), visitor: 'c', path: '/', referrer: 'https://search.example/?q=ops', ...c },
  { type: 'pageview', ts: at(0, 11, 57), visitor: 'd', path: '/', ...d },
  { type: 'pageview', ts: at(0, 11, 58), visitor: 'b', path: HOSTILE_PATH, ...b },
];

/**
 * The week before (2026-11-13 and 14, inside 2026-11-09 – 15): four visitors, one session each.
 * p1 on the 14th: 4 pageviews over 20 min; p2 on the 14th: 3 over 10 min; p3 on the 13th: 4 over 4 min;
 * p4 on the 13th: 1 (a bounce). Totals: 4 visitors, 12 pageviews, 4 sessions, 1 bounce (25 %), avg visit
 * 2,040,000 / 4 = 510,000 ms (8m 30s), no engagement (0s). Against it this week (above) is visitors
 * 6 vs 4 (+50 %), pageviews 9 vs 12 (−25 %), sessions 6 vs 4 (+50 %), bounce rate 67 % vs 25 %
 * (+42 points), avg visit 260,000 vs 510,000 (−49.0 %), avg engagement 17s vs 0s ("new").
 * The 14th alone against the 13th: visitors 2 vs 2, pageviews 7 vs 5 (+40 %), bounce rate 0 % vs 50 %,
 * avg visit 900,000 vs 120,000 (+650 %). p2's country "AA" is no ISO country (user-assigned).
 */
const previousWeek: AnalyticsEventInput[] = [
  ...[0, 5, 10, 20].map((m) => ({ type: 'pageview' as const, ts: at(8, 10, m), visitor: 'p1', path: m ? `/blog/${m}` : '/blog', country: 'FR' })),
  ...[0, 5, 10].map((m) => ({ type: 'pageview' as const, ts: at(8, 12, m), visitor: 'p2', path: '/', country: 'AA' })),
  ...[0, 1, 2, 4].map((m) => ({ type: 'pageview' as const, ts: at(9, 9, m), visitor: 'p3', path: '/docs', ...a })),
  { type: 'pageview', ts: at(9, 14, 0), visitor: 'p4', path: '/', country: 'JP' },
];

const spec = (): WorkspaceSpec => ({
  workspace: { name: 'Dashboard Co' },
  members: { olga: { name: 'Olga <b>Owner</b>', email: 'olga@dash.test', role: 'owner' } },
  bundles: { docs: { name: 'Docs site', domain: 'docs.dash.test' }, shop: { name: 'Shop', domain: 'shop.dash.test' } },
  keys: { reader: { name: 'Analytics reader', operations: ['analytics.*'] } },
});

/** Each tile's change against the previous period, as shown ("↑ 50%", "new", "—"). */
const changes = (page: Page) => page.$$eval('[data-tile]', (els) => Object.fromEntries(els.map((el) => [el.getAttribute('data-tile'), el.querySelector('.change .delta')!.textContent])));

const expectedTiles = { visitors: '6', pageviews: '9', sessions: '6', bounce_rate: '67%', avg_visit: '4m 20s', avg_engagement: '17s' };

announceBrowser('the dashboard browser test');

forEachDatabase('dashboard in headless Chromium', (svc) => {
  let browser: Browser | undefined;

  before(async function () {
    browser = await launchBrowser(this);
  });
  after(async () => {
    await browser?.close();
  });

  it('shows exact tiles, the chart, top breakdown rows and realtime visitors; hostile values stay text', async function () {
    this.timeout(60_000);
    const ws = await svc().apply(spec());
    const bundle = ws.bundles.docs!;
    await ingestEvents(svc().db, events.map((e) => normalizeEvent(bundle, e)));
    // The operations agree with the hand-computed figures above.
    const summary = (await svc().client(ws.keys.reader!.secret).analytics.GetSiteAnalyticsSummary({ bundle_id: bundle })).data!;
    assert.deepEqual(
      { pageviews: summary.pageviews, visitors: summary.visitors, sessions: summary.sessions, bounces: summary.bounces, avg_visit_ms: summary.avg_visit_ms, avg_engagement_ms: summary.avg_engagement_ms },
      { pageviews: 9, visitors: 6, sessions: 6, bounces: 4, avg_visit_ms: 260_000, avg_engagement_ms: 16_667 },
    );

    const origin = svc().baseUrl.replace(/\/v1$/, '');
    const { url } = await createSigninLink(svc().db, svc().clock, { workspaceId: ws.workspace_id, memberId: ws.members.olga!, next: `/dashboard?site=${bundle}`, baseUrl: origin });
    const context = await browser!.newContext({ viewport: { width: 1280, height: 900 }, deviceScaleFactor: 1 });
    // The page's timers run on a fake clock, so the 30 s realtime refresh can be stepped through.
    await context.clock.install();
    const page = await context.newPage();
    const problems: string[] = [];
    page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
    page.on('console', (msg) => {
      if (msg.type() === 'error') problems.push(`console: ${msg.text()}`);
    });
    page.on('dialog', (dialog) => {
      problems.push(`dialog: ${dialog.message()}`);
      void dialog.dismiss();
    });
    try {
      const response = await page.goto(url);
      assert.equal(response!.status(), 200);
      assert.equal(new URL(page.url()).pathname, '/dashboard');
      await page.waitForSelector('body[data-ready="true"]', { timeout: 20_000 });

      const cookies = await context.cookies();
      const session = cookies.find((k) => k.name === 'wso_session')!;
      assert.equal(session.httpOnly, true);
      assert.equal(session.sameSite, 'Lax');

      const tiles = await page.$$eval('[data-tile]', (els) => Object.fromEntries(els.map((el) => [el.getAttribute('data-tile'), el.querySelector('.value')!.textContent])));
      assert.deepEqual(tiles, expectedTiles);
      // Nothing in the 30 days before: every tile says "new" rather than a division by zero.
      assert.deepEqual(await changes(page), { visitors: 'new', pageviews: 'new', sessions: 'new', bounce_rate: 'new', avg_visit: 'new', avg_engagement: 'new' });
      assert.equal(await page.locator('#previous').textContent(), 'vs 2026-09-24 – 2026-10-23');
      assert.equal(await page.locator('#chart canvas').count(), 1);
      assert.equal(await page.locator('#realtime [data-value]').textContent(), '2');
      assert.equal(await page.locator('#site').inputValue(), bundle);
      assert.deepEqual(await page.locator('#site option').allTextContents(), ['Docs site (docs.dash.test)', 'Shop (shop.dash.test)']);

      const rows = async (dimension: string) =>
        page.$$eval(`[data-breakdown="${dimension}"] tbody tr`, (trs) => trs.map((tr) => Array.from(tr.querySelectorAll('td')).map((td) => td.textContent)));
      assert.deepEqual(await rows('page'), [
        ['/', '4', '4'],
        ['/pricing', '2', '2'],
        [HOSTILE_PATH, '1', '1'],
        ['/docs', '1', '1'],
        ['/docs/install', '1', '1'],
      ]);
      assert.deepEqual(await rows('entry_page'), [
        ['/', '3', '3'],
        [HOSTILE_PATH, '1', '1'],
        ['/docs', '1', '1'],
        ['/pricing', '1', '1'],
      ]);
      assert.deepEqual((await rows('source')).map((r) => r[0]), ['Direct / None', 'search.example', 'news.example', 'newsletter']);
      assert.deepEqual((await rows('referrer')).map((r) => r[0]), ['Direct / None', 'search.example', 'news.example']);
      assert.deepEqual((await rows('campaign')).map((r) => r[0]), ['(none)', 'launch']);
      // Country names beside the ISO codes (Intl.DisplayNames in the browser).
      assert.deepEqual(await rows('country'), [
        ['SE Sweden', '3', '4'],
        ['US United States', '1', '3'],
        ['DE Germany', '2', '2'],
      ]);
      assert.deepEqual((await rows('device')).map((r) => r[0]), ['desktop', 'mobile', 'tablet']);
      assert.deepEqual((await rows('browser')).map((r) => r[0]), ['Chrome', 'Firefox', 'Safari']);
      assert.deepEqual((await rows('os')).map((r) => r[0]), ['Linux', 'Windows', 'iOS', 'Android']);
      // Visitor- and member-supplied text is shown as text: no element, no script ran.
      assert.equal(await page.locator('#breakdowns img').count(), 0);
      assert.equal(await page.evaluate(() => (window as unknown as { __xss?: number }).__xss), undefined);
      assert.equal(await page.locator('.topbar .who .name').textContent(), 'Olga <b>Owner</b>');

      fs.mkdirSync(path.join(root, 'test-output'), { recursive: true });
      await page.screenshot({ path: path.join(root, 'test-output', 'dashboard.png'), fullPage: true });

      // A new visitor arrives; the realtime count follows within 30 s, without a reload. (The page
      // clock ran in real time until now, so how much of the 30 s is left is not known here.)
      await ingestEvents(svc().db, [normalizeEvent(bundle, { type: 'pageview', ts: svc().clock.now() - MIN, visitor: 'e', path: '/' })]);
      await page.clock.runFor(30_000);
      await page.waitForFunction(() => document.querySelector('#realtime [data-value]')?.textContent === '3');

      // The period selector asks for 7 days (all of this traffic is inside them) and keeps it in the URL.
      await page.click('button[data-days="7"]');
      await page.waitForFunction(() => new URL(location.href).searchParams.get('days') === '7' && !document.body.classList.contains('busy'));
      assert.equal(await page.locator('#range').textContent(), '2026-11-16 – 2026-11-22 (UTC)');
      // Its chart ticks are days, labelled by date (not hours of a day).
      const ticks = (await page.locator('#chart').getAttribute('data-ticks'))!.split('|');
      assert.ok(ticks.length >= 2, ticks.join(','));
      for (const t of ticks) assert.match(t, /^Nov (1[6-9]|2[0-2])$/);
      await page.screenshot({ path: path.join(root, 'test-output', 'dashboard-7-days.png') });
      assert.equal(await page.locator('[data-tile="pageviews"] .value').textContent(), '10');
      // Another site: no traffic, zero tiles, empty breakdowns.
      await page.selectOption('#site', ws.bundles.shop!);
      await page.waitForFunction(() => new URL(location.href).searchParams.get('site') !== null && document.querySelector('[data-tile="pageviews"] .value')?.textContent === '0');
      assert.equal(await page.locator('[data-breakdown="page"] .empty').textContent(), 'No data for this period.');
      assert.deepEqual(problems, []);
    } finally {
      await context.close();
    }
  });

  it('compares each tile with the previous period, takes a custom range typed in (kept in the URL) and sorts breakdown rows by a clicked header', async function () {
    this.timeout(60_000);
    const ws = await svc().apply(spec());
    const bundle = ws.bundles.docs!;
    await ingestEvents(svc().db, [...events, ...previousWeek].map((e) => normalizeEvent(bundle, e)));
    const origin = svc().baseUrl.replace(/\/v1$/, '');
    const { url } = await createSigninLink(svc().db, svc().clock, { workspaceId: ws.workspace_id, memberId: ws.members.olga!, next: `/dashboard?site=${bundle}&days=7`, baseUrl: origin });
    const context = await browser!.newContext({ viewport: { width: 1280, height: 900 }, deviceScaleFactor: 1, locale: 'en-US' });
    await context.clock.install();
    const page = await context.newPage();
    const problems: string[] = [];
    page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
    page.on('console', (msg) => {
      if (msg.type() === 'error') problems.push(`console: ${msg.text()}`);
    });
    const tileValues = () => page.$$eval('[data-tile]', (els) => Object.fromEntries(els.map((el) => [el.getAttribute('data-tile'), el.querySelector('.value')!.textContent])));
    /** Waits until the page shows this site from..to and is no longer loading. */
    const shown = (from: string, to: string) =>
      page.waitForFunction((want) => document.body.dataset.shown === want && !document.body.classList.contains('busy'), `${bundle} ${from} ${to}`);
    const query = () => Object.fromEntries(new URL(page.url()).searchParams);
    const rows = (dimension: string) =>
      page.$$eval(`[data-breakdown="${dimension}"] tbody tr`, (trs) => trs.map((tr) => Array.from(tr.querySelectorAll('td')).map((td) => td.textContent)));
    fs.mkdirSync(path.join(root, 'test-output'), { recursive: true });
    try {
      await page.goto(url);
      await shown('2026-11-16', '2026-11-22');
      // This week against the week before (2026-11-09 – 15): see previousWeek for the figures.
      assert.deepEqual(await tileValues(), expectedTiles);
      assert.deepEqual(await changes(page), {
        visitors: '↑ 50%',
        pageviews: '↓ 25%',
        sessions: '↑ 50%',
        bounce_rate: '↑ 42 pp',
        avg_visit: '↓ 49%',
        avg_engagement: 'new',
      });
      // Colour says good or bad: a higher bounce rate is bad although its arrow points up.
      assert.deepEqual(
        await page.$$eval('[data-tile] .change', (els) => els.map((el) => `${el.getAttribute('data-direction')}/${el.getAttribute('data-tone')}`)),
        ['up/good', 'down/bad', 'up/good', 'up/bad', 'down/bad', 'new/neutral'],
      );
      assert.equal(await page.locator('[data-tile="bounce_rate"] .sr-only').textContent(), 'up 42 percentage points from the previous period (lower is better)');
      assert.equal(await page.locator('#range').textContent(), '2026-11-16 – 2026-11-22 (UTC)');
      assert.equal(await page.locator('#previous').textContent(), 'vs 2026-11-09 – 2026-11-15');
      // The inputs show the range on screen.
      assert.equal(await page.locator('#from').inputValue(), '2026-11-16');
      assert.equal(await page.locator('#to').inputValue(), '2026-11-22');
      await page.screenshot({ path: path.join(root, 'test-output', 'dashboard-compare.png'), fullPage: true });

      // A custom range, typed into the date fields (month, day, year in en-US) and applied.
      await page.locator('#from').focus();
      await page.keyboard.type('11132026');
      await page.locator('#to').focus();
      await page.keyboard.type('11142026');
      assert.equal(await page.locator('#from').inputValue(), '2026-11-13');
      assert.equal(await page.locator('#to').inputValue(), '2026-11-14');
      await page.click('#apply');
      await shown('2026-11-13', '2026-11-14');
      assert.deepEqual(query(), { site: bundle, from: '2026-11-13', to: '2026-11-14' });
      const customTiles = { visitors: '4', pageviews: '12', sessions: '4', bounce_rate: '25%', avg_visit: '8m 30s', avg_engagement: '0s' };
      const customChanges = { visitors: 'new', pageviews: 'new', sessions: 'new', bounce_rate: 'new', avg_visit: 'new', avg_engagement: 'new' };
      assert.deepEqual(await tileValues(), customTiles);
      assert.deepEqual(await changes(page), customChanges);
      assert.equal(await page.locator('#range').textContent(), '2026-11-13 – 2026-11-14 (UTC)');
      assert.equal(await page.locator('#previous').textContent(), 'vs 2026-11-11 – 2026-11-12');
      assert.deepEqual(await page.$$eval('.periods button', (bs) => bs.map((b) => b.getAttribute('aria-pressed'))), ['false', 'false', 'false']);
      // Unknown codes are shown as the code alone.
      assert.deepEqual((await rows('country')).map((r) => r[0]), ['FR France', 'SE Sweden', 'AA', 'JP Japan']);

      // The URL is the shareable state: a reload shows the same range.
      await page.reload();
      await shown('2026-11-13', '2026-11-14');
      assert.deepEqual(await tileValues(), customTiles);
      assert.deepEqual(await changes(page), customChanges);
      assert.equal(await page.locator('#from').inputValue(), '2026-11-13');

      // From after to: the API's rule (from becomes to), said on the page; Enter applies too.
      await page.locator('#from').fill('2026-11-20');
      await page.locator('#to').fill('2026-11-14');
      await page.locator('#to').press('Enter');
      await shown('2026-11-14', '2026-11-14');
      assert.equal(await page.locator('#range-note').textContent(), 'The start date 2026-11-20 was after the end date, so the range is 2026-11-14 only.');
      assert.deepEqual(query(), { site: bundle, from: '2026-11-14', to: '2026-11-14' });
      assert.equal(await page.locator('#from').inputValue(), '2026-11-14');
      // 2026-11-14 (p1, p2) against 2026-11-13 (p3, p4).
      assert.deepEqual(await tileValues(), { visitors: '2', pageviews: '7', sessions: '2', bounce_rate: '0%', avg_visit: '15m 0s', avg_engagement: '0s' });
      assert.deepEqual(await changes(page), { visitors: '0%', pageviews: '↑ 40%', sessions: '0%', bounce_rate: '↓ 50 pp', avg_visit: '↑ 650%', avg_engagement: '—' });
      assert.equal(await page.locator('[data-tile="bounce_rate"] .change').getAttribute('data-tone'), 'good');
      // One day in the chart: centred under its own date, not at the edge of an unlabelled axis.
      assert.equal(await page.locator('#chart').getAttribute('data-ticks'), 'Nov 14');
      await page.screenshot({ path: path.join(root, 'test-output', 'dashboard-custom-range.png'), fullPage: true });

      // A day without traffic after one with: counts fall by 100 %; rates and averages of nothing are "—", not a fall.
      await page.locator('#from').fill('2026-11-15');
      await page.locator('#to').fill('2026-11-15');
      await page.click('#apply');
      await shown('2026-11-15', '2026-11-15');
      assert.equal(await page.locator('#range-note').isHidden(), true);
      assert.deepEqual(await changes(page), { visitors: '↓ 100%', pageviews: '↓ 100%', sessions: '↓ 100%', bounce_rate: '—', avg_visit: '—', avg_engagement: '—' });

      // More than 366 days: the end stays, the start moves to end − 365.
      await page.locator('#from').fill('2025-01-01');
      await page.locator('#to').fill('2026-11-22');
      await page.click('#apply');
      await shown('2025-11-22', '2026-11-22');
      assert.equal(await page.locator('#range-note').textContent(), 'A range covers at most 366 days, so it starts on 2025-11-22 instead of 2025-01-01.');
      assert.deepEqual(query(), { site: bundle, from: '2025-11-22', to: '2026-11-22' });
      assert.equal(await page.locator('[data-tile="pageviews"] .value').textContent(), '21');
      assert.equal(await page.locator('#previous').textContent(), 'vs 2024-11-21 – 2025-11-21');

      // Back to a preset: days in the URL again, no note.
      await page.click('button[data-days="7"]');
      await shown('2026-11-16', '2026-11-22');
      assert.deepEqual(query(), { site: bundle, days: '7' });
      assert.equal(await page.locator('#range-note').isHidden(), true);

      // Sorting: by pageviews (the service's order) until a header is clicked.
      const countries = async () => (await rows('country')).map((r) => r.join(' | '));
      const sortState = () => page.$$eval('[data-breakdown="country"] thead th', (ths) => ths.map((th) => th.getAttribute('aria-sort')));
      assert.deepEqual(await countries(), ['SE Sweden | 3 | 4', 'US United States | 1 | 3', 'DE Germany | 2 | 2']);
      assert.deepEqual(await sortState(), [null, null, 'descending']);
      const visitorsHeader = page.locator('[data-breakdown="country"] button[data-sort="visitors"]');
      await visitorsHeader.click();
      assert.deepEqual(await countries(), ['SE Sweden | 3 | 4', 'DE Germany | 2 | 2', 'US United States | 1 | 3']);
      assert.deepEqual(await sortState(), [null, 'descending', null]);
      await visitorsHeader.click();
      assert.deepEqual(await countries(), ['US United States | 1 | 3', 'DE Germany | 2 | 2', 'SE Sweden | 3 | 4']);
      assert.deepEqual(await sortState(), [null, 'ascending', null]);
      await page.screenshot({ path: path.join(root, 'test-output', 'dashboard-sorted.png'), fullPage: true });
      // From the keyboard: Tab reaches the next header, Enter and Space press it; focus stays on it.
      await page.keyboard.press('Tab');
      assert.equal(await page.evaluate(() => (document.activeElement as HTMLElement).dataset.sort), 'pageviews');
      await page.keyboard.press('Enter');
      assert.deepEqual(await countries(), ['SE Sweden | 3 | 4', 'US United States | 1 | 3', 'DE Germany | 2 | 2']);
      assert.deepEqual(await sortState(), [null, null, 'descending']);
      await page.keyboard.press('Space');
      assert.deepEqual(await countries(), ['DE Germany | 2 | 2', 'US United States | 1 | 3', 'SE Sweden | 3 | 4']);
      assert.deepEqual(await sortState(), [null, null, 'ascending']);
      assert.equal(await page.evaluate(() => (document.activeElement as HTMLElement).dataset.sort), 'pageviews');
      // Other breakdowns keep their own order.
      assert.deepEqual(await page.$$eval('[data-breakdown="page"] thead th', (ths) => ths.map((th) => th.getAttribute('aria-sort'))), [null, null, 'descending']);
      // On a phone the controls wrap: nothing wider than the screen.
      await page.setViewportSize({ width: 390, height: 844 });
      await page.clock.runFor(200); // the chart follows the width after a 150 ms pause
      assert.equal(await page.evaluate(() => document.documentElement.scrollWidth <= document.documentElement.clientWidth), true);
      await page.screenshot({ path: path.join(root, 'test-output', 'dashboard-phone.png'), fullPage: true });
      assert.deepEqual(problems, []);
    } finally {
      await context.close();
    }
  });

  it('a sign-in link clicked on another site arrives signed in', async function () {
    this.timeout(60_000);
    const ws = await svc().apply(spec());
    const origin = svc().baseUrl.replace(/\/v1$/, '');
    const { url } = await createSigninLink(svc().db, svc().clock, { workspaceId: ws.workspace_id, memberId: ws.members.olga!, next: `/dashboard?site=${ws.bundles.docs!}`, baseUrl: origin });
    // Another site (localhost, where the service is 127.0.0.1), as a mail or chat page would be.
    const other = http.createServer((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
      res.end(`<a id="link" href="${url}">Sign in</a>`);
    });
    await new Promise<void>((resolve) => other.listen(0, 'localhost', resolve));
    const context = await browser!.newContext();
    try {
      const page = await context.newPage();
      await page.goto(`http://localhost:${(other.address() as AddressInfo).port}/`);
      await Promise.all([page.waitForURL(/\/dashboard/), page.click('#link')]);
      await page.waitForSelector('body[data-ready="true"]', { timeout: 20_000 });
      assert.equal(new URL(page.url()).pathname, '/dashboard');
    } finally {
      await context.close();
      other.close();
    }
  });

  it('says so when the link names a site this workspace does not have, and shows its first site', async function () {
    this.timeout(60_000);
    const ws = await svc().apply(spec());
    const origin = svc().baseUrl.replace(/\/v1$/, '');
    const { url } = await createSigninLink(svc().db, svc().clock, { workspaceId: ws.workspace_id, memberId: ws.members.olga!, next: '/dashboard?site=bn_notthisworkspace', baseUrl: origin });
    const context = await browser!.newContext();
    try {
      const page = await context.newPage();
      await page.goto(url);
      await page.waitForSelector('body[data-ready="true"]', { timeout: 20_000 });
      await page.waitForSelector('#banner:not([hidden])');
      assert.equal(await page.locator('#banner').textContent(), 'This workspace has no site bn_notthisworkspace; showing Docs site (docs.dash.test) instead.');
      assert.equal(await page.locator('#site').inputValue(), ws.bundles.docs!);
      await page.screenshot({ path: path.join(root, 'test-output', 'dashboard-unknown-site.png') });
    } finally {
      await context.close();
    }
  });

  it('signs out when the member clicks "Sign out": the session ends, the page says so', async function () {
    this.timeout(60_000);
    const ws = await svc().apply(spec());
    const origin = svc().baseUrl.replace(/\/v1$/, '');
    const { url } = await createSigninLink(svc().db, svc().clock, { workspaceId: ws.workspace_id, memberId: ws.members.olga!, next: `/dashboard?site=${ws.bundles.docs!}`, baseUrl: origin });
    const context = await browser!.newContext();
    try {
      const page = await context.newPage();
      await page.goto(url);
      await page.waitForSelector('body[data-ready="true"]', { timeout: 20_000 });
      const session = (await context.cookies()).find((c) => c.name === 'wso_session')!.value;
      await Promise.all([page.waitForURL(/\/signout$/), page.click('form.signout button')]);
      assert.equal(await page.textContent('h1'), 'Signed out');
      await page.screenshot({ path: path.join(root, 'test-output', 'signed-out.png') });
      assert.equal((await context.cookies()).some((c) => c.name === 'wso_session'), false);
      // The session is over in the service, not only forgotten by the browser.
      const res = await fetch(`${svc().baseUrl}/operations`, { headers: { Cookie: `wso_session=${session}` } });
      assert.equal(res.status, 401);
      const back = await page.goto(`${origin}/dashboard`);
      assert.equal(back!.status(), 401);
    } finally {
      await context.close();
    }
  });

  it('shows the 401 page pointing to the sign-in page to a browser without a session', async function () {
    const context = await browser!.newContext();
    try {
      const page = await context.newPage();
      const response = await page.goto(`${svc().baseUrl.replace(/\/v1$/, '')}/dashboard`);
      assert.equal(response!.status(), 401);
      assert.match((await page.textContent('main'))!, /Sign in with your e-mail address/);
      assert.equal(await page.getAttribute('main a[href^="/signin"]', 'href'), '/signin?next=%2Fdashboard');
    } finally {
      await context.close();
    }
  });
});
