/**
 * `npm run fuzz`: the spec-driven fuzz test (test/support/fuzz.ts) as a long run against a fresh
 * service on SQLite (a temp file) or PostgreSQL (a fresh schema, dropped afterwards). Prints each
 * operation's status counts and, on failure, fast-check's report with the seed and path that replay
 * it (`--seed S` and the same options). Exit code 1 when any operation failed.
 *
 *   npm run fuzz -- --runs 2000
 *   npm run fuzz -- --time 600 --database-url postgres://wsops:wsops@127.0.0.1:5432/wsops_test
 *   npm run fuzz -- --operation customers. --seed 42 --runs 500
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import { createRecords, makeFixture, realCursors } from '../test/support/badInput.ts';
import { type FuzzResult, fuzzOperation } from '../test/support/fuzz.ts';
import { catalogued, docOperations } from '../test/support/requestSchema.ts';
import { startTestService } from '../test/support/service.ts';

const positive = (name: string) => (raw: string) => {
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError(`${name} must be a whole number >= 1`);
  return n;
};

const program = new Command('fuzz')
  .description('Fuzz every documented operation of a fresh service with requests generated from the document')
  .option('--runs <n>', 'requests per operation (with --time: at most this many)', positive('--runs'))
  .option('--time <seconds>', 'total time budget, shared evenly by the operations', positive('--time'))
  .option('--seed <n>', 'fast-check seed (default: random, printed)', (raw) => {
    const n = Number(raw);
    if (!Number.isSafeInteger(n)) throw new InvalidArgumentError('--seed must be an integer');
    return n;
  })
  .option('--operation <text...>', 'only operations whose id contains one of these (e.g. customers. or Track)')
  .option('--database-url <url>', 'postgres://... (a fresh schema in it) or sqlite:PATH; default: a fresh SQLite file in a temp dir')
  .option('--verbose', 'fast-check prints every failing value it met, not only the shrunk one')
  .parse();

const opts = program.opts<{ runs?: number; time?: number; seed?: number; operation?: string[]; databaseUrl?: string; verbose?: boolean }>();
const seed = opts.seed ?? Math.floor(Math.random() * 2 ** 31);
const runs = opts.runs ?? (opts.time ? 1_000_000 : 500);

function freshDatabase(url: string | undefined): string {
  if (!url) return `sqlite:${path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'wsops-fuzz-')), 'service.sqlite')}`;
  if (!/^postgres(ql)?:\/\//.test(url)) return url;
  const u = new URL(url);
  u.searchParams.set('schema', `wsops_fuzz_${process.pid}_${Math.random().toString(36).slice(2, 8)}`);
  return u.toString();
}

const operations = [...catalogued, ...docOperations.filter((o) => o.kind === 'collection' && o.method === 'post' && o.body)].filter(
  (o) => !opts.operation || opts.operation.some((part) => o.id.includes(part)),
);
if (!operations.length) program.error(`no operation id contains ${opts.operation?.join(' or ')}`);

const databaseUrl = freshDatabase(opts.databaseUrl);
const svc = await startTestService(databaseUrl, { rateLimitPerSecond: 1_000_000, rateLimitBurst: 1_000_000 });
const timeLimitMs = opts.time ? Math.floor((opts.time * 1000) / operations.length) : undefined;
console.log(`fuzz: seed ${seed}, ${operations.length} operations, ${opts.time ? `${opts.time} s in all, ` : ''}up to ${runs} requests each, on ${svc.db.dialect === 'pg' ? 'PostgreSQL' : 'SQLite'}`);

const results: FuzzResult[] = [];
try {
  const fx = await makeFixture(svc);
  const { cursors } = await realCursors(svc, fx);
  for (const op of operations) {
    await createRecords(svc, fx, fx.ids); // fresh records (and ids): earlier deletes took some
    const started = performance.now();
    const result = await fuzzOperation(svc, fx, op, cursors, { runs, seed, ...(timeLimitMs ? { timeLimitMs } : {}), verbose: opts.verbose ? 2 : 0 });
    results.push(result);
    const s = ((performance.now() - started) / 1000).toFixed(1);
    console.log(`${result.failed ? 'FAIL' : 'ok  '} ${op.id}: ${result.runs} requests in ${s} s ${JSON.stringify(result.statuses)}`);
    if (result.report) console.log(result.report.replace(/^/gm, '     '));
  }
  const broken = svc.logs().split('\n').filter((l) => l.includes('breaks the document'));
  if (broken.length) {
    console.log(`FAIL responses broke the document (${broken.length}):\n${broken.slice(0, 5).join('\n')}`);
    process.exitCode = 1;
  }
} finally {
  // Closing writes what the collection endpoint still holds: a failure there is a finding too.
  await svc.close().catch((err: unknown) => {
    console.log(`FAIL closing the service (writing the queued events): ${(err as Error).message}`);
    process.exitCode = 1;
  });
}
const failed = results.filter((r) => r.failed);
const total = results.reduce((n, r) => n + r.runs, 0);
console.log(`${total} requests, ${failed.length} operation(s) failed${failed.length ? `: ${failed.map((r) => r.op).join(', ')}` : ''}. Replay with --seed ${seed}.`);
if (failed.length) process.exitCode = 1;
