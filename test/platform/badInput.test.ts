import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { createService } from '../../app.ts';
import { openDatabase } from '../../db/database.ts';
import type { RequestBody, components } from '../../generated/client.ts';
import type { ErrorCode } from '../../server/errors.ts';
import {
  assertErrorBody,
  assertNoProblems,
  baseBody,
  call,
  casesOf,
  cursorEdits,
  fieldsOf,
  type Fixture,
  type HeaderPatch,
  type HttpCase,
  headersFor,
  makeFixture,
  type RealCursor,
  realCursors,
  recordsFor,
  routeCases,
  runCases,
  send,
  stateDiff,
  storedState,
} from '../support/badInput.ts';
import { stages } from '../support/fixtures.ts';
import { bodyCases, catalogued, type DocOperation, docOperations, fits, flatten, sampleOf, type Schema, withRealIds } from '../support/requestSchema.ts';
import { forEachDatabase, type TestService } from '../support/service.ts';

/**
 * Bad input, generated from the document: for every operation (catalogued now or later, and the
 * collection endpoint), every field of its request schema, every header rule, the body format and the
 * routing, each refused with exactly the documented status and `{error, message}` and storing
 * nothing. Then what a schema cannot say: edited cursors, a refused command's Idempotency-Key staying
 * usable, and the sales pipeline rules only the operation checks.
 */

/** Operations with bad-input cases: the catalogue's, and the documented collection endpoint that takes a body. */
const operations: readonly DocOperation[] = [...catalogued, ...docOperations.filter((o) => o.kind === 'collection' && o.method === 'post' && o.body)];
const commands = catalogued.filter((o) => o.kind === 'command');
const groupNames = ['fields', 'format', 'headers', 'routing'] as const;

/** Placeholder keys and ids, only to count and name the cases when the suite is defined. */
const probe: Fixture = {
  ws: { workspace_id: 'ws_probe', members: {}, bundles: {}, collect_keys: {}, apps: {}, keys: {} },
  other: { workspace_id: 'ws_probe', members: {}, bundles: {}, collect_keys: {}, apps: {}, keys: {} },
  key: `wso_${'0'.repeat(24)}_${'A'.repeat(43)}`,
  revoked: 'x',
  bare: 'x',
  members: { active: 'mb_a', disabled: 'mb_d', outsider: 'mb_o', foreign: 'mb_f' },
  ids: new Map(),
  notCreated: [],
};
const probeBase = (op: DocOperation) => (op.body ? (op.example !== undefined ? op.example : sampleOf(op.body)) : undefined);
const counts = new Map(operations.map((op) => [op.id, casesOf(op, probe, probeBase(op))]));
const total = [...counts.values()].reduce((n, g) => n + groupNames.reduce((m, k) => m + g[k].length, 0), 0) + routeCases(probe).length;

/** The first page's body with one filter changed: another enum value, a number moved by one, or an optional filter added. */
function otherFilters(c: RealCursor): { what: string; body: Record<string, unknown> } | null {
  const props = (flatten(c.op.body!).properties ?? {}) as Record<string, Schema>;
  const skip = new Set([c.field, ...fieldsOf(c.op, 'PageLimit')]);
  for (const [k, raw] of Object.entries(props)) {
    if (skip.has(k)) continue;
    const s = flatten(raw);
    const v = c.body[k];
    if (Array.isArray(s.enum) && v !== undefined) {
      const another = s.enum.find((e: unknown) => e !== v);
      if (another !== undefined) return { what: `${k} ${JSON.stringify(another)}`, body: { ...c.body, [k]: another } };
    }
    if (typeof v === 'number') {
      const moved = fits(s, v + 1) ? v + 1 : v - 1;
      if (fits(s, moved)) return { what: `${k} ${moved}`, body: { ...c.body, [k]: moved } };
    }
  }
  for (const [k, s] of Object.entries(props)) {
    if (skip.has(k) || c.body[k] !== undefined) continue;
    return { what: `${k} added`, body: { ...c.body, [k]: sampleOf(s) } };
  }
  return null;
}

// ---- Sales pipelines: rules no schema states -------------------------------------------------------

type Stage = components['schemas']['Stage'];
type PipelineOp = 'customers.CreateSalesPipeline' | 'customers.UpsertSalesPipeline' | 'customers.UpdateSalesPipeline' | 'customers.ListSalesPipelines' | 'customers.GetSalesPipeline' | 'customers.DeleteSalesPipeline' | 'workspace.ListBundles' | 'workspace.ListApps';
const long = (n: number, c = 'x') => c.repeat(n);
const [lead, proposal, won, lost] = stages.basic as [Stage, Stage, Stage, Stage];
const manyStages = (n: number): Stage[] => [
  ...Array.from({ length: n - 2 }, (_, i): Stage => ({ id: `s${i}`, label: `Stage ${i}`, kind: 'open' })),
  { id: 'won', label: 'Won', kind: 'won' },
  { id: 'lost', label: 'Lost', kind: 'lost' },
];

/** The pipeline the rules aim at (an upsert with its name updates it). */
interface Target {
  id: string;
  name: string;
}
interface Rule<K extends PipelineOp = PipelineOp> {
  op: K;
  what: string;
  body: (target: Target) => RequestBody<K>;
  headers?: (fx: Fixture) => HeaderPatch;
}
const rule =
  <K extends PipelineOp>(op: K) =>
  (what: string, body: (target: Target) => RequestBody<K>, headers?: (fx: Fixture) => HeaderPatch): Rule =>
    ({ op, what, body, headers }) as Rule;
const opById = (id: string) => catalogued.find((o) => o.id === id)!;

/** Schema-valid requests that break a rule only the operation checks (documented as 400 invalid_input). */
const refusedByRules: Rule[] = [
  rule('customers.ListSalesPipelines')('a cursor of 500 characters that is not one', (_id) => ({ cursor: long(500, 'A') })),
  rule('customers.CreateSalesPipeline')('stage ids used twice', (_id) => ({ data: { name: 'Rules', stages: [lead, { ...proposal, id: 'lead' }, won, lost] } })),
  rule('customers.CreateSalesPipeline')('the won stage not among the last two', (_id) => ({ data: { name: 'Rules', stages: [won, lead, proposal, lost] } })),
  rule('customers.CreateSalesPipeline')('two won stages', (_id) => ({ data: { name: 'Rules', stages: [lead, { ...won, id: 'won2' }, won, lost] } })),
  rule('customers.CreateSalesPipeline')('a won stage with probability 90', (_id) => ({ data: { name: 'Rules', stages: [lead, { ...won, probability: 90 }, lost] } })),
  rule('customers.CreateSalesPipeline')('private: true without Service-Act-As', (_id) => ({ data: { name: 'Rules', stages: stages.basic, is_default: false }, private: true })),
  rule('customers.UpsertSalesPipeline')('unset name', (p) => ({ data: { name: p.name }, unset: ['name'] })),
  rule('customers.UpsertSalesPipeline')('stages both set and unset (of an existing pipeline)', (p) => ({ data: { name: p.name, stages: stages.basic }, unset: ['stages'] })),
  rule('customers.UpsertSalesPipeline')('a lost stage with probability 5', (_id) => ({ data: { name: 'Rules', stages: [lead, won, { ...lost, probability: 5 }] } })),
  rule('customers.UpsertSalesPipeline')('private: true without Service-Act-As', (_id) => ({ data: { name: 'Rules' }, private: true })),
  rule('customers.UpdateSalesPipeline')('unset name', (p) => ({ id: p.id, unset: ['name'] })),
  rule('customers.UpdateSalesPipeline')('stages both set and unset', (p) => ({ id: p.id, data: { stages: stages.basic }, unset: ['stages'] })),
  rule('customers.UpdateSalesPipeline')('the lost stage before an open stage', (p) => ({ id: p.id, data: { stages: [lead, lost, proposal, won] } })),
];

/** Requests at the documented edges: accepted (200), or for an absent record of valid id length, 404. */
const acceptedAtEdges: Array<Rule & { absent?: true }> = [
  rule('customers.GetSalesPipeline')('Content-Type application/json; charset=utf-8 (query)', (p) => ({ id: p.id }), () => ({ 'Content-Type': 'application/json; charset=utf-8' })),
  rule('customers.CreateSalesPipeline')('Content-Type application/json; charset=utf-8 (command)', (_id) => ({ data: { name: 'charset' } }), () => ({ 'Content-Type': 'application/json; charset=utf-8' })),
  rule('workspace.ListBundles')('Content-Type application/json;charset=UTF-8', (_id) => ({}), () => ({ 'Content-Type': 'application/json;charset=UTF-8' })),
  rule('customers.CreateSalesPipeline')('an Idempotency-Key of 200 characters', (_id) => ({ data: { name: 'key 200' } }), () => ({ 'Idempotency-Key': long(200, 'k') })),
  rule('customers.DeleteSalesPipeline')('an Idempotency-Key of 1 character (an absent id: deleted false)', (_id) => ({ id: 'pl_absent' }), () => ({ 'Idempotency-Key': 'k' })),
  rule('workspace.ListApps')('the Bearer scheme in lower case', (_id) => ({}), (fx) => ({ Authorization: `bearer ${fx.key}` })),
  rule('customers.ListSalesPipelines')('limit 1', (_id) => ({ limit: 1 })),
  rule('customers.ListSalesPipelines')('limit 100', (_id) => ({ limit: 100 })),
  rule('customers.ListSalesPipelines')('updated_since 0 and updated_before the documented maximum 8.64e15', (_id) => ({ updated_since: 0, updated_before: 8_640_000_000_000_000 })),
  rule('customers.ListSalesPipelines')('updated_since at the documented maximum', (_id) => ({ updated_since: 8_640_000_000_000_000 })),
  { ...rule('customers.GetSalesPipeline')('an id of 64 characters (absent: 404, not 400)', (_id) => ({ id: long(64, 'p') })), absent: true },
  rule('customers.CreateSalesPipeline')('a name and a label of 200 characters, a stage id of 64 characters and 100 stages', (_id) => ({
    data: { name: long(200, 'n'), stages: manyStages(100).map((s, i) => (i === 0 ? { ...s, id: long(64, 'a'), label: long(200, 'l') } : s)) },
  })),
  rule('customers.CreateSalesPipeline')('a name of 200 emoji (lengths count code points) and control characters', (_id) => ({ data: { name: `${long(199, '😀')}\u0001` } })),
  rule('customers.UpsertSalesPipeline')('unset of every optional key and only absence markers in expected', (_id) => ({
    data: { name: 'Fresh edge' },
    unset: ['stages', 'is_default'],
    expected: { stages: { $absent: true }, is_default: { $absent: true } },
  })),
  rule('customers.UpdateSalesPipeline')('an empty unset and an empty expected', (p) => ({ id: p.id, unset: [], expected: {} })),
];

function salesPipelineRules(svc: () => TestService): void {
  describe('sales pipelines: rules no schema states', () => {
    let fx: Fixture;
    let target: Target;
    before(async () => {
      fx = await makeFixture(svc());
      const body: RequestBody<'customers.CreateSalesPipeline'> = { data: { name: 'Rules target', stages: stages.basic } };
      const created = await call(svc(), fx, opById('customers.CreateSalesPipeline'), body);
      assert.equal(created.status, 200, created.text);
      target = { id: (created.body as { item: { id: string } }).item.id, name: body.data.name };
    });

    it(`schema-valid requests breaking a pipeline rule are refused and store nothing (${refusedByRules.length} cases)`, async () => {
      const cases: HttpCase[] = refusedByRules.map((r) => {
        const op = opById(r.op);
        return { what: `${r.op}: ${r.what}`, method: 'POST', path: op.path, headers: headersFor(op, fx), body: JSON.stringify(r.body(target)), status: 400, error: 'invalid_input' };
      });
      assertNoProblems(await runCases(svc(), fx, cases), cases.length);
    });

    for (const e of acceptedAtEdges) {
      it(`accepts ${e.op}: ${e.what}`, async () => {
        const op = opById(e.op);
        const res = await send(svc().baseUrl, 'POST', op.path, { ...headersFor(op, fx), ...e.headers?.(fx) }, JSON.stringify(e.body(target)));
        if (e.absent) assertErrorBody(res, 404, 'not_found', e.what);
        else assert.equal(res.status, 200, `${e.what}: got ${res.status} ${res.text.slice(0, 300)}`);
      });
    }
  });
}

forEachDatabase(
  'bad input',
  (svc) => {
    describe(`is refused with the documented {error, message} and stores nothing (${total} generated cases)`, () => {
      let fx: Fixture;
      before(async () => {
        fx = await makeFixture(svc());
      });

      it('builds a valid base body for every operation from its example (real ids), and no generated case is valid', () => {
        for (const op of operations) {
          try {
            baseBody(op, fx.ids);
          } catch (err) {
            assert.fail(`${(err as Error).message}${fx.notCreated.length ? `\n(${fx.notCreated.join('; ')})` : ''}`);
          }
        }
        const dropped = operations.flatMap((op) => (op.body ? bodyCases(op.body, baseBody(op, fx.ids)).dropped.map((d) => `${op.id}: ${d}`) : []));
        assert.deepEqual(dropped, [], 'generated cases that turned out valid (a generator gap)');
      });

      for (const op of operations) {
        const groups = counts.get(op.id)!;
        for (const name of groupNames) {
          if (!groups[name].length) continue;
          it(`${op.id}: ${name} (${groups[name].length} cases)`, async () => {
            const cases = casesOf(op, fx, baseBody(op, fx.ids))[name];
            assertNoProblems(await runCases(svc(), fx, cases), cases.length);
          });
        }
      }

      it(`unknown paths and methods (${routeCases(probe).length} cases)`, async () => {
        const cases = routeCases(fx);
        assertNoProblems(await runCases(svc(), fx, cases), cases.length);
      });
    });

    describe('control: the valid base request of every operation is accepted', () => {
      before(async () => {
        await makeFixture(svc()); // learns which Create operation makes which record
      });
      for (const op of operations.filter((o) => o.method === 'post')) {
        const command = op.kind !== 'query';
        it(`${op.id}: the base request succeeds${command ? ' and stores its change' : ' and stores nothing'}`, async () => {
          // A workspace of its own holding only the records the base body names: a command's base
          // request changes records, and other records could refuse it (a unique key, a reference).
          const fx = await makeFixture(svc(), { light: true });
          const ids = await recordsFor(svc(), fx, op.example);
          const before = await storedState(svc());
          const res = await call(svc(), fx, op, baseBody(op, ids));
          assert.ok(res.status === 200 || res.status === 202, `${op.id}: ${res.status} ${res.text.slice(0, 300)}`);
          const diff = stateDiff(before, await storedState(svc()));
          if (command) assert.ok(diff, `${op.id}: the base request stored nothing, so a bad case wrongly accepted would go unseen`);
          else assert.equal(diff, null);
        });
      }
    });

    describe('edited paging cursors are refused', () => {
      let fx: Fixture;
      let cursors: RealCursor[];
      let without: string[];
      before(async () => {
        fx = await makeFixture(svc());
        ({ cursors, without } = await realCursors(svc(), fx));
      });

      it('every listing that pages issues a cursor that works as received', async () => {
        // The fixture makes two records of a type from its Create example, or a second one from its
        // Upsert example (where a unique key refuses the second create): give a new type one of those.
        assert.deepEqual(without, [], 'listings without a second page in the fixture');
        assert.ok(cursors.length >= 2);
        for (const c of cursors) {
          const res = await call(svc(), fx, c.op, { ...c.body, [c.field]: c.cursor });
          assert.equal(res.status, 200, `${c.op.id}: the cursor as received: ${res.status} ${res.text.slice(0, 300)}`);
        }
      });

      it('a cursor issued by one process of the deployment works on another (the secret is shared through the database)', async () => {
        // A second service process on the same database, as several API processes of one deployment are.
        const db = openDatabase(svc().databaseUrl);
        const other = createService({ db, clock: svc().clock, config: svc().config, logger: pino({ level: 'silent' }) });
        const server = http.createServer(other.handler);
        await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
        try {
          const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
          for (const c of cursors) {
            const res = await send(baseUrl, 'POST', c.op.path, headersFor(c.op, fx), JSON.stringify({ ...c.body, [c.field]: c.cursor }));
            assert.equal(res.status, 200, `${c.op.id} on the second process: ${res.status} ${res.text.slice(0, 300)}`);
          }
        } finally {
          server.closeAllConnections();
          await new Promise((resolve) => server.close(resolve));
          await other.closeEndpoints();
          await db.close();
        }
      });

      it('positions out of range or changed, and broken, missing or foreign signatures: 400 invalid_input', async () => {
        const cases: HttpCase[] = cursors.flatMap((c) =>
          cursorEdits(c, cursors).map(([what, cursor]) => ({
            what: `${c.op.id}: a cursor ${what}`,
            method: 'POST',
            path: c.op.path,
            headers: headersFor(c.op, fx),
            body: JSON.stringify({ ...c.body, [c.field]: cursor }),
            status: 400,
            error: 'invalid_input' as const,
          })),
        );
        assert.ok(cases.length > 20);
        assertNoProblems(await runCases(svc(), fx, cases), cases.length);
      });

      it('a cursor carrying the longest position the service issues (a page of 1,970 characters) pages on', async () => {
        const track = docOperations.find((o) => o.kind === 'collection' && o.method === 'post')!;
        const breakdown = opById('analytics.GetSiteAnalyticsBreakdown');
        const site = fx.ids.get('bn')!;
        const longPath = `/${'\u00e9'.repeat(10)}${'p'.repeat(1900)}`; // sent percent-encoded, as browsers do
        const example = withRealIds(track.example, fx.ids) as Record<string, unknown>;
        for (const path of [longPath, longPath, '/short']) {
          const res = await call(svc(), fx, track, { ...example, url: `https://docs.acme.test${path}`, referrer: null });
          assert.equal(res.status, 202, res.text);
        }
        await svc().flushEndpoints();
        const first = await call(svc(), fx, breakdown, { bundle_id: site, dimension: 'page', limit: 1 });
        const page = first.body as { rows: Array<{ value: string }>; next_cursor: string | null };
        assert.equal(first.status, 200, first.text);
        assert.ok(page.rows[0]!.value.length > 1900 && page.next_cursor, 'the first page ends on the long page');
        assert.ok(page.next_cursor.length > 500, `the cursor is ${page.next_cursor.length} characters`);
        const next = await call(svc(), fx, breakdown, { bundle_id: site, dimension: 'page', limit: 1, cursor: page.next_cursor });
        assert.equal(next.status, 200, next.text.slice(0, 300));
      });

      it('a cursor sent with other filters: 400 invalid_input', async () => {
        let checked = 0;
        for (const c of cursors) {
          const other = otherFilters(c);
          if (!other) continue;
          const res = await call(svc(), fx, c.op, { ...other.body, [c.field]: c.cursor });
          assertErrorBody(res, 400, 'invalid_input', `${c.op.id}: a cursor sent with ${other.what}`);
          checked++;
        }
        assert.ok(checked > 0, 'no listing had a filter to change');
      });
    });

    describe("leaves a refused command's Idempotency-Key usable", () => {
      before(async () => {
        await makeFixture(svc()); // learns which Create operation makes which record
      });

      type Refusal = [string, number, ErrorCode, (op: DocOperation, body: unknown, fx: Fixture) => { raw: string; headers?: HeaderPatch } | null];
      const firstCase = (op: DocOperation, body: unknown, rule: 'schema' | 'strings') => bodyCases(op.body!, body).cases.find((c) => c.rule === rule)?.body;
      const refusals: Refusal[] = [
        ['a body that is not JSON', 400, 'invalid_json', () => ({ raw: '{' })],
        ['Content-Type text/plain', 400, 'invalid_json', (_op, body) => ({ raw: JSON.stringify(body), headers: { 'Content-Type': 'text/plain' } })],
        ['an unknown field', 400, 'invalid_input', (_op, body) => ({ raw: JSON.stringify({ ...(body as object), zz_unknown: 'x' }) })],
        ['a field breaking its schema', 400, 'invalid_input', (op, body) => ({ raw: JSON.stringify(firstCase(op, body, 'schema')) })],
        ['a string with U+0000', 400, 'invalid_input', (op, body) => (firstCase(op, body, 'strings') === undefined ? null : { raw: JSON.stringify(firstCase(op, body, 'strings')) })],
        ['Service-Act-As naming a disabled member', 403, 'forbidden', (op, body, fx) => (op.actAs === 'none' ? null : { raw: JSON.stringify(body), headers: { 'Service-Act-As': fx.members.disabled } })],
        ['a wrong secret', 401, 'invalid_key', (_op, body, fx) => ({ raw: JSON.stringify(body), headers: { Authorization: `Bearer ${fx.key.slice(0, -1)}${fx.key.endsWith('A') ? 'B' : 'A'}` } })],
      ];
      for (const op of commands) {
        for (const [what, status, error, make] of refusals) {
          it(`${op.id}: after ${what}, the same key runs the valid request once`, async () => {
            // A workspace of its own, so that the base request (a create with a unique key, a delete,
            // an update with `expected`) succeeds.
            const fx = await makeFixture(svc(), { light: true });
            const good = baseBody(op, await recordsFor(svc(), fx, op.example));
            const bad = make(op, good, fx);
            if (!bad) return assert.equal(op.actAs === 'none' || firstCase(op, good, 'strings') === undefined, true);
            const key = `retry-${crypto.randomUUID()}`;
            const headers = { ...headersFor(op, fx), 'Idempotency-Key': key };
            const before = await storedState(svc());
            const refused = await send(svc().baseUrl, 'POST', op.path, { ...headers, ...bad.headers }, bad.raw);
            assertErrorBody(refused, status, error, `${op.id}: ${what}`);
            assert.equal(stateDiff(before, await storedState(svc())), null, 'the refused request stored something');
            const first = await send(svc().baseUrl, 'POST', op.path, headers, JSON.stringify(good));
            assert.equal(first.status, 200, `the valid request with the same key: ${first.status} ${first.text}`);
            assert.equal(first.headers.get('Idempotency-Replayed'), null, 'the valid request was answered from a receipt');
            const again = await send(svc().baseUrl, 'POST', op.path, headers, JSON.stringify(good));
            assert.equal(again.status, 200);
            assert.equal(again.headers.get('Idempotency-Replayed'), 'true');
            assert.deepEqual(again.body, first.body);
          });
        }
      }
    });

    salesPipelineRules(svc);
  },
  // Thousands of requests from one key in a frozen test clock: the rate limit is not under test here.
  { rateLimitPerSecond: 1_000_000, rateLimitBurst: 1_000_000 },
);
