/**
 * Scoped page sessions: pages for people who are not members (the signer of a document). A module
 * mints a one-time link for one purpose (`<namespace>.<what>`) and subject (an id of its own, e.g. a
 * signer); the person opens it, confirms with one click (a POST: mail scanners and link previews that
 * GET the link change nothing), and gets a session cookie (`wso_scoped`) for that purpose and subject
 * alone, which expires. It is never a member session: member pages and the API do not accept it.
 * Only SHA-256 hashes of link tokens and session secrets are stored; the link's URL is below
 * `/signin/`, so the request log never shows its token.
 */
import crypto from 'node:crypto';
import type { Database } from '../../db/database.ts';
import { deleteEndedScopedSessions, findScopedSession, insertScopedSession } from '../../db/queries/pages.ts';
import type { Clock } from '../clock.ts';
import { randomIdPart, sha256Hex } from '../ids.ts';
import { type DbOneTimeLinkRow, deleteExpiredLinks, inspectOneTimeLink, SIGNIN_PURPOSE, storeOneTimeLink, useOneTimeLink } from '../links.ts';
import { isLocalPath } from './paths.ts';

export const SCOPED_COOKIE = 'wso_scoped';
/** The link's path below the origin: `/signin/scoped/<token>`. */
export const SCOPED_LINK_PREFIX = '/signin/scoped/';
const SESSION_TOKEN = /^wsp_([0-9a-z]{24})_[A-Za-z0-9_-]{43}$/;
const PURPOSE = /^[a-z][a-z0-9]*\.[a-z][a-zA-Z0-9.-]*$/;
/** A link may wait at most this long (signers are often sent links days ahead). */
export const MAX_LINK_TTL_MS = 30 * 24 * 3_600_000;
/** A scoped session lasts at most this long. */
export const MAX_SESSION_TTL_MS = 24 * 3_600_000;
const ENDED_RETENTION_MS = 24 * 3_600_000;

/** A person's page session for one purpose and subject. */
export interface ScopedSession {
  readonly id: string;
  readonly workspaceId: string;
  readonly purpose: string;
  readonly subject: string;
  readonly expiresAt: number;
}

export interface ScopedLinkRequest {
  workspaceId: string;
  /** `<namespace>.<what>`, e.g. `signing.sign`. */
  purpose: string;
  subject: string;
  /** The page the session opens (a path of this service). */
  next: string;
  /** The service's public origin (PUBLIC_URL). */
  baseUrl: string;
  /** How long the link may wait to be opened (at most 30 days). */
  linkTtlMs: number;
  /** How long the session lasts once opened (at most 24 h). */
  sessionTtlMs: number;
}

/** Mints a one-time link (256-bit random token, only its hash stored). Drops links and sessions ended more than a day ago. */
export async function createScopedLink(db: Database, clock: Clock, r: ScopedLinkRequest): Promise<{ url: string; expiresAt: number }> {
  if (!PURPOSE.test(r.purpose) || r.purpose === SIGNIN_PURPOSE) throw new Error(`scoped link: purpose must be <namespace>.<what> (got ${r.purpose})`);
  if (!isLocalPath(r.next)) throw new Error('scoped link: next must be a path of this service');
  if (!(r.linkTtlMs > 0 && r.linkTtlMs <= MAX_LINK_TTL_MS) || !(r.sessionTtlMs > 0 && r.sessionTtlMs <= MAX_SESSION_TTL_MS)) throw new Error('scoped link: TTLs out of bounds');
  if (r.subject === '' || r.subject.length > 200) throw new Error('scoped link: subject must be 1 to 200 characters');
  const now = clock.now();
  const token = await db.tx(async (sql) => {
    await deleteExpiredLinks(sql, now - ENDED_RETENTION_MS);
    await deleteEndedScopedSessions(sql, now - ENDED_RETENTION_MS);
    return storeOneTimeLink(sql, {
      workspaceId: r.workspaceId, purpose: r.purpose, subject: r.subject, next: r.next, createdAt: now, expiresAt: now + r.linkTtlMs, sessionTtlMs: r.sessionTtlMs,
    });
  });
  const base = new URL(r.baseUrl);
  return { url: `${base.origin}${base.pathname.replace(/\/+$/, '')}${SCOPED_LINK_PREFIX}${token}`, expiresAt: now + r.linkTtlMs };
}

/** What a link is, without using it: 404 unknown, 410 used or expired. */
export function inspectScopedLink(db: Database, clock: Clock, token: string): Promise<DbOneTimeLinkRow | 404 | 410> {
  return inspectOneTimeLink(db.sql, 'scoped', token, clock.now());
}

/** Uses a link and starts its session, in one transaction (of two concurrent uses, one wins). */
export async function openScopedLink(db: Database, clock: Clock, token: string): Promise<{ ok: true; token: string; next: string; ttlMs: number } | { ok: false; status: 404 | 410 }> {
  const now = clock.now();
  return db.tx(async (sql) => {
    const link = await useOneTimeLink(sql, 'scoped', token, now);
    if (typeof link === 'number') return { ok: false as const, status: link };
    const idPart = randomIdPart();
    const secret = `wsp_${idPart}_${crypto.randomBytes(32).toString('base64url')}`;
    const ttlMs = Number(link.session_ttl_ms);
    await insertScopedSession(sql, {
      id: `sp_${idPart}`,
      secret_hash: sha256Hex(secret),
      workspace_id: link.workspace_id,
      purpose: link.purpose,
      subject: link.subject,
      created_at: now,
      expires_at: now + ttlMs,
    });
    return { ok: true as const, token: secret, next: link.next, ttlMs };
  });
}

/** The live scoped session of a cookie value, whatever its purpose (the caller checks it), or null. */
export async function authenticateScoped(db: Database, clock: Clock, token: string | undefined): Promise<ScopedSession | null> {
  const m = token ? SESSION_TOKEN.exec(token) : null;
  if (!m) return null;
  const row = await findScopedSession(db.sql, `sp_${m[1]}`);
  if (!row || row.revoked_at !== null || Number(row.expires_at) <= clock.now()) return null;
  const presented = crypto.createHash('sha256').update(token!).digest();
  if (!crypto.timingSafeEqual(Buffer.from(row.secret_hash, 'hex'), presented)) return null;
  return { id: row.id, workspaceId: row.workspace_id, purpose: row.purpose, subject: row.subject, expiresAt: Number(row.expires_at) };
}
