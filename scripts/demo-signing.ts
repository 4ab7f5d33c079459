/**
 * The demo's signing part: a two-page sample contract (drawn with pdf-lib), uploaded through the
 * documents operations (create, one PUT per part, complete), and one pending signing request over it
 * whose invitation lands in the development mailbox (or goes out through SMTP_URL when set).
 */
import { PDFDocument, rgb, StandardFonts } from 'pdf-lib';
import type { ServiceClient } from '../generated/client.ts';

/** A two-page services agreement between Acme and Globex. */
export async function demoContractPdf(now = new Date()): Promise<Uint8Array> {
  const doc = await PDFDocument.create();
  doc.setTitle('Fleet maintenance agreement');
  doc.setAuthor('Acme');
  doc.setCreationDate(now);
  doc.setModificationDate(now);
  const font = await doc.embedFont(StandardFonts.Helvetica);
  const bold = await doc.embedFont(StandardFonts.HelveticaBold);
  const grey = rgb(0.38, 0.4, 0.45);
  const pages: Array<{ heading: string; paragraphs: Array<[string, string]> }> = [
    {
      heading: 'Fleet maintenance agreement',
      paragraphs: [
        ['Parties', 'Acme Ltd ("the Supplier") and Globex Corporation ("the Customer").'],
        ['1. Services', 'The Supplier maintains the Customer\'s fleet of 120 vehicles: scheduled service every six months, repairs within two working days, and a replacement vehicle while a repair takes longer.'],
        ['2. Term', 'This agreement runs for 24 months from the date of the last signature and renews for 12 months at a time unless either party ends it with three months\' written notice.'],
        ['3. Fees', 'USD 48,000 a year, invoiced quarterly in advance. Parts are charged at list price less 15 %. Invoices are due within 30 days.'],
      ],
    },
    {
      heading: 'Fleet maintenance agreement (continued)',
      paragraphs: [
        ['4. Service levels', 'If the Supplier misses the repair time in more than 5 % of the cases in a quarter, the Customer\'s next quarterly fee is reduced by 10 %.'],
        ['5. Liability', 'Each party\'s liability under this agreement is limited to the fees of the 12 months before the claim, except for gross negligence or wilful misconduct.'],
        ['6. Law', 'This agreement is governed by the laws of the State of Delaware.'],
        ['Signatures', 'Signed electronically by the parties; the evidence pages that follow record each signature.'],
      ],
    },
  ];
  pages.forEach((content, i) => {
    const page = doc.addPage([595.28, 841.89]);
    page.drawText(content.heading, { x: 56, y: 770, size: 20, font: bold, color: rgb(0.1, 0.12, 0.2) });
    page.drawText(`Page ${i + 1} of ${pages.length}`, { x: 56, y: 748, size: 10, font, color: grey });
    let y = 706;
    for (const [title, text] of content.paragraphs) {
      page.drawText(title, { x: 56, y, size: 12, font: bold });
      y -= 18;
      for (const line of wrap(text, font, 11, 483)) {
        page.drawText(line, { x: 56, y, size: 11, font });
        y -= 15;
      }
      y -= 14;
    }
    page.drawRectangle({ x: 56, y: 80, width: 483, height: 0.75, color: rgb(0.75, 0.76, 0.8) });
    page.drawText('Acme Ltd - Globex Corporation - confidential', { x: 56, y: 64, size: 9, font, color: grey });
  });
  return doc.save();
}

function wrap(text: string, font: { widthOfTextAtSize(t: string, s: number): number }, size: number, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    const next = line ? `${line} ${word}` : word;
    if (font.widthOfTextAtSize(next, size) > width && line) {
      lines.push(line);
      line = word;
    } else line = next;
  }
  if (line) lines.push(line);
  return lines;
}

/**
 * Uploads the sample contract through the documents operations and asks Globex's buyer to sign it.
 * `origin`: where the service that answers `client` listens (part URLs carry PUBLIC_URL; their path is
 * kept).
 */
export async function demoSigning(client: ServiceClient, origin: string): Promise<{ fileId: string; requestId: string; signer: string }> {
  const bytes = await demoContractPdf();
  const filename = 'Fleet maintenance agreement - Globex.pdf';
  const created = await client.documents.CreateUpload({ filename, content_type: 'application/pdf', size: bytes.length });
  if (!created.data) throw new Error(`CreateUpload: ${created.error?.message}`);
  const upload = created.data;
  for (const part of upload.parts) {
    const signed = await client.documents.GetUploadPart({ upload_id: upload.upload_id, part_number: part.part_number });
    if (!signed.data) throw new Error(`GetUploadPart: ${signed.error?.message}`);
    const start = (part.part_number - 1) * upload.part_size;
    const res = await fetch(`${origin}${new URL(signed.data.url).pathname}`, { method: 'PUT', body: Buffer.from(bytes.subarray(start, start + part.size)), headers: { 'Content-Type': 'application/octet-stream' } });
    if (res.status !== 200) throw new Error(`PUT part ${part.part_number}: ${res.status} ${await res.text()}`);
  }
  const completed = await client.documents.CompleteUpload({ upload_id: upload.upload_id });
  if (!completed.data) throw new Error(`CompleteUpload: ${completed.error?.message}`);
  const signer = 'grace.hopper@globex.example';
  const request = await client.signing.RequestFileSignatures({
    file_id: completed.data.file_id,
    title: 'Fleet maintenance agreement 2027',
    signers: [{ email: signer, name: 'Grace Hopper' }],
    message: 'Hi Grace, here is the fleet maintenance agreement we agreed on last week. Please sign when you have a moment.',
    reminder_interval_days: 3,
  });
  if (!request.data) throw new Error(`RequestFileSignatures: ${request.error?.message}`);
  return { fileId: completed.data.file_id, requestId: request.data.signing_request_id, signer };
}
