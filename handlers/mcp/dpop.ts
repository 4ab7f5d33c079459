/**
 * DPoP at the resource server (RFC 9449 §4.3, §7): the proof a request to `/v1/mcp` sends beside an
 * access token that the authorization server bound to a key (the token record's `jkt`, the RFC 7638
 * thumbprint of the key whose proof the token endpoint saw). A bound token is taken only as
 * `Authorization: DPoP <token>` with one `DPoP` header holding a proof that:
 *
 * - is a JWS with `typ: dpop+jwt`, signed with one of DPOP_ALGS (asymmetric only) by the public key in
 *   its `jwk` header (never a private key), whose thumbprint is the token's `jkt`;
 * - names this request: `htm` = the HTTP method, `htu` = the resource's URL from PUBLIC_URL (query and
 *   fragment ignored, scheme and host compared case-insensitively, default port dropped);
 * - is fresh: `iat` within DPOP_IAT_WINDOW_S of the service clock, either way, and an `exp` or `nbf` it
 *   carries holds;
 * - carries `ath` = base64url(SHA-256(access token));
 * - is used once: its `jti` (with the key) is recorded in the database shared by every process, and a
 *   second use is refused (a replay), until the window has passed.
 */
import crypto from 'node:crypto';
import { calculateJwkThumbprint, decodeProtectedHeader, EmbeddedJWK, jwtVerify, type JWTPayload } from 'jose';
import type { Database } from '../../db/database.ts';
import { recordDpopProof } from '../../db/queries/dpop.ts';
import { sha256Hex } from '../../server/ids.ts';

/** Proof signing algorithms accepted, the authorization server's `dpop_signing_alg_values_supported` too. */
export const DPOP_ALGS = ['ES256', 'Ed25519', 'EdDSA'];
/** How far a proof's `iat` may be from the service clock (seconds, either way). */
export const DPOP_IAT_WINDOW_S = 300;
/** A proof longer than this is refused unread (an ES256 proof with its key is about 500 characters). */
export const DPOP_MAX_PROOF_LENGTH = 4096;

/** Why a proof is refused (the message of a `401 invalid_dpop_proof`). */
export class DpopProofError extends Error {}

export interface DpopCheck {
  /** The `DPoP` header's value. */
  proof: string;
  /** The request's method (upper case). */
  method: string;
  /** The URL the proof must name (the resource from PUBLIC_URL). */
  htu: string;
  /** The access token sent beside it. */
  accessToken: string;
  /** The token's key thumbprint (`cnf.jkt`). */
  jkt: string;
  /** Unix ms, the service clock. */
  now: number;
}

/** `htu` compared as RFC 9449 §4.3 says: query and fragment dropped, URL-normalised; null when it is no URL. */
function normalisedHtu(value: unknown): string | null {
  if (typeof value !== 'string') return null;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return null;
  }
  url.search = '';
  url.hash = '';
  return url.href;
}

/** Checks a proof against the request and the token, then records its `jti`; throws DpopProofError when it does not hold. */
export async function verifyDpopProof(db: Database, check: DpopCheck): Promise<void> {
  const { proof, now } = check;
  if (proof.length > DPOP_MAX_PROOF_LENGTH) throw new DpopProofError(`The DPoP proof is longer than ${DPOP_MAX_PROOF_LENGTH} characters.`);
  let header: ReturnType<typeof decodeProtectedHeader>;
  try {
    header = decodeProtectedHeader(proof);
  } catch {
    throw new DpopProofError('The DPoP proof is not a JWS in compact form.');
  }
  if (header.typ !== 'dpop+jwt') throw new DpopProofError('The DPoP proof must have typ "dpop+jwt" in its header.');
  if (typeof header.alg !== 'string' || !DPOP_ALGS.includes(header.alg)) throw new DpopProofError(`The DPoP proof's alg must be one of ${DPOP_ALGS.join(', ')}.`);
  const jwk = header.jwk as Record<string, unknown> | undefined;
  if (!jwk || typeof jwk !== 'object') throw new DpopProofError('The DPoP proof must carry the public key in its jwk header.');
  if ('d' in jwk || 'k' in jwk || 'p' in jwk) throw new DpopProofError('The DPoP proof\'s jwk must be a public key, never a private or symmetric one.');
  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(proof, EmbeddedJWK, { typ: 'dpop+jwt', algorithms: DPOP_ALGS, currentDate: new Date(now) }));
  } catch {
    throw new DpopProofError('The DPoP proof\'s signature does not verify with its jwk, or its exp or nbf does not hold.');
  }
  if (typeof payload.jti !== 'string' || payload.jti.length === 0 || payload.jti.length > 256) throw new DpopProofError('The DPoP proof must have a jti (1 to 256 characters).');
  if (typeof payload.iat !== 'number' || !Number.isFinite(payload.iat)) throw new DpopProofError('The DPoP proof must have a numeric iat.');
  if (Math.abs(now / 1000 - payload.iat) > DPOP_IAT_WINDOW_S) throw new DpopProofError(`The DPoP proof's iat is more than ${DPOP_IAT_WINDOW_S} seconds from now: make a new proof for each request.`);
  if (payload.htm !== check.method) throw new DpopProofError(`The DPoP proof's htm must be the request's method, ${check.method}.`);
  if (normalisedHtu(payload.htu) !== normalisedHtu(check.htu)) throw new DpopProofError(`The DPoP proof's htu must be ${check.htu}.`);
  if (payload.ath !== crypto.createHash('sha256').update(check.accessToken).digest('base64url')) throw new DpopProofError('The DPoP proof\'s ath must be base64url(SHA-256(access token)) of the token sent.');
  let thumbprint: string;
  try {
    thumbprint = await calculateJwkThumbprint(jwk as Parameters<typeof calculateJwkThumbprint>[0], 'sha256');
  } catch {
    throw new DpopProofError('The DPoP proof\'s jwk has no thumbprint.');
  }
  if (thumbprint !== check.jkt) throw new DpopProofError('The DPoP proof is signed by another key than the one the access token is bound to.');
  // Last, so a proof refused for anything else never uses up its jti.
  const expiresAt = Math.max(payload.iat * 1000, now) + DPOP_IAT_WINDOW_S * 1000;
  if (!(await recordDpopProof(db.sql, { idHash: sha256Hex(`${thumbprint}\n${payload.jti}`), expiresAt }))) {
    throw new DpopProofError('The DPoP proof was used before (its jti is spent): make a new proof for each request.');
  }
}
