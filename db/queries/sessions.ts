import type { Sql } from '../database.ts';
import type { DbMemberRow, DbRateLimitRow, MemberRole } from '../rows.ts';
import { takeGcraToken } from './credentials.ts';

/** A member's sign-in session (table member_sessions). */
export interface DbMemberSessionRow {
  id: string;
  secret_hash: string;
  workspace_id: string;
  member_id: string;
  /** The workspace's auth version at sign-in (kept, no longer consulted: keys and rules do not end sessions). */
  auth_version: number;
  /** The member's role at sign-in: a change of role ends the session (null only for rows of a member since deleted). */
  member_role: MemberRole | null;
  created_at: number;
  expires_at: number;
  revoked_at: number | null;
}

/** The member with the workspace's current auth version. */
export function findMemberForSignin(sql: Sql, memberId: string): Promise<(DbMemberRow & { auth_version: number }) | undefined> {
  return sql.one(`SELECT m.*, w.auth_version FROM members m JOIN workspaces w ON w.id = m.workspace_id WHERE m.id = ?`, [memberId]);
}

export async function insertSession(sql: Sql, row: Omit<DbMemberSessionRow, 'revoked_at'>): Promise<void> {
  await sql.run(
    `INSERT INTO member_sessions (id, secret_hash, workspace_id, member_id, auth_version, member_role, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    [row.id, row.secret_hash, row.workspace_id, row.member_id, row.auth_version, row.member_role, row.created_at, row.expires_at],
  );
}

/** The session with its member's name, role and state now, whatever its own state (the caller decides). */
export function findSessionForAuth(
  sql: Sql,
  id: string,
): Promise<(DbMemberSessionRow & { member_name: string; role_now: DbMemberRow['role']; member_disabled_at: number | null }) | undefined> {
  return sql.one(
    `SELECT s.*, m.name AS member_name, m.role AS role_now, m.disabled_at AS member_disabled_at
     FROM member_sessions s JOIN members m ON m.id = s.member_id WHERE s.id = ?`,
    [id],
  );
}

/**
 * Ends one session (by id; with `secretHash`, only when the token's hash matches: sign-out by its
 * holder), or every live session of a member; returns how many were ended.
 */
export function revokeSessions(sql: Sql, by: { id: string; secretHash?: string } | { memberId: string }, now: number): Promise<number> {
  if ('memberId' in by) return sql.run(`UPDATE member_sessions SET revoked_at = ? WHERE member_id = ? AND revoked_at IS NULL`, [now, by.memberId]);
  return by.secretHash === undefined
    ? sql.run(`UPDATE member_sessions SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, [now, by.id])
    : sql.run(`UPDATE member_sessions SET revoked_at = ? WHERE id = ? AND secret_hash = ? AND revoked_at IS NULL`, [now, by.id, by.secretHash]);
}

/**
 * One GCRA step for the session's bucket (the same buckets as API keys, keyed by session id), taken
 * only while the session is live: not revoked, not expired, its member active and in the role it had
 * at sign-in. Changes to the workspace's keys, other members or rules do not end it. Nothing comes
 * back for a dead session.
 */
export function takeSessionRateLimitToken(
  sql: Sql,
  step: { sessionId: string; now: number; nowUs: number; intervalUs: number; toleranceUs: number },
): Promise<Pick<DbRateLimitRow, 'tat' | 'allowed'> | undefined> {
  return takeGcraToken(
    sql,
    {
      id: 's.id',
      from:
        'member_sessions s JOIN workspaces w ON w.id = s.workspace_id JOIN members m ON m.id = s.member_id ' +
        'WHERE s.id = ? AND s.revoked_at IS NULL AND s.expires_at > ? AND m.disabled_at IS NULL AND m.role = s.member_role',
      params: [step.sessionId, step.now],
    },
    step,
  );
}

/** Deletes sessions that ended (expired or revoked) before `before`, with their rate-limit buckets; returns how many. */
export async function deleteEndedSessions(sql: Sql, before: number): Promise<number> {
  const ended = `SELECT id FROM member_sessions WHERE expires_at < ? OR revoked_at < ?`;
  await sql.run(`DELETE FROM rate_limits WHERE bucket IN (${ended})`, [before, before]);
  return sql.run(`DELETE FROM member_sessions WHERE id IN (${ended})`, [before, before]);
}
