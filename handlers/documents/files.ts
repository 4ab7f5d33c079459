/**
 * The documents module's files: what its operations and pages use, and the service other modules ask for
 * (`documentFiles`, handlers/interfaces/documentFiles.ts: signing reads uploaded files and stores its
 * archives here), made by `documentFilesService`.
 *
 * A file is immutable: its bytes are a blob of deps.storage (`blobId`), its facts a document_files row.
 * A file made while acting for member M is M's private file (`ownerMemberId` M); without a member it is a
 * workspace file (`ownerMemberId` null).
 */
import { encodeExtended } from 'content-disposition';
import type { Sql } from '../../db/database.ts';
import { newId } from '../../server/ids.ts';
import type { SecretSource } from '../../server/signedToken.ts';
import type { BlobStore } from '../../server/storage.ts';
import type { DocumentFiles, DownloadGrant, StoredFile, TextTag } from '../interfaces/documentFiles.ts';
import { readToken, signToken } from './tokens.ts';

export type { StoredFile } from '../interfaces/documentFiles.ts';

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
  text_tags?: string | null;
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
    textTags: r.text_tags ? (JSON.parse(r.text_tags) as TextTag[]) : [],
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
    `INSERT INTO document_files (id, workspace_id, owner_member_id, created_by_key_id, filename, content_type, size, sha256, page_count, text_tags, blob_id, source, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [file.id, file.workspaceId, file.ownerMemberId, file.createdByKeyId, file.filename, file.contentType, file.size, file.sha256, file.pageCount, file.textTags?.length ? JSON.stringify(file.textTags) : null, file.blobId, file.source, file.createdAt],
  );
  return file;
}

/**
 * Marks a file as part of a longer-lived record (a signing request's original): the documents
 * retention (cleanup.ts) never removes a kept file. False when the file is gone (removed by the
 * retention meanwhile). In the caller's transaction, so the mark and the record commit together.
 */
export async function keepFile(sql: Sql, workspaceId: string, fileId: string): Promise<boolean> {
  return (await sql.run(`UPDATE document_files SET kept = TRUE WHERE id = ? AND workspace_id = ?`, [fileId, workspaceId])) > 0;
}

/** The file's bytes, whole (checked against the stored size and SHA-256 while read). */
export async function readFileBytes(storage: BlobStore, file: StoredFile): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of await storage.get(file.blobId)) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** How long a download URL works unless the caller says otherwise. */
export const DOWNLOAD_TTL_MS = 15 * 60_000;

/**
 * What a download token carries: workspace, file, expiry and, when given, the name to save it under;
 * for a URL an operation issued to a caller, the operation (`o`), the credential (`k`), the member it
 * acted for (`m`) and that member's role then (`r`), judged again at every use (server/atUse.ts).
 */
export interface DownloadClaims {
  w: string;
  f: string;
  e: number;
  n?: string;
  o?: string;
  k?: string | null;
  m?: string | null;
  r?: string | null;
}

export type { DownloadGrant } from '../interfaces/documentFiles.ts';

/** A signed, expiring download URL of this service: GET (and HEAD) `/files/<token>`, attachment; default 15 min. */
export async function downloadUrl(
  source: SecretSource,
  baseUrl: string,
  file: StoredFile,
  now: number,
  opts?: { ttlMs?: number; filename?: string; grant?: DownloadGrant },
): Promise<{ url: string; expiresAt: number }> {
  const expiresAt = now + (opts?.ttlMs ?? DOWNLOAD_TTL_MS);
  const claims: Omit<DownloadClaims, 'e'> = { w: file.workspaceId, f: file.id };
  if (opts?.filename !== undefined && opts.filename !== file.filename) claims.n = opts.filename;
  if (opts?.grant) Object.assign(claims, { o: opts.grant.operation, k: opts.grant.credentialId, m: opts.grant.memberId, r: opts.grant.role });
  const token = await signToken(source, 'download', { ...claims }, expiresAt);
  return { url: new URL(`/files/${token}`, baseUrl).toString(), expiresAt };
}

/** The claims of a download token this deployment issued, when it is still valid. */
export function readDownloadToken(source: SecretSource, token: string, now: number) {
  return readToken<DownloadClaims>(source, 'download', token, now);
}

// Bidirectional controls (U+202E makes "invoice\u202Efdp.exe" show as "invoiceexe.pdf"), C0/C1 controls
// and path separators.
const UNSAFE_NAME = /[\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069/\\]/g;
const NAME_MAX = 255;

/**
 * The name a document is saved under: always ending `.pdf` (every file of this service is a PDF), so no
 * download is handed out as `.exe`, `.html` or `.svg`. Another extension is kept and `.pdf` appended
 * (`invoice.exe` -> `invoice.exe.pdf`: it shows what was uploaded, and opens as what it is); a name
 * ending `.pdf` in any case ends `.pdf`. Control and bidirectional characters and path separators
 * become `_`; leading and trailing dots and spaces go; at most 255 characters; `document.pdf` when
 * nothing is left.
 */
export function downloadName(name: string): string {
  let base = name.normalize('NFC').replace(UNSAFE_NAME, '_').trim();
  base = base.replace(/\.pdf$/i, '').replace(/^[\s.]+|[\s.]+$/g, '');
  if (base === '') base = 'document';
  return `${Array.from(base).slice(0, NAME_MAX - 4).join('').replace(/[\s.]+$/, '')}.pdf`;
}

/**
 * `Content-Disposition` for a document (RFC 6266): `attachment` or `inline`, the name of downloadName
 * as a quoted ASCII `filename` (other characters as `?`, `"` as `'`: it holds no `"`, `\` or control character)
 * and, when that is not the exact name (or the name holds a `%XX` some clients would decode), the
 * exact name as `filename*=UTF-8''...` (RFC 8187, the content-disposition library's encoding).
 */
export function documentDisposition(kind: 'attachment' | 'inline', name: string): string {
  const exact = downloadName(name);
  const ascii = exact.replace(/[^\x20-\x7e]/g, '?').replace(/"/g, "'");
  const extended = ascii !== exact || /%[0-9A-Fa-f]{2}/.test(exact) ? `; filename*=${encodeExtended(exact)}` : '';
  return `${kind}; filename="${ascii}"${extended}`;
}

/** The `documentFiles` service this module provides to others (handlers/interfaces/documentFiles.ts). */
export function documentFilesService(storage: BlobStore, pdf: Pick<DocumentFiles, 'checkStoredPdf' | 'isBusy'>): DocumentFiles {
  return {
    find: findFile,
    visibleTo: fileVisibleTo,
    create: createFile,
    keep: keepFile,
    readBytes: (file) => readFileBytes(storage, file),
    downloadUrl,
    downloadName,
    disposition: documentDisposition,
    ...pdf,
  };
}
