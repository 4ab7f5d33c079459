/**
 * The filesystem backend of the blob store, for a volume every process of the service mounts
 * (STORAGE_PATH; never a local disk a second process cannot see). A blob is one file,
 * `blobs/<aa>/<bb>/<id>` (shards from the SHA-256 of the id, so no directory grows huge): a fixed
 * header with its facts, then the bytes. A put writes `tmp/<id>.<random>.part`, syncs it and hard-links
 * it into place, which fails when the id exists, so a blob appears whole or not at all and is never
 * overwritten. Ids are checked before they become file names (letters, digits, `_`, `-`), so no id
 * reaches outside the directory. What a crashed put leaves is in `tmp/`, which the cleanup sweeps.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type { Sql } from '../../db/database.ts';
import type { Clock } from '../clock.ts';
import {
  BlobExists,
  type BlobInfo,
  BlobNotFound,
  type BlobSource,
  type BlobStore,
  checkBlobId,
  checkContentType,
  checkedStream,
  checkMaxBytes,
  chunksOf,
  concatenated,
  newBlobId,
  type PutOptions,
  StorageError,
  statAll,
  Tally,
} from './blob.ts';

const HEADER_BYTES = 1024;
const MAGIC = 'WSOBLOB1 ';
const WRITE_BYTES = 256 * 1024;

const codeOf = (err: unknown) => (err as { code?: unknown } | null)?.code;

function encodeHeader(info: BlobInfo): Buffer {
  const text = MAGIC + JSON.stringify(info);
  const header = Buffer.alloc(HEADER_BYTES, 0x20);
  // An id of 128 and a content type of 255 printable characters leave the JSON far below the size.
  if (header.write(text, 'utf8') !== Buffer.byteLength(text)) throw new Error('blob header too long');
  header[HEADER_BYTES - 1] = 0x0a;
  return header;
}

function decodeHeader(header: Buffer, id: string): BlobInfo {
  const text = header.toString('utf8').trimEnd();
  if (!text.startsWith(MAGIC)) throw new StorageError('corrupt', `blob ${id} has no valid header`);
  const info = JSON.parse(text.slice(MAGIC.length)) as BlobInfo;
  // On a case-insensitive volume another id's file could answer to this name.
  if (info.id !== id) throw new BlobNotFound(id);
  return info;
}

export class FilesystemBlobStore implements BlobStore {
  readonly backend = 'filesystem' as const;

  /** A shared volume is outside every transaction. */
  within(_sql: Sql): BlobStore {
    return this;
  }
  private readonly root: string;

  /** Creates the directories under `dir` and checks they are writable; throws a readable error otherwise. */
  constructor(
    dir: string,
    private readonly clock: Clock,
  ) {
    this.root = path.resolve(dir);
    try {
      for (const sub of ['blobs', 'tmp']) fs.mkdirSync(path.join(this.root, sub), { recursive: true });
      fs.accessSync(this.root, fs.constants.R_OK | fs.constants.W_OK);
    } catch (err) {
      throw new Error(`STORAGE_PATH ${this.root} is not a writable directory: ${(err as Error).message}`);
    }
  }

  private pathOf(id: string): string {
    const shard = crypto.createHash('sha256').update(checkBlobId(id)).digest('hex');
    return path.join(this.root, 'blobs', shard.slice(0, 2), shard.slice(2, 4), id);
  }

  async put(id: string | null, source: BlobSource, options: PutOptions = {}): Promise<BlobInfo> {
    const blobId = id === null ? newBlobId() : checkBlobId(id);
    const contentType = checkContentType(options.contentType);
    const tally = new Tally(checkMaxBytes(options.maxBytes));
    const target = this.pathOf(blobId);
    if (fs.existsSync(target)) throw new BlobExists(blobId);
    const createdAt = this.clock.now();
    const tmp = path.join(this.root, 'tmp', `${blobId}.${crypto.randomBytes(8).toString('hex')}.part`);
    const file = await fs.promises.open(tmp, 'wx');
    let open = true;
    try {
      let position = HEADER_BYTES;
      for await (const chunk of chunksOf(source, WRITE_BYTES, tally)) {
        await file.write(chunk, 0, chunk.byteLength, position);
        position += chunk.byteLength;
      }
      const info: BlobInfo = { id: blobId, size: tally.size, sha256: tally.digest(), contentType, createdAt };
      await file.write(encodeHeader(info), 0, HEADER_BYTES, 0);
      await file.sync();
      open = false;
      await file.close();
      await fs.promises.mkdir(path.dirname(target), { recursive: true });
      await this.publish(tmp, target, blobId);
      return info;
    } finally {
      if (open) await file.close().catch(() => undefined);
      await fs.promises.unlink(tmp).catch(() => undefined);
    }
  }

  /** Puts the finished file in place unless the id exists: a hard link fails then, where a rename would overwrite. */
  private async publish(tmp: string, target: string, id: string): Promise<void> {
    try {
      await fs.promises.link(tmp, target);
    } catch (err) {
      if (codeOf(err) === 'EEXIST') throw new BlobExists(id);
      // Volumes without hard links: a rename after a check, which two puts of one id could race.
      if (!['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS'].includes(String(codeOf(err)))) throw err;
      if (fs.existsSync(target)) throw new BlobExists(id);
      await fs.promises.rename(tmp, target);
    }
    // Make the new name durable, where the platform lets a directory be synced.
    const dir = await fs.promises.open(path.dirname(target), 'r').catch(() => null);
    await dir?.sync().catch(() => undefined);
    await dir?.close();
  }

  /** Opens the blob's file and reads its facts; null when there is none. */
  private async open(id: string): Promise<{ file: fs.promises.FileHandle; info: BlobInfo } | null> {
    let file: fs.promises.FileHandle;
    try {
      file = await fs.promises.open(this.pathOf(id), 'r');
    } catch (err) {
      if (codeOf(err) === 'ENOENT') return null;
      throw err;
    }
    try {
      const header = Buffer.alloc(HEADER_BYTES);
      const { bytesRead } = await file.read(header, 0, HEADER_BYTES, 0);
      if (bytesRead < HEADER_BYTES) throw new StorageError('corrupt', `blob ${id} has no valid header`);
      return { file, info: decodeHeader(header, id) };
    } catch (err) {
      await file.close();
      if (err instanceof BlobNotFound) return null;
      throw err;
    }
  }

  async stat(id: string): Promise<BlobInfo | null> {
    const opened = await this.open(id);
    await opened?.file.close();
    return opened?.info ?? null;
  }

  async get(id: string): Promise<Readable> {
    const opened = await this.open(id);
    if (!opened) throw new BlobNotFound(id);
    // The open handle keeps the bytes readable even if the blob is deleted meanwhile.
    return checkedStream(opened.file.createReadStream({ start: HEADER_BYTES, highWaterMark: WRITE_BYTES }), opened.info);
  }

  async delete(id: string): Promise<void> {
    await fs.promises.unlink(this.pathOf(id)).catch((err) => {
      if (codeOf(err) !== 'ENOENT') throw err;
    });
  }

  copy(id: string, target: string | null = null, options: PutOptions = {}): Promise<BlobInfo> {
    return this.concat([id], target, options);
  }

  async concat(ids: readonly string[], target: string | null = null, options: PutOptions = {}): Promise<BlobInfo> {
    await statAll(this, ids);
    return this.put(target, concatenated(this, ids), options);
  }

  /** Unfinished puts' files in `tmp/` last written before `olderThan` (by the volume's clock). */
  async removeIncompleteBlobs(olderThan: number): Promise<number> {
    const dir = path.join(this.root, 'tmp');
    let removed = 0;
    for (const name of await fs.promises.readdir(dir)) {
      const file = path.join(dir, name);
      const stat = await fs.promises.stat(file).catch(() => null);
      if (!stat?.isFile() || stat.mtimeMs >= olderThan) continue;
      await fs.promises.unlink(file).catch(() => undefined);
      removed++;
    }
    return removed;
  }
}
