import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { demoTraffic } from '../../scripts/demo-traffic.ts';
import { bulkLoadEvents } from '../../handlers/analytics/bulk.ts';
import { maintainedFigures, queryTimeSiteSummary, recomputeFigures } from '../../handlers/analytics/figures.ts';
import { importEvents } from '../../handlers/analytics/import.ts';
import { ingestEvents } from '../../handlers/analytics/ingest.ts';
import { type AnalyticsEventInput, DAY_MS, dayOf, normalizeEvent } from '../../handlers/analytics/input.ts';
import { forEachDatabase, type TestService } from '../support/service.ts';

const MIN = 60_000;
/** 2026-11-22 12:00 UTC, the tests' "now". */
const NOW = Date.UTC(2026, 10, 22, 12);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

async function assertConsistent(svc: TestService, bundleId: string) {
  assert.deepEqual(await maintainedFigures(svc.db.sql, bundleId), await recomputeFigures(svc.db.sql, bundleId));
}

/** Strings that need quoting or escaping in SQL arrays and JSON. */
const AWKWARD = ['/a"b', '/c\\d', '/NULL', '/{x,y}', '/sp ace', "/it's", '/ü€😀', '/,'];

forEachDatabase('analytics bulk load', (svc) => {
  async function sites(n: number) {
    svc().clock.set(NOW);
    const ws = await svc().apply({ workspace: { name: 'Bulk' }, bundles: Object.fromEntries(Array.from({ length: n }, (_, i) => [`s${i}`, { name: `Site ${i}`, domain: `s${i}.test` }])) });
    return { ws, ids: Object.values(ws.bundles) };
  }

  const traffic = (seed: number, totalEvents: number, sitesN = 1) => demoTraffic({ seed, sites: sitesN, days: 7, totalEvents, end: NOW });

  it('gives the same figures as a recomputation, with awkward strings, and the same as incremental import', async function () {
    this.timeout(60_000);
    const { ids } = await sites(2);
    const events = traffic(1, 3000)[0]!.map((e, i): AnalyticsEventInput => (i % 50 === 0 ? { ...e, path: AWKWARD[i % AWKWARD.length]!, referrer: 'https://x.test/"q"\\', utm_campaign: '{a,b}' } : e));
    const progress: string[] = [];
    const summary = await bulkLoadEvents(svc().db, ids[0]!, events.map((e) => normalizeEvent(ids[0]!, e)), { onProgress: (n, total, phase) => progress.push(`${phase}:${n}/${total}`) });
    assert.equal(summary.events, 3000);
    assert.equal(summary.sessions_removed, 0);
    assert.ok(summary.sessions_added > 300);
    assert.equal(progress[0], 'store:3000/3000');
    assert.equal(progress[progress.length - 1], 'rebuild:3000/3000');
    await assertConsistent(svc(), ids[0]!);
    // The same events through incremental import, in another site: the same figures.
    await importEvents(svc().db, ids[1]!, events.map((e) => normalizeEvent(ids[1]!, e)), { chunkSize: 500 });
    assert.deepEqual(await maintainedFigures(svc().db.sql, ids[0]!), await maintainedFigures(svc().db.sql, ids[1]!));
  });

  it('rebuilds from all stored events when the site already had events, and incremental ingestion goes on exactly', async function () {
    this.timeout(60_000);
    const { ids } = await sites(1);
    const site = ids[0]!;
    const all = traffic(2, 4000)[0]!.map((e) => normalizeEvent(site, e));
    // Every third event first, incrementally and newest first; then the rest in bulk, read back in
    // small pages so that pages end inside visitors.
    const early = all.filter((_, i) => i % 3 === 0).reverse();
    const late = all.filter((_, i) => i % 3 !== 0);
    for (let i = 0; i < early.length; i += 400) await ingestEvents(svc().db, early.slice(i, i + 400));
    await assertConsistent(svc(), site);
    const before = (await maintainedFigures(svc().db.sql, site)).sessions.length;
    const summary = await bulkLoadEvents(svc().db, site, late, { pageRows: 7 });
    assert.equal(summary.sessions_removed, before);
    await assertConsistent(svc(), site);
    // One visitor with more events than a page holds.
    const busy = Array.from({ length: 30 }, (_, k): AnalyticsEventInput => ({ type: k % 3 ? 'pageview' : 'engagement', ts: NOW - 3 * DAY_MS + k * 7 * MIN, visitor: 'busy', path: `/b${k % 4}`, engaged_ms: k }));
    await bulkLoadEvents(svc().db, site, busy.map((e) => normalizeEvent(site, e)), { pageRows: 5 });
    await assertConsistent(svc(), site);
    // Live batches afterwards, including one that joins two bulk-loaded sessions of "busy".
    const later = traffic(3, 500)[0]!.map((e) => normalizeEvent(site, { ...e, ts: e.ts - 2 * DAY_MS }));
    for (let i = 0; i < later.length; i += 100) await ingestEvents(svc().db, later.slice(i, i + 100));
    await ingestEvents(svc().db, [normalizeEvent(site, { type: 'pageview', ts: NOW - 3 * DAY_MS + 29 * 7 * MIN + 20 * MIN, visitor: 'busy', path: '/late' })]);
    await assertConsistent(svc(), site);
    const { ids: fresh } = await sites(1);
    await bulkLoadEvents(svc().db, fresh[0]!, [], {});
    await assertConsistent(svc(), fresh[0]!);
  });

  it('imports a file through the CLI in bulk (auto from 20,000 events, or --method bulk)', async function () {
    this.timeout(60_000);
    const { ids } = await sites(1);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wsops-bulk-'));
    const file = path.join(dir, 'history.ndjson');
    const events = traffic(4, 1500)[0]!;
    fs.writeFileSync(file, events.map((e) => JSON.stringify(e)).join('\n') + '\n');
    const run = async (...args: string[]) => {
      try {
        const { stdout } = await promisify(execFile)(path.join(root, 'node_modules/.bin/tsx'), [path.join(root, 'scripts/admin.ts'), '--json', ...args], { env: { ...process.env, DATABASE_URL: svc().databaseUrl }, cwd: root });
        return { code: 0, stdout };
      } catch (err) {
        return { code: 1, stdout: '', stderr: (err as { stderr: string }).stderr };
      }
    };
    const bad = await run('analytics', 'import', '--bundle', ids[0]!, '--method', 'fast', file);
    assert.equal(bad.code, 1);
    const done = await run('analytics', 'import', '--bundle', ids[0]!, '--method', 'bulk', file);
    assert.equal(done.code, 0);
    const summary = JSON.parse(done.stdout);
    assert.equal(summary.events, 1500);
    assert.equal(summary.sessions_removed, 0);
    await assertConsistent(svc(), ids[0]!);
  });

  it('computes the site summary at query time (window functions over raw events) with the maintained figures', async function () {
    this.timeout(60_000);
    const { ids } = await sites(1);
    const site = ids[0]!;
    const events = traffic(5, 3000)[0]!;
    // Ties, orphan pings before a pageview, a session across midnight, an exact 30-minute gap.
    const t = Date.UTC(2026, 10, 20) - 10 * MIN;
    events.push(
      { type: 'engagement', ts: t - 5 * MIN, visitor: 'edge', path: '/', engaged_ms: 7 },
      { type: 'pageview', ts: t, visitor: 'edge', path: '/x' },
      { type: 'engagement', ts: t, visitor: 'edge', path: '/x', engaged_ms: 3 },
      { type: 'pageview', ts: t, visitor: 'edge', path: '/y' },
      { type: 'pageview', ts: t + 25 * MIN, visitor: 'edge', path: '/z' },
      { type: 'pageview', ts: t + 55 * MIN, visitor: 'edge', path: '/z' },
    );
    await bulkLoadEvents(svc().db, site, events.map((e) => normalizeEvent(site, e)));
    const maintained = (await maintainedFigures(svc().db.sql, site)).daily;
    const today = dayOf(NOW);
    for (const [from, to] of [[today - 6, today], [today - 3, today - 2], [today - 2, today - 2]] as const) {
      const q = await queryTimeSiteSummary(svc().db.sql, site, from, to);
      const expected = Object.fromEntries(Object.entries(maintained).filter(([d]) => Number(d) >= from && Number(d) <= to));
      assert.deepEqual(q.daily, expected);
      assert.ok(q.totals.sessions > 0);
    }
  });
});
