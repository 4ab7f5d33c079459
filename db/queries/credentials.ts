import type { Sql } from '../database.ts';
import type { DbApiKeyRow, DbMemberRow, DbRateLimitRow } from '../rows.ts';

export interface DbKeyForAuth extends DbApiKeyRow {
  auth_version: number;
}

/** The key with its workspace's auth version; revoked keys too (the caller decides). */
export function findKeyForAuth(sql: Sql, keyId: string): Promise<DbKeyForAuth | undefined> {
  return sql.one<DbKeyForAuth>(
    `SELECT k.*, w.auth_version FROM api_keys k JOIN workspaces w ON w.id = k.workspace_id WHERE k.id = ?`,
    [keyId],
  );
}

export async function listKeyDelegateIds(sql: Sql, keyId: string): Promise<string[]> {
  const rows = await sql.all<{ member_id: string }>(`SELECT member_id FROM api_key_delegates WHERE key_id = ?`, [keyId]);
  return rows.map((r) => r.member_id);
}

export function listWorkspaceMembers(sql: Sql, workspaceId: string): Promise<DbMemberRow[]> {
  return sql.all<DbMemberRow>(`SELECT * FROM members WHERE workspace_id = ? ORDER BY name, id`, [workspaceId]);
}

export interface RateLimitStep {
  keyId: string;
  /** Current time, microseconds. */
  nowUs: number;
  /** Emission interval, microseconds per request. */
  intervalUs: number;
  /** Burst tolerance, microseconds. */
  toleranceUs: number;
}

/**
 * One GCRA step for the key's bucket, done only while the key is live (not revoked). Returns the
 * bucket after the step with the workspace's auth version, or nothing when the key is revoked or gone.
 * One statement, so every process shares the budget and sees a revocation at once.
 */
export function takeRateLimitToken(sql: Sql, step: RateLimitStep): Promise<Pick<DbRateLimitRow, 'tat' | 'allowed' | 'auth_version'> | undefined> {
  const max = sql.dialect === 'pg' ? 'GREATEST' : 'MAX';
  const n = 'CAST(? AS BIGINT)';
  const { keyId, nowUs, intervalUs, toleranceUs } = step;
  return sql.one(
    `INSERT INTO rate_limits (bucket, tat, allowed, auth_version)
     SELECT k.id, ${n}, TRUE, w.auth_version FROM api_keys k JOIN workspaces w ON w.id = k.workspace_id
     WHERE k.id = ? AND k.revoked_at IS NULL
     ON CONFLICT (bucket) DO UPDATE SET
       allowed = (${max}(rate_limits.tat, ${n}) - ${n} <= ${n}),
       tat = CASE WHEN ${max}(rate_limits.tat, ${n}) - ${n} <= ${n} THEN ${max}(rate_limits.tat, ${n}) + ${n} ELSE rate_limits.tat END,
       auth_version = excluded.auth_version
     RETURNING tat, allowed, auth_version`,
    [nowUs + intervalUs, keyId, nowUs, nowUs, toleranceUs, nowUs, nowUs, toleranceUs, nowUs, intervalUs],
  );
}
