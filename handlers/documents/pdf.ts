/**
 * The upload scan's PDF half: the bytes are a PDF (its first bytes are `%PDF-`, no web markup a browser
 * could sniff) that parses strictly on a checking thread within the parse limits (pdfGuard.ts), opens
 * without a user password, is within the size and page limits and carries no active content
 * (pdfInspect.ts). Every refusal is a plain reason; nothing here throws on bad input but PdfGuardBusy.
 */
import { PdfGuardBusy, pdfGuard } from './pdfGuard.ts';
import type { PdfInspection } from './pdfInspect.ts';

export type { PdfInspection } from './pdfInspect.ts';
export { PDF_PARSE_LIMITS, PdfGuardBusy } from './pdfGuard.ts';

export interface PdfLimits {
  maxBytes: number;
  maxPages: number;
}

const OTHER_FORMATS: { magic: number[]; name: string }[] = [
  { magic: [0x89, 0x50, 0x4e, 0x47], name: 'a PNG image' },
  { magic: [0xff, 0xd8, 0xff], name: 'a JPEG image' },
  { magic: [0x47, 0x49, 0x46, 0x38], name: 'a GIF image' },
  { magic: [0x50, 0x4b, 0x03, 0x04], name: 'a ZIP archive (or an Office document)' },
  { magic: [0xd0, 0xcf, 0x11, 0xe0], name: 'an old Office document' },
];

/** The first bytes a browser sniffs a type from (and where the end-of-file marker is looked for at the end). */
const SNIFF_WINDOW = 1024;
const MARKUP = /<(?:!doctype\s+html|html|head|body|script|iframe|svg|object|embed)[\s>/]/i;

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
  if (indexOf(bytes, '%PDF-', 0, 5) === 0) return null;
  const other = OTHER_FORMATS.find((f) => f.magic.every((b, i) => bytes[i] === b));
  if (other) return `the file is ${other.name}, not a PDF`;
  // Readers accept junk before the header; browsers and mail filters sniff that junk as another type (a polyglot).
  if (indexOf(bytes, '%PDF-', 0, SNIFF_WINDOW) > 0) return 'the file does not start with %PDF- (it has other bytes before the PDF header)';
  return 'the file is not a PDF (it does not start with a PDF header)';
}

/** Checks that `bytes` are a PDF within `limits` that opens without a user password and carries no active content. */
export async function inspectPdf(bytes: Uint8Array, limits: PdfLimits): Promise<PdfInspection> {
  if (bytes.length === 0) return { ok: false, reason: 'the file is empty' };
  if (bytes.length > limits.maxBytes) return { ok: false, reason: `the file is larger than the limit of ${formatBytes(limits.maxBytes)}` };
  const foreign = notAPdf(bytes);
  if (foreign) return { ok: false, reason: foreign };
  if (indexOf(bytes, '%%EOF', Math.max(0, bytes.length - SNIFF_WINDOW), bytes.length) < 0) {
    return { ok: false, reason: 'the PDF is truncated: its end-of-file marker is missing' };
  }
  if (MARKUP.test(Buffer.from(bytes.buffer, bytes.byteOffset, Math.min(bytes.length, SNIFF_WINDOW)).toString('latin1'))) {
    return { ok: false, reason: 'the file carries HTML or SVG markup in its first 1024 bytes (a file that is also a web page is not accepted)' };
  }
  return pdfGuard.inspect(bytes, 'upload', limits.maxPages);
}

/** A stored PDF the guarded parse refused (its reason says why). */
export class PdfUnreadable extends Error {
  constructor(readonly reason: string) {
    super(reason);
    this.name = 'PdfUnreadable';
  }
}

/**
 * A stored file read again (the archive, its seal): the same guarded parse with the same limits, without
 * the upload's content rule (files stored before it came in are still archived). Throws PdfUnreadable.
 */
export async function checkStoredPdf(bytes: Uint8Array, maxPages: number): Promise<{ pages: number }> {
  const out = await pdfGuard.inspect(bytes, 'stored', maxPages);
  if (!out.ok) throw new PdfUnreadable(out.reason);
  return { pages: out.pages };
}

/** The PDF checks other modules get with the `documentFiles` service (handlers/interfaces/documentFiles.ts). */
export const storedPdfChecks = {
  checkStoredPdf,
  isBusy: (err: unknown): boolean => err instanceof PdfGuardBusy,
};
