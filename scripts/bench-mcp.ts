/**
 * `npm run bench:mcp`: what an MCP tool call costs over the same operation called over HTTP, in one run,
 * on SQLite and on PostgreSQL (each in turn: scripts/bench-runner.ts; PostgreSQL is skipped, with the
 * reason, when it cannot be reached).
 *
 * Per database: a fresh database with the Acme workspace (test/support/fixtures.ts) and the real service
 * (`scripts/start.ts`, NODE_ENV=production, JOBS=off, rate limits out of the way; one process, on its
 * own CPU when taskset can pin it, this process, the load generator, on another), BENCH_PIPELINES sales
 * pipelines. Two callers of the same workspace: the `sales` API key (customers.*) over
 * `POST /v1/operations/<id>`, and a workspace MCP connection with the same operations and resources
 * (its `mcp_connections` row and an access token written as the consent page and the authorization
 * server write them: test/mcp/e2e.tokens.ts) over `POST /v1/mcp` `tools/call`, in both revisions a
 * client speaks: 2025-11-25 (stateless, no initialize needed) and 2026-07-28 (per-request
 * `_meta`, `Mcp-Method` / `Mcp-Name` headers).
 *
 * Operations: a query, `customers.GetSalesPipeline`, and a command, `customers.UpdateSalesPipeline`
 * (round robin over the pipelines, a new name each call, a fresh idempotency key each call: the
 * `Idempotency-Key` header over HTTP, the `idempotency_key` argument as a tool). Every answer is
 * checked: HTTP 200, and for a tool call a result without `isError` carrying `structuredContent`.
 *
 * For each operation (the query, then the command), after BENCH_WARMUP calls of each path:
 *  - latency: BENCH_SEQUENTIAL calls of each path one after the other on one keep-alive connection,
 *    the three paths interleaved call by call (HTTP, 2025, 2026, HTTP, ...), so that whatever else
 *    the machine does weighs on each path alike (p50, p90, p99);
 *  - throughput, path by path: autocannon, BENCH_CONNECTIONS connections for BENCH_DURATION_S
 *    (req/s), and the service's CPU time per call (from /proc, the steadier figure on a shared machine).
 * The report: each row, and the ratio tool call / HTTP call of p50 latency and of CPU per call.
 * Aim (issue 17): a tool call at most 1.5 x the same HTTP call (p50 latency). A miss prints MISS
 * (exit 0); failed calls exit 1. Results: .bench/mcp-<db>.json.
 * The service runs on this process's Node. For the Node 22 figure on PostgreSQL (better-sqlite3 is
 * built for the Node that installed it, so SQLite needs that one):
 *   BENCH_DATABASES=postgres "$(npm exec --yes --package=node@22.23.3 -- node -e 'console.log(process.execPath)' | tail -n 1)" --import tsx scripts/bench-mcp.ts
 * Environment: BENCH_DATABASES (sqlite,postgres), BENCH_POSTGRES_URL, BENCH_SEQUENTIAL (400),
 * BENCH_CONNECTIONS (10), BENCH_DURATION_S (8), BENCH_WARMUP (200 calls), BENCH_PIPELINES (50),
 * BENCH_PIN (0: set 1 to pin the service and this process to one CPU each), BENCH_NODE_ARGS, LOG_LEVEL (warn).
 */
import crypto from 'node:crypto';
import http from 'node:http';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';
import { migrations } from '../app.ts';
import { openDatabase } from '../db/database.ts';
import { applyWorkspace, type ApplyResult } from '../server/admin.ts';
import { systemClock } from '../server/clock.ts';
import { acme, createPipeline } from '../test/support/fixtures.ts';
import { mintConnection } from '../test/mcp/e2e.tokens.ts';
import { type BenchDatabase, dist, type Dist, onEachDatabase, report } from './bench-runner.ts';
import { fmt, log, pinCpus, type Pinning, positive, processCpuMs, runMain, type Server, serviceScript, startServer, stopServer, table, waitReady } from './bench-support.ts';
import { redactUrl } from './postgres.ts';

const SEQUENTIAL = positive('BENCH_SEQUENTIAL', 400);
const CONNECTIONS = positive('BENCH_CONNECTIONS', 10);
const DURATION_S = positive('BENCH_DURATION_S', 8);
const WARMUP = positive('BENCH_WARMUP', 200);
const PIPELINES = positive('BENCH_PIPELINES', 50);
const LOG_LEVEL = process.env.LOG_LEVEL || 'warn';
const EXTRA_NODE_ARGS = (process.env.BENCH_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
const AIM = 1.5;

const QUERY = { id: 'customers.GetSalesPipeline', tool: 'customers_GetSalesPipeline', kind: 'query' } as const;
const COMMAND = { id: 'customers.UpdateSalesPipeline', tool: 'customers_UpdateSalesPipeline', kind: 'command' } as const;
type Operation = typeof QUERY | typeof COMMAND;
type Path = 'http' | 'mcp 2025-11-25' | 'mcp 2026-07-28';
const PATHS: Path[] = ['http', 'mcp 2025-11-25', 'mcp 2026-07-28'];

interface Row {
  operation: string;
  path: Path;
  latencyMs: Dist;
  reqPerS: number;
  serverCpuMsPerCall: number | null;
  calls: number;
  failed: number;
  failureSamples: string[];
}

interface DatabaseResult {
  database: BenchDatabase;
  rows: Row[];
}

// ---------------------------------------------------------------------------------------------
// Requests

interface Call {
  path: string;
  headers: Record<string, string>;
  body: string;
}

/** The next call of an (operation, path): the arguments change each call (round robin, fresh keys). */
function callsOf(op: Operation, path: Path, ids: readonly string[], secrets: { key: string; token: string }, host: string): () => Call {
  let n = 0;
  const run = crypto.randomBytes(3).toString('hex');
  return () => {
    const i = n++;
    const id = ids[i % ids.length]!;
    const idem = crypto.randomUUID();
    const args: Record<string, unknown> = op.kind === 'query' ? { id } : { id, data: { name: `Bench pipeline ${i % ids.length} ${run}-${i}` } };
    if (path === 'http') {
      return {
        path: `/v1/operations/${op.id}`,
        headers: { host, 'content-type': 'application/json', authorization: `Bearer ${secrets.key}`, ...(op.kind === 'command' ? { 'idempotency-key': idem } : {}) },
        body: JSON.stringify(args),
      };
    }
    const toolArgs = op.kind === 'command' ? { ...args, idempotency_key: idem } : args;
    const modern = path === 'mcp 2026-07-28';
    const version = modern ? '2026-07-28' : '2025-11-25';
    const params: Record<string, unknown> = { name: op.tool, arguments: toolArgs };
    if (modern) params._meta = { 'io.modelcontextprotocol/protocolVersion': version, 'io.modelcontextprotocol/clientCapabilities': {} };
    return {
      path: '/v1/mcp',
      headers: {
        host,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: `Bearer ${secrets.token}`,
        'mcp-protocol-version': version,
        ...(modern ? { 'mcp-method': 'tools/call', 'mcp-name': op.tool } : {}),
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: i + 1, method: 'tools/call', params }),
    };
  };
}

/** Why an answer is not a success, or null: HTTP 200, and for a tool call a result without isError with structuredContent. */
function problemOf(path: Path, status: number, body: string): string | null {
  if (status !== 200) return `HTTP ${status} ${body.slice(0, 300)}`;
  if (path === 'http') return null;
  // 2025 answers may come as one SSE event (`data: {...}`), 2026 ones as JSON.
  const json = body.trimStart().startsWith('{') ? body : (/^data: (.*)$/m.exec(body)?.[1] ?? '');
  let msg: { result?: { isError?: boolean; structuredContent?: unknown }; error?: unknown };
  try {
    msg = JSON.parse(json) as typeof msg;
  } catch {
    return `not JSON-RPC: ${body.slice(0, 300)}`;
  }
  if (msg.error) return `JSON-RPC error ${JSON.stringify(msg.error).slice(0, 300)}`;
  if (!msg.result || msg.result.isError || msg.result.structuredContent === undefined) return `tool error ${json.slice(0, 300)}`;
  return null;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

function send(port: number, call: Call): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: call.path, agent, headers: { ...call.headers, 'content-length': Buffer.byteLength(call.body) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    req.end(call.body);
  });
}

// ---------------------------------------------------------------------------------------------
// Phases

async function sequential(server: Server, path: Path, next: () => Call, count: number, failures: string[]): Promise<{ latencies: number[]; failed: number }> {
  const latencies: number[] = [];
  let failed = 0;
  for (let i = 0; i < count; i++) {
    const call = next();
    const t0 = performance.now();
    const res = await send(server.port, call);
    const t = performance.now() - t0;
    const problem = problemOf(path, res.status, res.body);
    if (problem) {
      failed++;
      if (failures.length < 5) failures.push(problem);
    } else latencies.push(t);
  }
  return { latencies, failed };
}

async function throughput(server: Server, path: Path, next: () => Call, failures: string[]): Promise<{ reqPerS: number; cpuMsPerCall: number | null; calls: number; failed: number }> {
  let failed = 0;
  let ok = 0;
  const cpuBefore = processCpuMs(server.child.pid);
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    autocannon(
      {
        url: `http://127.0.0.1:${server.port}`,
        connections: CONNECTIONS,
        pipelining: 1,
        duration: DURATION_S,
        timeout: 10,
        requests: [
          {
            method: 'POST',
            setupRequest: (req: autocannon.Request) => {
              const call = next();
              req.path = call.path;
              req.headers = call.headers;
              req.body = call.body;
              return req;
            },
            onResponse: (status: number, body: string) => {
              const problem = problemOf(path, status, body);
              if (problem) {
                failed++;
                if (failures.length < 5) failures.push(problem);
              } else ok++;
            },
          } as autocannon.Request,
        ],
      },
      (err: unknown, res: autocannon.Result) => (err ? reject(err instanceof Error ? err : new Error(String(err))) : resolve(res)),
    );
  });
  const cpuAfter = processCpuMs(server.child.pid);
  failed += result.errors + result.timeouts;
  const calls = ok + failed;
  return { reqPerS: ok / result.duration, cpuMsPerCall: cpuBefore !== null && cpuAfter !== null && calls ? (cpuAfter - cpuBefore) / calls : null, calls, failed };
}

// ---------------------------------------------------------------------------------------------
// One database

async function seed(databaseUrl: string): Promise<ApplyResult> {
  const db = openDatabase(databaseUrl);
  try {
    await db.migrate(migrations);
    return await applyWorkspace(db, systemClock, { ...acme(), workspace: { name: 'Bench MCP' } });
  } finally {
    await db.close();
  }
}

async function benchDatabase(database: BenchDatabase, databaseUrl: string, pinning: Pinning): Promise<DatabaseResult> {
  log(`${database}: preparing ${database === 'sqlite' ? databaseUrl : redactUrl(databaseUrl)}`);
  const ws = await seed(databaseUrl);
  const key = ws.keys.sales!.secret;
  const env = { NODE_ENV: 'production', DATABASE_URL: databaseUrl, RATE_LIMIT_PER_SECOND: '1000000', RATE_LIMIT_BURST: '1000000', JOBS: 'off', LOG_LEVEL };
  const server = await startServer(`service, ${database}`, serviceScript(), env, pinning, EXTRA_NODE_ARGS);
  try {
    await waitReady(server, (base) => fetch(`${base}/healthz`));
    // PUBLIC_URL is the service's default, http://localhost:PORT: the token's audience and the Host the calls send.
    const host = `localhost:${server.port}`;
    const db = openDatabase(databaseUrl);
    let token: string;
    try {
      const sales = acme().keys!.sales!;
      ({ token } = await mintConnection({ db, clock: systemClock, config: { publicUrl: `http://${host}` } }, ws, {
        access: 'workspace',
        operations: [QUERY.id, COMMAND.id, 'customers.ListSalesPipelines'],
        resources: sales.resources as Record<string, Array<'read' | 'write'>>,
        clientName: 'bench',
      }));
    } finally {
      await db.close();
    }
    const ids: string[] = [];
    for (let i = 0; i < PIPELINES; i++) {
      const res = await send(server.port, { path: '/v1/operations/customers.CreateSalesPipeline', headers: { host, 'content-type': 'application/json', authorization: `Bearer ${key}`, 'idempotency-key': crypto.randomUUID() }, body: JSON.stringify(createPipeline(`Bench pipeline ${i}`)) });
      if (res.status !== 200) throw new Error(`${database}: creating pipeline ${i}: HTTP ${res.status} ${res.body.slice(0, 300)}`);
      ids.push((JSON.parse(res.body) as { item: { id: string } }).item.id);
    }
    const rows: Row[] = [];
    for (const op of [QUERY, COMMAND]) {
      const next = Object.fromEntries(PATHS.map((p) => [p, callsOf(op, p, ids, { key, token }, host)])) as Record<Path, () => Call>;
      const failures = Object.fromEntries(PATHS.map((p) => [p, [] as string[]])) as Record<Path, string[]>;
      // Latency: the paths interleaved call by call, so the machine's load weighs on each alike.
      const seq = Object.fromEntries(PATHS.map((p) => [p, { latencies: [] as number[], failed: 0 }])) as Record<Path, { latencies: number[]; failed: number }>;
      for (let i = 0; i < WARMUP + SEQUENTIAL; i++) {
        for (const path of PATHS) {
          const got = await sequential(server, path, next[path], 1, failures[path]);
          if (i < WARMUP) {
            if (failures[path].length) throw new Error(`${database}: ${op.id} over ${path} fails during the warm-up: ${failures[path][0]}`);
            continue;
          }
          seq[path].latencies.push(...got.latencies);
          seq[path].failed += got.failed;
        }
      }
      for (const path of PATHS) {
        const tp = await throughput(server, path, next[path], failures[path]);
        const row: Row = { operation: op.id, path, latencyMs: dist(seq[path].latencies), reqPerS: tp.reqPerS, serverCpuMsPerCall: tp.cpuMsPerCall, calls: seq[path].latencies.length + seq[path].failed + tp.calls, failed: seq[path].failed + tp.failed, failureSamples: failures[path] };
        rows.push(row);
        log(`${database}: ${op.id} over ${path}: p50 ${fmt(row.latencyMs.p50)} ms, p99 ${fmt(row.latencyMs.p99)} ms, ${fmt(row.reqPerS, 0)} req/s, ${fmt(row.serverCpuMsPerCall ?? Number.NaN)} ms CPU/call${row.failed ? `, ${row.failed} FAILED` : ''}`);
      }
    }
    return { database, rows };
  } finally {
    await stopServer(server);
  }
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<number> {
  const pinning: Pinning = process.env.BENCH_PIN === '1' ? pinCpus() : { pinned: false, note: 'not pinned (BENCH_PIN=1 pins the service and this process to one CPU each)' };
  log(`machine: ${os.cpus().length} x ${os.cpus()[0]?.model ?? 'CPU'}, node ${process.version}; ${pinning.note}`);
  log(`per path: ${WARMUP} warm-up calls, ${SEQUENTIAL} sequential calls (latency), then ${CONNECTIONS} connections for ${DURATION_S} s (throughput, CPU per call)`);
  const run = await onEachDatabase('mcp', (database, url) => benchDatabase(database, url, pinning));
  const lines = [['database', 'operation', 'path', 'p50 ms', 'p90 ms', 'p99 ms', 'req/s', 'CPU ms/call', 'p50 x HTTP', 'CPU x HTTP', 'failed']];
  const checks: Array<[string, boolean]> = [];
  for (const r of run.results) {
    for (const row of r.rows) {
      const base = r.rows.find((x) => x.operation === row.operation && x.path === 'http')!;
      const ratio = row.latencyMs.p50 / base.latencyMs.p50;
      const cpuRatio = row.serverCpuMsPerCall !== null && base.serverCpuMsPerCall ? row.serverCpuMsPerCall / base.serverCpuMsPerCall : Number.NaN;
      lines.push([r.database, row.operation, row.path, fmt(row.latencyMs.p50), fmt(row.latencyMs.p90), fmt(row.latencyMs.p99), fmt(row.reqPerS, 0), fmt(row.serverCpuMsPerCall ?? Number.NaN), row.path === 'http' ? '1.00' : fmt(ratio), row.path === 'http' ? '1.00' : fmt(cpuRatio), String(row.failed)]);
      if (row.path !== 'http') checks.push([`${r.database}: ${row.operation} as a tool call (${row.path}) p50 ${fmt(ratio)} x the HTTP call's (aim <= ${AIM})`, ratio <= AIM]);
      if (row.failed) run.problems.push(`${r.database}: ${row.operation} over ${row.path}: ${row.failed} failed calls, e.g. ${row.failureSamples.join(' | ')}`);
    }
  }
  console.log(`\n${table(lines)}`);
  return report('mcp', run, checks, { sequential: SEQUENTIAL, connections: CONNECTIONS, durationS: DURATION_S, warmup: WARMUP, pipelines: PIPELINES, pinning: pinning.note, aim: AIM });
}

runMain(main);
