/**
 * `npm run bench:webhooks`: how soon a committed change reaches a webhook receiver, and how many
 * deliveries a second the service sustains, on SQLite and on PostgreSQL (each in turn; PostgreSQL is
 * skipped, with the reason, when it cannot be reached). Bounded (about 4 minutes for both databases),
 * traffic only to 127.0.0.1, stops by itself.
 *
 * Per database: a fresh database (SQLite in a temporary folder; PostgreSQL's schema bench_webhooks,
 * reset); a local HTTPS receiver in its own process (scripts/bench-webhook-receiver.ts, a throwaway CA
 * and certificate made with openssl as test/support/receiver.ts does) answering `200 ok` at once (except the stragglers' routes, below) and
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
 *   I  BENCH_ISOLATION_WORKSPACES (20) x 1 subscription: healthy receivers beside the stragglers;
 *   S  1 workspace with the stragglers: a receiver that never answers (`/stall/`) and slow ones
 *      answering after 2 s, 5 s and 15 s (`/slow/<ms>/`, the last beyond the 10 s limit);
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
 *   stragglers  BENCH_STRAGGLER_RATE (1) write/s to S from the latency phase to the end of the
 *               throughput phase: their attempts hang or crawl beside everything else.
 *   isolation   BENCH_WARMUP_S + BENCH_ISOLATION_S (20 s) at BENCH_ISOLATION_RATE (20) writes/s to I:
 *               commit -> first attempt of the healthy subscriptions while the stragglers hold theirs.
 *   throughput  BENCH_WARMUP_S + BENCH_TPUT_S (30 s) at BENCH_TPUT_RATE (250) deliveries/s offered to T
 *               (25 writes/s x 10 subscriptions): deliveries that arrived during the phase per second,
 *               the backlog at its end (fanned-out or not), and the time to drain it.
 *   backlog     (BENCH_BACKLOG_WRITES, 1000; 0 skips it) the service restarted with JOBS=off, 1,000 writes
 *               to B (10,000 deliveries waiting in the outbox, 50 per subscription: all within one minute's limits), the service restarted with JOBS on: the
 *               time until the receiver has them all, and the rate between the first and last arrival
 *               (fan-out and delivery, with no write traffic beside them).
 *
 * Aims: commit → first attempt p50 <= 1 s at the moderate rate, and <= 200 ms for the healthy
 * subscriptions of the isolation phase; >= 200 deliveries/s sustained beside the stragglers (the
 * throughput phase: arrivals/s >= 200 and the backlog at its end under 2 s of offered deliveries).
 * A miss prints MISS (exit 0); failed writes, failed or missing deliveries exit 1.
 * Results: .bench/webhooks-<db>.json.
 * Environment: BENCH_DATABASES (sqlite,postgres), BENCH_POSTGRES_URL (default
 * postgres://wsops:wsops@127.0.0.1:5432/wsops_bench, started with scripts/postgres-local.sh when
 * unreachable), the BENCH_* above, BENCH_DRAIN_TIMEOUT_S (45), BENCH_NODE_ARGS (extra node flags for
 * the service, e.g. "--cpu-prof --cpu-prof-dir=.bench/prof"), LOG_LEVEL (info); any other variable of
 * the environment reaches the service as it is, e.g. OUTBOX_POLL_MS, DATABASE_POOL_MAX (printed when set).
 */
import fs from 'node:fs';
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
import { type BenchDatabase, dist, type Dist, onEachDatabase, report } from './bench-runner.ts';
import { fmt, log, positive, root, runMain, type Server, serviceScript, startServer, stopServer, table, waitReady } from './bench-support.ts';
import {
  cpuBetween,
  cpuNow,
  deliveryParts,
  deliveryState,
  firstArrivals,
  type Load,
  openLoop,
  Receiver,
  type Target,
  trickle,
  waitForArrivals,
  writesTo,
} from './bench-webhooks-parts.ts';
import { redactUrl } from './postgres.ts';

const LOG_LEVEL = process.env.LOG_LEVEL || 'info';
const EXTRA_NODE_ARGS = (process.env.BENCH_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
const WARMUP_S = positive('BENCH_WARMUP_S', 3);
const LAT_WS = positive('BENCH_LATENCY_WORKSPACES', 100);
const LAT_RATE = positive('BENCH_LATENCY_RATE', 100);
const LAT_S = positive('BENCH_LATENCY_S', 20);
const ISO_WS = positive('BENCH_ISOLATION_WORKSPACES', 20);
const ISO_RATE = positive('BENCH_ISOLATION_RATE', 20);
const ISO_S = positive('BENCH_ISOLATION_S', 20);
const STRAGGLER_RATE = positive('BENCH_STRAGGLER_RATE', 1);
const TPUT_WS = positive('BENCH_TPUT_WORKSPACES', 30);
const TPUT_SUBS = positive('BENCH_TPUT_SUBS', 10);
const TPUT_RATE = positive('BENCH_TPUT_RATE', 250);
const TPUT_S = positive('BENCH_TPUT_S', 30);
const BACKLOG_WS = positive('BENCH_BACKLOG_WORKSPACES', 20);
const BACKLOG_WRITES = Number(process.env.BENCH_BACKLOG_WRITES ?? 1000);
const DEALS = positive('BENCH_DEALS_PER_WORKSPACE', 8);
const DRAIN_TIMEOUT_S = positive('BENCH_DRAIN_TIMEOUT_S', 45);
const AIMS = { latencyP50Ms: 1000, isolationP50Ms: 200, deliveriesPerS: 200 };
/** The stragglers' receivers: one that never answers, and slow ones (the last beyond the 10 s limit). */
const STRAGGLERS = ['/stall', '/slow/2000', '/slow/5000', '/slow/15000'];

/** The service's limits (handlers/webhooks/delivery.ts). */
const PER_SUB_PER_MIN = 60;
const PER_WS_PER_MIN = 600;

// ---------------------------------------------------------------------------------------------
// One database

interface Result {
  database: BenchDatabase;
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
  isolation: {
    writes: Load;
    commitToArrivalMs: Dist;
    missing: number;
    cpu: ReturnType<typeof cpuBetween>;
    deliveries: Awaited<ReturnType<typeof deliveryState>>;
  };
  /** The stalled and slow receivers' subscriptions, written to all through the latency, isolation and throughput phases. */
  stragglers: { writes: number; failedWrites: number; deliveries: Awaited<ReturnType<typeof deliveryState>> };
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

/** One database's run: what every phase reads, and where it reports problems. */
interface Run {
  database: BenchDatabase;
  label: string;
  db: Database;
  receiver: Receiver;
  server: Server;
  targets: Record<string, Target[]>;
  problems: string[];
}

const hooksOf = (run: Run, set: string) => new Set(run.targets[set]!.flatMap((t) => t.webhookIds));
const idsOf = (run: Run, set: string) => run.targets[set]!.map((t) => t.workspaceId);

/** Each set's workspaces through the running service: a pipeline, its deals, and the approved subscriptions. */
async function makeTargets(run: Run, applied: Record<string, Array<{ workspaceId: string; secret: string; owner: string }>>): Promise<void> {
  for (const [set, list] of Object.entries(applied)) {
    const paths = set === 'S' ? STRAGGLERS.map((p) => `${p}/S`) : Array.from({ length: set === 'L' || set === 'I' ? 1 : TPUT_SUBS }, (_, s) => `/hook/${set}/${s}`);
    run.targets[set] = new Array(list.length);
    for (let start = 0; start < list.length; start += 10) {
      await Promise.all(
        list.slice(start, start + 10).map(async (w, j) => {
          const client = createClient({ baseUrl: `http://127.0.0.1:${run.server.port}/v1`, apiKey: w.secret });
          const p = await client.customers.CreateSalesPipeline(createPipeline('Hooks'));
          if (!p.data) throw new Error(`creating a pipeline failed: HTTP ${p.response.status} ${JSON.stringify(p.error)}`);
          const dealIds: string[] = [];
          for (let d = 0; d < DEALS; d++) {
            const r = await client.customers.CreateDeal({ data: { name: `Hook deal ${d}`, amount: { amount: '1000.00', currency: 'EUR' }, pipeline_id: p.data.item.id, stage_id: 'lead' } });
            if (!r.data) throw new Error(`creating a deal failed: HTTP ${r.response.status} ${JSON.stringify(r.error)}`);
            dealIds.push(r.data.item.id);
          }
          const webhookIds: string[] = [];
          for (const at of paths) {
            const proposed = await client.webhooks.PrepareWebhook({ url: `https://127.0.0.1:${run.receiver.port}${at}`, event: 'resource.updated', resource_types: ['core:Deal'] });
            if (!proposed.data) throw new Error(`PrepareWebhook failed: HTTP ${proposed.response.status} ${JSON.stringify(proposed.error)}`);
            const { webhook_id } = await approveProposal(run.db, systemClock, proposed.data.proposal_id, { workspaceId: w.workspaceId, memberId: w.owner, role: 'owner' });
            webhookIds.push(webhook_id);
          }
          run.targets[set]![start + j] = { workspaceId: w.workspaceId, secret: w.secret, dealIds, webhookIds };
        }),
      );
    }
  }
}

/** Latency: BENCH_LATENCY_RATE writes/s to L; commit -> first attempt, and its parts from the database. */
async function latencyPhase(run: Run): Promise<Result['latency']> {
  const nextL = writesTo(run.targets.L!);
  log(`${run.label}: latency: warm-up ${WARMUP_S} s + ${LAT_S} s at ${LAT_RATE} writes/s (${LAT_RATE} deliveries/s)`);
  const warmL = await openLoop(run.server, LAT_RATE, WARMUP_S, nextL);
  const c0 = cpuNow(run.server, run.receiver);
  const latWrites = await openLoop(run.server, LAT_RATE, LAT_S, nextL);
  const c1 = cpuNow(run.server, run.receiver);
  const latCpu = cpuBetween(c0, c1);
  const hooksL = hooksOf(run, 'L');
  const expectedL = warmL.ok + latWrites.ok;
  const drainL = await waitForArrivals(run.receiver, hooksL, expectedL, DRAIN_TIMEOUT_S);
  const arrivalsL = firstArrivals(await run.receiver.take(), hooksL);
  const inPhaseL = arrivalsL.first.filter((r) => r.occurredAt >= latWrites.from && r.occurredAt < latWrites.to);
  const latDist = dist(inPhaseL.map((r) => r.at - r.occurredAt));
  const latState = await deliveryState(run.db, idsOf(run, 'L'));
  const latParts = await deliveryParts(run.db, idsOf(run, 'L'), latWrites.from, latWrites.to);
  log(
    `${run.label}: latency: ${latWrites.ok} writes (p50 ${fmt(latWrites.latencyMs.p50)} ms), commit -> arrival p50 ${fmt(latDist.p50, 0)} / p99 ${fmt(latDist.p99, 0)} / max ${fmt(latDist.max, 0)} ms over ${latDist.n}; ` +
      `parts p50: occurred -> delivery made ${fmt(latParts.occurredToMadeMs.p50, 0)} ms, -> first attempt began ${fmt(latParts.madeToFirstAttemptMs.p50, 0)} ms, attempt ${fmt(latState.attemptMs.p50, 0)} ms; ` +
      `${drainL.complete ? 'all arrived' : `${expectedL - drainL.arrived} MISSING`}; service CPU ${latCpu.servicePct} %, run.receiver ${latCpu.receiverPct} %`,
  );
  if (!drainL.complete) run.problems.push(`${run.database}: latency phase: ${expectedL - drainL.arrived} of ${expectedL} deliveries did not arrive within ${DRAIN_TIMEOUT_S} s`);
  for (const l of [warmL, latWrites]) if (l.failed) run.problems.push(`${run.database}: latency phase: ${l.failed} of ${l.offered} writes failed: ${JSON.stringify(l.statusCodes)}; ${l.failureSamples.join(' | ')}`);
  return { writes: latWrites, deliveriesPerWrite: 1, commitToArrivalMs: latDist, parts: latParts, drainS: drainL.seconds, missing: expectedL - drainL.arrived, duplicates: arrivalsL.duplicates, cpu: latCpu, deliveries: latState };
}

/** Isolation: healthy subscriptions while the stalled and slow ones hold their attempts. */
async function isolationPhase(run: Run): Promise<Result['isolation']> {
  const nextI = writesTo(run.targets.I!);
  const hooksI = hooksOf(run, 'I');
  log(`${run.label}: isolation: warm-up ${WARMUP_S} s + ${ISO_S} s at ${ISO_RATE} writes/s to ${ISO_WS} healthy subscriptions, beside the stalled and slow ones`);
  const warmI = await openLoop(run.server, ISO_RATE, WARMUP_S, nextI);
  const c0 = cpuNow(run.server, run.receiver);
  const isoWrites = await openLoop(run.server, ISO_RATE, ISO_S, nextI);
  const c1 = cpuNow(run.server, run.receiver);
  const drainI = await waitForArrivals(run.receiver, hooksI, warmI.ok + isoWrites.ok, DRAIN_TIMEOUT_S);
  const isoDist = dist(firstArrivals(await run.receiver.take(), hooksI).first.filter((r) => r.occurredAt >= isoWrites.from && r.occurredAt < isoWrites.to).map((r) => r.at - r.occurredAt));
  const isoState = await deliveryState(run.db, idsOf(run, 'I'));
  const missing = warmI.ok + isoWrites.ok - drainI.arrived;
  log(
    `${run.label}: isolation: commit -> first attempt p50 ${fmt(isoDist.p50, 0)} / p99 ${fmt(isoDist.p99, 0)} / max ${fmt(isoDist.max, 0)} ms over ${isoDist.n}; ` +
      `${drainI.complete ? 'all arrived' : `${missing} MISSING`}; stragglers: ${JSON.stringify((await deliveryState(run.db, idsOf(run, 'S'))).byStatus)}`,
  );
  if (!drainI.complete) run.problems.push(`${run.database}: isolation phase: ${missing} deliveries did not arrive within ${DRAIN_TIMEOUT_S} s`);
  for (const l of [warmI, isoWrites]) if (l.failed) run.problems.push(`${run.database}: isolation phase: ${l.failed} of ${l.offered} writes failed: ${JSON.stringify(l.statusCodes)}; ${l.failureSamples.join(' | ')}`);
  return { writes: isoWrites, commitToArrivalMs: isoDist, missing, cpu: cpuBetween(c0, c1), deliveries: isoState };
}

/** Throughput: BENCH_TPUT_RATE deliveries/s offered to T; arrivals per second, the backlog at the end and its drain. */
async function throughputPhase(run: Run): Promise<Result['throughput']> {
  const tputWriteRate = TPUT_RATE / TPUT_SUBS;
  const nextT = writesTo(run.targets.T!);
  const hooksT = hooksOf(run, 'T');
  log(`${run.label}: throughput: warm-up ${WARMUP_S} s + ${TPUT_S} s at ${tputWriteRate} writes/s x ${TPUT_SUBS} subscriptions = ${TPUT_RATE} deliveries/s offered`);
  const warmT = await openLoop(run.server, tputWriteRate, WARMUP_S, nextT);
  const baseCount = await run.receiver.count();
  const counts: number[] = [];
  const c0 = cpuNow(run.server, run.receiver);
  const phaseStart = Date.now();
  const sampling = setInterval(() => void run.receiver.count().then((n) => counts.push(n)), 1000);
  const tWrites = await openLoop(run.server, tputWriteRate, TPUT_S, nextT);
  clearInterval(sampling);
  const phaseEnd = Date.now();
  const c1 = cpuNow(run.server, run.receiver);
  const tCpu = cpuBetween(c0, c1);
  const atEndDb = (await deliveryState(run.db, idsOf(run, 'T'))).byStatus;
  const atEnd = firstArrivals(await run.receiver.take(), hooksT);
  const expectedT = (warmT.ok + tWrites.ok) * TPUT_SUBS;
  const arrivedInPhase = atEnd.first.filter((r) => r.at >= phaseStart && r.at < phaseEnd).length;
  const perSecond = counts.map((n, i) => n - (i === 0 ? baseCount : counts[i - 1]!));
  const lastTen = perSecond.slice(-10);
  const drainStart = performance.now();
  const drainT = await waitForArrivals(run.receiver, hooksT, expectedT, DRAIN_TIMEOUT_S);
  const drainTS = (performance.now() - drainStart) / 1000;
  const arrivalsT = firstArrivals(await run.receiver.take(), hooksT);
  const tDist = dist(arrivalsT.first.filter((r) => r.occurredAt >= tWrites.from && r.occurredAt < tWrites.to).map((r) => r.at - r.occurredAt));
  const tState = await deliveryState(run.db, idsOf(run, 'T'));
  const achieved = arrivedInPhase / ((phaseEnd - phaseStart) / 1000);
  log(
    `${run.label}: throughput: ${fmt(achieved, 1)} deliveries/s arrived during the phase (last 10 s: ${fmt(lastTen.reduce((a, b) => a + b, 0) / Math.max(1, lastTen.length), 1)}/s), ` +
      `backlog at its end ${expectedT - atEnd.first.length} (run.db: ${JSON.stringify(atEndDb)}), ${drainT.complete ? `drained in ${fmt(drainTS, 1)} s` : `${expectedT - drainT.arrived} MISSING after ${DRAIN_TIMEOUT_S} s`}; ` +
      `commit -> arrival p50 ${fmt(tDist.p50, 0)} ms; attempt p50 ${fmt(tState.attemptMs.p50, 0)} / p99 ${fmt(tState.attemptMs.p99, 0)} ms; service CPU ${tCpu.servicePct} %, run.receiver ${tCpu.receiverPct} %, PostgreSQL ${tCpu.postgresPct} %, machine ${tCpu.machineBusyPct} %`,
  );
  if (!drainT.complete) run.problems.push(`${run.database}: throughput phase: ${expectedT - drainT.arrived} of ${expectedT} deliveries did not arrive within ${DRAIN_TIMEOUT_S} s of its end`);
  for (const l of [warmT, tWrites]) if (l.failed) run.problems.push(`${run.database}: throughput phase: ${l.failed} of ${l.offered} writes failed: ${JSON.stringify(l.statusCodes)}; ${l.failureSamples.join(' | ')}`);
  return {
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
  };
}

/** Backlog: writes made with JOBS=off, then the time the service takes to deliver them all once started. */
async function backlogPhase(run: Run, service: { start(name: string, env: Record<string, string>, logSuffix: string): Promise<Server> }): Promise<Result['backlog']> {
  log(`${run.label}: backlog: restarting the service with JOBS=off; ${BACKLOG_WRITES} writes to ${BACKLOG_WS} workspaces x ${TPUT_SUBS} subscriptions`);
  await stopServer(run.server);
  run.server = await service.start(`service (JOBS=off), ${run.label}`, { JOBS: 'off' }, '-jobs-off.log');
  await waitReady(run.server, (base) => fetch(`${base}/healthz`));
  const bWrites = await openLoop(run.server, 200, BACKLOG_WRITES / 200, writesTo(run.targets.B!));
  await stopServer(run.server);
  if (bWrites.failed) run.problems.push(`${run.database}: backlog: ${bWrites.failed} of ${bWrites.offered} writes failed: ${JSON.stringify(bWrites.statusCodes)}; ${bWrites.failureSamples.join(' | ')}`);
  const expectedB = bWrites.ok * TPUT_SUBS;
  const hooksB = hooksOf(run, 'B');
  log(`${run.label}: backlog: ${expectedB} deliveries waiting in the outbox; starting the service with JOBS on`);
  const spawned = performance.now();
  run.server = await service.start(`service, ${run.label}`, {}, '-backlog.log');
  const b0 = cpuNow(run.server, run.receiver);
  await waitReady(run.server, (base) => fetch(`${base}/healthz`));
  const ready = performance.now();
  const drainB = await waitForArrivals(run.receiver, hooksB, expectedB, DRAIN_TIMEOUT_S);
  const b1 = cpuNow(run.server, run.receiver);
  const arrivalsB = firstArrivals(await run.receiver.take(), hooksB).first.map((r) => r.at).sort((a, b) => a - b);
  const last = arrivalsB.at(-1) ?? Number.NaN;
  const lastPerf = last - performance.timeOrigin;
  const state = await deliveryState(run.db, idsOf(run, 'B'));
  const backlog: NonNullable<Result['backlog']> = {
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
    `${run.label}: backlog: ${drainB.complete ? `all ${expectedB} arrived ${fmt(backlog.drainFromReadyS, 1)} s after the service was ready (${fmt(backlog.drainFromSpawnS, 1)} s after its start)` : `${backlog.missing} of ${expectedB} MISSING after ${DRAIN_TIMEOUT_S} s`}, ` +
      `${fmt(backlog.firstToLastPerS, 1)} deliveries/s from first to last arrival; fan-out made them over ${fmt(((state.created.to ?? NaN) - (state.created.from ?? NaN)) / 1000, 1)} s, ` +
      `first attempts over ${fmt(((state.firstAttempt.to ?? NaN) - (state.firstAttempt.from ?? NaN)) / 1000, 1)} s (from ${fmt(((state.firstAttempt.from ?? NaN) - (state.created.from ?? NaN)) / 1000, 1)} s after the first was made); ` +
      `attempt p50 ${fmt(state.attemptMs.p50, 0)} / p99 ${fmt(state.attemptMs.p99, 0)} ms; service CPU ${backlog.cpu.servicePct} %, run.receiver ${backlog.cpu.receiverPct} %`,
  );
  if (!drainB.complete) run.problems.push(`${run.database}: backlog: ${backlog.missing} of ${expectedB} deliveries did not arrive within ${DRAIN_TIMEOUT_S} s`);
  if (state.failedAttempts) run.problems.push(`${run.database}: backlog: ${state.failedAttempts} attempts failed`);
  return backlog;
}

async function benchDatabase(database: BenchDatabase, databaseUrl: string, receiver: Receiver, caFile: string): Promise<Result> {
  const label = database === 'sqlite' ? 'SQLite' : 'PostgreSQL';
  log(`${label}: preparing ${database === 'sqlite' ? databaseUrl : redactUrl(databaseUrl)}`);
  const setupStart = performance.now();
  const db = openDatabase(databaseUrl);
  try {
    await db.migrate(migrations);
    const sets = { L: LAT_WS, I: ISO_WS, S: 1, T: TPUT_WS, ...(BACKLOG_WRITES > 0 ? { B: BACKLOG_WS } : {}) } as Record<'L' | 'I' | 'S' | 'T' | 'B', number>;
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
    const service = {
      start: (name: string, env: Record<string, string>, logSuffix: string) =>
        startServer(name, serviceScript(), { ...serviceEnv, ...env }, { pinned: false, note: '' }, env.JOBS === 'off' ? [] : EXTRA_NODE_ARGS, serverLog.replace(/-server\.log$/, logSuffix)),
    };
    const run: Run = { database, label, db, receiver, server: await service.start(`service, ${label}`, {}, '-server.log'), targets: {}, problems: [] };
    try {
      await waitReady(run.server, (base) => fetch(`${base}/healthz`));
      await makeTargets(run, applied);
      const setupS = (performance.now() - setupStart) / 1000;
      log(`${label}: ${Object.entries(run.targets).map(([s, l]) => `${s}: ${l.length} workspaces x ${l[0]!.webhookIds.length} subscriptions`).join('; ')}; ${DEALS} deals each (${fmt(setupS, 1)} s)`);

      // The stragglers get a steady trickle of writes from here to the end of the throughput phase.
      const stragglers = trickle(run.server, STRAGGLER_RATE, writesTo(run.targets.S!));
      log(`${label}: stragglers: ${STRAGGLER_RATE} write/s to ${STRAGGLERS.length} subscriptions (${STRAGGLERS.join(', ')}) from now to the end of the throughput phase`);
      const latency = await latencyPhase(run);
      const isolation = await isolationPhase(run);
      const throughput = await throughputPhase(run);
      const trickled = stragglers.stop();
      const stragglerState = await deliveryState(db, idsOf(run, 'S'));
      log(`${label}: stragglers: ${trickled.sent} writes (${trickled.failed} failed); their deliveries ${JSON.stringify(stragglerState.byStatus)}, ${stragglerState.attempts} attempts (${stragglerState.failedAttempts} failed)`);
      if (trickled.failed) run.problems.push(`${database}: stragglers: ${trickled.failed} of ${trickled.sent} writes failed`);
      for (const [name, s] of [['latency', latency.deliveries], ['isolation', isolation.deliveries], ['throughput', throughput.deliveries]] as const) {
        if (s.failedAttempts) run.problems.push(`${database}: ${name} phase: ${s.failedAttempts} attempts failed`);
      }
      const backlog = BACKLOG_WRITES > 0 ? await backlogPhase(run, service) : null;
      await stopServer(run.server);
      return {
        database,
        setupS,
        latency,
        isolation,
        stragglers: { writes: trickled.sent, failedWrites: trickled.failed, deliveries: stragglerState },
        throughput,
        backlog,
        problems: run.problems,
        serverLog: path.relative(root, serverLog),
      };
    } finally {
      await stopServer(run.server);
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
    ['isolation', ISO_RATE, ISO_WS, 1],
    ['stragglers (stalled and slow receivers)', STRAGGLER_RATE, 1, STRAGGLERS.length],
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
  let run: Awaited<ReturnType<typeof onEachDatabase<Result>>>;
  try {
    run = await onEachDatabase('webhooks', (database, url) => benchDatabase(database, url, receiver, certs.caFile));
  } finally {
    receiver.stop();
  }
  const { results, problems } = run;

  const rows: string[][] = [['measure', 'aim', ...results.map((r) => r.database)]];
  const row = (labelText: string, aim: string, value: (r: Result) => string) => rows.push([labelText, aim, ...results.map(value)]);
  const cpu = (c: ReturnType<typeof cpuBetween>, pg: boolean) => `${c.servicePct ?? '?'} / ${c.receiverPct ?? '?'} / ${pg ? (c.postgresPct ?? '?') : '-'} / ${c.machineBusyPct ?? '?'}`;
  row(`latency: writes/s taken (${LAT_RATE} offered, 1 delivery each)`, '-', (r) => fmt(r.latency.writes.ok / LAT_S, 1));
  row('  write p50 / p99 (ms)', '-', (r) => `${fmt(r.latency.writes.latencyMs.p50)} / ${fmt(r.latency.writes.latencyMs.p99)}`);
  row('  commit -> first attempt p50 / p99 / max (ms)', 'p50 <= 1000', (r) => `${fmt(r.latency.commitToArrivalMs.p50, 0)} / ${fmt(r.latency.commitToArrivalMs.p99, 0)} / ${fmt(r.latency.commitToArrivalMs.max, 0)}`);
  row('    parts p50: event -> delivery made / -> attempt began / attempt', '-', (r) => `${fmt(r.latency.parts.occurredToMadeMs.p50, 0)} / ${fmt(r.latency.parts.madeToFirstAttemptMs.p50, 0)} / ${fmt(r.latency.deliveries.attemptMs.p50, 0)}`);
  row('  CPU %: service / receiver / PostgreSQL / machine', '-', (r) => cpu(r.latency.cpu, r.database === 'postgres'));
  row(`isolation: ${ISO_WS} healthy subscriptions at ${ISO_RATE} deliveries/s, beside ${STRAGGLERS.length} stalled/slow`, '-', (r) => fmt(r.isolation.writes.ok / ISO_S, 1));
  row('  healthy commit -> first attempt p50 / p99 / max (ms)', `p50 <= ${AIMS.isolationP50Ms}`, (r) => `${fmt(r.isolation.commitToArrivalMs.p50, 0)} / ${fmt(r.isolation.commitToArrivalMs.p99, 0)} / ${fmt(r.isolation.commitToArrivalMs.max, 0)}`);
  row('  stragglers: writes / deliveries succeeded, pending, delivering, failed', '-', (r) => {
    const b = r.stragglers.deliveries.byStatus;
    return `${r.stragglers.writes} / ${b.succeeded ?? 0}, ${b.pending ?? 0}, ${b.delivering ?? 0}, ${b.failed ?? 0}`;
  });
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
      [`${r.database}: beside a stalled receiver, healthy commit -> first attempt p50 ${fmt(r.isolation.commitToArrivalMs.p50, 0)} ms <= ${AIMS.isolationP50Ms} ms`, r.isolation.commitToArrivalMs.p50 <= AIMS.isolationP50Ms],
      [
        `${r.database}: ${fmt(r.throughput.achievedPerS, 1)} deliveries/s sustained beside a stalled receiver (>= ${AIMS.deliveriesPerS}, backlog at the end ${r.throughput.backlogAtEnd} < ${2 * TPUT_RATE})`,
        r.throughput.achievedPerS >= AIMS.deliveriesPerS && r.throughput.backlogAtEnd < 2 * TPUT_RATE,
      ],
    );
    problems.push(...r.problems);
  }
  return report('webhooks', run, checks, {
    started: started.toISOString(),
    config: {
      warmupS: WARMUP_S,
      latency: { workspaces: LAT_WS, subscriptionsEach: 1, writesPerS: LAT_RATE, seconds: LAT_S },
      isolation: { workspaces: ISO_WS, subscriptionsEach: 1, writesPerS: ISO_RATE, seconds: ISO_S },
      stragglers: { receivers: STRAGGLERS, writesPerS: STRAGGLER_RATE },
      throughput: { workspaces: TPUT_WS, subscriptionsEach: TPUT_SUBS, deliveriesPerS: TPUT_RATE, seconds: TPUT_S },
      backlog: BACKLOG_WRITES > 0 ? { workspaces: BACKLOG_WS, subscriptionsEach: TPUT_SUBS, writes: BACKLOG_WRITES } : null,
      dealsPerWorkspace: DEALS,
      drainTimeoutS: DRAIN_TIMEOUT_S,
      serviceEnv: passed,
      nodeArgs: EXTRA_NODE_ARGS,
    },
    aims: AIMS,
  });
}

runMain(main);
