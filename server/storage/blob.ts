/** The blob store's interface, errors and the stream helpers its backends share (server/storage.ts). */
import crypto from 'node:crypto';
import { pipeline, type Readable, Transform, type TransformCallback } from 'node:stream';
import type { Sql } from '../../db/database.ts';

/** A stored blob's facts. */
export interface BlobInfo {
  readonly id: string;
  readonly size: number;
  /** Lower-case hex SHA-256 of the bytes, computed while they were written. */
  readonly sha256: string;
  readonly contentType: string | null;
  /** Unix ms (the service clock). */
  readonly createdAt: number;
}

/** Bytes to store: a Readable of Buffers, or any (async) iterable of Uint8Arrays. */
export type BlobSource = AsyncIterable<Uint8Array> | Iterable<Uint8Array> | Readable;

export interface PutOptions {
  readonly contentType?: string;
  /** More bytes than this: `BlobTooLarge`, and nothing is left behind. */
  readonly maxBytes?: number;
}

export interface BlobStore {
  readonly backend: StorageConfig['backend'];
  /**
   * Stores the bytes of `source` under `id` (checked by `checkBlobId`), or under a new id when null.
   * Ids are written once: an id in use (even by an unfinished put) is `BlobExists`. The blob is
   * visible only once it is complete; a put that fails removes what it wrote.
   */
  put(id: string | null, source: BlobSource, options?: PutOptions): Promise<BlobInfo>;
  /** The bytes as a stream; `BlobNotFound` when there is no complete blob of that id. The stream fails if they do not match the stored size and SHA-256. */
  get(id: string): Promise<Readable>;
  /** The blob's facts, or null when there is no complete blob of that id. */
  stat(id: string): Promise<BlobInfo | null>;
  /** Removes the blob; nothing to remove is fine (idempotent). */
  delete(id: string): Promise<void>;
  /** A new blob with the same bytes (`target` or a new id). */
  copy(id: string, target?: string | null, options?: PutOptions): Promise<BlobInfo>;
  /** A new blob of the given blobs' bytes one after another (uploaded parts into one file), streamed. `BlobNotFound` before writing anything when one is missing. */
  concat(ids: readonly string[], target?: string | null, options?: PutOptions): Promise<BlobInfo>;
  /** Removes what puts that never finished (a crashed process) left, untouched since `olderThan` (Unix ms); returns how many. */
  removeIncompleteBlobs(olderThan: number): Promise<number>;
  /**
   * The store for work inside the open transaction `sql` (an operation's `ctx.sql`): the database
   * backend reads and writes in that transaction, so what it writes commits or rolls back with it (and
   * SQLite's one connection, held by the transaction, is never waited for); a shared volume is
   * outside every transaction and answers itself.
   */
  within(sql: Sql): BlobStore;
}

export type StorageConfig = { readonly backend: 'database' } | { readonly backend: 'filesystem'; readonly path: string };

/** Why a blob operation was refused; `code` tells them apart. */
export class StorageError extends Error {
  constructor(
    readonly code: 'not_found' | 'too_large' | 'exists' | 'invalid_id' | 'invalid_source' | 'corrupt',
    message: string,
  ) {
    super(message);
    this.name = 'StorageError';
  }
}
export class BlobNotFound extends StorageError {
  constructor(id: string, why = 'does not exist') {
    super('not_found', `blob ${id} ${why}`);
  }
}
export class BlobTooLarge extends StorageError {
  constructor(readonly maxBytes: number) {
    super('too_large', `the bytes exceed the limit of ${maxBytes}`);
  }
}
export class BlobExists extends StorageError {
  constructor(id: string) {
    super('exists', `blob ${id} exists already (ids are written once)`);
  }
}

/** Letters, digits, `_` and `-`, 1 to 128: safe as a file name and a key anywhere. */
const BLOB_ID = /^[A-Za-z0-9_-]{1,128}$/;

/** Returns the id when it is a valid blob id; throws `StorageError('invalid_id')` otherwise. */
export function checkBlobId(id: unknown): string {
  if (typeof id !== 'string' || !BLOB_ID.test(id)) throw new StorageError('invalid_id', `a blob id is 1 to 128 letters, digits, _ or - (got ${JSON.stringify(String(id).slice(0, 40))})`);
  return id;
}

export const newBlobId = (): string => `blob_${crypto.randomBytes(15).toString('base64url').replace(/[-_]/g, 'x')}`;

/** A content type as stored: printable ASCII, at most 255 characters; null when not given. */
export function checkContentType(value: string | undefined): string | null {
  if (value === undefined) return null;
  if (typeof value !== 'string' || !/^[\x21-\x7e][\x20-\x7e]{0,254}$/.test(value)) throw new StorageError('invalid_source', 'a content type is 1 to 255 printable ASCII characters');
  return value;
}

export function checkMaxBytes(value: number | undefined): number {
  if (value === undefined) return Number.MAX_SAFE_INTEGER;
  if (!Number.isSafeInteger(value) || value < 0) throw new StorageError('invalid_source', `maxBytes must be a whole number >= 0 (got ${value})`);
  return value;
}

/** What a put has read so far, for the blob's facts. */
export class Tally {
  size = 0;
  private readonly hash = crypto.createHash('sha256');
  constructor(private readonly maxBytes: number) {}
  add(bytes: Uint8Array): void {
    this.size += bytes.byteLength;
    if (this.size > this.maxBytes) throw new BlobTooLarge(this.maxBytes);
    this.hash.update(bytes);
  }
  digest(): string {
    return this.hash.digest('hex');
  }
}

function asBytes(chunk: unknown): Uint8Array {
  if (chunk instanceof Uint8Array) return chunk;
  throw new StorageError('invalid_source', `a blob source must yield bytes (Buffer or Uint8Array), not ${typeof chunk === 'string' ? 'strings' : typeof chunk}`);
}

/**
 * The source's bytes in pieces of exactly `size` (the last one shorter; none for an empty source),
 * counted and hashed into `tally` before they are handed on, so an over-limit piece is never written.
 */
export async function* chunksOf(source: BlobSource, size: number, tally: Tally): AsyncGenerator<Buffer> {
  let held: Buffer[] = [];
  let heldBytes = 0;
  for await (const raw of source as AsyncIterable<unknown>) {
    const bytes = asBytes(raw);
    tally.add(bytes);
    held.push(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
    heldBytes += bytes.byteLength;
    while (heldBytes >= size) {
      const all = held.length === 1 ? held[0]! : Buffer.concat(held, heldBytes);
      yield Buffer.from(all.subarray(0, size));
      const rest = all.subarray(size);
      held = rest.byteLength ? [rest] : [];
      heldBytes = rest.byteLength;
    }
  }
  if (heldBytes) yield Buffer.concat(held, heldBytes);
}

/**
 * `source` as read by a caller: it fails at the end when the bytes are not the stored size and SHA-256,
 * and with the source's own error; a caller that stops reading early stops the source too.
 */
export function checkedStream(source: Readable, info: BlobInfo): Readable {
  const out = verifier(info);
  pipeline(source, out, () => undefined);
  return out;
}

function verifier(info: BlobInfo): Transform {
  const hash = crypto.createHash('sha256');
  let size = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, done: TransformCallback) {
      size += chunk.byteLength;
      hash.update(chunk);
      done(null, chunk);
    },
    flush(done: TransformCallback) {
      const sha = hash.digest('hex');
      done(size === info.size && sha === info.sha256 ? null : new StorageError('corrupt', `blob ${info.id} read back ${size} bytes with another SHA-256 than stored (damaged or deleted while read)`));
    },
  });
}

/** The given blobs' bytes one after another; each opened only when the one before it has ended. */
export async function* concatenated(store: Pick<BlobStore, 'get'>, ids: readonly string[]): AsyncGenerator<Uint8Array> {
  for (const id of ids) yield* (await store.get(id)) as AsyncIterable<Buffer>;
}

/** Checks that every id names a complete blob, so a concat refuses before it writes anything. */
export async function statAll(store: Pick<BlobStore, 'stat'>, ids: readonly string[]): Promise<void> {
  for (const id of ids) if (!(await store.stat(checkBlobId(id)))) throw new BlobNotFound(id);
}

