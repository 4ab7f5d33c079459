import fs from 'node:fs';
import cliProgress from 'cli-progress';
import type { Command } from 'commander';
import type { Database } from '../../db/database.ts';
import { AdminError } from '../../server/admin.ts';
import { newId } from '../../server/ids.ts';
import type { AdminDeps } from '../../server/module.ts';
import { BULK_IMPORT_MIN, bulkLoadEvents } from './bulk.ts';
import { collectKeyOf, setCollectKey } from './collectQueries.ts';
import { ImportError, importEvents, parseEventLines } from './import.ts';
import { findBundle } from './queries.ts';

/** A site's publishable collect key; `rotate` replaces it (the old one is refused within a minute, in every process). */
export async function collectKey(db: Database, bundleId: string, rotate: boolean): Promise<{ bundle_id: string; collect_key: string; rotated: boolean }> {
  return db.tx(async (sql) => {
    const row = await collectKeyOf(sql, bundleId);
    if (!row) throw new AdminError(`no site (bundle) ${bundleId}`);
    if (!rotate && row.collect_key) return { bundle_id: bundleId, collect_key: row.collect_key, rotated: false };
    const key = newId('pk');
    await setCollectKey(sql, bundleId, key);
    return { bundle_id: bundleId, collect_key: key, rotated: true };
  });
}

/** The tag a site pastes to collect: the tracker script with its collect key (`base` ends in /v1). */
export const trackerTag = (base: string, collectKey: string) => `<script defer src="${base}/track.js" data-key="${collectKey}"></script>`;

/** `npm run admin -- analytics collect-key | import`. */
export function analyticsAdmin(program: Command, { withDb }: AdminDeps): void {
  const analytics = program.command('analytics').description('website analytics');
  analytics
    .command('collect-key')
    .requiredOption('--bundle <id>', 'site (bundle) id')
    .option('--rotate', 'replace the key; the old one is refused within a minute')
    .description("print the site's publishable collect key (browser-safe: it can only send events) and the tracker tag to paste")
    .action((o: { bundle: string; rotate?: boolean }) =>
      withDb(async (db) => {
        const result = await collectKey(db, o.bundle, o.rotate === true);
        const base = process.env.BASE_URL ?? `http://localhost:${process.env.PORT ?? 8080}/v1`;
        return { ...result, snippet: trackerTag(base, result.collect_key) };
      }),
    );
  analytics
    .command('import')
    .requiredOption('--bundle <id>', 'site (bundle) id, the content_id of workspace.ListBundles')
    .option('--method <method>', `auto (bulk from ${BULK_IMPORT_MIN.toLocaleString('en')} events), bulk or incremental`, 'auto')
    .argument('<file>', 'NDJSON file: one event per line, {"type":"pageview"|"engagement","ts":<unix ms>,"visitor":"...","path":"/p",...}')
    .description(
      'load history: validates every line first (nothing is stored when one is bad), then stores the events and makes sessions and rollups exact again. ' +
        `Bulk (files of ${BULK_IMPORT_MIN.toLocaleString('en')} events or more): one transaction with large inserts, then the site's sessions and rollups are rebuilt from all of its events (cost grows with the site's whole history). ` +
        'Incremental: transactions of 2,000 events in time order, each repairing only the visitors it touches. Events are not deduplicated, so import a file once',
    )
    .action((file: string, o: { bundle: string; method: string }) =>
      withDb(async (db) => {
        if (!['auto', 'bulk', 'incremental'].includes(o.method)) throw new AdminError(`--method must be auto, bulk or incremental (got ${o.method})`);
        let content: string;
        try {
          content = fs.readFileSync(file, 'utf8');
        } catch {
          throw new AdminError(`cannot read ${file}`);
        }
        if (!(await findBundle(db.sql, o.bundle))) throw new AdminError(`no site (bundle) ${o.bundle}`);
        let events;
        try {
          events = parseEventLines(content, o.bundle);
        } catch (err) {
          if (err instanceof ImportError) throw new AdminError(`${file} ${err.message}; nothing was stored`);
          throw err;
        }
        const bulk = o.method === 'bulk' || (o.method === 'auto' && events.length >= BULK_IMPORT_MIN);
        const bar = process.stderr.isTTY
          ? new cliProgress.SingleBar({ format: 'import {phase} [{bar}] {percentage}% | {value}/{total} events | ETA {eta}s', stream: process.stderr }, cliProgress.Presets.shades_classic)
          : null;
        bar?.start(events.length, 0, { phase: bulk ? 'store' : '' });
        let stored = 0;
        try {
          if (bulk) {
            return await bulkLoadEvents(db, o.bundle, events, {
              onProgress: (n, total, phase) => {
                bar?.setTotal(total);
                bar?.update(n, { phase });
              },
            });
          }
          return await importEvents(db, o.bundle, events, {
            onProgress: (n) => {
              stored = n;
              bar?.update(n);
            },
          });
        } catch (err) {
          if (bulk) throw new AdminError(`import failed, nothing was stored: ${(err as Error).message}`);
          throw new AdminError(`import failed after ${stored} of ${events.length} events were stored (in time order, up to the last complete chunk): ${(err as Error).message}`);
        } finally {
          bar?.stop();
        }
      }),
    );
}
