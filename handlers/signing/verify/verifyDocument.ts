/**
 * Checking a signed archive, for anyone who holds the file (signing.VerifySignedDocument and the public
 * `/verify` page): is there a seal, does it verify, does it cover the whole file, who made it and when,
 * is there a valid RFC 3161 timestamp, and does the file's SHA-256 match a request of this service.
 *
 * The seal is checked in code, with the same rules a PDF reader applies: the signature dictionary's
 * byte range starts at 0 and leaves out exactly the hex `/Contents` string; the CMS signature
 * (pkijs) verifies over those bytes (its message digest and the signer's signature over its signed
 * attributes); "whole document" means the range ends at the end of the file, so nothing was appended
 * after sealing. Trust in the certificate is a separate question: a seal made by anyone verifies; that
 * the file is one this service sealed is shown by the SHA-256 match with a completed request.
 */
import { createHash, webcrypto, X509Certificate } from 'node:crypto';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import type { Sql } from '../../../db/database.ts';
import { notFound } from '../../../server/errors.ts';
import type { Handler } from '../../../server/operation.ts';
import type { DocumentFiles } from '../files.ts';
import type { RequestStatus } from '../queries.ts';
import { tokenProblem } from '../archive/timestamp.ts';

export interface TimestampReport {
  present: true;
  valid: boolean;
  /** Unix ms of the TSA's genTime, null when unreadable. */
  time: number | null;
}

export interface SealReport {
  present: boolean;
  valid: boolean;
  covers_whole_document: boolean;
  /** The signer certificate's common name (or its whole subject when it has none). */
  signer: string | null;
  /** The signing time the seal claims (signed attribute), Unix ms. */
  signed_at: number | null;
  timestamp: TimestampReport | null;
}

export interface RequestMatch {
  signing_request_id: string;
  title: string;
  status: RequestStatus;
  completed_at: number | null;
  signers: Array<{ name: string; typed_name: string | null; signed_at: number | null }>;
}

export interface Verification {
  sha256: string;
  seal: SealReport;
  signing_request: RequestMatch | null;
}

const NO_SEAL: SealReport = { present: false, valid: false, covers_whole_document: false, signer: null, signed_at: null, timestamp: null };
const OID = {
  signingTime: '1.2.840.113549.1.9.5',
  timestampToken: '1.2.840.113549.1.9.16.2.14',
  commonName: '2.5.4.3',
  sha256: '2.16.840.1.101.3.4.2.1',
  sha384: '2.16.840.1.101.3.4.2.2',
  sha512: '2.16.840.1.101.3.4.2.3',
};
const DIGESTS: Record<string, 'SHA-256' | 'SHA-384' | 'SHA-512'> = { [OID.sha256]: 'SHA-256', [OID.sha384]: 'SHA-384', [OID.sha512]: 'SHA-512' };

const engine = () => new pkijs.CryptoEngine({ name: 'node', crypto: webcrypto as unknown as Crypto });

interface Candidate {
  range: [number, number, number, number];
}

/** Every `/ByteRange [a b c d]` in the file, the one reaching furthest into the file last. */
function candidates(pdf: Buffer): Candidate[] {
  const found: Candidate[] = [];
  const re = /\/ByteRange\s*\[\s*(\d{1,12})\s+(\d{1,12})\s+(\d{1,12})\s+(\d{1,12})\s*\]/g;
  const text = pdf.toString('latin1');
  for (const m of text.matchAll(re)) found.push({ range: [Number(m[1]), Number(m[2]), Number(m[3]), Number(m[4])] });
  return found.sort((x, y) => x.range[2] + x.range[3] - (y.range[2] + y.range[3]));
}

function commonName(der: ArrayBuffer | Uint8Array): string | null {
  try {
    const cert = new X509Certificate(Buffer.from(der instanceof Uint8Array ? der : new Uint8Array(der)));
    const cn = cert.subject.split('\n').find((part) => part.startsWith('CN='));
    return cn ? cn.slice(3) : cert.subject.replace(/\n/g, ', ');
  } catch {
    return null;
  }
}

function attribute(info: pkijs.SignerInfo, set: 'signedAttrs' | 'unsignedAttrs', type: string): pkijs.Attribute | undefined {
  return info[set]?.attributes.find((a) => a.type === type);
}

async function timestampReport(info: pkijs.SignerInfo): Promise<TimestampReport | null> {
  const attr = attribute(info, 'unsignedAttrs', OID.timestampToken);
  if (!attr) return null;
  try {
    const token = new Uint8Array(attr.values[0].toBER(false));
    const content = new pkijs.ContentInfo({ schema: asn1js.fromBER(token).result });
    const signed = new pkijs.SignedData({ schema: content.content });
    const tst = new pkijs.TSTInfo({ schema: asn1js.fromBER(signed.encapContentInfo.eContent!.getValue()).result });
    const algorithm = DIGESTS[tst.messageImprint.hashAlgorithm.algorithmId];
    const time = tst.genTime instanceof Date ? tst.genTime.getTime() : null;
    if (!algorithm) return { present: true, valid: false, time };
    const imprint = new Uint8Array(await webcrypto.subtle.digest(algorithm, info.signature.valueBlock.valueHexView));
    return { present: true, valid: (await tokenProblem(token, imprint, algorithm)) === null, time };
  } catch {
    return { present: true, valid: false, time: null };
  }
}

/** The seal of `pdf` (the signature covering most of the file), checked. Never throws on bad input. */
export async function inspectSeal(bytes: Uint8Array): Promise<SealReport> {
  const pdf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const all = candidates(pdf);
  const last = all[all.length - 1];
  if (!last) return NO_SEAL;
  const [a, b, c, d] = last.range;
  const shaped = a === 0 && b > 0 && c > b + 1 && c + d <= pdf.length && pdf[b] === 0x3c && pdf[c - 1] === 0x3e;
  if (!shaped) return { ...NO_SEAL, present: true };
  const covers = c + d === pdf.length;
  const hex = pdf.subarray(b + 1, c - 1).toString('latin1').replace(/\s+/g, '');
  let info: pkijs.SignerInfo;
  let signed: pkijs.SignedData;
  try {
    if (!/^[0-9a-fA-F]*$/.test(hex)) throw new Error('not hex');
    const der = Buffer.from(hex, 'hex');
    const parsed = asn1js.fromBER(der);
    if (parsed.offset === -1) throw new Error('not BER');
    const content = new pkijs.ContentInfo({ schema: parsed.result });
    signed = new pkijs.SignedData({ schema: content.content });
    const first = signed.signerInfos[0];
    if (!first) throw new Error('no signer');
    info = first;
  } catch {
    return { ...NO_SEAL, present: true, covers_whole_document: covers };
  }
  const signingTime = attribute(info, 'signedAttrs', OID.signingTime)?.values[0] as { toDate?: () => Date } | undefined;
  const signedAt = signingTime?.toDate ? signingTime.toDate().getTime() : null;
  let valid = false;
  let signer: string | null = null;
  try {
    const data = Buffer.concat([pdf.subarray(a, a + b), pdf.subarray(c, c + d)]);
    const result = await signed.verify({ signer: 0, data: data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength) as ArrayBuffer, checkChain: false, extendedMode: true }, engine());
    valid = result.signatureVerified === true;
    if (result.signerCertificate) signer = commonName(result.signerCertificate.toSchema().toBER(false));
  } catch (err) {
    // pkijs throws (rather than answering false) for a digest mismatch in extended mode; its result rides along.
    const r = err as { signerCertificate?: pkijs.Certificate | null };
    if (r?.signerCertificate) signer = commonName(r.signerCertificate.toSchema().toBER(false));
  }
  if (!signer) {
    const first = signed.certificates?.find((x): x is pkijs.Certificate => x instanceof pkijs.Certificate);
    if (first) signer = commonName(first.toSchema().toBER(false));
  }
  return { present: true, valid, covers_whole_document: covers, signer, signed_at: signedAt, timestamp: await timestampReport(info) };
}

interface DbMatchRow {
  id: string;
  title: string;
  status: RequestStatus;
  completed_at: number | string | null;
}

/**
 * The request whose sealed archive has this SHA-256: of `workspaceId` (the operation), or of any
 * workspace (the public page, where holding the file is what shows its request).
 */
export async function matchArchive(sql: Sql, sha256: string, workspaceId: string | null): Promise<RequestMatch | null> {
  const row = await sql.one<DbMatchRow>(
    `SELECT id, title, status, completed_at FROM signing_requests WHERE archive_sha256 = ?${workspaceId ? ' AND workspace_id = ?' : ''} ORDER BY created_at LIMIT 1`,
    workspaceId ? [sha256, workspaceId] : [sha256],
  );
  if (!row) return null;
  const signers = await sql.all<{ name: string; typed_name: string | null; signed_at: number | string | null }>(
    `SELECT name, typed_name, signed_at FROM signing_recipients WHERE request_id = ? AND role <> 'cc' ORDER BY position`,
    [row.id],
  );
  return {
    signing_request_id: row.id,
    title: row.title,
    status: row.status,
    completed_at: row.completed_at === null ? null : Number(row.completed_at),
    signers: signers.map((s) => ({ name: s.name, typed_name: s.typed_name, signed_at: s.signed_at === null ? null : Number(s.signed_at) })),
  };
}

/** The whole check of a file's bytes. */
export async function verifyDocument(sql: Sql, bytes: Uint8Array, workspaceId: string | null): Promise<Verification> {
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  const [seal, signing_request] = await Promise.all([inspectSeal(bytes), matchArchive(sql, sha256, workspaceId)]);
  return { sha256, seal, signing_request };
}

/** signing.VerifySignedDocument: the check of a stored file the caller can see (see the operation's description). */
export const verifySignedDocument = (files: Pick<DocumentFiles, 'find' | 'visibleTo' | 'readBytes'>): Handler<'signing.VerifySignedDocument'> => async (input, ctx) => {
  const file = await files.find(ctx.sql, ctx.workspaceId, input.file_id);
  if (!file || !files.visibleTo(file, ctx.member?.id ?? null)) throw notFound(`No file ${input.file_id} is visible to this credential.`);
  const bytes = await files.readBytes(file);
  const result = await verifyDocument(ctx.sql, bytes, ctx.workspaceId);
  return { file_id: file.id, ...result };
};
