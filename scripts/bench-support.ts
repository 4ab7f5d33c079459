/**
 * Pieces shared by the benchmarks (`npm run bench`, `npm run bench:analytics`): CPU pinning, server
 * child processes, PostgreSQL reset, autocannon phases with exact latency percentiles and server CPU
 * time, and the report table.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';
import { freePort } from './ports.ts';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export function positive(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number (got "${raw}")`);
  return n;
}

export const log = (msg: string) => console.log(`[bench] ${msg}`);
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------
// CPU pinning

export interface Pinning {
  pinned: boolean;
  serverCpu?: number;
  loadCpu?: number;
  note: string;
}

/** Pins this process (the load generator) to one CPU and returns the CPU for the server processes. */
export function pinCpus(): Pinning {
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

export interface Server {
  name: string;
  child: ChildProcess;
  port: number;
  stderrTail: () => string;
  exited: Promise<number | null>;
}

const running = new Set<Server>();


let built = false;
/**
 * A service entry point for a bench (`start`: an API process; `worker`: jobs and consumers, no
 * listener): the compiled build (`dist/scripts/start.js`, built first when stale), as production runs
 * it; the sources through tsx with BENCH_SOURCE=1 (for a before/after).
 */
export function serviceScript(entry: 'start' | 'worker' = 'start'): string {
  if (process.env.BENCH_SOURCE === '1') return `scripts/${entry}.ts`;
  if (!built) {
    execFileSync(process.execPath, ['--import', 'tsx', 'scripts/build.ts', '--if-stale'], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
    built = true;
  }
  return `dist/scripts/${entry}.js`;
}

/** Starts `node SCRIPT` (a `.ts` one with `--import tsx`) on env.PORT or a free port, on the server CPU with stdout (its log) going to `logFile`, or /dev/null. */
export async function startServer(name: string, script: string, env: Record<string, string>, pinning: Pinning, nodeArgs: string[] = [], logFile?: string): Promise<Server> {
  // env.PORT: that port (a process started again where its clients connect); else a free one.
  const port = env.PORT ? Number(env.PORT) : await freePort();
  const nodeArgv = [...nodeArgs, ...(script.endsWith('.ts') ? ['--import', 'tsx'] : []), script];
  const [cmd, argv] = pinning.pinned
    ? ['taskset', ['-c', String(pinning.serverCpu), process.execPath, ...nodeArgv]]
    : [process.execPath, nodeArgv];
  const out = fs.openSync(logFile ?? '/dev/null', 'w');
  const child = spawn(cmd, argv, { cwd: root, env: { ...process.env, ...env, PORT: String(port) }, stdio: ['ignore', out, 'pipe'] });
  fs.closeSync(out);
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

export async function waitReady(server: Server, probe: (base: string) => Promise<Response>): Promise<void> {
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

export async function stopServer(server: Server): Promise<void> {
  if (server.child.exitCode !== null || server.child.signalCode !== null) return;
  server.child.kill('SIGTERM');
  const code = await Promise.race([server.exited, sleep(15_000).then(() => 'timeout' as const)]);
  if (code === 'timeout') {
    log(`${server.name} did not stop within 15 s; sending SIGKILL`);
    server.child.kill('SIGKILL');
    await server.exited;
  }
}

export function killAll(): void {
  for (const s of running) if (s.child.exitCode === null) s.child.kill('SIGKILL');
}
process.on('SIGINT', () => {
  killAll();
  process.exit(130);
});


export async function resetPostgres(url: string): Promise<void> {
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


export interface Phase {
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


export function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const idx = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[idx]!;
}


const CLK_TCK = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** CPU time (ms) used so far by a process, from /proc (Linux); null elsewhere. */
export function processCpuMs(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLK_TCK;
  } catch {
    return null;
  }
}

export async function runPhase(
  server: Server,
  request: autocannon.Request,
  seconds: number,
  samples: Array<{ status: number; body: string }>,
  connections: number,
  options: { overallRate?: number } = {},
): Promise<Phase> {
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
      { url: `http://127.0.0.1:${port}`, connections, pipelining: 1, duration: seconds, timeout: 10, requests: [withSamples], ...options },
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

export const fmt = (n: number, digits = 2) => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');

export function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  const line = (r: string[]) => r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  ');
  return [line(rows[0]!), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.slice(1).map(line)].join('\n');
}

/** What an open-loop phase sent and got back. */
export interface OpenLoopAnswers {
  offered: number;
  /** Latency of each 200 answer, from when its request was due (ms). */
  latencies: number[];
  failed: number;
  statusCodes: Record<string, number>;
  failureSamples: string[];
  maxSendLagMs: number;
  /** performance.now() at the first request's due time and at the last 200 answer. */
  start: number;
  lastAnswer: number;
}

/**
 * POSTs `rate` requests/s to `path` for `seconds` on a fixed schedule (open loop, as independent
 * clients send), whatever the answers' latency, then waits for every answer (at most 30 s); answers
 * still missing count as failed (`unanswered`). `onSecond` is called as each second of the schedule passes.
 */
export async function openLoopPost(
  target: { port: number; path: string; agent: http.Agent },
  rate: number,
  seconds: number,
  next: () => { body: string; headers: Record<string, string> },
  onSecond?: (second: number) => void,
): Promise<OpenLoopAnswers> {
  const total = Math.round(rate * seconds);
  const out: OpenLoopAnswers = { offered: total, latencies: [], failed: 0, statusCodes: {}, failureSamples: [], maxSendLagMs: 0, start: performance.now(), lastAnswer: 0 };
  let answered = 0;
  let allAnswered!: () => void;
  const done = new Promise<void>((resolve) => (allAnswered = resolve));
  const finish = () => {
    if (++answered === total) allAnswered();
  };
  const fail = (sample: string) => {
    out.failed++;
    if (out.failureSamples.length < 5) out.failureSamples.push(sample);
  };
  const send = (due: number) => {
    const { body, headers } = next();
    const req = http.request(
      { host: '127.0.0.1', port: target.port, method: 'POST', path: target.path, agent: target.agent, headers: { ...headers, 'content-length': Buffer.byteLength(body) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => {
          if (res.statusCode !== 200) chunks.push(c);
        });
        res.on('end', () => {
          const t = performance.now();
          const code = String(res.statusCode);
          out.statusCodes[code] = (out.statusCodes[code] ?? 0) + 1;
          if (res.statusCode === 200) {
            out.latencies.push(t - due);
            out.lastAnswer = t;
          } else fail(`${code} ${Buffer.concat(chunks).toString('utf8').slice(0, 400)}`);
          finish();
        });
      },
    );
    req.on('error', (err) => {
      out.statusCodes.error = (out.statusCodes.error ?? 0) + 1;
      fail(`socket: ${err.message}`);
      finish();
    });
    req.setTimeout(30_000, () => req.destroy(new Error('timeout after 30 s')));
    req.end(body);
  };
  let sent = 0;
  let second = 0;
  const start = out.start;
  await new Promise<void>((resolve) => {
    const tick = () => {
      const now = performance.now();
      while (sent < total) {
        const due = start + (sent * 1000) / rate;
        if (due > now) break;
        out.maxSendLagMs = Math.max(out.maxSendLagMs, now - due);
        sent++;
        send(due);
      }
      while (onSecond && now - start >= (second + 1) * 1000) onSecond(++second);
      if (sent >= total) resolve();
      else setTimeout(tick, Math.max(0, Math.min(5, start + (sent * 1000) / rate - performance.now())));
    };
    tick();
  });
  await Promise.race([done, sleep(30_000)]);
  if (answered < total) {
    out.failed += total - answered;
    out.statusCodes.unanswered = total - answered;
  }
  return out;
}

/** Runs a benchmark's main: its number is the exit code; a crash stops every service it started. */
export function runMain(main: () => Promise<number>): void {
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
}

// ---------------------------------------------------------------------------------------------
// Collection load

const USER_AGENTS = [
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36',
  'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15',
  'Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0',
  'Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1',
  'Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36',
  'Mozilla/5.0 (iPad; CPU OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.6 Mobile/15E148 Safari/604.1',
];
const REFERRERS = ['', '', '', 'https://www.google.com/', 'https://news.ycombinator.com/', 'https://duckduckgo.com/', 'https://t.co/abc'];

/** One browser-like event per request: a pageview (4 in 5) or an engagement ping, from 20,000 visitors. */
export function trackRequest(collectKey: string, domain: string, net = 10): { request: autocannon.Request; sent: () => number } {
  let n = 0;
  const request = {
    method: 'POST',
    path: '/v1/track',
    setupRequest: (req: autocannon.Request) => {
      const i = n++;
      const visitor = (i * 7919) % 20_000;
      const page = `/docs/page-${(i * 31) % 300}`;
      const pageview = i % 5 !== 4;
      req.headers = {
        'content-type': 'text/plain;charset=UTF-8',
        'user-agent': USER_AGENTS[visitor % USER_AGENTS.length]!,
        'x-forwarded-for': `${net}.${(visitor >> 16) & 255}.${(visitor >> 8) & 255}.${visitor & 255}`,
        origin: `https://${domain}`,
      };
      req.body = JSON.stringify({
        key: collectKey,
        type: pageview ? 'pageview' : 'engagement',
        url: `https://${domain}${page}${i % 11 === 0 ? '?utm_source=newsletter&utm_campaign=launch' : ''}`,
        referrer: REFERRERS[i % REFERRERS.length],
        ...(pageview ? {} : { engaged_ms: 1000 + (i % 50) * 700 }),
      });
      return req;
    },
  } as autocannon.Request;
  return { request, sent: () => n };
}
