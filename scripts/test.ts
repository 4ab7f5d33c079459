/**
 * `npm test`: the whole mocha suite on SQLite and, when PostgreSQL is reachable or can be started
 * here, on PostgreSQL too. Says plainly when the PostgreSQL pass did not run. Ends with the line
 * `N passed, N failed, N skipped`.
 *
 * `npm run test:unit` (`--unit`): the inner loop, SQLite only, without the browser suites and the files
 * scripts/unitTests.ts leaves out (they spawn processes or are slow).
 * TEST_TIMINGS=<file.json> records where a run's time went (per file and per test).
 *
 * Files run in parallel, TEST_JOBS at a time (default 2), each in a mocha worker process (mocha's
 * parallel mode: a file's tests stay in order in one process; a process runs several files one after
 * another). The files that take longest start first (browser suites and those that spawn processes or
 * build), so no long one is left for the end. TEST_JOBS=1 runs every file in this process, in name
 * order, as does a run of named files or with TEST_TIMINGS (whose per-file wall times need it).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Mocha from 'mocha';
import { reachablePostgres } from './postgres.ts';
import { isUnitTest } from './unitTests.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DEFAULT_PG = 'postgres://wsops:wsops@127.0.0.1:5432/wsops_test';
const args = process.argv.slice(2);
const unit = args.includes('--unit');
if (unit) process.env.TEST_DATABASES = 'sqlite';
const named = args.filter((a) => a !== '--unit');

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

const requestedJobs = Number(process.env.TEST_JOBS ?? 2);
if (!Number.isInteger(requestedJobs) || requestedJobs < 1) {
  console.error(`TEST_JOBS must be a whole number of at least 1, not ${process.env.TEST_JOBS}.`);
  process.exit(2);
}
const jobs = named.length || process.env.TEST_TIMINGS ? 1 : requestedJobs;
const mocha = new Mocha({
  timeout: 20_000,
  reporter: 'spec',
  ...(process.env.TEST_GREP ? { grep: process.env.TEST_GREP } : {}),
  ...(jobs > 1 ? { parallel: true, jobs } : {}),
});
const sorted = named.length
  ? named
  : (fs.readdirSync(path.join(root, 'test'), { recursive: true }) as string[])
      .filter((f) => f.endsWith('.test.ts'))
      .map((f) => path.join('test', f).split(path.sep).join('/'))
      .filter((f) => !unit || isUnitTest(f))
      .sort()
      .map((f) => path.join(root, f));
const files = jobs > 1 ? longestFirst(sorted) : sorted;
// Tests that run `npm start` (the docs check, the service as a process) rebuild a stale dist/ first; two files
// doing it at once would race for dist/, so a parallel run brings it up to date once, before any file starts.
if (jobs > 1) {
  const built = spawnSync(process.execPath, ['--import', 'tsx', path.join(root, 'scripts/build.ts'), '--if-stale'], { cwd: root, stdio: 'inherit' });
  if (built.status !== 0) process.exit(built.status ?? 1);
}
for (const f of files) mocha.addFile(path.resolve(f));
if (jobs === 1) await mocha.loadFilesAsync();

const started = Date.now();
const runner = mocha.run();
if (process.env.TEST_TIMINGS) recordTimings(runner, process.env.TEST_TIMINGS);
runner.on('end', () => {
  const s = runner.stats!;
  console.log('');
  if (unit) console.log(`Unit set: ${files.length} files (scripts/unitTests.ts), SQLite only.`);
  console.log(`${files.length} files, ${jobs === 1 ? 'one at a time' : `${jobs} at a time (TEST_JOBS)`}, ${Math.round((Date.now() - started) / 1000)} s.`);
  console.log(`Databases: SQLite${pgTarget.url ? ' and PostgreSQL' : ''}.`);
  if (!pgTarget.url) console.log(`PostgreSQL pass DID NOT RUN: ${pgTarget.why}. Set TEST_POSTGRES_URL to a reachable database.`);
  console.log(`${s.passes} passed, ${s.failures} failed, ${s.pending} skipped`);
  process.exitCode = s.failures > 0 || s.passes === 0 ? 1 : 0;
  setTimeout(() => process.exit(process.exitCode), 200).unref();
});

/**
 * The files in the order a parallel run starts them: the slow kinds first (those that launch Chromium,
 * build, or spawn the CLI, the service or a daemon: scripts/unitTests.ts lists them), then the rest;
 * by name within each kind.
 */
function longestFirst(all: string[]): string[] {
  const slow = (f: string) => !isUnitTest(path.relative(root, f).split(path.sep).join('/'));
  return [...all.filter(slow), ...all.filter((f) => !slow(f))];
}

/**
 * TEST_TIMINGS=<file.json>: writes where the run's time went: per test file the wall time of its
 * top-level suites (hooks included: services, browsers, spawned CLIs) and per test its duration.
 */
function recordTimings(runner: Mocha.Runner, out: string): void {
  const started = new Map<Mocha.Suite, number>();
  const files = new Map<string, number>();
  const tests: Array<{ file: string; title: string; ms: number }> = [];
  const rel = (f: string | undefined) => path.relative(root, f ?? '?');
  runner.on('suite', (s) => {
    if (s.parent?.root) started.set(s, Date.now());
  });
  runner.on('suite end', (s) => {
    const t0 = started.get(s);
    if (t0 !== undefined) files.set(rel(s.file), (files.get(rel(s.file)) ?? 0) + Date.now() - t0);
  });
  runner.on('test end', (t) => {
    tests.push({ file: rel(t.file), title: t.fullTitle(), ms: t.duration ?? 0 });
    if (t.parent?.root) files.set(rel(t.file), (files.get(rel(t.file)) ?? 0) + (t.duration ?? 0));
  });
  runner.on('end', () => {
    const byFile = [...files].map(([file, ms]) => ({ file, ms })).sort((a, b) => b.ms - a.ms);
    fs.writeFileSync(out, JSON.stringify({ total_ms: byFile.reduce((n, f) => n + f.ms, 0), files: byFile, tests }, null, 1));
  });
}
