/**
 * The signed archive before its seal: the original PDF with evidence pages after its own. The original's
 * pages are never re-rendered: the evidence pages are added in an incremental update, so the archive
 * begins with the original file byte for byte (its SHA-256 is printed on the evidence pages and can be
 * checked over the archive's first `size` bytes). An original encrypted with an owner password only
 * cannot take an unencrypted update; it is decrypted (its objects and content streams written out as
 * they decrypt, unchanged otherwise; when its permissions forbid changes, its pages are copied into a
 * new file) and the whole file rewritten with the evidence pages.
 */
import Bowser from 'bowser';
import { PDF, type PDFPage, rgb } from '@libpdf/core';
import type { DocumentFiles } from '../files.ts';
import { TextDrawer, type TextStyle } from './pdfText.ts';
import { type DrawnSignature, inkBox } from '../signer/drawnSignature.ts';
import type { FieldKind } from '../queries.ts';

export interface EvidenceSigner {
  name: string;
  email: string;
  /** The name the signer typed (drawn in the handwriting font); null for a provider's signature. */
  typedName: string | null;
  signedAt: number;
  ip: string | null;
  userAgent: string | null;
  /** e.g. "BankID (test provider)": how the signer was identified beyond the link mailed to them. */
  method?: string | null;
  /** The signature the signer drew on the signing page, if they drew one. */
  drawn?: DrawnSignature | null;
}

/** A field placed on the document's pages, with what its signer gave (drawn in the archive). */
export interface FilledField {
  page: number;
  x: number;
  y: number;
  width: number;
  height: number;
  kind: FieldKind;
  /** What to write (checkbox: "true" draws a tick; anything else nothing). */
  text: string;
  /** A signature field of a signer who drew their signature: drawn instead of `text`. */
  drawing?: DrawnSignature | null;
  /** The field was found from a text tag: its box is painted white first, so the tag does not show. */
  cover?: boolean;
}

export interface EvidenceEvent {
  occurredAt: number;
  kind: string;
  /** The recipient the event concerns, if any. */
  recipient: { name: string; email: string } | null;
  data: Record<string, unknown>;
}

export interface Evidence {
  requestId: string;
  title: string;
  /** Who sent the request, e.g. `Olga Owner <olga@acme.test>, through API key "CRM" (ak_...)`. */
  sentBy?: string;
  signatureMethod: string;
  source: { filename: string; sha256: string; size: number; pages: number };
  createdAt: number;
  completedAt: number;
  signers: EvidenceSigner[];
  events: EvidenceEvent[];
  /** The seal's certificate subject, e.g. "CN=Workspace Operations seal (example.com)". */
  sealedBy: string;
  /** Where anyone can check the archive, e.g. https://example.com/verify. */
  verifyUrl: string;
  /** Fields to draw on the document's own pages (RequestFileSignatures' `fields`), filled. */
  fields?: FilledField[];
}

export interface BuiltArchive {
  bytes: Uint8Array;
  evidencePages: number;
  /** The original was encrypted (owner password only) and its pages were written out decrypted. */
  decrypted: boolean;
  /** The archive starts with the original's bytes (incremental update). */
  appended: boolean;
}

/** The archive could not be built from this original (damaged, needs a password); the message says why. */
export class EvidenceError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EvidenceError';
  }
}

const PAGE = { width: 595.28, height: 841.89 }; // A4
const MARGIN = 56;
const WIDTH = PAGE.width - 2 * MARGIN;
const INK = rgb(0.1, 0.1, 0.12);
const MUTED = rgb(0.38, 0.4, 0.45);
const RULE = rgb(0.8, 0.82, 0.86);
const SIGNATURE_INK = rgb(0.06, 0.16, 0.45);
const segmenter = new Intl.Segmenter('und', { granularity: 'grapheme' });

/** `2026-11-24 09:30:00 UTC`. */
export function utc(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** A readable summary of a User-Agent, e.g. "Firefox 132 on Windows 10" or "Safari 17 on iOS 17.1 (mobile)". */
export function deviceSummary(userAgent: string | null | undefined): string {
  if (!userAgent?.trim()) return 'not recorded';
  const ua = Bowser.parse(userAgent.slice(0, 1000));
  const major = ua.browser.version?.split('.')[0];
  const browser = ua.browser.name ? `${ua.browser.name}${major ? ` ${major}` : ''}` : null;
  const osVersion = ua.os.versionName ?? ua.os.version;
  const os = ua.os.name ? `${ua.os.name}${osVersion ? ` ${osVersion}` : ''}` : null;
  const kind = ua.platform.type && ua.platform.type !== 'desktop' ? ` (${ua.platform.type})` : '';
  if (!browser && !os) return `unrecognised (${userAgent.slice(0, 60)})`;
  return `${browser ?? 'unknown browser'} on ${os ?? 'unknown system'}${kind}`;
}

const EVENT_LABELS: Record<string, string> = {
  'request.created': 'Request created',
  'invitation.sent': 'Invitation sent',
  'invitation.failed': 'Invitation failed',
  'recipient.opened': 'Opened the request',
  'recipient.signed': 'Signed',
  'recipient.declined': 'Declined',
  'recipient.replaced': 'Signer replaced (another address)',
  'reminder.sent': 'Reminder sent',
  'reminders.stopped': 'Automatic reminders stopped',
  'deadline.changed': 'Deadline changed',
  'request.cancelled': 'Request cancelled',
  'request.expired': 'Request expired',
  'request.completed': 'All parties signed',
  'archive.completed': 'Archive sealed',
};

function eventDetail(e: EvidenceEvent): string {
  const parts: string[] = [];
  if (e.recipient) parts.push(`${e.recipient.name} <${e.recipient.email}>`);
  for (const [key, value] of Object.entries(e.data)) {
    if (value === null || value === undefined || value === false || typeof value === 'object') continue;
    if (value === true) {
      parts.push(key.replace(/_/g, ' '));
      continue;
    }
    const shown = /_at$/.test(key) && typeof value === 'number' ? utc(value) : String(value);
    parts.push(`${key.replace(/_/g, ' ')}: ${shown}`);
  }
  return parts.join('; ');
}

/** Lays text out top to bottom over as many evidence pages as it takes. */
class Writer {
  page!: PDFPage;
  y = 0;
  pages: PDFPage[] = [];

  constructor(
    private readonly pdf: PDF,
    private readonly t: TextDrawer,
    private readonly header: string,
  ) {
    this.newPage();
  }

  newPage(): void {
    this.page = this.pdf.addPage({ width: PAGE.width, height: PAGE.height });
    this.pages.push(this.page);
    this.y = PAGE.height - MARGIN;
    this.text(this.header, MARGIN, 8, 'text', MUTED);
    this.y -= 22;
  }

  private text(text: string, x: number, size: number, style: TextStyle, color: typeof INK, page = this.page, y = this.y): void {
    this.t.draw(page, text, { x, y, size, style, color });
  }

  /** Starts a new page unless `height` points are left. */
  need(height: number): void {
    if (this.y - height < MARGIN + 20) this.newPage();
  }

  /** Word-wrapped lines of at most `width` points (a word longer than a line is cut between graphemes). */
  wrap(raw: string, style: TextStyle, size: number, width: number): string[] {
    const fits = (s: string) => this.t.width(s, style, size) <= width;
    const lines: string[] = [];
    let line = '';
    for (const word of TextDrawer.clean(raw).split(/\s+/).filter(Boolean)) {
      let w = word;
      while (!fits(w)) {
        const graphemes = [...segmenter.segment(w)].map((g) => g.segment);
        let lo = 1;
        let hi = graphemes.length - 1;
        while (lo < hi) {
          const mid = Math.ceil((lo + hi) / 2);
          if (fits(graphemes.slice(0, mid).join(''))) lo = mid;
          else hi = mid - 1;
        }
        if (line) lines.push(line);
        line = '';
        lines.push(graphemes.slice(0, lo).join(''));
        w = graphemes.slice(lo).join('');
      }
      const next = line ? `${line} ${w}` : w;
      if (!fits(next)) {
        lines.push(line);
        line = w;
      } else line = next;
    }
    if (line || !lines.length) lines.push(line);
    return lines;
  }

  heading(text: string, size = 13): void {
    this.need(size + 30);
    this.y -= 6;
    this.text(text, MARGIN, size, 'bold', INK);
    this.y -= 8;
    this.page.drawLine({ start: { x: MARGIN, y: this.y }, end: { x: MARGIN + WIDTH, y: this.y }, color: RULE, thickness: 0.75 });
    this.y -= 16;
  }

  /** A label and its value, the value wrapped beside the label. */
  field(label: string, value: string, size = 9.5): void {
    const labelWidth = 130;
    const lines = this.wrap(value, 'text', size, WIDTH - labelWidth);
    this.need(lines.length * (size + 3.5));
    this.text(label, MARGIN, 9.5, 'text', MUTED);
    for (const line of lines) {
      this.text(line, MARGIN + labelWidth, size, 'text', INK);
      this.y -= size + 3.5;
    }
    this.y -= 2;
  }

  paragraph(text: string, size = 9, color = MUTED): void {
    for (const line of this.wrap(text, 'text', size, WIDTH)) {
      this.need(size + 4);
      this.text(line, MARGIN, size, 'text', color);
      this.y -= size + 3.5;
    }
    this.y -= 4;
  }

  /** A drawn signature, scaled into a line of the signer's block. */
  drawing(d: DrawnSignature): void {
    this.need(70);
    this.y -= 50;
    strokes(this.page, d, { x: MARGIN + 130, y: this.y, width: Math.min(WIDTH - 130, 260), height: 46 });
    this.y -= 6;
    this.page.drawLine({ start: { x: MARGIN + 130, y: this.y }, end: { x: MARGIN + WIDTH, y: this.y }, color: RULE, thickness: 0.75 });
    this.y -= 16;
  }

  /** The typed name drawn as a handwritten signature on a line (letters the handwriting font lacks in the text fonts). */
  signature(typedName: string): void {
    this.need(60);
    const name = TextDrawer.clean(typedName);
    let size = 26;
    while (size > 10 && this.t.width(name, 'script', size) > WIDTH - 150) size -= 1;
    this.y -= 12;
    this.text(name, MARGIN + 130, size, 'script', SIGNATURE_INK);
    this.y -= 8;
    this.page.drawLine({ start: { x: MARGIN + 130, y: this.y }, end: { x: MARGIN + WIDTH, y: this.y }, color: RULE, thickness: 0.75 });
    this.y -= 16;
  }

  /** One row of the event table: time, what, detail (wrapped). */
  event(time: string, what: string, detail: string): void {
    const size = 8.5;
    const detailLines = detail ? this.wrap(detail, 'text', size, WIDTH - 236) : [''];
    this.need(detailLines.length * (size + 3) + 3);
    this.text(time, MARGIN, size, 'text', MUTED);
    this.text(what, MARGIN + 118, size, 'bold', INK);
    for (const line of detailLines) {
      this.text(line, MARGIN + 236, size, 'text', INK);
      this.y -= size + 3;
    }
    this.y -= 3;
  }

  /** "Evidence page i of n" on every page, once the count is known. */
  footers(requestId: string, firstPage: number): void {
    this.pages.forEach((page, i) => {
      const text = `Request ${requestId} · evidence page ${i + 1} of ${this.pages.length} · archive page ${firstPage + i} of ${firstPage + this.pages.length - 1}`;
      this.text(text, MARGIN, 7.5, 'text', MUTED, page, MARGIN - 20);
    });
  }
}

async function open(original: Uint8Array, checks: Pick<DocumentFiles, 'checkStoredPdf' | 'isBusy'>): Promise<{ pdf: PDF; decrypted: boolean }> {
  let pdf: PDF;
  try {
    // The guarded parse first (a checking thread, the parse limits): a file that would exhaust them is refused here, not parsed below.
    await checks.checkStoredPdf(original, Number.MAX_SAFE_INTEGER);
    pdf = await PDF.load(original);
  } catch (err) {
    if (checks.isBusy(err)) throw err;
    throw new EvidenceError(`the original PDF cannot be read${err instanceof Error ? `: ${err.message}` : ''}`);
  }
  if (!pdf.isEncrypted) return { pdf, decrypted: false };
  if (!pdf.isAuthenticated) throw new EvidenceError('the original PDF needs a password to open');
  try {
    pdf.removeProtection();
    return { pdf, decrypted: true };
  } catch {
    // Its permissions forbid changes (e.g. qpdf --modify=none) and only the owner password lifts them: the
    // pages, which opened without a password, are copied decrypted into a new file (document-level parts
    // such as the outline stay behind; each page's content and resources come along unchanged).
  }
  try {
    const copy = PDF.create();
    await copy.copyPagesFrom(pdf, [...Array(pdf.getPageCount()).keys()]);
    return { pdf: copy, decrypted: true };
  } catch (err) {
    throw new EvidenceError(`the original PDF's pages cannot be copied out of its encryption${err instanceof Error ? `: ${err.message}` : ''}`);
  }
}

/** Draws a drawn signature's strokes into a box (PDF points, lower-left origin), its ink fitted and centred. */
function strokes(page: PDFPage, d: DrawnSignature, box: { x: number; y: number; width: number; height: number }): void {
  const ink = inkBox(d);
  const pad = Math.min(box.width, box.height) * 0.08;
  const scale = Math.min((box.width - 2 * pad) / ink.width, (box.height - 2 * pad) / ink.height);
  const offsetX = box.x + (box.width - ink.width * scale) / 2;
  const offsetY = box.y + (box.height - ink.height * scale) / 2;
  const at = (px: number, py: number) => [offsetX + (px - ink.x) * scale, offsetY + (ink.y + ink.height - py) * scale] as const;
  const path = page.drawPath();
  for (const s of d.strokes) {
    const [x0, y0] = at(s[0]!, s[1]!);
    path.moveTo(x0, y0);
    // A single point (a dot) is a zero-length line: the round cap draws it.
    if (s.length === 2) path.lineTo(x0, y0);
    for (let i = 2; i < s.length; i += 2) {
      const [x, y] = at(s[i]!, s[i + 1]!);
      path.lineTo(x, y);
    }
  }
  path.stroke({ borderColor: SIGNATURE_INK, borderWidth: Math.max(0.6, Math.min(2, box.height / 30)), lineCap: 'round', lineJoin: 'round' });
}

/** A tick in a check box's square. */
function tick(page: PDFPage, box: { x: number; y: number; width: number; height: number }): void {
  const side = Math.min(box.width, box.height);
  const x = box.x + (box.width - side) / 2;
  const y = box.y + (box.height - side) / 2;
  page
    .drawPath()
    .moveTo(x + side * 0.18, y + side * 0.52)
    .lineTo(x + side * 0.42, y + side * 0.26)
    .lineTo(x + side * 0.84, y + side * 0.8)
    .stroke({ borderColor: INK, borderWidth: Math.max(0.8, side / 10), lineCap: 'round', lineJoin: 'round' });
}

/**
 * Draws each filled field inside its box on its page (cut at the page's edge; text sized to fit the
 * box: the signature in the handwriting font). Returns how many were drawn.
 */
function drawFields(pdf: PDF, text: TextDrawer, fields: readonly FilledField[], pages: number): number {
  let drawn = 0;
  // One page object per page: the text drawer names its fonts per page object.
  const pageObjects = new Map<number, PDFPage | null>();
  for (const f of fields) {
    if (f.page < 1 || f.page > pages) continue;
    const empty = (!f.text.trim() && !f.drawing) || (f.kind === 'checkbox' && f.text !== 'true');
    if (empty && !f.cover) continue;
    if (!pageObjects.has(f.page)) pageObjects.set(f.page, pdf.getPage(f.page - 1));
    const page = pageObjects.get(f.page);
    if (!page) continue;
    const box = page.getCropBox();
    const x = box.x + f.x;
    const y = box.y + f.y;
    const width = Math.min(f.width, box.x + box.width - x);
    const height = Math.min(f.height, box.y + box.height - y);
    if (width < 4 || height < 4) continue;
    if (f.cover) page.drawRectangle({ x, y, width, height, color: rgb(1, 1, 1) });
    if (empty) continue;
    if (f.kind === 'checkbox') {
      tick(page, { x, y, width, height });
      drawn++;
      continue;
    }
    if (f.kind === 'signature' && f.drawing) {
      strokes(page, f.drawing, { x, y, width, height });
      drawn++;
      continue;
    }
    const style = f.kind === 'signature' || f.kind === 'initials' ? 'script' : 'text';
    const line = TextDrawer.clean(f.text);
    let size = Math.min(height * (style === 'script' ? 0.7 : 0.75), 36);
    while (size > 4 && text.width(line, style, size) > width - 4) size -= 0.5;
    text.draw(page, line, { x: x + 2, y: y + (height - size) / 2 + size * 0.2, size, style, color: style === 'script' ? SIGNATURE_INK : INK });
    drawn++;
  }
  return drawn;
}

/** The original followed by evidence pages (unsealed; seal.ts seals the result). */
export async function buildArchive(original: Uint8Array, evidence: Evidence, checks: Pick<DocumentFiles, 'checkStoredPdf' | 'isBusy'>): Promise<BuiltArchive> {
  const { pdf, decrypted } = await open(original, checks);
  const originalPages = pdf.getPageCount();
  const text = await TextDrawer.create(pdf);
  const w = new Writer(pdf, text, `Evidence of electronic signature · ${evidence.requestId}`);
  const appended = !decrypted && pdf.canSaveIncrementally() === null;

  // The signers' fields on the document's own pages: drawn into those pages, in the revision appended after the original's bytes.
  const drawn = drawFields(pdf, text, evidence.fields ?? [], originalPages);
  w.heading('Evidence of electronic signature', 17);
  w.paragraph(
    `Pages 1 to ${originalPages} of this file are the document as it was uploaded and signed${drawn ? `, with the signers' ${drawn} field${drawn === 1 ? '' : 's'} (signatures, initials, names, dates, text and ticks) drawn where the sender placed them` : ', unchanged'}${decrypted ? ' (written out without its owner-password encryption)' : ''}. ` +
      `The pages from ${originalPages + 1} on record who signed it, when and how. The whole file is sealed by the service: any change after sealing breaks the seal.`,
  );
  w.heading('Document');
  w.field('Title', evidence.title);
  w.field('Request', evidence.requestId);
  if (evidence.sentBy) w.field('Sent by', evidence.sentBy);
  w.field('Original file', `${evidence.source.filename} (${evidence.source.pages} ${evidence.source.pages === 1 ? 'page' : 'pages'}, ${evidence.source.size} bytes)`);
  w.field('SHA-256 of original', evidence.source.sha256, 8);
  w.field(
    'Original bytes',
    appended
      ? `The first ${evidence.source.size} bytes of this file are the original file itself (they have the SHA-256 above); ${drawn ? 'the fields, ' : ''}these pages and the seal were appended after them.`
      : 'The original pages were written out again (decrypted); the original file, kept as uploaded, has the SHA-256 above.',
  );
  w.field('Signature method', evidence.signatureMethod);
  w.field('Requested', utc(evidence.createdAt));
  w.field('Completed', utc(evidence.completedAt));

  w.heading(evidence.signers.length === 1 ? 'Signer' : 'Signers');
  evidence.signers.forEach((s, i) => {
    w.need(150);
    w.field(`Signer ${i + 1}`, s.name);
    w.field('E-mail', s.email);
    if (s.typedName !== null) {
      w.field('Typed name', s.typedName);
      if (s.drawn) {
        w.field('Signature', 'drawn on the signing page (below)');
        w.drawing(s.drawn);
      } else w.signature(s.typedName);
    }
    if (s.method) w.field('Identified by', s.method);
    w.field('Signed at', utc(s.signedAt));
    w.field('IP address', s.ip ?? 'not recorded');
    w.field('Device', deviceSummary(s.userAgent));
    w.y -= 8;
  });

  w.heading('Event log');
  for (const e of evidence.events) w.event(utc(e.occurredAt), EVENT_LABELS[e.kind] ?? e.kind, eventDetail(e));

  w.heading('Seal and verification');
  w.paragraph(
    `This file carries one PAdES signature (ETSI.CAdES.detached, SHA-256) of ${evidence.sealedBy}, covering every byte of the file but the signature itself. ` +
      `Check it at ${evidence.verifyUrl} (upload the file; nothing is kept), or with any PDF reader that shows signatures, or with poppler's pdfsig.`,
    9,
    INK,
  );
  w.footers(evidence.requestId, originalPages + 1);

  let out: Uint8Array;
  try {
    text.finish();
    out = await pdf.save({ incremental: appended, subsetFonts: true });
  } catch (err) {
    throw new EvidenceError(`the archive could not be written${err instanceof Error ? `: ${err.message}` : ''}`);
  }
  return { bytes: out, evidencePages: w.pages.length, decrypted, appended };
}
