import assert from 'node:assert/strict';
import http from 'node:http';
import { createAjv } from '../../server/ajv.cjs';
import { document } from '../../generated/document.ts';
import type { WorkspaceSpec } from '../../server/admin.ts';
import { dayOf } from '../../handlers/analytics/input.ts';
import { analyticsSettings } from '../../handlers/analytics/settings.ts';
import { forEachDatabase, type TestService } from '../support/service.ts';

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 86_400_000;
const NOON = Date.UTC(2026, 10, 22, 12, 0, 0);
const TODAY = dayOf(NOON);

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const FIREFOX = 'Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0';
const IPHONE = 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1';
const IPAD = 'Mozilla/5.0 (iPad; CPU OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1';
const GOOGLEBOT = 'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)';

const workspace = (): WorkspaceSpec => ({
  workspace: { name: 'Collect Co' },
  bundles: { docs: { name: 'Docs', domain: 'docs.collect.test' }, shop: { name: 'Shop', domain: 'shop.collect.test' } },
  keys: { reader: { name: 'Reader', operations: ['analytics.*'] } },
});

/** The documented error body (components/schemas/Error.yaml). */
const errorSchema = createAjv().compile<{ error: string; message: string }>((document.components.schemas as Record<string, object>).Error!);

interface Sent {
  status: number;
  headers: Headers;
  body: any;
}

async function send(svc: TestService, body: unknown, options: { headers?: Record<string, string>; contentType?: string | null } = {}): Promise<Sent> {
  const headers: Record<string, string> = { 'User-Agent': FIREFOX, 'X-Test-Ip': '203.0.113.7', ...options.headers };
  if (options.contentType !== null) headers['Content-Type'] = options.contentType ?? 'text/plain;charset=UTF-8';
  const res = await fetch(`${svc.origin}/v1/track`, {
    method: 'POST',
    headers,
    // A Uint8Array body carries no Content-Type of its own (a string would be sent as text/plain).
    body: new TextEncoder().encode(typeof body === 'string' ? body : JSON.stringify(body)),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : '';
  } catch {
    /* keep text */
  }
  return { status: res.status, headers: res.headers, body: parsed };
}

type Row = { visitor: string; type: string; path: string; source: string; campaign: string; referrer_host: string | null; country: string; device: string; browser: string; os: string; engaged_ms: number; ts: number };

async function events(svc: TestService, bundleId: string): Promise<Row[]> {
  await svc.flushEndpoints();
  const rows = await svc.db.sql.all<Row>(`SELECT * FROM analytics_events WHERE bundle_id = ? ORDER BY id`, [bundleId]);
  return rows.map((r) => ({ ...r, ts: Number(r.ts), engaged_ms: Number(r.engaged_ms) }));
}

/** Sends all requests at once over `sockets` keep-alive connections (more connections than the listen backlog would only measure SYN retries). */
async function burst(svc: TestService, requests: Array<{ body: unknown; ip: string }>, sockets = 200): Promise<number[]> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: sockets });
  try {
    return await Promise.all(
      requests.map(
        ({ body, ip }) =>
          new Promise<number>((resolve, reject) => {
            const data = JSON.stringify(body);
            const headers = { 'Content-Type': 'text/plain', 'User-Agent': FIREFOX, 'X-Test-Ip': ip, 'Content-Length': Buffer.byteLength(data) };
            const req = http.request(`${svc.origin}/v1/track`, { method: 'POST', agent, headers }, (res) => {
              res.resume();
              res.on('end', () => resolve(res.statusCode!));
            });
            req.on('error', reject);
            req.end(data);
          }),
      ),
    );
  } finally {
    agent.destroy();
  }
}

const pageview = (key: string, url = 'https://docs.collect.test/', extra: Record<string, unknown> = {}) => ({ key, type: 'pageview', url, ...extra });

forEachDatabase(
  'collection',
  (svc) => {
    async function setup() {
      svc().clock.set(NOON);
      const ws = await svc().apply(workspace());
      return { ws, docs: ws.bundles.docs!, key: ws.collect_keys.docs!, shopKey: ws.collect_keys.shop!, api: svc().client(ws.keys.reader!.secret) };
    }

    it('stores a pageview with everything derived from the request; no cookie is set, the address is not stored', async () => {
      const { docs, key } = await setup();
      const res = await send(svc(), pageview(key, 'https://docs.collect.test/guide/start?utm_source=newsletter&utm_campaign=launch#top', { referrer: 'https://news.example/item?id=1' }), {
        headers: { 'User-Agent': IPHONE, 'CF-IPCountry': 'se' },
      });
      assert.equal(res.status, 202);
      assert.equal(res.body, '');
      assert.equal(res.headers.get('access-control-allow-origin'), '*');
      assert.match(res.headers.get('request-id')!, UUID, 'every answer carries a Request-Id, 202 included');
      assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
      assert.equal(res.headers.get('cache-control'), 'no-store');
      assert.equal(res.headers.get('set-cookie'), null);
      const [e, ...rest] = await events(svc(), docs);
      assert.equal(rest.length, 0);
      assert.deepEqual(
        { type: e!.type, path: e!.path, source: e!.source, campaign: e!.campaign, referrer: e!.referrer_host, country: e!.country, device: e!.device, browser: e!.browser, os: e!.os, ts: e!.ts },
        { type: 'pageview', path: '/guide/start', source: 'newsletter', campaign: 'launch', referrer: 'news.example', country: 'SE', device: 'mobile', browser: 'Safari', os: 'iOS', ts: NOON },
      );
      assert.match(e!.visitor, /^[A-Za-z0-9_-]{22}$/);
      const dump = JSON.stringify(await svc().db.sql.all(`SELECT * FROM analytics_events`)) + svc().logs();
      assert.ok(!dump.includes('203.0.113.7') && !dump.includes('127.0.0.1'), 'the client address is stored or logged');
    });

    it('user agents: device, browser and OS; unknown when not recognised', async () => {
      const { docs, key } = await setup();
      for (const ua of [FIREFOX, IPAD, 'SomethingNew/1.0 (compatible; like nothing else)']) assert.equal((await send(svc(), pageview(key), { headers: { 'User-Agent': ua } })).status, 202);
      const rows = (await events(svc(), docs)).map((e) => [e.device, e.browser, e.os]);
      assert.deepEqual(rows, [
        ['desktop', 'Firefox', 'Linux'],
        ['tablet', 'Safari', 'iOS'],
        ['(unknown)', 'SomethingNew', '(unknown)'], // bowser's best guess of the browser; no device or OS
      ]);
    });

    it('bots and requests without a User-Agent are answered 202 and not stored', async () => {
      const { docs, key } = await setup();
      assert.equal((await send(svc(), pageview(key), { headers: { 'User-Agent': GOOGLEBOT } })).status, 202);
      assert.equal((await send(svc(), pageview(key), { headers: { 'User-Agent': 'curl/8.5.0' } })).status, 202);
      assert.equal((await send(svc(), pageview(key), { headers: { 'User-Agent': '' } })).status, 202);
      assert.equal((await events(svc(), docs)).length, 0);
    });

    it('source and referrer: utm_source wins, then the referrer host; a referrer on the page host is internal (no referrer)', async () => {
      const { docs, key, api } = await setup();
      const cases = [
        pageview(key, 'https://docs.collect.test/a?utm_source=ads', { referrer: 'https://search.example/q' }),
        pageview(key, 'https://docs.collect.test/b', { referrer: 'https://search.example/q' }),
        pageview(key, 'https://docs.collect.test/c', { referrer: 'https://docs.collect.test/a' }),
        pageview(key, 'https://docs.collect.test/d', { referrer: '' }),
        pageview(key, 'https://docs.collect.test/e', { referrer: null }),
        pageview(key, 'https://Docs.Collect.Test:8443/f', { referrer: 'http://docs.collect.test/x' }),
      ];
      for (const c of cases) assert.equal((await send(svc(), c)).status, 202);
      const rows = (await events(svc(), docs)).map((e) => [e.path, e.source, e.referrer_host, e.campaign]);
      assert.deepEqual(rows, [
        ['/a', 'ads', 'search.example', '(none)'],
        ['/b', 'search.example', 'search.example', '(none)'],
        ['/c', 'Direct / None', null, '(none)'],
        ['/d', 'Direct / None', null, '(none)'],
        ['/e', 'Direct / None', null, '(none)'],
        ['/f', 'Direct / None', null, '(none)'],
      ]);
      const sources = await api.analytics.GetSiteAnalyticsBreakdown({ bundle_id: docs, dimension: 'source', from: TODAY, to: TODAY });
      assert.deepEqual(sources.data!.rows.map((r) => [r.value, r.pageviews]), [['Direct / None', 4], ['ads', 1], ['search.example', 1]]);
    });

    it('same address and User-Agent on the same day are one visitor; another address, another site or the next day are not', async () => {
      const { ws, docs, key, shopKey } = await setup();
      await send(svc(), pageview(key));
      svc().clock.advance(2 * HOUR);
      await send(svc(), pageview(key));
      await send(svc(), pageview(key), { headers: { 'X-Test-Ip': '203.0.113.8' } });
      await send(svc(), pageview(key), { headers: { 'User-Agent': IPHONE } });
      await send(svc(), pageview(shopKey, 'https://shop.collect.test/'));
      svc().clock.advance(DAY);
      await send(svc(), pageview(key));
      const v = (await events(svc(), docs)).map((e) => e.visitor);
      assert.equal(v[0], v[1]);
      assert.equal(new Set(v).size, 4);
      const shop = (await events(svc(), ws.bundles.shop!))[0]!;
      assert.ok(!v.includes(shop.visitor));
    });

    it('a session crossing midnight keeps its visitor and is one session; after a 30-minute gap the new day\'s visitor is used', async () => {
      const { docs, key, api } = await setup();
      svc().clock.set(Date.UTC(2026, 10, 22, 23, 50));
      await send(svc(), pageview(key, 'https://docs.collect.test/one'));
      await svc().flushEndpoints();
      svc().clock.set(Date.UTC(2026, 10, 23, 0, 5));
      await send(svc(), pageview(key, 'https://docs.collect.test/two'));
      svc().clock.set(Date.UTC(2026, 10, 23, 0, 20));
      await send(svc(), { key, type: 'engagement', url: 'https://docs.collect.test/two', engaged_ms: 9000 }); // still queued
      svc().clock.set(Date.UTC(2026, 10, 23, 0, 45));
      await send(svc(), pageview(key, 'https://docs.collect.test/three'));
      // Another visitor starts after midnight: today's id.
      await send(svc(), pageview(key, 'https://docs.collect.test/one'), { headers: { 'X-Test-Ip': '198.51.100.1' } });
      const rows = await events(svc(), docs);
      assert.equal(rows[0]!.visitor, rows[1]!.visitor);
      assert.equal(rows[1]!.visitor, rows[2]!.visitor);
      assert.equal(rows[2]!.visitor, rows[3]!.visitor);
      assert.notEqual(rows[4]!.visitor, rows[0]!.visitor);
      const day = TODAY;
      const both = await api.analytics.GetSiteAnalyticsSummary({ bundle_id: docs, from: day, to: day + 1 });
      assert.equal(both.data!.sessions, 2); // one from 23:50 to 00:45, one of the other visitor
      assert.equal(both.data!.pageviews, 4);
      assert.deepEqual(both.data!.series.map((d) => [d.day, d.pageviews, d.visitors, d.sessions]), [
        [day, 1, 1, 1],
        [day + 1, 3, 2, 1],
      ]);
      // A later visit of the same person after a gap of 30 minutes or more: the new day's id.
      svc().clock.set(Date.UTC(2026, 10, 23, 2, 0));
      await send(svc(), pageview(key, 'https://docs.collect.test/four'));
      const later = await events(svc(), docs);
      assert.notEqual(later[5]!.visitor, rows[0]!.visitor);
    });

    it('the carry-over also sees an event still queued from before midnight', async () => {
      const { docs, key } = await setup();
      svc().clock.set(Date.UTC(2026, 10, 24, 23, 59, 59));
      await send(svc(), pageview(key, 'https://docs.collect.test/late'));
      assert.equal(svc().endpoints.analytics!.queued, 1);
      svc().clock.set(Date.UTC(2026, 10, 25, 0, 0, 30));
      await send(svc(), pageview(key, 'https://docs.collect.test/later'));
      const rows = await events(svc(), docs);
      assert.equal(rows.length, 2);
      assert.equal(rows[0]!.visitor, rows[1]!.visitor);
    });

    it('daily salts: one per UTC day, shared through the database; the job deletes those older than 48 hours', async () => {
      const { key } = await setup();
      svc().clock.set(Date.UTC(2026, 11, 1, 10));
      await send(svc(), pageview(key));
      svc().clock.advance(DAY);
      await send(svc(), pageview(key));
      const salts = async () => (await svc().db.sql.all<{ day: number }>(`SELECT day FROM analytics_salts ORDER BY day`)).map((r) => Number(r.day));
      const dec1 = dayOf(Date.UTC(2026, 11, 1));
      assert.deepEqual((await salts()).filter((d) => d >= dec1), [dec1, dec1 + 1]);
      await svc().jobs.scheduleRecurring();
      svc().clock.advance(2 * DAY + 1);
      await svc().db.sql.run(`UPDATE jobs SET run_at = ? WHERE kind = 'analytics.salts.prune'`, [svc().clock.now()]);
      await svc().jobs.runDue();
      assert.deepEqual(await salts(), []);
      await send(svc(), pageview(key)); // a new salt for the new day
      assert.deepEqual(await salts(), [dayOf(svc().clock.now())]);
    });

    it('country comes from the configured header, only as an ISO 3166-1 alpha-2 code', async () => {
      const { docs, key } = await setup();
      for (const value of ['DE', ' fr ', 'XX', 'T1', 'EU', 'Sweden', '']) await send(svc(), pageview(key), { headers: { 'CF-IPCountry': value } });
      await send(svc(), pageview(key));
      assert.deepEqual((await events(svc(), docs)).map((e) => e.country), ['DE', 'FR', '(unknown)', '(unknown)', '(unknown)', '(unknown)', '(unknown)', '(unknown)']);
    });

    it('bad input gets the documented 4xx body and stores nothing', async () => {
      const { docs, key } = await setup();
      const url = 'https://docs.collect.test/';
      const cases: Array<[string, unknown, number, string, { contentType?: string | null }?]> = [
        ['not JSON', '{"key":', 400, 'invalid_json'],
        ['an array', '[]', 400, 'invalid_json'],
        ['a string', '"pageview"', 400, 'invalid_json'],
        ['empty body', '', 400, 'invalid_json'],
        ['form content type', pageview(key), 400, 'invalid_json', { contentType: 'application/x-www-form-urlencoded' }],
        ['latin-1 charset', pageview(key), 400, 'invalid_json', { contentType: 'text/plain; charset=iso-8859-1' }],
        ['no content type', pageview(key), 400, 'invalid_json', { contentType: null }],
        ['missing key', { type: 'pageview', url }, 400, 'invalid_input'],
        ['missing url', { key, type: 'pageview' }, 400, 'invalid_input'],
        ['unknown type', { key, type: 'click', url }, 400, 'invalid_input'],
        ['unknown field', { ...pageview(key), ts: 1 }, 400, 'invalid_input'],
        ['relative url', pageview(key, '/pricing'), 400, 'invalid_input'],
        ['non-http url', pageview(key, 'ftp://docs.collect.test/'), 400, 'invalid_input'],
        ['url too long', pageview(key, `${url}${'a'.repeat(2000)}`), 400, 'invalid_input'],
        ['utm_source too long', pageview(key, `${url}?utm_source=${'s'.repeat(600)}`), 400, 'invalid_input'],
        ['engagement without engaged_ms', { key, type: 'engagement', url }, 400, 'invalid_input'],
        ['pageview with engaged_ms', { ...pageview(key), engaged_ms: 10 }, 400, 'invalid_input'],
        ['negative engaged_ms', { key, type: 'engagement', url, engaged_ms: -1 }, 400, 'invalid_input'],
        ['fractional engaged_ms', { key, type: 'engagement', url, engaged_ms: 1.5 }, 400, 'invalid_input'],
        ['engaged_ms as text', { key, type: 'engagement', url, engaged_ms: '10' }, 400, 'invalid_input'],
        ['referrer as number', { ...pageview(key), referrer: 5 }, 400, 'invalid_input'],
        ['unknown key', pageview('pk_unknown0000000000000000000'), 404, 'not_found'],
        ['body over 8 KB', { ...pageview(key), referrer: 'x'.repeat(9000) }, 413, 'invalid_input'],
      ];
      for (const [what, body, status, code, opts] of cases) {
        const res = await send(svc(), body, opts);
        assert.equal(res.status, status, `${what}: ${JSON.stringify(res.body)}`);
        assert.ok(errorSchema(res.body), `${what}: body ${JSON.stringify(res.body)} is not the documented error`);
        assert.equal(res.body.error, code, what);
        assert.equal(res.headers.get('access-control-allow-origin'), '*', what);
      }
      assert.equal((await events(svc(), docs)).length, 0);
      // A body sent in chunks without Content-Length is limited too.
      const stream = new ReadableStream({
        start(c) {
          for (let i = 0; i < 10; i++) c.enqueue(new TextEncoder().encode('x'.repeat(1000)));
          c.close();
        },
      });
      const res = await fetch(`${svc().origin}/v1/track`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: stream, duplex: 'half' } as RequestInit);
      assert.equal(res.status, 413);
    });

    it('CORS preflight; application/json bodies are accepted as well as text/plain', async () => {
      const { docs, key } = await setup();
      const pre = await fetch(`${svc().origin}/v1/track`, {
        method: 'OPTIONS',
        headers: { Origin: 'https://docs.collect.test', 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'content-type' },
      });
      assert.equal(pre.status, 204);
      assert.equal(pre.headers.get('access-control-allow-origin'), '*');
      assert.match(pre.headers.get('access-control-allow-methods')!, /POST/);
      assert.match(pre.headers.get('access-control-allow-headers')!, /content-type/i);
      assert.equal(pre.headers.get('access-control-max-age'), '86400');
      assert.match(pre.headers.get('request-id')!, UUID, 'the preflight carries a Request-Id');
      assert.equal((await send(svc(), pageview(key), { contentType: 'application/json' })).status, 202);
      assert.equal((await events(svc(), docs)).length, 1);
      // Other methods on the path are not the collector's: the operations path answers (no API key).
      const get = await fetch(`${svc().origin}/v1/track`);
      assert.equal(get.status, 401);
    });

    it('serves the tracker script with JavaScript type, caching and CORS', async () => {
      const res = await fetch(`${svc().origin}/v1/track.js`);
      assert.equal(res.status, 200);
      assert.match(res.headers.get('request-id')!, UUID);
      assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
      assert.match(res.headers.get('content-type')!, /^text\/javascript/);
      assert.equal(res.headers.get('cache-control'), 'public, max-age=3600');
      assert.equal(res.headers.get('access-control-allow-origin'), '*');
      const text = await res.text();
      assert.match(text, /sendBeacon/);
      const again = await fetch(`${svc().origin}/v1/track.js`, { headers: { 'If-None-Match': res.headers.get('etag')! } });
      assert.equal(again.status, 304);
      assert.match(again.headers.get('request-id')!, UUID);
      assert.notEqual(again.headers.get('request-id'), res.headers.get('request-id'));
      const head = await fetch(`${svc().origin}/v1/track.js`, { method: 'HEAD' });
      assert.match(head.headers.get('request-id')!, UUID);
    });

    it('a rotated collect key is refused once the cache expires; the new one works', async () => {
      const { docs, key } = await setup();
      assert.equal((await send(svc(), pageview(key))).status, 202);
      const { collectKey } = await import('../../handlers/analytics/admin.ts');
      const rotated = await collectKey(svc().db, docs, true);
      assert.notEqual(rotated.collect_key, key);
      svc().clock.advance(61_000);
      assert.equal((await send(svc(), pageview(key))).status, 404);
      assert.equal((await send(svc(), pageview(rotated.collect_key))).status, 202);
      assert.equal((await events(svc(), docs)).length, 2);
    });

    it('a burst of 2,000 concurrent requests is stored exactly once each; the figures match', async function () {
      this.timeout(60_000);
      const { docs, key, api } = await setup();
      const n = 2000;
      const statuses = await burst(
        svc(),
        Array.from({ length: n }, (_, i) => ({ body: pageview(key, `https://docs.collect.test/p${i % 10}`), ip: `10.0.${Math.floor(i / 250)}.${i % 250}` })),
      );
      assert.deepEqual([...new Set(statuses)], [202]);
      const rows = await events(svc(), docs);
      assert.equal(rows.length, n);
      assert.equal(new Set(rows.map((r) => r.visitor)).size, n);
      const { data } = await api.analytics.GetSiteAnalyticsSummary({ bundle_id: docs, from: TODAY, to: TODAY });
      assert.equal(data!.pageviews, n);
      assert.equal(data!.visitors, n);
      assert.equal(data!.sessions, n);
      assert.equal(data!.bounces, n);
      const pages = await api.analytics.GetSiteAnalyticsBreakdown({ bundle_id: docs, dimension: 'page', from: TODAY, to: TODAY, limit: 10 });
      assert.deepEqual(pages.data!.rows.map((r) => r.pageviews), Array(10).fill(n / 10));
    });

    it('pageview and engagement through HTTP give the documented figures', async () => {
      const { docs, key, api } = await setup();
      await send(svc(), pageview(key, 'https://docs.collect.test/a'));
      svc().clock.advance(20_000);
      await send(svc(), { key, type: 'engagement', url: 'https://docs.collect.test/a', engaged_ms: 18_000 });
      svc().clock.advance(1000);
      await send(svc(), pageview(key, 'https://docs.collect.test/b', { referrer: 'https://docs.collect.test/a' }));
      await svc().flushEndpoints();
      const { data } = await api.analytics.GetSiteAnalyticsSummary({ bundle_id: docs, from: TODAY, to: TODAY });
      assert.equal(data!.pageviews, 2);
      assert.equal(data!.visitors, 1);
      assert.equal(data!.sessions, 1);
      assert.equal(data!.bounces, 0);
      assert.equal(data!.avg_visit_ms, 21_000);
      assert.equal(data!.avg_engagement_ms, 9000);
      const realtime = await api.analytics.GetSiteAnalyticsRealtime({ bundle_id: docs });
      assert.equal(realtime.data!.visitors, 1);
    });
  },
  { env: { COLLECT_CLIENT_IP_HEADER: 'x-test-ip', COLLECT_COUNTRY_HEADER: 'cf-ipcountry' } },
);

forEachDatabase('collection without proxy headers', (svc) => {
  it('uses the socket address and stores no country when no header is configured', async () => {
    svc().clock.set(NOON);
    const ws = await svc().apply(workspace());
    const key = ws.collect_keys.docs!;
    await send(svc(), pageview(key), { headers: { 'CF-IPCountry': 'DE', 'X-Test-Ip': '1.1.1.1' } });
    await send(svc(), pageview(key), { headers: { 'CF-IPCountry': 'DE', 'X-Test-Ip': '2.2.2.2' } });
    const rows = await events(svc(), ws.bundles.docs!);
    assert.deepEqual(rows.map((r) => r.country), ['(unknown)', '(unknown)']);
    assert.equal(rows[0]!.visitor, rows[1]!.visitor); // the header is ignored: same socket address
  });

  it('answers 503 with Retry-After when the queue is full, before checking the body, and stores nothing of that request', async () => {
    svc().clock.set(NOON);
    const ws = await svc().apply(workspace());
    const key = ws.collect_keys.docs!;
    const sends = await Promise.all(Array.from({ length: 3 }, () => send(svc(), pageview(key))));
    assert.deepEqual(sends.map((s) => s.status), [202, 202, 202]);
    const full = await send(svc(), pageview(key));
    assert.equal(full.status, 503);
    assert.equal(full.body.error, 'unavailable');
    assert.equal(full.headers.get('retry-after'), '1');
    assert.ok(errorSchema(full.body));
    // The refusal comes before the body is read or checked (refusing must cost next to nothing).
    const bad = await send(svc(), '{not json');
    assert.equal(bad.status, 503);
    assert.equal(bad.body.error, 'unavailable');
    assert.equal((await events(svc(), ws.bundles.docs!)).length, 3);
    assert.equal((await send(svc(), pageview(key))).status, 202);
    // Operators see the episode: when refusing began, and how many were refused once it ended.
    const lines = svc().logs().trim().split('\n').map((l) => JSON.parse(l) as { level: number; msg: string; queued?: number; refused?: number });
    assert.ok(lines.some((l) => l.level === 40 && /queue is full/.test(l.msg) && l.queued === 3));
    assert.ok(lines.some((l) => l.level === 40 && /taking events again/.test(l.msg) && l.refused === 2));
  });
}, { env: { COLLECT_BUFFER_MAX: '3', COLLECT_BATCH_SIZE: '1000' } });

forEachDatabase('collection limits', (svc) => {
  async function setup() {
    svc().clock.set(NOON);
    const ws = await svc().apply(workspace());
    return { ws, docs: ws.bundles.docs!, shop: ws.bundles.shop!, key: ws.collect_keys.docs!, shopKey: ws.collect_keys.shop! };
  }
  const from = (ip: string) => ({ headers: { 'X-Test-Ip': ip } });
  const stored = async (bundleId: string) => (await events(svc(), bundleId)).length;

  it('one client address over its limit gets 429 rate_limited with Retry-After, before its body is read; other addresses are not held back', async () => {
    const { docs, key } = await setup();
    const sends = [];
    for (let i = 0; i < 4; i++) sends.push(await send(svc(), pageview(key), from('198.51.100.1')));
    assert.deepEqual(sends.map((s) => s.status), [202, 202, 202, 429]);
    const refused = sends[3]!;
    assert.equal(refused.body.error, 'rate_limited');
    assert.match(refused.body.message, /client address/);
    assert.equal(refused.headers.get('retry-after'), '1');
    assert.equal(refused.headers.get('access-control-allow-origin'), '*');
    assert.equal(refused.headers.get('cache-control'), 'no-store');
    assert.equal(refused.headers.get('x-content-type-options'), 'nosniff');
    assert.match(refused.headers.get('request-id')!, UUID);
    assert.equal(refused.body.request_id, refused.headers.get('request-id'));
    assert.ok(errorSchema(refused.body));
    // Refused before the body is read or checked: refusing a flood costs next to nothing.
    assert.equal((await send(svc(), '{not json', from('198.51.100.1'))).status, 429);
    assert.equal((await send(svc(), pageview(key), from('198.51.100.2'))).status, 202);
    svc().clock.advance(1000); // one token per second
    assert.equal((await send(svc(), pageview(key), from('198.51.100.1'))).status, 202);
    assert.equal((await send(svc(), pageview(key), from('198.51.100.1'))).status, 429);
    assert.equal(await stored(docs), 5);
  });

  it('one site flooding from many addresses is limited by its collect key; another site\'s events are all taken and the shared queue never fills', async () => {
    const { docs, shop, key, shopKey } = await setup();
    // 30 requests for docs from 30 addresses: the key's burst (5) is taken, the rest refused with 429.
    const flood = await burst(svc(), Array.from({ length: 30 }, (_, i) => ({ body: pageview(key), ip: `192.0.2.${i + 1}` })));
    assert.equal(flood.filter((s) => s === 202).length, 5);
    assert.equal(flood.filter((s) => s === 429).length, 25);
    const refused = await send(svc(), pageview(key), from('192.0.2.200'));
    assert.equal(refused.status, 429);
    assert.equal(refused.body.error, 'rate_limited');
    assert.match(refused.body.message, /collect key/);
    assert.equal(refused.headers.get('retry-after'), '1');
    assert.equal(svc().endpoints.analytics!.refused, 0, 'no 503: the queue (10) never filled');
    // The other site, meanwhile: every event taken (its own burst is untouched).
    const shopSends = await burst(svc(), Array.from({ length: 5 }, (_, i) => ({ body: pageview(shopKey, 'https://shop.collect.test/'), ip: `203.0.113.${i + 10}` })));
    assert.deepEqual(shopSends, [202, 202, 202, 202, 202]);
    assert.equal(await stored(docs), 5);
    assert.equal(await stored(shop), 5);
    // The key refills at its rate (2 per second).
    svc().clock.advance(500);
    assert.equal((await send(svc(), pageview(key), from('192.0.2.201'))).status, 202);
    assert.equal((await send(svc(), pageview(key), from('192.0.2.202'))).status, 429);
  });

  it('bots count against the key and the address too; an unknown key is 404 and spends no site\'s budget', async () => {
    const { docs, key } = await setup();
    assert.equal((await send(svc(), pageview('pk_unknown'), from('198.51.100.9'))).status, 404);
    const bots = [];
    for (let i = 0; i < 5; i++) bots.push((await send(svc(), pageview(key), { headers: { 'X-Test-Ip': `198.51.100.${20 + i}`, 'User-Agent': GOOGLEBOT } })).status);
    assert.deepEqual(bots, [202, 202, 202, 202, 202]);
    assert.equal((await send(svc(), pageview(key), from('198.51.100.30'))).status, 429);
    assert.equal(await stored(docs), 0);
  });

  it('settings are read by the module and refused with a readable error', () => {
    assert.throws(() => analyticsSettings({ COLLECT_KEY_BURST: '0' }), /COLLECT_KEY_BURST must be a number >= 1 \(got "0"\)/);
    assert.throws(() => analyticsSettings({ COLLECT_ADDRESS_RATE_PER_SECOND: 'fast' }), /COLLECT_ADDRESS_RATE_PER_SECOND must be a number/);
    assert.throws(() => analyticsSettings({ COLLECT_WRITER: 'disk' }), /COLLECT_WRITER must be thread or inline/);
    assert.deepEqual(
      (({ collectKeyRatePerSecond, collectKeyBurst, collectAddressRatePerSecond, collectAddressBurst }) => ({ collectKeyRatePerSecond, collectKeyBurst, collectAddressRatePerSecond, collectAddressBurst }))(analyticsSettings({})),
      { collectKeyRatePerSecond: 1000, collectKeyBurst: 5000, collectAddressRatePerSecond: 50, collectAddressBurst: 500 },
    );
    assert.equal(svc().config.env.COLLECT_KEY_BURST, '5', 'the service was started with the module settings of this suite');
  });
}, {
  env: {
    COLLECT_CLIENT_IP_HEADER: 'x-test-ip',
    COLLECT_BUFFER_MAX: '10',
    COLLECT_BATCH_SIZE: '1000',
    COLLECT_ADDRESS_RATE_PER_SECOND: '1',
    COLLECT_ADDRESS_BURST: '3',
    COLLECT_KEY_RATE_PER_SECOND: '2',
    COLLECT_KEY_BURST: '5',
  },
});
