/**
 * `/verify` cannot be held shut (issue 21, finding 4), on both databases, with real slow clients
 * (net.Socket writing a little at a time) against the running service and short injected deadlines:
 * - four slow posts announcing 50 MiB from four addresses (two trickling a byte at a time, two fast
 *   enough but never finishing) do not take the check slots: other verifications answer 200 while
 *   they hang, and each slow one is cut (408, connection closed) by the pace check or the deadline;
 * - one address reads at most two bodies at once (the third: 429 with Retry-After);
 * - the multipart form takes a file of exactly 50 MiB and refuses 50 MiB + 1 byte (413), as the raw body does.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { contractPdf } from './archiveKit.ts';
import { databases, startTestService, type TestService } from '../support/service.ts';

const MIB50 = 50 * 1024 * 1024;
const TIMEOUT_MS = 2500;
const GRACE_MS = 600;

/** A post to /verify that announces 50 MiB and sends `chunk` bytes every `everyMs`; what the server answered, when it closed. */
function slowPost(svc: TestService, address: string, chunk: number, everyMs: number) {
  const port = Number(new URL(svc.origin).port);
  const socket = net.connect(port, '127.0.0.1');
  let answer = '';
  const started = Date.now();
  socket.setEncoding('latin1');
  socket.on('data', (d: string) => (answer += d));
  socket.on('error', () => undefined);
  const closed = new Promise<{ answer: string; afterMs: number }>((resolve) => socket.on('close', () => resolve({ answer, afterMs: Date.now() - started })));
  socket.write(`POST /verify HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-For: ${address}\r\nContent-Type: application/pdf\r\nContent-Length: ${MIB50}\r\n\r\n%PDF-`);
  const timer = setInterval(() => {
    if (!socket.destroyed && socket.writable) socket.write(Buffer.alloc(chunk, 0x20));
  }, everyMs);
  socket.on('close', () => clearInterval(timer));
  return { closed, stop: () => socket.destroy(), status: () => /^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? null, headers: () => answer };
}

async function verifyRaw(svc: TestService, body: Uint8Array, address: string): Promise<{ status: number; html: string }> {
  const res = await fetch(`${svc.origin}/verify`, { method: 'POST', body: Buffer.from(body), headers: { 'Content-Type': 'application/pdf', 'X-Forwarded-For': address } });
  return { status: res.status, html: await res.text() };
}

async function verifyForm(svc: TestService, bytes: Uint8Array): Promise<{ status: number; html: string }> {
  const form = new FormData();
  form.append('file', new Blob([Buffer.from(bytes)], { type: 'application/pdf' }), 'big.pdf');
  const res = await fetch(`${svc.origin}/verify`, { method: 'POST', body: form });
  return { status: res.status, html: await res.text() };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

for (const database of databases) {
  describe(`signing: /verify under slow posts [${database.name}]`, function () {
    this.timeout(60_000);
    let svc: TestService;
    let pdf: Uint8Array;

    before(async () => {
      svc = await startTestService(database.url(), {
        trustProxy: 'loopback',
        env: { VERIFY_BODY_TIMEOUT_MS: String(TIMEOUT_MS), VERIFY_BODY_GRACE_MS: String(GRACE_MS), VERIFY_BODY_MIN_BYTES_PER_SECOND: '2048' },
      });
      pdf = await contractPdf('Slot test', 1);
    });
    after(() => svc?.close());

    it('four slow 50 MiB posts from four addresses leave every other verification working, and are cut after the deadline', async () => {
      const slow = [
        slowPost(svc, '198.51.100.1', 1, 200),
        slowPost(svc, '198.51.100.2', 1, 200),
        // Fast enough for the pace (4 KiB every 100 ms), but 50 MiB would take 20 minutes: the deadline cuts them.
        slowPost(svc, '198.51.100.3', 4096, 100),
        slowPost(svc, '198.51.100.4', 4096, 100),
      ];
      try {
        await sleep(300);
        for (let i = 0; i < 6; i++) {
          const r = await verifyRaw(svc, pdf, `203.0.113.${10 + i}`);
          assert.equal(r.status, 200, `verification ${i} while four slow posts hang: ${r.html.slice(0, 300)}`);
          assert.match(r.html, /No seal/);
        }
        assert.deepEqual(slow.map((s) => s.status()), [null, null, null, null], 'the slow posts are still hanging while the others are checked');
        const ends = await Promise.race([Promise.all(slow.map((s) => s.closed)), sleep(TIMEOUT_MS + 5000).then(() => null)]);
        assert.ok(ends, 'every slow post was cut');
        for (const [i, end] of ends.entries()) {
          assert.match(end.answer, /^HTTP\/1\.1 408 /, `slow post ${i} answered 408: ${end.answer.slice(0, 200)}`);
          assert.match(end.answer, /did not arrive in time/);
        }
        // The byte-a-time ones by the pace check soon after the grace; the steady ones at the deadline.
        assert.ok(ends[0]!.afterMs < TIMEOUT_MS, `pace cut after ${ends[0]!.afterMs} ms`);
        assert.ok(ends[2]!.afterMs >= TIMEOUT_MS - 100 && ends[2]!.afterMs < TIMEOUT_MS + 3000, `deadline cut after ${ends[2]!.afterMs} ms`);
        assert.match(svc.logs(), /verify: a post was cut off \(too slow\)/);
      } finally {
        for (const s of slow) s.stop();
      }
      assert.equal((await verifyRaw(svc, pdf, '198.51.100.1')).status, 200, 'the cut address may check again');
    });

    it('one address reads at most two bodies at once: the third is 429 with Retry-After, others are unaffected', async () => {
      const a = slowPost(svc, '192.0.2.50', 1, 100);
      const b = slowPost(svc, '192.0.2.50', 1, 100);
      try {
        await sleep(200);
        const res = await fetch(`${svc.origin}/verify`, { method: 'POST', body: Buffer.from(pdf), headers: { 'Content-Type': 'application/pdf', 'X-Forwarded-For': '192.0.2.50' } });
        assert.equal(res.status, 429, await res.text());
        assert.equal(res.headers.get('retry-after'), '5');
        assert.equal((await verifyRaw(svc, pdf, '192.0.2.51')).status, 200);
      } finally {
        a.stop();
        b.stop();
      }
    });

    it('the form takes a file of exactly 50 MiB and refuses 50 MiB + 1 byte with 413, as the raw body does', async () => {
      const exact = Buffer.alloc(MIB50, 0x20);
      Buffer.from('%PDF-1.7\n').copy(exact);
      const ok = await verifyForm(svc, exact);
      assert.equal(ok.status, 200, ok.html.slice(0, 300));
      const over = Buffer.alloc(MIB50 + 1, 0x20);
      const refused = await verifyForm(svc, over);
      assert.equal(refused.status, 413, refused.html.slice(0, 300));
      assert.match(refused.html, /larger than the limit of 50 MiB/);
      const raw = await verifyRaw(svc, over, '203.0.113.99');
      assert.equal(raw.status, 413);
    });
  });
}
