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
 * URL, key secrets, member ids) from the file named by CONTRACT_CONTEXT. Key secrets are never
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
import { openDatabase } from '../db/database.ts';
import { type Access, catalogue, namespaces, resourceTypes } from '../generated/catalogue.ts';
import { lockReceipt, releaseReceipt } from '../db/queries/idempotency.ts';
import { type ApplyResult, applyWorkspace, type WorkspaceSpec } from '../server/admin.ts';
import { ingestEvents, normalizeEvent } from '../handlers/analytics/ingest.ts';
import { type DbWebhookDeliveryRow, type DeliveryStatus, insertAttempt, insertDelivery, insertProposal } from '../handlers/webhooks/queries.ts';
import { approveProposal, disableSubscription, PROPOSAL_TTL_MS } from '../handlers/webhooks/subscriptions.ts';
import { systemClock } from '../server/clock.ts';
import { newId } from '../server/ids.ts';
import { requestFingerprint } from '../server/idempotency.ts';
import { SESSION_COOKIE } from '../server/pages.ts';
import { createSigninLink, useSigninLink } from '../server/signin.ts';
import { acme, createPipeline, stages } from '../test/support/fixtures.ts';
import { freePort } from '../scripts/ports.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DOCUMENT = path.join(root, 'generated', 'openapi.yaml');
const DREDD_CONFIG = path.join(root, 'contract-tests', 'dredd.yml');
const HOOKS = path.join(root, 'contract-tests', 'hooks.cjs');
const DREDD = path.join(root, 'node_modules', '.bin', 'dredd');

/** What the hooks read from CONTRACT_CONTEXT. Mirrored (untyped) in hooks.cjs. */
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
    /** Local mode: a key granted webhooks.PrepareWebhook that may not read `webhooks.type` (PrepareWebhook's 403 for a type). */
    narrow?: string;
  };
  /** A site's publishable collect key, for POST /track (local mode: the fixture site's; deployment: --collect-key). */
  collectKey?: string;
  /** Member ids of the fixture workspace by handle (local mode only). */
  members: Record<string, string>;
  /** Request fixtures shared with the mocha suites (test/support/fixtures.ts). */
  fixtures: { stages: typeof stages.basic };
  /**
   * Local mode, by operation id: an Idempotency-Key of the main key whose request is recorded as still
   * in progress (the same receipt row the server takes when a request starts), with the body to send,
   * so `409 conflict` happens deterministically for the create operations, which have no other 409.
   */
  inProgress?: Record<string, { idempotencyKey: string; body: unknown; scope: string }>;
  /** Local mode: `wso_session=...`, a member's sign-in session (for the discovery endpoints' 403 from a foreign Origin). */
  sessionCookie?: string;
  /**
   * Local mode: the automation rules the fixture workspace file authored (`AUTOMATIONS`), rule id by
   * handle, and the members the main key acts for on them (an owner, who may manage rules, and a
   * plain member, who may not). Rules cannot be created through the API: a deployment run has none.
   */
  automation?: { rules: Record<keyof typeof AUTOMATIONS, string>; owner: string; member: string };
  /**
   * Local mode: the webhook subscriptions of the fixture workspace (`prepareWebhooks`), proposed and
   * approved by an owner as on the settings page, with deliveries as the worker leaves them. The server
   * runs with JOBS=off: nothing is delivered, so they stay as made until Dredd's requests change them.
   */
  webhooks?: ContractWebhooks;
}

/** A delivery run.ts recorded (`prepareWebhooks`). */
export interface ContractDelivery {
  delivery_id: string;
  event_id: string;
  /** Attempt ids recorded for it, in order. */
  attempts: string[];
}

export interface ContractWebhooks {
  /** Enabled, resource.updated of `type`: a delivery that failed (8 attempts, the first two recorded) and one still pending. */
  main: { webhook_id: string; failed: ContractDelivery; pending: ContractDelivery };
  /** Enabled, with one delivery that failed: RecoverWebhookEvents replays it (nothing else replays on it). */
  recover: { webhook_id: string; failed: ContractDelivery };
  /** Disabled by an owner after a delivery failed: ReplayWebhookEvent and RecoverWebhookEvents answer 409. */
  disabled: { webhook_id: string; failed: ContractDelivery };
  /** The type the main subscription carries (the document's example) and keys.narrow may not read. */
  type: string;
  /** Every webhook id above, in creation order. */
  all: string[];
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

/**
 * The automation rules of the fixture workspace file (`automations:`; rules are authored by operators,
 * never through the API): one to read (GetRule, and UpdateRule's 403 for a plain member, which leaves
 * it enabled), one UpdateRule pauses and one DeleteRule deletes. Every run applies a new workspace, so
 * a reused database (PostgreSQL) gets fresh rules each time. The server runs with JOBS=off: no rule runs.
 */
const AUTOMATIONS = {
  read: {
    name: 'Contract tests: follow up on big deals',
    description: 'Read by automation.GetRule; a plain member may not pause it (403).',
    trigger: { resource_type: 'core:Deal', event: 'created', conditions: [{ field: 'amount.amount', op: 'gte', value: 10000 }, { field: 'amount.currency', op: 'eq', value: 'EUR' }] },
    actions: [
      { type: 'create_record', resource_type: 'core:Company', data: { name: 'Prospect of {{record.data.name}}' } },
      { type: 'notify', to: 'owners_and_admins', title: 'Big deal: {{record.data.name}}', body: 'Amount {{record.data.amount.amount}} {{record.data.amount.currency}}' },
    ],
  },
  pause: {
    name: 'Contract tests: rule to pause',
    trigger: { resource_type: 'core:Company', event: 'updated', fields: ['lifecycle_stage'], conditions: [{ field: 'lifecycle_stage', op: 'eq', value: 'customer' }] },
    actions: [{ type: 'set_fields', data: { industry: 'Customer' } }],
  },
  remove: {
    name: 'Contract tests: rule to delete',
    trigger: { resource_type: 'core:Deal', event: 'deleted' },
    actions: [{ type: 'notify', to: 'owners_and_admins', title: 'Deal deleted: {{record.id}}' }],
  },
} as const;

/** The type the contract subscriptions carry: the PrepareWebhook example's. */
const WEBHOOK_TYPE = 'core:Deal';
/** The destination of the contract subscriptions (the PrepareWebhook example's; JOBS=off: nothing is ever sent to it). */
const WEBHOOK_URL = 'https://hooks.acme-receiver.com/workspace-operations';

/** Whom the main key acts for on the automation rules, by member handle in acme(): an owner and a plain member. */
const ACT_AS = { owner: 'olga', member: 'ada' } as const;

/** The fixture workspace: acme() from the mocha fixtures, its ci key granted everything, a dedicated key for the 429 cases, and automation rules. */
function contractWorkspace(): WorkspaceSpec & { automations: typeof AUTOMATIONS } {
  const spec = acme();
  spec.workspace.name = 'Acme (contract tests)';
  // ci is the main key (every namespace, every resource type), bare has no grants. ci also acts for
  // an owner (automation.DeleteRule requires Service-Act-As) and a plain member (refused: 403).
  const ci = spec.keys!.ci!;
  const delegation = ci.delegation === 'all' ? 'all' : [...new Set([...(Array.isArray(ci.delegation) ? ci.delegation : []), ...Object.values(ACT_AS)])];
  // narrow may propose webhooks but not read the webhook type (PrepareWebhook's 403 for a type it may not read).
  const narrowResources = Object.fromEntries(resourceTypes.filter((t) => t !== WEBHOOK_TYPE).map((t) => [t, ['read', 'write'] as Access[]]));
  spec.keys = {
    ...spec.keys,
    ci: { ...ci, ...grants, delegation },
    throttle: { name: 'Contract tests: rate limit', operations: [] },
    narrow: { name: `Contract tests: webhooks without read on ${WEBHOOK_TYPE}`, operations: ['webhooks.PrepareWebhook'], resources: narrowResources },
  };
  const roles = { owner: ['owner', 'admin'], member: ['member'] };
  for (const [what, handle] of Object.entries(ACT_AS) as Array<[keyof typeof ACT_AS, string]>) {
    const member = spec.members?.[handle];
    if (!member || member.disabled || !roles[what].includes(member.role)) throw new Error(`the contract workspace needs ${handle} as an active ${roles[what].join(' or ')} (automation cases)`);
  }
  return { ...spec, automations: AUTOMATIONS };
}

/**
 * Bodies of the create requests recorded as in progress: valid for the request schema (it is checked
 * before the receipt), with the defaults the validator fills in spelled out (the fingerprint is taken
 * after), never run (the receipt answers first).
 */
const IN_PROGRESS_BODIES: Record<string, unknown> = {
  'customers.CreateSalesPipeline': { ...createPipeline('Contract in-progress create'), private: false },
  'customers.CreateDeal': { data: { name: 'Contract in-progress deal', pipeline_id: 'pl_contract_in_progress', stage_id: 'lead' }, private: false },
};


const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Migrates the database, creates the fixture workspace (with its automation rules) and the in-progress idempotency receipt. */
async function prepareDatabase(databaseUrl: string): Promise<Omit<ContractContext, 'mode' | 'baseUrl' | 'runId' | 'fixtures'>> {
  const db = openDatabase(databaseUrl);
  try {
    await db.migrate(migrations);
    const ws = (await applyWorkspace(db, systemClock, contractWorkspace())) as ApplyResult & { automations: Record<keyof typeof AUTOMATIONS, string> };
    const main = ws.keys.ci!;
    // A little traffic on the fixture site, so the analytics transactions return real rows (and a second breakdown page).
    const now = systemClock.now();
    await ingestEvents(
      db,
      [
        { type: 'pageview' as const, ts: now - 120_000, visitor: 'contract-a', path: '/', referrer: 'https://search.example/' },
        { type: 'engagement' as const, ts: now - 60_000, visitor: 'contract-a', path: '/', engaged_ms: 15_000 },
        { type: 'pageview' as const, ts: now - 30_000, visitor: 'contract-b', path: '/pricing' },
      ].map((e) => normalizeEvent(ws.bundles.docs!, e)),
    );
    // Exactly what the platform stores when such a request with this key starts (server/idempotency.ts):
    // the receipt lock, not yet completed, under the same fingerprint.
    const inProgress: NonNullable<ContractContext['inProgress']> = {};
    const scope = `${main.id}:-`; // receipts are scoped to the key and the member acted for (none)
    for (const [operationId, body] of Object.entries(IN_PROGRESS_BODIES)) {
      const idempotencyKey = `contract-in-progress-${crypto.randomUUID()}`;
      const locked = await lockReceipt(db.sql, { scope, key: idempotencyKey }, operationId, requestFingerprint(operationId, body), systemClock.now());
      if (!locked) throw new Error(`could not record the in-progress idempotency receipt of ${operationId}`);
      inProgress[operationId] = { idempotencyKey, body, scope };
    }
    // A member's sign-in session, as a browser holds it after opening a sign-in link.
    const webhooks = await prepareWebhooks(db, ws.workspace_id, main.id, ws.members[ACT_AS.owner]!);
    const link = await createSigninLink(db, systemClock, { workspaceId: ws.workspace_id, memberId: ws.members.olga!, baseUrl: 'http://127.0.0.1/' });
    const signedIn = await useSigninLink(db, systemClock, link.url.split('/signin/')[1]!);
    if (!signedIn.ok) throw new Error('could not start the sign-in session for the discovery 403 cases');
    return {
      keys: { main: main.secret, restricted: ws.keys.bare!.secret, throttle: ws.keys.throttle!.secret, narrow: ws.keys.narrow!.secret },
      members: ws.members,
      collectKey: ws.collect_keys.docs!,
      inProgress,
      sessionCookie: `${SESSION_COOKIE}=${signedIn.sessionToken}`,
      automation: { rules: ws.automations, owner: ws.members[ACT_AS.owner]!, member: ws.members[ACT_AS.member]! },
      webhooks,
    };
  } finally {
    await db.close();
  }
}

/**
 * The webhook subscriptions of the contract workspace, made as in production: a proposal as
 * webhooks.PrepareWebhook stores it (by the main key), approved by an owner (approveProposal, what the
 * approval page calls); the disabled one is then disabled as on the settings page. Their deliveries are
 * what the delivery worker leaves behind: one that exhausted its 8 attempts (the first two recorded)
 * and one still waiting for its next attempt. A new workspace every run: a reused database
 * (PostgreSQL) gets fresh ones.
 */
async function prepareWebhooks(db: ReturnType<typeof openDatabase>, workspaceId: string, keyId: string, ownerId: string): Promise<ContractWebhooks> {
  if (!(resourceTypes as readonly string[]).includes(WEBHOOK_TYPE)) throw new Error(`${WEBHOOK_TYPE} is no longer a published resource type; pick another WEBHOOK_TYPE`);
  const subscribe = async (path: string) => {
    const now = systemClock.now();
    const proposalId = newId('whp');
    await insertProposal(db.sql, {
      id: proposalId,
      workspace_id: workspaceId,
      url: `${WEBHOOK_URL}/${path}`,
      event: 'resource.updated',
      resource_types: JSON.stringify([WEBHOOK_TYPE]),
      proposed_by_key: keyId,
      proposed_by_member: null,
      status: 'pending',
      expires_at: now + PROPOSAL_TTL_MS,
      decided_by: null,
      decided_at: null,
      webhook_id: null,
      created_at: now,
    });
    return (await approveProposal(db, systemClock, proposalId, { workspaceId, memberId: ownerId, role: 'owner' })).webhook_id;
  };
  const deliver = async (webhookId: string, status: DeliveryStatus, attempts: Array<{ status: number | null; error: string }>): Promise<ContractDelivery> => {
    const now = systemClock.now();
    const start = now - 10 * 60_000;
    const failed = status === 'failed';
    const eventId = newId('evt');
    const recordId = newId('dl');
    const delivery: DbWebhookDeliveryRow = {
      id: newId('whd'),
      workspace_id: workspaceId,
      webhook_id: webhookId,
      event_id: eventId,
      event_type: 'resource.updated',
      resource_type: WEBHOOK_TYPE,
      record_id: recordId,
      event_occurred_at: start - 100,
      payload: JSON.stringify({ event: 'resource.updated', event_id: eventId, webhook_id: webhookId, resource_type: WEBHOOK_TYPE, record_id: recordId, occurred_at: start - 100, changed_fields: ['stage_id'] }),
      status,
      attempts: failed ? 8 : attempts.length,
      first_attempt_at: start,
      next_attempt_at: failed ? null : now + 3_600_000,
      last_attempt_at: failed ? now - 60_000 : start + 30_000 * (attempts.length - 1),
      last_status_code: attempts.at(-1)!.status,
      last_error: attempts.at(-1)!.error,
      leased_by: null,
      lease_until: null,
      replay_of: null,
      created_at: start,
      finished_at: failed ? now - 60_000 : null,
    };
    await insertDelivery(db.sql, delivery);
    const ids: string[] = [];
    for (const [i, a] of attempts.entries()) {
      const id = newId('wha');
      await insertAttempt(db.sql, {
        id,
        delivery_id: delivery.id,
        webhook_id: webhookId,
        workspace_id: workspaceId,
        attempt: i + 1,
        started_at: start + 30_000 * i,
        duration_ms: a.status === null ? 10_000 : 84,
        status_code: a.status,
        error: a.error,
        response_body: a.status === null ? null : 'upstream unavailable',
        next_attempt_at: i === attempts.length - 1 && !failed ? delivery.next_attempt_at : start + 30_000 * (i + 1),
      });
      ids.push(id);
    }
    return { delivery_id: delivery.id, event_id: eventId, attempts: ids };
  };
  const tries = [
    { status: 500, error: 'HTTP 500' },
    { status: null, error: 'timeout after 10000 ms' },
  ];
  const main = await subscribe('main');
  const recover = await subscribe('recover');
  const disabled = await subscribe('disabled');
  const webhooks: ContractWebhooks = {
    main: { webhook_id: main, failed: await deliver(main, 'failed', tries), pending: await deliver(main, 'pending', tries.slice(0, 1)) },
    recover: { webhook_id: recover, failed: await deliver(recover, 'failed', tries) },
    disabled: { webhook_id: disabled, failed: await deliver(disabled, 'failed', tries) },
    type: WEBHOOK_TYPE,
    all: [main, recover, disabled],
  };
  if (!(await disableSubscription(db, systemClock, workspaceId, disabled, 'Contract tests'))) throw new Error(`could not disable webhook subscription ${disabled}`);
  return webhooks;
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

/** Removes the never-finished receipts again, so a reused database (PostgreSQL) does not collect them. */
async function releaseInProgress(databaseUrl: string, receipts: NonNullable<ContractContext['inProgress']>): Promise<void> {
  const db = openDatabase(databaseUrl);
  try {
    for (const receipt of Object.values(receipts)) await releaseReceipt(db.sql, { scope: receipt.scope, key: receipt.idempotencyKey });
  } finally {
    await db.close();
  }
}

let exitCode = 1;
let databaseUrl: string | undefined;
try {
  let context: ContractContext;
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
      fixtures: { stages: stages.basic },
    };
  } else {
    databaseUrl = opts.databaseUrl ?? `sqlite:${path.join(tmp, 'contract.sqlite')}`;
    log(`local mode: database ${redactUrl(databaseUrl)}`);
    const prepared = await prepareDatabase(databaseUrl);
    log(`database ready after ${elapsed()}`);
    const port = await freePort();
    server = await startServer(databaseUrl, port);
    log(`server ready on http://127.0.0.1:${port}/v1 after ${elapsed()} (NODE_ENV=development, response validation on; log: ${serverLog})`);
    context = { mode: 'local', baseUrl: `http://127.0.0.1:${port}/v1`, runId, ...prepared, fixtures: { stages: stages.basic } };
  }
  exitCode = await runDredd(context);
  if (exitCode === 0 && !fs.existsSync(`${contextFile}.done`)) {
    // Dredd 14 exits 0 when a hook never calls back; the hooks' afterAll leaves this marker.
    log('Dredd ended before its afterAll hooks ran; failing the run');
    exitCode = 1;
  }
  if (context.inProgress && databaseUrl) await releaseInProgress(databaseUrl, context.inProgress);
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
