import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { listRecordEvents } from '../../db/queries/events.ts';
import type { RequestBody, components } from '../../generated/client.ts';
import { type ApplyResult, revokeKey } from '../../server/admin.ts';
import type { ErrorCode } from '../../server/errors.ts';
import { type BodyCase, type FieldRule, type HeaderPatch, type Path, type RawResponse, assertErrorBody, fieldCases, send } from '../support/badInput.ts';
import { acme, stages } from '../support/fixtures.ts';
import { forEachDatabase, type TestService } from '../support/service.ts';

type SalesPipeline = components['schemas']['SalesPipeline'];
type Stage = components['schemas']['Stage'];

const queries = ['workspace.ListBundles', 'workspace.ListApps', 'customers.ListSalesPipelines', 'customers.GetSalesPipeline'] as const;
const commands = ['customers.CreateSalesPipeline', 'customers.UpsertSalesPipeline', 'customers.UpdateSalesPipeline', 'customers.DeleteSalesPipeline'] as const;
type Op = (typeof queries)[number] | (typeof commands)[number];
const operations: readonly Op[] = [...queries, ...commands];
const isCommand = (op: Op): boolean => (commands as readonly string[]).includes(op);
const gets = ['/operations', '/delegation/members'] as const;

/** What the cases run against: a workspace with two shared pipelines, another workspace, a revoked key. */
interface Fx {
  ws: ApplyResult;
  other: ApplyResult;
  p: SalesPipeline;
  q: SalesPipeline;
}

const threeStages: Stage[] = [
  { id: 'due', label: 'Renewal due', kind: 'open', probability: 70, tone: 'blue' },
  { id: 'won', label: 'Renewed', kind: 'won', probability: 100, tone: 'accent' },
  { id: 'lost', label: 'Churned', kind: 'lost', probability: 0, tone: 'warn' },
];
/** A stage list that keeps every stage rule, with `n` stages. */
const manyStages = (n: number): Stage[] => [
  ...Array.from({ length: n - 2 }, (_, i): Stage => ({ id: `s${i}`, label: `Stage ${i}`, kind: 'open' })),
  { id: 'won', label: 'Won', kind: 'won' },
  { id: 'lost', label: 'Lost', kind: 'lost' },
];

/**
 * A valid body per operation that, were it accepted, would change or reveal the fixture records: the
 * bad cases differ from it in exactly one place, so a case the service wrongly accepts shows up as a
 * changed record.
 */
const bases = (fx: Fx): { [K in Op]: RequestBody<K> } => ({
  'workspace.ListBundles': {},
  'workspace.ListApps': {},
  'customers.ListSalesPipelines': { limit: 10, updated_since: 0, updated_before: 4_102_444_800_000 },
  'customers.GetSalesPipeline': { id: fx.p.id },
  'customers.CreateSalesPipeline': { data: { name: 'Created by bad input', stages: stages.basic, is_default: true }, private: false },
  'customers.UpsertSalesPipeline': {
    data: { name: fx.p.data.name, stages: threeStages },
    unset: ['is_default'],
    expected: { name: fx.p.data.name, stages: stages.basic, is_default: true },
    private: false,
  },
  'customers.UpdateSalesPipeline': {
    id: fx.p.id,
    data: { name: 'Renamed by bad input', stages: threeStages },
    unset: ['is_default'],
    expected: { name: fx.p.data.name, stages: stages.basic, is_default: true },
  },
  'customers.DeleteSalesPipeline': { id: fx.q.id, expected: { name: fx.q.data.name, stages: stages.basic, is_default: false } },
});

// ---- Field rules, straight from openapi/components/schemas --------------------------------------

const long = (n: number, c = 'x') => c.repeat(n);
const nameBad = [['empty (minLength 1)', ''], ['of 201 characters (maxLength 200)', long(201)]] as const;
const idBad = [['empty (minLength 1)', ''], ['of 65 characters (maxLength 64)', long(65)]] as const;
const markers = [
  ['an absence marker without $absent', {}],
  ['an absence marker {"$absent": false}', { $absent: false }],
  ['an absence marker {"$absent": "true"}', { $absent: 'true' }],
  ['an absence marker {"$absent": null}', { $absent: null }],
  ['an absence marker {"$absent": 1}', { $absent: 1 }],
  ['an absence marker with an extra key', { $absent: true, colour: 'red' }],
  ['an absence marker with only an unknown key', { $present: true }],
] as const;

const stageRules = (at: Path): FieldRule[] => [
  { path: at, accepts: ['object'], closed: true },
  {
    path: [...at, 'id'],
    accepts: ['string'],
    required: true,
    bad: [
      ['empty', ''],
      ['of 65 characters', long(65, 'a')],
      ['with a space', 'lead stage'],
      ['with a dot', 'lead.v2'],
      ['with a slash', 'lead/2'],
      ['with a non-ASCII letter', 'étape'],
      ['with a trailing newline', 'lead\n'],
    ],
  },
  { path: [...at, 'label'], accepts: ['string'], required: true, bad: [['empty', ''], ['of 201 characters', long(201)]] },
  { path: [...at, 'kind'], accepts: ['string'], required: true, bad: [['not in the enum', 'closed'], ['in the wrong case', 'Open'], ['empty', '']] },
  { path: [...at, 'probability'], accepts: ['integer'], bad: [['below 0', -1], ['above 100', 101]] },
  { path: [...at, 'tone'], accepts: ['string'], bad: [['not in the enum', 'red'], ['in the wrong case', 'Gray'], ['empty', '']] },
];
const stageListBad = [
  ['empty (minItems 2)', []],
  ['with one stage (minItems 2)', [{ id: 'won', label: 'Won', kind: 'won' }]],
  ['with 101 stages (maxItems 100)', manyStages(101)],
] as const;
const dataRules = (required: boolean, nameRequired: boolean): FieldRule[] => [
  { path: ['data'], accepts: ['object'], required, closed: true },
  { path: ['data', 'name'], accepts: ['string'], required: nameRequired, bad: nameBad },
  { path: ['data', 'stages'], accepts: ['array'], bad: stageListBad },
  ...stageRules(['data', 'stages', 0]),
  { path: ['data', 'is_default'], accepts: ['boolean'], bad: [['as the string "true"', 'true']] },
];
const unsetRules: FieldRule[] = [
  {
    path: ['unset'],
    accepts: ['array'],
    bad: [
      ['with a duplicate (uniqueItems)', ['is_default', 'is_default']],
      ['with a duplicate among others', ['stages', 'is_default', 'stages']],
      ['with four items (maxItems 3)', ['stages', 'is_default', 'stages', 'is_default']],
    ],
  },
  { path: ['unset', 0], accepts: ['string'], bad: [['not a data key', 'colour'], ['in the wrong case', 'Is_default'], ['empty', ''], ['a data. path', 'data.is_default']] },
];
const expectedRules: FieldRule[] = [
  { path: ['expected'], accepts: ['object'], closed: true },
  { path: ['expected', 'name'], accepts: ['string', 'object'], bad: [...nameBad, ...markers] },
  { path: ['expected', 'stages'], accepts: ['array', 'object'], bad: [...stageListBad, ...markers] },
  ...stageRules(['expected', 'stages', 0]),
  { path: ['expected', 'is_default'], accepts: ['boolean', 'object'], bad: [['as the string "true"', 'true'], ...markers] },
];
const top: FieldRule = { path: [], accepts: ['object'], closed: true };
const privateRule: FieldRule = { path: ['private'], accepts: ['boolean'], bad: [['as the string "false"', 'false']] };

const rules: Record<Op, FieldRule[]> = {
  'workspace.ListBundles': [top],
  'workspace.ListApps': [top],
  'customers.ListSalesPipelines': [
    top,
    { path: ['limit'], accepts: ['integer'], bad: [['0 (minimum 1)', 0], ['101 (maximum 100)', 101], ['negative', -1]] },
    { path: ['cursor'], accepts: ['string'], bad: [['empty (minLength 1)', ''], ['of 501 characters (maxLength 500)', long(501)]] },
    { path: ['updated_since'], accepts: ['integer'], bad: [['negative (minimum 0)', -1], ['above the maximum 8.64e15', 8_640_000_000_000_001], ['1e20', 1e20], ['the largest bigint', 9223372036854775807]] },
    { path: ['updated_before'], accepts: ['integer'], bad: [['negative (minimum 0)', -1], ['above the maximum 8.64e15', 8_640_000_000_000_001], ['1e20', 1e20]] },
  ],
  'customers.GetSalesPipeline': [top, { path: ['id'], accepts: ['string'], required: true, bad: idBad }],
  'customers.CreateSalesPipeline': [top, ...dataRules(true, true), privateRule],
  'customers.UpsertSalesPipeline': [top, ...dataRules(true, true), ...unsetRules, ...expectedRules, privateRule],
  'customers.UpdateSalesPipeline': [top, { path: ['id'], accepts: ['string'], required: true, bad: idBad }, ...dataRules(false, false), ...unsetRules, ...expectedRules],
  'customers.DeleteSalesPipeline': [top, { path: ['id'], accepts: ['string'], required: true, bad: idBad }, ...expectedRules],
};

/** Bad input only the operation itself can see (documented as 400 invalid_input). */
const [lead, proposal, won, lost] = stages.basic as [Stage, Stage, Stage, Stage];
const semantic: Partial<Record<Op, Array<[string, (base: any) => unknown]>>> = {
  'customers.ListSalesPipelines': [
    ['a cursor that is not one', (b) => ({ ...b, cursor: 'not-a-cursor' })],
    ['a cursor of 500 characters that is not one', (b) => ({ ...b, cursor: long(500, 'A') })],
    ['a cursor of another listing', (b) => ({ ...b, cursor: Buffer.from(JSON.stringify({ u: 0, i: 'pl_x', f: 'other' })).toString('base64url') })],
  ],
  'customers.CreateSalesPipeline': [
    ['stage ids used twice', (b) => ({ ...b, data: { ...b.data, stages: [lead, { ...proposal, id: 'lead' }, won, lost] } })],
    ['the won stage not among the last two', (b) => ({ ...b, data: { ...b.data, stages: [won, lead, proposal, lost] } })],
    ['two won stages', (b) => ({ ...b, data: { ...b.data, stages: [lead, { ...won, id: 'won2' }, won, lost] } })],
    ['a won stage with probability 90', (b) => ({ ...b, data: { ...b.data, stages: [lead, { ...won, probability: 90 }, lost] } })],
    ['private: true without Service-Act-As', (b) => ({ ...b, data: { ...b.data, is_default: false }, private: true })],
  ],
  'customers.UpsertSalesPipeline': [
    ['unset name', (b) => ({ ...b, unset: ['name'] })],
    ['stages both set and unset', (b) => ({ ...b, unset: ['stages'] })],
    ['lost stage with probability 5', (b) => ({ ...b, data: { ...b.data, stages: [lead, won, { ...lost, probability: 5 }] } })],
    ['private: true without Service-Act-As', (b) => ({ ...b, private: true })],
  ],
  'customers.UpdateSalesPipeline': [
    ['unset name', (b) => ({ ...b, unset: ['name'] })],
    ['stages both set and unset', (b) => ({ ...b, unset: ['stages'] })],
    ['the lost stage before an open stage', (b) => ({ ...b, data: { ...b.data, stages: [lead, lost, proposal, won] } })],
  ],
};

// ---- The case table --------------------------------------------------------------------------------

interface Case {
  what: string;
  method?: string;
  /** Path below /v1; default `/operations/<op>`. */
  path?: string;
  op?: Op;
  /** JSON body (default: the operation's valid base body). */
  body?: (fx: Fx) => unknown;
  /** Raw body text instead of JSON. */
  raw?: (fx: Fx) => string;
  headers?: (fx: Fx) => HeaderPatch;
  status: number;
  error: ErrorCode;
}

const secretOf = (fx: Fx) => fx.ws.keys.ci!.secret;
/** The same `wso_<key id>_` prefix with one character of the 43-character secret changed. */
const wrongSecret = (key: string): string => {
  const i = key.length - 43;
  return `${key.slice(0, i)}${key[i] === 'A' ? 'B' : 'A'}${key.slice(i + 1)}`;
};
const unknownMember = (n = 27) => `mb_${crypto.randomBytes(32).toString('hex')}`.slice(0, n);
const authCases: Array<[string, (fx: Fx) => string | null]> = [
  ['Authorization missing', () => null],
  ['Authorization with the Basic scheme', (fx) => `Basic ${Buffer.from(`user:${secretOf(fx)}`).toString('base64')}`],
  ['Authorization "Bearer" without a token', () => 'Bearer'],
  ['the key without the Bearer scheme', (fx) => secretOf(fx)],
  ['a malformed token', () => 'Bearer not-an-api-key'],
  ['a truncated key', (fx) => `Bearer ${secretOf(fx).slice(0, -1)}`],
  ['the key followed by junk', (fx) => `Bearer ${secretOf(fx)} junk`],
  ['the right key id with a wrong secret', (fx) => `Bearer ${wrongSecret(secretOf(fx))}`],
  ['a key id that does not exist', () => `Bearer wso_${'0'.repeat(24)}_${'A'.repeat(43)}`],
  ['a revoked key', (fx) => `Bearer ${fx.ws.keys.doomed!.secret}`],
];
const actAsForbidden: Array<[string, (fx: Fx) => string]> = [
  ['an unknown member', () => unknownMember()],
  ['an unknown member id of 64 characters', () => unknownMember(64)],
  ['a disabled member', (fx) => fx.ws.members.max!],
  ['a member of another workspace', (fx) => fx.other.members.olga!],
  ["a member outside the key's delegation", (fx) => fx.ws.members.bob!],
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

function buildCases(): Case[] {
  const out: Case[] = [];
  for (const op of operations) {
    const at = (what: string, c: Omit<Case, 'what' | 'op'>) => out.push({ what: `${op}: ${what}`, op, ...c });
    // Fields: every rule's variants, evaluated against the fixture at run time (ids are not known yet).
    const probe = fieldCases(bases(probeFx)[op], rules[op]);
    probe.forEach((pc, i) => at(pc.what, { body: (fx) => (fieldCases(bases(fx)[op], rules[op])[i] as BodyCase).body, status: 400, error: 'invalid_input' }));
    for (const [what, make] of semantic[op] ?? []) at(what, { body: (fx) => make(bases(fx)[op]), status: 400, error: 'invalid_input' });
    at('an unknown "__proto__" field', { raw: (fx) => withRawKey(bases(fx)[op], '__proto__', '{"polluted": true}'), status: 400, error: 'invalid_input' });
    at('an unknown "constructor" field', { raw: (fx) => withRawKey(bases(fx)[op], 'constructor', '{}'), status: 400, error: 'invalid_input' });
    // The body itself.
    for (const [what, raw] of badBodies) at(what, { raw: () => raw, status: 400, error: 'invalid_json' });
    at('no body at all', { body: () => undefined, status: 400, error: 'invalid_json' });
    for (const [what, type] of [['Content-Type missing', null], ['Content-Type text/plain', 'text/plain'], ['Content-Type application/x-www-form-urlencoded', 'application/x-www-form-urlencoded']] as const) {
      at(what, { headers: () => ({ 'Content-Type': type }), status: 400, error: 'invalid_json' });
    }
    at('a form-encoded body', { raw: () => 'id=x', headers: () => ({ 'Content-Type': 'application/x-www-form-urlencoded' }), status: 400, error: 'invalid_json' });
    // Headers.
    for (const [what, auth] of authCases) at(what, { headers: (fx) => ({ Authorization: auth(fx) }), status: 401, error: 'invalid_key' });
    if (isCommand(op)) {
      at('Idempotency-Key missing', { headers: () => ({ 'Idempotency-Key': null }), status: 400, error: 'invalid_input' });
      at('Idempotency-Key empty', { headers: () => ({ 'Idempotency-Key': '' }), status: 400, error: 'invalid_input' });
      at('Idempotency-Key of 201 characters', { headers: () => ({ 'Idempotency-Key': long(201, 'k') }), status: 400, error: 'invalid_input' });
    }
    at('Service-Act-As empty', { headers: () => ({ 'Service-Act-As': '' }), status: 400, error: 'invalid_input' });
    at('Service-Act-As of 65 characters', { headers: () => ({ 'Service-Act-As': unknownMember(65) }), status: 400, error: 'invalid_input' });
    for (const [what, member] of actAsForbidden) at(`Service-Act-As naming ${what}`, { headers: (fx) => ({ 'Service-Act-As': member(fx) }), status: 403, error: 'forbidden' });
    // Routing.
    at('an unknown query parameter', { path: `/operations/${op}?dry_run=1`, status: 400, error: 'invalid_input' });
    at('GET on the operation path', { method: 'GET', status: 404, error: 'not_found' });
  }
  for (const path of gets) {
    const at = (what: string, c: Omit<Case, 'what' | 'method'>) => out.push({ what: `GET ${path}: ${what}`, method: 'GET', path, ...c });
    for (const [what, auth] of authCases) at(what, { headers: (fx) => ({ Authorization: auth(fx) }), status: 401, error: 'invalid_key' });
    at('Service-Act-As naming a delegated member', { headers: (fx) => ({ 'Service-Act-As': fx.ws.members.ada! }), status: 400, error: 'invalid_input' });
    at('Service-Act-As naming an unknown member', { headers: () => ({ 'Service-Act-As': unknownMember() }), status: 400, error: 'invalid_input' });
    at('Service-Act-As empty', { headers: () => ({ 'Service-Act-As': '' }), status: 400, error: 'invalid_input' });
    at('Service-Act-As of 65 characters', { headers: () => ({ 'Service-Act-As': unknownMember(65) }), status: 400, error: 'invalid_input' });
    at('an unknown query parameter', { path: `${path}?limit=5`, status: 400, error: 'invalid_input' });
    out.push({ what: `POST ${path}: wrong method`, method: 'POST', path, body: () => ({}), status: 404, error: 'not_found' });
  }
  const routes: Array<[string, string, string]> = [
    ['an unknown operation', 'POST', '/operations/customers.DeleteEverything'],
    ['an unknown namespace', 'POST', '/operations/billing.ListInvoices'],
    ['an operation id in the wrong case', 'POST', '/operations/customers.getsalespipeline'],
    ['an operation id without a namespace', 'POST', '/operations/GetSalesPipeline'],
    ['an empty operation id', 'POST', '/operations/'],
    ['a path below an operation', 'POST', '/operations/customers.GetSalesPipeline/extra'],
    ['PUT on an operation path', 'PUT', '/operations/customers.CreateSalesPipeline'],
    ['PATCH on an operation path', 'PATCH', '/operations/customers.UpdateSalesPipeline'],
    ['DELETE on an operation path', 'DELETE', '/operations/customers.DeleteSalesPipeline'],
    ['DELETE on /operations', 'DELETE', '/operations'],
    ['GET on an unknown path', 'GET', '/pipelines'],
    ['POST on an unknown path', 'POST', '/pipelines'],
    ['GET on the /v1 root', 'GET', '/'],
    ['GET on an unknown path below /delegation', 'GET', '/delegation'],
  ];
  for (const [what, method, path] of routes) {
    out.push({ what: `${method} ${path}: ${what}`, method, path, ...(method === 'GET' ? {} : { body: () => ({}) }), status: 404, error: 'not_found' });
  }
  return out;
}

/** JSON text of `base` with one more key written literally (so `__proto__` stays an own key). */
function withRawKey(base: unknown, key: string, valueJson: string): string {
  const rest = JSON.stringify(base).slice(1);
  return `{${JSON.stringify(key)}: ${valueJson}${rest === '}' ? '' : ','}${rest}`;
}

/** Placeholder ids, only to count and name the field cases when the suite is defined. */
const probeFx: Fx = {
  ws: { workspace_id: 'ws_probe', members: {}, bundles: {}, collect_keys: {}, apps: {}, keys: {} },
  other: { workspace_id: 'ws_probe', members: {}, bundles: {}, collect_keys: {}, apps: {}, keys: {} },
  p: { id: 'pl_p', created_at: 0, updated_at: 0, created_by: null, private: false, data: { name: 'P', stages: stages.basic, is_default: true } },
  q: { id: 'pl_q', created_at: 0, updated_at: 0, created_by: null, private: false, data: { name: 'Q', stages: stages.basic, is_default: false } },
};

// ---- Running a case --------------------------------------------------------------------------------

/** A workspace with two shared pipelines (P the default), a second workspace, and a revoked key. */
async function makeFixture(svc: TestService): Promise<Fx> {
  const spec = acme();
  spec.keys = {
    ...spec.keys,
    doomed: { name: 'Revoked below', operations: ['customers.*', 'workspace.*'], resources: { 'core:SalesPipeline': ['read', 'write'] }, delegation: 'all' },
  };
  const ws = await svc.apply(spec);
  const other = await svc.apply(acme());
  const api = svc.client(ws.keys.ci!.secret);
  const p = (await api.customers.CreateSalesPipeline({ data: { name: 'Target P', stages: stages.basic, is_default: true } })).data!.item;
  const q = (await api.customers.CreateSalesPipeline({ data: { name: 'Target Q', stages: stages.basic, is_default: false } })).data!.item;
  // Use the doomed key once (so the service has it cached), then revoke it.
  assert.equal((await svc.client(ws.keys.doomed!.secret).customers.ListSalesPipelines({})).response.status, 200);
  await revokeKey(svc.db, svc.clock, ws.keys.doomed!.id);
  const fx = { ws, other, p, q };
  assert.deepEqual((await pipelines(svc, fx)).map((x) => x.id).sort(), [p.id, q.id].sort());
  return fx;
}

async function call(svc: TestService, fx: Fx, c: Omit<Case, 'status' | 'error'>): Promise<{ res: RawResponse; idempotencyKey: string | null }> {
  const method = c.method ?? 'POST';
  const headers: HeaderPatch = { Authorization: `Bearer ${secretOf(fx)}` };
  if (method !== 'GET') headers['Content-Type'] = 'application/json';
  if (c.op && isCommand(c.op)) headers['Idempotency-Key'] = `bad-input-${crypto.randomUUID()}`;
  Object.assign(headers, c.headers?.(fx));
  let body: string | undefined;
  if (c.raw) body = c.raw(fx);
  else if (c.body) {
    const json = c.body(fx);
    body = json === undefined ? undefined : JSON.stringify(json);
  } else if (method !== 'GET' && c.op) body = JSON.stringify(bases(fx)[c.op]);
  const res = await send(svc.baseUrl, method, c.path ?? `/operations/${c.op}`, headers, body);
  return { res, idempotencyKey: headers['Idempotency-Key'] ?? null };
}

/** Every pipeline the fixture workspace holds, read through the API. */
async function pipelines(svc: TestService, fx: Fx): Promise<SalesPipeline[]> {
  const res = await svc.client(secretOf(fx)).customers.ListSalesPipelines({ limit: 100 });
  assert.equal(res.response.status, 200);
  return res.data!.items;
}

async function receiptCount(svc: TestService, where: string, param: string): Promise<number> {
  const row = await svc.db.sql.one<{ n: number | string }>(`SELECT COUNT(*) AS n FROM idempotency_receipts WHERE ${where}`, [param]);
  return Number(row?.n ?? 0);
}

const cases = buildCases();

forEachDatabase('bad input', (svc) => {
  describe('is refused with the documented {error, message}, and changes nothing', () => {
    let fx: Fx;
    let baseline: { pipelines: SalesPipeline[]; events: number; receipts: number };

    before(async () => {
      fx = await makeFixture(svc());
      baseline = {
        pipelines: await pipelines(svc(), fx),
        events: (await listRecordEvents(svc().db.sql, fx.ws.workspace_id)).length,
        receipts: await receiptCount(svc(), 'scope LIKE ?', `${fx.ws.keys.ci!.id}:%`),
      };
    });

    // Keep the frozen test clock moving so ~1000 requests per key stay inside the rate limit.
    beforeEach(() => svc().clock.advance(10));

    for (const c of cases) {
      it(c.what, async () => {
        const command = c.op !== undefined && isCommand(c.op);
        const prior = command ? await pipelines(svc(), fx) : null;
        const { res, idempotencyKey } = await call(svc(), fx, c);
        assertErrorBody(res, c.status, c.error, c.what, [fx.ws.keys.ci!.secret, fx.ws.keys.doomed!.secret]);
        if (prior) {
          assert.deepEqual(await pipelines(svc(), fx), prior, `${c.what}: the stored pipelines changed`);
          if (idempotencyKey) assert.equal(await receiptCount(svc(), 'idem_key = ?', idempotencyKey), 0, `${c.what}: an idempotency receipt was stored`);
        }
      });
    }

    it('left every pipeline, change event and idempotency receipt as it was', async () => {
      const api = svc().client(fx.ws.keys.ci!.secret);
      assert.deepEqual(await pipelines(svc(), fx), baseline.pipelines);
      for (const x of [fx.p, fx.q]) assert.deepEqual((await api.customers.GetSalesPipeline({ id: x.id })).data?.item, x);
      assert.equal((await listRecordEvents(svc().db.sql, fx.ws.workspace_id)).length, baseline.events);
      assert.equal(await receiptCount(svc(), 'scope LIKE ?', `${fx.ws.keys.ci!.id}:%`), baseline.receipts);
    });
  });

  describe('control: the valid bodies and headers every bad case starts from are accepted', () => {
    beforeEach(() => svc().clock.advance(10));
    for (const op of operations) {
      it(`${op}: the base request answers 200${isCommand(op) ? ' and changes the pipelines' : ''}`, async () => {
        const fx = await makeFixture(svc());
        const prior = await pipelines(svc(), fx);
        const { res } = await call(svc(), fx, { what: 'control', op });
        assert.equal(res.status, 200, `${op}: ${res.text.slice(0, 300)}`);
        if (isCommand(op)) assert.notDeepEqual(await pipelines(svc(), fx), prior);
      });
    }
  });

  describe('leaves the Idempotency-Key of a refused command usable', () => {
    let fx: Fx;
    before(async () => {
      const ws = await svc().apply(acme());
      const api = svc().client(ws.keys.ci!.secret);
      const p = (await api.customers.CreateSalesPipeline({ data: { name: 'Keyed P', stages: stages.basic } })).data!.item;
      const q = (await api.customers.CreateSalesPipeline({ data: { name: 'Keyed Q', stages: stages.basic, is_default: false } })).data!.item;
      fx = { ws, other: ws, p, q };
    });
    beforeEach(() => svc().clock.advance(10));

    const valid: { [K in (typeof commands)[number]]: (fx: Fx, n: number) => RequestBody<K> } = {
      'customers.CreateSalesPipeline': (_fx, n) => ({ data: { name: `Created after a refusal ${n}`, stages: threeStages } }),
      'customers.UpsertSalesPipeline': (_fx, n) => ({ data: { name: `Upserted after a refusal ${n}` } }),
      'customers.UpdateSalesPipeline': (fx, n) => ({ id: fx.p.id, data: { name: `Updated after a refusal ${n}` } }),
      'customers.DeleteSalesPipeline': (fx) => ({ id: fx.q.id }),
    };
    /** A schema-valid body that breaks a rule only the operation checks (Delete has none). */
    const semanticRefusal = (op: Op, body: any): unknown =>
      op === 'customers.CreateSalesPipeline' ? { data: { ...body.data, stages: [lead, { ...proposal, id: 'lead' }, won, lost] } } : { ...body, unset: ['name'] };
    type Refusal = [string, number, ErrorCode, (op: Op, fx: Fx, body: any) => { raw?: string; body?: unknown; headers?: HeaderPatch }, Op[]?];
    const refusals: Refusal[] = [
      ['a body that is not JSON', 400, 'invalid_json', () => ({ raw: '{' })],
      ['Content-Type text/plain', 400, 'invalid_json', (_op, _fx, body) => ({ body, headers: { 'Content-Type': 'text/plain' } })],
      ['an unknown field', 400, 'invalid_input', (_op, _fx, body) => ({ body: { ...body, colour: 'red' } })],
      ['a field of the wrong type', 400, 'invalid_input', (op, _fx, body) => ({ body: op === 'customers.DeleteSalesPipeline' ? { id: 42 } : { ...body, data: { ...body.data, name: 42 } } })],
      ['unset with a duplicate', 400, 'invalid_input', (_op, _fx, body) => ({ body: { ...body, unset: ['stages', 'stages'] } }), ['customers.UpsertSalesPipeline', 'customers.UpdateSalesPipeline']],
      ['a rule only the operation checks', 400, 'invalid_input', (op, _fx, body) => ({ body: semanticRefusal(op, body) }), ['customers.CreateSalesPipeline', 'customers.UpsertSalesPipeline', 'customers.UpdateSalesPipeline']],
      ['Service-Act-As naming a disabled member', 403, 'forbidden', (_op, fx, body) => ({ body, headers: { 'Service-Act-As': fx.ws.members.max! } })],
      ['a wrong secret', 401, 'invalid_key', (_op, fx, body) => ({ body, headers: { Authorization: `Bearer ${wrongSecret(secretOf(fx))}` } })],
    ];
    let n = 0;
    for (const op of commands) {
      for (const [what, status, error, make, only] of refusals) {
        if (only && !only.includes(op)) continue;
        it(`${op}: after ${what}, the same key runs the valid request once`, async () => {
          n += 1;
          const key = `retry-${crypto.randomUUID()}`;
          const good = valid[op](fx, n);
          const bad = make(op, fx, good);
          const headers: HeaderPatch = { Authorization: `Bearer ${secretOf(fx)}`, 'Content-Type': 'application/json', 'Idempotency-Key': key, ...bad.headers };
          const refused = await send(svc().baseUrl, 'POST', `/operations/${op}`, headers, bad.raw ?? JSON.stringify(bad.body));
          assertErrorBody(refused, status, error, `${op}: ${what}`);
          assert.equal(await receiptCount(svc(), 'idem_key = ?', key), 0, 'a receipt was stored for the refused request');
          const goodHeaders: HeaderPatch = { Authorization: `Bearer ${secretOf(fx)}`, 'Content-Type': 'application/json', 'Idempotency-Key': key };
          const first = await send(svc().baseUrl, 'POST', `/operations/${op}`, goodHeaders, JSON.stringify(good));
          assert.equal(first.status, 200, `the valid request with the same key: ${first.status} ${first.text}`);
          assert.equal(first.headers.get('Idempotency-Replayed'), null, 'the valid request was answered from a receipt');
          const again = await send(svc().baseUrl, 'POST', `/operations/${op}`, goodHeaders, JSON.stringify(good));
          assert.equal(again.status, 200);
          assert.equal(again.headers.get('Idempotency-Replayed'), 'true');
          assert.deepEqual(again.body, first.body);
        });
      }
    }
  });

  describe('accepts input at the documented edges', () => {
    let fx: Fx;
    before(async () => {
      const ws = await svc().apply(acme());
      const api = svc().client(ws.keys.ci!.secret);
      const p = (await api.customers.CreateSalesPipeline({ data: { name: 'Edge P', stages: stages.basic } })).data!.item;
      fx = { ws, other: ws, p, q: p };
    });
    beforeEach(() => svc().clock.advance(10));

    /** Accepted requests (200), or for an absent record of valid id length, 404 not_found; bodies typed by the generated client. */
    interface Edge {
      what: string;
      op: Op;
      body: (fx: Fx) => unknown;
      headers?: (fx: Fx) => HeaderPatch;
      absent?: true;
    }
    const edge =
      <K extends Op>(op: K) =>
      (what: string, body: (fx: Fx) => RequestBody<K>, more: Pick<Edge, 'headers' | 'absent'> = {}): Edge => ({ op, what, body, ...more });
    const contentType = (type: string) => ({ headers: () => ({ 'Content-Type': type }) });
    const edges: Edge[] = [
      edge('customers.GetSalesPipeline')('Content-Type application/json; charset=utf-8 (query)', (fx) => ({ id: fx.p.id }), contentType('application/json; charset=utf-8')),
      edge('customers.CreateSalesPipeline')('Content-Type application/json; charset=utf-8 (command)', () => ({ data: { name: 'charset' } }), contentType('application/json; charset=utf-8')),
      edge('workspace.ListBundles')('Content-Type application/json;charset=UTF-8', () => ({}), contentType('application/json;charset=UTF-8')),
      edge('customers.CreateSalesPipeline')('an Idempotency-Key of 200 characters', () => ({ data: { name: 'key 200' } }), { headers: () => ({ 'Idempotency-Key': long(200, 'k') }) }),
      edge('customers.DeleteSalesPipeline')('an Idempotency-Key of 1 character', () => ({ id: 'pl_absent' }), { headers: () => ({ 'Idempotency-Key': 'k' }) }),
      edge('workspace.ListApps')('the Bearer scheme in lower case', () => ({}), { headers: (fx) => ({ Authorization: `bearer ${secretOf(fx)}` }) }),
      edge('customers.ListSalesPipelines')('limit 1', () => ({ limit: 1 })),
      edge('customers.ListSalesPipelines')('limit 100', () => ({ limit: 100 })),
      edge('customers.ListSalesPipelines')('updated_since 0 and updated_before the documented maximum 8.64e15', () => ({ updated_since: 0, updated_before: 8_640_000_000_000_000 })),
      edge('customers.ListSalesPipelines')('updated_since at the documented maximum', () => ({ updated_since: 8_640_000_000_000_000 })),
      edge('customers.GetSalesPipeline')('an id of 64 characters (absent: 404, not 400)', () => ({ id: long(64, 'p') }), { absent: true }),
      edge('customers.CreateSalesPipeline')('a name and a label of 200 characters, a stage id of 64 characters and 100 stages', () => ({
        data: { name: long(200, 'n'), stages: manyStages(100).map((s, i) => (i === 0 ? { ...s, id: long(64, 'a'), label: long(200, 'l') } : s)) },
      })),
      edge('customers.UpsertSalesPipeline')('unset of every optional key and only absence markers in expected', () => ({
        data: { name: 'Fresh edge' },
        unset: ['stages', 'is_default'],
        expected: { stages: { $absent: true }, is_default: { $absent: true } },
      })),
      edge('customers.UpdateSalesPipeline')('an empty unset and an empty expected', (fx) => ({ id: fx.p.id, unset: [], expected: {} })),
    ];
    for (const e of edges) {
      it(`${e.op}: ${e.what}`, async () => {
        const headers: HeaderPatch = { Authorization: `Bearer ${secretOf(fx)}`, 'Content-Type': 'application/json' };
        if (isCommand(e.op)) headers['Idempotency-Key'] = crypto.randomUUID();
        Object.assign(headers, e.headers?.(fx));
        const res = await send(svc().baseUrl, 'POST', `/operations/${e.op}`, headers, JSON.stringify(e.body(fx)));
        if (e.absent) assertErrorBody(res, 404, 'not_found', e.what);
        else assert.equal(res.status, 200, `${e.what}: got ${res.status} ${res.text.slice(0, 300)}`);
      });
    }
  });
});
