/** PDFs for the upload tests and the bench: pdf-lib documents, optionally with incompressible image streams. */
import crypto from 'node:crypto';
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
