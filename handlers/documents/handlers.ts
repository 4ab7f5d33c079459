/** The documents operations: uploads in parts (create, read, part URLs, complete) and the file listing. */
import crypto from 'node:crypto';
import { DEFAULT_PAGE_LIMIT, decodeCursor, encodeCursor, positionField } from '../../server/cursor.ts';
import { conflict, invalidInput, notFound, payloadTooLarge, ServiceError } from '../../server/errors.ts';
import { emitEvent, type EventKindDeclaration, eventKind } from '../../server/events.ts';
import { workspaceLimits } from '../../server/limits.ts';
import { newId } from '../../server/ids.ts';
import type { NamespaceHandlers } from '../../server/module.ts';
import { type OperationContext, phased } from '../../server/operation.ts';
import { BlobNotFound, type BlobStore, StorageError } from '../../server/storage.ts';
import type { DocumentsDeps } from './deps.ts';
import { createFile, findFile } from './files.ts';
import { DEFAULT_PART_BYTES, FILE_RETENTION_DAYS, lockWorkspaceForUploads, MAX_FILE_BYTES, MAX_PAGES, MAX_PART_BYTES, MAX_PARTS, MIN_PART_BYTES, openUploadsOf, PART_URL_TTL_MS, storedBytes, UPLOAD_TTL_MS } from './limits.ts';
import { type DbUploadRow, findOwnUpload, listFiles, listParts, markCompleted, markRejected, type UploadOwner, insertUpload } from './queries.ts';
import { PdfGuardBusy, ScannerUnavailable, type ScanOutcome, scanDocument } from './scan.ts';
import { signToken } from './tokens.ts';
import { fileView, partSize, uploadView } from './views.ts';

const UPLOAD_COMPLETED = eventKind('documents.upload.completed');

const TIME_CURSOR = { t: positionField.millis, i: { type: 'string', maxLength: 40 } } as const;

const ownerOf = (ctx: OperationContext): UploadOwner => ({ workspaceId: ctx.workspaceId, keyId: ctx.credential.keyId, memberId: ctx.member?.id ?? null });

async function ownUpload(ctx: OperationContext, id: string, keyShare = false): Promise<DbUploadRow> {
  const u = await findOwnUpload(ctx.sql, ownerOf(ctx), id, ctx.now, keyShare);
  if (!u) throw notFound(`No upload ${id} of this credential${ctx.member ? ` acting for ${ctx.member.name}` : ''} (uploads are visible only to the key and member that made them, for 24 hours).`);
  return u;
}

/** Control characters, and the path separators a saved file's name cannot carry. */
// eslint-disable-next-line no-control-regex
const BAD_FILENAME = /[\u0000-\u001f\u007f/\\]/;

const mib = (n: number) => `${n} bytes (${(n / 1048576).toFixed(2).replace(/\.?0+$/, '')} MiB)`;

/** The part size an upload uses: `part_size`, or from `part_count`; the bounds as documented. */
function partLayout(size: number, partSizeIn: number | undefined, partCountIn: number | undefined): { partSize: number; partCount: number } {
  if (partSizeIn !== undefined && partCountIn !== undefined) throw invalidInput('part_size and part_count: give one of them, not both.');
  if (partCountIn !== undefined) {
    const ps = Math.ceil(size / partCountIn);
    if (ps > MAX_PART_BYTES) throw invalidInput(`part_count: ${partCountIn} parts of ${size} bytes would be ${mib(ps)} each, more than the part limit of ${mib(MAX_PART_BYTES)}; use more parts.`);
    if (partCountIn > 1 && ps < MIN_PART_BYTES) throw invalidInput(`part_count: ${partCountIn} parts of ${size} bytes would be ${ps} bytes each, less than the minimum part of ${mib(MIN_PART_BYTES)}; use fewer parts.`);
    const count = Math.ceil(size / ps);
    if (count !== partCountIn) throw invalidInput(`part_count: ${size} bytes cannot be split into exactly ${partCountIn} parts of equal size (parts of ${ps} bytes make ${count}); use ${count} parts or give part_size.`);
    return { partSize: ps, partCount: partCountIn };
  }
  const ps = partSizeIn ?? DEFAULT_PART_BYTES;
  const count = Math.ceil(size / ps);
  if (count > MAX_PARTS) throw invalidInput(`part_size: ${size} bytes in parts of ${ps} bytes would be ${count} parts, more than ${MAX_PARTS}.`);
  return { partSize: ps, partCount: count };
}

async function readAll(store: BlobStore, blobIds: readonly string[], expected: number): Promise<Buffer> {
  const out = Buffer.allocUnsafe(expected);
  let at = 0;
  for (const id of blobIds) {
    for await (const chunk of await store.get(id)) {
      const b = chunk as Buffer;
      if (at + b.length > expected) throw new Error(`parts hold more than the ${expected} bytes expected`);
      b.copy(out, at);
      at += b.length;
    }
  }
  if (at !== expected) throw new Error(`parts hold ${at} bytes, not the ${expected} expected`);
  return out;
}

/**
 * Records a scan's refusal so that it outlives the refused command (whose transaction rolls back):
 * PostgreSQL writes it now on another connection (the command holds no lock on the row); SQLite's
 * one connection is the command's until it ends, so the write waits at its gate and runs right after
 * the rollback, before any later request is read.
 */
async function recordRejection(deps: DocumentsDeps, uploadId: string, reason: string, now: number): Promise<void> {
  const write = markRejected(deps.db.sql, uploadId, reason, now);
  if (deps.db.dialect === 'pg') {
    await write;
    return;
  }
  void write.catch((err: unknown) => deps.logger.error({ err, upload_id: uploadId }, 'could not record an upload rejection'));
}

const refused = (reason: string) => invalidInput(`The file was refused: ${reason}.`);

/** What CompleteUpload's first phase found, before its transaction: the parts read, the file's digest and the scan's verdict. */
interface CheckedFile {
  /** The parts' digests in order: the run phase uses the verdict only when the upload's parts still hold these bytes. */
  partDigests: string[];
  bytes: Buffer;
  sha256: string;
  /** Null when the digest differs from the one expected (the run phase answers that). */
  scan: ScanOutcome | null;
}

/**
 * CompleteUpload's checks with no transaction open: read the parts, join them, hash and scan the file
 * (the PDF checker's worker and ClamAV may take seconds: on SQLite an open transaction would hold the
 * process's only connection meanwhile). Null when there is nothing to check yet; the run phase answers.
 */
async function checkUpload(deps: DocumentsDeps, ctx: OperationContext, input: { upload_id: string; sha256?: string }): Promise<CheckedFile | null> {
  const u = await findOwnUpload(ctx.sql, ownerOf(ctx), input.upload_id, ctx.now);
  if (!u || u.state !== 'open') return null;
  const parts = await listParts(ctx.sql, u.id);
  if (parts.length !== Number(u.part_count)) return null;
  const partDigests = parts.map((p) => p.sha256);
  let bytes: Buffer;
  try {
    bytes = await readAll(deps.storage, parts.map((p) => p.blob_id), Number(u.size));
  } catch (err) {
    // A completion that committed meanwhile removed the parts (a part gone mid-read reads as `corrupt`).
    if (err instanceof BlobNotFound || (err instanceof StorageError && err.code === 'corrupt')) return null;
    throw err;
  }
  const sha256 = crypto.createHash('sha256').update(bytes).digest('hex');
  const expected = input.sha256 ?? u.sha256;
  if (expected && expected !== sha256) return { partDigests, bytes, sha256, scan: null };
  try {
    return { partDigests, bytes, sha256, scan: await scanDocument(bytes, { limits: { maxBytes: MAX_FILE_BYTES, maxPages: MAX_PAGES }, clamav: deps.settings.clamav }) };
  } catch (err) {
    if (err instanceof ScannerUnavailable) {
      deps.logger.warn({ reason: err.reason, err: err.message }, 'the virus scanner is unavailable; upload not completed');
      throw new ServiceError(503, 'unavailable', 'The virus scanner is not available right now; nothing changed, retry later.');
    }
    if (err instanceof PdfGuardBusy) {
      throw new ServiceError(503, 'unavailable', `Every PDF checker is busy; nothing changed, retry in ${err.retryAfterSeconds} s.`, { 'Retry-After': String(err.retryAfterSeconds) });
    }
    throw err;
  }
}

const sameDigests = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((d, i) => d === b[i]);

async function complete(deps: DocumentsDeps, ctx: OperationContext, input: { upload_id: string; sha256?: string }, checked: CheckedFile | null) {
  // Held until the completion commits: a part's PUT waits (then finds the upload completed), so the
  // parts checked are never replaced and deleted before the file is made.
  const u = await ownUpload(ctx, input.upload_id, true);
  if (u.state === 'completed') return completedFile(ctx, u);
  if (u.state === 'rejected') throw refused(u.rejection_reason ?? 'the scan refused it');
  if (input.sha256 && u.sha256 && input.sha256 !== u.sha256) throw invalidInput(`sha256: ${input.sha256} differs from the sha256 given when the upload was created (${u.sha256}).`);
  const size = Number(u.size);
  const count = Number(u.part_count);
  const parts = await listParts(ctx.sql, u.id);
  const have = new Set(parts.map((p) => Number(p.part_number)));
  const missing = Array.from({ length: count }, (_, i) => i + 1).filter((n) => !have.has(n));
  if (missing.length) throw conflict(`Upload ${u.id} is missing part${missing.length > 1 ? 's' : ''} ${missing.join(', ')}; send ${missing.length > 1 ? 'them' : 'it'}, then complete it.`);
  // A part sent again with the same bytes (a client's retry) changes nothing that was checked.
  if (!checked || !sameDigests(checked.partDigests, parts.map((p) => p.sha256))) {
    throw conflict(`A part of upload ${u.id} arrived or was replaced with other bytes while the file was being checked; complete it again (with a new Idempotency-Key).`);
  }
  const expected = input.sha256 ?? u.sha256;
  if (expected && expected !== checked.sha256) {
    throw invalidInput(`The assembled file's SHA-256 is ${checked.sha256}, not ${expected}; the upload stays open: re-send the parts whose bytes are wrong (GetUpload lists each part's SHA-256) and complete it again.`);
  }
  const scan = checked.scan!;
  if (!scan.ok) {
    await recordRejection(deps, u.id, scan.reason, ctx.now);
    throw refused(scan.reason);
  }
  // In the command's transaction: the file's bytes commit or roll back with the completion (database backend).
  const store = deps.storage.within(ctx.sql);
  const { bytes, sha256 } = checked;
  const blob = await store.put(null, [bytes], { contentType: u.content_type, maxBytes: size });
  const file = await createFile(
    ctx.sql,
    { workspaceId: u.workspace_id, ownerMemberId: u.shared ? null : u.member_id, createdByKeyId: u.created_by_key_id, filename: u.filename, contentType: u.content_type, size, sha256, pageCount: scan.pages, textTags: scan.tags ?? [], blobId: blob.id, source: 'upload' },
    ctx.now,
  );
  if (!(await markCompleted(ctx.sql, u.id, file.id, ctx.now))) {
    // Completed (or rejected) by another request meanwhile: answer what it decided; nothing of ours stays.
    await ctx.sql.run(`DELETE FROM document_files WHERE id = ?`, [file.id]);
    await store.delete(blob.id);
    const now = await ownUpload(ctx, u.id);
    if (now.state === 'completed') return completedFile(ctx, now);
    throw refused(now.rejection_reason ?? 'the scan refused it');
  }
  // The parts' own bytes are not needed any more (on a shared volume the cleanup removes them with the upload).
  if (store !== deps.storage) for (const p of parts) await store.delete(p.blob_id);
  await emitEvent(ctx.sql, {
    kind: UPLOAD_COMPLETED,
    workspaceId: u.workspace_id,
    subjectType: 'upload',
    subjectId: u.id,
    // A member's private file (uploaded acting for them) is theirs alone: no rule or webhook sees it.
    private: u.member_id !== null && !u.shared,
    actorKeyId: ctx.credential.kind === 'system' ? null : ctx.credential.keyId,
    actorMemberId: ctx.member?.id ?? null,
    occurredAt: ctx.now,
    data: { upload_id: u.id, file_id: file.id, size, page_count: scan.pages },
  });
  return fileView(file);
}

async function completedFile(ctx: OperationContext, u: DbUploadRow) {
  const file = u.file_id ? await findFile(ctx.sql, ctx.workspaceId, u.file_id) : null;
  if (!file) throw new Error(`completed upload ${u.id} has no file`);
  return fileView(file);
}

/**
 * The workspace's upload limits (server/limits.ts): open uploads per credential (429 with Retry-After
 * until its first open upload expires) and stored bytes (413). Checked with the workspace held, so two
 * creations cannot both take the last room.
 */
async function checkRoom(ctx: OperationContext, size: number): Promise<void> {
  await lockWorkspaceForUploads(ctx.sql, ctx.workspaceId);
  const limits = await workspaceLimits(ctx.sql, ctx.workspaceId);
  const open = await openUploadsOf(ctx.sql, ctx.workspaceId, ctx.credential.keyId, ctx.now);
  if (open.count >= limits.open_uploads_per_key) {
    const wait = Math.max(1, Math.ceil(((open.firstExpiry ?? ctx.now + UPLOAD_TTL_MS) - ctx.now) / 1000));
    throw new ServiceError(
      429,
      'rate_limited',
      `This credential has ${open.count} open uploads, the workspace's limit of ${limits.open_uploads_per_key}: complete one (documents.CompleteUpload) or wait until one expires (the first in ${wait} s). Nothing was made.`,
      { 'Retry-After': String(wait) },
    );
  }
  const stored = await storedBytes(ctx.sql, ctx.workspaceId, ctx.now);
  const used = stored.files + stored.open;
  if (used + size > limits.stored_bytes) {
    throw payloadTooLarge(
      `The workspace stores ${used} bytes (files ${stored.files}, open uploads ${stored.open}); this upload's ${size} bytes would pass its storage limit of ${mib(limits.stored_bytes)}. Nothing was made; unused files are removed ${FILE_RETENTION_DAYS} days after upload, or ask the operator for a larger limit.`,
    );
  }
}

/** The event of a completed, scanned upload (the documents module's one outbox kind). */
export const DOCUMENT_EVENT_KINDS: readonly EventKindDeclaration[] = [
  {
    kind: UPLOAD_COMPLETED,
    description: 'An upload was completed and scanned: its file (`file_id`) can be used, e.g. in a signing request.',
    payload: 'UploadEventData',
    readWith: 'documents.ListDocuments',
  },
];

/** The operations, made once per process from the module's dependencies (the blob store, the scanner's settings). */
export const documentHandlers = (deps: DocumentsDeps): NamespaceHandlers<'documents'> => ({
  'documents.CreateUpload': async (input, ctx) => {
    if (BAD_FILENAME.test(input.filename)) throw invalidInput('filename: must not contain control characters (U+0000 to U+001F, U+007F), / or \\.');
    const { partSize: ps, partCount } = partLayout(input.size, input.part_size, input.part_count);
    if (input.private === true && !ctx.member) throw invalidInput('private: a private file is a member\'s own: send Service-Act-As (or leave private out for a workspace file).');
    await checkRoom(ctx, input.size);
    const row: DbUploadRow = {
      id: newId('up'),
      workspace_id: ctx.workspaceId,
      created_by_key_id: ctx.credential.keyId,
      member_id: ctx.member?.id ?? null,
      shared: ctx.member !== null && input.private === false,
      state: 'open',
      filename: input.filename,
      content_type: input.content_type,
      size: input.size,
      part_size: ps,
      part_count: partCount,
      sha256: input.sha256 ?? null,
      file_id: null,
      rejection_reason: null,
      created_at: ctx.now,
      updated_at: ctx.now,
      expires_at: ctx.now + UPLOAD_TTL_MS,
      completed_at: null,
    };
    await insertUpload(ctx.sql, row);
    return uploadView(row, []);
  },

  'documents.GetUpload': async (input, ctx) => {
    const u = await ownUpload(ctx, input.upload_id);
    return uploadView(u, await listParts(ctx.sql, u.id));
  },

  'documents.GetUploadPart': async (input, ctx) => {
    const u = await ownUpload(ctx, input.upload_id);
    const count = Number(u.part_count);
    if (input.part_number > count) throw invalidInput(`part_number: upload ${u.id} has ${count} part${count > 1 ? 's' : ''} (1 to ${count}).`);
    if (u.state !== 'open') throw conflict(`Upload ${u.id} is ${u.state}; it takes no more parts.`);
    const size = partSize(Number(u.size), Number(u.part_size), count, input.part_number);
    // A URL never outlives its upload.
    const expiresAt = Math.min(ctx.now + PART_URL_TTL_MS, Number(u.expires_at));
    const token = await signToken(ctx.sql, 'part', { u: u.id, p: input.part_number, s: size, h: input.sha256 ?? null, r: ctx.member?.role ?? null }, expiresAt);
    return { upload_id: u.id, part_number: input.part_number, method: 'PUT' as const, url: new URL(`/files/parts/${token}`, ctx.config.publicUrl).toString(), size, expires_at: expiresAt };
  },

  // Two phases: the parts are read, hashed and scanned before the transaction; the file is made in it.
  'documents.CompleteUpload': phased<'documents.CompleteUpload', CheckedFile | null>({
    prepare: (input, ctx) => checkUpload(deps, ctx, input),
    run: (input, ctx, checked) => complete(deps, ctx, input, checked),
  }),

  'documents.ListDocuments': async (input, ctx) => {
    if (input.scope === 'user' && !ctx.member) throw invalidInput("scope: user lists the private files of the member acted for; send Service-Act-As (or use scope: workspace).");
    const owner = input.scope === 'user' ? ctx.member!.id : null;
    const limit = input.limit ?? DEFAULT_PAGE_LIMIT;
    const filters = [ctx.workspaceId, input.scope, owner];
    const after = input.cursor ? await decodeCursor(ctx, input.cursor, TIME_CURSOR, filters, 'cursor belongs to a listing with another scope or member; send the same scope and Service-Act-As.') : null;
    const rows = await listFiles(ctx.sql, ctx.workspaceId, owner, after, limit + 1);
    const page = rows.slice(0, limit);
    const last = page.at(-1);
    const more = rows.length > limit && last !== undefined;
    return {
      items: page.map(fileView),
      has_more: more,
      next_cursor: more ? await encodeCursor(ctx, TIME_CURSOR, { t: last.createdAt, i: last.id }, filters) : null,
    };
  },
});
