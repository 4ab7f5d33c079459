import type { Sql, SqlValue } from '../database.ts';

/** A row of `blobs` (db/migrations/20261220010000_blobs.ts). */
export interface DbBlobRow {
  id: string;
  size: number | null;
  sha256: string | null;
  content_type: string | null;
  created_at: number;
  touched_at: number;
  completed_at: number | null;
}

// Both drivers take a Buffer as a binary parameter (better-sqlite3: BLOB; pg: bytea, sent in binary)
// and give one back; the executor passes values through untouched, its type only does not name it.
const bytes = (b: Buffer): SqlValue => b as unknown as SqlValue;

/** Starts a blob (not complete, so invisible); false when the id is taken, complete or not. */
export async function insertBlob(sql: Sql, blob: { id: string; contentType: string | null; now: number }): Promise<boolean> {
  const added = await sql.run(
    `INSERT INTO blobs (id, content_type, created_at, touched_at) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
    [blob.id, blob.contentType, blob.now, blob.now],
  );
  return added > 0;
}

export async function insertBlobChunk(sql: Sql, blobId: string, idx: number, data: Buffer): Promise<void> {
  await sql.run(`INSERT INTO blob_chunks (blob_id, idx, bytes) VALUES (?, ?, ?)`, [blobId, idx, bytes(data)]);
}

/** Says an unfinished blob is still being written (the cleanup leaves it alone); false when it is gone. */
export async function touchBlob(sql: Sql, id: string, now: number): Promise<boolean> {
  return (await sql.run(`UPDATE blobs SET touched_at = ? WHERE id = ? AND completed_at IS NULL`, [now, id])) > 0;
}

/** Marks the blob complete (visible) with its facts; false when it was removed meanwhile. */
export async function completeBlob(sql: Sql, id: string, facts: { size: number; sha256: string; now: number }): Promise<boolean> {
  const done = await sql.run(`UPDATE blobs SET size = ?, sha256 = ?, completed_at = ?, touched_at = ? WHERE id = ? AND completed_at IS NULL`, [
    facts.size,
    facts.sha256,
    facts.now,
    facts.now,
    id,
  ]);
  return done > 0;
}

/** A complete blob's row. */
export function completeBlobById(sql: Sql, id: string): Promise<DbBlobRow | undefined> {
  return sql.one<DbBlobRow>(`SELECT * FROM blobs WHERE id = ? AND completed_at IS NOT NULL`, [id]);
}

/** Up to `limit` chunks from `fromIdx` on, in order. */
export function blobChunksFrom(sql: Sql, blobId: string, fromIdx: number, limit: number): Promise<Array<{ idx: number; bytes: Buffer }>> {
  return sql.all<{ idx: number; bytes: Buffer }>(`SELECT idx, bytes FROM blob_chunks WHERE blob_id = ? AND idx >= ? ORDER BY idx LIMIT ?`, [blobId, fromIdx, limit]);
}

/**
 * Hides the blob at once (no longer complete) and marks it untouched since 0, so that if removing its
 * chunks is interrupted, the cleanup of unfinished blobs finishes the job.
 */
export async function hideBlob(sql: Sql, id: string): Promise<boolean> {
  return (await sql.run(`UPDATE blobs SET completed_at = NULL, touched_at = 0 WHERE id = ?`, [id])) > 0;
}

/** Deletes up to `limit` of the blob's chunks; returns how many. */
export function deleteBlobChunks(sql: Sql, blobId: string, limit: number): Promise<number> {
  return sql.run(`DELETE FROM blob_chunks WHERE blob_id = ? AND idx IN (SELECT idx FROM blob_chunks WHERE blob_id = ? ORDER BY idx LIMIT ?)`, [blobId, blobId, limit]);
}

export async function deleteBlobRow(sql: Sql, id: string): Promise<void> {
  await sql.run(`DELETE FROM blobs WHERE id = ?`, [id]);
}

/** Unfinished blobs not touched since `olderThan` (a crashed put, an interrupted delete). */
export async function staleIncompleteBlobs(sql: Sql, olderThan: number, limit: number): Promise<string[]> {
  const rows = await sql.all<{ id: string }>(`SELECT id FROM blobs WHERE completed_at IS NULL AND touched_at < ? ORDER BY touched_at LIMIT ?`, [olderThan, limit]);
  return rows.map((r) => r.id);
}

/** How many chunk rows a blob has (tests, operators). */
export async function countBlobChunks(sql: Sql, blobId: string): Promise<number> {
  const row = await sql.one<{ n: number | string }>(`SELECT COUNT(*) AS n FROM blob_chunks WHERE blob_id = ?`, [blobId]);
  return Number(row?.n ?? 0);
}
