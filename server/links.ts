/**
 * The one store of one-time links (table `one_time_links`) and the one token format of every link the
 * service mails or shows to a person: 256 random bits in base64url (43 characters), only its SHA-256
 * stored, never logged.
 *
 * - A member's sign-in link (server/signin.ts, purpose `signin`, subject the member) and a scoped page
 *   link (server/pages/scoped.ts, purpose `<namespace>.<what>`) live in this store: used once, within
 *   their time, each opening a session (member or scoped) in the same transaction.
 * - Invitations (handlers/members) and signers' links (handlers/signing) use the same token format
 *   (`newLinkToken`, `isLinkToken`, `linkTokenHash`) but keep their rows with the module that owns
 *   them: an invitation is consumed into a new member with the module's own checks, and a signer's link
 *   is not one-time (every reminder mails a fresh one and older ones keep working until the request
 *   ends), so neither is a row of this store.
 */
import crypto from 'node:crypto';
import { consumeOneTimeLink, type DbOneTimeLinkRow, deleteExpiredOneTimeLinks, findOneTimeLink, insertOneTimeLink } from '../db/queries/links.ts';
import type { Sql } from '../db/database.ts';
import { sha256Hex } from './ids.ts';

export type { DbOneTimeLinkRow };

const LINK_TOKEN = /^[A-Za-z0-9_-]{43}$/;

/** A new link token: 256 random bits, base64url. */
export const newLinkToken = (): string => crypto.randomBytes(32).toString('base64url');

/** Whether a string from a URL has a link token's shape (anything else is unknown without a lookup). */
export const isLinkToken = (token: string): boolean => LINK_TOKEN.test(token);

/** What the stores keep of a token: its SHA-256 in hex. */
export const linkTokenHash = (token: string): string => sha256Hex(token);

/** The purpose of a member's sign-in link; every other purpose is a scoped page link's `<namespace>.<what>`. */
export const SIGNIN_PURPOSE = 'signin';

export interface OneTimeLinkRequest {
  workspaceId: string;
  purpose: string;
  subject: string;
  next: string;
  createdAt: number;
  expiresAt: number;
  sessionTtlMs: number;
}

/** Stores a new link in `sql` (the caller's transaction) and returns its token (the only copy). */
export async function storeOneTimeLink(sql: Sql, link: OneTimeLinkRequest): Promise<string> {
  const token = newLinkToken();
  await insertOneTimeLink(sql, {
    token_hash: linkTokenHash(token),
    workspace_id: link.workspaceId,
    purpose: link.purpose,
    subject: link.subject,
    next: link.next,
    session_ttl_ms: link.sessionTtlMs,
    created_at: link.createdAt,
    expires_at: link.expiresAt,
  });
  return token;
}

/** A link of this kind (sign-in or scoped) without using it: 404 unknown, 410 used or expired. */
export async function inspectOneTimeLink(sql: Sql, kind: 'signin' | 'scoped', token: string, now: number): Promise<DbOneTimeLinkRow | 404 | 410> {
  if (!isLinkToken(token)) return 404;
  const link = await findOneTimeLink(sql, linkTokenHash(token));
  if (!link || (link.purpose === SIGNIN_PURPOSE) !== (kind === 'signin')) return 404;
  return link.used_at !== null || Number(link.expires_at) <= now ? 410 : link;
}

/**
 * Uses a link of this kind in `sql` (the caller's transaction, which opens the session): the row, or
 * 404 (unknown, or a link of the other kind) or 410 (used or expired). Of two concurrent uses, one wins.
 */
export async function useOneTimeLink(sql: Sql, kind: 'signin' | 'scoped', token: string, now: number): Promise<DbOneTimeLinkRow | 404 | 410> {
  if (!isLinkToken(token)) return 404;
  const hash = linkTokenHash(token);
  const link = await consumeOneTimeLink(sql, hash, kind, now);
  if (link) return link;
  const found = await findOneTimeLink(sql, hash);
  return found && (found.purpose === SIGNIN_PURPOSE) === (kind === 'signin') ? 410 : 404;
}

/** Deletes links that expired before `before` (minting calls it: links are few). */
export const deleteExpiredLinks = deleteExpiredOneTimeLinks;
