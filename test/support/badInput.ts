import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import type { Database } from '../../db/database.ts';
import { catalogue, memberRoles, namespaces, resourceTypes } from '../../generated/catalogue.ts';
import { document } from '../../generated/document.ts';
import { type ApplyResult, revokeKey, type WorkspaceSpec } from '../../server/admin.ts';
import type { ErrorCode } from '../../server/errors.ts';
import { bodyCases, catalogued, type DocOperation, docOperations, fits, flatten, ID_PATTERN, sampleOf, unknownIdPrefixes, withRealIds } from './requestSchema.ts';
import { insertAttempt, insertDelivery } from '../../handlers/webhooks/queries.ts';
import { approveProposal } from '../../handlers/webhooks/subscriptions.ts';
import { settleAutomation } from './automation.ts';
import type { TestService } from './service.ts';

/**
 * What the generated bad-input cases (test/platform/badInput.test.ts) and the fuzz test run on: raw
 * HTTP calls, the error-body assertion, a fixture workspace built from the catalogue, valid base
 * bodies from the document's examples with real ids, and a generic "nothing was stored" snapshot.
 * Nothing here names an operation or a field.
 */

export interface RawResponse {
  status: number;
  contentType: string;
  headers: Headers;
  text: string;
  body: unknown;
}

/** Headers of a raw call; `null` removes a default header. */
export type HeaderPatch = Record<string, string | null>;

/**
 * A plain HTTP call with full control of method, headers and body bytes. The body is sent as bytes, so
 * fetch adds no Content-Type of its own (a string body would get `text/plain`).
 */
export async function send(baseUrl: string, method: string, path: string, headers: HeaderPatch, body?: string): Promise<RawResponse> {
  const h: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) if (v !== null) h[k] = v;
  const bytes = body === undefined ? undefined : new TextEncoder().encode(body);
  const res = await fetch(`${baseUrl}${path}`, { method, headers: h, ...(bytes === undefined ? {} : { body: bytes }) });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: res.status, contentType: res.headers.get('content-type') ?? '', headers: res.headers, text, body: parsed };
}

/** The codes of components/schemas/Error.yaml. */
export const ERROR_CODES: ReadonlySet<string> = new Set(document.components.schemas.Error.properties.error.enum);

/** Any documented error body: JSON, exactly `{error, message}`, a documented code, a non-empty message, no secret. */
export function assertErrorShape(res: RawResponse, detail: string, secrets: readonly string[] = []): void {
  assert.match(res.contentType, /^application\/json\b/, `not JSON: ${detail}`);
  const body = res.body as Record<string, unknown> | null | undefined;
  assert.ok(body !== null && typeof body === 'object' && !Array.isArray(body), `body is not an object: ${detail}`);
  assert.deepEqual(Object.keys(body).sort(), ['error', 'message', 'request_id'], `body keys: ${detail}`);
  assert.equal(typeof body.error, 'string', `error is not a string: ${detail}`);
  assert.equal(typeof body.message, 'string', `message is not a string: ${detail}`);
  assert.ok((body.message as string).length > 0, `empty message: ${detail}`);
  assert.ok(ERROR_CODES.has(body.error as string), `undocumented error code: ${detail}`);
  for (const s of secrets) assert.ok(!res.text.includes(s), `the error reveals a secret: ${detail}`);
}

/** The documented error: this status, JSON, exactly `{error, message}`, both strings, with this code. */
export function assertErrorBody(res: RawResponse, status: number, code: ErrorCode, label: string, secrets: readonly string[] = []): void {
  const detail = `${label}\n      got ${res.status} ${res.contentType} ${res.text.slice(0, 400)}`;
  assert.equal(res.status, status, `wrong status: ${detail}`);
  assertErrorShape(res, detail, secrets);
  assert.equal((res.body as Record<string, unknown>).error, code, `wrong error code: ${detail}`);
}

// ---- The fixture ---------------------------------------------------------------------------------

export const BROWSER_UA = 'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0';

/** What every generated case runs against. */
export interface Fixture {
  ws: ApplyResult;
  /** Another workspace (its member is foreign to `ws`). */
  other: ApplyResult;
  /** Every namespace, read and write on every resource type, delegation to every member but the outsider. */
  key: string;
  /** A key with the same grants, used once (so the service has it cached), then revoked. */
  revoked: string;
  /** A valid key without any grant. */
  bare: string;
  members: { active: string; disabled: string; outsider: string; foreign: string };
  /** Real ids by prefix: the workspace, its first member, site, app and collect key, and a record of every type a Create example makes. */
  ids: Map<string, string>;
  /** Why a Create example could not make its record (a base body that needs that id cannot be built). */
  notCreated: string[];
}

const prefixOf = (id: string): string | null => ID_PATTERN.exec(id)?.[1] ?? null;

/** A workspace spec built from the catalogue: every role, a disabled member, an outsider, one site and app. */
function workspaceSpec(name: string): WorkspaceSpec {
  const roles = Object.keys(memberRoles) as Array<NonNullable<WorkspaceSpec['members']>[string]['role']>;
  const last = roles[roles.length - 1]!;
  const members: NonNullable<WorkspaceSpec['members']> = {};
  for (const role of roles) members[role] = { name: `The ${role}`, email: `${role}@bad-input.test`, role };
  members.gone = { name: 'Gone member', email: 'gone@bad-input.test', role: last, disabled: true };
  members.outsider = { name: 'Not delegated', email: 'outsider@bad-input.test', role: last };
  const grants = {
    operations: namespaces.map((n) => `${n}.*`),
    resources: Object.fromEntries(resourceTypes.map((r) => [r, ['read', 'write'] as Array<'read' | 'write'>])),
  };
  return {
    workspace: { name },
    members,
    bundles: { site: { name: 'Docs site', domain: 'docs.acme.test' } },
    apps: { app: { name: 'Tickets', resource_types: ['Ticket'] } },
    keys: {
      main: { name: 'Bad input', ...grants, delegation: [...roles, 'gone'] },
      revoked: { name: 'Revoked', ...grants, delegation: 'all' },
      bare: { name: 'No grants', operations: [] },
    },
    // An authored rule, so automation operations have a real rule id (`ru_...`).
    automations: { rule: { name: 'Notify on new deals', trigger: { resource_type: 'core:Deal', event: 'created' }, actions: [{ type: 'notify', to: 'owners_and_admins', title: 'New deal' }] } },
  } as WorkspaceSpec;
}

/** The first id-like string of a response body (`item.id` of a create), for the id map. */
function firstId(body: unknown): string | null {
  if (typeof body === 'string') return ID_PATTERN.test(body) ? body : null;
  if (typeof body !== 'object' || body === null) return null;
  const record = body as Record<string, unknown>;
  if (typeof record.id === 'string' && ID_PATTERN.test(record.id)) return record.id;
  for (const v of Object.values(record)) {
    const id = firstId(v);
    if (id) return id;
  }
  return null;
}

/** Default headers of a call to `op` with the fixture's main key. */
export function headersFor(op: DocOperation, fx: Fixture, contentType = op.contentTypes[0]): HeaderPatch {
  const h: HeaderPatch = {};
  if (op.entry) h.Authorization = `Bearer ${fx.key}`;
  else h['User-Agent'] = BROWSER_UA;
  if (op.method === 'post') h['Content-Type'] = contentType ?? 'application/json';
  if (op.kind === 'command') h['Idempotency-Key'] = `bad-input-${crypto.randomUUID()}`;
  // An operation that requires a member acts for the workspace's first role (the owner).
  if (op.actAs === 'required') h['Service-Act-As'] = fx.members.active;
  return h;
}

/** One call of `op` with a JSON body and its default headers (plus `extra`). */
export function call(svc: TestService, fx: Fixture, op: DocOperation, body: unknown, extra: HeaderPatch = {}): Promise<RawResponse> {
  return send(svc.baseUrl, op.method.toUpperCase(), op.path, { ...headersFor(op, fx), ...extra }, op.method === 'post' ? JSON.stringify(body) : undefined);
}

/** Which Create operation makes records of an id prefix (learnt from the answers: e.g. `pl` from customers.CreateSalesPipeline). */
const makers = new Map<string, DocOperation>();

/** Id prefixes a value names (e.g. `pl` for `pl_8d2k...`). */
function idPrefixes(value: unknown): string[] {
  const out = new Set<string>();
  const visit = (v: unknown) => {
    if (typeof v === 'string') {
      const p = prefixOf(v);
      if (p) out.add(p);
    } else if (Array.isArray(v)) v.forEach(visit);
    else if (typeof v === 'object' && v !== null) Object.values(v).forEach(visit);
  };
  visit(value);
  return [...out];
}

/**
 * Makes one record of every type a Create example can make (in as many rounds as the examples'
 * references need: a record that names another is made after it), twice, then runs every Upsert
 * example once (a second record where a unique key refuses the second create), so that listings have
 * a second page. Sets real ids by prefix in `ids`; returns why a Create example made nothing.
 */
export async function createRecords(svc: TestService, fx: Fixture, ids: Map<string, string>): Promise<string[]> {
  const creates = catalogued.filter((o) => o.kind === 'command' && /\.Create[A-Z]/.test(o.id) && o.example !== undefined);
  const pending = new Map(creates.map((o) => [o.id, o]));
  const why = new Map<string, string>();
  for (let round = 0; round < creates.length && pending.size; round++) {
    for (const op of [...pending.values()]) {
      const body = withRealIds(op.example, ids);
      const missing = unknownIdPrefixes(body, ids);
      if (missing.length) {
        why.set(op.id, `${op.id}: its example names ids of unknown prefixes ${missing.join(', ')}`);
        continue;
      }
      const res = await call(svc, fx, op, body);
      const id = res.status === 200 ? firstId(res.body) : null;
      pending.delete(op.id);
      if (!id || !prefixOf(id)) {
        why.set(op.id, `${op.id}: its example answered ${res.status} ${res.text.slice(0, 200)}`);
        continue;
      }
      why.delete(op.id);
      ids.set(prefixOf(id)!, id);
      makers.set(prefixOf(id)!, op);
      await call(svc, fx, op, body); // a second record of the type, for a second page
    }
  }
  for (const op of catalogued.filter((o) => o.kind === 'command' && /\.Upsert[A-Z]/.test(o.id) && o.example !== undefined)) {
    const body = withRealIds(op.example, ids);
    if (!unknownIdPrefixes(body, ids).length) await call(svc, fx, op, body);
  }
  return [...why.values()];
}

/**
 * Fresh records for exactly what `value` names (and what those need, e.g. a deal's pipeline), in a
 * workspace that may hold nothing else: real ids by prefix. Needs the Create operations learnt by a
 * full fixture (`makeFixture`) first.
 */
export async function recordsFor(svc: TestService, fx: Fixture, value: unknown): Promise<Map<string, string>> {
  const ids = new Map([...fx.ids].filter(([prefix]) => !makers.has(prefix)));
  const ensure = async (prefix: string, depth: number): Promise<void> => {
    const op = makers.get(prefix);
    if (ids.has(prefix) || !op || depth > 8) return;
    for (const needed of idPrefixes(op.example)) await ensure(needed, depth + 1);
    const res = await call(svc, fx, op, withRealIds(op.example, ids));
    const id = res.status === 200 ? firstId(res.body) : null;
    if (!id) throw new Error(`${op.id}: its example answered ${res.status} ${res.text.slice(0, 200)}`);
    ids.set(prefix, id);
  };
  for (const prefix of idPrefixes(value)) await ensure(prefix, 0);
  return ids;
}

/** A little traffic through the collection endpoint (three pages of the site), written at once. */
async function sendTraffic(svc: TestService, fx: Fixture): Promise<void> {
  for (const op of docOperations.filter((o) => o.kind === 'collection' && o.method === 'post' && o.example !== undefined)) {
    const example = withRealIds(op.example, fx.ids) as Record<string, unknown>;
    for (const page of ['', '/a', '/b']) {
      const body = { ...example };
      if (typeof body.url === 'string') {
        const url = new URL(body.url);
        url.pathname += page;
        body.url = url.href;
      }
      const res = await call(svc, fx, op, body);
      assert.ok(res.status < 300, `traffic for the fixture: ${op.id} answered ${res.status} ${res.text}`);
    }
  }
  await svc.collector.flush();
}

/**
 * A fresh fixture workspace on `svc` (new ids each time). `light`: the workspace alone, without the
 * second workspace, the revoked key, the records and the traffic (then `other` is the workspace
 * itself and `revoked` is not revoked).
 */
export async function makeFixture(svc: TestService, options: { light?: boolean } = {}): Promise<Fixture> {
  const ws = await svc.apply(workspaceSpec('Bad input'));
  const other = options.light ? ws : await svc.apply(workspaceSpec('Another workspace'));
  const roles = Object.keys(memberRoles);
  const ids = new Map<string, string>();
  const rules = (ws as { automations?: Record<string, string> }).automations ?? {};
  const own = [ws.workspace_id, ws.members[roles[0]!]!, ...Object.values(ws.bundles), ...Object.values(ws.apps), ...Object.values(ws.collect_keys), ...Object.values(rules)];
  for (const id of own) {
    const prefix = prefixOf(id);
    if (prefix && !ids.has(prefix)) ids.set(prefix, id);
  }
  const fx: Fixture = {
    ws,
    other,
    key: ws.keys.main!.secret,
    revoked: ws.keys.revoked!.secret,
    bare: ws.keys.bare!.secret,
    members: { active: ws.members[roles[0]!]!, disabled: ws.members.gone!, outsider: ws.members.outsider!, foreign: other.members[roles[0]!]! },
    ids,
    notCreated: [],
  };
  await webhookFixture(svc, fx);
  if (options.light) return fx;
  // Use the doomed key once (the service caches it), then revoke it.
  const discovery = catalogued.find((o) => o.method === 'get')!;
  assert.equal((await send(svc.baseUrl, 'GET', discovery.path, { Authorization: `Bearer ${fx.revoked}` })).status, 200);
  await revokeKey(svc.db, svc.clock, ws.keys.revoked!.id);
  fx.notCreated = await createRecords(svc, fx, ids);
  await sendTraffic(svc, fx);
  // The records made above trigger the fixture's rule: its runs give automation.GetRule a second page.
  await settleAutomation(svc);
  return fx;
}

/**
 * A subscription (proposed through the API, approved as an owner does on the page) with one delivery
 * that exhausted its attempts: real ids for the webhook operations (`wh`, `evt`, `whd`).
 */
async function webhookFixture(svc: TestService, fx: Fixture): Promise<void> {
  const subscribe = async (path: string) => {
    const proposed = await call(svc, fx, docOperations.find((o) => o.id === 'webhooks.PrepareWebhook')!, {
      url: `https://hooks.acme-receiver.com/${path}`,
      event: 'resource.created',
      resource_types: [resourceTypes[0]],
    });
    assert.equal(proposed.status, 200, proposed.text);
    const { proposal_id } = proposed.body as { proposal_id: string };
    return (await approveProposal(svc.db, svc.clock, proposal_id, { workspaceId: fx.ws.workspace_id, memberId: fx.members.active, role: 'owner' })).webhook_id;
  };
  // Two subscriptions and two attempts: second pages for the listings.
  const webhook_id = await subscribe('first');
  await subscribe('second');
  const now = svc.clock.now();
  const delivery = {
    id: `whd_${crypto.randomUUID().replaceAll('-', '').slice(0, 24)}`,
    event_id: `evt_${crypto.randomUUID().replaceAll('-', '').slice(0, 24)}`,
  };
  await insertDelivery(svc.db.sql, {
    ...delivery,
    workspace_id: fx.ws.workspace_id,
    webhook_id,
    event_type: 'resource.created',
    resource_type: resourceTypes[0],
    record_id: 'co_fixture',
    event_occurred_at: now,
    payload: '{}',
    status: 'failed',
    attempts: 8,
    first_attempt_at: now,
    next_attempt_at: null,
    last_attempt_at: now,
    last_status_code: 500,
    last_error: 'HTTP 500',
    leased_by: null,
    lease_until: null,
    replay_of: null,
    created_at: now,
    finished_at: now,
  });
  for (const attempt of [1, 2]) {
    await insertAttempt(svc.db.sql, {
      id: `wha_${crypto.randomUUID().replaceAll('-', '').slice(0, 24)}`,
      delivery_id: delivery.id,
      webhook_id,
      workspace_id: fx.ws.workspace_id,
      attempt,
      started_at: now,
      duration_ms: 5,
      status_code: 500,
      error: 'HTTP 500',
      response_body: null,
      next_attempt_at: null,
    });
  }
  fx.ids.set('wh', webhook_id);
  fx.ids.set('evt', delivery.event_id);
  fx.ids.set('whd', delivery.id);
}

/**
 * A valid body for `op` that, were it accepted, would change or reveal the fixture's records: the
 * document's request example with real ids (or, without one, the smallest body the schema allows).
 */
export function baseBody(op: DocOperation, ids: ReadonlyMap<string, string>): unknown {
  if (!op.body) return undefined;
  const body = withRealIds(op.example !== undefined ? op.example : sampleOf(op.body), ids);
  const missing = unknownIdPrefixes(body, ids);
  if (missing.length) throw new Error(`${op.id}: no real id of prefix ${missing.join(', ')} for its example (no Create example made one)`);
  if (!fits(op.body, body)) throw new Error(`${op.id}: its example does not fit its request schema: ${JSON.stringify(body)}`);
  return body;
}

// ---- Nothing stored ------------------------------------------------------------------------------

/** Tables whose rows change without a request storing anything (budgets, lazily made secrets, consumer positions). */
const UNSTORED = new Set(['rate_limits', 'service_secrets', 'outbox_consumers', 'knex_migrations', 'knex_migrations_lock']);
const tablesOf = new WeakMap<Database, Promise<string[]>>();

async function tables(db: Database): Promise<string[]> {
  let list = tablesOf.get(db);
  if (!list) {
    const rows =
      db.dialect === 'sqlite'
        ? await db.sql.all<{ name: string }>(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
        : await db.sql.all<{ name: string }>(`SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name`);
    list = Promise.resolve(rows.map((r) => r.name).filter((n) => !UNSTORED.has(n)));
    tablesOf.set(db, list);
  }
  return list;
}

/** Row counts of every table (one query), and the collection queue: what a refused request must leave as it was. */
export async function storedState(svc: TestService): Promise<Record<string, number>> {
  const names = await tables(svc.db);
  const rows = await svc.db.sql.all<{ t: string; n: number | string }>(names.map((n) => `SELECT '${n}' AS t, COUNT(*) AS n FROM ${n}`).join(' UNION ALL '));
  const out: Record<string, number> = { 'collection queue': svc.collector.queued };
  for (const r of rows) out[r.t] = Number(r.n);
  return out;
}

export function stateDiff(before: Record<string, number>, after: Record<string, number>): string | null {
  const changed = Object.keys({ ...before, ...after })
    .filter((k) => before[k] !== after[k])
    .map((k) => `${k} ${before[k] ?? 0} -> ${after[k] ?? 0}`);
  return changed.length ? changed.join(', ') : null;
}

// ---- Cases ---------------------------------------------------------------------------------------

/** One request that must be refused with exactly this status and error code, storing nothing. */
export interface HttpCase {
  what: string;
  method: string;
  /** Below /v1. */
  path: string;
  headers: HeaderPatch;
  body?: string;
  status: number;
  error: ErrorCode;
}

const long = (n: number, c = 'x') => c.repeat(n);
/** The same `wso_<key id>_` prefix with one character of the 43-character secret changed. */
const wrongSecret = (key: string): string => {
  const i = key.length - 43;
  return `${key.slice(0, i)}${key[i] === 'A' ? 'B' : 'A'}${key.slice(i + 1)}`;
};
const unknownMember = (n = 27) => `mb_${crypto.randomBytes(32).toString('hex')}`.slice(0, n);

/** Authorization headers that are not a valid key. */
export const authCases = (fx: Fixture): Array<[string, string | null]> => [
  ['Authorization missing', null],
  ['Authorization with the Basic scheme', `Basic ${Buffer.from(`user:${fx.key}`).toString('base64')}`],
  ['Authorization "Bearer" without a token', 'Bearer'],
  ['the key without the Bearer scheme', fx.key],
  ['a malformed token', 'Bearer not-an-api-key'],
  ['a truncated key', `Bearer ${fx.key.slice(0, -1)}`],
  ['the key followed by junk', `Bearer ${fx.key} junk`],
  ['the right key id with a wrong secret', `Bearer ${wrongSecret(fx.key)}`],
  ['a key id that does not exist', `Bearer wso_${'0'.repeat(24)}_${'A'.repeat(43)}`],
  ['a revoked key', `Bearer ${fx.revoked}`],
];

const badBodies: Array<[string, string]> = [
  ['a body that is not JSON', '{"id": '],
  ['a body that is plain text', 'hello'],
  ['a body with single quotes', "{'id': 'x'}"],
  ['a JSON array', '[]'],
  ['a JSON array of an object', '[{}]'],
  ['a JSON string', '"{}"'],
  ['a JSON number', '42'],
  ['a JSON boolean', 'true'],
  ['JSON null', 'null'],
  ['an empty body', ''],
];

/** JSON text of `base` with one more key written literally (so `__proto__` stays an own key). */
function withRawKey(base: unknown, key: string, valueJson: string): string {
  const rest = JSON.stringify(base).slice(1);
  return `{${JSON.stringify(key)}: ${valueJson}${rest === '}' ? '' : ','}${rest}`;
}

export interface CaseGroups {
  /** Every field of the request schema (and the string and cursor rules). */
  fields: HttpCase[];
  /** The body as a whole: JSON, Content-Type, size. */
  format: HttpCase[];
  /** Authorization, Idempotency-Key, Service-Act-As and every other documented header. */
  headers: HttpCase[];
  /** Query parameters and methods. */
  routing: HttpCase[];
  /** Generated field cases the independent validator found valid after all (dropped). */
  dropped: string[];
}

/** Every bad-input case of one operation, derived from the document and the catalogue entry. */
export function casesOf(op: DocOperation, fx: Fixture, base: unknown): CaseGroups {
  const groups: CaseGroups = { fields: [], format: [], headers: [], routing: [], dropped: [] };
  const method = op.method.toUpperCase();
  const c = (what: string, patch: HeaderPatch, body: string | undefined, status: number, error: ErrorCode, path = op.path, m = method): HttpCase => ({
    what: `${op.id}: ${what}`,
    method: m,
    path,
    headers: { ...headersFor(op, fx), ...patch },
    ...(body === undefined ? {} : { body }),
    status,
    error,
  });
  const json = base === undefined ? undefined : JSON.stringify(base);

  if (op.method === 'post' && op.body) {
    const { cases, dropped } = bodyCases(op.body, base);
    groups.dropped = dropped;
    for (const contentType of op.contentTypes) {
      const label = op.contentTypes.length > 1 ? ` [${contentType}]` : '';
      for (const bc of cases) groups.fields.push(c(`${bc.what}${label}`, { 'Content-Type': contentType }, JSON.stringify(bc.body), 400, 'invalid_input'));
    }
    for (const [what, raw] of badBodies) groups.format.push(c(what, {}, raw, 400, 'invalid_json'));
    groups.format.push(c('no body at all', {}, undefined, 400, 'invalid_json'));
    const refusedTypes: Array<string | null> = [null, 'text/plain', 'text/html', 'application/x-www-form-urlencoded', 'application/json; charset=latin1'];
    for (const type of refusedTypes.filter((t) => t === null || !op.contentTypes.includes(t))) {
      groups.format.push(c(`Content-Type ${type ?? 'missing'}`, { 'Content-Type': type }, json, 400, 'invalid_json'));
    }
    groups.format.push(c('an unknown "__proto__" field', {}, withRawKey(base, '__proto__', '{"polluted": true}'), 400, 'invalid_input'));
    groups.format.push(c('an unknown "constructor" field', {}, withRawKey(base, 'constructor', '{}'), 400, 'invalid_input'));
    // Larger than any body limit (1 MB for operations; the collection endpoint documents its own 413).
    const huge = withRawKey(base, 'padding', JSON.stringify(long(1_100_000)));
    groups.format.push(c('a body over the size limit', {}, huge, op.statuses.includes(413) ? 413 : 400, 'invalid_input'));
  }

  if (op.entry) {
    for (const [what, auth] of authCases(fx)) groups.headers.push(c(what, { Authorization: auth }, json, 401, 'invalid_key'));
    for (const h of op.headers) {
      const s = flatten(h.schema);
      if (h.required) groups.headers.push(c(`${h.name} missing`, { [h.name]: null }, json, 400, 'invalid_input'));
      if (typeof s.minLength === 'number' && s.minLength > 0) groups.headers.push(c(`${h.name} shorter than ${s.minLength}`, { [h.name]: long(s.minLength - 1, 'k') }, json, 400, 'invalid_input'));
      if (typeof s.maxLength === 'number') groups.headers.push(c(`${h.name} of ${s.maxLength + 1} characters`, { [h.name]: long(s.maxLength + 1, 'k') }, json, 400, 'invalid_input'));
    }
    if (op.actAs === 'none') {
      groups.headers.push(c('Service-Act-As naming a delegated member (not accepted here)', { 'Service-Act-As': fx.members.active }, json, 400, 'invalid_input'));
      groups.headers.push(c('Service-Act-As empty (not accepted here)', { 'Service-Act-As': '' }, json, 400, 'invalid_input'));
    } else {
      const forbidden: Array<[string, string]> = [
        ['an unknown member', unknownMember()],
        ['an unknown member id of 64 characters', unknownMember(64)],
        ['a disabled member', fx.members.disabled],
        ['a member of another workspace', fx.members.foreign],
        ["a member outside the key's delegation", fx.members.outsider],
      ];
      for (const [what, member] of forbidden) groups.headers.push(c(`Service-Act-As naming ${what}`, { 'Service-Act-As': member }, json, 403, 'forbidden'));
    }
    groups.routing.push(c('an unknown query parameter', {}, json, 400, 'invalid_input', `${op.path}?dry_run=1`));
    // The path exists with another method: 405 method_not_allowed (with Allow naming it).
    if (op.method === 'post') groups.routing.push(c('GET on the operation path', { 'Content-Type': null }, undefined, 405, 'method_not_allowed', op.path, 'GET'));
    else groups.routing.push(c('POST on the path', { 'Content-Type': 'application/json' }, '{}', 405, 'method_not_allowed', op.path, 'POST'));
  }
  return groups;
}

/** Requests to paths and methods no operation has. */
export function routeCases(fx: Fixture): HttpCase[] {
  const some = catalogued.find((o) => o.method === 'post')!;
  const [ns] = some.id.split('.');
  const routes: Array<[string, string, string]> = [
    ['an unknown operation', 'POST', `/operations/${ns}.DeleteEverything`],
    ['an unknown namespace', 'POST', '/operations/billing.ListInvoices'],
    ['an operation id in the wrong case', 'POST', `/operations/${some.id.toLowerCase()}`],
    ['an operation id without a namespace', 'POST', `/operations/${some.id.split('.')[1]}`],
    ['an empty operation id', 'POST', '/operations/'],
    ['a path below an operation', 'POST', `${some.path}/extra`],
    ['PUT on an operation path', 'PUT', some.path],
    ['PATCH on an operation path', 'PATCH', some.path],
    ['DELETE on an operation path', 'DELETE', some.path],
    ['DELETE on /operations', 'DELETE', '/operations'],
    ['GET on an unknown path', 'GET', '/pipelines'],
    ['POST on an unknown path', 'POST', '/pipelines'],
    ['GET on the /v1 root', 'GET', '/'],
    ['GET on an unknown path below /delegation', 'GET', '/delegation'],
  ];
  // An existing path with another method is 405 method_not_allowed; anything else is 404 not_found.
  const existing = new Set<string>(catalogue.map((e) => e.path));
  return routes.map(([what, method, path]) => ({
    what: `${method} ${path}: ${what}`,
    method,
    path,
    headers: { Authorization: `Bearer ${fx.key}`, ...(method === 'GET' ? {} : { 'Content-Type': 'application/json' }) },
    ...(method === 'GET' ? {} : { body: '{}' }),
    ...(existing.has(path) ? { status: 405, error: 'method_not_allowed' as const } : { status: 404, error: 'not_found' as const }),
  }));
}

/** Runs `tasks` with at most `limit` at a time. */
export async function pool<T>(items: readonly T[], limit: number, task: (item: T, i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      await task(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/**
 * Runs the cases (a few at a time) and checks each answer, then checks that nothing was stored; when
 * something was, runs them again one by one to name the culprits. Returns every problem found.
 */
export async function runCases(svc: TestService, fx: Fixture, cases: readonly HttpCase[], concurrency = 6): Promise<string[]> {
  const problems: string[] = [];
  const secrets = [fx.key, fx.revoked, fx.bare];
  const check = async (c: HttpCase) => {
    const res = await send(svc.baseUrl, c.method, c.path, c.headers, c.body);
    try {
      assertErrorBody(res, c.status, c.error, c.what, secrets);
    } catch (err) {
      problems.push((err as Error).message);
    }
  };
  const before = await storedState(svc);
  await pool(cases, concurrency, check);
  const diff = stateDiff(before, await storedState(svc));
  if (diff) {
    problems.push(`stored changes after the cases: ${diff}`);
    for (const c of cases) {
      const b = await storedState(svc);
      await send(svc.baseUrl, c.method, c.path, { ...c.headers, ...(c.headers['Idempotency-Key'] ? { 'Idempotency-Key': `rerun-${crypto.randomUUID()}` } : {}) }, c.body);
      const d = stateDiff(b, await storedState(svc));
      if (d) problems.push(`${c.what}: stored ${d}`);
    }
  }
  return problems;
}

/** Fails with the first problems and their count. */
export function assertNoProblems(problems: readonly string[], total: number): void {
  if (problems.length) assert.fail(`${problems.length} problem(s) in ${total} cases:\n${problems.slice(0, 15).join('\n')}${problems.length > 15 ? '\n...' : ''}`);
}

// ---- Cursors -------------------------------------------------------------------------------------

/** The top-level body fields of `op` whose schema is the shared component `name` (e.g. PageCursor). */
export function fieldsOf(op: DocOperation, name: string): string[] {
  if (!op.body) return [];
  return Object.entries((flatten(op.body).properties ?? {}) as Record<string, { 'x-ref'?: string }>)
    .filter(([, s]) => s['x-ref'] === name)
    .map(([k]) => k);
}

/** A real cursor of one listing, with the body (filters) it continues. */
export interface RealCursor {
  op: DocOperation;
  /** The body of the first page, without the cursor. */
  body: Record<string, unknown>;
  /** The field that takes the cursor. */
  field: string;
  cursor: string;
}

/**
 * A real `next_cursor` of every operation that pages (a PageCursor field), from its first page of
 * one row: the base body first, else the smallest body (the example's interval may hold no data).
 * Operations the fixture gives no second page are listed in `without`.
 */
export async function realCursors(svc: TestService, fx: Fixture): Promise<{ cursors: RealCursor[]; without: string[] }> {
  const cursors: RealCursor[] = [];
  const without: string[] = [];
  for (const op of catalogued) {
    const [field] = fieldsOf(op, 'PageCursor');
    if (!field || !op.body) continue;
    // `cursor` answers `next_cursor` and takes `limit`; a named listing inside a read (`runs_cursor`) answers `runs_next_cursor` and takes `runs_limit`.
    const prefix = field.slice(0, -'cursor'.length);
    const nextField = `${prefix}next_cursor`;
    const limits = prefix ? [`${prefix}limit`] : fieldsOf(op, 'PageLimit');
    const candidates = [baseBody(op, fx.ids), withRealIds(sampleOf(op.body), fx.ids)] as Array<Record<string, unknown>>;
    let found: RealCursor | null = null;
    for (const candidate of candidates) {
      const body: Record<string, unknown> = { ...candidate };
      delete body[field];
      for (const l of limits) body[l] = 1;
      const res = await call(svc, fx, op, body);
      const next = (res.body as Record<string, unknown> | undefined)?.[nextField];
      if (res.status === 200 && typeof next === 'string') {
        found = { op, body, field, cursor: next };
        break;
      }
    }
    if (found) cursors.push(found);
    else without.push(op.id);
  }
  return { cursors, without };
}

/** Splits a cursor into its position (decoded JSON) and signature, or null when it is not `payload.tag`. */
export function openCursor(cursor: string): { position: Record<string, unknown>; payload: string; tag: string } | null {
  const [payload, tag, ...rest] = cursor.split('.');
  if (!payload || !tag || rest.length) return null;
  try {
    return { position: JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')), payload, tag };
  } catch {
    return null;
  }
}

/** The same signature on an edited position (what a client that decodes cursors might try). */
export const reseal = (position: Record<string, unknown>, tag: string): string => `${Buffer.from(JSON.stringify(position)).toString('base64url')}.${tag}`;

/** Edited versions of a real cursor, each of which must be refused: positions out of range, changed text, a broken or missing signature. */
export function cursorEdits(real: RealCursor, others: readonly RealCursor[]): Array<[string, string]> {
  const opened = openCursor(real.cursor);
  if (!opened) throw new Error(`${real.op.id}: next_cursor is not payload.signature: ${real.cursor}`);
  const { position, payload, tag } = opened;
  const out: Array<[string, string]> = [];
  for (const [k, v] of Object.entries(position)) {
    if (typeof v === 'number') {
      for (const n of [1e308, 1.5, 2 ** 63, -(2 ** 63), -1, v + 1]) out.push([`position ${k} edited to ${n}`, reseal({ ...position, [k]: n }, tag)]);
    } else if (typeof v === 'string') {
      for (const [what, s] of [['empty', ''], ['with U+0000', `${v}\u0000`], ['of 3000 characters', long(3000)], ['changed', `${v}x`]] as const) {
        out.push([`position ${k} ${what}`, reseal({ ...position, [k]: s }, tag)]);
      }
    }
    out.push([`position ${k} removed`, reseal(Object.fromEntries(Object.entries(position).filter(([key]) => key !== k)), tag)]);
  }
  out.push(['an extra position field', reseal({ ...position, zz: 1 }, tag)]);
  out.push(['without its signature', payload]);
  out.push(['with an empty signature', `${payload}.`]);
  out.push(['with its signature truncated', real.cursor.slice(0, -1)]);
  out.push(['with a changed signature', `${payload}.${tag[0] === 'A' ? 'B' : 'A'}${tag.slice(1)}`]);
  out.push(['with junk appended', `${real.cursor}.x`]);
  out.push(['with its payload truncated', `${payload.slice(0, -2)}.${tag}`]);
  for (const other of others) if (other.op.id !== real.op.id) out.push([`of another operation (${other.op.id})`, other.cursor]);
  return out;
}
