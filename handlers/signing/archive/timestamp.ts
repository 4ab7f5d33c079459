/** RFC 3161 timestamps for seals: a TSA reached by HTTP POST of an `application/timestamp-query`. */
import { webcrypto } from 'node:crypto';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { HttpTimestampAuthority, type DigestAlgorithm, type TimestampAuthority } from '@libpdf/core';

/** The timestamp authority could not give a token; the seal is not made without one when a TSA is configured. */
export class TimestampUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TimestampUnavailableError';
  }
}

export interface TimestampClientOptions {
  /** The service's outbound client (hardened egress next to the module); default the global fetch. */
  fetch?: typeof globalThis.fetch;
  /** Default 15 s. */
  timeoutMs?: number;
}

const DIGEST_OIDS: Record<DigestAlgorithm, string> = {
  'SHA-256': '2.16.840.1.101.3.4.2.1',
  'SHA-384': '2.16.840.1.101.3.4.2.2',
  'SHA-512': '2.16.840.1.101.3.4.2.3',
};

/** A client of the TSA at `url` (http or https, no credentials in the URL; errors name the host only). */
export function timestampAuthority(url: string, options: TimestampClientOptions = {}): TimestampAuthority {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new TimestampUnavailableError('the timestamp authority URL is not a URL');
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new TimestampUnavailableError('the timestamp authority URL must be http or https');
  if (parsed.username || parsed.password) throw new TimestampUnavailableError('the timestamp authority URL must not carry credentials');
  const client = new HttpTimestampAuthority(url, { fetch: options.fetch, timeout: options.timeoutMs ?? 15_000 });
  return {
    async timestamp(digest, algorithm) {
      let token: Uint8Array;
      try {
        token = await client.timestamp(digest, algorithm);
      } catch (err) {
        const why = err instanceof Error ? err.message.split(url).join(parsed.host) : String(err);
        throw new TimestampUnavailableError(`the timestamp authority at ${parsed.host} gave no token: ${why}`);
      }
      const wrong = await tokenProblem(token, digest, algorithm);
      if (wrong) throw new TimestampUnavailableError(`the timestamp authority at ${parsed.host} gave a token that cannot be used: ${wrong}`);
      return token;
    },
  };
}

/**
 * Why a TimeStampToken does not stamp `digest`, or null when it does: the message imprint must be this digest
 * (the library does not check it, and over plain http anyone on the way could answer) and the token's own
 * signature must verify against the certificate it carries. Trust in the TSA is the reader's to decide.
 */
export async function tokenProblem(token: Uint8Array, digest: Uint8Array, algorithm: DigestAlgorithm): Promise<string | null> {
  let signed: pkijs.SignedData;
  let info: pkijs.TSTInfo;
  try {
    const content = new pkijs.ContentInfo({ schema: asn1js.fromBER(token).result });
    signed = new pkijs.SignedData({ schema: content.content });
    const eContent = signed.encapContentInfo.eContent;
    if (!eContent) return 'the token holds no TSTInfo';
    info = new pkijs.TSTInfo({ schema: asn1js.fromBER(eContent.getValue()).result });
  } catch {
    return 'the token is not a TimeStampToken';
  }
  if (info.messageImprint.hashAlgorithm.algorithmId !== DIGEST_OIDS[algorithm]) return `its imprint is not ${algorithm}`;
  if (!Buffer.from(info.messageImprint.hashedMessage.valueBlock.valueHexView).equals(Buffer.from(digest))) return 'it stamps another value than the one sent';
  try {
    const engine = new pkijs.CryptoEngine({ name: 'node', crypto: webcrypto as unknown as Crypto });
    // For a TSTInfo pkijs wants the stamped data itself (we hold only its digest, checked above); as plain data
    // it checks what matters here: the signed attributes' digest of the TSTInfo and the TSA's signature over them.
    signed.encapContentInfo.eContentType = '1.2.840.113549.1.7.1';
    const ok = await signed.verify({ signer: 0, checkChain: false }, engine);
    if (!ok) return 'its signature does not verify';
  } catch {
    return 'its signature cannot be verified (no TSA certificate in the token, or a bad signature)';
  }
  return null;
}
