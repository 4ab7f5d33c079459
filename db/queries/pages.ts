/** The page kit's tables (server/pages/): held answers and scoped page sessions. */
import type { Sql } from '../database.ts';

export interface DbPageHoldRow {
  session_id: string;
  path: string;
  sealed: string;
  created_at: number;
  expires_at: number;
}

/** Holds an answer for the session's next view of `path`, replacing one held there before; drops expired holds. */
export async function putPageHold(sql: Sql, row: DbPageHoldRow): Promise<void> {
  await sql.run(`DELETE FROM page_holds WHERE expires_at <= ? OR (session_id = ? AND path = ?)`, [row.created_at, row.session_id, row.path]);
  await sql.run(`INSERT INTO page_holds (session_id, path, sealed, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`, [
    row.session_id, row.path, row.sealed, row.created_at, row.expires_at,
  ]);
}

/** Takes the held answer (one statement: of two concurrent views, one gets it), if unexpired. */
export function takePageHold(sql: Sql, sessionId: string, path: string, now: number): Promise<Pick<DbPageHoldRow, 'sealed'> | undefined> {
  return sql.one(`DELETE FROM page_holds WHERE session_id = ? AND path = ? AND expires_at > ? RETURNING sealed`, [sessionId, path, now]);
}

export interface DbScopedSessionRow {
  id: string;
  secret_hash: string;
  workspace_id: string;
  purpose: string;
  subject: string;
  created_at: number;
  expires_at: number;
  revoked_at: number | null;
}

export async function insertScopedSession(sql: Sql, row: Omit<DbScopedSessionRow, 'revoked_at'>): Promise<void> {
  await sql.run(`INSERT INTO scoped_sessions (id, secret_hash, workspace_id, purpose, subject, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)`, [
    row.id, row.secret_hash, row.workspace_id, row.purpose, row.subject, row.created_at, row.expires_at,
  ]);
}

export function findScopedSession(sql: Sql, id: string): Promise<DbScopedSessionRow | undefined> {
  return sql.one(`SELECT * FROM scoped_sessions WHERE id = ?`, [id]);
}

/** Ends every live scoped session of a purpose and subject (e.g. when the signer is done); returns how many. */
export function revokeScopedSessions(sql: Sql, workspaceId: string, purpose: string, subject: string, now: number): Promise<number> {
  return sql.run(`UPDATE scoped_sessions SET revoked_at = ? WHERE workspace_id = ? AND purpose = ? AND subject = ? AND revoked_at IS NULL`, [now, workspaceId, purpose, subject]);
}

/** Deletes scoped sessions that ended (expired or revoked) before `before`. */
export async function deleteEndedScopedSessions(sql: Sql, before: number): Promise<void> {
  await sql.run(`DELETE FROM scoped_sessions WHERE expires_at < ? OR revoked_at < ?`, [before, before]);
}
