/**
 * MCP connections (issue 17): what a member approved on the consent page (handlers/mcp/consent.ts), the
 * OAuth account of its tokens. Tables `mcp_connections` and `mcp_connection_delegates`
 * (db/migrations/20261230000000_agent_access.ts, `member_role` from 20261230000100).
 */
import type { Sql } from '../database.ts';
import type { MemberRole } from '../rows.ts';

export type ConnectionAccess = 'personal' | 'workspace';
export type ConnectionDelegation = 'none' | 'selected' | 'all';

export interface DbConnectionRow {
  id: string;
  workspace_id: string;
  client_id: string;
  client_name: string;
  redirect_uri: string;
  access: ConnectionAccess;
  /** Personal access: the member it acts as. */
  member_id: string | null;
  /** Personal access: that member's role at approval (a change ends the connection). */
  member_role: MemberRole | null;
  /** JSON array of operation ids, frozen at approval. */
  operations: string;
  /** JSON object resource type -> access (workspace access; `{}` for personal). */
  resources: string;
  /** JSON array of toolset (namespace) names. */
  toolsets: string;
  read_only: boolean | number;
  delegation: ConnectionDelegation;
  grant_id: string | null;
  created_by: string;
  created_at: number;
  last_used_at: number | null;
  revoked_at: number | null;
  /** Set with revoked_at when the connection ended because of its member (disabled, role changed, gone); null when a person revoked it. */
  ended_reason?: string | null;
  /** How `tools/list` lists the tools: `compact` or `full` (handlers/mcp/listing.ts). */
  tool_listing: string;
}

export async function insertConnection(sql: Sql, row: Omit<DbConnectionRow, 'grant_id' | 'last_used_at' | 'revoked_at'>, delegates: readonly string[]): Promise<void> {
  await sql.run(
    `INSERT INTO mcp_connections (id, workspace_id, client_id, client_name, redirect_uri, access, member_id, member_role, operations, resources, toolsets, read_only, delegation, created_by, created_at, tool_listing)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [
      row.id, row.workspace_id, row.client_id, row.client_name, row.redirect_uri, row.access, row.member_id, row.member_role,
      row.operations, row.resources, row.toolsets, Boolean(row.read_only), row.delegation, row.created_by, row.created_at, row.tool_listing,
    ],
  );
  for (const member of delegates) await sql.run(`INSERT INTO mcp_connection_delegates (connection_id, member_id) VALUES (?, ?)`, [row.id, member]);
}

/** Records the oidc-provider grant of a connection (set once, when the consent is finished). */
export function setConnectionGrant(sql: Sql, id: string, grantId: string): Promise<number> {
  return sql.run(`UPDATE mcp_connections SET grant_id = ? WHERE id = ?`, [grantId, id]);
}

export function findConnection(sql: Sql, id: string): Promise<DbConnectionRow | undefined> {
  return sql.one<DbConnectionRow>(`SELECT * FROM mcp_connections WHERE id = ?`, [id]);
}

export interface DbConnectionForAuth extends DbConnectionRow {
  /** The workspace's auth version (moves when keys, members or connections change). */
  auth_version: number;
  /** Personal access: the member's name, role and disabled time now (null for workspace access). */
  member_name: string | null;
  member_role_now: MemberRole | null;
  member_disabled_at: number | null;
  /** The workspace's API-key switch (`on`, `off`, `stopped`): `stopped` refuses workspace-access connections too. */
  api_key_access?: string;
}

/** A connection with its workspace's auth version and its member as they are now; revoked ones too (the caller decides). */
export function findConnectionForAuth(sql: Sql, id: string): Promise<DbConnectionForAuth | undefined> {
  return sql.one<DbConnectionForAuth>(
    `SELECT c.*, w.auth_version, w.api_key_access, m.name AS member_name, m.role AS member_role_now, m.disabled_at AS member_disabled_at
       FROM mcp_connections c JOIN workspaces w ON w.id = c.workspace_id LEFT JOIN members m ON m.id = c.member_id
      WHERE c.id = ?`,
    [id],
  );
}

export async function listConnectionDelegateIds(sql: Sql, id: string): Promise<string[]> {
  const rows = await sql.all<{ member_id: string }>(`SELECT member_id FROM mcp_connection_delegates WHERE connection_id = ? ORDER BY member_id`, [id]);
  return rows.map((r) => r.member_id);
}

/** Every connection of a workspace (revoked ones too), newest first, with its delegates. */
export async function listConnectionRows(sql: Sql, workspaceId: string): Promise<Array<DbConnectionRow & { delegates: string[] }>> {
  const rows = await sql.all<DbConnectionRow>(`SELECT * FROM mcp_connections WHERE workspace_id = ? ORDER BY created_at DESC, id DESC`, [workspaceId]);
  const delegates = await sql.all<{ connection_id: string; member_id: string }>(
    `SELECT d.connection_id, d.member_id FROM mcp_connection_delegates d JOIN mcp_connections c ON c.id = d.connection_id WHERE c.workspace_id = ? ORDER BY d.member_id`,
    [workspaceId],
  );
  return rows.map((r) => ({ ...r, delegates: delegates.filter((d) => d.connection_id === r.id).map((d) => d.member_id) }));
}

/** Marks a live connection revoked; returns whether it was live. */
export async function markConnectionRevoked(sql: Sql, id: string, now: number): Promise<boolean> {
  return (await sql.run(`UPDATE mcp_connections SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, [now, id])) > 0;
}

/**
 * Deletes every authorization-server record of a grant (its tokens, codes and the grant itself, as
 * the adapter's `revokeByGrantId` does), in the caller's transaction. Returns how many.
 */
export function deleteGrantRecords(sql: Sql, grantId: string): Promise<number> {
  return sql.run(`DELETE FROM oauth_records WHERE grant_id = ?`, [grantId]);
}

/**
 * Records that a connection was used at `now`, unless recorded less than `intervalMs` ago (by any
 * process): at most one write per connection and interval. Returns whether it wrote.
 */
export async function touchConnectionUsage(sql: Sql, id: string, now: number, intervalMs: number): Promise<boolean> {
  const n = await sql.run(`UPDATE mcp_connections SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at <= ?)`, [now, id, now - intervalMs]);
  return n > 0;
}
