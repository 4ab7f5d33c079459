/**
 * Parts of `npm run bench:webhooks` (scripts/bench-webhooks.ts): the client of the receiver process
 * (scripts/bench-webhook-receiver.ts), open-loop writes and a steady trickle of them, CPU readings and
 * the delivery measures read from the receiver and the database.
 */
import { type ChildProcess, fork } from 'node:child_process';
import crypto from 'node:crypto';
import http from 'node:http';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Database } from '../db/database.ts';
import { dist, machineCpu } from './bench-runner.ts';
import { openLoopPost, percentile, processCpuMs, root, type Server, sleep } from './bench-support.ts';

// ---------------------------------------------------------------------------------------------
// The receiver (its own process)

export interface Arrivals {
  at: number[];
  occurredAt: number[];
  webhookIds: string[];
  eventIds: string[];
  bad: number;
}

export class Receiver {
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

export interface Load {
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

export interface Target {
  workspaceId: string;
  secret: string;
  dealIds: string[];
  webhookIds: string[];
}

/** The next write of a set: round robin over its workspaces, then over each one's deals (the counter runs on across phases). */
export function writesTo(set: Target[]) {
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
export async function openLoop(server: Server, rate: number, seconds: number, next: ReturnType<typeof writesTo>, onSecond?: (s: number) => void): Promise<Load> {
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

/**
 * Sends `rate` writes/s of `next` until stopped (fire and forget, beside the phases' open loops);
 * `stop()` says how many were sent and how many failed.
 */
export function trickle(server: Server, rate: number, next: ReturnType<typeof writesTo>): { stop(): { sent: number; failed: number } } {
  let sent = 0;
  let failed = 0;
  const timer = setInterval(() => {
    const { body, headers } = next();
    sent++;
    const req = http.request({ host: '127.0.0.1', port: server.port, method: 'POST', path: '/v1/operations/customers.UpdateDeal', agent, headers: { ...headers, 'content-length': Buffer.byteLength(body) } }, (res) => {
      if (res.statusCode !== 200) failed++;
      res.resume();
    });
    req.on('error', () => failed++);
    req.end(body);
  }, 1000 / rate);
  return {
    stop() {
      clearInterval(timer);
      return { sent, failed };
    },
  };
}

// ---------------------------------------------------------------------------------------------
// CPU

export interface Cpu {
  service: number | null;
  receiver: number | null;
  postgres: number;
  busy: number;
  total: number;
  at: number;
}

export function cpuNow(service: Server, receiver: Receiver): Cpu {
  const m = machineCpu();
  return { service: processCpuMs(service.child.pid), receiver: processCpuMs(receiver.child.pid), postgres: m?.postgres ?? 0, busy: m?.busy ?? 0, total: m?.total ?? 0, at: performance.now() };
}

/** CPU use between two samples: each process as % of one core, the machine as % of all its CPUs. */
export function cpuBetween(a: Cpu, b: Cpu) {
  const ms = Math.max(1, b.at - a.at);
  const pct = (x: number | null, y: number | null) => (x === null || y === null ? null : Math.round(((y - x) / ms) * 100));
  return { servicePct: pct(a.service, b.service), receiverPct: pct(a.receiver, b.receiver), postgresPct: pct(a.postgres, b.postgres), machineBusyPct: b.total > a.total ? Math.round(((b.busy - a.busy) / (b.total - a.total)) * 100) : null };
}

// ---------------------------------------------------------------------------------------------
// Measures

/** First arrival of each (event, subscription) of a set; duplicates (a second attempt of one delivery) counted. */
export function firstArrivals(a: Arrivals, hooks: Set<string>) {
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
export async function deliveryState(db: Database, workspaceIds: string[]) {
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
export async function deliveryParts(db: Database, workspaceIds: string[], from: number, to: number) {
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

export async function waitForArrivals(receiver: Receiver, hooks: Set<string>, expected: number, timeoutS: number): Promise<{ arrived: number; seconds: number; complete: boolean }> {
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
