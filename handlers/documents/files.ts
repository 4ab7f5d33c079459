/**
 * The documents module's files, for every module that uses them (signing reads uploaded files and stores
 * its archives here). The one cross-module seam of documents: these five functions and StoredFile.
 *
 * A file is immutable: its bytes are a blob of deps.storage (`blobId`), its facts a document_files row.
 * A file made while acting for member M is M's private file (`ownerMemberId` M); without a member it is a
 * workspace file (`ownerMemberId` null).
 */
import type { Sql } from '../../db/database.ts';
import { newId } from '../../server/ids.ts';
import type { BlobStore } from '../../server/storage.ts';
import { readToken, signToken } from './tokens.ts';

export interface StoredFile {
  id: string;
  workspaceId: string;
  ownerMemberId: string | null;
  createdByKeyId: string | null;
  filename: string;
  contentType: string;
  size: number;
  sha256: string;
  pageCount: number;
  blobId: string;
  source: 'upload' | 'signing_archive';
  createdAt: number;
}

/** A document_files row as the drivers return it (bigints may come back as strings on PostgreSQL). */
export interface DbDocumentFileRow {
  id: string;
  workspace_id: string;
  owner_member_id: string | null;
  created_by_key_id: string | null;
  filename: string;
  content_type: string;
  size: number | string;
  sha256: string;
  page_count: number | string;
  blob_id: string;
  source: 'upload' | 'signing_archive';
  created_at: number | string;
}

export function fileFromRow(r: DbDocumentFileRow): StoredFile {
  return {
    id: r.id,
    workspaceId: r.workspace_id,
    ownerMemberId: r.owner_member_id,
    createdByKeyId: r.created_by_key_id,
    filename: r.filename,
    contentType: r.content_type,
    size: Number(r.size),
    sha256: r.sha256,
    pageCount: Number(r.page_count),
    blobId: r.blob_id,
    source: r.source,
    createdAt: Number(r.created_at),
  };
}

/** The file `fileId` of the workspace, or null. Says nothing about who may see it: ask fileVisibleTo. */
export async function findFile(sql: Sql, workspaceId: string, fileId: string): Promise<StoredFile | null> {
  const row = await sql.one<DbDocumentFileRow>(`SELECT * FROM document_files WHERE id = ? AND workspace_id = ?`, [fileId, workspaceId]);
  return row ? fileFromRow(row) : null;
}

/** workspace files: every caller of the workspace; private files: only when acting for their owner. */
export function fileVisibleTo(file: StoredFile, memberId: string | null): boolean {
  return file.ownerMemberId === null || file.ownerMemberId === memberId;
}

/** Registers bytes already written with deps.storage.put as a new file (in the caller's transaction). */
export async function createFile(sql: Sql, f: Omit<StoredFile, 'id' | 'createdAt'>, now: number): Promise<StoredFile> {
  const file: StoredFile = { ...f, id: newId('file'), createdAt: now };
  await sql.run(
    `INSERT INTO document_files (id, workspace_id, owner_member_id, created_by_key_id, filename, content_type, size, sha256, page_count, blob_id, source, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [file.id, file.workspaceId, file.ownerMemberId, file.createdByKeyId, file.filename, file.contentType, file.size, file.sha256, file.pageCount, file.blobId, file.source, file.createdAt],
  );
  return file;
}

/** The file's bytes, whole (checked against the stored size and SHA-256 while read). */
export async function readFileBytes(storage: BlobStore, file: StoredFile): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of await storage.get(file.blobId)) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** How long a download URL works unless the caller says otherwise. */
export const DOWNLOAD_TTL_MS = 15 * 60_000;

/** What a download token carries: workspace, file, expiry and, when given, the name to save it under. */
export interface DownloadClaims {
  w: string;
  f: string;
  e: number;
  n?: string;
}

/** A signed, expiring download URL of this service: GET (and HEAD) `/files/<token>`, attachment; default 15 min. */
export async function downloadUrl(sql: Sql, baseUrl: string, file: StoredFile, now: number, opts?: { ttlMs?: number; filename?: string }): Promise<{ url: string; expiresAt: number }> {
  const expiresAt = now + (opts?.ttlMs ?? DOWNLOAD_TTL_MS);
  const claims: DownloadClaims = { w: file.workspaceId, f: file.id, e: expiresAt };
  if (opts?.filename !== undefined && opts.filename !== file.filename) claims.n = opts.filename;
  const token = await signToken(sql, 'download', { ...claims }, now);
  return { url: new URL(`/files/${token}`, baseUrl).toString(), expiresAt };
}

/** The claims of a download token this deployment issued, when it is still valid. */
export function readDownloadToken(sql: Sql, token: string, now: number) {
  return readToken<DownloadClaims>(sql, 'download', token, now);
}
