import type { Sql } from '../../db/database.ts';

/** The documented limits of uploads (documents.CreateUpload's description says each). */
export const MAX_FILE_BYTES = 50 * 1024 * 1024;
export const MIN_PART_BYTES = 1024 * 1024;
export const MAX_PART_BYTES = 16 * 1024 * 1024;
export const DEFAULT_PART_BYTES = 5 * 1024 * 1024;
export const MAX_PARTS = 100;
export const MAX_PAGES = 500;
/** An upload lives 24 hours after creation; then it is gone and the cleanup removes it. */
export const UPLOAD_TTL_MS = 24 * 60 * 60_000;
/** A part URL works 15 minutes. */
export const PART_URL_TTL_MS = 15 * 60_000;

/** Uploaded files no signing request keeps are removed this many days after they were made (cleanup.ts). */
export const FILE_RETENTION_DAYS = 30;

/** The workspace's stored bytes as its storage limit counts them: its files plus its open uploads' declared sizes. */
export async function storedBytes(sql: Sql, workspaceId: string, now: number): Promise<{ files: number; open: number }> {
  const files = await sql.one<{ n: number | string | null }>(`SELECT SUM(size) AS n FROM document_files WHERE workspace_id = ?`, [workspaceId]);
  const open = await sql.one<{ n: number | string | null }>(`SELECT SUM(size) AS n FROM document_uploads WHERE workspace_id = ? AND state = 'open' AND expires_at > ?`, [workspaceId, now]);
  return { files: Number(files?.n ?? 0), open: Number(open?.n ?? 0) };
}

/** The credential's open uploads (not completed, not rejected, not expired): how many, and when the first of them expires. */
export async function openUploadsOf(sql: Sql, workspaceId: string, keyId: string, now: number): Promise<{ count: number; firstExpiry: number | null }> {
  const row = await sql.one<{ n: number | string; first: number | string | null }>(
    `SELECT COUNT(*) AS n, MIN(expires_at) AS first FROM document_uploads WHERE workspace_id = ? AND created_by_key_id = ? AND state = 'open' AND expires_at > ?`,
    [workspaceId, keyId, now],
  );
  return { count: Number(row?.n ?? 0), firstExpiry: row?.first === null || row?.first === undefined ? null : Number(row.first) };
}

/** Open uploads per credential of the workspace (the limits page), most first. */
export function openUploadsByKey(sql: Sql, workspaceId: string, now: number): Promise<Array<{ key_id: string; n: number | string }>> {
  return sql.all(
    `SELECT created_by_key_id AS key_id, COUNT(*) AS n FROM document_uploads WHERE workspace_id = ? AND state = 'open' AND expires_at > ? GROUP BY created_by_key_id ORDER BY COUNT(*) DESC, created_by_key_id LIMIT 20`,
    [workspaceId, now],
  );
}

/** Holds the workspace's row until the caller's transaction ends (PostgreSQL), so two uploads cannot both fit the last room. */
export async function lockWorkspaceForUploads(sql: Sql, workspaceId: string): Promise<void> {
  if (sql.dialect === 'pg') await sql.one(`SELECT id FROM workspaces WHERE id = ? FOR NO KEY UPDATE`, [workspaceId]);
}
