import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import v8 from 'node:v8';
import vm from 'node:vm';
import { openDatabase } from '../../db/database.ts';
import { countBlobChunks } from '../../db/queries/blobs.ts';
import { FakeClock } from '../../server/clock.ts';
import { loadConfig } from '../../server/config.ts';
import { BlobExists, BlobNotFound, type BlobStore, BlobTooLarge, createBlobStore, StorageError } from '../../server/storage.ts';
import { forEachDatabase } from '../support/service.ts';

// A full collection on demand, so the memory check sees what is alive rather than garbage not yet collected.
v8.setFlagsFromString('--expose-gc');
const collectGarbage = vm.runInNewContext('gc') as () => void;

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const MiB = 1024 * 1024;
const DAY = 86_400_000;

/** Deterministic bytes (xorshift32), `total` of them in pieces of `piece`. */
function* noise(total: number, seed = 7, piece = 64 * 1024): Generator<Buffer> {
  let x = seed >>> 0 || 1;
  for (let done = 0; done < total; done += piece) {
    const words = new Uint32Array(Math.ceil(Math.min(piece, total - done) / 4));
    for (let i = 0; i < words.length; i++) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      words[i] = x >>> 0;
    }
    yield Buffer.from(words.buffer, 0, Math.min(piece, total - done));
  }
}
const bytesOf = (total: number, seed?: number) => Buffer.concat([...noise(total, seed)]);
const sha = (b: Buffer) => crypto.createHash('sha256').update(b).digest('hex');

async function readAll(stream: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const p of stream) parts.push(p as Buffer);
  return Buffer.concat(parts);
}

async function rejectsWith(promise: Promise<unknown>, type: new (...args: never[]) => Error, message?: RegExp): Promise<void> {
  await assert.rejects(promise, (err: unknown) => {
    assert.ok(err instanceof type, `expected ${type.name}, got ${String(err)}`);
    if (message) assert.match((err as Error).message, message);
    return true;
  });
}

interface Backend {
  store(): BlobStore;
  clock(): FakeClock;
  /** Bytes of an unfinished put of `id` already written where another process could read them. */
  stored(id: string): Promise<number>;
  /** What the backend holds of an id besides a complete blob (rows, temporary files): none when nothing is left. */
  leftovers(id: string): Promise<number>;
  /** Runs the process's cleanup of unfinished puts as if `ageMs` had passed since they were last written. */
  cleanupAfter(ageMs: number): Promise<number>;
  /** `node putThenDie.ts` arguments that reach this backend's data. */
  crashArgs(): [string, string];
  label: string;
}

/** The cases every backend passes. */
function blobStoreCases(b: Backend): void {
  it('streams a 20 MB blob in and out with its SHA-256, in bounded memory', async function () {
    this.timeout(180_000);
    const size = 20 * 1_000_000;
    const expected = crypto.createHash('sha256');
    for (const piece of noise(size, 11)) expected.update(piece);
    const digest = expected.digest('hex');
    const readBack = async (id: string, each: () => void = () => undefined) => {
      const hash = crypto.createHash('sha256');
      let bytes = 0;
      for await (const piece of await b.store().get(id)) {
        each();
        hash.update(piece as Buffer);
        bytes += (piece as Buffer).byteLength;
      }
      return { bytes, sha256: hash.digest('hex') };
    };

    // Memory: the put stores as it reads (its source never runs more than a few chunks ahead of what is
    // written), and RSS, sampled after full collections at every 512 KiB, is reported. RSS is not asserted:
    // glibc keeps freed 256 KiB blocks for reuse, so it measures the allocator as much as what is alive.
    const rss = () => {
      collectGarbage();
      collectGarbage();
      return process.memoryUsage().rss;
    };
    const base = rss();
    let peak = 0;
    let pieces = 0;
    const sample = () => {
      if (pieces++ % 8 === 0) peak = Math.max(peak, rss() - base);
    };
    let yielded = 0;
    let ahead = 0;
    const source = async function* () {
      for (const piece of noise(size, 11)) {
        sample();
        ahead = Math.max(ahead, yielded - (await b.stored('big')));
        yielded += piece.byteLength;
        yield piece;
      }
    };
    assert.equal((await b.store().put('big', source())).sha256, digest);
    assert.ok(ahead <= 1.5 * MiB, `the put read ${(ahead / MiB).toFixed(2)} MiB ahead of what it had stored`);
    pieces = 0;
    assert.deepEqual(await readBack('big', sample), { bytes: size, sha256: digest });
    await b.store().delete('big');

    // Throughput: a plain run, with nothing else in the way.
    let started = performance.now();
    const info = await b.store().put('big', noise(size, 11), { contentType: 'application/pdf', maxBytes: size });
    const writeMs = performance.now() - started;
    assert.deepEqual(info, { id: 'big', size, sha256: digest, contentType: 'application/pdf', createdAt: b.clock().now() });
    started = performance.now();
    assert.deepEqual(await readBack('big'), { bytes: size, sha256: digest });
    const readMs = performance.now() - started;
    await b.store().delete('big');

    const mbps = (ms: number) => (size / 1e6 / (ms / 1000)).toFixed(0);
    console.log(
      `      [${b.label}] 20 MB: write ${writeMs.toFixed(0)} ms (${mbps(writeMs)} MB/s), read ${readMs.toFixed(0)} ms (${mbps(readMs)} MB/s); ` +
        `source at most ${(ahead / MiB).toFixed(2)} MiB ahead of the store; peak RSS growth ${(peak / MiB).toFixed(1)} MiB`,
    );
  });

  it('assembles parts stored out of order into one blob in the order asked, across chunk boundaries', async () => {
    const parts = [bytesOf(300 * 1024, 1), bytesOf(1, 2), bytesOf(600 * 1024 + 3, 3), Buffer.alloc(0)];
    for (const i of [2, 0, 3, 1]) await b.store().put(`part-${i}`, Readable.from([parts[i]!]));
    const whole = Buffer.concat(parts);
    const info = await b.store().concat(['part-0', 'part-1', 'part-2', 'part-3'], 'assembled', { contentType: 'application/pdf' });
    assert.equal(info.size, whole.byteLength);
    assert.equal(info.sha256, sha(whole));
    assert.ok(whole.equals(await readAll(await b.store().get('assembled'))));
    assert.deepEqual(await b.store().stat('assembled'), info);

    const copy = await b.store().copy('assembled', null);
    assert.match(copy.id, /^blob_[A-Za-z0-9]+$/);
    assert.equal(copy.sha256, info.sha256);
    assert.equal(copy.contentType, null);

    await rejectsWith(b.store().concat(['part-0', 'nope', 'part-2'], 'never'), BlobNotFound, /nope/);
    assert.equal(await b.store().stat('never'), null);
    assert.equal(await b.leftovers('never'), 0);
    for (const id of ['part-0', 'part-1', 'part-2', 'part-3', 'assembled', copy.id]) await b.store().delete(id);
  });

  it('refuses more than maxBytes with BlobTooLarge and leaves nothing behind; exactly the limit is fine', async () => {
    await rejectsWith(b.store().put('toolarge', noise(3 * MiB), { maxBytes: MiB + 5 }), BlobTooLarge, /limit of 1048581/);
    assert.equal(await b.store().stat('toolarge'), null);
    assert.equal(await b.leftovers('toolarge'), 0);
    await rejectsWith(b.store().get('toolarge'), BlobNotFound);
    await rejectsWith(b.store().concat([], 'empty-too-large', { maxBytes: -1 }), StorageError, /maxBytes/);

    const exact = await b.store().put('exact', noise(MiB + 5), { maxBytes: MiB + 5 });
    assert.equal(exact.size, MiB + 5);
    await rejectsWith(b.store().concat(['exact'], 'exact-copy', { maxBytes: MiB }), BlobTooLarge);
    assert.equal(await b.leftovers('exact-copy'), 0);
    await b.store().delete('exact');
  });

  it('answers BlobNotFound for a missing id, refuses ids that are not plain names, and writes an id once', async () => {
    await rejectsWith(b.store().get('missing'), BlobNotFound, /blob missing does not exist/);
    assert.equal(await b.store().stat('missing'), null);
    for (const bad of ['../etc/passwd', 'a/b', '', '.', 'x'.repeat(129), 'a b', 'é']) {
      await rejectsWith(b.store().get(bad), StorageError, /a blob id is 1 to 128/);
      await rejectsWith(b.store().put(bad, noise(10)), StorageError, /a blob id is 1 to 128/);
      await rejectsWith(b.store().delete(bad), StorageError, /a blob id is 1 to 128/);
    }
    await rejectsWith(b.store().put(null, Readable.from(['text, not bytes'])), StorageError, /must yield bytes/);
    await rejectsWith(b.store().put(null, noise(10), { contentType: 'bad\ntype' }), StorageError, /content type/);

    await b.store().put('once', noise(10));
    await rejectsWith(b.store().put('once', noise(20)), BlobExists);
    assert.equal((await b.store().stat('once'))!.size, 10, 'the first bytes stay');
    await b.store().delete('once');
  });

  it('deletes idempotently, and a deleted id may be written again', async () => {
    await b.store().put('gone', noise(700 * 1024));
    await b.store().delete('gone');
    await b.store().delete('gone');
    await b.store().delete('never-existed');
    await rejectsWith(b.store().get('gone'), BlobNotFound);
    assert.equal(await b.leftovers('gone'), 0);
    const again = await b.store().put('gone', noise(5, 9));
    assert.equal(again.size, 5);
    await b.store().delete('gone');
  });

  it('a put whose source fails midway answers that error and leaves no blob', async () => {
    async function* failing() {
      yield* noise(2 * MiB);
      throw new Error('connection reset by the client');
    }
    await assert.rejects(b.store().put('interrupted', failing()), /connection reset by the client/);
    assert.equal(await b.store().stat('interrupted'), null);
    assert.equal(await b.leftovers('interrupted'), 0);
  });

  it('a process killed in the middle of a put leaves an unfinished blob nobody sees, which the cleanup removes', async function () {
    this.timeout(60_000);
    const [backend, where] = b.crashArgs();
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'test/platform/fixtures/putThenDie.ts'), backend, where, 'crashed', String(b.clock().now())], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const signal = await new Promise((resolve) => child.on('exit', (_code, sig) => resolve(sig)));
    assert.equal(signal, 'SIGKILL', output);
    assert.ok((await b.leftovers('crashed')) > 0, 'it wrote part of the blob before it died');
    assert.equal(await b.store().stat('crashed'), null);
    await rejectsWith(b.store().get('crashed'), BlobNotFound);

    assert.equal(await b.cleanupAfter(60_000), 0, 'a put written a minute ago may still be running');
    assert.ok((await b.cleanupAfter(2 * DAY)) >= 1);
    assert.equal(await b.leftovers('crashed'), 0);
    const info = await b.store().put('crashed', noise(3));
    assert.equal(info.size, 3, 'the id is free again');
    await b.store().delete('crashed');
  });
}

forEachDatabase('blob store: database backend', (svc) => {
  let store: BlobStore;
  before(() => {
    store = createBlobStore(svc().db, svc().clock, { backend: 'database' });
  });
  blobStoreCases({
    store: () => store,
    clock: () => svc().clock,
    get label() {
      return `database ${svc().db.dialect}`;
    },
    async stored(id) {
      const row = await svc().db.sql.one<{ n: number | null }>(`SELECT SUM(length(bytes)) AS n FROM blob_chunks WHERE blob_id = ?`, [id]);
      return Number(row?.n ?? 0);
    },
    async leftovers(id) {
      const rows = await svc().db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM blobs WHERE id = ?`, [id]);
      return Number(rows!.n) + (await countBlobChunks(svc().db.sql, id));
    },
    async cleanupAfter(ageMs) {
      // As the recurring job storage.cleanup does (tested below): unfinished blobs untouched for a day.
      const before = await svc().db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM blobs WHERE completed_at IS NULL`);
      const clock = new FakeClock(svc().clock.now() + ageMs);
      const removed = await createBlobStore(svc().db, clock, { backend: 'database' }).removeIncompleteBlobs(clock.now() - DAY);
      const after = await svc().db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM blobs WHERE completed_at IS NULL`);
      assert.equal(Number(before!.n) - Number(after!.n), removed);
      return removed;
    },
    crashArgs: () => ['database', svc().databaseUrl],
  });

  it('keeps a blob in 256 KiB chunk rows: 20 MB is 77 rows, and a 1-byte blob one', async () => {
    await store.put('rows', noise(20 * 1_000_000));
    assert.equal(await countBlobChunks(svc().db.sql, 'rows'), Math.ceil(20_000_000 / (256 * 1024)));
    await store.put('tiny', noise(1));
    assert.equal(await countBlobChunks(svc().db.sql, 'tiny'), 1);
    await store.put('nothing', noise(0));
    assert.equal(await countBlobChunks(svc().db.sql, 'nothing'), 0);
    assert.equal((await readAll(await store.get('nothing'))).byteLength, 0);
    for (const id of ['rows', 'tiny', 'nothing']) await store.delete(id);
  });

  it('reads a few chunks at a time: chunks removed under a reader that has not reached them fail the stream', async () => {
    await store.put('partial', noise(3 * MiB));
    const stream = await store.get('partial');
    const reader = stream[Symbol.asyncIterator]();
    assert.ok(!(await reader.next()).done);
    await svc().db.sql.run(`DELETE FROM blob_chunks WHERE blob_id = 'partial' AND idx >= 6`);
    await assert.rejects(
      (async () => {
        while (!(await reader.next()).done);
      })(),
      (err: unknown) => err instanceof StorageError && err.code === 'corrupt' && /lost its chunks from 6 on/.test(err.message),
    );
    await store.delete('partial');
  });

  it('two service processes on one database see the same blobs (no shared disk)', async () => {
    const second = openDatabase(svc().databaseUrl);
    try {
      const other = createBlobStore(second, svc().clock, { backend: 'database' });
      const bytes = bytesOf(MiB + 17, 5);
      const info = await store.put('shared', Readable.from([bytes]), { contentType: 'application/pdf' });
      assert.deepEqual(await other.stat('shared'), info);
      assert.ok(bytes.equals(await readAll(await other.get('shared'))));
      await other.delete('shared');
      assert.equal(await store.stat('shared'), null);
    } finally {
      await second.close();
    }
  });

  it('the service runs the cleanup as the recurring job storage.cleanup', async () => {
    await svc().db.sql.run(`INSERT INTO blobs (id, created_at, touched_at) VALUES ('abandoned', ?, ?)`, [svc().clock.now(), svc().clock.now()]);
    svc().clock.advance(2 * DAY);
    await svc().jobs.scheduleRecurring();
    await svc().jobs.runDue();
    assert.equal((await svc().db.sql.all(`SELECT id FROM blobs WHERE id = 'abandoned'`)).length, 0);
  });
});

describe('blob store: filesystem backend', () => {
  let dir: string;
  let store: BlobStore;
  const clock = new FakeClock();
  // The filesystem backend keeps nothing in the database.
  const unused = openDatabase('sqlite::memory:');
  const tmpFiles = () => fs.readdirSync(path.join(dir, 'tmp'));
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wsops-blobs-'));
    store = createBlobStore(unused, clock, { backend: 'filesystem', path: dir });
  });
  after(async () => {
    fs.rmSync(dir, { recursive: true, force: true });
    await unused.close();
  });

  blobStoreCases({
    label: 'filesystem',
    store: () => store,
    clock: () => clock,
    async stored(id) {
      const part = tmpFiles().find((f) => f.startsWith(`${id}.`));
      return part ? Math.max(0, fs.statSync(path.join(dir, 'tmp', part)).size - 1024) : 0;
    },
    async leftovers(id) {
      return tmpFiles().filter((f) => f.startsWith(`${id}.`)).length + (fs.existsSync(path.join(dir, 'blobs')) ? findFiles(path.join(dir, 'blobs')).filter((f) => path.basename(f) === id).length : 0);
    },
    async cleanupAfter(ageMs) {
      // Files carry the volume's clock: age them instead of the service clock.
      const shifted = Date.now() - ageMs;
      for (const f of tmpFiles()) fs.utimesSync(path.join(dir, 'tmp', f), shifted / 1000, shifted / 1000);
      return store.removeIncompleteBlobs(Date.now() - DAY);
    },
    crashArgs: () => ['filesystem', dir],
  });

  it('keeps each blob as one file in sharded folders inside STORAGE_PATH, and nothing in tmp/ after a put', async () => {
    await store.put('sharded', noise(100));
    const files = findFiles(path.join(dir, 'blobs'));
    const file = files.find((f) => path.basename(f) === 'sharded')!;
    assert.match(path.relative(dir, file), /^blobs\/[0-9a-f]{2}\/[0-9a-f]{2}\/sharded$/);
    assert.deepEqual(tmpFiles(), []);
    await store.delete('sharded');
  });

  it('refuses an unwritable or missing STORAGE_PATH at start with a readable error', () => {
    const file = path.join(dir, 'a-file');
    fs.writeFileSync(file, 'x');
    assert.throws(() => createBlobStore(unused, clock, { backend: 'filesystem', path: file }), /STORAGE_PATH .*a-file is not a writable directory/);
  });
});

describe('blob store settings', () => {
  it('STORAGE is database by default, filesystem with STORAGE_PATH, and anything else stops the start', () => {
    assert.deepEqual(loadConfig({}).storage, { backend: 'database' });
    assert.deepEqual(loadConfig({ STORAGE: 'filesystem', STORAGE_PATH: '/srv/blobs' }).storage, { backend: 'filesystem', path: '/srv/blobs' });
    assert.throws(() => loadConfig({ STORAGE: 'filesystem' }), /STORAGE=filesystem needs STORAGE_PATH/);
    assert.throws(() => loadConfig({ STORAGE: 's3' }), /STORAGE must be database or filesystem \(got "s3"\)/);
  });
});

function findFiles(dir: string): string[] {
  return (fs.readdirSync(dir, { recursive: true }) as string[]).map((f) => path.join(dir, f)).filter((f) => fs.statSync(f).isFile());
}
