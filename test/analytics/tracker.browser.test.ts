/**
 * The tracker script (/v1/track.js) in headless Chromium (Debian's /usr/bin/chromium driven by
 * playwright-core), on a page of another origin: a pageview on load and on pushState navigation,
 * engagement with the active time (the page's clock is driven by the test) before the next
 * navigation, when the tab is hidden and when the page closes. Skipped, loudly, when Chromium is
 * missing, unless REQUIRE_BROWSER=1.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser } from 'playwright-core';
import { dayOf } from '../../handlers/analytics/ingest.ts';
import { announceBrowser, launchBrowser } from '../support/browser.ts';
import { forEachDatabase, type TestService } from '../support/service.ts';

/** Headless Chromium says "HeadlessChrome", which the bot filter drops; browse as a desktop Chrome. */
const CHROME_UA = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';

announceBrowser('the tracker browser test');

type Stored = { type: string; path: string; source: string; referrer_host: string | null; engaged_ms: number; visitor: string; browser: string; os: string; device: string };

/** Waits (the browser sends on its own schedule) until `n` events of the site are stored. */
async function storedEvents(svc: TestService, bundleId: string, n: number): Promise<Stored[]> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    await svc.flushEndpoints();
    const rows = await svc.db.sql.all<Stored>(`SELECT type, path, source, referrer_host, engaged_ms, visitor, browser, os, device FROM analytics_events WHERE bundle_id = ? ORDER BY id`, [bundleId]);
    if (rows.length >= n) return rows.map((r) => ({ ...r, engaged_ms: Number(r.engaged_ms) }));
    if (Date.now() > deadline) throw new Error(`waited 20 s for ${n} stored events of the site; there are ${rows.length}: ${JSON.stringify(rows)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

forEachDatabase('tracker script in headless Chromium', (svc) => {
  let browser: Browser | undefined;
  let site: http.Server | undefined;
  let siteOrigin = '';
  let scriptTag = '';

  before(async function () {
    browser = await launchBrowser(this);
    // The customer's site: another origin (localhost:PORT, the API is 127.0.0.1:PORT') with the snippet in every page.
    site = http.createServer((req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
      res.end(`<!doctype html><html><head><title>Site</title>${scriptTag}</head><body><h1>${req.url?.replace(/[<>&"]/g, '')}</h1></body></html>`);
    });
    await new Promise<void>((resolve) => site!.listen(0, '127.0.0.1', resolve));
    siteOrigin = `http://localhost:${(site.address() as AddressInfo).port}`;
  });
  after(async () => {
    await browser?.close();
    if (site) await new Promise((resolve) => site!.close(resolve));
  });

  it('sends pageviews on load and pushState, and engagement before navigation, on hide and on close', async function () {
    this.timeout(60_000);
    const ws = await svc().apply({ workspace: { name: 'Tracker Co' }, bundles: { site: { name: 'Site', domain: 'localhost' } }, keys: { reader: { name: 'Reader', operations: ['analytics.*'] } } });
    const bundle = ws.bundles.site!;
    scriptTag = `<script defer src="${svc().baseUrl}/track.js" data-key="${ws.collect_keys.site}"></script>`;

    const context = await browser!.newContext({ userAgent: CHROME_UA });
    const page = await context.newPage();
    const problems: string[] = [];
    page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
    page.on('console', (msg) => {
      if (msg.type() === 'error') problems.push(`console: ${msg.text()}`);
    });
    // The page's clock stands still unless the test moves it, so engaged_ms is exact.
    await page.clock.install({ time: new Date('2026-11-22T12:00:00Z') });
    // A minute ahead: the clock runs in real time until then, and pausing in its past would throw.
    await page.clock.pauseAt(new Date('2026-11-22T12:01:00Z'));

    await page.goto(`${siteOrigin}/docs/start`, { referer: 'https://news.example/item?id=1' });
    let rows = await storedEvents(svc(), bundle, 1);
    assert.deepEqual(rows.map((r) => [r.type, r.path, r.source]), [['pageview', '/docs/start', 'news.example']]);

    // Client-side navigation: engagement for the page left, then a pageview (the old URL as referrer is internal).
    await page.clock.fastForward(5000);
    await page.evaluate(() => history.pushState({}, '', '/docs/next?utm_source=sidebar'));
    // Same path, another query: no pageview.
    await page.evaluate(() => history.replaceState({}, '', '/docs/next?tab=2'));
    rows = await storedEvents(svc(), bundle, 3);
    // Two beacons sent back to back may arrive in either order: compare them by type.
    assert.deepEqual(rows.slice(1).sort((a, b) => a.type.localeCompare(b.type)).map((r) => [r.type, r.path, r.engaged_ms, r.source]), [
      ['engagement', '/docs/start', 5000, 'news.example'],
      ['pageview', '/docs/next', 0, 'sidebar'],
    ]);

    // The tab is hidden after 3 s: engagement; hidden time does not count.
    await page.clock.fastForward(3000);
    await page.evaluate(() => {
      Object.defineProperty(document, 'visibilityState', { value: 'hidden', configurable: true });
      document.dispatchEvent(new Event('visibilitychange'));
    });
    await page.clock.fastForward(60_000);
    await page.evaluate(() => {
      Object.defineProperty(document, 'visibilityState', { value: 'visible', configurable: true });
      document.dispatchEvent(new Event('visibilitychange'));
    });
    rows = await storedEvents(svc(), bundle, 4);
    assert.deepEqual(rows.slice(3).map((r) => [r.type, r.path, r.engaged_ms]), [['engagement', '/docs/next', 3000]]);

    // Visible again for 2 s, then the page is closed: the last engagement goes out with sendBeacon.
    await page.clock.fastForward(2000);
    await page.close({ runBeforeUnload: true });
    rows = await storedEvents(svc(), bundle, 5);
    assert.deepEqual(rows.slice(4).map((r) => [r.type, r.path, r.engaged_ms]), [['engagement', '/docs/next', 2000]]);
    await context.close();

    assert.equal(rows.length, 5);
    assert.equal(new Set(rows.map((r) => r.visitor)).size, 1);
    assert.deepEqual([rows[0]!.browser, rows[0]!.os, rows[0]!.device], ['Chrome', 'Linux', 'desktop']);
    assert.deepEqual(problems, []);

    const today = dayOf(svc().clock.now());
    const { data } = await svc().client(ws.keys.reader!.secret).analytics.GetSiteAnalyticsSummary({ bundle_id: bundle, from: today, to: today });
    assert.equal(data!.pageviews, 2);
    assert.equal(data!.visitors, 1);
    assert.equal(data!.sessions, 1);
    assert.equal(data!.bounces, 0);
    assert.equal(data!.avg_engagement_ms, 5000); // (5000 + 3000 + 2000) / 2 pageviews
  });
});
