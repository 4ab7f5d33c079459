import type { Sql } from '../database.ts';
import type { DbRateLimitRow } from '../rows.ts';
import { takeGcraToken } from './credentials.ts';

/** The authorization server's record of an access token (table oauth_records, model 'AccessToken'). */
export interface DbAccessTokenRecord {
  payload: string;
  /** Unix ms, or null. */
  expires_at: number | null;
  consumed_at: number | null;
}

/** The access token whose id hashes to `idHash` (SHA-256 hex), or nothing. */
export function findAccessToken(sql: Sql, idHash: string): Promise<DbAccessTokenRecord | undefined> {
  return sql.one<DbAccessTokenRecord>(`SELECT payload, expires_at, consumed_at FROM oauth_records WHERE model = 'AccessToken' AND id_hash = ?`, [idHash]);
}

/**
 * One GCRA step on the connection's bucket (its id), taken only while the access token's record still
 * exists unexpired and the connection is live: not revoked, and for personal access its member active
 * and in the role they approved it with. Returns nothing otherwise: one statement proves both.
 */
export function takeConnectionRateLimitToken(
  sql: Sql,
  step: { connectionId: string; tokenHash: string; now: number; nowUs: number; intervalUs: number; toleranceUs: number },
): Promise<Pick<DbRateLimitRow, 'tat' | 'allowed' | 'auth_version'> | undefined> {
  return takeGcraToken(
    sql,
    {
      id: 'c.id',
      from: `mcp_connections c JOIN workspaces w ON w.id = c.workspace_id
             JOIN oauth_records t ON t.model = 'AccessToken' AND t.id_hash = ?
             LEFT JOIN members m ON m.id = c.member_id
             WHERE c.id = ? AND c.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > ?) AND t.consumed_at IS NULL
               AND (c.access <> 'personal' OR (m.id IS NOT NULL AND m.disabled_at IS NULL AND (c.member_role IS NULL OR m.role = c.member_role)))`,
      params: [step.tokenHash, step.connectionId, step.now],
    },
    step,
  );
}

/** Why a personal connection was ended without a person revoking it (`mcp_connections.ended_reason`). */
export type ConnectionEndedReason = 'member_disabled' | 'member_role_changed' | 'member_gone';

/** Ends a connection whose member was disabled or changed role (for good, as such a session ends), recording why; true when it did. */
export async function endConnection(sql: Sql, id: string, now: number, reason: ConnectionEndedReason): Promise<boolean> {
  return (await sql.run(`UPDATE mcp_connections SET revoked_at = ?, ended_reason = ? WHERE id = ? AND revoked_at IS NULL`, [now, reason, id])) > 0;
}

/**
 * Records that a connection was used at `now`, unless recorded less than `intervalMs` ago (by any
 * process): at most one write per connection and interval. Returns whether it wrote.
 */
export async function touchConnectionUsage(sql: Sql, id: string, now: number, intervalMs: number): Promise<boolean> {
  return (await sql.run(`UPDATE mcp_connections SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at <= ?)`, [now, id, now - intervalMs])) > 0;
}
