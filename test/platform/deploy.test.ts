/**
 * The deployment kit (Dockerfile, compose.yaml, .env.example, scripts/worker.ts). Without a container
 * runtime in the test run, the processes compose.yaml declares are started here with the very
 * commands and environment it declares (read from the file, so the two cannot drift): on PostgreSQL,
 * the one-shot migration, then two API processes with JOBS=off and the worker, all at once.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import { openDatabase, parseDatabaseUrl } from '../../db/database.ts';
import { outboxEnd } from '../../db/queries/outbox.ts';
import { applyWorkspace } from '../../server/admin.ts';
import { systemClock } from '../../server/clock.ts';
import { compiledBuild } from '../support/build.ts';
import { acme } from '../support/fixtures.ts';
import { freePort } from '../../scripts/ports.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const read = (file: string) => fs.readFileSync(path.join(root, file), 'utf8');

interface ComposeService {
  command?: string[];
  environment?: Record<string, string>;
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { disable?: boolean; test?: string[] };
  ports?: string[];
  volumes?: string[];
  env_file?: Array<{ path: string; required?: boolean }>;
  stop_grace_period?: string;
  image?: string;
  build?: string;
}

function compose(): { services: Record<string, ComposeService>; volumes: Record<string, unknown>; text: string } {
  const text = read('compose.yaml');
  return { ...(YAML.parse(text, { merge: true }) as { services: Record<string, ComposeService>; volumes: Record<string, unknown> }), text };
}

/** Compose's `${VAR}`, `${VAR:-default}` and `${VAR:?error}` against `vars`. */
function interpolate(value: string, vars: Record<string, string>): string {
  return value.replace(/\$\{([A-Z_][A-Z0-9_]*)(?::?([-?])([^}]*))?\}/g, (_m, name: string, op?: string, arg?: string) => {
    const v = vars[name];
    if (v !== undefined && v !== '') return v;
    if (op === '?') throw new Error(`compose.yaml needs ${name}: ${arg}`);
    return op === '-' ? (arg ?? '') : '';
  });
}

/** The last exec-form instruction of the Dockerfile, e.g. CMD ["node", ...]. */
function dockerfileExec(text: string, instruction: string): string[] {
  const lines = text.replace(/\\\n/g, ' ').split('\n').filter((l) => l.startsWith(`${instruction} `));
  assert.ok(lines.length, `the Dockerfile has no ${instruction}`);
  const form = lines.at(-1)!.slice(instruction.length + 1).replace(/^.*?CMD\s+(?=\[)/, '');
  return JSON.parse(form) as string[];
}

/** Names of the environment variables the service's code reads (server/, db/, handlers/, app.ts, the entry points). */
function variablesTheServiceReads(): Set<string> {
  const files: string[] = ['app.ts', 'scripts/start.ts', 'scripts/worker.ts'];
  for (const dir of ['server', 'db', 'handlers']) {
    for (const f of fs.readdirSync(path.join(root, dir), { recursive: true }) as string[]) {
      if (/\.(ts|mjs|js)$/.test(f) && !f.includes('dashboard-app') && !f.includes('tracker')) files.push(path.join(dir, f));
    }
  }
  const names = new Set<string>();
  for (const f of files) {
    const text = read(f);
    for (const m of text.matchAll(/\b(?:process\.env|env)(?:\.([A-Z][A-Z0-9_]+)|\[['"]([A-Z][A-Z0-9_]+)['"]\])|\benv, '([A-Z][A-Z0-9_]+)'/g)) names.add(m[1] ?? m[2] ?? m[3]!);
  }
  return names;
}

/** Keys of .env.example, set or commented out (`# NAME=value`). */
function envExampleKeys(): Set<string> {
  return new Set([...read('.env.example').matchAll(/^(?:#\s*)?([A-Z][A-Z0-9_]*)=/gm)].map((m) => m[1]!));
}

// The compiled service (npm run build), run by plain node: no tsx in the image.
const API_COMMAND = ['node', 'dist/scripts/start.js'];
const WORKER_COMMAND = ['node', 'dist/scripts/worker.js'];
const ADMIN_COMMAND = ['node', 'dist/scripts/admin.js'];
const MIGRATE_COMMAND = [...WORKER_COMMAND, '--migrate-only'];
/** Variables only compose.yaml itself reads (interpolation), not the service. */
const COMPOSE_ONLY = ['POSTGRES_PASSWORD'];

describe('the deployment kit', function () {
  it('compose.yaml declares PostgreSQL, a one-shot migration, two API processes with JOBS=off and a worker, with the Dockerfile\'s command', () => {
    const { services, volumes } = compose();
    const dockerfile = read('Dockerfile');
    assert.deepEqual(dockerfileExec(dockerfile, 'CMD'), API_COMMAND, 'the image runs the API entry point in exec form');
    assert.match(dockerfile, /^ENV NODE_ENV=production/m);
    assert.match(dockerfile, /^USER (?!root\b|0\b)\w+/m, 'the runtime stage runs as a non-root user');
    assert.equal((dockerfile.match(/^FROM /gm) ?? []).length, 2, 'a build stage and a runtime stage');
    assert.match(dockerfileExec(dockerfile, 'HEALTHCHECK').join(' '), /\/healthz/);
    // The build stage compiles and drops the development dependencies; the runtime stage copies dist/ and
    // the production node_modules only, and nothing in it names tsx or esbuild.
    const [buildStage, runtimeStage] = dockerfile.split(/^FROM .* AS runtime$/m) as [string, string];
    assert.match(buildStage, /^RUN npm run build$/m);
    assert.match(buildStage, /npm prune --omit=dev/);
    assert.deepEqual(runtimeStage.match(/^COPY .*/gm), ['COPY --from=build /app/package.json /app/package.json', 'COPY --from=build /app/node_modules /app/node_modules', 'COPY --from=build /app/dist /app/dist']);
    assert.doesNotMatch(runtimeStage.replace(/^#.*$/gm, ''), /tsx|esbuild|\.ts\b/);
    const pkg = JSON.parse(read('package.json')) as { dependencies: Record<string, string>; devDependencies: Record<string, string> };
    for (const dev of ['tsx', 'esbuild', 'typescript']) assert.ok(!(dev in pkg.dependencies) && dev in pkg.devDependencies, `${dev} is a development dependency`);

    assert.deepEqual(Object.keys(services).sort(), ['api-1', 'api-2', 'migrate', 'postgres', 'worker']);
    const pg = services.postgres!;
    assert.ok(pg.healthcheck?.test?.includes('pg_isready'));
    assert.ok(pg.volumes?.some((v) => v.startsWith('pgdata:')) && 'pgdata' in volumes);

    for (const name of ['api-1', 'api-2']) {
      const api = services[name]!;
      assert.deepEqual(api.command, API_COMMAND);
      assert.equal(api.environment?.JOBS, 'off', `${name} runs no background work`);
      assert.equal(api.environment?.NODE_ENV, 'production');
      assert.equal(api.depends_on?.migrate?.condition, 'service_completed_successfully');
      assert.equal(api.healthcheck, undefined, `${name} keeps the image's /healthz check`);
      assert.ok(api.ports?.length === 1);
    }
    const worker = services.worker!;
    assert.deepEqual(worker.command, WORKER_COMMAND);
    assert.notEqual(worker.environment?.JOBS, 'off');
    assert.equal(worker.ports, undefined, 'the worker has no HTTP listener');
    assert.equal(worker.healthcheck?.disable, true);
    assert.equal(worker.depends_on?.migrate?.condition, 'service_completed_successfully');
    const migrate = services.migrate!;
    assert.deepEqual(migrate.command, MIGRATE_COMMAND);
    assert.equal(migrate.depends_on?.postgres?.condition, 'service_healthy');
    assert.equal(migrate.depends_on?.migrate, undefined);

    // One image for all of them; the database URL they get is a PostgreSQL one.
    for (const name of ['migrate', 'api-1', 'api-2', 'worker']) {
      assert.equal(services[name]!.build, '.');
      assert.equal(services[name]!.image, services['api-1']!.image);
      const url = interpolate(services[name]!.environment!.DATABASE_URL!, { POSTGRES_PASSWORD: 'secret' });
      assert.equal(parseDatabaseUrl(url).dialect, 'pg');
    }
    assert.throws(() => interpolate(services.worker!.environment!.DATABASE_URL!, {}), /needs POSTGRES_PASSWORD/, 'no default database password');

    const scripts = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts;
    // npm start and npm run worker run the same compiled entry points, compiling dist/ first when it is older than the sources.
    assert.equal(scripts.start, `tsx scripts/build.ts --if-stale && exec ${API_COMMAND.join(' ')}`);
    assert.equal(scripts.worker, `tsx scripts/build.ts --if-stale && exec ${WORKER_COMMAND.join(' ')}`);
  });

  it('.env.example lists every environment variable the service reads, and only those (plus what compose.yaml interpolates)', () => {
    const readByService = variablesTheServiceReads();
    for (const name of ['PORT', 'DATABASE_URL', 'JOBS', 'METRICS_TOKEN', 'TRUST_PROXY', 'LOG_LEVEL']) assert.ok(readByService.has(name), `the scan finds ${name}`);
    const listed = envExampleKeys();
    const missing = [...readByService].filter((n) => !listed.has(n));
    assert.deepEqual(missing, [], `add these to .env.example: ${missing.join(', ')}`);
    const extra = [...listed].filter((n) => !readByService.has(n) && !COMPOSE_ONLY.includes(n));
    assert.deepEqual(extra, [], `.env.example lists variables nothing reads: ${extra.join(', ')}`);
    const interpolated = new Set([...compose().text.matchAll(/\$\{([A-Z_][A-Z0-9_]*)/g)].map((m) => m[1]!));
    for (const name of interpolated) assert.ok(listed.has(name), `compose.yaml interpolates ${name}; .env.example should list it`);
    // Each variable has its one-line comment right above it.
    const lines = read('.env.example').split('\n');
    lines.forEach((line, i) => {
      if (/^[A-Z][A-Z0-9_]*=/.test(line)) assert.match(lines[i - 1] ?? '', /^#/, `${line} has a comment above it`);
    });
  });
});

interface Proc {
  name: string;
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

/** Runs a command of compose.yaml in `cwd` (the image's /app: a folder holding the compiled dist/). */
function run(name: string, command: string[], env: Record<string, string>, cwd: string): Proc {
  let output = '';
  const child = spawn(command[0]!, command.slice(1), { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { name, child, output: () => output, exited };
}

/** Polls `check` every 100 ms until it returns a value (not undefined/false) or `ms` pass. */
async function until<T>(what: string, ms: number, check: () => Promise<T | undefined | false> | T | undefined | false, procs: Proc[] = []): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    let value: T | undefined | false;
    try {
      value = await check();
    } catch {
      value = undefined;
    }
    if (value !== undefined && value !== false) return value;
    const dead = procs.find((p) => p.child.exitCode !== null);
    if (dead) throw new Error(`${dead.name} exited (${dead.child.exitCode}) while waiting for ${what}:\n${dead.output().slice(-2000)}`);
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}\n${procs.map((p) => `--- ${p.name}\n${p.output().slice(-1500)}`).join('\n')}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Resolves with the exit code, or rejects when the process has not exited within `ms`. */
function exitWithin(proc: Proc, ms: number): Promise<number | null> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    proc.exited.finally(() => clearTimeout(timer)),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${proc.name} did not exit within ${ms} ms of SIGTERM:\n${proc.output().slice(-2000)}`)), ms);
    }),
  ]);
}

/** The environment compose.yaml gives a service, with this test's database and port. */
function composeEnv(service: ComposeService, own: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(service.environment ?? {})) env[k] = interpolate(String(v), { POSTGRES_PASSWORD: 'unused' });
  return { ...env, ...own };
}

describe('the processes of compose.yaml [postgres]', function () {
  this.timeout(240_000);
  const procs: Proc[] = [];
  let url = '';
  let app = '';

  before(async function () {
    if (!process.env.TEST_POSTGRES_URL) this.skip();
    const u = new URL(process.env.TEST_POSTGRES_URL);
    u.searchParams.set('schema', `wsops_deploy_${process.pid}_${crypto.randomBytes(4).toString('hex')}`);
    url = u.toString();
    // The image's dist/: `npm run build` into a folder of this test run.
    app = (await compiledBuild()).home;
  });

  after(async () => {
    for (const p of procs) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
    await Promise.all(procs.map((p) => p.exited));
    if (!url) return;
    const schema = new URL(url).searchParams.get('schema');
    const db = openDatabase(url);
    if (schema) await db.knex.raw(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await db.close();
  });

  it('migrates once, runs two API processes (JOBS=off) and a worker that does the background work, and all stop on SIGTERM with 0', async () => {
    const { services } = compose();
    const metricsToken = crypto.randomBytes(24).toString('hex');
    const own = { DATABASE_URL: url, LOG_LEVEL: 'info', METRICS_TOKEN: metricsToken };

    // The one-shot migration step, as compose runs it before the others.
    const migrate = run('migrate', services.migrate!.command!, composeEnv(services.migrate!, own), app);
    procs.push(migrate);
    assert.equal(await migrate.exited, 0, migrate.output());
    assert.match(migrate.output(), /"msg":"migrated"/);

    // Then all three at once (their own migrate() calls find nothing to do and wait on knex's lock row).
    const [port1, port2] = [await freePort(), await freePort()];
    const api1 = run('api-1', services['api-1']!.command!, composeEnv(services['api-1']!, { ...own, PORT: String(port1) }), app);
    const api2 = run('api-2', services['api-2']!.command!, composeEnv(services['api-2']!, { ...own, PORT: String(port2) }), app);
    const worker = run('worker', services.worker!.command!, composeEnv(services.worker!, own), app);
    const running = [api1, api2, worker];
    procs.push(...running);

    for (const port of [port1, port2]) {
      // Three processes start at once on a 2-core machine: give each a minute.
      const health = await until(`/healthz on ${port}`, 60_000, async () => {
        const res = await fetch(`http://127.0.0.1:${port}/healthz`);
        return res.ok ? ((await res.json()) as unknown) : undefined;
      }, running);
      assert.deepEqual(health, { status: 'ok' });
    }
    await until('the worker to start', 60_000, () => worker.output().includes('worker: running background jobs'), running);
    for (const api of [api1, api2]) assert.doesNotMatch(api.output(), /"job":|outbox/, `${api.name} runs no background work`);

    // A change through one API process, read through the other.
    const db = openDatabase(url);
    try {
      const ws = await applyWorkspace(db, systemClock, acme());
      const secret = ws.keys.ci!.secret;
      const call = async (port: number, operation: string, body: unknown) => {
        const res = await fetch(`http://127.0.0.1:${port}/v1/operations/${operation}`, {
          method: 'POST',
          headers: { Authorization: `Bearer ${secret}`, 'Content-Type': 'application/json', 'Idempotency-Key': crypto.randomUUID() },
          body: JSON.stringify(body),
        });
        return { status: res.status, body: (await res.json()) as { item: { id: string; data: { name: string } } } };
      };
      const created = await call(port1, 'customers.CreateSalesPipeline', { data: { name: 'Made on api-1' } });
      assert.equal(created.status, 200, JSON.stringify(created.body));
      const read = await call(port2, 'customers.GetSalesPipeline', { id: created.body.item.id });
      assert.equal(read.status, 200, JSON.stringify(read.body));
      assert.equal(read.body.item.data.name, 'Made on api-1', JSON.stringify(read.body));

      // Metrics answer with the token on the API processes.
      const metrics = await fetch(`http://127.0.0.1:${port2}/metrics`, { headers: { Authorization: `Bearer ${metricsToken}` } });
      assert.equal(metrics.status, 200);
      assert.match(await metrics.text(), /wsops_requests_total/);

      // The worker runs the jobs: every recurring job has run once and is due again only later (a job that
      // never ran is due at the time it was scheduled, which is past). The API processes run none.
      const jobs = await until('the worker to run the recurring jobs', 30_000, async () => {
        const rows = await db.sql.all<{ kind: string; run_at: number; last_error: string | null; locked_by: string | null }>(
          `SELECT kind, run_at, last_error, locked_by FROM jobs WHERE dedupe_key LIKE 'recurring:%'`,
        );
        const now = Date.now();
        return rows.length > 0 && rows.every((r) => Number(r.run_at) > now && r.last_error === null && r.locked_by === null) ? rows : undefined;
      }, running);
      assert.ok(jobs.some((j) => j.kind === 'idempotency.prune'), JSON.stringify(jobs));

      // And the change-event consumers, seen as an operator sees them (`outbox status`): each one reaches
      // the last committed event (the pipeline's creation) and is leased by the worker.
      // (On PostgreSQL an event is readable once no older transaction anywhere in the cluster runs: wait for that.)
      const end = await until('the write\'s change event to be readable', 30_000, async () => {
        const e = await outboxEnd(db.sql);
        return e.seq > 0 ? e : undefined;
      }, running);
      const outboxStatus = async () => {
        const admin = run('admin', [...ADMIN_COMMAND, '--json', 'outbox', 'status'], { DATABASE_URL: url }, app);
        if ((await admin.exited) !== 0) throw new Error(admin.output());
        return JSON.parse(admin.output()) as Array<{ name: string; position: { xid: string; seq: number }; leased_by: string | null; failing_event_id: string | null }>;
      };
      const status = await until('every outbox consumer to reach the last event', 30_000, async () => {
        const consumers = await outboxStatus();
        return consumers.every((c) => c.position.seq === end.seq && String(c.position.xid) === String(end.xid) && c.leased_by !== null && c.failing_event_id === null) ? consumers : undefined;
      }, running);
      if (!status.length) console.log('      (no module declares change-event consumers yet: only the jobs show the worker at work)');

      // SIGTERM: each stops gracefully and exits 0, promptly.
      for (const p of running) p.child.kill('SIGTERM');
      for (const p of running) {
        assert.equal(await exitWithin(p, 20_000), 0, p.output());
        assert.match(p.output(), /"signal":"SIGTERM".*shutting down/);
        assert.match(p.output(), /"msg":"stopped"/);
      }
      // The worker released its consumer leases on the way out (another worker could take over at once).
      for (const c of await outboxStatus()) assert.equal(c.leased_by, null, `${c.name} still leased after the worker stopped`);

      // Secrets never reach the logs: the key secret, the metrics token, the database password.
      const password = new URL(url).password;
      for (const p of procs) {
        const out = p.output();
        assert.ok(!out.includes(secret.slice(secret.indexOf('_', 4) + 1)), `a key secret reached ${p.name}'s log`);
        assert.ok(!out.includes(metricsToken), `the metrics token reached ${p.name}'s log`);
        if (password) assert.ok(!out.includes(`:${password}@`), `the database password reached ${p.name}'s log`);
      }
    } finally {
      await db.close();
    }
  });
});
