import type { Sql } from '../database.ts';
import type { DbIdempotencyReceiptRow } from '../rows.ts';

export interface ReceiptKey {
  scope: string;
  key: string;
}

/** Inserts a locked receipt; true when this request took the key. */
export async function lockReceipt(sql: Sql, k: ReceiptKey, operationId: string, fingerprint: string, now: number): Promise<boolean> {
  const row = await sql.one(
    `INSERT INTO idempotency_receipts (scope, idem_key, operation_id, fingerprint, locked_at, created_at)
     VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (scope, idem_key) DO NOTHING RETURNING idem_key`,
    [k.scope, k.key, operationId, fingerprint, now, now],
  );
  return row !== undefined;
}

export function findReceipt(sql: Sql, k: ReceiptKey): Promise<DbIdempotencyReceiptRow | undefined> {
  return sql.one<DbIdempotencyReceiptRow>(`SELECT * FROM idempotency_receipts WHERE scope = ? AND idem_key = ?`, [k.scope, k.key]);
}

/** Takes over an abandoned lock (its request died before completing); true when this request won it. */
export async function stealStaleLock(sql: Sql, k: ReceiptKey, staleLockedAt: number, now: number): Promise<boolean> {
  const changed = await sql.run(
    `UPDATE idempotency_receipts SET locked_at = ? WHERE scope = ? AND idem_key = ? AND locked_at = ? AND completed_at IS NULL AND response_body IS NULL`,
    [now, k.scope, k.key, staleLockedAt],
  );
  return changed === 1;
}

/** Stores the response; called inside the transaction of the change it records. */
export async function completeReceipt(sql: Sql, k: ReceiptKey, status: number, body: string, now: number): Promise<void> {
  await sql.write(
    `UPDATE idempotency_receipts SET completed_at = ?, status_code = ?, response_body = ?, locked_at = NULL WHERE scope = ? AND idem_key = ?`,
    [now, status, body, k.scope, k.key],
  );
}

/**
 * Stores the response of a command whose answer is completed after its declared effects ran (in the
 * transaction of its change), leaving the receipt locked: a retry meanwhile gets 409, and once the
 * lock is stale it replays this response (server/idempotency.ts).
 */
export async function holdReceipt(sql: Sql, k: ReceiptKey, status: number, body: string): Promise<void> {
  await sql.write(`UPDATE idempotency_receipts SET status_code = ?, response_body = ? WHERE scope = ? AND idem_key = ?`, [status, body, k.scope, k.key]);
}

/** Stores a completed response whether or not a lock row exists (after a rolled-back transaction); never replaces a completed one. */
export async function storeReceipt(sql: Sql, k: ReceiptKey, operationId: string, fingerprint: string, status: number, body: string, now: number): Promise<void> {
  await sql.run(
    `INSERT INTO idempotency_receipts (scope, idem_key, operation_id, fingerprint, locked_at, completed_at, status_code, response_body, created_at)
     VALUES (?, ?, ?, ?, NULL, ?, ?, ?, ?)
     ON CONFLICT (scope, idem_key) DO UPDATE SET completed_at = excluded.completed_at, status_code = excluded.status_code,
       response_body = excluded.response_body, locked_at = NULL
     WHERE idempotency_receipts.completed_at IS NULL`,
    [k.scope, k.key, operationId, fingerprint, now, status, body, now],
  );
}

/** Forgets an unfinished receipt so the key can be retried (the request stored nothing). */
export async function releaseReceipt(sql: Sql, k: ReceiptKey): Promise<void> {
  await sql.run(`DELETE FROM idempotency_receipts WHERE scope = ? AND idem_key = ? AND completed_at IS NULL AND response_body IS NULL`, [k.scope, k.key]);
}

/** Deletes completed receipts (and held ones) created before `before`; returns how many. */
export function deleteReceiptsBefore(sql: Sql, before: number): Promise<number> {
  return sql.run(`DELETE FROM idempotency_receipts WHERE created_at < ? AND (completed_at IS NOT NULL OR response_body IS NOT NULL)`, [before]);
}
