/**
 * The blob store: file bytes for modules (uploads, signed archives), which ask for it as
 * `deps.storage` and never build their own. Everything streams: a put reads its source in chunks and
 * computes SHA-256 while writing, a get is a Readable, so memory stays bounded whatever the size.
 *
 * Backends (STORAGE): `database` (default; chunked rows, so every process on one PostgreSQL sees the
 * same files with no shared disk: storage/database.ts) and `filesystem` (a volume every process
 * mounts, STORAGE_PATH: storage/filesystem.ts). Never a local disk a second process cannot see.
 *
 * S3-compatible storage plugs in as a third `BlobStore` chosen in `createBlobStore`: `put` as a
 * multipart upload (parts of at least 5 MiB, hashed while streaming; CompleteMultipartUpload is the
 * commit, AbortMultipartUpload on failure, a bucket lifecycle rule for abandoned uploads, which is
 * what `removeIncompleteBlobs` would ask), `get` as GetObject's body, `concat` with UploadPartCopy,
 * the metadata (sha256, content type) as object metadata.
 */
import type { Database } from '../db/database.ts';
import type { Clock } from './clock.ts';
import type { ServiceEnv } from './config.ts';
import type { BlobStore, StorageConfig } from './storage/blob.ts';
import { DatabaseBlobStore } from './storage/database.ts';
import { FilesystemBlobStore } from './storage/filesystem.ts';

export { BlobExists, BlobNotFound, BlobTooLarge, checkBlobId, newBlobId, StorageError } from './storage/blob.ts';
export type { BlobInfo, BlobSource, BlobStore, PutOptions, StorageConfig } from './storage/blob.ts';

/** STORAGE (`database`, the default, or `filesystem`) and STORAGE_PATH (the filesystem backend's shared volume). */
export function storageConfigFromEnv(env: ServiceEnv): StorageConfig {
  const backend = env.STORAGE?.trim() || 'database';
  const dir = env.STORAGE_PATH?.trim();
  if (backend === 'database') return { backend };
  if (backend === 'filesystem') {
    if (!dir) throw new Error('STORAGE=filesystem needs STORAGE_PATH: a directory on a volume every process of the service mounts');
    return { backend, path: dir };
  }
  throw new Error(`STORAGE must be database or filesystem (got "${env.STORAGE}")`);
}

/** The process's blob store (built once, in service.ts); the filesystem backend's directory is checked now, so a bad one stops the start. */
export function createBlobStore(db: Database, clock: Clock, config: StorageConfig): BlobStore {
  if (config.backend === 'filesystem') return new FilesystemBlobStore(config.path, clock);
  return new DatabaseBlobStore(db, clock);
}
