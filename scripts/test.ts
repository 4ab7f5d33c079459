/**
 * `npm test`: the whole mocha suite on SQLite and, when PostgreSQL is reachable or can be started
 * here, on PostgreSQL too. Says plainly when the PostgreSQL pass did not run. Ends with the line
 * `N passed, N failed, N skipped`.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Mocha from 'mocha';
import { reachablePostgres } from './postgres.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DEFAULT_PG = 'postgres://wsops:wsops@127.0.0.1:5432/wsops_test';

async function postgresUrl(): Promise<{ url: string | null; why: string }> {
  if (process.env.TEST_DATABASES && !process.env.TEST_DATABASES.split(',').includes('postgres')) return { url: null, why: 'TEST_DATABASES excludes postgres' };
  const target = await reachablePostgres(process.env.TEST_POSTGRES_URL || DEFAULT_PG, !process.env.TEST_POSTGRES_URL);
  return 'url' in target ? { url: target.url, why: '' } : { url: null, why: target.why };
}

const pgTarget = await postgresUrl();
if (!pgTarget.url && process.env.REQUIRE_POSTGRES) {
  console.error(`PostgreSQL is required (REQUIRE_POSTGRES) but ${pgTarget.why}.`);
  process.exit(1);
}
if (pgTarget.url) process.env.TEST_POSTGRES_URL = pgTarget.url;
else delete process.env.TEST_POSTGRES_URL;

const mocha = new Mocha({ timeout: 20_000, reporter: 'spec', ...(process.env.TEST_GREP ? { grep: process.env.TEST_GREP } : {}) });
const files = process.argv.slice(2).length
  ? process.argv.slice(2)
  : (fs.readdirSync(path.join(root, 'test'), { recursive: true }) as string[]).filter((f) => f.endsWith('.test.ts')).sort().map((f) => path.join(root, 'test', f));
for (const f of files) mocha.addFile(path.resolve(f));
await mocha.loadFilesAsync();

const runner = mocha.run();
runner.on('end', () => {
  const s = runner.stats!;
  console.log('');
  console.log(`Databases: SQLite${pgTarget.url ? ' and PostgreSQL' : ''}.`);
  if (!pgTarget.url) console.log(`PostgreSQL pass DID NOT RUN: ${pgTarget.why}. Set TEST_POSTGRES_URL to a reachable database.`);
  console.log(`${s.passes} passed, ${s.failures} failed, ${s.pending} skipped`);
  process.exitCode = s.failures > 0 || s.passes === 0 ? 1 : 0;
  setTimeout(() => process.exit(process.exitCode), 200).unref();
});
