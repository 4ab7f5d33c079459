/**
 * `npm run bench:webhooks`: how soon a committed change reaches a webhook receiver, and how many
 * deliveries a second the service sustains, on SQLite and on PostgreSQL (each in turn; PostgreSQL is
 * skipped, with the reason, when it cannot be reached). Bounded (about 3 minutes for both databases),
 * traffic only to 127.0.0.1, stops by itself.
 *
 * Per database: a fresh database (SQLite in a temporary folder; PostgreSQL's schema bench_webhooks,
 * reset); a local HTTPS receiver in its own process (scripts/bench-webhook-receiver.ts, a throwaway CA
 * and certificate made with openssl as test/support/receiver.ts does) answering `200 ok` at once and
 * recording every arrival; the real service (`scripts/start.ts`, NODE_ENV=production, JOBS on, as
 * deployed: one process serving HTTP and running the outbox consumers and the delivery worker; its log
 * is .bench/webhooks-<time>-<db>-server.log) with exactly that receiver allowed
 * (EGRESS_ALLOW_DESTINATIONS=127.0.0.1:PORT, EGRESS_ALLOWED_PORTS=PORT, EGRESS_TEST_CA_FILE).
 *
 * Workspaces (each an owner and a key with customers.* and webhooks.*, a pipeline and
 * BENCH_DEALS_PER_WORKSPACE deals, subscriptions proposed with webhooks.PrepareWebhook and approved by
 * the owner, all to `resource.updated` of `core:Deal`). A subscription may take 60 attempts a minute and
 * a workspace 600 (fixed one-minute windows; over them a delivery is deferred to the next window), so
 * the load is spread to stay under both in steady state (checked at start):
 *
 *   L  BENCH_LATENCY_WORKSPACES (100) x 1 subscription: one delivery per write;
 *   T  BENCH_TPUT_WORKSPACES (30) x BENCH_TPUT_SUBS (10) subscriptions: ten deliveries per write;
 *   B  BENCH_BACKLOG_WORKSPACES (20) x BENCH_TPUT_SUBS subscriptions, for the backlog.
 *
 * Load: `customers.UpdateDeal` at a fixed offered rate, open loop (write k is sent at start + k/rate
 * whatever the answers' latency), each with its own Idempotency-Key, round robin over the set's
 * workspaces and, within each, over its deals (a new name and the other stage each time).
 *
 *   latency     BENCH_WARMUP_S (3 s) + BENCH_LATENCY_S (20 s) at BENCH_LATENCY_RATE (100) writes/s to L:
 *               100 deliveries/s; for every event that occurred in the phase, the receiver's arrival
 *               time − the payload's occurred_at (Unix ms; the service stamps it with the real clock
 *               in the writing transaction; same machine, same clock): commit → first attempt.
 *   throughput  BENCH_WARMUP_S + BENCH_TPUT_S (30 s) at BENCH_TPUT_RATE (250) deliveries/s offered to T
 *               (25 writes/s x 10 subscriptions): deliveries that arrived during the phase per second,
 *               the backlog at its end (fanned-out or not), and the time to drain it.
 *   backlog     (BENCH_BACKLOG_WRITES, 1000; 0 skips it) the service restarted with JOBS=off, 1,000 writes
 *               to B (10,000 deliveries waiting in the outbox, 50 per subscription: all within one minute's limits), the service restarted with JOBS on: the
 *               time until the receiver has them all, and the rate between the first and last arrival
 *               (fan-out and delivery, with no write traffic beside them).
 *
 * Aims: commit → first attempt p50 <= 1 s at the moderate rate; >= 200 deliveries/s sustained (the
 * throughput phase: arrivals/s >= 200 and the backlog at its end under 2 s of offered deliveries).
 * A miss prints MISS (exit 0); failed writes, failed or missing deliveries exit 1.
 * Results: .bench/webhooks-<db>.json.
 * Environment: BENCH_DATABASES (sqlite,postgres), BENCH_POSTGRES_URL (default
 * postgres://wsops:wsops@127.0.0.1:5432/wsops_bench, started with scripts/postgres-local.sh when
 * unreachable), the BENCH_* above, BENCH_DRAIN_TIMEOUT_S (45), BENCH_NODE_ARGS (extra node flags for
 * the service, e.g. "--cpu-prof --cpu-prof-dir=.bench/prof"), LOG_LEVEL (info); any other variable of
 * the environment reaches the service as it is, e.g. OUTBOX_POLL_MS, DATABASE_POOL_MAX (printed when set).
 */
import { type ChildProcess, fork } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { migrations } from '../app.ts';
import { type Database, openDatabase } from '../db/database.ts';
import { createClient } from '../generated/client.ts';
import { approveProposal } from '../handlers/webhooks/subscriptions.ts';
import { applyWorkspace, type WorkspaceSpec } from '../server/admin.ts';
import { systemClock } from '../server/clock.ts';
import { createPipeline } from '../test/support/fixtures.ts';
import { testCertificates } from '../test/support/receiver.ts';
import { fmt, log, openLoopPost, percentile, positive, processCpuMs, resetPostgres, root, runMain, type Server, sleep, startServer, stopServer, table, waitReady } from './bench-support.ts';
import { reachablePostgres, redactUrl } from './postgres.ts';

const DATABASES = (process.env.BENCH_DATABASES ?? 'sqlite,postgres').split(',').map((s) => s.trim());
const PG_DEFAULT = 'postgres://wsops:wsops@127.0.0.1:5432/wsops_bench';
const LOG_LEVEL = process.env.LOG_LEVEL || 'info';
const EXTRA_NODE_ARGS = (process.env.BENCH_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
const WARMUP_S = positive('BENCH_WARMUP_S', 3);
const LAT_WS = positive('BENCH_LATENCY_WORKSPACES', 100);
const LAT_RATE = positive('BENCH_LATENCY_RATE', 100);
const LAT_S = positive('BENCH_LATENCY_S', 20);
const TPUT_WS = positive('BENCH_TPUT_WORKSPACES', 30);
const TPUT_SUBS = positive('BENCH_TPUT_SUBS', 10);
const TPUT_RATE = positive('BENCH_TPUT_RATE', 250);
const TPUT_S = positive('BENCH_TPUT_S', 30);
const BACKLOG_WS = positive('BENCH_BACKLOG_WORKSPACES', 20);
const BACKLOG_WRITES = Number(process.env.BENCH_BACKLOG_WRITES ?? 1000);
const DEALS = positive('BENCH_DEALS_PER_WORKSPACE', 8);
const DRAIN_TIMEOUT_S = positive('BENCH_DRAIN_TIMEOUT_S', 45);
const AIMS = { latencyP50Ms: 1000, deliveriesPerS: 200 };
/** The service's limits (handlers/webhooks/delivery.ts). */
const PER_SUB_PER_MIN = 60;
const PER_WS_PER_MIN = 600;

// ---------------------------------------------------------------------------------------------
// The receiver (its own process)

interface Arrivals {
  at: number[];
  occurredAt: number[];
  webhookIds: string[];
  eventIds: string[];
  bad: number;
}

class Receiver {
  private queue: Array<{ type: string; resolve: (m: Record<string, unknown>) => void }> = [];
  port = 0;
  constructor(readonly child: ChildProcess) {
    child.on('message', (m: Record<string, unknown>) => {
      const i = this.queue.findIndex((q) => q.type === m.type);
      if (i >= 0) this.queue.splice(i, 1)[0]!.resolve(m);
    });
  }

  private ask(msg: Record<string, unknown>, reply: string): Promise<Record<string, unknown>> {
    return new Promise((resolve) => {
      this.queue.push({ type: reply, resolve });
      this.child.send(msg);
    });
  }

  static async start(key: string, cert: string): Promise<Receiver> {
    const child = fork(path.join(root, 'scripts/bench-webhook-receiver.ts'), [], { cwd: root, execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    const r = new Receiver(child);
    r.port = Number((await r.ask({ type: 'listen', key, cert }, 'listening')).port);
    return r;
  }

  async count(): Promise<number> {
    return Number((await this.ask({ type: 'count' }, 'count')).n);
  }

  /** Every arrival so far (fetched incrementally and kept here). */
  private readonly all: Arrivals = { at: [], occurredAt: [], webhookIds: [], eventIds: [], bad: 0 };
  async take(): Promise<Arrivals> {
    const more = (await this.ask({ type: 'take', from: this.all.at.length }, 'records')) as unknown as Arrivals;
    this.all.at.push(...more.at);
    this.all.occurredAt.push(...more.occurredAt);
    this.all.webhookIds.push(...more.webhookIds);
    this.all.eventIds.push(...more.eventIds);
    this.all.bad = more.bad;
    return this.all;
  }

  stop(): void {
    if (this.child.connected) this.child.disconnect();
    if (this.child.exitCode === null) this.child.kill('SIGTERM');
  }
}

// ---------------------------------------------------------------------------------------------
// Open-loop writes

interface Load {
  offered: number;
  ok: number;
  failed: number;
  statusCodes: Record<string, number>;
  failureSamples: string[];
  latencyMs: { p50: number; p99: number; max: number };
  maxSendLagMs: number;
  /** Unix ms of the schedule's start and end. */
  from: number;
  to: number;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

interface Target {
  workspaceId: string;
  secret: string;
  dealIds: string[];
  webhookIds: string[];
}

/** The next write of a set: round robin over its workspaces, then over each one's deals (the counter runs on across phases). */
function writesTo(set: Target[]) {
  let n = 0;
  const run = crypto.randomBytes(3).toString('hex');
  return () => {
    const i = n++;
    const t = set[i % set.length]!;
    const j = Math.floor(i / set.length);
    const k = j % t.dealIds.length;
    const pass = Math.floor(j / t.dealIds.length);
    const body = JSON.stringify({ id: t.dealIds[k], data: { name: `Hook deal ${k} ${run}-${i}`, stage_id: pass % 2 === 0 ? 'proposal' : 'lead' } });
    return { body, headers: { 'content-type': 'application/json', authorization: `Bearer ${t.secret}`, 'idempotency-key': crypto.randomUUID() } };
  };
}

/** Sends `rate` UpdateDeal requests/s for `seconds` on a fixed schedule (open loop); `from`/`to` in the service's Unix ms. */
async function openLoop(server: Server, rate: number, seconds: number, next: ReturnType<typeof writesTo>, onSecond?: (s: number) => void): Promise<Load> {
  const from = Date.now();
  const a = await openLoopPost({ port: server.port, path: '/v1/operations/customers.UpdateDeal', agent }, rate, seconds, next, onSecond);
  const sorted = Float64Array.from(a.latencies).sort();
  return {
    offered: a.offered,
    ok: sorted.length,
    failed: a.failed,
    statusCodes: a.statusCodes,
    failureSamples: a.failureSamples,
    latencyMs: { p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted.length ? sorted[sorted.length - 1]! : Number.NaN },
    maxSendLagMs: a.maxSendLagMs,
    from,
    to: from + seconds * 1000,
  };
}

// ---------------------------------------------------------------------------------------------
// CPU

interface Cpu {
  service: number | null;
  receiver: number | null;
  postgres: number;
  busy: number;
  total: number;
  at: number;
}

function cpuNow(service: Server, receiver: Receiver): Cpu {
  let busy = 0;
  let total = 0;
  let postgres = 0;
  try {
    const fields = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    total = fields.reduce((a, b) => a + b, 0) * 10;
    busy = total - ((fields[3] ?? 0) + (fields[4] ?? 0)) * 10;
    for (const pid of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(pid)) continue;
      try {
        if (fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'postgres') postgres += processCpuMs(Number(pid)) ?? 0;
      } catch {
        // gone meanwhile
      }
    }
  } catch {
    // not Linux
  }
  return { service: processCpuMs(service.child.pid), receiver: processCpuMs(receiver.child.pid), postgres, busy, total, at: performance.now() };
}

/** CPU use between two samples: each process as % of one core, the machine as % of all its CPUs. */
function cpuBetween(a: Cpu, b: Cpu) {
  const ms = Math.max(1, b.at - a.at);
  const pct = (x: number | null, y: number | null) => (x === null || y === null ? null : Math.round(((y - x) / ms) * 100));
  return { servicePct: pct(a.service, b.service), receiverPct: pct(a.receiver, b.receiver), postgresPct: pct(a.postgres, b.postgres), machineBusyPct: b.total > a.total ? Math.round(((b.busy - a.busy) / (b.total - a.total)) * 100) : null };
}

// ---------------------------------------------------------------------------------------------
// Measures

interface Dist {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

function dist(values: number[]): Dist {
  const sorted = Float64Array.from(values).sort();
  return { n: sorted.length, p50: percentile(sorted, 50), p90: percentile(sorted, 90), p99: percentile(sorted, 99), max: sorted.length ? sorted[sorted.length - 1]! : Number.NaN };
}

/** First arrival of each (event, subscription) of a set; duplicates (a second attempt of one delivery) counted. */
function firstArrivals(a: Arrivals, hooks: Set<string>) {
  const first = new Map<string, { at: number; occurredAt: number }>();
  let duplicates = 0;
  for (let i = 0; i < a.at.length; i++) {
    if (!hooks.has(a.webhookIds[i]!)) continue;
    const key = `${a.eventIds[i]} ${a.webhookIds[i]}`;
    if (first.has(key)) duplicates++;
    else first.set(key, { at: a.at[i]!, occurredAt: a.occurredAt[i]! });
  }
  return { first: [...first.values()], duplicates };
}

/** Deliveries of a set of workspaces by status, the failed attempts, and the deliveries deferred (rate limit) now. */
async function deliveryState(db: Database, workspaceIds: string[]) {
  const ph = workspaceIds.map(() => '?').join(', ');
  const rows = await db.sql.all<{ status: string; n: number }>(`SELECT status, COUNT(*) AS n FROM webhook_deliveries WHERE workspace_id IN (${ph}) GROUP BY status`, workspaceIds);
  const byStatus = Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
  const failedAttempts = Number((await db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM webhook_attempts WHERE workspace_id IN (${ph}) AND (status_code IS NULL OR status_code < 200 OR status_code > 299)`, workspaceIds))?.n ?? 0);
  const attempts = Number((await db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM webhook_attempts WHERE workspace_id IN (${ph})`, workspaceIds))?.n ?? 0);
  const deferred = Number(
    (await db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM webhook_deliveries WHERE workspace_id IN (${ph}) AND status = 'pending' AND attempts = 0 AND next_attempt_at > ?`, [...workspaceIds, Date.now() + 1000]))?.n ?? 0,
  );
  const durations = await db.sql.all<{ d: number }>(`SELECT duration_ms AS d FROM webhook_attempts WHERE workspace_id IN (${ph})`, workspaceIds);
  const span = await db.sql.one<{ c0: number | null; c1: number | null; a0: number | null; a1: number | null }>(
    `SELECT MIN(created_at) AS c0, MAX(created_at) AS c1, MIN(first_attempt_at) AS a0, MAX(first_attempt_at) AS a1 FROM webhook_deliveries WHERE workspace_id IN (${ph})`,
    workspaceIds,
  );
  const n = (v: number | null | undefined) => (v === null || v === undefined ? null : Number(v));
  return {
    byStatus,
    attempts,
    failedAttempts,
    deferred,
    /** The HTTPS POST of each attempt as the service timed it (connect, TLS, request, answer), ms. */
    attemptMs: dist(durations.map((r) => Number(r.d))),
    /** Unix ms: the fan-out made the deliveries from .. to; their first attempts began from .. to. */
    created: { from: n(span?.c0), to: n(span?.c1) },
    firstAttempt: { from: n(span?.a0), to: n(span?.a1) },
  };
}

/** For deliveries of events that occurred in [from, to): occurred -> delivery made (outbox and fan-out) -> first attempt began (delivery worker), ms. */
async function deliveryParts(db: Database, workspaceIds: string[], from: number, to: number) {
  const ph = workspaceIds.map(() => '?').join(', ');
  const rows = await db.sql.all<{ o: number; c: number; a: number | null }>(
    `SELECT event_occurred_at AS o, created_at AS c, first_attempt_at AS a FROM webhook_deliveries WHERE workspace_id IN (${ph}) AND event_occurred_at >= ? AND event_occurred_at < ?`,
    [...workspaceIds, from, to],
  );
  return {
    occurredToMadeMs: dist(rows.map((r) => Number(r.c) - Number(r.o))),
    madeToFirstAttemptMs: dist(rows.filter((r) => r.a !== null).map((r) => Number(r.a) - Number(r.c))),
  };
}

async function waitForArrivals(receiver: Receiver, hooks: Set<string>, expected: number, timeoutS: number): Promise<{ arrived: number; seconds: number; complete: boolean }> {
  const t0 = performance.now();
  let arrived = 0;
  for (;;) {
    const a = await receiver.take();
    arrived = firstArrivals(a, hooks).first.length;
    if (arrived >= expected) break;
    if (performance.now() - t0 > timeoutS * 1000) break;
    await sleep(200);
  }
  return { arrived, seconds: (performance.now() - t0) / 1000, complete: arrived >= expected };
}

// ---------------------------------------------------------------------------------------------
// One database

interface Result {
  database: 'sqlite' | 'postgres';
  setupS: number;
  latency: {
    writes: Load;
    deliveriesPerWrite: number;
    commitToArrivalMs: Dist;
    parts: Awaited<ReturnType<typeof deliveryParts>>;
    drainS: number;
    missing: number;
    duplicates: number;
    cpu: ReturnType<typeof cpuBetween>;
    deliveries: Awaited<ReturnType<typeof deliveryState>>;
  };
  throughput: {
    writes: Load;
    offeredDeliveriesPerS: number;
    arrivedInPhase: number;
    achievedPerS: number;
    lastTenSecondsPerS: number;
    perSecond: number[];
    backlogAtEnd: number;
    backlogAtEndDb: Record<string, number>;
    commitToArrivalMs: Dist;
    drain: { complete: boolean; seconds: number; missing: number };
    duplicates: number;
    cpu: ReturnType<typeof cpuBetween>;
    deliveries: Awaited<ReturnType<typeof deliveryState>>;
  };
  backlog: null | {
    writes: Load;
    deliveries: number;
    /** From the JOBS-on service's spawn (and from its readiness) to the last arrival. */
    drainFromSpawnS: number;
    drainFromReadyS: number;
    firstToLastPerS: number;
    complete: boolean;
    missing: number;
    cpu: ReturnType<typeof cpuBetween>;
    state: Awaited<ReturnType<typeof deliveryState>>;
  };
  problems: string[];
  serverLog: string;
}

const runStamp = new Date().toISOString().replace(/[:.]/g, '-');

function workspaceSpec(name: string): WorkspaceSpec {
  return {
    workspace: { name },
    members: { olga: { name: 'Olga Owner', email: 'olga@hooks.test', role: 'owner' } },
    keys: {
      hooks: {
        name: 'Webhook bench integration',
        operations: ['webhooks.*', 'customers.*'],
        resources: { 'core:SalesPipeline': ['read', 'write'], 'core:Deal': ['read', 'write'] },
      },
    },
  };
}

async function benchDatabase(database: 'sqlite' | 'postgres', databaseUrl: string, receiver: Receiver, caFile: string): Promise<Result> {
  const label = database === 'sqlite' ? 'SQLite' : 'PostgreSQL';
  log(`${label}: preparing ${database === 'sqlite' ? databaseUrl : redactUrl(databaseUrl)}`);
  const problems: string[] = [];
  const setupStart = performance.now();
  const db = openDatabase(databaseUrl);
  try {
    await db.migrate(migrations);
    const sets = { L: LAT_WS, T: TPUT_WS, ...(BACKLOG_WRITES > 0 ? { B: BACKLOG_WS } : {}) } as Record<'L' | 'T' | 'B', number>;
    const applied: Record<string, Array<{ workspaceId: string; secret: string; owner: string }>> = {};
    for (const [set, n] of Object.entries(sets)) {
      applied[set] = [];
      for (let i = 0; i < n; i++) {
        const r = await applyWorkspace(db, systemClock, workspaceSpec(`Hooks ${set}${i}`));
        applied[set]!.push({ workspaceId: r.workspace_id, secret: r.keys.hooks!.secret, owner: r.members.olga! });
      }
    }

    fs.mkdirSync(path.join(root, '.bench'), { recursive: true });
    const serverLog = path.join(root, '.bench', `webhooks-${runStamp}-${database}-server.log`);
    const serviceEnv = {
      NODE_ENV: 'production',
      DATABASE_URL: databaseUrl,
      RATE_LIMIT_PER_SECOND: '1000000',
      RATE_LIMIT_BURST: '1000000',
      LOG_LEVEL,
      EGRESS_ALLOW_DESTINATIONS: `127.0.0.1:${receiver.port}`,
      EGRESS_ALLOWED_PORTS: String(receiver.port),
      EGRESS_TEST_CA_FILE: caFile,
    };
    const unpinned = { pinned: false, note: '' };
    let server = await startServer(`service, ${label}`, 'scripts/start.ts', serviceEnv, unpinned, EXTRA_NODE_ARGS, serverLog);
    try {
      await waitReady(server, (base) => fetch(`${base}/healthz`));
      const targets: Record<string, Target[]> = {};
      for (const [set, list] of Object.entries(applied)) {
        const subs = set === 'L' ? 1 : TPUT_SUBS;
        targets[set] = new Array(list.length);
        for (let start = 0; start < list.length; start += 10) {
          await Promise.all(
            list.slice(start, start + 10).map(async (w, j) => {
              const client = createClient({ baseUrl: `http://127.0.0.1:${server.port}/v1`, apiKey: w.secret });
              const p = await client.customers.CreateSalesPipeline(createPipeline('Hooks'));
              if (!p.data) throw new Error(`creating a pipeline failed: HTTP ${p.response.status} ${JSON.stringify(p.error)}`);
              const dealIds: string[] = [];
              for (let d = 0; d < DEALS; d++) {
                const r = await client.customers.CreateDeal({ data: { name: `Hook deal ${d}`, amount: { amount: '1000.00', currency: 'EUR' }, pipeline_id: p.data.item.id, stage_id: 'lead' } });
                if (!r.data) throw new Error(`creating a deal failed: HTTP ${r.response.status} ${JSON.stringify(r.error)}`);
                dealIds.push(r.data.item.id);
              }
              const webhookIds: string[] = [];
              for (let s = 0; s < subs; s++) {
                const proposed = await client.webhooks.PrepareWebhook({ url: `https://127.0.0.1:${receiver.port}/hook/${set}/${s}`, event: 'resource.updated', resource_types: ['core:Deal'] });
                if (!proposed.data) throw new Error(`PrepareWebhook failed: HTTP ${proposed.response.status} ${JSON.stringify(proposed.error)}`);
                const { webhook_id } = await approveProposal(db, systemClock, proposed.data.proposal_id, { workspaceId: w.workspaceId, memberId: w.owner, role: 'owner' });
                webhookIds.push(webhook_id);
              }
              targets[set]![start + j] = { workspaceId: w.workspaceId, secret: w.secret, dealIds, webhookIds };
            }),
          );
        }
      }
      const hooksOf = (set: string) => new Set(targets[set]!.flatMap((t) => t.webhookIds));
      const idsOf = (set: string) => targets[set]!.map((t) => t.workspaceId);
      const setupS = (performance.now() - setupStart) / 1000;
      log(`${label}: ${Object.entries(targets).map(([s, l]) => `${s}: ${l.length} workspaces x ${l[0]!.webhookIds.length} subscriptions`).join('; ')}; ${DEALS} deals each (${fmt(setupS, 1)} s)`);

      // ---- latency
      const nextL = writesTo(targets.L!);
      log(`${label}: latency: warm-up ${WARMUP_S} s + ${LAT_S} s at ${LAT_RATE} writes/s (${LAT_RATE} deliveries/s)`);
      const warmL = await openLoop(server, LAT_RATE, WARMUP_S, nextL);
      let c0 = cpuNow(server, receiver);
      const latWrites = await openLoop(server, LAT_RATE, LAT_S, nextL);
      let c1 = cpuNow(server, receiver);
      const latCpu = cpuBetween(c0, c1);
      const hooksL = hooksOf('L');
      const expectedL = warmL.ok + latWrites.ok;
      const drainL = await waitForArrivals(receiver, hooksL, expectedL, DRAIN_TIMEOUT_S);
      const arrivalsL = firstArrivals(await receiver.take(), hooksL);
      const inPhaseL = arrivalsL.first.filter((r) => r.occurredAt >= latWrites.from && r.occurredAt < latWrites.to);
      const latDist = dist(inPhaseL.map((r) => r.at - r.occurredAt));
      const latState = await deliveryState(db, idsOf('L'));
      const latParts = await deliveryParts(db, idsOf('L'), latWrites.from, latWrites.to);
      log(
        `${label}: latency: ${latWrites.ok} writes (p50 ${fmt(latWrites.latencyMs.p50)} ms), commit -> arrival p50 ${fmt(latDist.p50, 0)} / p99 ${fmt(latDist.p99, 0)} / max ${fmt(latDist.max, 0)} ms over ${latDist.n}; ` +
          `parts p50: occurred -> delivery made ${fmt(latParts.occurredToMadeMs.p50, 0)} ms, -> first attempt began ${fmt(latParts.madeToFirstAttemptMs.p50, 0)} ms, attempt ${fmt(latState.attemptMs.p50, 0)} ms; ` +
          `${drainL.complete ? 'all arrived' : `${expectedL - drainL.arrived} MISSING`}; service CPU ${latCpu.servicePct} %, receiver ${latCpu.receiverPct} %`,
      );
      if (!drainL.complete) problems.push(`${database}: latency phase: ${expectedL - drainL.arrived} of ${expectedL} deliveries did not arrive within ${DRAIN_TIMEOUT_S} s`);
      for (const l of [warmL, latWrites]) if (l.failed) problems.push(`${database}: latency phase: ${l.failed} of ${l.offered} writes failed: ${JSON.stringify(l.statusCodes)}; ${l.failureSamples.join(' | ')}`);

      // ---- throughput
      const tputWriteRate = TPUT_RATE / TPUT_SUBS;
      const nextT = writesTo(targets.T!);
      const hooksT = hooksOf('T');
      log(`${label}: throughput: warm-up ${WARMUP_S} s + ${TPUT_S} s at ${tputWriteRate} writes/s x ${TPUT_SUBS} subscriptions = ${TPUT_RATE} deliveries/s offered`);
      const warmT = await openLoop(server, tputWriteRate, WARMUP_S, nextT);
      const baseCount = await receiver.count();
      const counts: number[] = [];
      c0 = cpuNow(server, receiver);
      const phaseStart = Date.now();
      const sampling = setInterval(() => void receiver.count().then((n) => counts.push(n)), 1000);
      const tWrites = await openLoop(server, tputWriteRate, TPUT_S, nextT);
      clearInterval(sampling);
      const phaseEnd = Date.now();
      c1 = cpuNow(server, receiver);
      const tCpu = cpuBetween(c0, c1);
      const atEndDb = (await deliveryState(db, idsOf('T'))).byStatus;
      const atEnd = firstArrivals(await receiver.take(), hooksT);
      const expectedT = (warmT.ok + tWrites.ok) * TPUT_SUBS;
      const arrivedInPhase = atEnd.first.filter((r) => r.at >= phaseStart && r.at < phaseEnd).length;
      const perSecond = counts.map((n, i) => n - (i === 0 ? baseCount : counts[i - 1]!));
      const lastTen = perSecond.slice(-10);
      const drainStart = performance.now();
      const drainT = await waitForArrivals(receiver, hooksT, expectedT, DRAIN_TIMEOUT_S);
      const drainTS = (performance.now() - drainStart) / 1000;
      const arrivalsT = firstArrivals(await receiver.take(), hooksT);
      const tDist = dist(arrivalsT.first.filter((r) => r.occurredAt >= tWrites.from && r.occurredAt < tWrites.to).map((r) => r.at - r.occurredAt));
      const tState = await deliveryState(db, idsOf('T'));
      const achieved = arrivedInPhase / ((phaseEnd - phaseStart) / 1000);
      log(
        `${label}: throughput: ${fmt(achieved, 1)} deliveries/s arrived during the phase (last 10 s: ${fmt(lastTen.reduce((a, b) => a + b, 0) / Math.max(1, lastTen.length), 1)}/s), ` +
          `backlog at its end ${expectedT - atEnd.first.length} (db: ${JSON.stringify(atEndDb)}), ${drainT.complete ? `drained in ${fmt(drainTS, 1)} s` : `${expectedT - drainT.arrived} MISSING after ${DRAIN_TIMEOUT_S} s`}; ` +
          `commit -> arrival p50 ${fmt(tDist.p50, 0)} ms; attempt p50 ${fmt(tState.attemptMs.p50, 0)} / p99 ${fmt(tState.attemptMs.p99, 0)} ms; service CPU ${tCpu.servicePct} %, receiver ${tCpu.receiverPct} %, PostgreSQL ${tCpu.postgresPct} %, machine ${tCpu.machineBusyPct} %`,
      );
      if (!drainT.complete) problems.push(`${database}: throughput phase: ${expectedT - drainT.arrived} of ${expectedT} deliveries did not arrive within ${DRAIN_TIMEOUT_S} s of its end`);
      for (const l of [warmT, tWrites]) if (l.failed) problems.push(`${database}: throughput phase: ${l.failed} of ${l.offered} writes failed: ${JSON.stringify(l.statusCodes)}; ${l.failureSamples.join(' | ')}`);
      for (const [name, s] of [['latency', latState], ['throughput', tState]] as const) {
        if (s.failedAttempts) problems.push(`${database}: ${name} phase: ${s.failedAttempts} attempts failed`);
      }

      // ---- backlog
      let backlog: Result['backlog'] = null;
      if (BACKLOG_WRITES > 0) {
        log(`${label}: backlog: restarting the service with JOBS=off; ${BACKLOG_WRITES} writes to ${BACKLOG_WS} workspaces x ${TPUT_SUBS} subscriptions`);
        await stopServer(server);
        server = await startServer(`service (JOBS=off), ${label}`, 'scripts/start.ts', { ...serviceEnv, JOBS: 'off' }, unpinned, [], serverLog.replace(/-server\.log$/, '-jobs-off.log'));
        await waitReady(server, (base) => fetch(`${base}/healthz`));
        const bWrites = await openLoop(server, 200, BACKLOG_WRITES / 200, writesTo(targets.B!));
        await stopServer(server);
        if (bWrites.failed) problems.push(`${database}: backlog: ${bWrites.failed} of ${bWrites.offered} writes failed: ${JSON.stringify(bWrites.statusCodes)}; ${bWrites.failureSamples.join(' | ')}`);
        const expectedB = bWrites.ok * TPUT_SUBS;
        const hooksB = hooksOf('B');
        log(`${label}: backlog: ${expectedB} deliveries waiting in the outbox; starting the service with JOBS on`);
        const spawned = performance.now();
        server = await startServer(`service, ${label}`, 'scripts/start.ts', serviceEnv, unpinned, EXTRA_NODE_ARGS, serverLog.replace(/-server\.log$/, '-backlog.log'));
        const b0 = cpuNow(server, receiver);
        await waitReady(server, (base) => fetch(`${base}/healthz`));
        const ready = performance.now();
        const drainB = await waitForArrivals(receiver, hooksB, expectedB, DRAIN_TIMEOUT_S);
        const b1 = cpuNow(server, receiver);
        const arrivalsB = firstArrivals(await receiver.take(), hooksB).first.map((r) => r.at).sort((a, b) => a - b);
        const last = arrivalsB.at(-1) ?? Number.NaN;
        const lastPerf = last - performance.timeOrigin;
        const state = await deliveryState(db, idsOf('B'));
        backlog = {
          writes: bWrites,
          deliveries: expectedB,
          drainFromSpawnS: (lastPerf - spawned) / 1000,
          drainFromReadyS: (lastPerf - ready) / 1000,
          firstToLastPerS: arrivalsB.length > 1 ? (arrivalsB.length - 1) / ((last - arrivalsB[0]!) / 1000) : Number.NaN,
          complete: drainB.complete,
          missing: expectedB - drainB.arrived,
          cpu: cpuBetween(b0, b1),
          state,
        };
        log(
          `${label}: backlog: ${drainB.complete ? `all ${expectedB} arrived ${fmt(backlog.drainFromReadyS, 1)} s after the service was ready (${fmt(backlog.drainFromSpawnS, 1)} s after its start)` : `${backlog.missing} of ${expectedB} MISSING after ${DRAIN_TIMEOUT_S} s`}, ` +
            `${fmt(backlog.firstToLastPerS, 1)} deliveries/s from first to last arrival; fan-out made them over ${fmt(((state.created.to ?? NaN) - (state.created.from ?? NaN)) / 1000, 1)} s, ` +
            `first attempts over ${fmt(((state.firstAttempt.to ?? NaN) - (state.firstAttempt.from ?? NaN)) / 1000, 1)} s (from ${fmt(((state.firstAttempt.from ?? NaN) - (state.created.from ?? NaN)) / 1000, 1)} s after the first was made); ` +
            `attempt p50 ${fmt(state.attemptMs.p50, 0)} / p99 ${fmt(state.attemptMs.p99, 0)} ms; service CPU ${backlog.cpu.servicePct} %, receiver ${backlog.cpu.receiverPct} %`,
        );
        if (!drainB.complete) problems.push(`${database}: backlog: ${backlog.missing} of ${expectedB} deliveries did not arrive within ${DRAIN_TIMEOUT_S} s`);
        if (state.failedAttempts) problems.push(`${database}: backlog: ${state.failedAttempts} attempts failed`);
      }
      await stopServer(server);

      return {
        database,
        setupS,
        latency: { writes: latWrites, deliveriesPerWrite: 1, commitToArrivalMs: latDist, parts: latParts, drainS: drainL.seconds, missing: expectedL - drainL.arrived, duplicates: arrivalsL.duplicates, cpu: latCpu, deliveries: latState },
        throughput: {
          writes: tWrites,
          offeredDeliveriesPerS: TPUT_RATE,
          arrivedInPhase,
          achievedPerS: achieved,
          lastTenSecondsPerS: lastTen.reduce((a, b) => a + b, 0) / Math.max(1, lastTen.length),
          perSecond,
          backlogAtEnd: expectedT - atEnd.first.length,
          backlogAtEndDb: atEndDb,
          commitToArrivalMs: tDist,
          drain: { complete: drainT.complete, seconds: drainTS, missing: expectedT - drainT.arrived },
          duplicates: arrivalsT.duplicates,
          cpu: tCpu,
          deliveries: tState,
        },
        backlog,
        problems,
        serverLog: path.relative(root, serverLog),
      };
    } finally {
      await stopServer(server);
    }
  } finally {
    await db.close();
  }
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<number> {
  const started = new Date();
  const perWsPerMin = (rate: number, sets: number, subs: number) => ((rate / sets) * subs * 60);
  const limits = [
    ['latency', LAT_RATE, LAT_WS, 1],
    ['throughput', TPUT_RATE / TPUT_SUBS, TPUT_WS, TPUT_SUBS],
  ] as const;
  console.log(`Webhook benchmark: customers.UpdateDeal writes (open loop) to the service, deliveries to a local HTTPS receiver`);
  console.log(`  ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}), load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}, node ${process.version}`);
  for (const [name, writes, ws, subs] of limits) {
    const perSub = (writes / ws) * 60;
    const perWs = perWsPerMin(writes, ws, subs);
    console.log(`  ${name}: ${writes} writes/s over ${ws} workspaces x ${subs} subscriptions = ${writes * subs} deliveries/s; per subscription ${fmt(perSub, 1)}/min (limit ${PER_SUB_PER_MIN}), per workspace ${fmt(perWs, 0)}/min (limit ${PER_WS_PER_MIN})`);
    if (perSub > PER_SUB_PER_MIN || perWs > PER_WS_PER_MIN) console.log(`  WARNING: the ${name} phase exceeds the service's per-minute limits; deliveries will be deferred to the next minute`);
  }
  if (BACKLOG_WRITES > 0) {
    const perSub = BACKLOG_WRITES / BACKLOG_WS;
    console.log(`  backlog: ${BACKLOG_WRITES} writes to ${BACKLOG_WS} workspaces x ${TPUT_SUBS} subscriptions = ${BACKLOG_WRITES * TPUT_SUBS} deliveries; per subscription ${fmt(perSub, 0)} (limit ${PER_SUB_PER_MIN}/min), per workspace ${fmt(perSub * TPUT_SUBS, 0)} (limit ${PER_WS_PER_MIN}/min)`);
    if (perSub > PER_SUB_PER_MIN || perSub * TPUT_SUBS > PER_WS_PER_MIN) console.log('  WARNING: the backlog exceeds one minute\'s limits; part of it will be deferred to the next minute');
  }
  const passed = ['OUTBOX_POLL_MS', 'JOBS_POLL_MS', 'DATABASE_POOL_MAX'].filter((k) => process.env[k] !== undefined).map((k) => `${k}=${process.env[k]}`);
  if (passed.length) console.log(`  service environment: ${passed.join(' ')}`);
  console.log('');

  const certs = testCertificates();
  const receiver = await Receiver.start(certs.keyPem, certs.certPem);
  log(`receiver: https://127.0.0.1:${receiver.port}/ (own process, pid ${receiver.child.pid})`);
  const results: Result[] = [];
  const problems: string[] = [];
  let pgSkipped: string | null = null;
  try {
    if (DATABASES.includes('sqlite')) {
      const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'wsops-bench-webhooks-'));
      try {
        results.push(await benchDatabase('sqlite', `sqlite:${path.join(tmp, 'webhooks.sqlite')}`, receiver, certs.caFile));
      } catch (err) {
        problems.push(`SQLite run failed: ${(err as Error).stack}`);
        log(problems.at(-1)!);
      } finally {
        fs.rmSync(tmp, { recursive: true, force: true });
      }
    }
    if (DATABASES.includes('postgres')) {
      const target = await reachablePostgres(process.env.BENCH_POSTGRES_URL || PG_DEFAULT, !process.env.BENCH_POSTGRES_URL, log);
      if ('why' in target) {
        pgSkipped = target.why;
        log(`PostgreSQL part DID NOT RUN: ${pgSkipped}`);
      } else {
        const url = new URL(target.url);
        url.searchParams.set('schema', 'bench_webhooks');
        try {
          await resetPostgres(url.toString());
          results.push(await benchDatabase('postgres', url.toString(), receiver, certs.caFile));
        } catch (err) {
          problems.push(`PostgreSQL run failed: ${(err as Error).stack}`);
          log(problems.at(-1)!);
        }
      }
    }
  } finally {
    receiver.stop();
  }

  const rows: string[][] = [['measure', 'aim', ...results.map((r) => r.database)]];
  const row = (labelText: string, aim: string, value: (r: Result) => string) => rows.push([labelText, aim, ...results.map(value)]);
  const cpu = (c: ReturnType<typeof cpuBetween>, pg: boolean) => `${c.servicePct ?? '?'} / ${c.receiverPct ?? '?'} / ${pg ? (c.postgresPct ?? '?') : '-'} / ${c.machineBusyPct ?? '?'}`;
  row(`latency: writes/s taken (${LAT_RATE} offered, 1 delivery each)`, '-', (r) => fmt(r.latency.writes.ok / LAT_S, 1));
  row('  write p50 / p99 (ms)', '-', (r) => `${fmt(r.latency.writes.latencyMs.p50)} / ${fmt(r.latency.writes.latencyMs.p99)}`);
  row('  commit -> first attempt p50 / p99 / max (ms)', 'p50 <= 1000', (r) => `${fmt(r.latency.commitToArrivalMs.p50, 0)} / ${fmt(r.latency.commitToArrivalMs.p99, 0)} / ${fmt(r.latency.commitToArrivalMs.max, 0)}`);
  row('    parts p50: event -> delivery made / -> attempt began / attempt', '-', (r) => `${fmt(r.latency.parts.occurredToMadeMs.p50, 0)} / ${fmt(r.latency.parts.madeToFirstAttemptMs.p50, 0)} / ${fmt(r.latency.deliveries.attemptMs.p50, 0)}`);
  row('  CPU %: service / receiver / PostgreSQL / machine', '-', (r) => cpu(r.latency.cpu, r.database === 'postgres'));
  row(`throughput: deliveries/s offered (${fmt(TPUT_RATE / TPUT_SUBS, 1)} writes/s x ${TPUT_SUBS})`, '-', () => String(TPUT_RATE));
  row('  deliveries/s arrived in the phase / last 10 s', '>= 200', (r) => `${fmt(r.throughput.achievedPerS, 1)} / ${fmt(r.throughput.lastTenSecondsPerS, 1)}`);
  row('  backlog at its end (deliveries)', `< ${2 * TPUT_RATE}`, (r) => String(r.throughput.backlogAtEnd));
  row('  drain after the phase (s)', `<= ${DRAIN_TIMEOUT_S}`, (r) => (r.throughput.drain.complete ? fmt(r.throughput.drain.seconds, 1) : `not drained (${r.throughput.drain.missing} missing)`));
  row('  commit -> first attempt p50 / p99 (ms)', '-', (r) => `${fmt(r.throughput.commitToArrivalMs.p50, 0)} / ${fmt(r.throughput.commitToArrivalMs.p99, 0)}`);
  row('  write p50 / p99 (ms)', '-', (r) => `${fmt(r.throughput.writes.latencyMs.p50)} / ${fmt(r.throughput.writes.latencyMs.p99)}`);
  row('  CPU %: service / receiver / PostgreSQL / machine', '-', (r) => cpu(r.throughput.cpu, r.database === 'postgres'));
  if (BACKLOG_WRITES > 0) {
    row(`backlog: deliveries waiting (${BACKLOG_WRITES} events x ${TPUT_SUBS})`, '-', (r) => String(r.backlog?.deliveries ?? 'n/a'));
    row('  drained after the service was ready (s)', '-', (r) => (r.backlog ? (r.backlog.complete ? fmt(r.backlog.drainFromReadyS, 1) : `not drained (${r.backlog.missing} missing)`) : 'n/a'));
    row('  deliveries/s, first to last arrival', '-', (r) => (r.backlog ? fmt(r.backlog.firstToLastPerS, 1) : 'n/a'));
    row('  CPU %: service / receiver / PostgreSQL / machine', '-', (r) => (r.backlog ? cpu(r.backlog.cpu, r.database === 'postgres') : 'n/a'));
  }
  row('attempts failed / duplicate arrivals / deferred', '0', (r) => `${r.latency.deliveries.failedAttempts + r.throughput.deliveries.failedAttempts + (r.backlog?.state.failedAttempts ?? 0)} / ${r.latency.duplicates + r.throughput.duplicates} / ${r.latency.deliveries.deferred + r.throughput.deliveries.deferred}`);
  console.log('');
  console.log(table(rows));
  console.log('commit -> first attempt: the receiver\'s arrival time - the payload\'s occurred_at (one clock), for events that occurred in the phase; write latency from when each write was due (open loop).');

  const checks: Array<[string, boolean]> = [];
  for (const r of results) {
    checks.push(
      [`${r.database}: commit -> first attempt p50 ${fmt(r.latency.commitToArrivalMs.p50, 0)} ms <= ${AIMS.latencyP50Ms} ms`, r.latency.commitToArrivalMs.p50 <= AIMS.latencyP50Ms],
      [
        `${r.database}: ${fmt(r.throughput.achievedPerS, 1)} deliveries/s sustained (>= ${AIMS.deliveriesPerS}, backlog at the end ${r.throughput.backlogAtEnd} < ${2 * TPUT_RATE})`,
        r.throughput.achievedPerS >= AIMS.deliveriesPerS && r.throughput.backlogAtEnd < 2 * TPUT_RATE,
      ],
    );
    problems.push(...r.problems);
  }
  console.log('\nAims:');
  for (const [text, ok] of checks) console.log(`  ${ok ? 'ok  ' : 'MISS'}  ${text}`);
  if (pgSkipped) console.log(`\nPostgreSQL part DID NOT RUN: ${pgSkipped}. Set BENCH_POSTGRES_URL to a reachable database.`);
  for (const p of problems) console.log(`\nPROBLEM: ${p}`);

  const outDir = path.join(root, '.bench');
  fs.mkdirSync(outDir, { recursive: true });
  const meta = {
    started: started.toISOString(),
    finished: new Date().toISOString(),
    machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, loadavg: os.loadavg(), node: process.version },
    config: {
      warmupS: WARMUP_S,
      latency: { workspaces: LAT_WS, subscriptionsEach: 1, writesPerS: LAT_RATE, seconds: LAT_S },
      throughput: { workspaces: TPUT_WS, subscriptionsEach: TPUT_SUBS, deliveriesPerS: TPUT_RATE, seconds: TPUT_S },
      backlog: BACKLOG_WRITES > 0 ? { workspaces: BACKLOG_WS, subscriptionsEach: TPUT_SUBS, writes: BACKLOG_WRITES } : null,
      dealsPerWorkspace: DEALS,
      drainTimeoutS: DRAIN_TIMEOUT_S,
      serviceEnv: passed,
      nodeArgs: EXTRA_NODE_ARGS,
    },
    aims: AIMS,
  };
  for (const r of results) {
    const file = path.join(outDir, `webhooks-${r.database}.json`);
    fs.writeFileSync(file, JSON.stringify({ ...meta, result: r, checks: checks.filter(([t]) => t.startsWith(r.database)).map(([target, ok]) => ({ target, ok })) }, null, 2));
    console.log(`Results: ${path.relative(root, file)}`);
  }
  return problems.length ? 1 : 0;
}

runMain(main);
