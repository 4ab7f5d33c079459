import type { JSONSchemaType, ValidateFunction } from 'ajv';
import { createAjv } from './ajv.cjs';
import { fileProblems } from './adminErrors.ts';
import { displayTextProblem } from './text.cjs';
import type { Database, Sql } from '../db/database.ts';
import { revokeSessions } from '../db/queries/sessions.ts';
import { bumpAuthVersion } from '../db/queries/workspaces.ts';
import type { ApiKeyAccess, Delegation, DbApiKeyRow, MemberRole } from '../db/rows.ts';
import { type Access, catalogue, memberRoleNames, namespaces, resourceTypes } from '../generated/catalogue.ts';
import { type AuditActor, OPERATOR, recordAudit } from './audit.ts';
import type { Clock } from './clock.ts';
import { newKeySecret } from './credentials.ts';
import { newId } from './ids.ts';

/** The file `npm run admin -- apply FILE` reads (YAML or JSON). */
export interface WorkspaceSpec {
  /** `api_keys: off`: the workspace starts without API keys (no key can be made until an operator turns them on). */
  workspace: { name: string; api_keys?: 'on' | 'off' };
  members?: Record<string, { name: string; email: string; role: MemberRole; disabled?: boolean }>;
  bundles?: Record<string, { name: string; domain: string }>;
  apps?: Record<string, { name: string; resource_types?: string[] }>;
  keys?: Record<string, { name: string; operations: string[]; resources?: Record<string, Access[]>; delegation?: 'all' | 'none' | string[]; created_by?: string }>;
}

/**
 * A module's section of the workspace file (e.g. `automations`): checked by its JSON schema with the
 * rest of the file, then written in the same transaction as the workspace.
 */
export interface WorkspaceFileSection {
  /** Its key at the top of the workspace file. */
  readonly key: string;
  /** JSON schema of the section's value. */
  readonly schema: object;
  /** Writes it; `members` and `apps` map the file's handles (and, when adding, existing ids) to ids. Returns what to print, by handle. */
  apply(sql: Sql, target: SectionTarget, value: unknown): Promise<Record<string, string>>;
}

export interface SectionTarget {
  readonly workspaceId: string;
  /** Member handle of this file, or an existing member id, to member id (throws AdminError for unknown ones). */
  member(handle: string, where: string): string;
  /** App handle of this file (or an existing app key or id) to app id; `core` stays `core`. */
  app(handle: string, where: string): string;
  readonly now: number;
}

const sections: WorkspaceFileSection[] = [];
let validateWithSections: ValidateFunction | null = null;

/** Adds modules' sections to the workspace file (the composition root calls this once for every module that has one). */
export function registerWorkspaceSections(list: readonly WorkspaceFileSection[]): void {
  for (const s of list) if (!sections.some((o) => o.key === s.key)) sections.push(s);
  validateWithSections = null;
}

/**
 * Names every JavaScript object already answers to (`__proto__`, `constructor`, `toString`,
 * `hasOwnProperty`, ...): as a handle they would read or replace what the object inherits instead
 * of the file's entry, so they are refused anywhere in the file.
 */
const RESERVED_NAMES: ReadonlySet<string> = new Set(Object.getOwnPropertyNames(Object.prototype));

/** The first key of the file (at any depth) named like one of those, as a readable refusal; or null. */
export function reservedNameProblem(value: unknown, where = ''): string | null {
  if (typeof value !== 'object' || value === null) return null;
  for (const [key, inner] of Object.entries(value)) {
    const at = Array.isArray(value) ? `${where}[${key}]` : where ? `${where}.${key}` : key;
    if (!Array.isArray(value) && RESERVED_NAMES.has(key)) return `${at}: "${key}" cannot be a handle or a name in the workspace file (JavaScript objects reserve it); choose another`;
    const problem = reservedNameProblem(inner, at);
    if (problem) return problem;
  }
  return null;
}

/** `handles[handle]` when the file defined it (never what every object inherits), else undefined. */
function own<T>(handles: Record<string, T>, handle: string): T | undefined {
  return Object.hasOwn(handles, handle) ? handles[handle] : undefined;
}

function validateFile(spec: unknown): spec is WorkspaceSpec {
  const reserved = reservedNameProblem(spec);
  if (reserved) throw new AdminError(reserved);
  validateWithSections ??= sections.length
    ? ajv.compile({ ...specSchema, properties: { ...specSchema.properties, ...Object.fromEntries(sections.map((s) => [s.key, s.schema])) } })
    : validateSpec;
  const ok = validateWithSections(spec);
  validateFile.errors = validateWithSections.errors;
  return ok;
}
validateFile.errors = null as ValidateFunction['errors'];

async function applySections(sql: Sql, input: object, target: SectionTarget, result: ApplyResult): Promise<void> {
  for (const s of sections) {
    const value = (input as Record<string, unknown>)[s.key];
    if (value !== undefined) (result as unknown as Record<string, unknown>)[s.key] = await s.apply(sql, target, value);
  }
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
    workspace: {
      type: 'object',
      additionalProperties: false,
      required: ['name'],
      properties: { name: { type: 'string', format: 'display-text', minLength: 1, maxLength: 200 }, api_keys: { type: 'string', enum: ['on', 'off'], nullable: true } },
    },
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
          name: { type: 'string', format: 'display-text', minLength: 1, maxLength: 200 },
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
        properties: { name: { type: 'string', format: 'display-text', minLength: 1, maxLength: 200 }, domain: { type: 'string', pattern: '^[a-z0-9.-]{1,253}$' } },
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
          name: { type: 'string', format: 'display-text', minLength: 1, maxLength: 200 },
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
          name: { type: 'string', format: 'display-text', minLength: 1, maxLength: 200 },
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

const ajv = createAjv({ allErrors: true });
const validateSpec = ajv.compile(specSchema);

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

async function insertKey(sql: Sql, row: Omit<DbApiKeyRow, 'revoked_at' | 'last_used_at'>, delegates: string[]): Promise<void> {
  await sql.run(
    `INSERT INTO api_keys (id, workspace_id, name, secret_hash, created_by, replaces_key_id, operations, resources, delegation, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [row.id, row.workspace_id, row.name, row.secret_hash, row.created_by, row.replaces_key_id, row.operations, row.resources, row.delegation, row.created_at],
  );
  for (const member of delegates) await sql.run(`INSERT INTO api_key_delegates (key_id, member_id) VALUES (?, ?)`, [row.id, member]);
}

/** Creates a workspace from a spec in one transaction; returns its ids and the key secrets (shown once). */
export async function applyWorkspace(db: Database, clock: Clock, input: unknown): Promise<ApplyResult> {
  if (!validateFile(input)) {
    throw new AdminError(`invalid workspace file: ${fileProblems(validateFile.errors, input)}`);
  }
  const spec = input;
  const now = clock.now();
  const result: ApplyResult = { workspace_id: newId('ws'), members: {}, bundles: {}, collect_keys: {}, apps: {}, keys: {} };
  const known = new Set<string>(resourceTypes);
  for (const [key, app] of Object.entries(spec.apps ?? {})) for (const t of app.resource_types ?? []) known.add(`${key}:${t}`);
  const access: ApiKeyAccess = spec.workspace.api_keys ?? 'on';
  if (access !== 'on' && Object.keys(spec.keys ?? {}).length) throw new AdminError(`keys: the file turns API keys off for this workspace (workspace.api_keys: ${access}), so it cannot make keys`);
  await db.tx(async (sql) => {
    await sql.run(`INSERT INTO workspaces (id, name, auth_version, api_key_access, created_at) VALUES (?, ?, 0, ?, ?)`, [result.workspace_id, spec.workspace.name, access, now]);
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
          const id = own(result.members, m);
          if (!id) throw new AdminError(`keys.${h}.delegation: no member "${m}" in this file`);
          return id;
        });
      } else if (k.delegation === 'all') delegation = 'all';
      const createdBy = k.created_by === undefined ? null : own(result.members, k.created_by);
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
    // One entry for the whole file: the workspace is new, so every row in it is part of its creation.
    await recordAudit(sql, {
      workspaceId: result.workspace_id,
      actor: OPERATOR,
      action: 'workspace.created',
      subject: { type: 'workspace', id: result.workspace_id, label: spec.workspace.name },
      details: { name: spec.workspace.name, api_keys: access, members: Object.keys(result.members).length, sites: Object.keys(result.bundles).length, apps: Object.keys(result.apps).length, keys: Object.keys(result.keys).length },
      at: now,
    });
    await applySections(sql, spec, {
      workspaceId: result.workspace_id,
      now,
      member: (handle, where) => {
        const id = own(result.members, handle);
        if (!id) throw new AdminError(`${where}: no member "${handle}" in this file`);
        return id;
      },
      app: (handle, where) => {
        if (handle === 'core') return 'core';
        const id = own(result.apps, handle);
        if (!id) throw new AdminError(`${where}: no app "${handle}" in this file (or use core)`);
        return id;
      },
    }, result);
  });
  return result;
}

/** Who changes a key, and the workspace it must belong to (a page names its own; the CLI may name any). */
export interface KeyChange {
  /** The audit log's actor: the admin CLI's (`OPERATOR`) unless given. */
  actor?: AuditActor;
  /** Refuses a key of another workspace as unknown. */
  workspaceId?: string;
}

/** A key's delegation as the file, the CLI and the audit log write it: `none`, `all`, or member ids. */
export type DelegationSpec = 'none' | 'all' | string[];

/** A new key: its grants as the workspace file writes them (`namespace.*` is expanded when it is made). */
export interface NewKey {
  name: string;
  operations: readonly string[];
  resources?: Record<string, Access[]>;
  delegation?: DelegationSpec;
  /** The member recorded as its creator. */
  createdBy?: string | null;
}

/** Why no key can be made in a workspace whose API-key access is not `on`. */
export function keysRefusal(access: ApiKeyAccess): string {
  return access === 'stopped'
    ? 'API keys are stopped for this workspace: no key can be made and existing keys are refused (the operator turns them on with npm run admin -- workspace api-keys --on)'
    : 'the operator has not turned API keys on for this workspace, so no key can be made; existing keys keep working (npm run admin -- workspace api-keys --on)';
}

/** The workspace's API-key access (`on`, `off` or `stopped`). */
export async function apiKeyAccessOf(sql: Sql, workspaceId: string): Promise<ApiKeyAccess> {
  const row = await sql.one<{ api_key_access: ApiKeyAccess }>(`SELECT api_key_access FROM workspaces WHERE id = ?`, [workspaceId]);
  if (!row) throw new AdminError(`no workspace ${workspaceId} (npm run admin -- workspace list)`);
  return row.api_key_access;
}

async function mayMakeKeys(sql: Sql, workspaceId: string): Promise<void> {
  const access = await apiKeyAccessOf(sql, workspaceId);
  if (access !== 'on') throw new AdminError(keysRefusal(access));
}

async function activeKey(sql: Sql, id: string, workspaceId?: string): Promise<DbApiKeyRow> {
  const row = await sql.one<DbApiKeyRow>(`SELECT * FROM api_keys WHERE id = ?`, [id]);
  if (!row || (workspaceId !== undefined && row.workspace_id !== workspaceId)) throw new AdminError(`no API key ${id}`);
  if (row.revoked_at !== null) throw new AdminError(`API key ${id} (${row.name}) is already revoked`);
  return row;
}

/** The qualified resource types keys of a workspace may be granted: the catalogue's and its apps'. */
export async function grantableResourceTypes(sql: Sql, workspaceId: string): Promise<string[]> {
  const apps = await sql.all<{ resource_types: string }>(`SELECT resource_types FROM apps WHERE workspace_id = ? ORDER BY app_key`, [workspaceId]);
  return [...resourceTypes, ...apps.flatMap((a) => JSON.parse(a.resource_types) as string[])];
}

/** Checks that every id names a member of the workspace; returns them without repeats. */
async function workspaceMembers(sql: Sql, workspaceId: string, ids: readonly string[], where: string): Promise<string[]> {
  const known = new Set((await sql.all<{ id: string }>(`SELECT id FROM members WHERE workspace_id = ?`, [workspaceId])).map((m) => m.id));
  for (const id of ids) if (!known.has(id)) throw new AdminError(`${where}: no member ${id} in this workspace`);
  return [...new Set(ids)].sort();
}

const delegationOf = (delegation: Delegation, delegates: readonly string[]): DelegationSpec => (delegation === 'selected' ? [...delegates].sort() : delegation);

/**
 * Makes one key in an existing workspace, in the caller's transaction, and records `key.created`:
 * the one way a key is made (the admin CLI, the workspace file's additions, the API keys page).
 * Refused while the workspace's API keys are not `on`. Returns its id and secret (shown once).
 */
export async function createKeyIn(sql: Sql, workspaceId: string, key: NewKey, actor: AuditActor, now: number, where = 'key'): Promise<{ id: string; secret: string }> {
  await mayMakeKeys(sql, workspaceId);
  const name = key.name.trim();
  if (name.length < 1 || name.length > 200) throw new AdminError(`${where}.name: give the key a name (1 to 200 characters)`);
  const bidi = displayTextProblem(`${where}.name`, name);
  if (bidi) throw new AdminError(bidi);
  const operations = expandOperationGrants(key.operations);
  const resources = normalizeResources(key.resources, new Set(await grantableResourceTypes(sql, workspaceId)));
  const spec = key.delegation ?? 'none';
  const delegates = Array.isArray(spec) ? await workspaceMembers(sql, workspaceId, spec, `${where}.delegation`) : [];
  const delegation: Delegation = Array.isArray(spec) ? 'selected' : spec;
  if (key.createdBy) await workspaceMembers(sql, workspaceId, [key.createdBy], `${where}.created_by`);
  const { keyId, secret, secretHash } = newKeySecret();
  await insertKey(sql, {
    id: keyId,
    workspace_id: workspaceId,
    name,
    secret_hash: secretHash,
    created_by: key.createdBy ?? null,
    replaces_key_id: null,
    operations: JSON.stringify(operations),
    resources: JSON.stringify(resources),
    delegation,
    created_at: now,
  }, delegates);
  await recordAudit(sql, {
    workspaceId,
    actor,
    action: 'key.created',
    subject: { type: 'key', id: keyId, label: name },
    details: { name, operations, resources, delegation: delegationOf(delegation, delegates) },
    at: now,
  });
  return { id: keyId, secret };
}

/** Makes one key in an existing workspace (see `createKeyIn`); its secret is shown once. */
export async function createKey(db: Database, clock: Clock, workspaceId: string, key: NewKey, by: KeyChange = {}): Promise<{ id: string; secret: string }> {
  return db.tx(async (sql) => {
    await existingWorkspace(sql, workspaceId);
    const made = await createKeyIn(sql, workspaceId, key, by.actor ?? OPERATOR, clock.now());
    await bumpAuthVersion(sql, workspaceId);
    return made;
  });
}

/** Revokes a key; its next request, in any process, is refused. */
export async function revokeKey(db: Database, clock: Clock, id: string, by: KeyChange = {}): Promise<{ id: string; revoked_at: number }> {
  const now = clock.now();
  await db.tx(async (sql) => {
    const row = await activeKey(sql, id, by.workspaceId);
    await sql.run(`UPDATE api_keys SET revoked_at = ? WHERE id = ?`, [now, id]);
    await bumpAuthVersion(sql, row.workspace_id);
    await recordAudit(sql, { workspaceId: row.workspace_id, actor: by.actor ?? OPERATOR, action: 'key.revoked', subject: { type: 'key', id, label: row.name }, details: { name: row.name }, at: now });
  });
  return { id, revoked_at: now };
}

/**
 * Makes a new key with the same name, grants and delegation; both work until the old one is revoked.
 * The new key records the one it replaces (`replaces_key_id`): work done with a key's access (a
 * module's background callbacks) follows that link to the replacement once the old key is revoked.
 * Refused, like any new key, while the workspace's API keys are not `on`.
 */
export async function replaceKey(db: Database, clock: Clock, id: string, by: KeyChange = {}): Promise<{ id: string; secret: string; replaces: string }> {
  return db.tx(async (sql) => {
    const old = await activeKey(sql, id, by.workspaceId);
    await mayMakeKeys(sql, old.workspace_id);
    const delegates = await sql.all<{ member_id: string }>(`SELECT member_id FROM api_key_delegates WHERE key_id = ?`, [id]);
    const { keyId, secret, secretHash } = newKeySecret();
    const now = clock.now();
    await insertKey(sql, { ...old, id: keyId, secret_hash: secretHash, replaces_key_id: id, created_at: now }, delegates.map((d) => d.member_id));
    await bumpAuthVersion(sql, old.workspace_id);
    await recordAudit(sql, {
      workspaceId: old.workspace_id, actor: by.actor ?? OPERATOR, action: 'key.replaced', subject: { type: 'key', id: keyId, label: old.name }, details: { name: old.name, replaces: id }, at: now,
    });
    return { id: keyId, secret, replaces: id };
  });
}

/**
 * Changes whom a key may act for (`Service-Act-As`): nobody, the given members, or every current and
 * future member. Takes effect from the key's next request.
 */
export async function changeDelegation(db: Database, clock: Clock, id: string, delegation: DelegationSpec, by: KeyChange = {}): Promise<{ id: string; delegation: DelegationSpec; before: DelegationSpec }> {
  return db.tx(async (sql) => {
    const key = await activeKey(sql, id, by.workspaceId);
    const current = await sql.all<{ member_id: string }>(`SELECT member_id FROM api_key_delegates WHERE key_id = ?`, [id]);
    const before = delegationOf(key.delegation, current.map((d) => d.member_id));
    const delegates = Array.isArray(delegation) ? await workspaceMembers(sql, key.workspace_id, delegation, 'delegation') : [];
    const after = Array.isArray(delegation) ? delegates : delegation;
    if (JSON.stringify(before) === JSON.stringify(after)) return { id, delegation: after, before };
    await sql.run(`UPDATE api_keys SET delegation = ? WHERE id = ?`, [Array.isArray(delegation) ? 'selected' : delegation, id]);
    await sql.run(`DELETE FROM api_key_delegates WHERE key_id = ?`, [id]);
    for (const member of delegates) await sql.run(`INSERT INTO api_key_delegates (key_id, member_id) VALUES (?, ?)`, [id, member]);
    await bumpAuthVersion(sql, key.workspace_id);
    const now = clock.now();
    await recordAudit(sql, {
      workspaceId: key.workspace_id, actor: by.actor ?? OPERATOR, action: 'key.delegation_changed', subject: { type: 'key', id, label: key.name }, details: { name: key.name, before, after }, at: now,
    });
    return { id, delegation: after, before };
  });
}

/**
 * Sets whether a workspace's API keys may be made and used: `on`; `off` (no new keys, existing ones
 * keep working); `stopped` (no new keys, and every existing key is refused with 403 from its next
 * request, in every process, until turned on again). Records `workspace.api_keys_changed`.
 */
export async function setApiKeyAccess(db: Database, clock: Clock, workspaceId: string, access: ApiKeyAccess, actor: AuditActor = OPERATOR): Promise<{ workspace_id: string; api_keys: ApiKeyAccess; before: ApiKeyAccess }> {
  return db.tx(async (sql) => {
    const ws = await existingWorkspace(sql, workspaceId);
    const before = await apiKeyAccessOf(sql, workspaceId);
    if (before !== access) {
      await sql.run(`UPDATE workspaces SET api_key_access = ? WHERE id = ?`, [access, workspaceId]);
      await bumpAuthVersion(sql, workspaceId);
      await recordAudit(sql, {
        workspaceId, actor, action: 'workspace.api_keys_changed', subject: { type: 'workspace', id: workspaceId, label: ws.name }, details: { before, after: access }, at: clock.now(),
      });
    }
    return { workspace_id: workspaceId, api_keys: access, before };
  });
}

/** Disables a member: no key may act for them, and their sign-in sessions end, from the next request on. */
export async function disableMember(db: Database, clock: Clock, id: string, actor: AuditActor = OPERATOR): Promise<{ id: string; disabled_at: number }> {
  const now = clock.now();
  await db.tx(async (sql) => {
    const member = await sql.one<{ workspace_id: string; name: string; disabled_at: number | null }>(`SELECT workspace_id, name, disabled_at FROM members WHERE id = ?`, [id]);
    if (!member) throw new AdminError(`no member ${id}`);
    if (member.disabled_at !== null) throw new AdminError(`member ${id} is already disabled`);
    await sql.run(`UPDATE members SET disabled_at = ? WHERE id = ?`, [now, id]);
    await revokeSessions(sql, { memberId: id }, now);
    await bumpAuthVersion(sql, member.workspace_id);
    await recordAudit(sql, { workspaceId: member.workspace_id, actor, action: 'member.disabled', subject: { type: 'member', id, label: member.name }, at: now });
  });
  return { id, disabled_at: now };
}

// ---- Listing and adding to an existing workspace ---------------------------------------------------

async function existingWorkspace(sql: Sql, id: string): Promise<{ id: string; name: string }> {
  const ws = await sql.one<{ id: string; name: string }>(`SELECT id, name FROM workspaces WHERE id = ?`, [id]);
  if (!ws) throw new AdminError(`no workspace ${id} (npm run admin -- workspace list)`);
  return ws;
}

/** Every workspace with how many members, sites and live keys it has. */
export function listWorkspaces(db: Database): Promise<Array<{ id: string; name: string; created_at: number; members: number; bundles: number; keys: number }>> {
  return db.sql.all(
    `SELECT w.id, w.name, w.created_at,
       (SELECT COUNT(*) FROM members m WHERE m.workspace_id = w.id) AS members,
       (SELECT COUNT(*) FROM bundles b WHERE b.workspace_id = w.id) AS bundles,
       (SELECT COUNT(*) FROM api_keys k WHERE k.workspace_id = w.id AND k.revoked_at IS NULL) AS keys
     FROM workspaces w ORDER BY w.created_at, w.id`,
  );
}

/** A workspace's members (id, name, e-mail, role, disabled). */
export async function listMembers(db: Database, workspaceId: string) {
  await existingWorkspace(db.sql, workspaceId);
  const rows = await db.sql.all<{ id: string; name: string; email: string; role: string; disabled_at: number | null; created_at: number }>(
    `SELECT id, name, email, role, disabled_at, created_at FROM members WHERE workspace_id = ? ORDER BY created_at, id`,
    [workspaceId],
  );
  return rows.map((m) => ({ ...m, disabled: m.disabled_at !== null }));
}

/** A workspace's API keys with their grants and delegation; never a secret (only its hash is stored). */
export async function listKeys(db: Database, workspaceId: string) {
  await existingWorkspace(db.sql, workspaceId);
  const rows = await db.sql.all<DbApiKeyRow>(`SELECT * FROM api_keys WHERE workspace_id = ? ORDER BY created_at, id`, [workspaceId]);
  const delegates = await db.sql.all<{ key_id: string; member_id: string }>(
    `SELECT d.key_id, d.member_id FROM api_key_delegates d JOIN api_keys k ON k.id = d.key_id WHERE k.workspace_id = ? ORDER BY d.member_id`,
    [workspaceId],
  );
  return rows.map((k) => ({
    id: k.id,
    name: k.name,
    operations: JSON.parse(k.operations) as string[],
    resources: JSON.parse(k.resources) as Record<string, Access[]>,
    delegation: k.delegation === 'selected' ? delegates.filter((d) => d.key_id === k.id).map((d) => d.member_id) : k.delegation,
    created_by: k.created_by,
    replaces_key_id: k.replaces_key_id,
    created_at: k.created_at,
    revoked_at: k.revoked_at,
    last_used_at: k.last_used_at,
  }));
}

/** A workspace's sites with their publishable (browser-safe) collect keys. */
export async function listBundles(db: Database, workspaceId: string) {
  await existingWorkspace(db.sql, workspaceId);
  return db.sql.all<{ id: string; name: string; domain: string; collect_key: string | null; created_at: number }>(
    `SELECT id, name, domain, collect_key, created_at FROM bundles WHERE workspace_id = ? ORDER BY created_at, id`,
    [workspaceId],
  );
}

/**
 * Adds members, sites, apps and keys to an existing workspace, from the same file format as `apply`
 * (its `workspace` names the workspace by `id`); keys may delegate to, and be created by, members of
 * the file (by handle) or existing members (by id). Returns the new ids and key secrets (shown once).
 */
export async function addToWorkspace(db: Database, clock: Clock, workspaceId: string, input: unknown): Promise<ApplyResult> {
  const spec = { workspace: { name: 'unused' }, ...(typeof input === 'object' && input !== null ? input : {}) };
  if (!validateFile(spec)) {
    throw new AdminError(`invalid additions: ${fileProblems(validateFile.errors, spec)}`);
  }
  if (Object.keys(spec.apps ?? {}).length) throw new AdminError('apps are added with apply (a new workspace) only');
  const now = clock.now();
  return db.tx(async (sql) => {
    await existingWorkspace(sql, workspaceId);
    const existing = new Map((await sql.all<{ id: string; email: string }>(`SELECT id, email FROM members WHERE workspace_id = ?`, [workspaceId])).map((m) => [m.id, m.email.toLowerCase()]));
    const result: ApplyResult = { workspace_id: workspaceId, members: {}, bundles: {}, collect_keys: {}, apps: {}, keys: {} };
    const emails = new Set(existing.values());
    for (const [h, m] of Object.entries(spec.members ?? {})) {
      if (emails.has(m.email.toLowerCase())) throw new AdminError(`members.${h}: e-mail ${m.email} already belongs to a member of this workspace`);
      emails.add(m.email.toLowerCase());
      const id = newId('mb');
      result.members[h] = id;
      await sql.run(`INSERT INTO members (id, workspace_id, name, email, role, disabled_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`, [id, workspaceId, m.name, m.email, m.role, m.disabled ? now : null, now]);
      await recordAudit(sql, { workspaceId, actor: OPERATOR, action: 'member.added', subject: { type: 'member', id, label: m.name }, details: { name: m.name, role: m.role, ...(m.disabled ? { disabled: true } : {}) }, at: now });
    }
    for (const [h, b] of Object.entries(spec.bundles ?? {})) {
      const id = newId('bn');
      result.bundles[h] = id;
      result.collect_keys[h] = newId('pk');
      await sql.run(`INSERT INTO bundles (id, workspace_id, name, domain, collect_key, created_at) VALUES (?, ?, ?, ?, ?, ?)`, [id, workspaceId, b.name, b.domain, result.collect_keys[h], now]);
    }
    const member = (handle: string, where: string) => {
      const id = own(result.members, handle) ?? (existing.has(handle) ? handle : undefined);
      if (!id) throw new AdminError(`${where}: no member "${handle}" in this file or this workspace`);
      return id;
    };
    const apps = await sql.all<{ id: string; app_key: string }>(`SELECT id, app_key FROM apps WHERE workspace_id = ?`, [workspaceId]);
    for (const [h, k] of Object.entries(spec.keys ?? {})) {
      const delegation: DelegationSpec = Array.isArray(k.delegation) ? k.delegation.map((m) => member(m, `keys.${h}.delegation`)) : k.delegation === 'all' ? 'all' : 'none';
      const createdBy = k.created_by === undefined ? null : member(k.created_by, `keys.${h}.created_by`);
      result.keys[h] = await createKeyIn(sql, workspaceId, { name: k.name, operations: k.operations, resources: k.resources, delegation, createdBy }, OPERATOR, now, `keys.${h}`);
    }
    await applySections(sql, spec, {
      workspaceId,
      now,
      member,
      app: (handle, where) => {
        if (handle === 'core') return 'core';
        const app = apps.find((a) => a.app_key === handle || a.id === handle);
        if (!app) throw new AdminError(`${where}: no app "${handle}" in this workspace (or use core)`);
        return app.id;
      },
    }, result);
    await bumpAuthVersion(sql, workspaceId);
    return result;
  });
}
