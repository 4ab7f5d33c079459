import type { Sql } from '../database.ts';
import { takeGcraToken } from './credentials.ts';

/** Active members with this address (compared without case), each with its workspace's name. */
export function findActiveMembersByEmail(sql: Sql, email: string): Promise<Array<{ id: string; workspace_id: string; workspace_name: string }>> {
  return sql.all(
    `SELECT m.id, m.workspace_id, w.name AS workspace_name FROM members m JOIN workspaces w ON w.id = m.workspace_id
     WHERE LOWER(m.email) = ? AND m.disabled_at IS NULL ORDER BY w.name, w.id`,
    [email.toLowerCase()],
  );
}

/**
 * One GCRA step on a sign-in form bucket (`signin-...`) of the platform's `rate_limits` table, which
 * every process shares. True when the request is within the budget.
 */
export async function takeSigninFormToken(sql: Sql, bucket: string, step: { nowUs: number; intervalUs: number; toleranceUs: number }): Promise<boolean> {
  const row = await takeGcraToken(sql, { id: 'w.bucket', from: '(SELECT CAST(? AS VARCHAR(100)) AS bucket, 0 AS auth_version) w WHERE TRUE', params: [bucket] }, step);
  return Boolean(row?.allowed);
}

/** Deletes sign-in form buckets whose budget is full again (their theoretical arrival time is past). */
export function deleteIdleSigninFormBuckets(sql: Sql, nowUs: number): Promise<number> {
  return sql.run(`DELETE FROM rate_limits WHERE bucket LIKE 'signin-%' AND tat < CAST(? AS BIGINT)`, [nowUs]);
}
