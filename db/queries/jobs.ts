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

/**
 * Enqueues a job already claimed by `lease.owner` until `leaseUntil` (its first attempt counted): the
 * caller runs it itself right after `sql` commits, and no other worker takes it before the lease ends
 * (a process that dies after the commit leaves it to whoever claims it then). Returns the job, or
 * undefined when a job of the dedupe key exists already.
 */
export function enqueueClaimedJob(
  sql: Sql,
  job: { kind: string; payload: unknown; runAt: number; dedupeKey?: string },
  lease: { owner: string; until: number },
): Promise<DbJobRow | undefined> {
  return sql.one<DbJobRow>(
    `INSERT INTO jobs (kind, dedupe_key, payload, run_at, attempts, locked_by, locked_until) VALUES (?, ?, ?, ?, 1, ?, ?)
     ON CONFLICT (dedupe_key) DO NOTHING RETURNING *`,
    [job.kind, job.dedupeKey ?? null, JSON.stringify(job.payload ?? null), job.runAt, lease.owner, lease.until],
  );
}

/** Jobs of a kind still waiting or running (tests, operators). */
export function jobsOfKind(sql: Sql, kind: string): Promise<DbJobRow[]> {
  return sql.all<DbJobRow>(`SELECT * FROM jobs WHERE kind = ? ORDER BY id`, [kind]);
}
