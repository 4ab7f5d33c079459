import type { Sql } from '../database.ts';
import type { DbJobRow } from '../rows.ts';

/**
 * Enqueues a job in `sql` (the caller's transaction: it exists exactly when that commits). With a
 * dedupe key, a job of that key still waiting or running is kept instead; true when one was added.
 * Claiming, finishing and failing go through the background kit (server/background.ts, server/jobs.ts).
 */
export async function enqueueJob(sql: Sql, job: { kind: string; payload: unknown; runAt: number; dedupeKey?: string }): Promise<boolean> {
  const added = await sql.run(
    `INSERT INTO jobs (kind, dedupe_key, payload, run_at, attempts) VALUES (?, ?, ?, ?, 0) ON CONFLICT (dedupe_key) DO NOTHING`,
    [job.kind, job.dedupeKey ?? null, JSON.stringify(job.payload ?? null), job.runAt],
  );
  return added > 0;
}

/** Jobs of a kind still waiting or running (tests, operators). */
export function jobsOfKind(sql: Sql, kind: string): Promise<DbJobRow[]> {
  return sql.all<DbJobRow>(`SELECT * FROM jobs WHERE kind = ? ORDER BY id`, [kind]);
}
