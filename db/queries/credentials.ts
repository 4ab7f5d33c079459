import type { Sql, SqlValue } from '../database.ts';
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
 * One GCRA step (generic cell-rate algorithm) on a bucket, taken only while `live` finds the
 * credential: `live.from` is a FROM ... WHERE that yields the bucket id as `live.id` and joins the
 * workspace as `w`. Returns the bucket after the step with the workspace's auth version, or nothing
 * when the credential is gone, revoked or ended. One statement, so every process shares the budget
 * and sees a revocation at once. Keys and sign-in sessions both go through it.
 */
export function takeGcraToken(
  sql: Sql,
  live: { id: string; from: string; params: readonly SqlValue[] },
  step: Omit<RateLimitStep, 'keyId'>,
): Promise<Pick<DbRateLimitRow, 'tat' | 'allowed' | 'auth_version'> | undefined> {
  const max = sql.dialect === 'pg' ? 'GREATEST' : 'MAX';
  const n = 'CAST(? AS BIGINT)';
  const { nowUs, intervalUs, toleranceUs } = step;
  return sql.one(
    `INSERT INTO rate_limits (bucket, tat, allowed, auth_version)
     SELECT ${live.id}, ${n}, TRUE, w.auth_version FROM ${live.from}
     ON CONFLICT (bucket) DO UPDATE SET
       allowed = (${max}(rate_limits.tat, ${n}) - ${n} <= ${n}),
       tat = CASE WHEN ${max}(rate_limits.tat, ${n}) - ${n} <= ${n} THEN ${max}(rate_limits.tat, ${n}) + ${n} ELSE rate_limits.tat END,
       auth_version = excluded.auth_version
     RETURNING tat, allowed, auth_version`,
    [nowUs + intervalUs, ...live.params, nowUs, nowUs, toleranceUs, nowUs, nowUs, toleranceUs, nowUs, intervalUs],
  );
}

/** One GCRA step for the key's bucket, done only while the key is live (not revoked). */
export function takeRateLimitToken(sql: Sql, step: RateLimitStep): Promise<Pick<DbRateLimitRow, 'tat' | 'allowed' | 'auth_version'> | undefined> {
  return takeGcraToken(sql, { id: 'k.id', from: 'api_keys k JOIN workspaces w ON w.id = k.workspace_id WHERE k.id = ? AND k.revoked_at IS NULL', params: [step.keyId] }, step);
}
