/**
 * `npm run contract`: Dredd checks a running service against the bundled document
 * (generated/openapi.yaml), every operation and every documented status except 500.
 *
 * Local mode (default): a fresh SQLite database in a temp dir, or `--database-url postgres://...`;
 * migrates it, applies a fixture workspace with the keys the hooks need, starts the server
 * (scripts/start.ts) on a free port with NODE_ENV=development (responses are validated server-side
 * too), waits for /healthz, runs Dredd, stops the server and exits with Dredd's exit code.
 *
 * Deployment mode: `npm run contract -- --base-url https://host/v1 --key KEY [--restricted-key KEY2]
 * [--throttle-key KEY3]` checks any deployment; nothing is started, the hooks create (and afterwards
 * delete) the records they need with KEY, and cases that need a credential that was not given are
 * skipped with a printed reason. Prefer passing the keys as CONTRACT_KEY, CONTRACT_RESTRICTED_KEY and
 * CONTRACT_THROTTLE_KEY: npm echoes the command line (`> tsx contract-tests/run.ts --key ...`) and
 * the process list shows it. The throttle key should hold no grants (its budget is used up on purpose).
 *
 * The hooks (contract-tests/hooks.cjs, with a scenario table per namespace in
 * contract-tests/scenarios/) run inside Dredd's process and read the context this script writes (base
 * URL, key secrets, member ids, and by namespace what that namespace's kit `test/<namespace>/kit.ts`
 * gives its scenarios: rules, subscriptions, stored traffic) from the file named by CONTRACT_CONTEXT;
 * this script names no module and imports none of a module's code. Key secrets are never
 * printed. The main key's grants are derived from the catalogue (`grants`): every namespace, read and
 * write on every resource type.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command, InvalidArgumentError } from 'commander';
import YAML from 'yaml';
// The composition root registers the modules' workspace-file sections (`automations:`) that applyWorkspace accepts.
import { migrations } from '../app.ts';
import { type Database, openDatabase } from '../db/database.ts';
import { type Access, catalogue, namespaces, resourceTypes } from '../generated/catalogue.ts';
import { applyWorkspace } from '../server/admin.ts';
import { systemClock } from '../server/clock.ts';
import { SESSION_COOKIE } from '../server/pages.ts';
import { createSigninLink, useSigninLink } from '../server/signin.ts';
import { acme } from '../test/support/fixtures.ts';
import { type FixtureSpec, type Seed, testKits } from '../test/support/kit.ts';
import { freePort } from '../scripts/ports.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DOCUMENT = path.join(root, 'generated', 'openapi.yaml');
const DREDD_CONFIG = path.join(root, 'contract-tests', 'dredd.yml');
const HOOKS = path.join(root, 'contract-tests', 'hooks.cjs');
const DREDD = path.join(root, 'node_modules', '.bin', 'dredd');

/**
 * What the hooks read from CONTRACT_CONTEXT. Mirrored (untyped) in hooks.cjs. Besides these, by
 * namespace, what that namespace's kit (test/<namespace>/kit.ts, `contract`) gives its scenarios:
 * `ctx.webhooks`, `ctx.automation`, `ctx.customers`, ...
 */
export interface ContractContext {
  mode: 'local' | 'deployment';
  /** Base URL of the API including /v1, without a trailing slash. */
  baseUrl: string;
  /** Short random tag that names every record this run creates. */
  runId: string;
  keys: {
    /** Every catalogued operation (`<namespace>.*` of each namespace) with read and write on every resource type (`grants`). */
    main: string;
    /** A valid key without grants (403). */
    restricted?: string;
    /** A key used only for 429; the hooks burn its rate budget. */
    throttle?: string;
    /** Local mode: the keys kits added to the workspace, by handle (e.g. webhooks' `narrow`). */
    [handle: string]: string | undefined;
  };
  /** A site's publishable collect key, for POST /track (local mode: the fixture site's; deployment: --collect-key). */
  collectKey?: string;
  /** Member ids of the fixture workspace by handle (local mode only). */
  members: Record<string, string>;
  /** Local mode: `wso_session=...`, a member's sign-in session (for the discovery endpoints' 403 from a foreign Origin). */
  sessionCookie?: string;
}

/** What the main key is granted: derived from the catalogue, so new namespaces and resource types need no edit here. */
export const grants = {
  operations: namespaces.map((ns) => `${ns}.*`),
  resources: Object.fromEntries(resourceTypes.map((type) => [type, ['read', 'write'] as Access[]])),
};

interface Options {
  databaseUrl?: string;
  baseUrl?: string;
  key?: string;
  restrictedKey?: string;
  throttleKey?: string;
  collectKey?: string;
  keepTemp?: boolean;
}

const httpUrl = (name: string) => (value: string) => {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new InvalidArgumentError(`${name} must be an http(s) URL.`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new InvalidArgumentError(`${name} must be an http(s) URL.`);
  return value.replace(/\/+$/, '');
};

const program = new Command()
  .name('npm run contract --')
  .description('Checks a running Workspace Operations service against generated/openapi.yaml with Dredd.')
  .option('--database-url <url>', 'local mode: database to use (postgres://...); default: a fresh SQLite file in a temp dir')
  .option('--base-url <url>', 'deployment mode: API base URL including /v1, e.g. https://host/v1', httpUrl('--base-url'))
  .option('--key <key>', `deployment mode: API key with ${grants.operations.join(', ')} and read/write on ${resourceTypes.join(', ')} (or CONTRACT_KEY)`)
  .option('--restricted-key <key>', 'deployment mode: a valid key without grants, for 403 (or CONTRACT_RESTRICTED_KEY)')
  .option('--throttle-key <key>', 'deployment mode: a key whose rate budget may be used up, for 429 (or CONTRACT_THROTTLE_KEY)')
  .option('--collect-key <key>', 'deployment mode: a site\'s publishable collect key (pk_...) for POST /track; its test events are stored (or CONTRACT_COLLECT_KEY)')
  .option('--keep-temp', 'keep the temp dir (database, server log) after the run')
  .showHelpAfterError();
program.parse();
const opts = program.opts<Options>();

const deployment = opts.baseUrl !== undefined;
const keyOption = (value: string | undefined, env: string) => value ?? (process.env[env] || undefined);
const keys = {
  main: keyOption(opts.key, 'CONTRACT_KEY'),
  restricted: keyOption(opts.restrictedKey, 'CONTRACT_RESTRICTED_KEY'),
  throttle: keyOption(opts.throttleKey, 'CONTRACT_THROTTLE_KEY'),
  collect: keyOption(opts.collectKey, 'CONTRACT_COLLECT_KEY'),
};
if (deployment && opts.databaseUrl) program.error('--database-url is for local mode; it cannot be combined with --base-url.');
if (deployment && !keys.main) program.error('--base-url needs --key (or CONTRACT_KEY): the hooks create the records they need with it.');
if (!deployment && (opts.key || opts.restrictedKey || opts.throttleKey || opts.collectKey)) program.error('--key, --restricted-key, --throttle-key and --collect-key need --base-url (local mode makes its own keys).');
if (opts.databaseUrl && !/^(postgres(ql)?:\/\/|sqlite:)/.test(opts.databaseUrl)) program.error('--database-url must start with postgres:// or sqlite:');

const started = Date.now();
const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;
const log = (message: string) => console.log(`[contract] ${message}`);
const redactUrl = (url: string) => url.replace(/\/\/[^@/]*@/, '//***@');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'wsops-contract-'));
const contextFile = path.join(tmp, 'context.json');
const serverLog = path.join(tmp, 'server.log');
let server: ChildProcess | undefined;
let dredd: ChildProcess | undefined;

/** Whom the main key acts for, by member handle in acme(): an owner and a plain member (e.g. automation.DeleteRule requires Service-Act-As). */
const ACT_AS = { owner: 'olga', member: 'ada' } as const;

/**
 * The fixture workspace: acme() from the mocha fixtures, its ci key granted everything, a dedicated
 * key for the 429 cases, and what the namespaces' kits add (sections such as `automations:`, keys).
 * Every run applies a new workspace, so a reused database (PostgreSQL) gets fresh records each time.
 */
async function contractWorkspace(): Promise<{ spec: FixtureSpec; kitKeys: string[] }> {
  const spec: FixtureSpec = { ...acme() };
  spec.workspace.name = 'Acme (contract tests)';
  // ci is the main key (every namespace, every resource type), bare has no grants.
  const ci = spec.keys!.ci!;
  const delegation = ci.delegation === 'all' ? 'all' : [...new Set([...(Array.isArray(ci.delegation) ? ci.delegation : []), ...Object.values(ACT_AS)])];
  spec.keys = { ...spec.keys, ci: { ...ci, ...grants, delegation }, throttle: { name: 'Contract tests: rate limit', operations: [] } };
  const roles = { owner: ['owner', 'admin'], member: ['member'] };
  for (const [what, handle] of Object.entries(ACT_AS) as Array<[keyof typeof ACT_AS, string]>) {
    const member = spec.members?.[handle];
    if (!member || member.disabled || !roles[what].includes(member.role)) throw new Error(`the contract workspace needs ${handle} as an active ${roles[what].join(' or ')}`);
  }
  const kitKeys: string[] = [];
  for (const { kit } of await testKits()) kitKeys.push(...(kit.contract?.workspace?.(spec) ?? []));
  return { spec, kitKeys };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

type Prepared = Pick<ContractContext, 'keys' | 'members' | 'collectKey' | 'sessionCookie'> & { seeded: Record<string, object | undefined> };

/** Migrates the database, creates the fixture workspace and what each namespace's kit seeds, and a member's sign-in session. */
async function prepareDatabase(databaseUrl: string): Promise<Prepared> {
  const db = openDatabase(databaseUrl);
  try {
    await db.migrate(migrations);
    const { spec, kitKeys } = await contractWorkspace();
    const ws = await applyWorkspace(db, systemClock, spec);
    const seed: Seed = { db, clock: systemClock, ws, key: ws.keys.ci!, members: { owner: ws.members[ACT_AS.owner]!, member: ws.members[ACT_AS.member]! } };
    const seeded: Prepared['seeded'] = {};
    for (const { namespace, kit } of await testKits()) if (kit.contract?.seed) seeded[namespace] = await kit.contract.seed(seed);
    // A member's sign-in session, as a browser holds it after opening a sign-in link.
    const link = await createSigninLink(db, systemClock, { workspaceId: ws.workspace_id, memberId: ws.members.olga!, baseUrl: 'http://127.0.0.1/' });
    const signedIn = await useSigninLink(db, systemClock, link.url.split('/signin/')[1]!);
    if (!signedIn.ok) throw new Error('could not start the sign-in session for the discovery 403 cases');
    return {
      keys: { main: ws.keys.ci!.secret, restricted: ws.keys.bare!.secret, throttle: ws.keys.throttle!.secret, ...Object.fromEntries(kitKeys.map((k) => [k, ws.keys[k]!.secret])) },
      members: ws.members,
      collectKey: Object.values(ws.collect_keys)[0]!,
      sessionCookie: `${SESSION_COOKIE}=${signedIn.sessionToken}`,
      seeded,
    };
  } finally {
    await db.close();
  }
}

/** What each namespace's scenarios read as `ctx[namespace]`: its kit's context, and in local runs what it seeded. */
async function kitContexts(seeded: Prepared['seeded'] = {}): Promise<Record<string, object>> {
  const out: Record<string, object> = {};
  for (const { namespace, kit } of await testKits()) {
    const context = { ...kit.contract?.context?.(), ...seeded[namespace] };
    if (Object.keys(context).length) out[namespace] = context;
  }
  return out;
}

function tail(file: string, lines: number): string {
  try {
    return fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).slice(-lines).join('\n');
  } catch {
    return '';
  }
}

async function startServer(databaseUrl: string, port: number): Promise<ChildProcess> {
  const out = fs.openSync(serverLog, 'a');
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: String(port),
    DATABASE_URL: databaseUrl,
    NODE_ENV: 'development',
    VALIDATE_RESPONSES: 'true',
    JOBS: 'off',
    LOG_LEVEL: 'warn',
    // The default burst (200), but 2 tokens a second instead of 100: once the hooks have used up the
    // throttle key's budget, the next token is 500 ms away, so Dredd's request meets the 429 however
    // loaded the machine is (at 100/s a token frees every 10 ms and a busy CI box loses that race).
    // Every other key stays far below 200 requests in a run.
    RATE_LIMIT_PER_SECOND: '2',
    RATE_LIMIT_BURST: '200',
    // The in-progress receipts for the create operations' 409 must not be taken over as abandoned
    // (default 60 s) however slowly the run reaches those transactions.
    IDEMPOTENCY_LOCK_TIMEOUT_MS: '600000',
  };
  // detached: the server gets its own process group, so stopping it also stops the tsx child.
  const child = spawn('npx', ['tsx', 'scripts/start.ts'], { cwd: root, env, stdio: ['ignore', out, out], detached: true });
  fs.closeSync(out);
  let exited: string | undefined;
  child.on('exit', (code, signal) => {
    exited = signal ?? String(code);
  });
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (exited !== undefined) throw new Error(`the server exited (${exited}) before it was ready:\n${tail(serverLog, 20)}`);
    try {
      const res = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(1000) });
      if (res.ok) return child;
    } catch {
      /* not listening yet */
    }
    if (Date.now() > deadline) {
      stopProcessGroup(child, 'SIGKILL');
      throw new Error(`the server did not answer /healthz within 30 s:\n${tail(serverLog, 20)}`);
    }
    await sleep(100);
  }
}

const running = (child: ChildProcess | undefined): boolean => child !== undefined && child.exitCode === null && child.signalCode === null;

function stopProcessGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined || !running(child)) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    /* already gone */
  }
}

async function stopServer(): Promise<void> {
  const child = server;
  if (!child || !running(child)) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  stopProcessGroup(child, 'SIGTERM');
  const timer = setTimeout(() => stopProcessGroup(child, 'SIGKILL'), 12_000);
  await exited;
  clearTimeout(timer);
}

/** Deployment mode: fail early and clearly when the base URL or the main key does not work. */
async function checkDeployment(baseUrl: string, key: string): Promise<void> {
  let res: Response;
  try {
    res = await fetch(`${baseUrl}/operations`, { headers: { Authorization: `Bearer ${key}`, Accept: 'application/json' }, signal: AbortSignal.timeout(15_000) });
  } catch (err) {
    throw new Error(`GET ${baseUrl}/operations failed: ${(err as Error).message}`);
  }
  if (res.status !== 200) throw new Error(`GET ${baseUrl}/operations with --key answered ${res.status}, not 200; check --base-url (it includes /v1) and --key.`);
  const body = (await res.json()) as { items?: Array<{ id: string }> };
  const granted = new Set((body.items ?? []).map((i) => i.id));
  const missing = catalogue.filter((e) => e.listed && !granted.has(e.id)).map((e) => e.id);
  if (missing.length) throw new Error(`--key may not call ${missing.join(', ')}; it needs every catalogued operation (${grants.operations.join(', ')}) with read and write on ${resourceTypes.join(', ')}.`);
}

function runDredd(context: ContractContext): Promise<number> {
  // Dredd ignores positional arguments when given a config file, so the run gets its own copy.
  const config = YAML.parse(fs.readFileSync(DREDD_CONFIG, 'utf8')) as Record<string, unknown>;
  config.blueprint = DOCUMENT;
  config.endpoint = context.baseUrl;
  config.hookfiles = [HOOKS];
  const runConfig = path.join(tmp, 'dredd.yml');
  fs.writeFileSync(runConfig, YAML.stringify(config));
  fs.writeFileSync(contextFile, JSON.stringify(context, null, 2), { mode: 0o600 });
  return new Promise((resolve, reject) => {
    dredd = spawn(DREDD, ['--config', runConfig], {
      cwd: root,
      stdio: 'inherit',
      // NODE_NO_WARNINGS: Dredd 14 on Node 20 prints a harmless circular-dependency warning (winston).
      env: { ...process.env, CONTRACT_CONTEXT: contextFile, CONTRACT_DOCUMENT: DOCUMENT, NODE_NO_WARNINGS: '1' },
    });
    dredd.on('error', reject);
    dredd.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
}

let cleanedUp = false;
async function cleanup(failed: boolean): Promise<void> {
  if (cleanedUp) return;
  cleanedUp = true;
  await stopServer();
  fs.rmSync(contextFile, { force: true }); // holds key secrets
  if (failed && fs.existsSync(serverLog) && fs.statSync(serverLog).size > 0) {
    log(`server warnings and errors (${serverLog}):\n${tail(serverLog, 40)}`);
  }
  if (opts.keepTemp || (failed && fs.existsSync(serverLog))) log(`temp dir kept: ${tmp}`);
  else fs.rmSync(tmp, { recursive: true, force: true });
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    log(`${signal}: stopping`);
    if (dredd && running(dredd)) dredd.kill('SIGTERM');
    void cleanup(true).then(() => process.exit(130));
  });
}

/** Lets each kit undo what it seeded that a reused database (PostgreSQL) must not collect. */
async function cleanupSeeds(databaseUrl: string, seeded: Prepared['seeded']): Promise<void> {
  const db: Database = openDatabase(databaseUrl);
  try {
    for (const { namespace, kit } of await testKits()) await kit.contract?.cleanup?.(db, seeded[namespace]);
  } finally {
    await db.close();
  }
}

let exitCode = 1;
let databaseUrl: string | undefined;
let seeded: Prepared['seeded'] | undefined;
try {
  let context: ContractContext & Record<string, unknown>;
  const runId = crypto.randomBytes(4).toString('hex');
  if (deployment) {
    const baseUrl = opts.baseUrl!;
    log(`deployment mode: ${redactUrl(baseUrl)} (no server or database is started)`);
    await checkDeployment(baseUrl, keys.main!);
    if (!keys.restricted) log('no --restricted-key: the 403 cases will be skipped');
    if (!keys.throttle) log('no --throttle-key: the 429 cases will be skipped');
    if (!keys.collect) log('no --collect-key: the POST /track 202 case will be skipped');
    context = {
      mode: 'deployment',
      baseUrl,
      runId,
      keys: { main: keys.main!, ...(keys.restricted ? { restricted: keys.restricted } : {}), ...(keys.throttle ? { throttle: keys.throttle } : {}) },
      members: {},
      ...(keys.collect ? { collectKey: keys.collect } : {}),
      ...(await kitContexts()),
    };
  } else {
    databaseUrl = opts.databaseUrl ?? `sqlite:${path.join(tmp, 'contract.sqlite')}`;
    log(`local mode: database ${redactUrl(databaseUrl)}`);
    const { seeded: kitSeeds, ...prepared } = await prepareDatabase(databaseUrl);
    seeded = kitSeeds;
    log(`database ready after ${elapsed()}`);
    const port = await freePort();
    server = await startServer(databaseUrl, port);
    log(`server ready on http://127.0.0.1:${port}/v1 after ${elapsed()} (NODE_ENV=development, response validation on; log: ${serverLog})`);
    context = { mode: 'local', baseUrl: `http://127.0.0.1:${port}/v1`, runId, ...prepared, ...(await kitContexts(seeded)) };
  }
  exitCode = await runDredd(context);
  if (exitCode === 0 && !fs.existsSync(`${contextFile}.done`)) {
    // Dredd 14 exits 0 when a hook never calls back; the hooks' afterAll leaves this marker.
    log('Dredd ended before its afterAll hooks ran; failing the run');
    exitCode = 1;
  }
  if (seeded && databaseUrl) await cleanupSeeds(databaseUrl, seeded);
  if (server && !running(server)) {
    log(`the server exited during the run (${server.exitCode ?? server.signalCode}); failing the run`);
    exitCode ||= 1;
  }
} catch (err) {
  console.error(`[contract] ${(err as Error).message}`);
  exitCode ||= 1;
} finally {
  await cleanup(exitCode !== 0);
}
log(`${exitCode === 0 ? 'passed' : `FAILED (exit ${exitCode})`} in ${elapsed()}`);
process.exit(exitCode);
