/**
 * Signed tokens: small claims a client carries and hands back (paging cursors, the file URLs of
 * documents), which only this deployment can make and nobody can change. Stateless: nothing is
 * stored per token.
 *
 * Format, one for every use: `<payload>.<tag>`, where `payload` is the base64url (no padding) of
 * a JSON object of claims and `tag` the base64url of the first 20 bytes (160 bits) of
 * HMAC-SHA256(key, `<purpose>\n<payload>`) — 27 characters. `key` is the deployment secret the
 * signer is named after (service_secrets: the same in every process sharing the database, made on
 * first use). `purpose` (the audience: a cursor's operation id, a file URL's `part` or `download`)
 * is bound into the MAC but not carried, so a token made for one purpose never reads as another;
 * different uses also have different secrets, so a cursor can never be replayed as a file URL or
 * the other way round. Where the signer `expires`, the claims carry `e` (expiry, Unix ms) and a
 * token is refused from that instant on. A token longer than the signer's `maxLength` is refused
 * before any work; tags are compared in constant time (`crypto.timingSafeEqual`) and must be the
 * canonical base64url of the 20 bytes (a last character's spare bits cannot make a second
 * spelling of a tag). A refusal is a `TokenRefused` with a reason (`invalid` or `expired`) that
 * the caller maps to its documented error; what was wrong is never said beyond that.
 *
 * Why node:crypto and not `jose` (a dependency, for OAuth and DPoP): these tokens are opaque, read
 * only by the service that made them, so a JWS's interoperability buys nothing, while a compact
 * HS256 JWS carries a header and a full 32-byte signature (a record listing's cursor: 204 characters
 * against 124) and `jose` signs through WebCrypto: a cursor made and read cost 133 µs with it against
 * 16 µs here, as with the two copies this replaced (node 20; paging's hot path). The format is the
 * few lines below.
 */
import crypto from 'node:crypto';
import type { Database, Sql } from '../db/database.ts';
import { serviceSecret } from '../db/queries/secrets.ts';

const TAG_BYTES = 20;
const TAG_CHARS = Math.ceil((TAG_BYTES * 4) / 3);
const BASE64URL = /^[A-Za-z0-9_-]+$/;

/** Why a token was refused: `invalid` (malformed, changed, made for another purpose or deployment) or `expired`. */
export type TokenRefusal = 'invalid' | 'expired';

/** A token this signer will not read; callers map it to their documented error. */
export class TokenRefused extends Error {
  constructor(readonly reason: TokenRefusal) {
    super(reason === 'expired' ? 'the token has expired' : 'the token is not one this service signed for this purpose');
    this.name = 'TokenRefused';
  }
}

/** Claims are a JSON object of plain values. */
export type Claims = Record<string, string | number | boolean | null>;

/**
 * Where the signer's secret is read: the service's `Database` (read once, then kept for the
 * process), or a transaction's `Sql` (read through it each time, since a secret first made in a
 * transaction that rolls back must not be kept).
 */
export type SecretSource = Database | Sql;

export interface SignedTokens {
  /** The secret's name in service_secrets. */
  readonly secret: string;
  /** The longest token this signer makes or reads, in characters. */
  readonly maxLength: number;
  /** A token carrying `claims` for `purpose`; an expiring signer needs `expiresAt` (Unix ms) and carries it as `e`. */
  sign(source: SecretSource, purpose: string, claims: Claims, expiresAt?: number): Promise<string>;
  /** The claims of a token this signer made for `purpose` (an expiring signer: `now` before its `e`), else throws `TokenRefused`. */
  verify(source: SecretSource, purpose: string, token: string, now?: number): Promise<Claims>;
}

/**
 * A signer under the deployment secret `secret`. `maxLength` is documented where the token travels
 * (e.g. PageCursor's `maxLength`); `expires` makes every token carry an expiry.
 */
export function signedTokens(secret: string, options: { maxLength: number; expires: boolean }): SignedTokens {
  const { maxLength, expires } = options;
  const cache = new WeakMap<Database, Promise<Buffer>>();
  const read = (sql: Sql) => serviceSecret(sql, secret, crypto.randomBytes(32).toString('base64url'), Date.now()).then((s) => Buffer.from(s, 'base64url'));
  const keyOf = (source: SecretSource): Promise<Buffer> => {
    if (!('tx' in source)) return read(source);
    let key = cache.get(source);
    if (!key) {
      key = read(source.sql);
      cache.set(source, key);
      key.catch(() => cache.delete(source));
    }
    return key;
  };
  const tagOf = (key: Buffer, purpose: string, payload: string): Buffer => {
    if (purpose.length === 0 || purpose.includes('\n')) throw new Error(`signedTokens(${secret}): a purpose is one non-empty line`);
    return crypto.createHmac('sha256', key).update(`${purpose}\n${payload}`).digest().subarray(0, TAG_BYTES);
  };

  return {
    secret,
    maxLength,
    async sign(source, purpose, claims, expiresAt) {
      if (expires !== (expiresAt !== undefined)) throw new Error(`signedTokens(${secret}): expiresAt is ${expires ? 'required' : 'not taken'}`);
      if (expires && ('e' in claims || !Number.isSafeInteger(expiresAt))) throw new Error(`signedTokens(${secret}): the expiry is expiresAt, in Unix milliseconds`);
      const body = expires ? { ...claims, e: expiresAt! } : claims;
      const payload = Buffer.from(JSON.stringify(body)).toString('base64url');
      const token = `${payload}.${tagOf(await keyOf(source), purpose, payload).toString('base64url')}`;
      if (token.length > maxLength) throw new Error(`signedTokens(${secret}): a ${purpose} token of ${token.length} characters is over its ${maxLength}`);
      return token;
    },
    async verify(source, purpose, token, now) {
      if (expires && now === undefined) throw new Error(`signedTokens(${secret}): verify needs now`);
      if (token.length > maxLength) throw new TokenRefused('invalid');
      const dot = token.indexOf('.');
      const payload = token.slice(0, dot);
      const tag = token.slice(dot + 1);
      if (dot < 1 || tag.length !== TAG_CHARS || !BASE64URL.test(payload) || !BASE64URL.test(tag)) throw new TokenRefused('invalid');
      const given = Buffer.from(tag, 'base64url');
      const expected = tagOf(await keyOf(source), purpose, payload);
      if (given.length !== TAG_BYTES || given.toString('base64url') !== tag || !crypto.timingSafeEqual(given, expected)) throw new TokenRefused('invalid');
      let claims: unknown;
      try {
        claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
      } catch {
        throw new TokenRefused('invalid');
      }
      // Only this service can have made it, so a wrong shape here is a bug or a leaked secret: refuse it all the same.
      if (typeof claims !== 'object' || claims === null || Array.isArray(claims)) throw new TokenRefused('invalid');
      if (expires) {
        const e = (claims as Claims).e;
        if (typeof e !== 'number') throw new TokenRefused('invalid');
        if (e <= now!) throw new TokenRefused('expired');
      }
      return claims as Claims;
    },
  };
}
