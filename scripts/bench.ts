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
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';
import { openDatabase } from '../db/database.ts';
import { createClient } from '../generated/client.ts';
import { applyWorkspace } from '../server/admin.ts';
import { systemClock } from '../server/clock.ts';
import { acme, createPipeline } from '../test/support/fixtures.ts';
import { reachablePostgres, redactUrl } from './postgres.ts';
import { freePort } from './ports.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const OPERATION = 'customers.UpdateSalesPipeline';
const OP_PATH = `/v1/operations/${OPERATION}`;
const PIPELINES = 50;
const CONNECTIONS = positive('BENCH_CONNECTIONS', 50);
const WARMUP_S = positive('BENCH_WARMUP_S', 3);
const MEASURE_S = positive('BENCH_DURATION_S', 15);
const PG_DEFAULT = 'postgres://wsops:wsops@127.0.0.1:5432/wsops_bench';
const PG_URL = process.env.BENCH_POSTGRES_URL || PG_DEFAULT;
const LOG_LEVEL = process.env.LOG_LEVEL || 'info';
const EXTRA_NODE_ARGS = (process.env.BENCH_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
const TARGETS = { sqliteRatio: 0.4, pgRatio: 0.25, p99Ms: 30 };

function positive(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number (got "${raw}")`);
  return n;
}

const log = (msg: string) => console.log(`[bench] ${msg}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------
// CPU pinning

interface Pinning {
  pinned: boolean;
  serverCpu?: number;
  loadCpu?: number;
  note: string;
}

/** Pins this process (the load generator) to one CPU and returns the CPU for the server processes. */
function pinCpus(): Pinning {
  const probe = spawnSync('taskset', ['-c', '-p', String(process.pid)], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) {
    return { pinned: false, note: 'WARNING: taskset is not available (util-linux); servers and load generator are NOT pinned and share all CPUs' };
  }
  const list = /list:\s*(\S+)/.exec(probe.stdout)?.[1] ?? '';
  const cpus = list.split(',').flatMap((part) => {
    const [a, b] = part.split('-').map(Number);
    if (a === undefined || Number.isNaN(a)) return [];
    return b === undefined ? [a] : Array.from({ length: b - a + 1 }, (_, i) => a + i);
  });
  if (cpus.length < 2) {
    return { pinned: false, note: `WARNING: only CPU(s) ${list || '?'} available to this process; nothing is pinned` };
  }
  const [serverCpu, loadCpu] = cpus as [number, number];
  const pin = spawnSync('taskset', ['-a', '-c', '-p', String(loadCpu), String(process.pid)], { encoding: 'utf8' });
  if (pin.status !== 0) {
    return { pinned: false, note: `WARNING: taskset could not pin this process (${(pin.stderr || '').trim()}); nothing is pinned` };
  }
  return {
    pinned: true,
    serverCpu,
    loadCpu,
    note: `server processes on CPU ${serverCpu} (taskset -c ${serverCpu}), load generator (this process, autocannon in-process) on CPU ${loadCpu}` +
      (cpus.length > 2 ? ` (${cpus.length} CPUs available; the others are left to the OS)` : ''),
  };
}

// ---------------------------------------------------------------------------------------------
// Child processes

interface Server {
  name: string;
  child: ChildProcess;
  port: number;
  stderrTail: () => string;
  exited: Promise<number | null>;
}

const running = new Set<Server>();


/** Starts `node --import tsx SCRIPT` on the server CPU with stdout going to /dev/null. */
async function startServer(name: string, script: string, env: Record<string, string>, pinning: Pinning, nodeArgs: string[] = []): Promise<Server> {
  const port = await freePort();
  const nodeArgv = [...nodeArgs, '--import', 'tsx', script];
  const [cmd, argv] = pinning.pinned
    ? ['taskset', ['-c', String(pinning.serverCpu), process.execPath, ...nodeArgv]]
    : [process.execPath, nodeArgv];
  const devNull = fs.openSync('/dev/null', 'w');
  const child = spawn(cmd, argv, { cwd: root, env: { ...process.env, ...env, PORT: String(port) }, stdio: ['ignore', devNull, 'pipe'] });
  fs.closeSync(devNull);
  let tail = '';
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (chunk: string) => {
    tail = (tail + chunk).slice(-4000);
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const server: Server = { name, child, port, stderrTail: () => tail, exited };
  running.add(server);
  void exited.then(() => running.delete(server));
  return server;
}

async function waitReady(server: Server, probe: (base: string) => Promise<Response>): Promise<void> {
  const base = `http://127.0.0.1:${server.port}`;
  let exitCode: number | null | undefined;
  void server.exited.then((code) => (exitCode = code));
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (exitCode !== undefined) throw new Error(`${server.name} exited with code ${exitCode} before it was ready:\n${server.stderrTail()}`);
    try {
      const res = await probe(base);
      await res.arrayBuffer();
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  throw new Error(`${server.name} was not ready after 60 s:\n${server.stderrTail()}`);
}

async function stopServer(server: Server): Promise<void> {
  if (server.child.exitCode !== null || server.child.signalCode !== null) return;
  server.child.kill('SIGTERM');
  const code = await Promise.race([server.exited, sleep(15_000).then(() => 'timeout' as const)]);
  if (code === 'timeout') {
    log(`${server.name} did not stop within 15 s; sending SIGKILL`);
    server.child.kill('SIGKILL');
    await server.exited;
  }
}

function killAll(): void {
  for (const s of running) if (s.child.exitCode === null) s.child.kill('SIGKILL');
}
process.on('SIGINT', () => {
  killAll();
  process.exit(130);
});

// ---------------------------------------------------------------------------------------------
// Databases

/** A reachable PostgreSQL URL (starting the local cluster when needed), or why there is none. */
function postgresTarget(): Promise<{ url: string } | { why: string }> {
  return reachablePostgres(PG_URL, !process.env.BENCH_POSTGRES_URL, log);
}

/** Empties the bench database: the public schema, or the `?schema=NAME` of the URL when it names one. */
async function resetPostgres(url: string): Promise<void> {
  const parsed = new URL(url);
  const schema = parsed.searchParams.get('schema');
  parsed.searchParams.delete('schema');
  const client = new pg.Client({ connectionString: parsed.toString() });
  await client.connect();
  try {
    if (schema) {
      await client.query(`DROP SCHEMA IF EXISTS ${client.escapeIdentifier(schema)} CASCADE`);
    } else {
      await client.query('DROP SCHEMA public CASCADE');
      await client.query('CREATE SCHEMA public');
    }
  } finally {
    await client.end();
  }
}

/** Migrates, creates the bench workspace, returns the secret of a key allowed to update pipelines. */
async function seedWorkspace(databaseUrl: string): Promise<string> {
  const db = openDatabase(databaseUrl);
  try {
    await db.migrate();
    const result = await applyWorkspace(db, systemClock, { ...acme(), workspace: { name: 'Bench' } });
    return result.keys.ci!.secret;
  } finally {
    await db.close();
  }
}

interface WriteCheck {
  updateReceipts: number;
  updateEvents: number;
}

async function countWrites(databaseUrl: string): Promise<WriteCheck> {
  const db = openDatabase(databaseUrl);
  try {
    const receipts = await db.sql.one<{ n: number }>(
      `SELECT COUNT(*) AS n FROM idempotency_receipts WHERE operation_id = ? AND status_code = 200 AND completed_at IS NOT NULL`,
      [OPERATION],
    );
    const events = await db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM record_events WHERE type = 'resource.updated'`);
    return { updateReceipts: Number(receipts?.n ?? 0), updateEvents: Number(events?.n ?? 0) };
  } finally {
    await db.close();
  }
}

// ---------------------------------------------------------------------------------------------
// Load

interface Phase {
  durationS: number;
  requests: number;
  ok2xx: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  statusCodes: Record<string, number>;
  reqPerS: number;
  /** Percentiles of the 2xx latencies, measured here in fractional ms. */
  latencyMs: { p50: number; p90: number; p99: number; max: number; mean: number };
  /** CPU time (user + system, all threads) the server process spent per answered request; less noisy than req/s. */
  serverCpuMsPerReq: number | null;
  /** autocannon's own result (its latency histogram has 1 ms resolution). */
  autocannon: Omit<autocannon.Result, 'latency' | 'requests' | 'throughput'> & Partial<Pick<autocannon.Result, 'latency' | 'requests' | 'throughput'>>;
}

interface TargetResult {
  name: string;
  kind: 'echo' | 'sqlite' | 'postgres';
  warmup: Phase;
  measured: Phase;
  failureSamples: Array<{ status: number; body: string }>;
  writes?: WriteCheck & { responses2xx: number };
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const idx = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[idx]!;
}

/** Each request: a fresh Idempotency-Key and a new name for one of the pipelines, round robin. */
function updateRequest(ids: readonly string[], secret: string): { setup: autocannon.Request; sent: () => number } {
  let n = 0;
  const run = crypto.randomBytes(3).toString('hex');
  return {
    sent: () => n,
    setup: {
      method: 'POST',
      path: OP_PATH,
      setupRequest: (req: autocannon.Request) => {
        const i = n++;
        const k = i % ids.length;
        req.headers = {
          'content-type': 'application/json',
          authorization: `Bearer ${secret}`,
          'idempotency-key': crypto.randomUUID(),
        };
        req.body = JSON.stringify({ id: ids[k], data: { name: `Bench pipeline ${k} ${run}-${i}` } });
        return req;
      },
    } as autocannon.Request,
  };
}

const CLK_TCK = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** CPU time (ms) used so far by a process, from /proc (Linux); null elsewhere. */
function processCpuMs(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLK_TCK;
  } catch {
    return null;
  }
}

async function runPhase(server: Server, request: autocannon.Request, seconds: number, samples: TargetResult['failureSamples']): Promise<Phase> {
  const port = server.port;
  const latencies: number[] = [];
  const statusCodes: Record<string, number> = {};
  const withSamples: autocannon.Request = {
    ...request,
    onResponse: (status: number, body: string) => {
      if ((status < 200 || status > 299) && samples.length < 5) samples.push({ status, body: body.slice(0, 500) });
    },
  };
  const cpuBefore = processCpuMs(server.child.pid);
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      { url: `http://127.0.0.1:${port}`, connections: CONNECTIONS, pipelining: 1, duration: seconds, timeout: 10, requests: [withSamples] },
      (err: unknown, res: autocannon.Result) => (err ? reject(err instanceof Error ? err : new Error(String(err))) : resolve(res)),
    );
    instance.on('response', (_client: unknown, statusCode: number, _bytes: number, responseTime: number) => {
      statusCodes[statusCode] = (statusCodes[statusCode] ?? 0) + 1;
      if (statusCode >= 200 && statusCode <= 299) latencies.push(responseTime);
    });
  });
  const cpuAfter = processCpuMs(server.child.pid);
  const sorted = Float64Array.from(latencies).sort();
  const total = Object.values(statusCodes).reduce((a, b) => a + b, 0);
  const ok2xx = sorted.length;
  const { latency, requests, throughput, ...rest } = result;
  return {
    durationS: result.duration,
    requests: total,
    ok2xx,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    statusCodes,
    reqPerS: ok2xx / result.duration,
    latencyMs: {
      p50: percentile(sorted, 50),
      p90: percentile(sorted, 90),
      p99: percentile(sorted, 99),
      max: sorted.length ? sorted[sorted.length - 1]! : Number.NaN,
      mean: sorted.length ? latencies.reduce((a, b) => a + b, 0) / sorted.length : Number.NaN,
    },
    serverCpuMsPerReq: cpuBefore !== null && cpuAfter !== null && total > 0 ? (cpuAfter - cpuBefore) / total : null,
    autocannon: { ...rest, latency, requests, throughput },
  };
}

async function measure(name: string, kind: TargetResult['kind'], server: Server, request: autocannon.Request): Promise<TargetResult> {
  const failureSamples: TargetResult['failureSamples'] = [];
  log(`${name}: warm-up ${WARMUP_S} s`);
  const warmup = await runPhase(server, request, WARMUP_S, failureSamples);
  log(`${name}: measuring ${MEASURE_S} s at ${CONNECTIONS} connections`);
  const measured = await runPhase(server, request, MEASURE_S, failureSamples);
  const bad = warmup.non2xx + warmup.errors + measured.non2xx + measured.errors;
  log(
    `${name}: ${measured.reqPerS.toFixed(0)} req/s, p50 ${measured.latencyMs.p50.toFixed(2)} ms, p99 ${measured.latencyMs.p99.toFixed(2)} ms` +
      (bad ? `, ${bad} FAILED requests` : ''),
  );
  return { name, kind, warmup, measured, failureSamples };
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

async function benchService(kind: 'sqlite' | 'postgres', databaseUrl: string, pinning: Pinning): Promise<TargetResult> {
  const name = kind === 'sqlite' ? 'service, SQLite' : 'service, PostgreSQL';
  log(`${name}: preparing ${kind === 'sqlite' ? databaseUrl : redactUrl(databaseUrl)}`);
  const secret = await seedWorkspace(databaseUrl);
  const server = await startServer(name, 'scripts/start.ts', serviceEnv(databaseUrl), pinning, EXTRA_NODE_ARGS);
  try {
    await waitReady(server, (base) => fetch(`${base}/healthz`));
    const client = createClient({ baseUrl: `http://127.0.0.1:${server.port}/v1`, apiKey: secret });
    const ids: string[] = [];
    for (let i = 0; i < PIPELINES; i++) {
      const { data, error, response } = await client.customers.CreateSalesPipeline(createPipeline(`Bench pipeline ${i}`));
      if (!data) throw new Error(`${name}: creating pipeline ${i} failed: HTTP ${response.status} ${JSON.stringify(error)}`);
      ids.push(data.item.id);
    }
    log(`${name}: ${PIPELINES} pipelines created`);
    const { setup } = updateRequest(ids, secret);
    const result = await measure(name, kind, server, setup);
    await stopServer(server);
    const writes = await countWrites(databaseUrl);
    result.writes = { ...writes, responses2xx: result.warmup.ok2xx + result.measured.ok2xx };
    return result;
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

const fmt = (n: number, digits = 2) => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  const line = (r: string[]) => r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  ');
  return [line(rows[0]!), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.slice(1).map(line)].join('\n');
}

async function main(): Promise<number> {
  const started = new Date();
  const pinning = pinCpus();
  const planned = 5 * (WARMUP_S + MEASURE_S);
  console.log(`Benchmark: POST ${OP_PATH} vs a bare express 5 JSON echo server`);
  console.log(`  ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}), load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}, node ${process.version}`);
  console.log(`  pinning: ${pinning.note}`);
  console.log(`  load: autocannon, ${CONNECTIONS} connections, ${WARMUP_S} s warm-up + ${MEASURE_S} s measured per target (about ${Math.round((planned + 10) / 10) * 10} s in all)`);
  console.log(`  each update: fresh Idempotency-Key, new pipeline name, round robin over ${PIPELINES} pipelines; the echo server gets the same requests`);
  console.log(
    `  service: NODE_ENV=production (no response validation), RATE_LIMIT_PER_SECOND=1000000 RATE_LIMIT_BURST=1000000, JOBS=off, ` +
      `LOG_LEVEL=${LOG_LEVEL}: pino JSON logs written as in production, stdout redirected to /dev/null` +
      (EXTRA_NODE_ARGS.length ? `; extra node flags: ${EXTRA_NODE_ARGS.join(' ')}` : ''),
  );
  if (!pinning.pinned) console.log(`  ${pinning.note}`);
  console.log('');

  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'wsops-bench-'));
  const sqliteUrl = `sqlite:${path.join(tmp, 'bench.sqlite')}`;
  const results: TargetResult[] = [];
  const problems: string[] = [];
  let pgSkipped: string | null = null;

  const echo = await startServer('echo server', 'scripts/bench-echo.ts', { NODE_ENV: 'production' }, pinning);
  const echoIds = Array.from({ length: PIPELINES }, (_, i) => `pl_bench${String(i).padStart(16, '0')}`);
  const echoSecret = `wso_${'0'.repeat(24)}_${'A'.repeat(43)}`;
  try {
    await waitReady(echo, (base) => fetch(`${base}/ready`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }));
    const echoRequest = updateRequest(echoIds, echoSecret).setup;

    results.push(await benchEcho('#1', echo, echoRequest));
    try {
      results.push(await benchService('sqlite', sqliteUrl, pinning));
    } catch (err) {
      problems.push(`SQLite run failed: ${(err as Error).message}`);
      log(problems.at(-1)!);
    }
    results.push(await benchEcho('#2', echo, echoRequest));

    const target = await postgresTarget();
    if ('why' in target) {
      pgSkipped = target.why;
      log(`PostgreSQL part DID NOT RUN: ${pgSkipped}`);
    } else {
      try {
        await resetPostgres(target.url);
        results.push(await benchService('postgres', target.url, pinning));
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

  // Each service run against the mean of the echo runs just before and after it.
  const echoes = results.filter((r) => r.kind === 'echo');
  const around = (r: TargetResult) => {
    const i = results.indexOf(r);
    return [results[i - 1], results[i + 1]].filter((x): x is TargetResult => x?.kind === 'echo');
  };
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const echoMean = mean(echoes.map((e) => e.measured.reqPerS));
  const rows: string[][] = [['target', 'requests/s', 'p50 ms', 'p99 ms', 'non-2xx', 'errors', 'ratio to echo', 'CPU ms/req', 'CPU ratio']];
  const ratios: Record<string, { ratio: number; baselineReqPerS: number; cpuRatio: number | null }> = {};
  for (const r of results) {
    const m = r.measured;
    const nonOk = r.warmup.non2xx + m.non2xx;
    const errors = r.warmup.errors + m.errors;
    let ratioCell = r.kind === 'echo' ? `${fmt(m.reqPerS / echoMean)} of mean` : '';
    let cpuRatioCell = '';
    if (r.kind !== 'echo') {
      const echoRuns = around(r);
      const base = mean(echoRuns.map((e) => e.measured.reqPerS));
      const echoCpu = echoRuns.map((e) => e.measured.serverCpuMsPerReq).filter((x): x is number => x !== null);
      const cpuRatio = m.serverCpuMsPerReq && echoCpu.length ? mean(echoCpu) / m.serverCpuMsPerReq : null;
      ratios[r.kind] = { ratio: m.reqPerS / base, baselineReqPerS: base, cpuRatio };
      ratioCell = fmt(m.reqPerS / base, 3);
      cpuRatioCell = cpuRatio === null ? 'n/a' : fmt(cpuRatio, 3);
    }
    const cpuCell = m.serverCpuMsPerReq === null ? 'n/a' : fmt(m.serverCpuMsPerReq, 3);
    rows.push([r.name, fmt(m.reqPerS, 0), fmt(m.latencyMs.p50), fmt(m.latencyMs.p99), String(nonOk), String(errors), ratioCell, cpuCell, cpuRatioCell]);
  }

  const checks: Check[] = [];
  const ratioCheck = (kind: 'sqlite' | 'postgres', label: string, min: number) => {
    const r = ratios[kind];
    if (!r) {
      checks.push({ target: `${label}: ratio >= ${fmt(min)}`, value: 'not measured', ok: false, measured: false, detail: kind === 'postgres' && pgSkipped ? 'PostgreSQL part did not run' : 'run failed' });
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
  const p99Check = (kind: 'sqlite' | 'postgres', label: string) => {
    const r = results.find((x) => x.kind === kind);
    if (!r) {
      checks.push({ target: `${label}: p99 < ${TARGETS.p99Ms} ms`, value: 'not measured', ok: false, measured: false, detail: kind === 'postgres' && pgSkipped ? 'PostgreSQL part did not run' : 'run failed' });
      return;
    }
    const p99 = r.measured.latencyMs.p99;
    const ok = p99 < TARGETS.p99Ms;
    checks.push({ target: `${label}: p99 < ${TARGETS.p99Ms} ms at ${CONNECTIONS} connections`, value: `${fmt(p99)} ms`, ok, detail: ok ? '' : `over by ${fmt(p99 - TARGETS.p99Ms)} ms (${fmt(p99 / TARGETS.p99Ms)}x)` });
  };
  ratioCheck('sqlite', 'SQLite', TARGETS.sqliteRatio);
  p99Check('sqlite', 'SQLite');
  ratioCheck('postgres', 'PostgreSQL', TARGETS.pgRatio);
  p99Check('postgres', 'PostgreSQL');

  // Request failures and write verification.
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
  for (const r of results) {
    if (r.writes) console.log(`${r.name}: ${r.writes.responses2xx} updates answered 200, ${r.writes.updateReceipts} idempotency receipts and ${r.writes.updateEvents} resource.updated events written.`);
  }
  if (pgSkipped) console.log(`PostgreSQL part DID NOT RUN: ${pgSkipped}. Set BENCH_POSTGRES_URL to a reachable database.`);
  console.log('');
  console.log('Targets:');
  console.log(table([['target', 'measured', 'result', ''], ...checks.map((c) => [c.target, c.value, c.measured === false ? 'NOT RUN' : c.ok ? 'PASS' : 'MISS', c.detail])]));

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
          operation: OPERATION,
          connections: CONNECTIONS,
          warmupS: WARMUP_S,
          measureS: MEASURE_S,
          pipelines: PIPELINES,
          pinning,
          serviceEnv: { ...serviceEnv('<per target>'), stdout: '/dev/null' },
          serviceNodeArgs: EXTRA_NODE_ARGS,
          postgres: pgSkipped ? { ran: false, why: pgSkipped } : { ran: true, url: redactUrl(PG_URL) },
        },
        targets: TARGETS,
        ratios,
        checks,
        problems,
        results,
      },
      null,
      2,
    ),
  );
  console.log('');
  console.log(`Raw results: ${path.relative(root, outFile)}`);

  if (problems.length) {
    console.log('');
    console.log('BENCH FAILED: every request must succeed and each run must complete.');
    for (const p of problems) console.log(`  - ${p}`);
    return 1;
  }
  return 0;
}

main()
  .then((code) => {
    process.exitCode = code;
    setTimeout(() => process.exit(code), 200).unref();
  })
  .catch((err) => {
    killAll();
    console.error(`[bench] ${(err as Error).stack ?? err}`);
    process.exit(1);
  });
