/**
 * `npm run bench`: requests/s and latency of the full command path
 * `POST /v1/operations/customers.UpdateSalesPipeline` (authenticated, rate-limited, validated,
 * idempotent, one real write each) on SQLite and on PostgreSQL, against a bare express 5 JSON echo
 * server (scripts/bench-echo.ts) measured in the same run. Absolute numbers on a shared machine move
 * a lot between runs; the ratios service / echo of one run are what this reports and checks.
 *
 * Layout: server processes (echo, then the service) pinned to one core, this process (the load
 * generator, autocannon in-process) pinned to another. Order: echo, SQLite, echo, PostgreSQL, echo;
 * each service run is compared with the mean of the echo runs just before and after it. Also reported:
 * CPU time of the server process per request (from /proc), a cross-check that moves less with other load.
 * The PostgreSQL server is not pinned (it shares both CPUs with the service and the load generator).
 *
 * Environment: BENCH_POSTGRES_URL (default postgres://wsops:wsops@127.0.0.1:5432/wsops_bench, started with
 * scripts/postgres-local.sh when unreachable; its public schema, or its ?schema=NAME, is reset
 * before the run), BENCH_CONNECTIONS (50), BENCH_WARMUP_S (3), BENCH_DURATION_S (15),
 * BENCH_NODE_ARGS (extra node flags for the service processes, e.g. "--cpu-prof --cpu-prof-dir=.bench/prof"),
 * LOG_LEVEL (passed to the service; default info).
 * Exit code 1 when any request failed (non-2xx, socket error, timeout) or a run did not happen as planned;
 * a missed performance target is reported as MISS but is not a failure of the bench itself.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type autocannon from 'autocannon';
import { migrations } from '../app.ts';
import { openDatabase } from '../db/database.ts';
import { createClient } from '../generated/client.ts';
import { applyWorkspace } from '../server/admin.ts';
import { systemClock } from '../server/clock.ts';
import { acme, createPipeline } from '../test/support/fixtures.ts';
import {
  fmt,
  log,
  type Phase,
  type Pinning,
  pinCpus,
  positive,
  resetPostgres,
  root,
  runMain,
  runPhase,
  type Server,
  serviceScript,
  startServer,
  stopServer,
  table,
  waitReady,
} from './bench-support.ts';
import { reachablePostgres, redactUrl } from './postgres.ts';

/** The commands measured, each on its own records: a pipeline update, and a deal update that also reads the deal's pipeline. */
const OPERATIONS = { pipelines: 'customers.UpdateSalesPipeline', deals: 'customers.UpdateDeal' } as const;
type Measured = (typeof OPERATIONS)[keyof typeof OPERATIONS];
const OP_PATH = `/v1/operations/${OPERATIONS.pipelines}`;
const PIPELINES = 50;
const DEALS = 200;
const CONNECTIONS = positive('BENCH_CONNECTIONS', 50);
const WARMUP_S = positive('BENCH_WARMUP_S', 3);
const MEASURE_S = positive('BENCH_DURATION_S', 15);
const PG_DEFAULT = 'postgres://wsops:wsops@127.0.0.1:5432/wsops_bench';
const PG_URL = process.env.BENCH_POSTGRES_URL || PG_DEFAULT;
const LOG_LEVEL = process.env.LOG_LEVEL || 'info';
const EXTRA_NODE_ARGS = (process.env.BENCH_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
/** Issue 25's aim (raised from issue 7's 0.4 / 0.25): requests/s at least these ratios of the echo's, p99 at most this many times the echo's p99 (same run). */
const TARGETS = { sqliteRatio: 0.5, pgRatio: 0.3, p99OfEcho: 2 };

// ---------------------------------------------------------------------------------------------
// Databases

/** A reachable PostgreSQL URL (starting the local cluster when needed), or why there is none. */
function postgresTarget(): Promise<{ url: string } | { why: string }> {
  return reachablePostgres(PG_URL, !process.env.BENCH_POSTGRES_URL, log);
}

/** Migrates, creates the bench workspace, returns the secret of a key allowed to write pipelines, companies and deals. */
async function seedWorkspace(databaseUrl: string): Promise<string> {
  const db = openDatabase(databaseUrl);
  try {
    await db.migrate(migrations);
    const result = await applyWorkspace(db, systemClock, { ...acme(), workspace: { name: 'Bench' } });
    return result.keys.sales!.secret; // customers.* with read and write on pipelines, companies and deals
  } finally {
    await db.close();
  }
}

interface WriteCheck {
  updateReceipts: number;
  updateEvents: number;
}

async function countWrites(databaseUrl: string, operation: Measured): Promise<WriteCheck> {
  const db = openDatabase(databaseUrl);
  try {
    const receipts = await db.sql.one<{ n: number }>(
      `SELECT COUNT(*) AS n FROM idempotency_receipts WHERE operation_id = ? AND status_code = 200 AND completed_at IS NOT NULL`,
      [operation],
    );
    const resourceType = operation === OPERATIONS.deals ? 'core:Deal' : 'core:SalesPipeline';
    const events = await db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM record_events WHERE type = 'resource.updated' AND resource_type = ?`, [resourceType]);
    return { updateReceipts: Number(receipts?.n ?? 0), updateEvents: Number(events?.n ?? 0) };
  } finally {
    await db.close();
  }
}

// ---------------------------------------------------------------------------------------------
// Load

interface TargetResult {
  name: string;
  kind: 'echo' | 'sqlite' | 'postgres';
  operation?: Measured;
  warmup: Phase;
  measured: Phase;
  failureSamples: Array<{ status: number; body: string }>;
  writes?: WriteCheck & { responses2xx: number };
}

/**
 * Each request: a fresh Idempotency-Key and, round robin over the records, a new pipeline name
 * (UpdateSalesPipeline) or a new deal name and the next stage, lead and proposal in turn (UpdateDeal).
 */
function updateRequest(ids: readonly string[], secret: string, operation: Measured = OPERATIONS.pipelines): { setup: autocannon.Request; sent: () => number } {
  let n = 0;
  const run = crypto.randomBytes(3).toString('hex');
  const data =
    operation === OPERATIONS.deals
      ? (k: number, i: number) => ({ name: `Bench deal ${k} ${run}-${i}`, stage_id: Math.floor(i / ids.length) % 2 ? 'lead' : 'proposal' })
      : (k: number, i: number) => ({ name: `Bench pipeline ${k} ${run}-${i}` });
  return {
    sent: () => n,
    setup: {
      method: 'POST',
      path: `/v1/operations/${operation}`,
      setupRequest: (req: autocannon.Request) => {
        const i = n++;
        const k = i % ids.length;
        req.headers = {
          'content-type': 'application/json',
          authorization: `Bearer ${secret}`,
          'idempotency-key': crypto.randomUUID(),
        };
        req.body = JSON.stringify({ id: ids[k], data: data(k, i) });
        return req;
      },
    } as autocannon.Request,
  };
}


async function measure(name: string, kind: TargetResult['kind'], server: Server, request: autocannon.Request, operation?: Measured): Promise<TargetResult> {
  const failureSamples: TargetResult['failureSamples'] = [];
  log(`${name}: warm-up ${WARMUP_S} s`);
  const warmup = await runPhase(server, request, WARMUP_S, failureSamples, CONNECTIONS);
  log(`${name}: measuring ${MEASURE_S} s at ${CONNECTIONS} connections`);
  const measured = await runPhase(server, request, MEASURE_S, failureSamples, CONNECTIONS);
  const bad = warmup.non2xx + warmup.errors + measured.non2xx + measured.errors;
  log(
    `${name}: ${measured.reqPerS.toFixed(0)} req/s, p50 ${measured.latencyMs.p50.toFixed(2)} ms, p99 ${measured.latencyMs.p99.toFixed(2)} ms` +
      (bad ? `, ${bad} FAILED requests` : ''),
  );
  return { name, kind, ...(operation ? { operation } : {}), warmup, measured, failureSamples };
}

// ---------------------------------------------------------------------------------------------
// Service runs

const serviceEnv = (databaseUrl: string): Record<string, string> => ({
  NODE_ENV: 'production',
  DATABASE_URL: databaseUrl,
  RATE_LIMIT_PER_SECOND: '1000000',
  RATE_LIMIT_BURST: '1000000',
  JOBS: 'off',
  LOG_LEVEL,
});

/** One service process: UpdateSalesPipeline, then UpdateDeal, each with its own warm-up. */
async function benchService(kind: 'sqlite' | 'postgres', databaseUrl: string, pinning: Pinning): Promise<TargetResult[]> {
  const name = kind === 'sqlite' ? 'service, SQLite' : 'service, PostgreSQL';
  log(`${name}: preparing ${kind === 'sqlite' ? databaseUrl : redactUrl(databaseUrl)}`);
  const secret = await seedWorkspace(databaseUrl);
  const server = await startServer(name, serviceScript(), serviceEnv(databaseUrl), pinning, EXTRA_NODE_ARGS);
  try {
    await waitReady(server, (base) => fetch(`${base}/healthz`));
    const client = createClient({ baseUrl: `http://127.0.0.1:${server.port}/v1`, apiKey: secret });
    const ids: string[] = [];
    for (let i = 0; i < PIPELINES; i++) {
      const { data, error, response } = await client.customers.CreateSalesPipeline(createPipeline(`Bench pipeline ${i}`));
      if (!data) throw new Error(`${name}: creating pipeline ${i} failed: HTTP ${response.status} ${JSON.stringify(error)}`);
      ids.push(data.item.id);
    }
    const company = await client.customers.CreateCompany({ data: { name: 'Bench Co', domain: 'bench.example' } });
    if (!company.data) throw new Error(`${name}: creating the company failed: HTTP ${company.response.status} ${JSON.stringify(company.error)}`);
    const dealIds: string[] = [];
    for (let i = 0; i < DEALS; i++) {
      const { data, error, response } = await client.customers.CreateDeal({
        data: { name: `Bench deal ${i}`, amount: { amount: `${1000 + i}.00`, currency: 'EUR' }, pipeline_id: ids[i % ids.length]!, stage_id: 'lead', company_id: company.data.item.id },
      });
      if (!data) throw new Error(`${name}: creating deal ${i} failed: HTTP ${response.status} ${JSON.stringify(error)}`);
      dealIds.push(data.item.id);
    }
    log(`${name}: ${PIPELINES} pipelines, 1 company and ${DEALS} deals created`);
    const pipelines = await measure(`${name}: UpdateSalesPipeline`, kind, server, updateRequest(ids, secret, OPERATIONS.pipelines).setup, OPERATIONS.pipelines);
    const deals = await measure(`${name}: UpdateDeal`, kind, server, updateRequest(dealIds, secret, OPERATIONS.deals).setup, OPERATIONS.deals);
    await stopServer(server);
    for (const result of [pipelines, deals]) {
      const writes = await countWrites(databaseUrl, result.operation!);
      result.writes = { ...writes, responses2xx: result.warmup.ok2xx + result.measured.ok2xx };
    }
    return [pipelines, deals];
  } finally {
    await stopServer(server);
  }
}

async function benchEcho(label: string, server: Server, request: autocannon.Request): Promise<TargetResult> {
  return measure(`echo ${label}`, 'echo', server, request);
}

// ---------------------------------------------------------------------------------------------
// Report

interface Check {
  target: string;
  value: string;
  ok: boolean;
  measured?: false;
  detail: string;
}

interface Run {
  results: TargetResult[];
  problems: string[];
  pgSkipped: string | null;
}

function printPlan(pinning: Pinning): void {
  const planned = 7 * (WARMUP_S + MEASURE_S);
  console.log(`Benchmark: POST ${OP_PATH} vs a bare express 5 JSON echo server`);
  console.log(`  ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}), load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}, node ${process.version}`);
  console.log(`  pinning: ${pinning.note}`);
  console.log(`  load: autocannon, ${CONNECTIONS} connections, ${WARMUP_S} s warm-up + ${MEASURE_S} s measured per target (about ${Math.round((planned + 10) / 10) * 10} s in all)`);
  console.log(`  then POST /v1/operations/${OPERATIONS.deals} in the same service process (each with its own warm-up)`);
  console.log(`  each update: fresh Idempotency-Key; a new pipeline name, round robin over ${PIPELINES} pipelines, or a new deal name and stage, round robin over ${DEALS} deals; the echo server gets the pipeline requests`);
  console.log(
    `  service: NODE_ENV=production (no response validation), RATE_LIMIT_PER_SECOND=1000000 RATE_LIMIT_BURST=1000000, JOBS=off, ` +
      `LOG_LEVEL=${LOG_LEVEL}: pino JSON logs written as in production, stdout redirected to /dev/null` +
      (EXTRA_NODE_ARGS.length ? `; extra node flags: ${EXTRA_NODE_ARGS.join(' ')}` : ''),
  );
  if (!pinning.pinned) console.log(`  ${pinning.note}`);
  console.log('');
}

/** Echo, SQLite, echo, PostgreSQL, echo: a service run that fails is kept as a problem and the others still run. */
async function runTargets(pinning: Pinning): Promise<Run> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'wsops-bench-'));
  const sqliteUrl = `sqlite:${path.join(tmp, 'bench.sqlite')}`;
  const run: Run = { results: [], problems: [], pgSkipped: null };
  const { results, problems } = run;

  const echo = await startServer('echo server', 'scripts/bench-echo.ts', { NODE_ENV: 'production' }, pinning);
  const echoIds = Array.from({ length: PIPELINES }, (_, i) => `pl_bench${String(i).padStart(16, '0')}`);
  const echoSecret = `wso_${'0'.repeat(24)}_${'A'.repeat(43)}`;
  try {
    await waitReady(echo, (base) => fetch(`${base}/ready`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }));
    const echoRequest = updateRequest(echoIds, echoSecret).setup;

    results.push(await benchEcho('#1', echo, echoRequest));
    try {
      results.push(...(await benchService('sqlite', sqliteUrl, pinning)));
    } catch (err) {
      problems.push(`SQLite run failed: ${(err as Error).message}`);
      log(problems.at(-1)!);
    }
    results.push(await benchEcho('#2', echo, echoRequest));

    const target = await postgresTarget();
    if ('why' in target) {
      run.pgSkipped = target.why;
      log(`PostgreSQL part DID NOT RUN: ${run.pgSkipped}`);
    } else {
      try {
        await resetPostgres(target.url);
        results.push(...(await benchService('postgres', target.url, pinning)));
      } catch (err) {
        problems.push(`PostgreSQL run failed: ${(err as Error).message}`);
        log(problems.at(-1)!);
      }
      results.push(await benchEcho('#3', echo, echoRequest));
    }
  } finally {
    await stopServer(echo);
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  return run;
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** The echo runs just before and just after a service run (other service runs may stand between). */
function around(results: TargetResult[], r: TargetResult): TargetResult[] {
  const i = results.indexOf(r);
  const before = results.slice(0, i).reverse().find((x) => x.kind === 'echo');
  const after = results.slice(i + 1).find((x) => x.kind === 'echo');
  return [before, after].filter((x): x is TargetResult => x !== undefined);
}

type Ratios = Record<string, { ratio: number; baselineReqPerS: number; cpuRatio: number | null }>;
const ratioKey = (kind: string, operation: string | undefined) => `${kind} ${operation ?? ''}`;

/** The results table, with each service run against the mean of the echo runs just before and after it. */
function compareWithEcho(results: TargetResult[]): { rows: string[][]; ratios: Ratios } {
  const echoMean = mean(results.filter((r) => r.kind === 'echo').map((e) => e.measured.reqPerS));
  const rows: string[][] = [['target', 'requests/s', 'p50 ms', 'p99 ms', 'non-2xx', 'errors', 'ratio to echo', 'CPU ms/req', 'CPU ratio']];
  const ratios: Ratios = {};
  for (const r of results) {
    const m = r.measured;
    const nonOk = r.warmup.non2xx + m.non2xx;
    const errors = r.warmup.errors + m.errors;
    let ratioCell = r.kind === 'echo' ? `${fmt(m.reqPerS / echoMean)} of mean` : '';
    let cpuRatioCell = '';
    if (r.kind !== 'echo') {
      const echoRuns = around(results, r);
      const base = mean(echoRuns.map((e) => e.measured.reqPerS));
      const echoCpu = echoRuns.map((e) => e.measured.serverCpuMsPerReq).filter((x): x is number => x !== null);
      const cpuRatio = m.serverCpuMsPerReq && echoCpu.length ? mean(echoCpu) / m.serverCpuMsPerReq : null;
      ratios[ratioKey(r.kind, r.operation)] = { ratio: m.reqPerS / base, baselineReqPerS: base, cpuRatio };
      ratioCell = fmt(m.reqPerS / base, 3);
      cpuRatioCell = cpuRatio === null ? 'n/a' : fmt(cpuRatio, 3);
    }
    const cpuCell = m.serverCpuMsPerReq === null ? 'n/a' : fmt(m.serverCpuMsPerReq, 3);
    rows.push([r.name, fmt(m.reqPerS, 0), fmt(m.latencyMs.p50), fmt(m.latencyMs.p99), String(nonOk), String(errors), ratioCell, cpuCell, cpuRatioCell]);
  }
  return { rows, ratios };
}

/** Each measured operation's ratio to echo and p99 against TARGETS, on SQLite and on PostgreSQL. */
function targetChecks(run: Run, ratios: Ratios): Check[] {
  const { results, pgSkipped } = run;
  const checks: Check[] = [];
  const notRun = (kind: 'sqlite' | 'postgres') => (kind === 'postgres' && pgSkipped ? 'PostgreSQL part did not run' : 'run failed');
  const ratioCheck = (kind: 'sqlite' | 'postgres', operation: Measured, label: string, min: number) => {
    const r = ratios[ratioKey(kind, operation)];
    if (!r) {
      checks.push({ target: `${label}: ratio >= ${fmt(min)}`, value: 'not measured', ok: false, measured: false, detail: notRun(kind) });
      return;
    }
    const ok = r.ratio >= min;
    checks.push({
      target: `${label}: ratio >= ${fmt(min)}`,
      value: fmt(r.ratio, 3),
      ok,
      detail: ok ? `${fmt(r.ratio / min)}x the target` : `short by ${fmt(min - r.ratio, 3)} (needs ${fmt((min / r.ratio - 1) * 100, 0)}% more req/s)`,
    });
  };
  const p99Check = (kind: 'sqlite' | 'postgres', operation: Measured, label: string) => {
    const r = results.find((x) => x.kind === kind && x.operation === operation);
    const target = `${label}: p99 <= ${TARGETS.p99OfEcho}x the echo's p99`;
    if (!r) {
      checks.push({ target, value: 'not measured', ok: false, measured: false, detail: notRun(kind) });
      return;
    }
    const p99 = r.measured.latencyMs.p99;
    const limit = TARGETS.p99OfEcho * mean(around(results, r).map((e) => e.measured.latencyMs.p99));
    const ok = p99 <= limit;
    checks.push({ target, value: `${fmt(p99)} ms`, ok, detail: ok ? `limit ${fmt(limit)} ms` : `over the limit of ${fmt(limit)} ms by ${fmt(p99 - limit)} ms` });
  };
  for (const operation of Object.values(OPERATIONS)) {
    const short = operation.split('.')[1]!;
    ratioCheck('sqlite', operation, `SQLite ${short}`, TARGETS.sqliteRatio);
    p99Check('sqlite', operation, `SQLite ${short}`);
    ratioCheck('postgres', operation, `PostgreSQL ${short}`, TARGETS.pgRatio);
    p99Check('postgres', operation, `PostgreSQL ${short}`);
  }
  return checks;
}

/** Failed requests, and successful updates whose idempotency receipts and events are not all in the database. */
function requestProblems(results: TargetResult[]): string[] {
  const problems: string[] = [];
  for (const r of results) {
    const bad = r.warmup.non2xx + r.measured.non2xx + r.warmup.errors + r.measured.errors + r.warmup.timeouts + r.measured.timeouts;
    if (bad) {
      const codes = { ...r.warmup.statusCodes };
      for (const [c, n] of Object.entries(r.measured.statusCodes)) codes[c] = (codes[c] ?? 0) + n;
      problems.push(
        `${r.name}: ${r.warmup.non2xx + r.measured.non2xx} non-2xx responses, ${r.warmup.errors + r.measured.errors} socket errors, ` +
          `${r.warmup.timeouts + r.measured.timeouts} timeouts; status codes ${JSON.stringify(codes)}; first failures: ${JSON.stringify(r.failureSamples)}`,
      );
    }
    if (r.writes) {
      const { updateReceipts, updateEvents, responses2xx } = r.writes;
      // Requests cut off when a phase ends may still commit: allow up to one per connection and phase.
      if (updateReceipts < responses2xx || updateEvents < responses2xx || updateReceipts > responses2xx + 2 * CONNECTIONS) {
        problems.push(`${r.name}: ${responses2xx} successful updates answered but ${updateReceipts} idempotency receipts and ${updateEvents} update events in the database`);
      }
    }
  }
  return problems;
}

function printReport(run: Run, rows: string[][], checks: Check[]): void {
  const echoes = run.results.filter((r) => r.kind === 'echo');
  console.log('');
  console.log(`Results (${CONNECTIONS} connections, ${MEASURE_S} s measured after ${WARMUP_S} s warm-up; latency of 2xx responses; non-2xx and errors include the warm-up):`);
  console.log(table(rows));
  console.log('');
  console.log('ratio to echo: requests/s of the service / mean requests/s of the echo runs just before and after it (the targets use this).');
  console.log('CPU ms/req: CPU time (user+system) of the server process per answered request; CPU ratio = echo CPU ms/req / service CPU ms/req.');
  console.log('  It excludes the PostgreSQL server processes (not pinned; they share both CPUs) and is less sensitive to other load than req/s.');
  if (echoes.length > 1) {
    const rps = echoes.map((e) => e.measured.reqPerS);
    const drift = Math.max(...rps) / Math.min(...rps);
    console.log(`Echo drift within this run: ${rps.map((x) => x.toFixed(0)).join(' / ')} req/s (max/min ${fmt(drift)}).`);
    if (drift > 1.3) console.log(`NOISE WARNING: the echo baseline moved ${fmt(drift)}x during this run (other load on the machine); the req/s ratios of this run are unreliable, run again.`);
  }
  const echoP99 = echoes.map((e) => e.measured.latencyMs.p99);
  console.log(`Reference: the bare echo server itself has p99 ${echoP99.map((x) => fmt(x)).join(' / ')} ms at ${CONNECTIONS} connections in this run.`);
  for (const r of run.results) {
    if (r.writes) console.log(`${r.name}: ${r.writes.responses2xx} updates answered 200, ${r.writes.updateReceipts} idempotency receipts and ${r.writes.updateEvents} resource.updated events written.`);
  }
  if (run.pgSkipped) console.log(`PostgreSQL part DID NOT RUN: ${run.pgSkipped}. Set BENCH_POSTGRES_URL to a reachable database.`);
  console.log('');
  console.log('Targets:');
  console.log(table([['target', 'measured', 'result', ''], ...checks.map((c) => [c.target, c.value, c.measured === false ? 'NOT RUN' : c.ok ? 'PASS' : 'MISS', c.detail])]));
}

/** Writes `.bench/results-<started>.json` (configuration, machine, ratios, checks, problems, raw results); returns its path. */
function writeRawResults(started: Date, pinning: Pinning, run: Run, ratios: Ratios, checks: Check[]): string {
  const outDir = path.join(root, '.bench');
  fs.mkdirSync(outDir, { recursive: true });
  const outFile = path.join(outDir, `results-${started.toISOString().replace(/[:.]/g, '-')}.json`);
  fs.writeFileSync(
    outFile,
    JSON.stringify(
      {
        started: started.toISOString(),
        finished: new Date().toISOString(),
        machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, loadavg: os.loadavg(), node: process.version, platform: `${os.platform()} ${os.release()}` },
        config: {
          operations: Object.values(OPERATIONS),
          connections: CONNECTIONS,
          warmupS: WARMUP_S,
          measureS: MEASURE_S,
          pipelines: PIPELINES,
          pinning,
          serviceEnv: { ...serviceEnv('<per target>'), stdout: '/dev/null' },
          serviceNodeArgs: EXTRA_NODE_ARGS,
          postgres: run.pgSkipped ? { ran: false, why: run.pgSkipped } : { ran: true, url: redactUrl(PG_URL) },
        },
        targets: TARGETS,
        ratios,
        checks,
        problems: run.problems,
        results: run.results,
      },
      null,
      2,
    ),
  );
  return outFile;
}

async function main(): Promise<number> {
  const started = new Date();
  const pinning = pinCpus();
  printPlan(pinning);
  const run = await runTargets(pinning);
  const { rows, ratios } = compareWithEcho(run.results);
  const checks = targetChecks(run, ratios);
  run.problems.push(...requestProblems(run.results));
  printReport(run, rows, checks);
  const outFile = writeRawResults(started, pinning, run, ratios, checks);
  console.log('');
  console.log(`Raw results: ${path.relative(root, outFile)}`);

  if (run.problems.length) {
    console.log('');
    console.log('BENCH FAILED: every request must succeed and each run must complete.');
    for (const p of run.problems) console.log(`  - ${p}`);
    return 1;
  }
  return 0;
}

runMain(main);
