import type { Sql } from '../database.ts';
import type { DbAppRow, DbBundleRow, DbMemberRow } from '../rows.ts';

export function listBundles(sql: Sql, workspaceId: string): Promise<DbBundleRow[]> {
  return sql.all<DbBundleRow>(`SELECT * FROM bundles WHERE workspace_id = ? ORDER BY name, id`, [workspaceId]);
}

/** A member of the workspace by id (any state), if any. */
export function findWorkspaceMember(sql: Sql, workspaceId: string, memberId: string): Promise<DbMemberRow | undefined> {
  return sql.one<DbMemberRow>(`SELECT * FROM members WHERE workspace_id = ? AND id = ?`, [workspaceId, memberId]);
}

export function listApps(sql: Sql, workspaceId: string): Promise<DbAppRow[]> {
  return sql.all<DbAppRow>(`SELECT * FROM apps WHERE workspace_id = ? ORDER BY name, id`, [workspaceId]);
}

/** Marks every cached credential of the workspace stale (grants, keys or members changed). */
export async function bumpAuthVersion(sql: Sql, workspaceId: string): Promise<void> {
  await sql.run(`UPDATE workspaces SET auth_version = auth_version + 1 WHERE id = ?`, [workspaceId]);
}

/** Whether a member of this workspace with this id exists and is not disabled. */
export async function isActiveMember(sql: Sql, workspaceId: string, memberId: string): Promise<boolean> {
  const row = await sql.one(`SELECT 1 AS ok FROM members WHERE workspace_id = ? AND id = ? AND disabled_at IS NULL`, [workspaceId, memberId]);
  return row !== undefined;
}
