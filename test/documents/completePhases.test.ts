/**
 * documents.CompleteUpload in two phases (server/operation.ts `phased`): the parts are read, hashed and
 * scanned before the command's transaction opens, so a stalled ClamAV (or a slow PDF check) never holds
 * the database. On SQLite an open transaction holds the process's only connection: before, every other
 * command waited behind the scan. Here ClamAV is a TCP server that takes the whole file and answers
 * only when the test says so; meanwhile other commands of the same workspace complete.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { forEachDatabase } from '../support/service.ts';
import { freePort } from '../support/smtp.ts';
import { makePdf, sha256 } from './pdfs.ts';
import { docsWorkspace, partBytes, partUrl, put, sendPart } from './support.ts';

/** A clamd that reads an INSTREAM to its end, then waits for `release()` before it says `stream: OK`. */
class StalledClamd {
  private readonly server: net.Server;
  private waiting: Array<() => void> = [];
  private held: net.Socket[] = [];
  received = 0;
  constructor(readonly port: number) {
    this.server = net.createServer((socket) => {
      let buffered = Buffer.alloc(0);
      socket.on('data', (chunk: Buffer) => {
        buffered = Buffer.concat([buffered.subarray(-8), chunk]);
        // The stream ends with a chunk of length zero.
        if (buffered.length >= 4 && buffered.subarray(-4).readUInt32BE(0) === 0) {
          this.received++;
          this.held.push(socket);
          for (const w of this.waiting.splice(0)) w();
        }
      });
      socket.on('error', () => undefined);
    });
  }
  listen(): Promise<void> {
    return new Promise((resolve) => this.server.listen(this.port, '127.0.0.1', resolve));
  }
  /** Resolves once more than `seen` files have reached the scanner whole (a scan is under way). */
  async scanned(seen: number): Promise<void> {
    while (this.received <= seen) await new Promise<void>((resolve) => this.waiting.push(resolve));
  }
  release(): void {
    for (const s of this.held.splice(0)) s.end('stream: OK\0');
  }
  close(): Promise<void> {
    this.release();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

const clamd = new StalledClamd(await freePort());
await clamd.listen();
after(() => clamd.close());

const pdf = await makePdf(2, { seed: 'phases' });
/** The same PDF with one byte of its header comment changed: the same size and offsets, other bytes. */
const other = Buffer.from(pdf);
other[10] = 0x78;

/** The first of `p` or a `ms` timer: 'timeout' when the timer wins. */
const within = <T>(p: Promise<T>, ms: number) => Promise.race([p, new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), ms).unref())]);

forEachDatabase(
  'documents: CompleteUpload checks the file before its transaction',
  (svc) => {
    it('other commands and reads are served while ClamAV stalls on a completion, which then makes its file', async () => {
      const { api } = await docsWorkspace(svc());
      const u = (await api.documents.CreateUpload({ filename: 'stalled.pdf', content_type: 'application/pdf', size: pdf.length })).data!;
      await sendPart(api, u, pdf, 1);
      const seen = clamd.received;
      const completing = api.documents.CompleteUpload({ upload_id: u.upload_id }, { idempotencyKey: 'complete-stalled' } as never);
      await clamd.scanned(seen);

      // A command of the same workspace (a write transaction of its own) and a read, while the scan waits.
      const other = await within(api.documents.CreateUpload({ filename: 'other.pdf', content_type: 'application/pdf', size: pdf.length }), 5_000);
      if (other === 'timeout') assert.fail('a command waited for the stalled scan');
      assert.equal(other.response.status, 200, JSON.stringify(other.error));
      const read = await within(api.documents.GetUpload({ upload_id: u.upload_id }), 5_000);
      if (read === 'timeout') assert.fail('a read waited for the stalled scan');
      assert.equal(read.data!.state, 'open');

      clamd.release();
      const done = await completing;
      assert.equal(done.response.status, 200, JSON.stringify(done.error));
      assert.equal(done.data!.sha256, sha256(pdf));
      // A replay answers the same file without scanning again.
      const scans = clamd.received;
      const again = await api.documents.CompleteUpload({ upload_id: u.upload_id }, { idempotencyKey: 'complete-stalled' } as never);
      assert.equal(again.data!.file_id, done.data!.file_id);
      assert.equal(clamd.received, scans);
    });

    it('a part replaced with other bytes while the file was being checked: 409, nothing made, and a new completion checks the new bytes', async () => {
      const { api } = await docsWorkspace(svc());
      const u = (await api.documents.CreateUpload({ filename: 'raced.pdf', content_type: 'application/pdf', size: pdf.length })).data!;
      await sendPart(api, u, pdf, 1);
      const before = clamd.received;
      const completing = api.documents.CompleteUpload({ upload_id: u.upload_id }, { idempotencyKey: 'complete-raced' } as never);
      await clamd.scanned(before);
      const res = await put(await partUrl(api, u.upload_id, 1), partBytes(u, other, 1));
      assert.equal(res.status, 200, JSON.stringify(res.body));
      clamd.release();
      const raced = await completing;
      assert.equal(raced.response.status, 409, JSON.stringify(raced.data));
      assert.match(raced.error!.message, /arrived or was replaced with other bytes while the file was being checked/);
      assert.equal((await api.documents.ListDocuments({ scope: 'workspace' })).data!.items.length, 0);

      const seen = clamd.received;
      const next = api.documents.CompleteUpload({ upload_id: u.upload_id }, { idempotencyKey: 'complete-raced-2' } as never);
      await clamd.scanned(seen);
      clamd.release();
      const done = await next;
      assert.equal(done.response.status, 200, JSON.stringify(done.error));
      assert.equal(done.data!.sha256, sha256(other));
    });

    it('a part sent again with the same bytes while the file was being checked (a client retry) changes nothing: the completion makes the file', async () => {
      const { api } = await docsWorkspace(svc());
      const u = (await api.documents.CreateUpload({ filename: 'retried.pdf', content_type: 'application/pdf', size: pdf.length })).data!;
      await sendPart(api, u, pdf, 1);
      const before = clamd.received;
      const completing = api.documents.CompleteUpload({ upload_id: u.upload_id }, { idempotencyKey: 'complete-retried' } as never);
      await clamd.scanned(before);
      assert.equal((await put(await partUrl(api, u.upload_id, 1), partBytes(u, pdf, 1))).status, 200);
      clamd.release();
      const done = await completing;
      assert.equal(done.response.status, 200, JSON.stringify(done.error));
      assert.equal(done.data!.sha256, sha256(pdf));
    });
  },
  { env: { CLAMAV_URL: `tcp://127.0.0.1:${clamd.port}` } },
);
