/** PDFs for the upload tests and the bench: pdf-lib documents, optionally with incompressible image streams. */
import crypto from 'node:crypto';
import zlib from 'node:zlib';
import { PDFDocument, PDFName, StandardFonts } from 'pdf-lib';

/**
 * A PDF of `pages` pages; with `payloadBytes`, that many random bytes spread over uncompressed image
 * XObjects drawn on the pages (incompressible, so the file is about that large), or `rawStream` as one
 * uncompressed stream (its bytes appear in the file as they are).
 */
export async function makePdf(pages: number, options: { payloadBytes?: number; rawStream?: Uint8Array; seed?: string } = {}): Promise<Buffer> {
  const doc = await PDFDocument.create();
  const font = await doc.embedFont(StandardFonts.Helvetica);
  const images = options.payloadBytes ? Math.min(pages, Math.max(1, Math.ceil(options.payloadBytes / (1024 * 1024)))) : 0;
  const perImage = images ? Math.ceil(options.payloadBytes! / images) : 0;
  // Gray images: width x height bytes each.
  const width = 1024;
  const height = images ? Math.ceil(perImage / width) : 0;
  for (let i = 1; i <= pages; i++) {
    const page = doc.addPage([595, 842]);
    page.drawText(`Agreement ${options.seed ?? ''} page ${i} of ${pages}`, { x: 56, y: 780, size: 16, font });
    if (i <= images) {
      const stream = doc.context.stream(crypto.randomBytes(width * height), {
        Type: 'XObject',
        Subtype: 'Image',
        Width: width,
        Height: height,
        ColorSpace: 'DeviceGray',
        BitsPerComponent: 8,
      });
      const ref = doc.context.register(stream);
      const name = page.node.newXObject('Im', ref);
      const content = doc.context.stream(`q 480 0 0 ${Math.round((480 * height) / width)} 56 200 cm /${name.asString().slice(1)} Do Q`);
      page.node.addContentStream(doc.context.register(content));
    }
  }
  if (options.rawStream) doc.catalog.set(PDFName.of('TestPayload'), doc.context.register(doc.context.stream(options.rawStream)));
  return Buffer.from(await doc.save({ useObjectStreams: false }));
}

export const sha256 = (b: Uint8Array) => crypto.createHash('sha256').update(b).digest('hex');

/**
 * A PDF written object by object: `objects[i]` is the body of object i + 1 (a dictionary, or a dictionary
 * followed by `stream ... endstream`); object 1 is the catalog. Classic cross-reference table.
 */
export function rawPdf(objects: Array<string | Buffer>): Buffer {
  const chunks: Buffer[] = [Buffer.from('%PDF-1.7\n%\xe2\xe3\xcf\xd3\n', 'latin1')];
  let at = chunks[0]!.length;
  const offsets: number[] = [];
  objects.forEach((body, i) => {
    offsets.push(at);
    const c = Buffer.concat([Buffer.from(`${i + 1} 0 obj\n`, 'latin1'), Buffer.isBuffer(body) ? body : Buffer.from(body, 'latin1'), Buffer.from('\nendobj\n', 'latin1')]);
    chunks.push(c);
    at += c.length;
  });
  const xref = [`xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`, ...offsets.map((o) => `${String(o).padStart(10, '0')} 00000 n \n`)].join('');
  chunks.push(Buffer.from(`${xref}trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${at}\n%%EOF\n`, 'latin1'));
  return Buffer.concat(chunks);
}

/** One page (object 3) under a page tree (object 2), for rawPdf: the catalog is `<< /Type /Catalog /Pages 2 0 R EXTRA >>`. */
export function onePagePdf(catalogExtra: string, more: Array<string | Buffer> = [], pageExtra = ''): Buffer {
  return rawPdf([`<< /Type /Catalog /Pages 2 0 R ${catalogExtra} >>`, '<< /Type /Pages /Kids [3 0 R] /Count 1 >>', `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] ${pageExtra} >>`, ...more]);
}

/** Adler-32 of `prefix` followed by `count` bytes of `fill` (computed, not read: the bomb's bytes never exist). */
function adler32(prefix: Buffer, fill: number, count: number): number {
  const M = 65521n;
  let a = 1n;
  let b = 0n;
  for (const byte of prefix) {
    a = (a + BigInt(byte)) % M;
    b = (b + a) % M;
  }
  const n = BigInt(count);
  const c = BigInt(fill);
  b = (b + n * a + (c * n * (n + 1n)) / 2n) % M;
  a = (a + n * c) % M;
  return Number((b << 16n) | a);
}

/**
 * A decompression bomb under 1 MB: the catalog and page tree sit in an object stream whose FlateDecode
 * data inflates to `inflatedMiB` MiB (the two objects, then spaces). The deflate data repeats one
 * fully flushed block of 1 MiB of spaces, so it is made in no time; the file is a valid PDF.
 */
export function bombPdf(inflatedMiB: number): Buffer {
  const MiB = 1024 * 1024;
  const objs = ['<< /Type /Catalog /Pages 2 0 R >>', '<< /Type /Pages /Kids [3 0 R] /Count 1 >>'];
  const index = `5 0 2 ${objs[0]!.length + 1} `;
  const head = Buffer.from(index + objs.join(' ') + ' ', 'latin1');
  const raw = (data: Buffer, flush: number) => zlib.deflateRawSync(data, { level: 9, finishFlush: flush });
  const blocks = [raw(head, zlib.constants.Z_FULL_FLUSH)];
  const spaces = raw(Buffer.alloc(MiB, 0x20), zlib.constants.Z_FULL_FLUSH);
  for (let i = 0; i < inflatedMiB; i++) blocks.push(spaces);
  blocks.push(raw(Buffer.alloc(0), zlib.constants.Z_FINISH));
  const check = Buffer.alloc(4);
  check.writeUInt32BE(adler32(head, 0x20, inflatedMiB * MiB) >>> 0);
  const data = Buffer.concat([Buffer.from([0x78, 0xda]), ...blocks, check]);

  const parts: Buffer[] = [Buffer.from('%PDF-1.7\n%\xe2\xe3\xcf\xd3\n', 'latin1')];
  const offsets: Record<number, number> = {};
  const add = (n: number, body: Buffer) => {
    offsets[n] = parts.reduce((s, p) => s + p.length, 0);
    parts.push(Buffer.concat([Buffer.from(`${n} 0 obj\n`, 'latin1'), body, Buffer.from('\nendobj\n', 'latin1')]));
  };
  add(1, Buffer.concat([Buffer.from(`<< /Type /ObjStm /N 2 /First ${index.length} /Filter /FlateDecode /Length ${data.length} >>\nstream\n`, 'latin1'), data, Buffer.from('\nendstream', 'latin1')]));
  add(3, Buffer.from('<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] >>', 'latin1'));
  const xrefAt = parts.reduce((s, p) => s + p.length, 0);
  const entry = (type: number, f2: number, f3: number) => {
    const e = Buffer.alloc(7);
    e.writeUInt8(type, 0);
    e.writeUInt32BE(f2, 1);
    e.writeUInt16BE(f3, 5);
    return e;
  };
  const table = Buffer.concat([entry(0, 0, 65535), entry(1, offsets[1]!, 0), entry(2, 1, 1), entry(1, offsets[3]!, 0), entry(1, xrefAt, 0), entry(2, 1, 0)]);
  add(4, Buffer.concat([Buffer.from(`<< /Type /XRef /Size 6 /W [1 4 2] /Root 5 0 R /Length ${table.length} >>\nstream\n`, 'latin1'), table, Buffer.from('\nendstream', 'latin1')]));
  parts.push(Buffer.from(`startxref\n${xrefAt}\n%%EOF\n`, 'latin1'));
  return Buffer.concat(parts);
}
