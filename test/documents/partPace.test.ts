/**
 * A part's body must keep a pace (PART_BODY_GRACE_MS, PART_BODY_MIN_BYTES_PER_SECOND): a client that
 * announces a whole part and trickles a byte at a time is cut with 408 and the connection closed,
 * nothing kept; a part sent at an ordinary pace is stored. Short limits here; 30 s and 4 KiB/s by default.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { forEachDatabase } from '../support/service.ts';
import { makePdf } from './pdfs.ts';
import { docsWorkspace, partUrl, put, sendPart } from './support.ts';

const pdf = await makePdf(2, { seed: 'pace' });

/** PUTs `size` announced bytes to `url`, one byte every `everyMs`; resolves with what the server answered when it closed. */
function trickle(url: string, size: number, everyMs: number): Promise<{ answer: string; sent: number; ms: number }> {
  const u = new URL(url);
  const started = performance.now();
  return new Promise((resolve) => {
    let answer = '';
    let sent = 0;
    const socket = net.connect(Number(u.port), u.hostname, () => {
      socket.write(`PUT ${u.pathname} HTTP/1.1\r\nHost: ${u.host}\r\nContent-Type: application/octet-stream\r\nContent-Length: ${size}\r\n\r\n`);
    });
    const timer = setInterval(() => {
      if (socket.writable && sent < size) {
        socket.write(Buffer.from([0x25]));
        sent++;
      }
    }, everyMs);
    socket.on('data', (chunk) => (answer += chunk.toString('latin1')));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearInterval(timer);
      resolve({ answer, sent, ms: performance.now() - started });
    });
  });
}

forEachDatabase(
  'documents: a part body must keep a pace',
  (svc) => {
    it('cuts a trickled part with 408 (connection closed, nothing kept); a part at an ordinary pace is stored', async function () {
      this.timeout(30_000);
      const { api } = await docsWorkspace(svc());
      const u = (await api.documents.CreateUpload({ filename: 'paced.pdf', content_type: 'application/pdf', size: pdf.length })).data!;
      const url = await partUrl(api, u.upload_id, 1);
      const slow = await trickle(url, pdf.length, 100);
      assert.match(slow.answer, /^HTTP\/1\.1 408 /);
      assert.match(slow.answer, /connection: close/i);
      const body = JSON.parse(slow.answer.slice(slow.answer.indexOf('\r\n\r\n') + 4)) as { error: string; message: string };
      assert.equal(body.error, 'invalid_input');
      assert.match(body.message, /^Part 1 arrived too slowly: after 1 s a part must arrive at 1 KiB a second or more on average\. Nothing was stored; send it again\.$/);
      assert.ok(slow.sent < 100, `the trickle went on for ${slow.sent} bytes`);
      assert.equal((await api.documents.GetUpload({ upload_id: u.upload_id })).data!.parts[0]!.received, false);

      // The same URL, the bytes at once: stored, and the upload completes.
      await sendPart(api, u, pdf, 1);
      const done = await api.documents.CompleteUpload({ upload_id: u.upload_id }, { idempotencyKey: 'paced-1' } as never);
      assert.equal(done.response.status, 200, JSON.stringify(done.error));
      // A refused PUT is answered as JSON too (the pace applies to bodies, not to refusals before them).
      assert.equal((await put(url, pdf)).status, 409);
    });
  },
  { env: { PART_BODY_GRACE_MS: '1000', PART_BODY_MIN_BYTES_PER_SECOND: '1024' } },
);
