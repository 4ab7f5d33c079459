/**
 * The upload scan (handlers/documents/scan.ts): PDFs made here with pdf-lib and encrypted with the real `qpdf`,
 * damaged and foreign files refused each with its own reason; the ClamAV client against a real clamd started
 * by the test with a local EICAR signature database. No database: runs once.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { PDFArray, PDFDocument, PDFName, StandardFonts } from 'pdf-lib';
import {
  chunksOf,
  ClamavUrlError,
  inspectPdf,
  parseClamavUrl,
  ScannerUnavailable,
  scanDocument,
  scanStream,
  type ClamavConfig,
} from '../../handlers/documents/scan.ts';
import { clamdMissing, EICAR, startClamd, type LocalClamd } from './clamd.ts';

const run = promisify(execFile);
const LIMITS = { maxBytes: 5 * 1024 * 1024, maxPages: 50 };
const PNG = Buffer.from(
  '89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8ffff3f0005fe02fea7d6a4a00000000049454e44ae426082',
  'hex',
);

async function samplePdf(pages: number, options: { rawStream?: Uint8Array; objectStreams?: boolean } = {}): Promise<Uint8Array> {
  const doc = await PDFDocument.create();
  const font = await doc.embedFont(StandardFonts.Helvetica);
  for (let i = 1; i <= pages; i++) {
    const page = doc.addPage([595, 842]);
    page.drawText(`Order form, page ${i} of ${pages}`, { x: 56, y: 780, size: 16, font });
  }
  // An uncompressed stream object, so its bytes appear in the file as they are.
  if (options.rawStream) doc.catalog.set(PDFName.of('TestPayload'), doc.context.register(doc.context.stream(options.rawStream)));
  return doc.save({ useObjectStreams: options.objectStreams ?? false });
}

/** A hand-written PDF with a correct cross-reference table around the given object bodies (object 1 is the catalog). */
function handWritten(objects: string[]): Buffer {
  let out = '%PDF-1.7\n';
  const offsets: number[] = [];
  objects.forEach((body, i) => {
    offsets.push(out.length);
    out += `${i + 1} 0 obj\n${body}\nendobj\n`;
  });
  const xref = out.length;
  out += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n${offsets.map((o) => `${String(o).padStart(10, '0')} 00000 n \n`).join('')}`;
  out += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return Buffer.from(out, 'latin1');
}

async function rejectsUnavailable(promise: Promise<unknown>, reason: ScannerUnavailable['reason'], message: RegExp): Promise<void> {
  await assert.rejects(promise, (err: unknown) => {
    assert.ok(err instanceof ScannerUnavailable, `a ScannerUnavailable, got ${String(err)}`);
    assert.equal(err.reason, reason);
    assert.match(err.message, message);
    return true;
  });
}

describe('documents: the upload scan', function () {
  this.timeout(60_000);
  let dir: string;
  let plain: Uint8Array;

  before(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'scan-test-'));
    plain = await samplePdf(3);
    await fs.writeFile(path.join(dir, 'plain.pdf'), plain);
  });
  after(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  async function qpdf(args: string[], out: string): Promise<Uint8Array> {
    await run('qpdf', [...args, '--', path.join(dir, 'plain.pdf'), path.join(dir, out)]);
    return fs.readFile(path.join(dir, out));
  }

  describe('inspectPdf', () => {
    it('finds {{...}} text tags without ever refusing for them: a page whose content streams add up to more than 4 MB (one stream listed twice) is not searched', async () => {
      const doc = await PDFDocument.create();
      const font = await doc.embedFont(StandardFonts.Helvetica);
      const small = doc.addPage([595, 842]);
      small.drawText('Sign here: {{signature}}', { x: 72, y: 700, size: 12, font });
      const heavy = doc.addPage([595, 842]);
      heavy.drawText('{{initials;signer=2}}', { x: 72, y: 700, size: 12, font });
      // The heavy page lists one 3 MB uncompressed stream (spaces, then the drawing) twice: 6 MB to read.
      const drawn = heavy.node.Contents();
      const refs = drawn instanceof PDFArray ? drawn.asArray() : drawn ? [drawn] : [];
      const ops = Buffer.concat(refs.map((r) => Buffer.concat([Buffer.from((doc.context.lookup(r) as unknown as { getUnencodedContents(): Uint8Array }).getUnencodedContents()), Buffer.from('\n')])));
      assert.ok(ops.includes('Tj'), 'the drawing is copied into the big stream');
      const big = doc.context.stream(Buffer.concat([Buffer.alloc(3 * 1024 * 1024, 0x20), ops]));
      const ref = doc.context.register(big);
      heavy.node.set(PDFName.of('Contents'), doc.context.obj([ref, ref]));
      const bytes = await doc.save({ useObjectStreams: false });
      const result = await inspectPdf(bytes, { ...LIMITS, maxBytes: 20 * 1024 * 1024 });
      assert.equal(result.ok, true, JSON.stringify(result).slice(0, 200));
      assert.deepEqual(result.ok && result.tags?.map((t) => [t.page, t.text]), [[1, '{{signature}}']]);
    });

    it('accepts a plain PDF with its page count and version', async () => {
      assert.deepEqual(await inspectPdf(plain, LIMITS), { ok: true, pages: 3, encrypted: 'none', pdfVersion: '1.7', tags: [] });
    });

    it('accepts PDFs written other ways: object streams, qpdf linearized, qpdf object streams', async () => {
      const written = [await samplePdf(2, { objectStreams: true }), await qpdf(['--linearize'], 'linear.pdf'), await qpdf(['--object-streams=generate'], 'objstm.pdf')];
      for (const bytes of written) {
        const result = await inspectPdf(bytes, LIMITS);
        assert.equal(result.ok, true, JSON.stringify(result));
      }
    });

    it('refuses a PDF that needs a user password (AES-256 and RC4-128)', async () => {
      const aes = await qpdf(['--encrypt', 'USERPW', 'OWNERPW', '256'], 'user.pdf');
      const rc4 = await qpdf(['--allow-weak-crypto', '--encrypt', 'USERPW', 'OWNERPW', '128'], 'user-rc4.pdf');
      assert.deepEqual(await inspectPdf(aes, LIMITS), { ok: false, reason: 'the PDF needs a password to open' });
      assert.deepEqual(await inspectPdf(rc4, LIMITS), { ok: false, reason: 'the PDF needs a password to open' });
    });

    it('accepts a PDF encrypted with only an owner password as owner-only', async () => {
      const owner = await qpdf(['--encrypt', '', 'OWNERPW', '256'], 'owner.pdf');
      assert.deepEqual(await inspectPdf(owner, LIMITS), { ok: true, pages: 3, encrypted: 'owner-only', pdfVersion: '1.7', tags: [] });
    });

    it('refuses a PDF cut in half', async () => {
      assert.deepEqual(await inspectPdf(plain.subarray(0, plain.length >> 1), LIMITS), {
        ok: false,
        reason: 'the PDF is truncated: its end-of-file marker is missing',
      });
    });

    it('refuses a PDF with its cross-reference table and body overwritten', async () => {
      const xrefOnly = Buffer.from(plain);
      const xref = xrefOnly.lastIndexOf('\nxref\n') + 1;
      xrefOnly.fill(0x41, xref, xref + 200);
      assert.deepEqual(await inspectPdf(xrefOnly, LIMITS), { ok: false, reason: 'the PDF is damaged or truncated: its cross-reference table cannot be read' });

      const body = Buffer.from(xrefOnly);
      for (let i = 200; i < body.length - 400; i++) body[i] = (i * 7919) & 0xff;
      const result = await inspectPdf(body, LIMITS);
      assert.equal(result.ok, false);
      assert.match((result as { reason: string }).reason, /^the PDF is damaged/);
    });

    it('refuses a PDF whose page tree object is overwritten behind an intact cross-reference table', async () => {
      const bytes = Buffer.from(plain);
      bytes.write('<<<<<<<<<<<<', bytes.indexOf('/Type /Pages'), 'latin1');
      assert.deepEqual(await inspectPdf(bytes, LIMITS), { ok: false, reason: 'the PDF is damaged: its contents cannot be read' });
      const noKids = Buffer.from(plain);
      noKids.write('/Xxxx', noKids.indexOf('/Kids'), 'latin1');
      assert.deepEqual(await inspectPdf(noKids, LIMITS), { ok: false, reason: 'the PDF has no pages' });
    });

    it('refuses a PNG, a text file and an empty file, each saying what it is', async () => {
      assert.deepEqual(await inspectPdf(PNG, LIMITS), { ok: false, reason: 'the file is a PNG image, not a PDF' });
      assert.deepEqual(await inspectPdf(Buffer.from('Dear customer,\nplease find the order attached.\n'), LIMITS), {
        ok: false,
        reason: 'the file is not a PDF (it does not start with a PDF header)',
      });
      assert.deepEqual(await inspectPdf(new Uint8Array(), LIMITS), { ok: false, reason: 'the file is empty' });
      assert.deepEqual(await inspectPdf(Buffer.from('%PDF-1.7\n%%EOF\n'), LIMITS), {
        ok: false,
        reason: 'the PDF is damaged or truncated: its cross-reference table cannot be read',
      });
    });

    it('refuses over the page and size limits, naming the limit', async () => {
      assert.deepEqual(await inspectPdf(plain, { ...LIMITS, maxPages: 2 }), { ok: false, reason: 'the PDF has 3 pages, more than the limit of 2' });
      assert.deepEqual(await inspectPdf(plain, { ...LIMITS, maxPages: 3 }), { ok: true, pages: 3, encrypted: 'none', pdfVersion: '1.7', tags: [] });
      assert.deepEqual(await inspectPdf(plain, { ...LIMITS, maxBytes: 1000 }), { ok: false, reason: 'the file is larger than the limit of 1000 bytes' });
      assert.deepEqual(await inspectPdf(new Uint8Array(3 * 1024 * 1024), { ...LIMITS, maxBytes: 2 * 1024 * 1024 }), {
        ok: false,
        reason: 'the file is larger than the limit of 2097152 bytes (2 MiB)',
      });
    });

    it('answers hostile page trees and deep nesting without hanging: the real page count, not the claimed one', async () => {
      const catalog = '<< /Type /Catalog /Pages 2 0 R >>';
      const page = '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 100 100] >>';
      const cycle = handWritten([catalog, '<< /Type /Pages /Kids [2 0 R 3 0 R] /Count 2 >>', page]);
      const claimsBillion = handWritten([catalog, '<< /Type /Pages /Kids [3 0 R] /Count 999999999 >>', page]);
      const deep = handWritten([`<< /Type /Catalog /Pages 2 0 R /X ${'['.repeat(200_000)}${']'.repeat(200_000)} >>`, '<< /Type /Pages /Kids [3 0 R] /Count 1 >>', page]);
      assert.deepEqual(await inspectPdf(cycle, LIMITS), { ok: true, pages: 1, encrypted: 'none', pdfVersion: '1.7', tags: [] });
      assert.deepEqual(await inspectPdf(claimsBillion, LIMITS), { ok: true, pages: 1, encrypted: 'none', pdfVersion: '1.7', tags: [] });
      assert.deepEqual(await inspectPdf(deep, LIMITS), { ok: false, reason: 'the PDF is damaged: its contents cannot be read' });
      assert.deepEqual(await inspectPdf(handWritten(['<< /Type /Catalog /Pages 1 0 R >>']), LIMITS), { ok: false, reason: 'the PDF has no pages' });
    });

    it('never throws on random bytes behind a PDF header', async () => {
      let seed = 7;
      for (let n = 0; n < 40; n++) {
        const bytes = Buffer.alloc(2000 + n * 50);
        for (let i = 0; i < bytes.length; i++) bytes[i] = (seed = (seed * 1103515245 + 12345) & 0x7fffffff) & 0xff;
        bytes.write('%PDF-1.4\n', 0, 'latin1');
        bytes.write('\nstartxref\n9\n%%EOF\n', bytes.length - 20, 'latin1');
        const result = await inspectPdf(bytes, LIMITS);
        assert.equal(result.ok, false);
      }
    });
  });

  describe('CLAMAV_URL', () => {
    it('reads tcp:// and unix:// addresses', () => {
      assert.deepEqual(parseClamavUrl('tcp://clamav:3310'), { kind: 'tcp', host: 'clamav', port: 3310 });
      assert.deepEqual(parseClamavUrl('tcp://[::1]:3310'), { kind: 'tcp', host: '::1', port: 3310 });
      assert.deepEqual(parseClamavUrl('unix:///run/clamav/clamd.ctl'), { kind: 'unix', path: '/run/clamav/clamd.ctl' });
    });

    it('says what is wrong with a bad value', () => {
      const cases: [string, RegExp][] = [
        ['', /is empty/],
        ['clamav:3310', /scheme "clamav" is not supported/],
        ['tcp://clamav', /has no port; clamd usually listens on tcp:\/\/clamav:3310/],
        ['tcp://clamav:99999', /is not a URL/],
        ['tcp://clamav:0', /has port 0/],
        ['tcp://clamav:3310/scan', /has a path/],
        ['http://clamav:3310', /scheme "http" is not supported/],
        ['unix://run/clamd.ctl', /has a host; a Unix socket is written unix:\/\/\/path/],
        ['unix:///', /needs the socket path/],
        ['tcp://user:pw@clamav:3310', /takes no user, password/],
      ];
      for (const [value, message] of cases) assert.throws(() => parseClamavUrl(value), (err: unknown) => err instanceof ClamavUrlError && message.test(err.message), value);
    });
  });

  describe('ClamAV (a real clamd with a local EICAR signature)', function () {
    let clamd: LocalClamd | undefined;
    const STREAM_MAX = 200_000;

    before(async function () {
      const missing = clamdMissing();
      if (missing) {
        if (process.env.REQUIRE_CLAMAV) throw new Error(`ClamAV is required (REQUIRE_CLAMAV) but ${missing}`);
        console.log(`      ClamAV tests skipped: ${missing}. Set REQUIRE_CLAMAV=1 to make this a failure.`);
        this.skip();
      }
      clamd = await startClamd({ streamMaxLength: STREAM_MAX });
      console.log(`      clamd answered PING ${clamd.startupMs} ms after it was started (local EICAR database)`);
    });
    after(async () => {
      await clamd?.stop();
    });

    it('finds a clean PDF clean', async () => {
      assert.deepEqual(await scanStream(clamd!.config, chunksOf(plain)), { clean: true });
      assert.deepEqual(await scanDocument(plain, { limits: LIMITS, clamav: clamd!.config }), { ok: true, pages: 3, encrypted: 'none', pdfVersion: '1.7', tags: [] });
    });

    it('finds the EICAR file, also in pieces split inside the signature', async () => {
      const whole = await scanStream(clamd!.config, chunksOf(EICAR));
      assert.equal(whole.clean, false);
      assert.match((whole as { signature: string }).signature, /^Test\.EICAR-(File|Body)\.UNOFFICIAL$/);
      const split = await scanStream(clamd!.config, chunksOf(EICAR, 5));
      assert.deepEqual(split, whole);
    });

    it('finds EICAR in an uncompressed PDF stream, and the scan refuses that PDF naming the signature', async () => {
      const pdf = await samplePdf(1, { rawStream: EICAR });
      assert.equal((await inspectPdf(pdf, LIMITS)).ok, true, 'a valid PDF');
      const verdict = await scanStream(clamd!.config, chunksOf(pdf, 1000));
      assert.deepEqual(verdict, { clean: false, signature: 'Test.EICAR-Body.UNOFFICIAL' });
      assert.deepEqual(await scanDocument(pdf, { limits: LIMITS, clamav: clamd!.config }), {
        ok: false,
        reason: 'the file contains malware (ClamAV found Test.EICAR-Body.UNOFFICIAL)',
      });
    });

    it('streams without holding the file: a generated source larger than any one chunk', async () => {
      let produced = 0;
      async function* generated(): AsyncIterable<Uint8Array> {
        for (let i = 0; i < 30; i++) {
          produced += 5000;
          yield Buffer.alloc(5000, i);
        }
      }
      assert.deepEqual(await scanStream(clamd!.config, generated()), { clean: true });
      assert.equal(produced, 150_000);
    });

    it('reports a stream over StreamMaxLength as ScannerUnavailable with the reason', async () => {
      // clamd answers "size limit exceeded" and closes while we still write: usually the reply is read first, but
      // under load the reset of our next write can reach the socket before the reply is read, and TCP then drops
      // the unread reply. Either way the scan is unavailable and the message names StreamMaxLength.
      await assert.rejects(scanStream(clamd!.config, chunksOf(new Uint8Array(STREAM_MAX * 3))), (err: unknown) => {
        assert.ok(err instanceof ScannerUnavailable, `a ScannerUnavailable, got ${String(err)}`);
        if (err.reason === 'size-limit') assert.match(err.message, /INSTREAM size limit exceeded/);
        else {
          assert.equal(err.reason, 'connection');
          assert.match(err.message, /dropped the connection without a verdict \((ECONNRESET|EPIPE)\); clamd does this when a file is over its StreamMaxLength/);
        }
        return true;
      });
    });

    it('times out a source that stalls mid-file, as ScannerUnavailable', async () => {
      async function* stalled(): AsyncIterable<Uint8Array> {
        yield Buffer.from('%PDF-1.7\n');
        await new Promise(() => undefined);
      }
      await rejectsUnavailable(scanStream({ ...clamd!.config, timeoutMs: 300 }, stalled()), 'timeout', /gave no verdict within 300 ms/);
    });

    it('rethrows an error of the source itself', async () => {
      async function* failing(): AsyncIterable<Uint8Array> {
        yield Buffer.from('%PDF-1.7\n');
        throw new Error('the upload was cut off');
      }
      await assert.rejects(scanStream(clamd!.config, failing()), /the upload was cut off/);
    });

    it('reports a stopped daemon as ScannerUnavailable', async () => {
      const config: ClamavConfig = { ...clamd!.config };
      await clamd!.stop();
      clamd = undefined;
      await rejectsUnavailable(scanStream(config, chunksOf(plain)), 'connection', /cannot connect to ClamAV at tcp:\/\/127\.0\.0\.1:\d+: ECONNREFUSED/);
    });
  });

  describe('ClamAV timeouts (a listener that never answers)', () => {
    it('times out a daemon that accepts and never answers', async () => {
      const silent = net.createServer((socket) => socket.on('data', () => undefined));
      await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
      const { port } = silent.address() as AddressInfo;
      try {
        const config: ClamavConfig = { address: { kind: 'tcp', host: '127.0.0.1', port }, timeoutMs: 300 };
        await rejectsUnavailable(scanStream(config, chunksOf(plain)), 'timeout', /gave no verdict within 300 ms/);
      } finally {
        silent.close();
      }
    });

    it('reports a missing Unix socket as ScannerUnavailable', async () => {
      await rejectsUnavailable(scanStream({ address: { kind: 'unix', path: path.join(dir, 'no.sock') } }, chunksOf(plain)), 'connection', /cannot connect to ClamAV at unix:\/\/.*no\.sock: ENOENT/);
    });
  });
});
