import type { Sql } from '../database.ts';

/** A one-time link (table one_time_links): a member's sign-in (`purpose` `signin`) or a scoped page session's. */
export interface DbOneTimeLinkRow {
  token_hash: string;
  workspace_id: string;
  purpose: string;
  subject: string;
  next: string;
  session_ttl_ms: number;
  created_at: number;
  expires_at: number;
  used_at: number | null;
}

export async function insertOneTimeLink(sql: Sql, row: Omit<DbOneTimeLinkRow, 'used_at'>): Promise<void> {
  await sql.run(
    `INSERT INTO one_time_links (token_hash, workspace_id, purpose, subject, next, session_ttl_ms, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    [row.token_hash, row.workspace_id, row.purpose, row.subject, row.next, row.session_ttl_ms, row.created_at, row.expires_at],
  );
}

export function findOneTimeLink(sql: Sql, tokenHash: string): Promise<DbOneTimeLinkRow | undefined> {
  return sql.one(`SELECT * FROM one_time_links WHERE token_hash = ?`, [tokenHash]);
}

/**
 * Marks the link used if it is unused, unexpired and of one of `purposes`, in one statement, so that of
 * two concurrent uses (any processes) exactly one gets the row back.
 */
export function consumeOneTimeLink(sql: Sql, tokenHash: string, purposes: 'signin' | 'scoped', now: number): Promise<DbOneTimeLinkRow | undefined> {
  return sql.one(
    `UPDATE one_time_links SET used_at = ? WHERE token_hash = ? AND used_at IS NULL AND expires_at > ? AND ${purposes === 'signin' ? `purpose = 'signin'` : `purpose <> 'signin'`}
     RETURNING token_hash, workspace_id, purpose, subject, next, session_ttl_ms, created_at, expires_at, used_at`,
    [now, tokenHash, now],
  );
}

/** Deletes links that expired before `before`; returns how many. */
export function deleteExpiredOneTimeLinks(sql: Sql, before: number): Promise<number> {
  return sql.run(`DELETE FROM one_time_links WHERE expires_at < ?`, [before]);
}
