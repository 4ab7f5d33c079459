/**
 * MCP connections (issue 17): what a member approved on the consent page for one OAuth client. The
 * connection id (`mc_...`) is the OAuth account id of its tokens and their rate-limit bucket.
 *
 * - Personal access acts as the approving member: its operations are the catalogued operations that
 *   member's role allows (every listed operation that may run as a member, whose declared resource
 *   access the role has), narrowed to the chosen toolsets and, when read-only, to queries; the
 *   member's role at approval is recorded, and a role change or disabling ends the connection.
 * - Workspace access (owners and admins only) holds the operations and resource access chosen with
 *   the API keys' grants chooser, narrowed the same way, and optionally members it may act for
 *   (`Service-Act-As`), like a key.
 * - Operations are frozen at approval: operations added to the catalogue later never widen it.
 * - Revoking sets `revoked_at`, deletes every token of its OAuth grant in the same transaction, bumps
 *   the workspace's auth version (cached credentials reload), records `connection.revoked`, and then
 *   lets the authorization server drop what it holds of the grant (`OAuthServer.revokeGrant`). The
 *   connection's next call is refused.
 */
import type { Database, Sql } from '../../db/database.ts';
import {
  type ConnectionAccess,
  type ConnectionDelegation,
  type DbConnectionForAuth,
  type DbConnectionRow,
  deleteGrantRecords,
  findConnection,
  findConnectionForAuth as findRow,
  insertConnection,
  listConnectionDelegateIds,
  listConnectionRows,
  markConnectionRevoked,
} from '../../db/queries/connections.ts';
import { bumpAuthVersion } from '../../db/queries/workspaces.ts';
import type { MemberRole } from '../../db/rows.ts';
import { type Access, type CatalogueEntry, catalogue } from '../../generated/catalogue.ts';
import { AdminError, apiKeyAccessOf, type DelegationSpec, expandOperationGrants, grantableResourceTypes } from '../../server/admin.ts';
import { type AuditActor, OPERATOR, recordAudit } from '../../server/audit.ts';
import type { Clock } from '../../server/clock.ts';
import { newId } from '../../server/ids.ts';
import { roleAllows } from '../../server/roles.ts';
import { listingOf, type ToolListing } from './listing.ts';
import { toolsetNames } from './tools.ts';

export type { ConnectionAccess, DbConnectionForAuth };

const listed = (catalogue as readonly CatalogueEntry[]).filter((e) => e.listed);

/** Why no workspace-access connection can be approved while the workspace's API keys are not `on` (the consent page shows it). */
export const WORKSPACE_ACCESS_OFF = (keys: string) =>
  `workspace access is not available: the operator has ${keys === 'stopped' ? 'stopped API keys for this workspace' : 'not turned API keys on for this workspace'}, and a shared connection is a workspace credential like a key; choose personal access (acting as you), or ask the operator to turn API keys on`;

/** Whether a member in `role` may call `entry` as themselves (it may run as a member, and the role has the access it declares). */
export function roleMayCall(role: MemberRole, entry: CatalogueEntry): boolean {
  if (!entry.listed || entry.actAs === 'none') return false;
  return entry.resource === null || entry.access.every((a) => roleAllows(role, entry.resource!, a));
}

/** The operations a member in `role` may call as themselves, sorted (what personal access starts from). */
export function memberOperations(role: MemberRole): string[] {
  return listed.filter((e) => roleMayCall(role, e)).map((e) => e.id).sort();
}

/** Operations narrowed to toolsets (namespaces) and, when read-only, to queries; sorted. */
export function narrowOperations(operations: Iterable<string>, toolsets: readonly string[], readOnly: boolean): string[] {
  const sets = new Set(toolsets);
  const byId = new Map(listed.map((e) => [e.id, e]));
  const out = new Set<string>();
  for (const id of operations) {
    const e = byId.get(id);
    if (e && sets.has(e.namespace) && (!readOnly || e.kind === 'query')) out.add(id);
  }
  return [...out].sort();
}

/** The toolsets (namespaces) having at least one of `operations`. */
export function toolsetsOf(operations: Iterable<string>): string[] {
  const byId = new Map(listed.map((e) => [e.id, e.namespace]));
  const out = new Set<string>();
  for (const id of operations) {
    const ns = byId.get(id);
    if (ns) out.add(ns);
  }
  return toolsetNames.filter((n) => out.has(n));
}

/** A connection as the pages, the CLI and the credential path read it. */
export interface Connection {
  id: string;
  workspaceId: string;
  clientId: string;
  clientName: string;
  redirectUri: string;
  access: ConnectionAccess;
  memberId: string | null;
  memberRole: MemberRole | null;
  operations: string[];
  resources: Record<string, Access[]>;
  toolsets: string[];
  readOnly: boolean;
  /** How `tools/list` lists its tools (handlers/mcp/listing.ts). */
  toolListing: ToolListing;
  delegation: ConnectionDelegation;
  delegates: string[];
  grantId: string | null;
  createdBy: string;
  createdAt: number;
  lastUsedAt: number | null;
  revokedAt: number | null;
  /** With revokedAt: why it ended when no person revoked it (`member_disabled`, `member_role_changed`, `member_gone`); null when revoked. */
  endedReason: string | null;
}

export function connectionOf(row: DbConnectionRow, delegates: readonly string[]): Connection {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    clientId: row.client_id,
    clientName: row.client_name,
    redirectUri: row.redirect_uri,
    access: row.access,
    memberId: row.member_id,
    memberRole: row.member_role,
    operations: JSON.parse(row.operations) as string[],
    resources: JSON.parse(row.resources) as Record<string, Access[]>,
    toolsets: JSON.parse(row.toolsets) as string[],
    readOnly: Boolean(row.read_only),
    toolListing: listingOf(row.tool_listing),
    delegation: row.delegation,
    delegates: [...delegates],
    grantId: row.grant_id,
    createdBy: row.created_by,
    createdAt: Number(row.created_at),
    lastUsedAt: row.last_used_at === null ? null : Number(row.last_used_at),
    revokedAt: row.revoked_at === null ? null : Number(row.revoked_at),
    endedReason: row.ended_reason ?? null,
  };
}

/** What the consent page approved. */
export interface NewConnection {
  workspaceId: string;
  clientId: string;
  clientName: string;
  redirectUri: string;
  access: ConnectionAccess;
  /** The approving member (personal access acts as them; they are the creator either way). */
  member: { id: string; name: string; role: MemberRole };
  toolsets: readonly string[];
  readOnly: boolean;
  /** How `tools/list` lists its tools; absent: `compact`. */
  toolListing?: ToolListing;
  /** Workspace access: the chosen grants (`ns.*` or operation ids) and resource access; ignored for personal access. */
  operations?: readonly string[];
  resources?: Record<string, Access[]>;
  delegation?: DelegationSpec;
  actor?: AuditActor;
  now: number;
}

/**
 * Makes a connection in the caller's transaction and records `connection.approved`. Throws
 * AdminError (in words) for a choice that gives it nothing to call, an unknown toolset or resource
 * type, or a delegate who is not a member of the workspace. Returns the connection.
 */
export async function createConnection(sql: Sql, input: NewConnection): Promise<Connection> {
  const toolsets = [...new Set(input.toolsets)];
  for (const t of toolsets) if (!toolsetNames.includes(t)) throw new AdminError(`unknown toolset "${t}" (known: ${toolsetNames.join(', ')})`);
  if (!toolsets.length) throw new AdminError('choose at least one toolset the connection may use');
  const ordered = toolsetNames.filter((t) => toolsets.includes(t));
  const personal = input.access === 'personal';
  const base = personal ? memberOperations(input.member.role) : expandOperationGrants(input.operations ?? []);
  const operations = narrowOperations(base, ordered, input.readOnly);
  if (!operations.length) {
    throw new AdminError(
      personal
        ? `your role gives no ${input.readOnly ? 'read-only ' : ''}operation in the chosen toolsets: choose other toolsets${input.readOnly ? ' or allow changes' : ''}`
        : `the chosen operations have none in the chosen toolsets${input.readOnly ? ' that only reads' : ''}: choose operations inside the toolsets`,
    );
  }
  let resources: Record<string, Access[]> = {};
  let delegation: ConnectionDelegation = 'none';
  let delegates: string[] = [];
  if (!personal) {
    // A shared connection is a workspace credential like a key: only while the operator has API keys on.
    const keys = await apiKeyAccessOf(sql, input.workspaceId);
    if (keys !== 'on') throw new AdminError(WORKSPACE_ACCESS_OFF(keys));
    const known = new Set(await grantableResourceTypes(sql, input.workspaceId));
    for (const [type, access] of Object.entries(input.resources ?? {})) {
      if (!known.has(type)) throw new AdminError(`unknown resource type "${type}"`);
      const chosen = [...new Set(access)].filter((a) => !input.readOnly || a === 'read').sort() as Access[];
      if (chosen.length) resources[type] = chosen;
    }
    const spec = input.delegation ?? 'none';
    if (Array.isArray(spec)) {
      const members = new Set((await sql.all<{ id: string }>(`SELECT id FROM members WHERE workspace_id = ? AND disabled_at IS NULL`, [input.workspaceId])).map((m) => m.id));
      for (const id of spec) if (!members.has(id)) throw new AdminError('one of the chosen members is not an active member of this workspace');
      delegates = [...new Set(spec)].sort();
      delegation = delegates.length ? 'selected' : 'none';
    } else delegation = spec;
  } else resources = {};
  const id = newId('mc');
  const row = {
    id,
    workspace_id: input.workspaceId,
    client_id: input.clientId.slice(0, 2048),
    client_name: (input.clientName.trim() || input.clientId).slice(0, 200),
    redirect_uri: input.redirectUri.slice(0, 2048),
    access: input.access,
    member_id: personal ? input.member.id : null,
    member_role: personal ? input.member.role : null,
    operations: JSON.stringify(operations),
    resources: JSON.stringify(resources),
    toolsets: JSON.stringify(ordered),
    read_only: input.readOnly,
    delegation,
    created_by: input.member.id,
    created_at: input.now,
    tool_listing: input.toolListing ?? 'compact',
  };
  await insertConnection(sql, row, delegates);
  await recordAudit(sql, {
    workspaceId: input.workspaceId,
    actor: input.actor ?? { type: 'member', id: input.member.id, label: input.member.name },
    action: 'connection.approved',
    subject: { type: 'connection', id, label: row.client_name },
    details: {
      client: row.client_name,
      client_id: row.client_id,
      redirect_uri: row.redirect_uri,
      access: input.access,
      ...(personal ? { acts_as: input.member.id } : { resources, delegation: delegation === 'selected' ? delegates : delegation }),
      operations,
      toolsets: ordered,
      read_only: input.readOnly,
      tool_listing: row.tool_listing,
    },
    at: input.now,
  });
  return connectionOf({ ...row, grant_id: null, last_used_at: null, revoked_at: null, read_only: input.readOnly }, delegates);
}

/** A connection with its workspace's auth version and its member as they are now (the credential path); undefined when unknown. */
export async function findConnectionForAuth(sql: Sql, id: string): Promise<(Connection & { authVersion: number; member: { name: string; roleNow: MemberRole; disabled: boolean } | null }) | undefined> {
  const row = await findRow(sql, id);
  if (!row) return undefined;
  const delegates = row.delegation === 'selected' ? await listConnectionDelegateIds(sql, id) : [];
  return {
    ...connectionOf(row, delegates),
    authVersion: Number(row.auth_version),
    member: row.member_id && row.member_name !== null ? { name: row.member_name, roleNow: row.member_role_now!, disabled: row.member_disabled_at !== null } : null,
  };
}

/** What an ended connection's `ended_reason` says, in words. */
const ENDED_REASONS: Record<string, string> = {
  member_disabled: 'its member was disabled',
  member_role_changed: 'its member’s role changed',
  member_gone: 'its member is gone',
};

/** Why a connection no longer works, in words; null while it works (not revoked, member active in the role approved). */
export function connectionEnded(
  c: Pick<Connection, 'revokedAt' | 'access' | 'memberRole'> & { endedReason?: string | null; member: { roleNow: MemberRole; disabled: boolean } | null },
): string | null {
  if (c.revokedAt !== null) return c.endedReason ? (ENDED_REASONS[c.endedReason] ?? c.endedReason) : 'revoked';
  if (c.access === 'personal') {
    if (!c.member) return 'its member is gone';
    if (c.member.disabled) return 'its member is disabled';
    if (c.memberRole !== null && c.member.roleNow !== c.memberRole) return `its member’s role changed (approved as ${c.memberRole}, now ${c.member.roleNow})`;
  }
  return null;
}

/** Every connection of a workspace, newest first (revoked ones too). */
export async function listConnections(sql: Sql, workspaceId: string): Promise<Connection[]> {
  return (await listConnectionRows(sql, workspaceId)).map((r) => connectionOf(r, r.delegates));
}

export interface RevokeBy {
  actor?: AuditActor;
  /** Refuse a connection of another workspace (pages). */
  workspaceId?: string;
  /** A member who may revoke only their own personal connections (a plain member on the page). */
  onlyPersonalOf?: string;
  /** The authorization server's own revocation of the grant, after the commit (`OAuthServer.revokeGrant`). */
  revokeGrant?: (grantId: string) => Promise<void>;
}

/**
 * Revokes a connection: `revoked_at`, its grant's tokens deleted, the workspace's auth version
 * moved and `connection.revoked` recorded, in one transaction; then `revokeGrant`. Throws AdminError
 * for an unknown, foreign or already revoked connection, or one the member may not revoke.
 */
export async function revokeConnection(db: Database, clock: Clock, id: string, by: RevokeBy = {}): Promise<{ id: string; revoked_at: number }> {
  const now = clock.now();
  const row = await db.tx(async (sql) => {
    const row = await findConnection(sql, id);
    if (!row || (by.workspaceId !== undefined && row.workspace_id !== by.workspaceId)) throw new AdminError(`no connection ${id}`);
    if (by.onlyPersonalOf !== undefined && !(row.access === 'personal' && row.member_id === by.onlyPersonalOf)) {
      throw new AdminError('only owners and admins revoke workspace connections and other members’ connections; you may revoke your own personal ones');
    }
    if (!(await markConnectionRevoked(sql, id, now))) throw new AdminError(`connection ${id} (${row.client_name}) is already revoked`);
    if (row.grant_id) await deleteGrantRecords(sql, row.grant_id);
    await bumpAuthVersion(sql, row.workspace_id);
    await recordAudit(sql, {
      workspaceId: row.workspace_id,
      actor: by.actor ?? OPERATOR,
      action: 'connection.revoked',
      subject: { type: 'connection', id, label: row.client_name },
      details: { client: row.client_name, access: row.access, ...(row.member_id ? { acts_as: row.member_id } : {}) },
      at: now,
    });
    return row;
  });
  if (row.grant_id && by.revokeGrant) await by.revokeGrant(row.grant_id);
  return { id, revoked_at: now };
}
