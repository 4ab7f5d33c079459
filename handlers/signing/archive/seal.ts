/**
 * The archive's seal: one PAdES signature (ETSI.CAdES.detached, SHA-256) appended as an incremental update
 * whose byte range covers the whole file but the signature value, with an RFC 3161 signature timestamp
 * (unsigned attribute of the CMS, PAdES B-T) when a timestamp authority is configured.
 */
import { PDF } from '@libpdf/core';
import { assertUsableAt, type SealCertificate } from './sealCertificate.ts';
import { timestampAuthority, TimestampUnavailableError, type TimestampClientOptions } from './timestamp.ts';

export interface SealOptions {
  certificate: SealCertificate;
  /** The TSA; without it the seal is PAdES B-B and its time is only the service's claim. */
  timestampUrl?: string;
  timestamp?: TimestampClientOptions;
  /** Shown by readers as the signature's reason, e.g. "Signed by all parties: request sr_...". */
  reason: string;
  location?: string;
  /** The signing time claimed in the CMS (the service's clock). */
  signedAt: Date;
}

/** The file cannot be sealed (not a PDF, damaged beyond repair, encrypted); the message says which. */
export class SealError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SealError';
  }
}

// Certificate (~1.5 KB for RSA-3072), CMS attributes and a TSA token with its own certificates fit with room to spare;
// a chain from an operator's PKCS#12 can be longer, hence the per-certificate allowance.
const BASE_CONTENTS = 16 * 1024;

/** Seals `pdf` (a PDF this service made, e.g. buildArchive's, from a checked original); the result starts with the unchanged input bytes. */
export async function seal(pdf: Uint8Array, options: SealOptions): Promise<Uint8Array> {
  assertUsableAt(options.certificate, options.signedAt);
  let doc: PDF;
  try {
    // Not guarded again: the archive seals what buildArchive made, the original (which the PDF checker read
    // before it was parsed there, within its limits) with the evidence pages this service wrote after it.
    doc = await PDF.load(pdf);
  } catch (err) {
    throw new SealError(`the file is not a PDF that can be read${err instanceof Error ? `: ${err.message}` : ''}`);
  }
  if (doc.isEncrypted) throw new SealError('the PDF is encrypted; an encrypted file cannot be sealed');
  const signer = options.certificate.signer;
  const chainBytes = (signer.certificateChain ?? []).reduce((n, c) => n + c.length, signer.certificate.length);
  try {
    const result = await doc.sign({
      signer,
      reason: options.reason,
      location: options.location,
      signingTime: options.signedAt,
      subFilter: 'ETSI.CAdES.detached',
      digestAlgorithm: 'SHA-256',
      level: options.timestampUrl ? 'B-T' : 'B-B',
      timestampAuthority: options.timestampUrl ? timestampAuthority(options.timestampUrl, options.timestamp) : undefined,
      estimatedSize: BASE_CONTENTS + 2 * chainBytes,
    });
    return result.bytes;
  } catch (err) {
    if (err instanceof TimestampUnavailableError) throw err;
    throw new SealError(`the PDF could not be sealed${err instanceof Error ? `: ${err.message}` : ''}`);
  }
}
