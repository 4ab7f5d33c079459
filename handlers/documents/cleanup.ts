/**
 * The hourly `documents.cleanup` job: uploads past their expiry (24 hours after creation) go, with the
 * bytes of their parts. An open or rejected upload was never completed; a completed one's parts were
 * already joined into its file, which stays (files are never deleted here).
 */
import type { DocumentsDeps } from './deps.ts';
import { deleteUpload, expiredUploads, listParts } from './queries.ts';

const BATCH = 100;

/** Removes every expired upload and its parts' blobs; returns how many uploads. */
export async function cleanupUploads(deps: Pick<DocumentsDeps, 'db' | 'clock' | 'storage'>): Promise<number> {
  const { db, clock, storage } = deps;
  let removed = 0;
  for (;;) {
    const batch = await expiredUploads(db.sql, clock.now(), BATCH);
    for (const { id } of batch) {
      // Blobs first: a crash between leaves the row, and the next run deletes the rest (delete is idempotent).
      for (const part of await listParts(db.sql, id)) await storage.delete(part.blob_id);
      removed += await deleteUpload(db.sql, id);
    }
    if (batch.length < BATCH) return removed;
  }
}
