import type { Sql } from '../database.ts';
import type { DbJobRow } from '../rows.ts';

/** Enqueues a job; with a dedupe key, an existing job of that key is kept instead. */
export async function enqueueJob(sql: Sql, job: { kind: string; payload: unknown; runAt: number; dedupeKey?: string }): Promise<void> {
  await sql.run(
    `INSERT INTO jobs (kind, dedupe_key, payload, run_at, attempts) VALUES (?, ?, ?, ?, 0) ON CONFLICT (dedupe_key) DO NOTHING`,
    [job.kind, job.dedupeKey ?? null, JSON.stringify(job.payload ?? null), job.runAt],
  );
}

/**
 * Claims the next due job for a worker until `lockedUntil`. Several workers (processes) claim
 * concurrently without blocking each other (FOR UPDATE SKIP LOCKED; SQLite writers are serial).
 */
export function claimDueJob(sql: Sql, worker: string, now: number, lockedUntil: number): Promise<DbJobRow | undefined> {
  return sql.one<DbJobRow>(
    `UPDATE jobs SET locked_by = ?, locked_until = ?, attempts = attempts + 1
     WHERE id = (SELECT id FROM jobs WHERE run_at <= ? AND (locked_until IS NULL OR locked_until < ?) ORDER BY run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
     RETURNING *`,
    [worker, lockedUntil, now, now],
  );
}

export async function finishJob(sql: Sql, id: number): Promise<void> {
  await sql.run(`DELETE FROM jobs WHERE id = ?`, [id]);
}

export async function rescheduleJob(sql: Sql, id: number, runAt: number, error: string | null, resetAttempts: boolean): Promise<void> {
  await sql.run(
    `UPDATE jobs SET run_at = ?, locked_by = NULL, locked_until = NULL, last_error = ?${resetAttempts ? ', attempts = 0' : ''} WHERE id = ?`,
    [runAt, error, id],
  );
}
