import type { Sql } from '../database.ts';

/**
 * Records a DPoP proof's `jti` as used (table oauth_records, model 'DPoPProof', keyed by the SHA-256 of
 * the key thumbprint and the jti, kept until `expiresAt`; the hourly `oauth.prune` job deletes it a day
 * later). One statement, shared by every process: true the first time, false when the proof was seen
 * before (a replay).
 */
export async function recordDpopProof(sql: Sql, step: { idHash: string; expiresAt: number }): Promise<boolean> {
  const inserted = await sql.run(
    `INSERT INTO oauth_records (model, id_hash, grant_id, uid_hash, payload, expires_at) VALUES ('DPoPProof', ?, NULL, NULL, '{}', ?)
     ON CONFLICT (model, id_hash) DO NOTHING`,
    [step.idHash, step.expiresAt],
  );
  return inserted === 1;
}
