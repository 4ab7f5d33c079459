/**
 * The upload scan: the PDF checks (pdf.ts), then, when a ClamAV daemon is configured, its verdict (clamav.ts).
 * A refusal is a plain reason for `invalid_input`; a scanner that cannot answer throws ScannerUnavailable,
 * a PDF checker with every thread busy and its queue full throws PdfGuardBusy.
 */
import { scanStream, type ClamavConfig } from './clamav.ts';
import { inspectPdf, type PdfLimits } from './pdf.ts';
import type { TextTag } from '../interfaces/documentFiles.ts';

export { checkStoredPdf, inspectPdf, PDF_PARSE_LIMITS, PdfGuardBusy, PdfUnreadable, type PdfInspection, type PdfLimits } from './pdf.ts';
export { ClamavUrlError, parseClamavUrl, pingClamd, ScannerUnavailable, scanStream, type ClamavConfig, type ClamavVerdict } from './clamav.ts';

export type ScanOutcome = { ok: true; pages: number; encrypted: 'none' | 'owner-only'; pdfVersion: string; tags?: TextTag[] } | { ok: false; reason: string };

/** Pieces of `bytes`, views not copies, for scanStream. */
export async function* chunksOf(bytes: Uint8Array, size = 256 * 1024): AsyncIterable<Uint8Array> {
  for (let at = 0; at < bytes.length; at += size) yield bytes.subarray(at, at + size);
}

/** The whole scan of an uploaded file held in memory: PDF checks first, the virus scan on files that pass them. */
export async function scanDocument(bytes: Uint8Array, options: { limits: PdfLimits; clamav: ClamavConfig | null }): Promise<ScanOutcome> {
  const pdf = await inspectPdf(bytes, options.limits);
  if (!pdf.ok || !options.clamav) return pdf;
  const verdict = await scanStream(options.clamav, chunksOf(bytes));
  if (!verdict.clean) return { ok: false, reason: `the file contains malware (ClamAV found ${verdict.signature})` };
  return pdf;
}
