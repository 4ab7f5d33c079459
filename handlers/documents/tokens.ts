/**
 * The signed tokens in this module's secret-bearing URLs (`/files/parts/<token>` to PUT one part,
 * `/files/<token>` to download a file): the kernel's signed-token format (server/signedToken.ts)
 * under the deployment's `documents.links` secret, for the purpose `part` or `download`, always
 * expiring. Stateless: nothing is stored, so there is nothing to leak from the database. They are
 * never logged (the module's `secretPaths`).
 */
import { type Claims, type SecretSource, signedTokens, TokenRefused } from '../../server/signedToken.ts';

export type TokenPurpose = 'part' | 'download';

/** The longest token a file URL carries (a download token with a 255-character name is about 1,600). */
export const FILE_TOKEN_MAX_LENGTH = 2000;

const links = signedTokens('documents.links', { maxLength: FILE_TOKEN_MAX_LENGTH, expires: true });

/** A token carrying `claims` for `purpose` that works until `expiresAt` (Unix ms; it reads back as `e`). */
export function signToken(source: SecretSource, purpose: TokenPurpose, claims: Claims, expiresAt: number): Promise<string> {
  return links.sign(source, purpose, claims, expiresAt);
}

export type TokenCheck<T> = { ok: true; claims: T } | { ok: false; why: 'malformed' | 'expired' };

/** The token's claims when this deployment signed it for `purpose` and it has not expired. */
export async function readToken<T extends { e: number }>(source: SecretSource, purpose: TokenPurpose, token: string, now: number): Promise<TokenCheck<T>> {
  try {
    return { ok: true, claims: (await links.verify(source, purpose, token, now)) as unknown as T };
  } catch (err) {
    if (err instanceof TokenRefused) return { ok: false, why: err.reason === 'expired' ? 'expired' : 'malformed' };
    throw err;
  }
}
