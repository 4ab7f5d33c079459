/**
 * `npm run bench:scale`: the compose topology (compose.yaml) on one PostgreSQL: API processes with
 * JOBS=off and one worker process (jobs and change-event consumers), under load, first with one API
 * process and then with two, in one run on one database:
 *
 * - the command path: `POST /v1/operations/customers.UpdateSalesPipeline` as fast as answered over
 *   BENCH_CONNECTIONS (50) connections, split evenly over the API processes; each request a fresh
 *   Idempotency-Key, round robin over 20 keys (so that no key meets its own rate limit) and 50 pipelines;
 * - collection: `POST /v1/track` as fast as answered over the same connections (the collect key's
 *   limit raised for the run: COLLECT_KEY_RATE_PER_SECOND / COLLECT_KEY_BURST 1,000,000; the per-address
 *   limit stays, visitors come from 20,000 addresses), then the events in the table counted once the
 *   processes have stopped: at least every event answered 202, at most every event sent (0 lost).
 *
 * With two API processes, collection runs once more for BENCH_DURATION_S while api-1 is stopped
 * gracefully (SIGTERM) and started again on its port a third of the way in: nothing acknowledged
 * (202) may be lost; requests refused while it was away were never acknowledged and are reported.
 *
 * While the command load runs, two exactness checks go through both processes at once:
 * - same key: each of 20 Idempotency-Keys is sent 6 times at once, alternating between the processes
 *   (same body): the change happens once per key (one resource.updated event each); every other answer
 *   is a replay of the first or 409 "in progress", never a second change;
 * - rate limit: a key of its own sends BENCH_LIMIT_BURST * 4 queries as fast as answered, alternating
 *   between the processes: the 200s may not exceed the shared budget (burst + rate x elapsed, +1), and
 *   every other answer is 429.
 *
 * Every process runs unpinned on all CPUs (with this process, the load generator, and PostgreSQL):
 * the figure says what one machine gives, and the report says what holds the second process back.
 * The ratio is requests/s with 2 API processes / with 1; the aim is >= 1.6.
 *
 * Environment: BENCH_POSTGRES_URL (default postgres://wsops:wsops@127.0.0.1:5432/wsops_bench?schema=bench_scale,
 * its schema reset; started with scripts/postgres-local.sh when unreachable), BENCH_CONNECTIONS (50),
 * BENCH_WARMUP_S (3), BENCH_DURATION_S (15), BENCH_LIMIT_RATE / BENCH_LIMIT_BURST (the API keys' rate
 * limit, 100 / 100 by default: the load's 20 keys stay under it, the check's key goes over it), LOG_LEVEL (warn). Exit code 1 when a check fails or requests failed.
 */
import os from 'node:os';
import type autocannon from 'autocannon';
import { migrations } from '../app.ts';
import { openDatabase } from '../db/database.ts';
import { createClient } from '../generated/client.ts';
import { applyWorkspace } from '../server/admin.ts';
import { systemClock } from '../server/clock.ts';
import { createPipeline } from '../test/support/fixtures.ts';
import {
  fmt,
  log,
  type Phase,
  positive,
  processCpuMs,
  resetPostgres,
  runMain,
  runPhase,
  type Server,
  serviceScript,
  sleep,
  startServer,
  stopServer,
  table,
  trackRequest,
  waitReady,
} from './bench-support.ts';
import { machineCpu } from './bench-runner.ts';
import { reachablePostgres, redactUrl } from './postgres.ts';

const PG_DEFAULT = 'postgres://wsops:wsops@127.0.0.1:5432/wsops_bench?schema=bench_scale';
const PG_URL = process.env.BENCH_POSTGRES_URL || PG_DEFAULT;
const CONNECTIONS = positive('BENCH_CONNECTIONS', 50);
const WARMUP_S = positive('BENCH_WARMUP_S', 3);
const MEASURE_S = positive('BENCH_DURATION_S', 15);
const LIMIT_RATE = positive('BENCH_LIMIT_RATE', 100);
const LIMIT_BURST = positive('BENCH_LIMIT_BURST', 100);
const LOG_LEVEL = process.env.LOG_LEVEL || 'warn';
const KEYS = 20;
const PIPELINES = 50;
const AIM = 1.6;
const SITE = 'scale.bench.test';

interface Seeded {
  workspaceId: string;
  loadKeys: string[];
  checkKey: string;
  limitKey: string;
  collectKey: string;
  pipelines: string[];
  checkPipeline: string;
}

async function seed(url: string): Promise<Seeded> {
  const db = openDatabase(url);
  try {
    await db.migrate(migrations);
    const grants = { operations: ['customers.*'], resources: { 'core:SalesPipeline': ['read', 'write'] as Array<'read' | 'write'> } };
    const keys: Record<string, { name: string; operations: string[]; resources: Record<string, Array<'read' | 'write'>> }> = {};
    for (let i = 0; i < KEYS; i++) keys[`load${i}`] = { name: `Load ${i}`, ...grants };
    keys.check = { name: 'Same-key check', ...grants };
    keys.limit = { name: 'Rate-limit check', ...grants };
    const applied = await applyWorkspace(db, systemClock, {
      workspace: { name: 'Scale bench' },
      members: { olga: { name: 'Olga Owner', email: 'olga@bench.test', role: 'owner' } },
      bundles: { site: { name: 'Scale site', domain: SITE } },
      keys,
    });
    return {
      workspaceId: applied.workspace_id,
      loadKeys: Array.from({ length: KEYS }, (_, i) => applied.keys[`load${i}`]!.secret),
      checkKey: applied.keys.check!.secret,
      limitKey: applied.keys.limit!.secret,
      collectKey: applied.collect_keys.site!,
      pipelines: [],
      checkPipeline: '',
    };
  } finally {
    await db.close();
  }
}

async function createPipelines(base: string, seeded: Seeded): Promise<void> {
  const client = createClient({ baseUrl: `${base}/v1`, apiKey: seeded.checkKey });
  for (let i = 0; i <= PIPELINES; i++) {
    const { data, error } = await client.customers.CreateSalesPipeline(createPipeline(`Scale pipeline ${i}`));
    if (!data) throw new Error(`could not create a pipeline: ${JSON.stringify(error)}`);
    if (i === PIPELINES) seeded.checkPipeline = data.item.id;
    else seeded.pipelines.push(data.item.id);
  }
}

function updateRequest(seeded: Seeded, offset: number): autocannon.Request {
  let n = offset;
  return {
    method: 'POST',
    path: '/v1/operations/customers.UpdateSalesPipeline',
    setupRequest: (req: autocannon.Request) => {
      const i = n++;
      req.headers = {
        'content-type': 'application/json',
        authorization: `Bearer ${seeded.loadKeys[i % KEYS]}`,
        'idempotency-key': `scale-${offset}-${i}-${Math.random().toString(36).slice(2)}`,
      };
      req.body = JSON.stringify({ id: seeded.pipelines[i % PIPELINES], data: { name: `Pipeline ${i}` } });
      return req;
    },
  } as autocannon.Request;
}

// ---------------------------------------------------------------------------------------------
// Checks run during the load

interface CheckResult {
  ok: boolean;
  detail: string;
}

async function sameKeyCheck(apis: Server[], seeded: Seeded, url: string, round: string): Promise<CheckResult> {
  const db = openDatabase(url);
  try {
    const count = async () =>
      Number((await db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM record_events WHERE record_id = ? AND type = 'resource.updated'`, [seeded.checkPipeline]))?.n ?? 0);
    const before = await count();
    const statuses: Record<string, number> = {};
    let mismatched = 0;
    for (let k = 0; k < 20; k++) {
      const key = `same-${round}-${k}`;
      const body = JSON.stringify({ id: seeded.checkPipeline, data: { name: `Same ${round} ${k}` } });
      const answers = await Promise.all(
        Array.from({ length: 6 }, async (_, j) => {
          const api = apis[j % apis.length]!;
          const res = await fetch(`http://127.0.0.1:${api.port}/v1/operations/customers.UpdateSalesPipeline`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: `Bearer ${seeded.checkKey}`, 'idempotency-key': key },
            body,
          });
          return { status: res.status, text: await res.text() };
        }),
      );
      for (const a of answers) statuses[a.status] = (statuses[a.status] ?? 0) + 1;
      const done = answers.filter((a) => a.status === 200).map((a) => a.text);
      if (new Set(done).size > 1) mismatched += 1;
      if (answers.some((a) => a.status !== 200 && a.status !== 409)) mismatched += 1;
    }
    const changes = (await count()) - before;
    const ok = changes === 20 && mismatched === 0;
    return { ok, detail: `20 keys x 6 requests over ${apis.length} process(es): ${changes} changes (must be 20); answers ${JSON.stringify(statuses)}; ${mismatched} keys with differing 200 bodies or other statuses` };
  } finally {
    await db.close();
  }
}

async function rateLimitCheck(apis: Server[], seeded: Seeded): Promise<CheckResult> {
  const total = LIMIT_BURST * 4;
  const statuses: Record<string, number> = {};
  const started = performance.now();
  let next = 0;
  // 20 at a time, alternating between the processes, as fast as answered.
  await Promise.all(
    Array.from({ length: 20 }, async () => {
      while (next < total) {
        const i = next++;
        const api = apis[i % apis.length]!;
        const res = await fetch(`http://127.0.0.1:${api.port}/v1/operations/customers.ListSalesPipelines`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${seeded.limitKey}` },
          body: '{"limit":1}',
        });
        await res.arrayBuffer();
        statuses[res.status] = (statuses[res.status] ?? 0) + 1;
      }
    }),
  );
  const elapsedS = (performance.now() - started) / 1000;
  const allowed = statuses[200] ?? 0;
  const budget = LIMIT_BURST + Math.ceil(LIMIT_RATE * elapsedS) + 1;
  const ok = allowed <= budget && allowed >= LIMIT_BURST && allowed + (statuses[429] ?? 0) === total;
  return { ok, detail: `${total} queries in ${fmt(elapsedS, 2)} s over ${apis.length} process(es): ${allowed} allowed (budget ${LIMIT_BURST} + ${LIMIT_RATE}/s x elapsed = ${budget}), ${statuses[429] ?? 0} answered 429${allowed + (statuses[429] ?? 0) === total ? '' : `, others ${JSON.stringify(statuses)}`}` };
}

// ---------------------------------------------------------------------------------------------
// One topology

interface TopologyResult {
  apis: number;
  command: { reqPerS: number; p50: number; p99: number; failed: number; cpuMsPerReq: number | null; machineBusy: number | null };
  collection: { eventsPerS: number; p50: number; p99: number; failed: number; accepted: number; sent: number; stored: number; machineBusy: number | null };
  sameKey: CheckResult;
  rateLimit: CheckResult;
  /** With 2 or more API processes: collection while api-1 restarts (its events count in `collection.accepted` / `stored`). */
  restart?: { eventsPerS: number; accepted: number; notAnswered: number; downS: number };
}

/** Runs autocannon against every API process at once (connections split evenly); sums the answered requests. */
async function loadAll(apis: Server[], make: (i: number) => autocannon.Request, seconds: number): Promise<{ phases: Phase[]; reqPerS: number; p50: number; p99: number; failed: number; cpuMsPerReq: number | null; machineBusy: number | null }> {
  const per = Math.max(1, Math.floor(CONNECTIONS / apis.length));
  const samples: Array<{ status: number; body: string }> = [];
  const cpuBefore = apis.map((a) => processCpuMs(a.child.pid));
  const machineBefore = machineCpu();
  const phases = await Promise.all(apis.map((api, i) => runPhase(api, make(i * 1_000_000), seconds, samples, per)));
  const cpuAfter = apis.map((a) => processCpuMs(a.child.pid));
  const machineAfter = machineCpu();
  const answered = phases.reduce((n, p) => n + p.ok2xx, 0);
  const failed = phases.reduce((n, p) => n + p.non2xx + p.errors + p.timeouts, 0);
  if (samples.length) log(`  failure samples: ${JSON.stringify(samples.slice(0, 3))}`);
  const cpu = cpuBefore.every((c) => c !== null) && cpuAfter.every((c) => c !== null) ? cpuAfter.reduce((s, c, i) => s + (c! - cpuBefore[i]!), 0) : null;
  return {
    phases,
    reqPerS: phases.reduce((n, p) => n + p.reqPerS, 0),
    // The slower process's percentiles (answers from both are one population of similar size).
    p50: Math.max(...phases.map((p) => p.latencyMs.p50)),
    p99: Math.max(...phases.map((p) => p.latencyMs.p99)),
    failed,
    cpuMsPerReq: cpu === null || answered === 0 ? null : cpu / answered,
    machineBusy: machineBefore && machineAfter ? (machineAfter.busy - machineBefore.busy) / Math.max(1, machineAfter.total - machineBefore.total) : null,
  };
}

async function countEvents(url: string): Promise<number> {
  const db = openDatabase(url);
  try {
    return Number((await db.sql.one<{ n: number }>('SELECT COUNT(*) AS n FROM analytics_events'))?.n ?? 0);
  } finally {
    await db.close();
  }
}

async function topology(count: number, url: string, seeded: Seeded): Promise<TopologyResult> {
  const env = {
    NODE_ENV: 'production',
    DATABASE_URL: url,
    LOG_LEVEL,
    RATE_LIMIT_PER_SECOND: String(LIMIT_RATE),
    RATE_LIMIT_BURST: String(LIMIT_BURST),
    COLLECT_CLIENT_IP_HEADER: 'x-forwarded-for',
    COLLECT_KEY_RATE_PER_SECOND: '1000000',
    COLLECT_KEY_BURST: '1000000',
  };
  const unpinned = { pinned: false, note: 'unpinned' };
  const worker = await startServer('worker', serviceScript('worker'), env, unpinned);
  const apis: Server[] = [];
  try {
    for (let i = 0; i < count; i++) apis.push(await startServer(`api-${i + 1}`, serviceScript(), { ...env, JOBS: 'off' }, unpinned));
    for (const api of apis) await waitReady(api, (base) => fetch(`${base}/healthz`));
    if (seeded.pipelines.length === 0) await createPipelines(`http://127.0.0.1:${apis[0]!.port}`, seeded);

    log(`${count} API process(es): command path, warm-up ${WARMUP_S} s`);
    await loadAll(apis, (o) => updateRequest(seeded, o), WARMUP_S);
    log(`${count} API process(es): command path, ${MEASURE_S} s at ${CONNECTIONS} connections, with the same-key and rate-limit checks during it`);
    const checks = (async () => {
      await sleep(Math.min(2000, (MEASURE_S * 1000) / 4));
      const sameKey = await sameKeyCheck(apis, seeded, url, `${count}`);
      await sleep(Math.max(0, 1000 / LIMIT_RATE) * LIMIT_BURST + 200); // the limit key's budget is whole again
      const rateLimit = await rateLimitCheck(apis, seeded);
      return { sameKey, rateLimit };
    })();
    const command = await loadAll(apis, (o) => updateRequest(seeded, o), MEASURE_S);
    const { sameKey, rateLimit } = await checks;
    log(`  ${fmt(command.reqPerS, 0)} req/s, p99 ${fmt(command.p99, 1)} ms, ${command.failed} failed; same key: ${sameKey.ok ? 'ok' : 'FAILED'}; rate limit: ${rateLimit.ok ? 'ok' : 'FAILED'}`);

    const before = await countEvents(url);
    log(`${count} API process(es): collection, warm-up ${WARMUP_S} s, then ${MEASURE_S} s as fast as answered`);
    const senders: Array<() => number> = [];
    const track = (o: number) => {
      const t = trackRequest(seeded.collectKey, SITE, 10 + o / 1_000_000);
      senders.push(t.sent);
      return t.request;
    };
    const warm = await loadAll(apis, track, WARMUP_S);
    const phase = await loadAll(apis, track, MEASURE_S);
    let restart: TopologyResult['restart'];
    if (count > 1) {
      // A rolling restart under load: api-1 stops gracefully (SIGTERM: it answers what it has, stores what it holds) and starts again on its port.
      log(`${count} API processes: collection for ${MEASURE_S} s with api-1 restarted a third of the way in`);
      const running = loadAll(apis, track, MEASURE_S);
      await sleep((MEASURE_S * 1000) / 3);
      const old = apis[0]!;
      const downAt = performance.now();
      await stopServer(old);
      const again = await startServer('api-1 (started again)', serviceScript(), { ...env, JOBS: 'off', PORT: String(old.port) }, unpinned);
      await waitReady(again, (base) => fetch(`${base}/healthz`));
      const downS = (performance.now() - downAt) / 1000;
      apis[0] = again;
      const r = await running;
      restart = { eventsPerS: r.reqPerS, accepted: r.phases.reduce((n, p) => n + p.ok2xx, 0), notAnswered: r.failed, downS };
      log(`  api-1 was away ${fmt(downS, 1)} s; ${fmt(r.reqPerS, 0)} events/s taken over the phase, ${r.failed} requests not answered 202 while it was away`);
    }
    for (const api of apis) await stopServer(api); // flushes what each process holds
    await sleep(500);
    const stored = (await countEvents(url)) - before;
    // Answered 202 within the phases; requests still in flight when a phase ended were sent, maybe accepted, not counted.
    const accepted = [...warm.phases, ...phase.phases].reduce((n, p) => n + p.ok2xx, 0) + (restart?.accepted ?? 0);
    const sent = senders.reduce((n, s) => n + s(), 0);
    log(`  ${fmt(phase.reqPerS, 0)} events/s taken, p99 ${fmt(phase.p99, 1)} ms, ${phase.failed} refused or failed; ${accepted} accepted, ${stored} stored`);
    return {
      apis: count,
      command: { reqPerS: command.reqPerS, p50: command.p50, p99: command.p99, failed: command.failed, cpuMsPerReq: command.cpuMsPerReq, machineBusy: command.machineBusy },
      collection: { eventsPerS: phase.reqPerS, p50: phase.p50, p99: phase.p99, failed: phase.failed + warm.failed, accepted, sent, stored, machineBusy: phase.machineBusy },
      sameKey,
      rateLimit,
      ...(restart ? { restart } : {}),
    };
  } finally {
    for (const api of apis) await stopServer(api);
    await stopServer(worker);
  }
}

const busy = (share: number | null) => (share === null ? 'n/a' : `${fmt(share * 100, 0)} %`);

async function main(): Promise<number> {
  const target = await reachablePostgres(PG_URL, !process.env.BENCH_POSTGRES_URL, log);
  if ('why' in target) {
    console.log(`bench:scale needs PostgreSQL: ${target.why}`);
    return 1;
  }
  const url = target.url;
  console.log(`Scale benchmark: the compose topology on one PostgreSQL (${redactUrl(url)}), 1 then 2 API processes (JOBS=off) + 1 worker`);
  console.log(`  ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}), load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}, node ${process.version}; nothing pinned`);
  console.log(`  load: autocannon in this process, ${CONNECTIONS} connections split over the API processes, ${WARMUP_S} s warm-up + ${MEASURE_S} s measured per phase`);
  console.log(`  API keys' rate limit ${LIMIT_RATE}/s, burst ${LIMIT_BURST} (the load spreads over ${KEYS} keys); collect key limit raised to 1,000,000/s for the run; LOG_LEVEL=${LOG_LEVEL}`);
  console.log('');
  await resetPostgres(url);
  const seeded = await seed(url);
  const results: TopologyResult[] = [];
  for (const count of [1, 2]) results.push(await topology(count, url, seeded));

  const [one, two] = results as [TopologyResult, TopologyResult];
  console.log('');
  console.log(
    table([
      ['API processes', 'command req/s', 'p50 ms', 'p99 ms', 'CPU ms/req (API)', 'machine busy', 'failed', 'collection events/s', 'p50 ms', 'p99 ms', 'machine busy', 'accepted / sent', 'stored', 'same key', 'rate limit'],
      ...results.map((r) => [
        String(r.apis),
        fmt(r.command.reqPerS, 0),
        fmt(r.command.p50, 1),
        fmt(r.command.p99, 1),
        r.command.cpuMsPerReq === null ? 'n/a' : fmt(r.command.cpuMsPerReq, 3),
        busy(r.command.machineBusy),
        String(r.command.failed),
        fmt(r.collection.eventsPerS, 0),
        fmt(r.collection.p50, 1),
        fmt(r.collection.p99, 1),
        busy(r.collection.machineBusy),
        `${r.collection.accepted} / ${r.collection.sent}`,
        String(r.collection.stored),
        r.sameKey.ok ? 'ok' : 'FAILED',
        r.rateLimit.ok ? 'ok' : 'FAILED',
      ]),
    ]),
  );
  for (const r of results) {
    if (r.restart) {
      console.log(
        `${r.apis} API: restart: api-1 stopped (SIGTERM) and started again during ${MEASURE_S} s of collection, away ${fmt(r.restart.downS, 1)} s; ` +
          `${r.restart.accepted} events answered 202 (${fmt(r.restart.eventsPerS, 0)}/s), ${r.restart.notAnswered} not answered while it was away (refused connections, never acknowledged); ` +
          `with the phases before it ${r.collection.accepted} acknowledged, ${r.collection.stored} stored: ${r.collection.stored >= r.collection.accepted ? 'none lost' : 'LOST SOME'}`,
      );
    }
    console.log(`${r.apis} API: same key: ${r.sameKey.detail}`);
    console.log(`${r.apis} API: rate limit: ${r.rateLimit.detail}`);
  }
  const commandRatio = two.command.reqPerS / one.command.reqPerS;
  const collectRatio = two.collection.eventsPerS / one.collection.eventsPerS;
  console.log('');
  console.log(`Targets (2 API processes / 1, aim >= ${AIM}):`);
  console.log(`  command path ${fmt(commandRatio, 2)}x  ${commandRatio >= AIM ? 'ok' : 'MISS'}`);
  console.log(`  collection   ${fmt(collectRatio, 2)}x  ${collectRatio >= AIM ? 'ok' : 'MISS'}`);
  const saturated = one.command.machineBusy !== null && one.command.machineBusy >= 0.85;
  console.log(
    `  what holds the second process back: ${os.cpus().length} CPUs shared by the API processes, the worker, PostgreSQL and the load generator, ` +
      `${busy(one.command.machineBusy)} busy already with one API process (command path; ${busy(one.collection.machineBusy)} for collection)` +
      (saturated ? ': the machine is full, so a second process only takes CPU time from the first, PostgreSQL and the load generator, and a third has nothing to take.' : '.'),
  );
  const problems: string[] = [];
  for (const r of results) {
    if (!r.sameKey.ok) problems.push(`${r.apis} API: same-key check failed`);
    if (!r.rateLimit.ok) problems.push(`${r.apis} API: rate-limit check failed`);
    if (r.command.failed) problems.push(`${r.apis} API: ${r.command.failed} command requests failed`);
    if (r.collection.failed) problems.push(`${r.apis} API: ${r.collection.failed} collection requests refused or failed`);
    if (r.collection.stored < r.collection.accepted || r.collection.stored > r.collection.sent) {
      problems.push(`${r.apis} API: ${r.collection.accepted} events accepted (${r.collection.sent} sent) but ${r.collection.stored} stored`);
    }
  }
  for (const p of problems) console.log(`PROBLEM: ${p}`);
  return problems.length ? 1 : 0;
}

runMain(main);
