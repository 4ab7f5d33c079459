import assert from 'node:assert/strict';
import { memberRoles, namespaces, resourceTypes } from '../../../generated/catalogue.ts';
import { type ApplyResult, revokeKey } from '../../../server/admin.ts';
import { catalogued, type DocOperation, docOperations, fits, sampleOf, unknownIdPrefixes, withRealIds } from '../requestSchema.ts';
import { type FixtureSpec, type Seed, testKits } from '../kit.ts';
import type { TestService } from '../service.ts';
import { call } from './calls.ts';
import { send } from './http.ts';
import { createRecords, prefixOf } from './records.ts';

/**
 * The fixture workspace every generated case runs against, built from the catalogue, with what each
 * namespace's kit adds (test/<namespace>/kit.ts: sections, records the API cannot make, waiting for
 * background work); and valid base bodies from the document's examples with real ids.
 */

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

type Members = NonNullable<FixtureSpec['members']>;

/** A workspace spec built from the catalogue (every role, a disabled member, an outsider, one site and app) and the kits' parts. */
async function workspaceSpec(name: string): Promise<FixtureSpec> {
  const roles = Object.keys(memberRoles) as Array<Members[string]['role']>;
  const last = roles[roles.length - 1]!;
  const members: Members = {};
  for (const role of roles) members[role] = { name: `The ${role}`, email: `${role}@bad-input.test`, role };
  members.gone = { name: 'Gone member', email: 'gone@bad-input.test', role: last, disabled: true };
  members.outsider = { name: 'Not delegated', email: 'outsider@bad-input.test', role: last };
  const grants = {
    operations: namespaces.map((n) => `${n}.*`),
    resources: Object.fromEntries(resourceTypes.map((r) => [r, ['read', 'write'] as Array<'read' | 'write'>])),
  };
  const spec: FixtureSpec = {
    workspace: { name },
    members,
    bundles: { site: { name: 'Docs site', domain: 'docs.acme.test' } },
    apps: { app: { name: 'Tickets', resource_types: ['Ticket'] } },
    keys: {
      main: { name: 'Bad input', ...grants, delegation: [...roles, 'gone'] },
      revoked: { name: 'Revoked', ...grants, delegation: 'all' },
      bare: { name: 'No grants', operations: [] },
    },
  };
  for (const { kit } of await testKits()) kit.badInput?.workspace?.(spec);
  return spec;
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
  await svc.flushEndpoints();
}

/**
 * A fresh fixture workspace on `svc` (new ids each time). `light`: the workspace alone, without the
 * second workspace, the revoked key, the records and the traffic (then `other` is the workspace
 * itself and `revoked` is not revoked).
 */
export async function makeFixture(svc: TestService, options: { light?: boolean } = {}): Promise<Fixture> {
  const ws = await svc.apply(await workspaceSpec('Bad input'));
  const other = options.light ? ws : await svc.apply(await workspaceSpec('Another workspace'));
  const roles = Object.keys(memberRoles);
  const ids = new Map<string, string>();
  const own = [ws.workspace_id, ws.members[roles[0]!]!, ...Object.values(ws.bundles), ...Object.values(ws.apps), ...Object.values(ws.collect_keys)];
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
  // What the API cannot make (an approved subscription, an authored rule): the kits' ids by prefix.
  const seed: Seed = { db: svc.db, clock: svc.clock, ws, key: ws.keys.main!, members: { owner: fx.members.active, member: ws.members[roles[roles.length - 1]!]! } };
  const kits = await testKits();
  for (const { kit } of kits) for (const [prefix, id] of Object.entries((await kit.badInput?.seed?.(seed)) ?? {})) ids.set(prefix, id);
  if (options.light) return fx;
  // Use the doomed key once (the service caches it), then revoke it.
  const discovery = catalogued.find((o) => o.method === 'get')!;
  assert.equal((await send(svc.baseUrl, 'GET', discovery.path, { Authorization: `Bearer ${fx.revoked}` })).status, 200);
  await revokeKey(svc.db, svc.clock, ws.keys.revoked!.id);
  fx.notCreated = await createRecords(svc, fx, ids);
  await sendTraffic(svc, fx);
  // The background work the records cause (e.g. a rule's runs, which give automation.GetRule a second page) ends before any case runs.
  for (const { kit } of kits) await kit.badInput?.settle?.(svc);
  return fx;
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
