/** The documents tables (handlers/documents/migrations/20261225000000_documents.ts): uploads, their parts, files. */
import type { Sql } from '../../db/database.ts';
import { type DbDocumentFileRow, fileFromRow, type StoredFile } from './files.ts';

export type UploadState = 'open' | 'completed' | 'rejected';

export interface DbUploadRow {
  id: string;
  workspace_id: string;
  created_by_key_id: string;
  member_id: string | null;
  /** Made acting for a member but a workspace file once completed (`private: false`). */
  shared: boolean | number;
  state: UploadState;
  filename: string;
  content_type: string;
  size: number | string;
  part_size: number | string;
  part_count: number | string;
  sha256: string | null;
  file_id: string | null;
  rejection_reason: string | null;
  created_at: number | string;
  updated_at: number | string;
  expires_at: number | string;
  completed_at: number | string | null;
}

export interface DbUploadPartRow {
  upload_id: string;
  part_number: number;
  blob_id: string;
  size: number | string;
  sha256: string;
  received_at: number | string;
}

/** Who may see an upload: the key that created it and the member it acted for (null: none). */
export interface UploadOwner {
  workspaceId: string;
  keyId: string;
  memberId: string | null;
}

const forUpdate = (sql: Sql) => (sql.dialect === 'pg' ? ' FOR UPDATE' : '');

export async function insertUpload(sql: Sql, u: DbUploadRow): Promise<void> {
  await sql.run(
    `INSERT INTO document_uploads (id, workspace_id, created_by_key_id, member_id, shared, state, filename, content_type, size, part_size, part_count, sha256, file_id, rejection_reason, created_at, updated_at, expires_at, completed_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [u.id, u.workspace_id, u.created_by_key_id, u.member_id, Boolean(u.shared), u.state, u.filename, u.content_type, u.size, u.part_size, u.part_count, u.sha256, u.file_id, u.rejection_reason, u.created_at, u.updated_at, u.expires_at, u.completed_at],
  );
}

/**
 * The caller's upload `id`, unexpired at `now`; undefined for anyone else's, an expired one, or none.
 * `keyShare` (PostgreSQL): holds the row against a part's PUT (which locks it FOR UPDATE) until the
 * caller's transaction ends, while plain updates of it (a rejection recorded on another connection)
 * still go through.
 */
export function findOwnUpload(sql: Sql, owner: UploadOwner, id: string, now: number, keyShare = false): Promise<DbUploadRow | undefined> {
  const lock = keyShare && sql.dialect === 'pg' ? ' FOR KEY SHARE' : '';
  return sql.one<DbUploadRow>(
    `SELECT * FROM document_uploads WHERE id = ? AND workspace_id = ? AND created_by_key_id = ? AND ${owner.memberId === null ? 'member_id IS NULL' : 'member_id = ?'} AND expires_at > ?${lock}`,
    owner.memberId === null ? [id, owner.workspaceId, owner.keyId, now] : [id, owner.workspaceId, owner.keyId, owner.memberId, now],
  );
}

/** Any upload by id (the part URLs carry its id), locked for the caller's transaction on PostgreSQL. */
export function findUploadById(sql: Sql, id: string, lock = false): Promise<DbUploadRow | undefined> {
  return sql.one<DbUploadRow>(`SELECT * FROM document_uploads WHERE id = ?${lock ? forUpdate(sql) : ''}`, [id]);
}

export function listParts(sql: Sql, uploadId: string): Promise<DbUploadPartRow[]> {
  return sql.all<DbUploadPartRow>(`SELECT * FROM document_upload_parts WHERE upload_id = ? ORDER BY part_number`, [uploadId]);
}

export function findPart(sql: Sql, uploadId: string, partNumber: number): Promise<DbUploadPartRow | undefined> {
  return sql.one<DbUploadPartRow>(`SELECT * FROM document_upload_parts WHERE upload_id = ? AND part_number = ?`, [uploadId, partNumber]);
}

/** Records part `p` (replacing an earlier one of the same number). */
export async function upsertPart(sql: Sql, p: DbUploadPartRow): Promise<void> {
  await sql.run(
    `INSERT INTO document_upload_parts (upload_id, part_number, blob_id, size, sha256, received_at) VALUES (?, ?, ?, ?, ?, ?)
     ON CONFLICT (upload_id, part_number) DO UPDATE SET blob_id = excluded.blob_id, size = excluded.size, sha256 = excluded.sha256, received_at = excluded.received_at`,
    [p.upload_id, p.part_number, p.blob_id, p.size, p.sha256, p.received_at],
  );
}

export function deleteParts(sql: Sql, uploadId: string): Promise<number> {
  return sql.run(`DELETE FROM document_upload_parts WHERE upload_id = ?`, [uploadId]);
}

/** Moves an open upload to completed with its file; 0 when it was no longer open. */
export function markCompleted(sql: Sql, id: string, fileId: string, now: number): Promise<number> {
  return sql.run(`UPDATE document_uploads SET state = 'completed', file_id = ?, completed_at = ?, updated_at = ? WHERE id = ? AND state = 'open'`, [fileId, now, now, id]);
}

/** Moves an open upload to rejected with the scan's reason; 0 when it was no longer open. */
export function markRejected(sql: Sql, id: string, reason: string, now: number): Promise<number> {
  return sql.run(`UPDATE document_uploads SET state = 'rejected', rejection_reason = ?, updated_at = ? WHERE id = ? AND state = 'open'`, [reason.slice(0, 500), now, id]);
}

/** Uploads past their expiry (any state), oldest first: what the cleanup removes. */
export function expiredUploads(sql: Sql, now: number, limit: number): Promise<Array<{ id: string }>> {
  return sql.all<{ id: string }>(`SELECT id FROM document_uploads WHERE expires_at <= ? ORDER BY expires_at LIMIT ?`, [now, limit]);
}

export function deleteUpload(sql: Sql, id: string): Promise<number> {
  return sql.run(`DELETE FROM document_uploads WHERE id = ?`, [id]);
}

/** Files of one scope, newest first, after the cursor position (created_at, id). */
export async function listFiles(sql: Sql, workspaceId: string, ownerMemberId: string | null, after: { t: number; i: string } | null, limit: number): Promise<StoredFile[]> {
  const params: Array<string | number> = [workspaceId];
  let where = `workspace_id = ? AND `;
  if (ownerMemberId === null) where += 'owner_member_id IS NULL';
  else {
    where += 'owner_member_id = ?';
    params.push(ownerMemberId);
  }
  if (after) {
    where += ' AND (created_at < ? OR (created_at = ? AND id < ?))';
    params.push(after.t, after.t, after.i);
  }
  params.push(limit);
  const rows = await sql.all<DbDocumentFileRow>(`SELECT * FROM document_files WHERE ${where} ORDER BY created_at DESC, id DESC LIMIT ?`, params);
  return rows.map(fileFromRow);
}
