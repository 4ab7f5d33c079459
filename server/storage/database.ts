/**
 * The database backend of the blob store (the default): bytes in 256 KiB chunk rows (`blob_chunks`:
 * bytea on PostgreSQL, BLOB on SQLite) under a `blobs` row. A put writes a few chunks per short
 * transaction, never holding one while it waits for its source (on SQLite that would stall every other
 * writer of the process), and marks the blob complete last: a crash leaves an unfinished, invisible
 * blob that `removeIncompleteBlobs` clears. Reads fetch a few chunks at a time.
 */
import { Readable } from 'node:stream';
import type { Database, Sql } from '../../db/database.ts';
import {
  blobChunksFrom,
  completeBlob,
  completeBlobById,
  type DbBlobRow,
  deleteBlobChunks,
  deleteBlobRow,
  hideBlob,
  insertBlob,
  insertBlobChunk,
  staleIncompleteBlobs,
  touchBlob,
} from '../../db/queries/blobs.ts';
import type { Clock } from '../clock.ts';
import {
  BlobExists,
  type BlobInfo,
  BlobNotFound,
  type BlobSource,
  type BlobStore,
  checkBlobId,
  checkContentType,
  checkMaxBytes,
  chunksOf,
  concatenated,
  newBlobId,
  type PutOptions,
  StorageError,
  statAll,
  Tally,
  checkedStream,
} from './blob.ts';

export const CHUNK_BYTES = 256 * 1024;
/** Chunks written per transaction (1 MiB): fewer commits, and still a short lock. */
const CHUNKS_PER_TX = 4;
/** Chunks read per query. */
const CHUNKS_PER_READ = 2;
/** Chunk rows deleted per statement. */
const CHUNKS_PER_DELETE = 64;

const infoOf = (row: DbBlobRow): BlobInfo => ({ id: row.id, size: Number(row.size), sha256: row.sha256!, contentType: row.content_type, createdAt: Number(row.created_at) });

export class DatabaseBlobStore implements BlobStore {
  readonly backend = 'database' as const;

  constructor(
    /** The database, or one open transaction of it (`within`): every statement and `tx` run there. */
    private readonly db: Pick<Database, 'sql' | 'tx'>,
    private readonly clock: Clock,
  ) {}

  within(sql: Sql): BlobStore {
    return new DatabaseBlobStore({ sql, tx: (fn) => fn(sql) }, this.clock);
  }

  async put(id: string | null, source: BlobSource, options: PutOptions = {}): Promise<BlobInfo> {
    const blobId = id === null ? newBlobId() : checkBlobId(id);
    const contentType = checkContentType(options.contentType);
    const tally = new Tally(checkMaxBytes(options.maxBytes));
    const createdAt = this.clock.now();
    if (!(await insertBlob(this.db.sql, { id: blobId, contentType, now: createdAt }))) throw new BlobExists(blobId);
    try {
      let idx = 0;
      let pending: Buffer[] = [];
      const flush = async () => {
        const batch = pending;
        pending = [];
        await this.db.tx(async (sql) => {
          for (const chunk of batch) await insertBlobChunk(sql, blobId, idx++, chunk);
          if (!(await touchBlob(sql, blobId, this.clock.now()))) throw new BlobNotFound(blobId, 'was removed while it was being written');
        });
      };
      for await (const chunk of chunksOf(source, CHUNK_BYTES, tally)) {
        pending.push(chunk);
        if (pending.length === CHUNKS_PER_TX) await flush();
      }
      if (pending.length) await flush();
      const sha256 = tally.digest();
      if (!(await completeBlob(this.db.sql, blobId, { size: tally.size, sha256, now: this.clock.now() }))) throw new BlobNotFound(blobId, 'was removed while it was being written');
      return { id: blobId, size: tally.size, sha256, contentType, createdAt };
    } catch (err) {
      // Best effort: if this fails too (the database went away), the cleanup of unfinished blobs removes it.
      await this.remove(blobId).catch(() => undefined);
      throw err;
    }
  }

  async stat(id: string): Promise<BlobInfo | null> {
    const row = await completeBlobById(this.db.sql, checkBlobId(id));
    return row ? infoOf(row) : null;
  }

  async get(id: string): Promise<Readable> {
    const info = await this.stat(id);
    if (!info) throw new BlobNotFound(id);
    const sql = this.db.sql;
    const chunkCount = Math.ceil(info.size / CHUNK_BYTES);
    async function* chunks(): AsyncGenerator<Buffer> {
      for (let next = 0; next < chunkCount; ) {
        const rows = await blobChunksFrom(sql, info!.id, next, CHUNKS_PER_READ);
        if (!rows.length) throw new StorageError('corrupt', `blob ${info!.id} lost its chunks from ${next} on (deleted while read)`);
        for (const row of rows) {
          if (row.idx !== next) throw new StorageError('corrupt', `blob ${info!.id} is missing chunk ${next}`);
          next++;
          yield row.bytes;
        }
      }
    }
    return checkedStream(Readable.from(chunks(), { objectMode: false }), info);
  }

  async delete(id: string): Promise<void> {
    await this.remove(checkBlobId(id));
  }

  copy(id: string, target: string | null = null, options: PutOptions = {}): Promise<BlobInfo> {
    return this.concat([id], target, options);
  }

  async concat(ids: readonly string[], target: string | null = null, options: PutOptions = {}): Promise<BlobInfo> {
    await statAll(this, ids);
    return this.put(target, concatenated(this, ids), options);
  }

  async removeIncompleteBlobs(olderThan: number): Promise<number> {
    let removed = 0;
    for (;;) {
      const ids = await staleIncompleteBlobs(this.db.sql, olderThan, 100);
      for (const id of ids) await this.remove(id);
      removed += ids.length;
      if (ids.length < 100) return removed;
    }
  }

  /** Hides the blob, then deletes its chunks a batch per statement and its row last. */
  private async remove(id: string): Promise<void> {
    if (!(await hideBlob(this.db.sql, id))) return;
    while ((await deleteBlobChunks(this.db.sql, id, CHUNKS_PER_DELETE)) > 0);
    await deleteBlobRow(this.db.sql, id);
  }
}
