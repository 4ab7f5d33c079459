/**
 * What the signer's page tests share (scanner.test.ts, signer.browser.test.ts; the SMTP server is
 * test/support/smtp.ts): a sample PDF with text on each page, the upload of a file
 * through the documents operations, and the links a mail carries (text and HTML parts).
 */
import assert from 'node:assert/strict';
import type { ParsedMail } from 'mailparser';
import { PDFDocument, rgb, StandardFonts } from 'pdf-lib';
import type { ServiceClient } from '../../generated/client.ts';
import type { WorkspaceSpec } from '../../server/admin.ts';
import type { ServiceConfig } from '../../server/config.ts';
import { mailConfigFromEnv } from '../../server/mailer.ts';
import type { TestService } from '../support/service.ts';

/** A PDF of `pages` A4 pages, each with a heading, its number and some lines of text. */
export async function samplePdf(title: string, pages = 3): Promise<Uint8Array> {
  const doc = await PDFDocument.create();
  doc.setTitle(title);
  const font = await doc.embedFont(StandardFonts.Helvetica);
  const bold = await doc.embedFont(StandardFonts.HelveticaBold);
  for (let n = 1; n <= pages; n++) {
    const page = doc.addPage([595.28, 841.89]);
    page.drawText(title, { x: 56, y: 770, size: 22, font: bold, color: rgb(0.1, 0.12, 0.2) });
    page.drawText(`Page ${n} of ${pages}`, { x: 56, y: 744, size: 12, font, color: rgb(0.4, 0.42, 0.5) });
    const lines = [
      `${n}. The parties agree to the terms set out on this page.`,
      'The supplier delivers the services described in the annex, on time and with care.',
      'The customer pays each invoice within thirty days of receiving it.',
      'Either party may end this agreement with three months written notice.',
    ];
    lines.forEach((line, i) => page.drawText(line, { x: 56, y: 690 - i * 22, size: 12, font }));
    page.drawRectangle({ x: 56, y: 120, width: 483, height: 1, color: rgb(0.7, 0.7, 0.75) });
    page.drawText('Signatures follow on the evidence pages.', { x: 56, y: 100, size: 10, font, color: rgb(0.4, 0.42, 0.5) });
  }
  return doc.save();
}

/** Every http(s) URL in a mail: its text part and the href and text of its HTML part (entities decoded). */
export function linksIn(mail: ParsedMail): string[] {
  const found = new Set<string>();
  const add = (text: string) => {
    for (const m of text.matchAll(/https?:\/\/[^\s"'<>)\]]+/g)) found.add(m[0].replace(/[.,;:!?]+$/, ''));
  };
  add(mail.text ?? '');
  if (typeof mail.html === 'string') add(mail.html.replace(/&amp;/g, '&').replace(/&#x2F;/gi, '/').replace(/&#47;/g, '/'));
  return [...found];
}

/** The signer's link of a mail (`.../sign/<token>`). */
export function signerLinkIn(mail: ParsedMail): string {
  const link = linksIn(mail).find((l) => /\/sign\/[A-Za-z0-9_-]{43}$/.test(l));
  if (!link) throw new Error(`no signer's link in the mail "${mail.subject ?? ''}"`);
  return link;
}

/** A URL of this service (links carry PUBLIC_URL) moved onto the test server's origin. */
export function onService(url: string, origin: string): string {
  const u = new URL(url);
  return `${origin}${u.pathname}${u.search}`;
}

/** The workspace of the signer's page tests: an owner who sends, and a key for documents and signing acting for her. */
export const signerSpec = (name = 'Acme Contracts'): WorkspaceSpec => ({
  workspace: { name },
  members: { olga: { name: 'Olga Owner', email: 'olga@acme.test', role: 'owner' } },
  keys: { contracts: { name: 'Contracts integration', operations: ['documents.*', 'signing.*'], delegation: ['olga'] } },
});

/** A test service whose mail goes through the given SMTP server (PUBLIC_URL names another host: links are moved with onService). */
export function signerServiceConfig(smtpUrl: string): Partial<ServiceConfig> {
  return { mail: mailConfigFromEnv({ SMTP_URL: smtpUrl, MAIL_FROM: 'Acme Contracts <contracts@acme.example>' }), publicUrl: 'https://ops.acme.example' };
}

/** Uploads a PDF through the documents operations (one part, PUT to the part URL) and answers its file id. */
export async function uploadPdf(svc: TestService, api: ServiceClient, bytes: Uint8Array, filename: string): Promise<string> {
  const created = await api.documents.CreateUpload({ filename, content_type: 'application/pdf', size: bytes.length });
  assert.equal(created.response.status, 200, JSON.stringify(created.error));
  const upload = created.data!;
  let offset = 0;
  for (const part of upload.parts) {
    const url = await api.documents.GetUploadPart({ upload_id: upload.upload_id, part_number: part.part_number });
    assert.equal(url.response.status, 200, JSON.stringify(url.error));
    const body = Buffer.from(bytes.subarray(offset, offset + part.size));
    offset += part.size;
    const put = await fetch(onService(url.data!.url, svc.origin), { method: 'PUT', body });
    assert.equal(put.status, 200, await put.text());
  }
  const done = await api.documents.CompleteUpload({ upload_id: upload.upload_id });
  assert.equal(done.response.status, 200, JSON.stringify(done.error));
  return done.data!.file_id;
}

/** Everything a signer's fetch could change: the request and its recipients and history (API), and the signing tables' rows. */
export async function signingSnapshot(svc: TestService, api: ServiceClient, requestId: string) {
  const request = await api.signing.GetSigningRequest({ signing_request_id: requestId });
  assert.equal(request.response.status, 200, JSON.stringify(request.error));
  const events: unknown[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await api.signing.ListSigningEvents({ signing_request_id: requestId, limit: 100, ...(cursor ? { cursor } : {}) });
    assert.equal(page.response.status, 200, JSON.stringify(page.error));
    events.push(...page.data!.items);
    if (!page.data!.has_more) break;
    cursor = page.data!.next_cursor!;
  }
  const rows = {
    requests: await svc.db.sql.all(`SELECT * FROM signing_requests WHERE id = ?`, [requestId]),
    recipients: await svc.db.sql.all(`SELECT * FROM signing_recipients WHERE request_id = ? ORDER BY position`, [requestId]),
    links: await svc.db.sql.all(`SELECT * FROM signing_links WHERE request_id = ? ORDER BY token_hash`, [requestId]),
    events: await svc.db.sql.all(`SELECT * FROM signing_events WHERE request_id = ? ORDER BY seq`, [requestId]),
    jobs: await svc.db.sql.all(`SELECT kind, dedupe_key FROM jobs WHERE kind LIKE 'signing.%' ORDER BY kind, dedupe_key`),
  };
  return { request: request.data!, events, rows };
}

/** A two-page PDF with tags written in its text (Helvetica, 11 pt). */
export async function taggedPdf(): Promise<Uint8Array> {
  const doc = await PDFDocument.create();
  const font = await doc.embedFont(StandardFonts.Helvetica);
  const p1 = doc.addPage([595, 842]);
  p1.drawText('Purchase agreement', { x: 72, y: 760, size: 18, font });
  p1.drawText('The buyer orders the goods listed in the annex.', { x: 72, y: 720, size: 11, font });
  p1.drawText('Order number: {{text;signer=1;label=Order number;width=160}}', { x: 72, y: 600, size: 11, font });
  p1.drawText('{{checkbox;signer=1;optional;label=Newsletter}}', { x: 330, y: 560, size: 11, font });
  const p2 = doc.addPage([595, 842]);
  p2.drawText('Signatures', { x: 72, y: 760, size: 18, font });
  p2.drawText('Buyer: {{signature;signer=1;height=30}}', { x: 72, y: 300, size: 11, font });
  p2.drawText('Seller: {{signature;signer=2;height=30}}  {{date;signer=2}}', { x: 72, y: 200, size: 11, font });
  p2.drawText('Reference {{invoice_number}} is not a field.', { x: 72, y: 120, size: 11, font });
  return doc.save();
}
