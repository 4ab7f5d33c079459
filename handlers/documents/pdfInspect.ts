/**
 * What the PDF checking thread (pdfGuardWorker.ts) does with one file: a strict parse under the parse
 * budget (pdfBudget.ts), the page checks, and (for uploads) the active-content rule: JavaScript, launch
 * actions, form submissions and imports, links to other files, embedded files, XFA forms, rich media and
 * links other than http(s), mailto and tel are refused, each named. Every
 * refusal is a plain reason; nothing here throws on bad input.
 */
import { PDF, type PDFPage, PdfArray, PdfDict, PdfName, PdfRef, PdfStream, PdfString } from '@libpdf/core';
import type { TextTag } from '../interfaces/documentFiles.ts';
import { BudgetExceeded, declaredObjects, withBudget } from './pdfBudget.ts';

export interface ParseLimits {
  maxPages: number;
  /** Bytes all decoded streams of one parse may add up to. */
  maxInflatedBytes: number;
  /** Objects a file may declare. */
  maxObjects: number;
}

export type PdfInspection =
  | { ok: true; pages: number; encrypted: 'none' | 'owner-only'; pdfVersion: string; tags?: TextTag[] }
  | { ok: false; reason: string };


/** Text tags kept per file: more are not looked for (a request takes at most 50 fields). */
export const MAX_TEXT_TAGS = 100;
/** Looking for tags has its own budget, apart from the checks': decoded bytes (fonts are read again per page) and time. */
const TAG_SEARCH = { maxBytes: 32 * 1024 * 1024, ms: 2000 };
/** A page whose content streams (raw bytes, each time a stream is listed) add up to more is not searched. */
const TAG_PAGE_CONTENT_BYTES = 4 * 1024 * 1024;
const TEXT_TAG = /\{\{[^{}\n]{1,200}\}\}/g;
const tenth = (n: number) => Math.round(n * 10) / 10;

/** The raw bytes of a page's content streams, a stream counted each time it is listed (one listed 1,000 times is read 1,000 times). */
function contentBytes(doc: PDF, page: PDFPage): number {
  let value: unknown = page.dict.get('Contents');
  if (value instanceof PdfRef) value = doc.getObject(value);
  const parts: unknown[] = value instanceof PdfArray ? [...value] : [value];
  let total = 0;
  for (let part of parts) {
    if (part instanceof PdfRef) part = doc.getObject(part);
    if (part instanceof PdfStream) total += part.data.length;
    if (total > TAG_PAGE_CONTENT_BYTES) break;
  }
  return total;
}

/**
 * The document's `{{...}}` text tags, page by page (at most MAX_TEXT_TAGS), into `into`. Best effort
 * and never a refusal: a page too large to search, a page whose text cannot be read, or the search's
 * own budget or time running out ends the search with the tags found so far.
 */
function textTags(doc: PDF, into: TextTag[], deadline: number): void {
  for (const [i, page] of doc.getPages().entries()) {
    if (into.length >= MAX_TEXT_TAGS || Date.now() > deadline) return;
    if (contentBytes(doc, page) > TAG_PAGE_CONTENT_BYTES) continue;
    let found: ReturnType<typeof page.findText>;
    try {
      found = page.findText(TEXT_TAG);
    } catch (err) {
      if (err instanceof BudgetExceeded) return;
      continue;
    }
    const box = page.getCropBox();
    for (const m of found) {
      if (into.length >= MAX_TEXT_TAGS) break;
      const { x, y, width, height } = m.bbox;
      if (![x, y, width, height].every(Number.isFinite) || width <= 0 || height <= 0) continue;
      into.push({ page: i + 1, text: m.text, x: tenth(Math.max(0, x - box.x)), y: tenth(Math.max(0, y - box.y)), width: tenth(width), height: tenth(height) });
    }
  }
}

/** The tags of a document that passed the checks, under the search's own budget (see textTags). */
async function findTextTags(doc: PDF, maxObjects: number): Promise<TextTag[]> {
  const tags: TextTag[] = [];
  try {
    await withBudget({ maxBytes: TAG_SEARCH.maxBytes, maxObjects }, async () => textTags(doc, tags, Date.now() + TAG_SEARCH.ms));
  } catch {
    // Over the search's budget: the tags found so far.
  }
  return tags;
}

/** `upload`: the upload rule (strict parse, password, pages, active content); `stored`: a stored file read again (archive, seal), the parse limits only. */
export type InspectMode = 'upload' | 'stored';

const latin1 = (bytes: Uint8Array, from: number, to: number) => Buffer.from(bytes.buffer, bytes.byteOffset + from, Math.max(0, to - from)).toString('latin1');

/** Whether the last cross-reference section's trailer (a table's `trailer` or an XRef stream's dictionary) names /Encrypt. */
export function trailerEncrypted(bytes: Uint8Array): boolean {
  const tail = latin1(bytes, Math.max(0, bytes.length - 1024), bytes.length);
  const m = /startxref\s+(\d+)\s+%%EOF\s*$/.exec(tail) ?? /startxref\s+(\d+)/.exec(tail);
  const encryptKey = /\/Encrypt(?![A-Za-z0-9#_.-])/;
  if (!m) return encryptKey.test(tail);
  const at = Number(m[1]);
  if (!(at >= 0 && at < bytes.length)) return encryptKey.test(tail);
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
  const head = latin1(bytes, at, Math.min(bytes.length, at + 32));
  // A table runs to its trailer's startxref; a stream's dictionary ends at its `stream` keyword.
  const end = /^xref/.test(head) ? buf.indexOf('startxref', at, 'latin1') : buf.indexOf('stream', at, 'latin1');
  return encryptKey.test(latin1(bytes, at, end < 0 ? Math.min(bytes.length, at + 65536) : end));
}

/** Indirect object headers (`12 0 obj`) in the file's own bytes: the objects outside object streams. */
function countObjectHeaders(bytes: Uint8Array): number {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
  let n = 0;
  for (let at = buf.indexOf('obj', 0, 'latin1'); at >= 0; at = buf.indexOf('obj', at + 3, 'latin1')) {
    // "<digits> <digits> obj" followed by a delimiter.
    const after = buf[at + 3];
    if (after !== undefined && !(after <= 0x20 || after === 0x3c || after === 0x5b || after === 0x2f || after === 0x25)) continue;
    let i = at - 1;
    if (!(buf[i]! <= 0x20)) continue;
    while (i > 0 && buf[i]! <= 0x20) i--;
    if (buf[i]! >= 0x30 && buf[i]! <= 0x39) n++;
  }
  return n;
}

/** The reason for a parse failure, by the parser's error class (its classes are not exported, their names are stable). */
function damageReason(err: unknown): string {
  const name = err instanceof Error ? err.name || err.constructor.name : '';
  const ctor = err instanceof Error ? err.constructor.name : '';
  if (name === 'XRefParseError' || ctor === 'XRefParseError') return 'the PDF is damaged or truncated: its cross-reference table cannot be read';
  if (name === 'SecurityError' || ctor === 'SecurityError' || ctor === 'PermissionDeniedError') return 'the PDF uses an encryption that cannot be opened';
  return 'the PDF is damaged: its contents cannot be read';
}

const nameOf = (o: unknown) => (o instanceof PdfName ? o.value : undefined);
const textOf = (o: unknown) => (o instanceof PdfString ? o.asString() : o instanceof PdfName ? o.value : '');

/**
 * The active content reachable from the catalog, each kind named once: the whole object graph is walked
 * (names and objects as the parser decoded them, so `#4A`-escaped names and objects inside object
 * streams count), not the raw bytes.
 */
export function activeContent(doc: PDF, maxObjects: number): string[] {
  const found = new Set<string>();
  const seen = new Set<string>();
  const stack: Array<{ obj: unknown; path: string[] }> = [{ obj: doc.getCatalog(), path: [] }];
  let visited = 0;
  while (stack.length) {
    const { obj, path } = stack.pop()!;
    let value = obj;
    if (value instanceof PdfRef) {
      const key = `${value.objectNumber} ${value.generation}`;
      if (seen.has(key)) continue;
      seen.add(key);
      if (++visited > maxObjects) break;
      value = doc.getObject(value);
    }
    if (value instanceof PdfArray) {
      for (const item of value) stack.push({ obj: item, path });
      continue;
    }
    if (!(value instanceof PdfDict)) continue;
    const s = nameOf(value.get('S'));
    const last = path.at(-1);
    if (s === 'JavaScript' || value.has('JS')) {
      if (path.includes('OpenAction')) found.add('JavaScript run when the document opens (/OpenAction)');
      else if (path.includes('AA')) found.add('JavaScript run on an event (/AA additional actions)');
      else if (path.includes('Names')) found.add('document-level JavaScript (/Names /JavaScript)');
      else found.add('JavaScript (a /JavaScript action)');
    }
    if (last === 'Names' && value.has('JavaScript')) found.add('document-level JavaScript (/Names /JavaScript)');
    if (s === 'Launch') found.add('a /Launch action (it starts a program or opens a file)');
    if (s === 'GoToE') found.add('a /GoToE action (it opens an embedded file)');
    if (s === 'RichMediaExecute' || nameOf(value.get('Subtype')) === 'RichMedia') found.add('rich media (/RichMedia, e.g. Flash)');
    if (s === 'SubmitForm') found.add('a /SubmitForm action (it sends the form to an address)');
    if (s === 'ImportData') found.add('an /ImportData action (it reads data from another file)');
    if (s === 'GoToR') found.add('a /GoToR action (it opens another file)');
    if (s === 'URI') {
      // Web, mail and phone links only: a file:, UNC (\\host) or other address opens a file or a share
      // (and can leak the reader's network credentials); javascript:, vbscript: and data: run code.
      // eslint-disable-next-line no-control-regex
      const target = textOf(value.get('URI')).replace(/[\u0000-\u0020]/g, '');
      const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(target)?.[1]?.toLowerCase();
      if (scheme === 'javascript' || scheme === 'vbscript' || scheme === 'data') found.add(`a link to a ${scheme}: address (/URI)`);
      else if (!(scheme === 'http' || scheme === 'https' || scheme === 'mailto' || scheme === 'tel')) {
        found.add(`a link to a ${scheme ? `${scheme}:` : 'file or network share'} address (/URI; only http, https, mailto and tel links are accepted)`);
      }
    }
    if ((last === 'Names' && value.has('EmbeddedFiles')) || value.has('EF') || nameOf(value.get('Type')) === 'EmbeddedFile' || nameOf(value.get('Subtype')) === 'FileAttachment') {
      found.add('embedded files (/EmbeddedFiles or a file attachment)');
    }
    if (value.has('XFA')) found.add('an XFA form (/AcroForm /XFA)');
    for (const [k, v] of value) {
      // Back links lead to objects reached anyway; stream bytes are not read.
      if (k.value === 'Parent' || k.value === 'P') continue;
      stack.push({ obj: v, path: path.length < 8 ? [...path, k.value] : [...path.slice(1), k.value] });
    }
  }
  return [...found].sort();
}

/** An upload that passed the checks, with its parsed document (for the tag search). */
type Checked = { ok: true; pages: number; encrypted: 'none' | 'owner-only'; pdfVersion: string; doc: PDF };

/** The strict parse and the checks, under the parse budget. Never throws. */
export async function inspectParsed(bytes: Uint8Array, limits: ParseLimits, mode: InspectMode): Promise<PdfInspection> {
  const headers = countObjectHeaders(bytes);
  if (headers > limits.maxObjects) return { ok: false, reason: `the PDF is too complex to check: it has ${headers.toLocaleString('en-US')} objects, more than the limit of ${limits.maxObjects.toLocaleString('en-US')}` };
  // Encryption first: a file whose object streams are encrypted with a user password does not parse at all without it.
  const encrypted = trailerEncrypted(bytes);
  try {
    const checked = await withBudget<PdfInspection | Checked>({ maxBytes: limits.maxInflatedBytes, maxObjects: limits.maxObjects }, async () => {
      let doc: PDF;
      try {
        // Strict for uploads: lenient mode "recovers" a half file or a scrambled body into a document with fewer
        // or no pages. A stored file is read as its reader (the archive, the seal) reads it.
        doc = await PDF.load(bytes, mode === 'upload' ? { lenient: false } : {});
      } catch (err) {
        if (err instanceof BudgetExceeded) throw err;
        return { ok: false, reason: encrypted ? 'the PDF needs a password to open' : damageReason(err) };
      }
      const trailerSize = doc.context.info.trailer.getNumber('Size')?.value;
      if (trailerSize) declaredObjects(trailerSize);
      const pages = doc.getPageCount();
      // A stored file's reader judges its encryption and pages itself; the guard only held the parse to its limits.
      if (mode === 'stored') return { ok: true, pages, encrypted: doc.isEncrypted ? 'owner-only' : 'none', pdfVersion: doc.version };
      if (doc.isEncrypted && !doc.isAuthenticated) return { ok: false, reason: 'the PDF needs a password to open' };
      if (pages === 0) return { ok: false, reason: 'the PDF has no pages' };
      if (pages > limits.maxPages) return { ok: false, reason: `the PDF has ${pages} pages, more than the limit of ${limits.maxPages}` };
      for (const page of doc.getPages()) {
        if (!(page.width > 0 && page.height > 0)) return { ok: false, reason: 'the PDF is damaged: a page has no size' };
      }
      const active = activeContent(doc, limits.maxObjects);
      if (active.length) return { ok: false, reason: `the PDF carries active content, which is not accepted: ${active.join('; ')}` };
      return { ok: true, pages, encrypted: doc.isEncrypted ? 'owner-only' : 'none', pdfVersion: doc.version, doc };
    });
    if (!('doc' in checked)) return checked;
    // On the same checking thread, after the checks and under a budget of its own: looking for tags never refuses an upload.
    const { doc, ...result } = checked;
    return { ...result, tags: await findTextTags(doc, limits.maxObjects) };
  } catch (err) {
    if (err instanceof BudgetExceeded) return { ok: false, reason: `the PDF is too large to check: ${err.message}` };
    return { ok: false, reason: damageReason(err) };
  }
}
