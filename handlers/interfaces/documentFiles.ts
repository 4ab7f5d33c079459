/**
 * The documents module's files as other modules use them (signing reads uploaded originals and stores
 * its archives as files): a service the documents module provides (`documentFiles`) and others ask for
 * with `deps.services.get(documentFiles)`. Types and the reference only: no code of either module.
 *
 * A file is immutable: its bytes are a blob of the blob store, its facts a `document_files` row. A file
 * made while acting for member M is M's private file (`ownerMemberId` M); without a member it is a
 * workspace file (`ownerMemberId` null).
 */
import type { Sql } from '../../db/database.ts';
import { serviceRef } from '../../server/services.ts';
import type { SecretSource } from '../../server/signedToken.ts';

export interface TextTag {
  page: number;
  text: string;
  x: number;
  y: number;
  width: number;
  height: number;
}

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
  /**
   * Text tags found at upload: each `{{...}}` written in the document's text, with where it is (page
   * from 1; PDF points from the page's lower-left corner). What a tag means is the reader's business
   * (signing turns them into fields). Empty for files without any, and for archives.
   */
  textTags?: readonly TextTag[];
  blobId: string;
  source: 'upload' | 'signing_archive';
  createdAt: number;
}

/** Who asked for a download URL: it works only while they still may (checked at use, server/atUse.ts). */
export interface DownloadGrant {
  /** The operation that issued it. */
  operation: string;
  credentialId: string | null;
  memberId: string | null;
  role: string | null;
}

export interface DocumentFiles {
  /** The file `fileId` of the workspace, or null. Says nothing about who may see it: ask `visibleTo`. */
  find(sql: Sql, workspaceId: string, fileId: string): Promise<StoredFile | null>;
  /** Workspace files: every caller of the workspace; private files: only when acting for their owner. */
  visibleTo(file: StoredFile, memberId: string | null): boolean;
  /** Registers bytes already written to the blob store as a new file (in the caller's transaction). */
  create(sql: Sql, file: Omit<StoredFile, 'id' | 'createdAt'>, now: number): Promise<StoredFile>;
  /** Marks a file as part of a longer-lived record (the documents retention never removes it); false when it is gone. In the caller's transaction. */
  keep(sql: Sql, workspaceId: string, fileId: string): Promise<boolean>;
  /** The file's bytes, whole (checked against the stored size and SHA-256 while read). */
  readBytes(file: StoredFile): Promise<Buffer>;
  /** A signed, expiring download URL of this service (`GET /files/<token>`, attachment; default 15 min). */
  downloadUrl(source: SecretSource, baseUrl: string, file: StoredFile, now: number, opts?: { ttlMs?: number; filename?: string; grant?: DownloadGrant }): Promise<{ url: string; expiresAt: number }>;
  /** The name a document is saved under (always `.pdf`, no control or bidirectional characters). */
  downloadName(name: string): string;
  /** `Content-Disposition` for a document (RFC 6266 and 8187). */
  disposition(kind: 'attachment' | 'inline', name: string): string;
  /**
   * A stored PDF read again (the archive): the guarded parse with its limits, off the event loop. Throws
   * an error `isBusy` recognises when the checker is saturated (retry later), or another when the file is unreadable.
   */
  checkStoredPdf(bytes: Uint8Array, maxPages: number): Promise<{ pages: number }>;
  /** Whether an error is the PDF checker being saturated (answered 503 `unavailable`, retried later), not the file's fault. */
  isBusy(err: unknown): boolean;
}

export const documentFiles = serviceRef<DocumentFiles>('documents.files');
