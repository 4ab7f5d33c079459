import type { Sql, SqlValue } from '../database.ts';
import type { ApiKeyAccess, DbApiKeyRow, DbMemberRow, DbRateLimitRow } from '../rows.ts';

export interface DbKeyForAuth extends DbApiKeyRow {
  auth_version: number;
  api_key_access: ApiKeyAccess;
}

/** The key with its workspace's auth version and API-key access; revoked keys too (the caller decides). */
export function findKeyForAuth(sql: Sql, keyId: string): Promise<DbKeyForAuth | undefined> {
  return sql.one<DbKeyForAuth>(
    `SELECT k.*, w.auth_version, w.api_key_access FROM api_keys k JOIN workspaces w ON w.id = k.workspace_id WHERE k.id = ?`,
    [keyId],
  );
}

/**
 * Records that a key was used at `now`, unless it was recorded less than `intervalMs` ago (by any
 * process): at most one write per key and interval. Returns whether it wrote.
 */
export async function touchKeyUsage(sql: Sql, keyId: string, now: number, intervalMs: number): Promise<boolean> {
  const n = await sql.run(`UPDATE api_keys SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at <= ?)`, [now, keyId, now - intervalMs]);
  return n > 0;
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
