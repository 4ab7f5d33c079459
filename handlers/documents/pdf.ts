/**
 * The upload scan's PDF half: the bytes are a PDF that parses strictly, opens without a user password,
 * and is within the size and page limits. Every refusal is a plain reason; nothing here throws on bad input.
 */
import { PDF } from '@libpdf/core';

export interface PdfLimits {
  maxBytes: number;
  maxPages: number;
}

export type PdfInspection =
  | { ok: true; pages: number; encrypted: 'none' | 'owner-only'; pdfVersion: string }
  | { ok: false; reason: string };

const OTHER_FORMATS: { magic: number[]; name: string }[] = [
  { magic: [0x89, 0x50, 0x4e, 0x47], name: 'a PNG image' },
  { magic: [0xff, 0xd8, 0xff], name: 'a JPEG image' },
  { magic: [0x47, 0x49, 0x46, 0x38], name: 'a GIF image' },
  { magic: [0x50, 0x4b, 0x03, 0x04], name: 'a ZIP archive (or an Office document)' },
  { magic: [0xd0, 0xcf, 0x11, 0xe0], name: 'an old Office document' },
];

/** Header search window: the PDF specification lets readers accept junk before `%PDF-` within the first 1024 bytes. */
const HEADER_WINDOW = 1024;

function formatBytes(n: number): string {
  if (n >= 1024 * 1024) return `${n} bytes (${(n / (1024 * 1024)).toFixed(1).replace(/\.0$/, '')} MiB)`;
  return `${n} bytes`;
}

function indexOf(bytes: Uint8Array, needle: string, from: number, to: number): number {
  const n = Buffer.from(needle, 'latin1');
  const hay = Buffer.from(bytes.buffer, bytes.byteOffset + from, Math.max(0, Math.min(to, bytes.length) - from));
  const at = hay.indexOf(n);
  return at < 0 ? -1 : at + from;
}

function notAPdf(bytes: Uint8Array): string | null {
  if (indexOf(bytes, '%PDF-', 0, HEADER_WINDOW) >= 0) return null;
  const other = OTHER_FORMATS.find((f) => f.magic.every((b, i) => bytes[i] === b));
  if (other) return `the file is ${other.name}, not a PDF`;
  return 'the file is not a PDF (it does not start with a PDF header)';
}

/** The reason for a parse failure, by the parser's error class (its classes are not exported, their names are stable). */
function damageReason(err: unknown): string {
  const name = err instanceof Error ? err.name || err.constructor.name : '';
  const ctor = err instanceof Error ? err.constructor.name : '';
  if (name === 'XRefParseError' || ctor === 'XRefParseError') return 'the PDF is damaged or truncated: its cross-reference table cannot be read';
  if (name === 'SecurityError' || ctor === 'SecurityError' || ctor === 'PermissionDeniedError') return 'the PDF uses an encryption that cannot be opened';
  return 'the PDF is damaged: its contents cannot be read';
}

/** Checks that `bytes` are a PDF within `limits` that opens without a user password. Never throws. */
export async function inspectPdf(bytes: Uint8Array, limits: PdfLimits): Promise<PdfInspection> {
  if (bytes.length === 0) return { ok: false, reason: 'the file is empty' };
  if (bytes.length > limits.maxBytes) return { ok: false, reason: `the file is larger than the limit of ${formatBytes(limits.maxBytes)}` };
  const foreign = notAPdf(bytes);
  if (foreign) return { ok: false, reason: foreign };
  if (indexOf(bytes, '%%EOF', Math.max(0, bytes.length - HEADER_WINDOW), bytes.length) < 0) {
    return { ok: false, reason: 'the PDF is truncated: its end-of-file marker is missing' };
  }
  let doc: PDF;
  try {
    // Strict: lenient mode "recovers" a half file or a scrambled body into a document with fewer or no pages.
    doc = await PDF.load(bytes, { lenient: false });
  } catch (err) {
    return { ok: false, reason: damageReason(err) };
  }
  try {
    if (doc.isEncrypted && !doc.isAuthenticated) return { ok: false, reason: 'the PDF needs a password to open' };
    const pages = doc.getPageCount();
    if (pages === 0) return { ok: false, reason: 'the PDF has no pages' };
    if (pages > limits.maxPages) return { ok: false, reason: `the PDF has ${pages} pages, more than the limit of ${limits.maxPages}` };
    for (const page of doc.getPages()) {
      if (!(page.width > 0 && page.height > 0)) return { ok: false, reason: 'the PDF is damaged: a page has no size' };
    }
    return { ok: true, pages, encrypted: doc.isEncrypted ? 'owner-only' : 'none', pdfVersion: doc.version };
  } catch (err) {
    return { ok: false, reason: damageReason(err) };
  }
}
