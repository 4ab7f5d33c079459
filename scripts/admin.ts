/**
 * Operator CLI: `npm run admin -- <command>`. Prints JSON on stdout; on bad input prints one line to
 * stderr and exits with status 1.
 */
import fs from 'node:fs';
import cliProgress from 'cli-progress';
import { Command } from 'commander';
import YAML from 'yaml';
import { openDatabase } from '../db/database.ts';
import { findBundle } from '../db/queries/analytics.ts';
import { AdminError, applyWorkspace, collectKey, disableMember, replaceKey, revokeKey, trackerTag } from '../server/admin.ts';
import { BULK_IMPORT_MIN, bulkLoadEvents, ImportError, importEvents, parseEventLines } from '../server/analytics.ts';
import { systemClock } from '../server/clock.ts';
import { createSigninLink, revokeSession, SigninError } from '../server/signin.ts';

async function withDb<T>(fn: (db: ReturnType<typeof openDatabase>) => Promise<T>): Promise<void> {
  const db = openDatabase();
  try {
    await db.migrate();
    const result = await fn(db);
    process.stdout.write(JSON.stringify(result, null, 2) + '\n');
  } finally {
    await db.close();
  }
}

function readSpec(file: string): unknown {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch {
    throw new AdminError(`cannot read ${file}`);
  }
  try {
    return file.endsWith('.json') ? JSON.parse(text) : YAML.parse(text);
  } catch (err) {
    throw new AdminError(`${file} is not valid ${file.endsWith('.json') ? 'JSON' : 'YAML'}: ${(err as Error).message.split('\n')[0]}`);
  }
}

const program = new Command('admin').description('Workspace Operations operator tools (DATABASE_URL selects the database)').exitOverride();
program
  .command('apply')
  .argument('<file>', 'workspace file (YAML or JSON)')
  .description('create a workspace with members, sites, apps and API keys; prints the ids and the key secrets (shown once)')
  .action((file: string) => withDb((db) => applyWorkspace(db, systemClock, readSpec(file))));
const key = program.command('key').description('API keys');
key.command('revoke').requiredOption('--id <id>', 'key id (ak_...)').description('revoke a key; its next request is refused').action((o: { id: string }) => withDb((db) => revokeKey(db, systemClock, o.id)));
key.command('replace').requiredOption('--id <id>', 'key id (ak_...)').description('make a new key with the same grants; revoke the old one once deployed').action((o: { id: string }) => withDb((db) => replaceKey(db, systemClock, o.id)));
const member = program.command('member').description('workspace members');
member.command('disable').requiredOption('--id <id>', 'member id (mb_...)').description('disable a member; keys can no longer act for them').action((o: { id: string }) => withDb((db) => disableMember(db, systemClock, o.id)));

const signinError = (err: unknown) => {
  throw err instanceof SigninError ? new AdminError(err.message) : err;
};
program
  .command('signin-link')
  .requiredOption('--workspace <id>', 'workspace id (ws_...)')
  .requiredOption('--member <id>', 'member id (mb_...)')
  .option('--next <path>', 'page to open once signed in, a path on this service', '/dashboard')
  .option('--base-url <url>', 'public origin of the service', `http://localhost:${process.env.PORT || 8080}`)
  .description('print a one-time sign-in link for a member (valid 15 minutes, works once; opens a 12-hour session)')
  .action((o: { workspace: string; member: string; next: string; baseUrl: string }) =>
    withDb((db) => createSigninLink(db, systemClock, { workspaceId: o.workspace, memberId: o.member, next: o.next, baseUrl: o.baseUrl }).catch(signinError)),
  );
const session = program.command('session').description('sign-in sessions');
session
  .command('revoke')
  .option('--id <id>', 'session id (ss_..., logged with each request)')
  .option('--member <id>', "end all of this member's sessions")
  .description('end sign-in sessions; refused from their next request on')
  .action((o: { id?: string; member?: string }) =>
    withDb(async (db) => {
      if ((o.id === undefined) === (o.member === undefined)) throw new AdminError('give exactly one of --id or --member');
      return revokeSession(db, systemClock, o.id !== undefined ? { id: o.id } : { memberId: o.member! });
    }),
  );

const analytics = program.command('analytics').description('website analytics');
analytics
  .command('collect-key')
  .requiredOption('--bundle <id>', 'site (bundle) id')
  .option('--rotate', 'replace the key; the old one is refused within a minute')
  .description('print the site\'s publishable collect key (browser-safe: it can only send events) and the tracker tag to paste')
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

try {
  await program.parseAsync(process.argv);
} catch (err) {
  const code = (err as { code?: string }).code;
  if (code === 'commander.helpDisplayed' || code === 'commander.version' || code === 'commander.help') process.exit(0);
  const message = err instanceof AdminError ? err.message : code?.startsWith('commander.') ? '' : `failed: ${(err as Error).message}`;
  if (message) process.stderr.write(`admin: ${message.replace(/\s+/g, ' ')}\n`);
  process.exit(1);
}
