/**
 * `npm run bench:automation`: what automation rules cost the write path, and how soon their runs
 * finish, on SQLite and on PostgreSQL (each in turn; PostgreSQL is skipped, with the reason, when it
 * cannot be reached).
 *
 * Per database: a fresh database (SQLite in a temporary folder; PostgreSQL's schema bench_automation,
 * reset), the Acme workspace (test/support/fixtures.ts: an owner and an admin, the `sales` key) with
 * 20 automation rules on `core:Deal` updates (below), all authored paused (`enabled: false`). Then the
 * real service (`scripts/start.ts`, NODE_ENV=production, jobs and outbox consumers on, as deployed:
 * one process, not pinned unless BENCH_PIN=1; its log is .bench/automation-<time>-<db>-server.log)
 * gets BENCH_PIPELINES pipelines, a company and BENCH_DEALS deals, and `customers.UpdateDeal` at a fixed
 * offered rate (BENCH_WRITE_RATE, default 200 writes/s), open loop: request k is sent at start + k/rate
 * whatever the answers' latency (keep-alive connections as needed), each with its own Idempotency-Key,
 * round robin over the deals (each deal is written every BENCH_DEALS / rate seconds, so writes do not
 * queue on one row). Each write sets a new name, flips the stage (lead / proposal) and sets a new amount
 * (1,000.00-10,999.00 EUR); one name in 20 contains "VIP". Latency is timed from when the request was
 * due (so a stalled server cannot hide queueing), at the HTTP level in this process.
 *
 *   warm-up A  BENCH_WARMUP_S (5 s), rules paused;
 *   phase A    BENCH_PHASE_S (30 s), rules paused: the baseline;
 *   the 20 rules are resumed (the admin's `automation resume`, from this process);
 *   warm-up B  BENCH_WARMUP_S, rules on;
 *   phase B    BENCH_PHASE_S, rules on: write latency and rate against A; and for every run of an
 *              event that occurred in phase B: finished_at − the event's occurred_at (both stamped by
 *              the service's clock), and its parts (occurred → queued by the outbox consumer → started
 *              by the job runner → finished);
 *   drain      until the outbox consumer has read every event and no run is queued or running
 *              (at most BENCH_DRAIN_TIMEOUT_S, 60 s), timed from the end of phase B.
 *
 * The rules (all `core:Deal` `updated`, each with a `fields` filter, so the close_date their
 * set_fields actions write triggers none of them; the loop guard is not needed): 8 notify (owners
 * and admins), 8 set_fields (close_date; one with an `expected` stage, which fails when the deal moved
 * on before the run), 3 create_record (a company), 1 notify and create_record; 5 of them never match
 * the traffic (USD, won/lost stages, names or amounts that never occur), as rules written for other
 * situations do. Expected: about
 * 1.5 runs per write (the `expected` column of RULES), so about 300 runs/s at 200 writes/s.
 *
 * Aims: event → run finished p50 <= 1 s on both databases; write path slowdown <= 10 % (phase B's p50
 * at most 1.10 x phase A's, and B's achieved rate at least 0.90 x A's). A miss prints MISS (exit 0);
 * failed requests, a run that did not happen as planned or a backlog that did not drain exit 1.
 * Results: .bench/automation-<db>.json.
 * Environment: BENCH_DATABASES (sqlite,postgres), BENCH_POSTGRES_URL (default
 * postgres://wsops:wsops@127.0.0.1:5432/wsops_bench, started with scripts/postgres-local.sh when
 * unreachable), BENCH_WRITE_RATE, BENCH_PHASE_S, BENCH_WARMUP_S, BENCH_DEALS (2000), BENCH_PIPELINES
 * (20), BENCH_DRAIN_TIMEOUT_S, BENCH_PIN (1: service on one CPU, this process on another), BENCH_NODE_ARGS (extra node flags for the service, e.g.
 * "--cpu-prof --cpu-prof-dir=.bench/prof"), LOG_LEVEL (info); any other variable of the environment
 * reaches the service as it is, e.g. OUTBOX_POLL_MS, JOBS_POLL_MS, DATABASE_POOL_MAX (printed when set);
 * BENCH_WORKER=1 runs the API with JOBS=off and the jobs and consumers in a second service process.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { migrations } from '../app.ts'; // also registers the modules' workspace-file sections (automations:)
import { type Database, openDatabase } from '../db/database.ts';
import { getOutboxConsumer, peekOutbox } from '../db/queries/outbox.ts';
import { createClient } from '../generated/client.ts';
import { setEnabled } from '../handlers/automation/admin.ts';
import { applyWorkspace, type WorkspaceSpec } from '../server/admin.ts';
import { systemClock } from '../server/clock.ts';
import { acme, createPipeline } from '../test/support/fixtures.ts';
import { type BenchDatabase, dist, type Dist, machineCpu, onEachDatabase, report } from './bench-runner.ts';
import { fmt, log, openLoopPost, percentile, pinCpus, type Pinning, positive, processCpuMs, root, runMain, type Server, serviceScript, sleep, startServer, stopServer, table, waitReady } from './bench-support.ts';
import { redactUrl } from './postgres.ts';

const RATE = positive('BENCH_WRITE_RATE', 200);
const PHASE_S = positive('BENCH_PHASE_S', 30);
const WARMUP_S = positive('BENCH_WARMUP_S', 5);
const DEALS = positive('BENCH_DEALS', 2000);
const PIPELINES = positive('BENCH_PIPELINES', 20);
const DRAIN_TIMEOUT_S = positive('BENCH_DRAIN_TIMEOUT_S', 60);
/** BENCH_WORKER=1: the API process with JOBS=off and a second process (scripts/start.ts, its HTTP port unused) running the jobs and consumers. */
const SEPARATE_WORKER = process.env.BENCH_WORKER === '1';
const LOG_LEVEL = process.env.LOG_LEVEL || 'info';
const EXTRA_NODE_ARGS = (process.env.BENCH_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
const AIMS = { eventToFinishedP50Ms: 1000, maxSlowdown: 0.1 };
const CONSUMER = 'automation.trigger';

// ---------------------------------------------------------------------------------------------
// The rules

type Cond = { field: string; op: string; value?: unknown };
interface RuleDef {
  name: string;
  fields: string[];
  conditions?: Cond[];
  actions: Array<Record<string, unknown>>;
  /** Runs per write this rule should start with the traffic below (a check on the mix, printed). */
  expected: number;
}

const big = (n: number): Cond => ({ field: 'amount.amount', op: 'gte', value: n });
const stage = (s: string): Cond => ({ field: 'stage_id', op: 'eq', value: s });
const notifyAll = (title: string) => ({ type: 'notify', to: 'owners_and_admins', title, body: 'Deal {{record.id}}: {{record.data.name}}, {{record.data.amount.amount}} {{record.data.amount.currency}}, stage {{record.data.stage_id}}' });
const closeDate = (d: string, expected?: Record<string, unknown>) => ({ type: 'set_fields', data: { close_date: d }, ...(expected ? { expected } : {}) });
const company = (name: string) => ({ type: 'create_record', resource_type: 'core:Company', data: { name } });

/** Stage flips on every write, amount is uniform over 1,000-10,999, one name in 20 has "VIP". */
const RULES: RuleDef[] = [
  { name: 'Big deal reached proposal', fields: ['stage_id'], conditions: [stage('proposal'), big(9000)], actions: [notifyAll('Big proposal: {{record.data.name}}')], expected: 0.5 * 0.2 },
  { name: 'Big deal fell back to lead', fields: ['stage_id'], conditions: [stage('lead'), big(10000)], actions: [notifyAll('Big deal back to lead: {{record.data.name}}')], expected: 0.5 * 0.1 },
  { name: 'Amount above 10,500', fields: ['amount'], conditions: [big(10500)], actions: [notifyAll('Amount raised: {{record.data.name}}')], expected: 0.05 },
  { name: 'VIP deal renamed', fields: ['name'], conditions: [{ field: 'name', op: 'contains', value: 'VIP' }], actions: [notifyAll('VIP deal: {{record.data.name}}')], expected: 0.05 },
  { name: 'Deal closed (custom)', fields: ['stage_id'], conditions: [{ field: 'stage_id', op: 'in', value: ['won', 'lost'] }], actions: [notifyAll('Closed: {{record.data.name}}')], expected: 0 },
  { name: 'USD deal', fields: ['amount'], conditions: [{ field: 'amount.currency', op: 'eq', value: 'USD' }], actions: [notifyAll('USD deal: {{record.data.name}}')], expected: 0 },
  { name: 'Small proposal', fields: ['stage_id'], conditions: [stage('proposal'), { field: 'amount.amount', op: 'lt', value: 1500 }], actions: [notifyAll('Small proposal: {{record.data.name}}')], expected: 0.5 * 0.05 },
  { name: 'Close date for proposals', fields: ['stage_id'], conditions: [stage('proposal')], actions: [closeDate('2027-06-30')], expected: 0.5 },
  { name: 'Close date for leads', fields: ['stage_id'], conditions: [stage('lead')], actions: [closeDate('2027-12-31')], expected: 0.5 },
  { name: 'Big deals close this quarter', fields: ['amount'], conditions: [big(10000)], actions: [closeDate('2027-03-31')], expected: 0.1 },
  { name: 'Renewals close at year end', fields: ['name'], conditions: [{ field: 'name', op: 'contains', value: 'Renewal' }], actions: [closeDate('2027-12-31')], expected: 0 },
  { name: 'Lost deals', fields: ['stage_id'], conditions: [stage('lost')], actions: [closeDate('2026-12-31')], expected: 0 },
  { name: 'Mid-size proposals', fields: ['amount'], conditions: [stage('proposal'), big(5000), { field: 'amount.amount', op: 'lt', value: 5100 }], actions: [closeDate('2027-09-30')], expected: 0.5 * 0.01 },
  { name: 'Large proposals, guarded', fields: ['stage_id'], conditions: [stage('proposal'), big(9500)], actions: [closeDate('2027-04-30', { stage_id: 'proposal' })], expected: 0.5 * 0.15 },
  { name: 'Prospect company for big deals', fields: ['amount'], conditions: [big(10900)], actions: [company('Prospect for {{record.data.name}}')], expected: 0.01 },
  { name: 'Account for VIP proposals', fields: ['stage_id'], conditions: [stage('proposal'), { field: 'name', op: 'contains', value: 'VIP' }], actions: [company('Account {{record.data.name}}')], expected: 0.5 * 0.05 },
  { name: 'Lucky 7,777', fields: ['amount'], conditions: [{ field: 'amount.amount', op: 'eq', value: '7777.00' }], actions: [company('Lucky {{record.id}}')], expected: 0.0001 },
  { name: 'VIP back to lead', fields: ['name'], conditions: [stage('lead'), { field: 'name', op: 'contains', value: 'VIP' }], actions: [notifyAll('VIP deal back to lead: {{record.data.name}}')], expected: 0.5 * 0.05 },
  { name: 'Tiny deals', fields: ['name'], conditions: [{ field: 'amount.amount', op: 'lt', value: 1000 }], actions: [closeDate('2026-12-31')], expected: 0 },
  { name: 'Top amounts', fields: ['amount'], conditions: [big(10990)], actions: [notifyAll('Top amount: {{record.data.name}}'), company('Top account {{record.id}}')], expected: 0.001 },
];
const EXPECTED_RUNS_PER_WRITE = RULES.reduce((a, r) => a + r.expected, 0);

const automationsSpec = () =>
  Object.fromEntries(
    RULES.map((r, i) => [
      `r${String(i + 1).padStart(2, '0')}`,
      { name: r.name, enabled: false, trigger: { resource_type: 'core:Deal', event: 'updated', fields: r.fields, ...(r.conditions ? { conditions: r.conditions } : {}) }, actions: r.actions },
    ]),
  );

// ---------------------------------------------------------------------------------------------
// Open-loop load

interface Load {
  offered: number;
  ok: number;
  failed: number;
  statusCodes: Record<string, number>;
  failureSamples: string[];
  /** 2xx answers / (last answer - start of the schedule). */
  achievedPerS: number;
  /** Latency of 2xx answers from when each request was due (ms). */
  latencyMs: { p50: number; p90: number; p99: number; max: number };
  /** How late this process sent requests behind the schedule, at most (ms). */
  maxSendLagMs: number;
  serverCpuPct: number | null;
  /** BENCH_WORKER=1: the worker process's CPU (% of one core). */
  workerCpuPct: number | null;
  /** The whole machine's CPUs busy (%, of all CPUs), and PostgreSQL's processes (% of one core). */
  machineBusyPct: number | null;
  postgresCpuPct: number | null;
  seconds: number;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 512 });

/** The next request of the traffic (the counter runs on across phases, so every write flips the stage). */
function trafficOf(dealIds: readonly string[], secret: string) {
  let n = 0;
  const run = crypto.randomBytes(3).toString('hex');
  return () => {
    const i = n++;
    const k = i % dealIds.length;
    const pass = Math.floor(i / dealIds.length);
    const data = {
      name: `Bench deal ${k}${i % 20 === 7 ? ' VIP' : ''} ${run}-${i}`,
      // Deals are created in `lead`: the first pass moves them to proposal, the next back, and so on.
      stage_id: pass % 2 === 0 ? 'proposal' : 'lead',
      amount: { amount: `${1000 + ((i * 7919) % 10000)}.00`, currency: 'EUR' },
    };
    return {
      body: JSON.stringify({ id: dealIds[k], data }),
      headers: { 'content-type': 'application/json', authorization: `Bearer ${secret}`, 'idempotency-key': crypto.randomUUID() },
    };
  };
}

/** Sends RATE UpdateDeal requests/s for `seconds` on a fixed schedule, whatever the answers' latency; with the CPU each process used meanwhile. */
async function openLoop(server: Server, seconds: number, next: ReturnType<typeof trafficOf>, worker?: Server): Promise<Load> {
  const cpuBefore = processCpuMs(server.child.pid);
  const workerBefore = worker ? processCpuMs(worker.child.pid) : null;
  const machineBefore = machineCpu();
  const a = await openLoopPost({ port: server.port, path: '/v1/operations/customers.UpdateDeal', agent }, RATE, seconds, next);
  const cpuAfter = processCpuMs(server.child.pid);
  const workerAfter = worker ? processCpuMs(worker.child.pid) : null;
  const machineAfter = machineCpu();
  const elapsed = Math.max(performance.now() - a.start, 1);
  const sorted = Float64Array.from(a.latencies).sort();
  const ok = sorted.length;
  return {
    offered: a.offered,
    ok,
    failed: a.failed,
    statusCodes: a.statusCodes,
    failureSamples: a.failureSamples,
    achievedPerS: ok / ((Math.max(a.lastAnswer, a.start + seconds * 1000) - a.start) / 1000),
    latencyMs: { p50: percentile(sorted, 50), p90: percentile(sorted, 90), p99: percentile(sorted, 99), max: ok ? sorted[ok - 1]! : Number.NaN },
    maxSendLagMs: a.maxSendLagMs,
    serverCpuPct: cpuBefore !== null && cpuAfter !== null ? ((cpuAfter - cpuBefore) / elapsed) * 100 : null,
    workerCpuPct: workerBefore !== null && workerAfter !== null ? ((workerAfter - workerBefore) / elapsed) * 100 : null,
    machineBusyPct: machineBefore && machineAfter ? ((machineAfter.busy - machineBefore.busy) / (machineAfter.total - machineBefore.total)) * 100 : null,
    postgresCpuPct: machineBefore && machineAfter ? ((machineAfter.postgres - machineBefore.postgres) / elapsed) * 100 : null,
    seconds: elapsed / 1000,
  };
}

// ---------------------------------------------------------------------------------------------
// Runs

interface RunRow {
  status: string;
  event_occurred_at: number;
  queued_at: number;
  started_at: number | null;
  finished_at: number | null;
}

async function runsOfWindow(db: Database, from: number, to: number): Promise<RunRow[]> {
  const rows = await db.sql.all<RunRow>(
    `SELECT status, event_occurred_at, queued_at, started_at, finished_at FROM automation_runs WHERE event_occurred_at >= ? AND event_occurred_at < ?`,
    [from, to],
  );
  return rows.map((r) => ({
    status: r.status,
    event_occurred_at: Number(r.event_occurred_at),
    queued_at: Number(r.queued_at),
    started_at: r.started_at === null ? null : Number(r.started_at),
    finished_at: r.finished_at === null ? null : Number(r.finished_at),
  }));
}

const countBy = (rows: RunRow[]) => rows.reduce<Record<string, number>>((acc, r) => ((acc[r.status] = (acc[r.status] ?? 0) + 1), acc), {});

/** Events the trigger consumer has not read yet, and runs not finished (all of them, not only the window's). */
async function backlog(db: Database): Promise<{ unreadEvents: number; unfinishedRuns: number; caughtUp: boolean }> {
  const row = await getOutboxConsumer(db.sql, CONSUMER);
  const pos = row ? { xid: String(row.position_xid), seq: Number(row.position_seq) } : { xid: '0', seq: 0 };
  const unread =
    db.dialect === 'pg'
      ? await db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM record_events WHERE (txid, seq) > (?::xid8, ?)`, [pos.xid, pos.seq])
      : await db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM record_events WHERE seq > ?`, [pos.seq]);
  const runs = await db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM automation_runs WHERE status IN ('queued', 'running')`);
  const caughtUp = (await peekOutbox(db.sql, pos)) === 'none';
  return { unreadEvents: Number(unread?.n ?? 0), unfinishedRuns: Number(runs?.n ?? 0), caughtUp };
}

// ---------------------------------------------------------------------------------------------
// One database

interface Result {
  database: BenchDatabase;
  baseline: Load;
  withRules: Load;
  runs: {
    windowMs: { from: number; to: number };
    /** Runs of events that occurred in phase B. */
    queued: number;
    perWrite: number;
    expectedPerWrite: number;
    atEndOfPhase: { byStatus: Record<string, number>; unreadEvents: number; unfinishedRuns: number };
    final: { byStatus: Record<string, number> };
    drain: { drained: boolean; seconds: number; unreadEvents: number; unfinishedRuns: number };
    eventToFinishedMs: Dist;
    eventToQueuedMs: Dist;
    queuedToStartedMs: Dist;
    startedToFinishedMs: Dist;
    finishedPerS: number;
    notifications: number;
    companiesCreated: number;
  };
  slowdown: { p50: number; rate: number };
  serverLog: string;
}

const runStamp = new Date().toISOString().replace(/[:.]/g, '-');

async function benchDatabase(database: BenchDatabase, databaseUrl: string, pinning: Pinning): Promise<Result> {
  const label = database === 'sqlite' ? 'SQLite' : 'PostgreSQL';
  log(`${label}: preparing ${database === 'sqlite' ? databaseUrl : redactUrl(databaseUrl)}`);
  const db = openDatabase(databaseUrl);
  try {
    await db.migrate(migrations);
    const spec = { ...acme(), workspace: { name: 'Automation bench' }, automations: automationsSpec() } as WorkspaceSpec;
    const applied = (await applyWorkspace(db, systemClock, spec)) as Awaited<ReturnType<typeof applyWorkspace>> & { automations: Record<string, string> };
    const workspaceId = applied.workspace_id;
    const ruleIds = Object.values(applied.automations);
    const secret = applied.keys.sales!.secret;

    fs.mkdirSync(path.join(root, '.bench'), { recursive: true });
    const serverLog = path.join(root, '.bench', `automation-${runStamp}-${database}-server.log`);
    const serviceEnv = { NODE_ENV: 'production', DATABASE_URL: databaseUrl, RATE_LIMIT_PER_SECOND: '1000000', RATE_LIMIT_BURST: '1000000', LOG_LEVEL };
    const server = await startServer(`service, ${label}`, serviceScript(), SEPARATE_WORKER ? { ...serviceEnv, JOBS: 'off' } : serviceEnv, pinning, EXTRA_NODE_ARGS, serverLog);
    const worker = SEPARATE_WORKER ? await startServer(`worker, ${label}`, serviceScript(), serviceEnv, pinning, EXTRA_NODE_ARGS, serverLog.replace(/-server\.log$/, '-worker.log')) : undefined;
    try {
      await waitReady(server, (base) => fetch(`${base}/healthz`));
      if (worker) await waitReady(worker, (base) => fetch(`${base}/healthz`));
      const client = createClient({ baseUrl: `http://127.0.0.1:${server.port}/v1`, apiKey: secret });
      const pipelineIds: string[] = [];
      for (let i = 0; i < PIPELINES; i++) {
        const { data, error, response } = await client.customers.CreateSalesPipeline(createPipeline(`Bench pipeline ${i}`));
        if (!data) throw new Error(`creating pipeline ${i} failed: HTTP ${response.status} ${JSON.stringify(error)}`);
        pipelineIds.push(data.item.id);
      }
      const co = await client.customers.CreateCompany({ data: { name: 'Bench Co', domain: 'bench.example' } });
      if (!co.data) throw new Error(`creating the company failed: HTTP ${co.response.status} ${JSON.stringify(co.error)}`);
      const dealIds: string[] = new Array(DEALS);
      for (let start = 0; start < DEALS; start += 20) {
        await Promise.all(
          Array.from({ length: Math.min(20, DEALS - start) }, async (_, j) => {
            const i = start + j;
            const { data, error, response } = await client.customers.CreateDeal({
              data: { name: `Bench deal ${i}`, amount: { amount: '1000.00', currency: 'EUR' }, pipeline_id: pipelineIds[i % pipelineIds.length]!, stage_id: 'lead', company_id: co.data!.item.id },
            });
            if (!data) throw new Error(`creating deal ${i} failed: HTTP ${response.status} ${JSON.stringify(error)}`);
            dealIds[i] = data.item.id;
          }),
        );
      }
      log(`${label}: ${PIPELINES} pipelines, 1 company, ${DEALS} deals; ${ruleIds.length} rules, paused`);
      const next = trafficOf(dealIds, secret);

      log(`${label}: warm-up ${WARMUP_S} s at ${RATE} writes/s, rules paused`);
      await openLoop(server, WARMUP_S, next, worker);
      log(`${label}: phase A (baseline), ${PHASE_S} s at ${RATE} writes/s, rules paused`);
      const baseline = await openLoop(server, PHASE_S, next, worker);
      log(`${label}: A: ${fmt(baseline.achievedPerS, 1)} writes/s, p50 ${fmt(baseline.latencyMs.p50)} ms, p99 ${fmt(baseline.latencyMs.p99)} ms, ${baseline.failed} failed, service CPU ${fmt(baseline.serverCpuPct ?? NaN, 0)} %`);

      for (const id of ruleIds) await setEnabled(db, systemClock, workspaceId, id, true, 'bench');
      log(`${label}: ${ruleIds.length} rules resumed; warm-up ${WARMUP_S} s at ${RATE} writes/s`);
      await openLoop(server, WARMUP_S, next, worker);
      log(`${label}: phase B (rules on), ${PHASE_S} s at ${RATE} writes/s`);
      const from = Date.now();
      const withRules = await openLoop(server, PHASE_S, next, worker);
      const to = Date.now();
      const atEnd = await backlog(db);
      const endRows = await runsOfWindow(db, from, to);
      log(
        `${label}: B: ${fmt(withRules.achievedPerS, 1)} writes/s, p50 ${fmt(withRules.latencyMs.p50)} ms, p99 ${fmt(withRules.latencyMs.p99)} ms, ${withRules.failed} failed, service CPU ${fmt(withRules.serverCpuPct ?? NaN, 0)} %; ` +
          `at its end: ${endRows.length} runs of its events (${JSON.stringify(countBy(endRows))}), ${atEnd.unreadEvents} events unread by ${CONSUMER}, ${atEnd.unfinishedRuns} runs unfinished`,
      );

      // Drain: every event read and every run finished, bounded.
      const drainStart = performance.now();
      let state = atEnd;
      while (!(state.caughtUp && state.unfinishedRuns === 0) && performance.now() - drainStart < DRAIN_TIMEOUT_S * 1000) {
        await sleep(250);
        state = await backlog(db);
      }
      const drained = state.caughtUp && state.unfinishedRuns === 0;
      const drainS = (performance.now() - drainStart) / 1000;
      log(`${label}: ${drained ? `drained in ${fmt(drainS, 1)} s` : `NOT drained after ${DRAIN_TIMEOUT_S} s: ${state.unreadEvents} events unread, ${state.unfinishedRuns} runs unfinished`}`);

      const rows = await runsOfWindow(db, from, to);
      const finished = rows.filter((r) => r.finished_at !== null);
      const started = rows.filter((r) => r.started_at !== null);
      const firstFinish = Math.min(...finished.map((r) => r.finished_at!));
      const lastFinish = Math.max(...finished.map((r) => r.finished_at!));
      const notifications = Number((await db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM inbox_notifications WHERE kind = 'automation.notice'`))?.n ?? 0);
      const companies = Number((await db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM record_events WHERE type = 'resource.created' AND resource_type = 'core:Company' AND cause_run_id IS NOT NULL`))?.n ?? 0);
      await stopServer(server);
      if (worker) await stopServer(worker);
      return {
        database,
        baseline,
        withRules,
        runs: {
          windowMs: { from, to },
          queued: rows.length,
          perWrite: rows.length / Math.max(1, withRules.ok),
          expectedPerWrite: EXPECTED_RUNS_PER_WRITE,
          atEndOfPhase: { byStatus: countBy(endRows), unreadEvents: atEnd.unreadEvents, unfinishedRuns: atEnd.unfinishedRuns },
          final: { byStatus: countBy(rows) },
          drain: { drained, seconds: drainS, unreadEvents: state.unreadEvents, unfinishedRuns: state.unfinishedRuns },
          eventToFinishedMs: dist(finished.map((r) => r.finished_at! - r.event_occurred_at)),
          eventToQueuedMs: dist(rows.map((r) => r.queued_at - r.event_occurred_at)),
          queuedToStartedMs: dist(started.map((r) => r.started_at! - r.queued_at)),
          startedToFinishedMs: dist(finished.filter((r) => r.started_at !== null).map((r) => r.finished_at! - r.started_at!)),
          finishedPerS: finished.length > 1 ? finished.length / ((lastFinish - firstFinish) / 1000) : Number.NaN,
          notifications,
          companiesCreated: companies,
        },
        slowdown: { p50: withRules.latencyMs.p50 / baseline.latencyMs.p50 - 1, rate: 1 - withRules.achievedPerS / baseline.achievedPerS },
        serverLog: path.relative(root, serverLog),
      };
    } finally {
      await stopServer(server);
      if (worker) await stopServer(worker);
    }
  } finally {
    await db.close();
  }
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<number> {
  // Unpinned by default: on a shared 2-core machine a service pinned to one CPU gets only that CPU's share
  // (with jobs and consumers in the same process it needs a whole core); BENCH_PIN=1 pins as `npm run bench` does.
  const pinning: Pinning = process.env.BENCH_PIN === '1' ? pinCpus() : { pinned: false, note: 'not pinned (BENCH_PIN=1 pins the service to one CPU and this process to another)' };
  const started = new Date();
  console.log(`Automation benchmark: customers.UpdateDeal at ${RATE} writes/s offered (open loop), ${WARMUP_S} s warm-up + ${PHASE_S} s without rules, then with ${RULES.length} rules`);
  console.log(`  ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}), load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}, node ${process.version}`);
  console.log(`  pinning: ${pinning.note}`);
  console.log(`  ${DEALS} deals, round robin; rules expected to start ${fmt(EXPECTED_RUNS_PER_WRITE)} runs per write (${fmt(EXPECTED_RUNS_PER_WRITE * RATE, 0)} runs/s)`);
  const passed = ['OUTBOX_POLL_MS', 'JOBS_POLL_MS', 'DATABASE_POOL_MAX'].filter((k) => process.env[k] !== undefined).map((k) => `${k}=${process.env[k]}`);
  if (passed.length) console.log(`  service environment: ${passed.join(' ')}`);
  if (SEPARATE_WORKER) console.log('  BENCH_WORKER=1: the API process runs with JOBS=off; a second service process runs the jobs and consumers');
  console.log('');

  const run = await onEachDatabase('automation', (database, url) => benchDatabase(database, url, pinning));
  const { results, problems } = run;

  const pct = (x: number) => `${x >= 0 ? '+' : ''}${fmt(x * 100, 1)} %`;
  const rows: string[][] = [['measure', 'aim', ...results.map((r) => r.database)]];
  const row = (label: string, aim: string, value: (r: Result) => string) => rows.push([label, aim, ...results.map(value)]);
  row(`A, no rules: writes/s (of ${RATE} offered)`, '-', (r) => fmt(r.baseline.achievedPerS, 1));
  row('A: write p50 / p99 (ms)', '-', (r) => `${fmt(r.baseline.latencyMs.p50)} / ${fmt(r.baseline.latencyMs.p99)}`);
  row(`B, ${RULES.length} rules: writes/s`, '>= 0.90 x A', (r) => fmt(r.withRules.achievedPerS, 1));
  row('B: write p50 / p99 (ms)', 'p50 <= 1.10 x A', (r) => `${fmt(r.withRules.latencyMs.p50)} / ${fmt(r.withRules.latencyMs.p99)}`);
  row('slowdown B vs A: p50 / rate', '<= 10 %', (r) => `${pct(r.slowdown.p50)} / ${pct(r.slowdown.rate)}`);
  row('service CPU, % of one core: A / B', '-', (r) => `${fmt(r.baseline.serverCpuPct ?? NaN, 0)} / ${fmt(r.withRules.serverCpuPct ?? NaN, 0)}`);
  if (SEPARATE_WORKER) row('worker process CPU, % of one core: A / B', '-', (r) => `${fmt(r.baseline.workerCpuPct ?? NaN, 0)} / ${fmt(r.withRules.workerCpuPct ?? NaN, 0)}`);
  row('PostgreSQL CPU, % of one core: A / B', '-', (r) => (r.database === 'postgres' ? `${fmt(r.baseline.postgresCpuPct ?? NaN, 0)} / ${fmt(r.withRules.postgresCpuPct ?? NaN, 0)}` : '-'));
  row(`machine busy, % of ${os.cpus().length} CPUs: A / B`, '-', (r) => `${fmt(r.baseline.machineBusyPct ?? NaN, 0)} / ${fmt(r.withRules.machineBusyPct ?? NaN, 0)}`);
  row('runs of B\'s events / per write', '-', (r) => `${r.runs.queued} / ${fmt(r.runs.perWrite)}`);
  row('event -> run finished p50 / p99 / max (ms)', 'p50 <= 1000', (r) => `${fmt(r.runs.eventToFinishedMs.p50, 0)} / ${fmt(r.runs.eventToFinishedMs.p99, 0)} / ${fmt(r.runs.eventToFinishedMs.max, 0)}`);
  row('  event -> queued p50 / p99 (outbox)', '-', (r) => `${fmt(r.runs.eventToQueuedMs.p50, 0)} / ${fmt(r.runs.eventToQueuedMs.p99, 0)}`);
  row('  queued -> started p50 / p99 (job queue)', '-', (r) => `${fmt(r.runs.queuedToStartedMs.p50, 0)} / ${fmt(r.runs.queuedToStartedMs.p99, 0)}`);
  row('  started -> finished p50 / p99 (the run)', '-', (r) => `${fmt(r.runs.startedToFinishedMs.p50, 0)} / ${fmt(r.runs.startedToFinishedMs.p99, 0)}`);
  row('runs finished per s (B\'s runs)', '-', (r) => fmt(r.runs.finishedPerS, 0));
  row('at B\'s end: finished / all runs of B', '-', (r) => {
    const s = r.runs.atEndOfPhase.byStatus;
    const all = Object.values(s).reduce((a, b) => a + b, 0);
    return `${(s.succeeded ?? 0) + (s.failed ?? 0) + (s.skipped ?? 0)} / ${all}`;
  });
  row('at B\'s end: events unread / runs unfinished', '-', (r) => `${r.runs.atEndOfPhase.unreadEvents} / ${r.runs.atEndOfPhase.unfinishedRuns}`);
  row('drain time (s)', `<= ${DRAIN_TIMEOUT_S}`, (r) => (r.runs.drain.drained ? fmt(r.runs.drain.seconds, 1) : `not drained (${r.runs.drain.unreadEvents} events, ${r.runs.drain.unfinishedRuns} runs left)`));
  row('B\'s runs: succeeded / failed / skipped', '-', (r) => `${r.runs.final.byStatus.succeeded ?? 0} / ${r.runs.final.byStatus.failed ?? 0} / ${r.runs.final.byStatus.skipped ?? 0}`);
  console.log('');
  console.log(table(rows));
  console.log('Write latency is timed from when each request was due (open loop); runs: finished_at - the event\'s occurred_at, both the service\'s clock, for runs of events that occurred in B.');

  const checks: Array<[string, boolean]> = [];
  for (const r of results) {
    checks.push(
      [`${r.database}: event -> run finished p50 ${fmt(r.runs.eventToFinishedMs.p50, 0)} ms <= ${AIMS.eventToFinishedP50Ms} ms`, r.runs.eventToFinishedMs.p50 <= AIMS.eventToFinishedP50Ms],
      [`${r.database}: write p50 with rules ${fmt(r.withRules.latencyMs.p50)} ms vs ${fmt(r.baseline.latencyMs.p50)} ms without (${pct(r.slowdown.p50)}, <= +10 %)`, r.slowdown.p50 <= AIMS.maxSlowdown],
      [`${r.database}: writes/s with rules ${fmt(r.withRules.achievedPerS, 1)} vs ${fmt(r.baseline.achievedPerS, 1)} without (${pct(-r.slowdown.rate)}, >= -10 %)`, r.slowdown.rate <= AIMS.maxSlowdown],
    );
    for (const [phase, l] of [['A', r.baseline], ['B', r.withRules]] as const) {
      if (l.failed) problems.push(`${r.database}: phase ${phase}: ${l.failed} of ${l.offered} writes failed: ${JSON.stringify(l.statusCodes)}; ${l.failureSamples.join(' | ')}`);
    }
    if (!r.runs.drain.drained) problems.push(`${r.database}: the backlog did not drain within ${DRAIN_TIMEOUT_S} s`);
    if (r.runs.queued === 0) problems.push(`${r.database}: no run was queued in phase B`);
  }
  return report('automation', run, checks, {
    started: started.toISOString(),
    config: { rate: RATE, phaseS: PHASE_S, warmupS: WARMUP_S, deals: DEALS, pipelines: PIPELINES, drainTimeoutS: DRAIN_TIMEOUT_S, pinning, serviceEnv: passed, separateWorker: SEPARATE_WORKER, nodeArgs: EXTRA_NODE_ARGS, rules: RULES, expectedRunsPerWrite: EXPECTED_RUNS_PER_WRITE },
    aims: AIMS,
  });
}

runMain(main);
