/** Members and invitations of a workspace, for the Members settings page (pages.ts). */
import type { Sql } from '../../db/database.ts';
import type { DbMemberRow, MemberRole } from '../../db/rows.ts';

/** An invitation (table member_invitations). */
export interface DbInvitationRow {
  id: string;
  token_hash: string;
  workspace_id: string;
  email: string;
  role: MemberRole;
  invited_by: string;
  created_at: number;
  expires_at: number;
  used_at: number | null;
  member_id: string | null;
  revoked_at: number | null;
  revoked_by: string | null;
}

/** Every member of a workspace, oldest first. */
export function listWorkspaceMembers(sql: Sql, workspaceId: string): Promise<DbMemberRow[]> {
  return sql.all<DbMemberRow>(`SELECT * FROM members WHERE workspace_id = ? ORDER BY created_at, id`, [workspaceId]);
}

/** The member of the workspace with this address (compared without case), if any. */
export function findMemberByEmail(sql: Sql, workspaceId: string, email: string): Promise<DbMemberRow | undefined> {
  return sql.one<DbMemberRow>(`SELECT * FROM members WHERE workspace_id = ? AND LOWER(email) = ?`, [workspaceId, email.toLowerCase()]);
}

/** Active owners of the workspace other than `exceptId`. */
export async function countOtherActiveOwners(sql: Sql, workspaceId: string, exceptId: string): Promise<number> {
  const row = await sql.one<{ n: number | string }>(
    `SELECT COUNT(*) AS n FROM members WHERE workspace_id = ? AND role = 'owner' AND disabled_at IS NULL AND id <> ?`,
    [workspaceId, exceptId],
  );
  return Number(row?.n ?? 0);
}

export function setMemberRole(sql: Sql, memberId: string, role: MemberRole): Promise<number> {
  return sql.run(`UPDATE members SET role = ? WHERE id = ?`, [role, memberId]);
}

/** Disables (a time) or enables (null) a member. */
export function setMemberDisabled(sql: Sql, memberId: string, disabledAt: number | null): Promise<number> {
  return sql.run(`UPDATE members SET disabled_at = ? WHERE id = ?`, [disabledAt, memberId]);
}

export async function insertMember(sql: Sql, row: Omit<DbMemberRow, 'disabled_at'>): Promise<void> {
  await sql.run(`INSERT INTO members (id, workspace_id, name, email, role, disabled_at, created_at) VALUES (?, ?, ?, ?, ?, NULL, ?)`, [
    row.id, row.workspace_id, row.name, row.email, row.role, row.created_at,
  ]);
}

export async function insertInvitation(sql: Sql, row: Pick<DbInvitationRow, 'id' | 'token_hash' | 'workspace_id' | 'email' | 'role' | 'invited_by' | 'created_at' | 'expires_at'>): Promise<void> {
  await sql.run(
    `INSERT INTO member_invitations (id, token_hash, workspace_id, email, role, invited_by, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    [row.id, row.token_hash, row.workspace_id, row.email, row.role, row.invited_by, row.created_at, row.expires_at],
  );
}

/** The open invitations (unused, unrevoked, unexpired) of an address in a workspace, the address compared without case. */
export function openInvitationsFor(sql: Sql, workspaceId: string, email: string, now: number): Promise<Array<Pick<DbInvitationRow, 'id' | 'email' | 'role'>>> {
  return sql.all(
    `SELECT id, email, role FROM member_invitations WHERE workspace_id = ? AND LOWER(email) = ? AND used_at IS NULL AND revoked_at IS NULL AND expires_at > ? ORDER BY created_at, id`,
    [workspaceId, email.toLowerCase(), now],
  );
}

/** Open invitations (unused, unrevoked, unexpired) with their inviter's name, newest first. */
export function listOpenInvitations(sql: Sql, workspaceId: string, now: number): Promise<Array<DbInvitationRow & { inviter_name: string | null }>> {
  return sql.all(
    `SELECT i.*, m.name AS inviter_name FROM member_invitations i LEFT JOIN members m ON m.id = i.invited_by
     WHERE i.workspace_id = ? AND i.used_at IS NULL AND i.revoked_at IS NULL AND i.expires_at > ? ORDER BY i.created_at DESC, i.id`,
    [workspaceId, now],
  );
}

export function findInvitation(sql: Sql, workspaceId: string, id: string): Promise<DbInvitationRow | undefined> {
  return sql.one<DbInvitationRow>(`SELECT * FROM member_invitations WHERE workspace_id = ? AND id = ?`, [workspaceId, id]);
}

/** An invitation by its token's hash, with its workspace's and inviter's names. */
export function findInvitationByHash(
  sql: Sql,
  tokenHash: string,
): Promise<(DbInvitationRow & { workspace_name: string; inviter_name: string | null; inviter_disabled_at: number | null }) | undefined> {
  return sql.one(
    `SELECT i.*, w.name AS workspace_name, m.name AS inviter_name, m.disabled_at AS inviter_disabled_at
     FROM member_invitations i JOIN workspaces w ON w.id = i.workspace_id LEFT JOIN members m ON m.id = i.invited_by WHERE i.token_hash = ?`,
    [tokenHash],
  );
}

/** Revokes an open invitation; 1 when it was open. */
export function revokeInvitation(sql: Sql, id: string, by: string, now: number): Promise<number> {
  return sql.run(`UPDATE member_invitations SET revoked_at = ?, revoked_by = ? WHERE id = ? AND used_at IS NULL AND revoked_at IS NULL`, [now, by, id]);
}

/** Uses an open invitation (one statement: of two concurrent uses exactly one wins); 1 when it did. */
export function consumeInvitation(sql: Sql, tokenHash: string, memberId: string, now: number): Promise<number> {
  return sql.run(
    `UPDATE member_invitations SET used_at = ?, member_id = ? WHERE token_hash = ? AND used_at IS NULL AND revoked_at IS NULL AND expires_at > ?`,
    [now, memberId, tokenHash, now],
  );
}

/** Closes the other open invitations of an address in a workspace (its owner just joined): revoked by the new member. */
export function revokeOpenInvitationsFor(sql: Sql, workspaceId: string, email: string, by: string, now: number): Promise<number> {
  return sql.run(
    `UPDATE member_invitations SET revoked_at = ?, revoked_by = ? WHERE workspace_id = ? AND LOWER(email) = ? AND used_at IS NULL AND revoked_at IS NULL`,
    [now, by, workspaceId, email.toLowerCase()],
  );
}
