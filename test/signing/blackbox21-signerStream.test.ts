/**
 * The signer's `document.pdf` is streamed from the blob store, never loaded whole per request (12 slow
 * readers of a 45 MiB file must not cost 12 × 45 MiB). Deterministic check: with a reader that stops
 * after the first bytes, the answer has started while most of the file is still unread, so bytes
 * changed on the volume after that point reach the reader (or the stream's SHA-256 check cuts the body
 * short); an answer built from the whole file in memory would carry the old bytes intact.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { createFile } from '../../handlers/documents/files.ts';
import { mintSignerLink } from '../../handlers/signing/signer/links.ts';
import { recordOpened } from '../../handlers/signing/request/lifecycle.ts';
import { createBlobStore } from '../../server/storage.ts';
import { databases, startTestService, type TestService } from '../support/service.ts';
import { signingWorkspace } from './requestSupport.ts';
import { samplePdf } from './signerKit.ts';

const MIB = 1024 * 1024;
const SIZE = 45 * MIB;

/** The file under `root` named `name` (the volume shards blobs in subfolders). */
function findBlob(root: string, name: string): string {
  for (const entry of fs.readdirSync(root, { withFileTypes: true, recursive: true })) {
    if (entry.isFile() && entry.name === name) return path.join(entry.parentPath, entry.name);
  }
  throw new Error(`no blob ${name} under ${root}`);
}

for (const database of databases) {
  describe(`the signer's document.pdf streams [${database.name}]`, function () {
    this.timeout(60_000);
    let svc: TestService;
    let volume: string;

    before(async () => {
      volume = fs.mkdtempSync(path.join(os.tmpdir(), 'wsops-stream-'));
      svc = await startTestService(database.url(), { storage: { backend: 'filesystem', path: volume } });
    });
    after(async () => {
      await svc?.close();
      fs.rmSync(volume, { recursive: true, force: true });
    });

    it('starts answering before the file is read: bytes changed on the volume after the first chunk reach the reader, or the body is cut short', async () => {
      const ws = await signingWorkspace(svc);
      const head = Buffer.from(await samplePdf('Large document', 1));
      const original = Buffer.concat([head, Buffer.alloc(SIZE - head.length, 0x20)]);
      const blob = await createBlobStore(svc.db, svc.clock, svc.config.storage).put(null, [original], { contentType: 'application/pdf' });
      const file = await createFile(
        svc.db.sql,
        { workspaceId: ws.workspace_id, ownerMemberId: null, createdByKeyId: null, filename: 'large.pdf', contentType: 'application/pdf', size: SIZE, sha256: blob.sha256, pageCount: 1, blobId: blob.id, source: 'upload' },
        svc.clock.now(),
      );
      const api = svc.client(ws.keys.sender!.secret);
      const created = await api.signing.RequestFileSignatures({ file_id: file.id, signers: [{ email: 'large@example.test', name: 'L' }] });
      assert.ok(created.data, JSON.stringify(created.error));
      const recipient = created.data.recipients[0]!.recipient_id;
      const token = await svc.db.tx((sql) => mintSignerLink(sql, { recipientId: recipient, requestId: created.data!.signing_request_id }, svc.clock.now()));
      await svc.db.tx((sql) => recordOpened(sql, { recipientId: recipient, now: svc.clock.now() }));
      const onDisk = findBlob(volume, blob.id);

      const outcome = await new Promise<{ status: number; length: string | undefined; body: Buffer; aborted: boolean }>((resolve, reject) => {
        const req = http.get(`${svc.origin}/sign/${token}/document.pdf`, (res) => {
          const chunks: Buffer[] = [];
          let changed = false;
          let aborted = false;
          res.on('data', (chunk: Buffer) => {
            chunks.push(chunk);
            if (changed) return;
            changed = true;
            res.pause();
            // The reader has the first bytes and reads no more for now: change the file's last byte.
            const fd = fs.openSync(onDisk, 'r+');
            fs.writeSync(fd, Buffer.from('!'), 0, 1, fs.fstatSync(fd).size - 1);
            fs.closeSync(fd);
            setTimeout(() => res.resume(), 50);
          });
          res.on('aborted', () => (aborted = true));
          res.on('error', () => (aborted = true));
          res.on('close', () => resolve({ status: res.statusCode!, length: res.headers['content-length'], body: Buffer.concat(chunks), aborted: aborted || !res.complete }));
        });
        req.on('error', reject);
      });
      assert.equal(outcome.status, 200);
      assert.equal(outcome.length, String(SIZE));
      const intact = !outcome.aborted && outcome.body.equals(original);
      assert.equal(intact, false, 'the answer was made from bytes read after it started (a whole-file buffer would be intact)');
      assert.ok(outcome.aborted || outcome.body.at(-1) === '!'.charCodeAt(0), 'the changed byte arrived, or the SHA-256 check cut the body short');
    });
  });
}
