/**
 * The hourly `documents.cleanup` job and the documents retention:
 * - uploads past their expiry (24 hours after creation) go, with the bytes of their parts (an open or
 *   rejected upload was never completed; a completed one's parts were already joined into its file);
 * - uploaded files (`source: upload`) that no record keeps (`kept`: a signing request's original, see
 *   files.ts keepFile) go FILE_RETENTION_DAYS (30) days after they were made, row first, then bytes;
 * - files a signing request keeps (its original) and sealed archives (`source: signing_archive`) are
 *   never removed here;
 * - quota buckets whose budget is full again (server/limits.ts) are forgotten.
 */
import { deleteIdleQuotaBuckets } from '../../server/limits.ts';
import type { DocumentsDeps } from './deps.ts';
import { FILE_RETENTION_DAYS } from './limits.ts';
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

/**
 * Removes uploaded files that nothing keeps and that are older than the retention; returns how many.
 * The row goes first, only while it is still not kept (a request that keeps it at the same moment
 * wins: its mark holds the row), then the bytes: in the same transaction on the database backend.
 */
export async function removeUnusedFiles(deps: Pick<DocumentsDeps, 'db' | 'clock' | 'storage'>): Promise<number> {
  const { db, clock, storage } = deps;
  const before = clock.now() - FILE_RETENTION_DAYS * 86_400_000;
  let removed = 0;
  for (;;) {
    const batch = await db.sql.all<{ id: string; blob_id: string }>(
      `SELECT id, blob_id FROM document_files WHERE source = 'upload' AND kept = FALSE AND created_at <= ? ORDER BY created_at, id LIMIT ?`,
      [before, BATCH],
    );
    for (const f of batch) {
      const later: string[] = [];
      const gone = await db.tx(async (sql) => {
        const n = await sql.run(`DELETE FROM document_files WHERE id = ? AND kept = FALSE`, [f.id]);
        if (!n) return false;
        const store = storage.within(sql);
        if (store !== storage) await store.delete(f.blob_id);
        else later.push(f.blob_id);
        return true;
      });
      for (const blob of later) await storage.delete(blob);
      if (gone) removed++;
    }
    if (batch.length < BATCH) return removed;
  }
}

/** The whole hourly run: expired uploads, unused files, idle quota buckets. */
export async function cleanupDocuments(deps: Pick<DocumentsDeps, 'db' | 'clock' | 'storage'>): Promise<{ uploads: number; files: number }> {
  const uploads = await cleanupUploads(deps);
  const files = await removeUnusedFiles(deps);
  await deleteIdleQuotaBuckets(deps.db.sql, deps.clock.now());
  return { uploads, files };
}
