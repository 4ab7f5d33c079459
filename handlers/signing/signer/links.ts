/**
 * Signers' links: `${PUBLIC_URL}/sign/<token>` (the token format of server/links.ts), one or more per recipient (every invitation and
 * reminder mails a fresh one; older ones keep working). The token is 256 random bits in base64url
 * (43 characters); only its SHA-256 is stored (signing_links), so the database never holds a working
 * link. A link is live while its request is pending and before its deadline, and its recipient has not
 * signed or declined; otherwise it has ended, with the reason the signer's page shows.
 */
import type { Sql } from '../../../db/database.ts';
import { isLinkToken, linkTokenHash, newLinkToken } from '../../../server/links.ts';
import { type DbSigningRecipientRow, type DbSigningRequestRow, findLink, findRecipient, findRequestById, insertLink, listRecipients } from '../queries.ts';

/** The path prefix of signers' links (the module's `secretPaths`: the request log cuts what follows). */
export const SIGN_PREFIX = '/sign/';

/** SHA-256 (hex) of a link token: what signing_links stores. */
export const tokenHash = linkTokenHash;

/** The URL of a link token on this service. */
export const signerUrl = (publicUrl: string, token: string) => `${publicUrl.replace(/\/+$/, '')}${SIGN_PREFIX}${token}`;

/**
 * Makes a new link for a recipient in `sql` (the caller's transaction) and returns its token: the
 * URL is `signerUrl(PUBLIC_URL, token)`. Only the token's SHA-256 is stored; never log the token.
 */
export async function mintSignerLink(sql: Sql, link: { recipientId: string; requestId: string }, now: number): Promise<string> {
  const token = newLinkToken();
  await insertLink(sql, { token_hash: tokenHash(token), recipient_id: link.recipientId, request_id: link.requestId, created_at: now });
  return token;
}

/** Why a link no longer works (the signer's page says it, answering 410). */
export type EndedReason = 'completed' | 'cancelled' | 'declined' | 'expired' | 'signed';

export type ResolvedLink =
  /** No such link (a malformed or made-up token): 404. */
  | { readonly state: 'unknown' }
  /** Works: the recipient may open, sign or decline. */
  | { readonly state: 'live'; readonly request: DbSigningRequestRow; readonly recipient: DbSigningRecipientRow; readonly linkCreatedAt: number }
  /** Ended, with why: 410. */
  | { readonly state: 'ended'; readonly reason: EndedReason; readonly request: DbSigningRequestRow; readonly recipient: DbSigningRecipientRow; readonly linkCreatedAt: number };

/**
 * Why a recipient of a request can no longer act, or null while they can: the request is pending and
 * before its deadline, and the recipient is `pending` or `opened`. A request that some recipient
 * declined ends as `declined` for everyone; one whose deadline passed is `expired` even before the
 * expiry job moves it.
 */
export function endedReason(request: DbSigningRequestRow, recipient: DbSigningRecipientRow, now: number, anyDeclined: boolean): EndedReason | null {
  if (request.status === 'completed') return 'completed';
  if (request.status === 'expired') return 'expired';
  if (request.status === 'cancelled') return anyDeclined ? 'declined' : 'cancelled';
  if (now >= Number(request.deadline_at)) return 'expired';
  if (recipient.status === 'signed') return 'signed';
  if (recipient.status === 'declined') return 'declined';
  return null;
}

/** Resolves a link token (from the URL) to its recipient and request, live or ended (reads only; records nothing). */
export async function resolveSignerLink(sql: Sql, token: string, now: number): Promise<ResolvedLink> {
  if (!isLinkToken(token)) return { state: 'unknown' };
  const link = await findLink(sql, tokenHash(token));
  if (!link) return { state: 'unknown' };
  const [request, recipient] = await Promise.all([findRequestById(sql, link.request_id), findRecipient(sql, link.recipient_id)]);
  if (!request || !recipient) return { state: 'unknown' };
  const anyDeclined = request.status === 'cancelled' && (await listRecipients(sql, request.id)).some((r) => r.status === 'declined');
  const reason = endedReason(request, recipient, now, anyDeclined);
  return reason ? { state: 'ended', reason, request, recipient, linkCreatedAt: link.created_at } : { state: 'live', request, recipient, linkCreatedAt: link.created_at };
}
