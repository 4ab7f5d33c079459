import { Ajv, type JSONSchemaType } from 'ajv';
import type { Database, Sql } from '../db/database.ts';
import { bumpAuthVersion } from '../db/queries/workspaces.ts';
import type { Delegation, DbApiKeyRow, MemberRole } from '../db/rows.ts';
import { type Access, catalogue, memberRoleNames, namespaces, resourceTypes } from '../generated/catalogue.ts';
import type { Clock } from './clock.ts';
import { newKeySecret } from './credentials.ts';
import { newId } from './ids.ts';

/** The file `npm run admin -- apply FILE` reads (YAML or JSON). */
export interface WorkspaceSpec {
  workspace: { name: string };
  members?: Record<string, { name: string; email: string; role: MemberRole; disabled?: boolean }>;
  bundles?: Record<string, { name: string; domain: string }>;
  apps?: Record<string, { name: string; resource_types?: string[] }>;
  keys?: Record<string, { name: string; operations: string[]; resources?: Record<string, Access[]>; delegation?: 'all' | 'none' | string[]; created_by?: string }>;
}

export interface ApplyResult {
  workspace_id: string;
  members: Record<string, string>;
  bundles: Record<string, string>;
  /** Each site's publishable collect key (`pk_...`) for the tracker, by the same handles as `bundles`. */
  collect_keys: Record<string, string>;
  apps: Record<string, string>;
  keys: Record<string, { id: string; secret: string }>;
}

/** A readable operator error (bad file, unknown id); the CLI prints it on one line. */
export class AdminError extends Error {}

const handle = { type: 'string', pattern: '^[A-Za-z0-9_-]{1,64}$' } as const;
const specSchema: JSONSchemaType<WorkspaceSpec> = {
  type: 'object',
  additionalProperties: false,
  required: ['workspace'],
  properties: {
    workspace: { type: 'object', additionalProperties: false, required: ['name'], properties: { name: { type: 'string', minLength: 1, maxLength: 200 } } },
    members: {
      type: 'object',
      nullable: true,
      propertyNames: handle,
      required: [],
      additionalProperties: {
        type: 'object',
        additionalProperties: false,
        required: ['name', 'email', 'role'],
        properties: {
          name: { type: 'string', minLength: 1, maxLength: 200 },
          email: { type: 'string', pattern: '^[^@\\s]+@[^@\\s]+$', maxLength: 320 },
          role: { type: 'string', enum: [...memberRoleNames] },
          disabled: { type: 'boolean', nullable: true },
        },
      },
    },
    bundles: {
      type: 'object',
      nullable: true,
      propertyNames: handle,
      required: [],
      additionalProperties: {
        type: 'object',
        additionalProperties: false,
        required: ['name', 'domain'],
        properties: { name: { type: 'string', minLength: 1, maxLength: 200 }, domain: { type: 'string', pattern: '^[a-z0-9.-]{1,253}$' } },
      },
    },
    apps: {
      type: 'object',
      nullable: true,
      propertyNames: { type: 'string', pattern: '^[a-z][a-z0-9_]{0,63}$' },
      required: [],
      additionalProperties: {
        type: 'object',
        additionalProperties: false,
        required: ['name'],
        properties: {
          name: { type: 'string', minLength: 1, maxLength: 200 },
          resource_types: { type: 'array', nullable: true, items: { type: 'string', pattern: '^[A-Z][A-Za-z0-9]{0,63}$' } },
        },
      },
    },
    keys: {
      type: 'object',
      nullable: true,
      propertyNames: handle,
      required: [],
      additionalProperties: {
        type: 'object',
        additionalProperties: false,
        required: ['name', 'operations'],
        properties: {
          name: { type: 'string', minLength: 1, maxLength: 200 },
          operations: { type: 'array', items: { type: 'string' } },
          resources: {
            type: 'object',
            nullable: true,
            required: [],
            additionalProperties: { type: 'array', items: { type: 'string', enum: ['read', 'write'] } },
          },
          delegation: {
            type: ['string', 'array'],
            nullable: true,
            oneOf: [{ type: 'string', enum: ['all', 'none'] }, { type: 'array', items: { type: 'string' } }],
          } as never,
          created_by: { type: 'string', nullable: true },
        },
      },
    },
  },
};

const validateSpec = new Ajv({ allErrors: true, allowUnionTypes: true }).compile(specSchema);

/** Expands operation grants: exact ids, or `namespace.*` as that namespace's operations today (interface rule 9.4). */
export function expandOperationGrants(grants: readonly string[]): string[] {
  const out = new Set<string>();
  for (const grant of grants) {
    const ns = /^([a-z][a-zA-Z]*)\.\*$/.exec(grant)?.[1];
    if (ns !== undefined) {
      if (!(namespaces as readonly string[]).includes(ns)) throw new AdminError(`unknown operation namespace "${ns}" in grant "${grant}"`);
      for (const e of catalogue) if (e.listed && e.namespace === ns) out.add(e.id);
    } else if (catalogue.some((e) => e.listed && e.id === grant)) out.add(grant);
    else throw new AdminError(`unknown operation "${grant}" (use an operation id or namespace.*)`);
  }
  return [...out].sort();
}

function normalizeResources(resources: Record<string, Access[]> | undefined, known: ReadonlySet<string>): Record<string, Access[]> {
  const out: Record<string, Access[]> = {};
  for (const [type, access] of Object.entries(resources ?? {})) {
    if (!known.has(type)) throw new AdminError(`unknown resource type "${type}" (known: ${[...known].join(', ')})`);
    out[type] = [...new Set(access)].sort();
  }
  return out;
}

async function insertKey(sql: Sql, row: Omit<DbApiKeyRow, 'revoked_at'>, delegates: string[]): Promise<void> {
  await sql.run(
    `INSERT INTO api_keys (id, workspace_id, name, secret_hash, created_by, replaces_key_id, operations, resources, delegation, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [row.id, row.workspace_id, row.name, row.secret_hash, row.created_by, row.replaces_key_id, row.operations, row.resources, row.delegation, row.created_at],
  );
  for (const member of delegates) await sql.run(`INSERT INTO api_key_delegates (key_id, member_id) VALUES (?, ?)`, [row.id, member]);
}

/** Creates a workspace from a spec in one transaction; returns its ids and the key secrets (shown once). */
export async function applyWorkspace(db: Database, clock: Clock, input: unknown): Promise<ApplyResult> {
  if (!validateSpec(input)) {
    const first = validateSpec.errors?.[0];
    throw new AdminError(`invalid workspace file: ${first ? `${first.instancePath || '/'} ${first.message}` : 'not an object'}`);
  }
  const spec = input;
  const now = clock.now();
  const result: ApplyResult = { workspace_id: newId('ws'), members: {}, bundles: {}, collect_keys: {}, apps: {}, keys: {} };
  const known = new Set<string>(resourceTypes);
  for (const [key, app] of Object.entries(spec.apps ?? {})) for (const t of app.resource_types ?? []) known.add(`${key}:${t}`);
  await db.tx(async (sql) => {
    await sql.run(`INSERT INTO workspaces (id, name, auth_version, created_at) VALUES (?, ?, 0, ?)`, [result.workspace_id, spec.workspace.name, now]);
    const emails = new Set<string>();
    for (const [h, m] of Object.entries(spec.members ?? {})) {
      if (emails.has(m.email.toLowerCase())) throw new AdminError(`members.${h}: e-mail ${m.email} is used twice`);
      emails.add(m.email.toLowerCase());
      const id = newId('mb');
      result.members[h] = id;
      await sql.run(`INSERT INTO members (id, workspace_id, name, email, role, disabled_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`, [
        id, result.workspace_id, m.name, m.email, m.role, m.disabled ? now : null, now,
      ]);
    }
    for (const [h, b] of Object.entries(spec.bundles ?? {})) {
      const id = newId('bn');
      result.bundles[h] = id;
      result.collect_keys[h] = newId('pk');
      await sql.run(`INSERT INTO bundles (id, workspace_id, name, domain, collect_key, created_at) VALUES (?, ?, ?, ?, ?, ?)`, [
        id, result.workspace_id, b.name, b.domain, result.collect_keys[h], now,
      ]);
    }
    for (const [key, a] of Object.entries(spec.apps ?? {})) {
      const id = newId('ap');
      result.apps[key] = id;
      const types = (a.resource_types ?? []).map((t) => `${key}:${t}`);
      await sql.run(`INSERT INTO apps (id, workspace_id, app_key, name, resource_types, created_at) VALUES (?, ?, ?, ?, ?, ?)`, [id, result.workspace_id, key, a.name, JSON.stringify(types), now]);
    }
    for (const [h, k] of Object.entries(spec.keys ?? {})) {
      let delegation: Delegation = 'none';
      let delegates: string[] = [];
      if (Array.isArray(k.delegation)) {
        delegation = 'selected';
        delegates = k.delegation.map((m) => {
          const id = result.members[m];
          if (!id) throw new AdminError(`keys.${h}.delegation: no member "${m}" in this file`);
          return id;
        });
      } else if (k.delegation === 'all') delegation = 'all';
      const createdBy = k.created_by === undefined ? null : result.members[k.created_by];
      if (createdBy === undefined) throw new AdminError(`keys.${h}.created_by: no member "${k.created_by}" in this file`);
      const { keyId, secret, secretHash } = newKeySecret();
      await insertKey(sql, {
        id: keyId,
        workspace_id: result.workspace_id,
        name: k.name,
        secret_hash: secretHash,
        created_by: createdBy,
        replaces_key_id: null,
        operations: JSON.stringify(expandOperationGrants(k.operations)),
        resources: JSON.stringify(normalizeResources(k.resources, known)),
        delegation,
        created_at: now,
      }, delegates);
      result.keys[h] = { id: keyId, secret };
    }
  });
  return result;
}

async function activeKey(sql: Sql, id: string): Promise<DbApiKeyRow> {
  const row = await sql.one<DbApiKeyRow>(`SELECT * FROM api_keys WHERE id = ?`, [id]);
  if (!row) throw new AdminError(`no API key ${id}`);
  if (row.revoked_at !== null) throw new AdminError(`API key ${id} is already revoked`);
  return row;
}

/** Revokes a key; its next request, in any process, is refused. */
export async function revokeKey(db: Database, clock: Clock, id: string): Promise<{ id: string; revoked_at: number }> {
  const now = clock.now();
  await db.tx(async (sql) => {
    const row = await activeKey(sql, id);
    await sql.run(`UPDATE api_keys SET revoked_at = ? WHERE id = ?`, [now, id]);
    await bumpAuthVersion(sql, row.workspace_id);
  });
  return { id, revoked_at: now };
}

/** Makes a new key with the same name, grants and delegation; both work until the old one is revoked. */
export async function replaceKey(db: Database, clock: Clock, id: string): Promise<{ id: string; secret: string; replaces: string }> {
  return db.tx(async (sql) => {
    const old = await activeKey(sql, id);
    const delegates = await sql.all<{ member_id: string }>(`SELECT member_id FROM api_key_delegates WHERE key_id = ?`, [id]);
    const { keyId, secret, secretHash } = newKeySecret();
    await insertKey(sql, { ...old, id: keyId, secret_hash: secretHash, replaces_key_id: id, created_at: clock.now() }, delegates.map((d) => d.member_id));
    return { id: keyId, secret, replaces: id };
  });
}

/** Disables a member: no key may act for them from the next request on. */
export async function disableMember(db: Database, clock: Clock, id: string): Promise<{ id: string; disabled_at: number }> {
  const now = clock.now();
  await db.tx(async (sql) => {
    const member = await sql.one<{ workspace_id: string; disabled_at: number | null }>(`SELECT workspace_id, disabled_at FROM members WHERE id = ?`, [id]);
    if (!member) throw new AdminError(`no member ${id}`);
    if (member.disabled_at !== null) throw new AdminError(`member ${id} is already disabled`);
    await sql.run(`UPDATE members SET disabled_at = ? WHERE id = ?`, [now, id]);
    await bumpAuthVersion(sql, member.workspace_id);
  });
  return { id, disabled_at: now };
}
