/**
 * The signed tokens in this module's secret-bearing URLs (`/files/parts/<token>` to PUT one part,
 * `/files/<token>` to download a file): the claims as base64url JSON and an HMAC-SHA256 of them under
 * the deployment's `documents.links` secret (service_secrets, the same in every process), bound to the
 * token's purpose. Stateless: nothing is stored, so there is nothing to leak from the database; a token
 * dies at its `e` (expiry, Unix ms). They are never logged (the module's `secretPaths`).
 */
import crypto from 'node:crypto';
import type { Sql } from '../../db/database.ts';
import { serviceSecret } from '../../db/queries/secrets.ts';

const SECRET_NAME = 'documents.links';
const MAC_BYTES = 20;

export type TokenPurpose = 'part' | 'download';

async function keyOf(sql: Sql, now: number): Promise<Buffer> {
  return Buffer.from(await serviceSecret(sql, SECRET_NAME, crypto.randomBytes(32).toString('base64url'), now), 'base64url');
}

const mac = (key: Buffer, purpose: TokenPurpose, payload: string) => crypto.createHmac('sha256', key).update(`${purpose}\n${payload}`).digest().subarray(0, MAC_BYTES);

/** A token carrying `claims` (which must hold `e`, the expiry in Unix ms). */
export async function signToken(sql: Sql, purpose: TokenPurpose, claims: { e: number } & Record<string, string | number | null>, now: number): Promise<string> {
  const payload = Buffer.from(JSON.stringify(claims)).toString('base64url');
  return `${payload}.${mac(await keyOf(sql, now), purpose, payload).toString('base64url')}`;
}

export type TokenCheck<T> = { ok: true; claims: T } | { ok: false; why: 'malformed' | 'expired' };

/** The token's claims when this deployment signed it for `purpose` and it has not expired. */
export async function readToken<T extends { e: number }>(sql: Sql, purpose: TokenPurpose, token: string, now: number): Promise<TokenCheck<T>> {
  if (token.length > 2000) return { ok: false, why: 'malformed' };
  const parts = token.split('.');
  const [payload, tag] = parts;
  if (parts.length !== 2 || !payload || !tag || !/^[A-Za-z0-9_-]+$/.test(payload) || !/^[A-Za-z0-9_-]+$/.test(tag)) return { ok: false, why: 'malformed' };
  const given = Buffer.from(tag, 'base64url');
  const expected = mac(await keyOf(sql, now), purpose, payload);
  if (given.length !== expected.length || given.toString('base64url') !== tag || !crypto.timingSafeEqual(given, expected)) return { ok: false, why: 'malformed' };
  let claims: T;
  try {
    claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as T;
  } catch {
    return { ok: false, why: 'malformed' };
  }
  if (typeof claims !== 'object' || claims === null || typeof claims.e !== 'number') return { ok: false, why: 'malformed' };
  if (claims.e <= now) return { ok: false, why: 'expired' };
  return { ok: true, claims };
}
