/**
 * One-time sign-in links and member sessions, for pages the service serves to people (the analytics
 * dashboard now; webhook approval and the signer's page later). A member asks for a link on the sign-in
 * page (handlers/signin/byEmail.ts: it is mailed), or an operator mints one (`npm run admin -- signin-link`,
 * for operators and the first start); opening it once starts a 12-hour session held in the
 * `wso_session` cookie, which the /v1 platform accepts as a member credential (credentials.ts).
 */
import express, { type Request, type Response } from 'express';
import type { Logger } from 'pino';
import type { Database } from '../db/database.ts';
import { deleteEndedSessions, findMemberForSignin, insertSession, revokeSessions } from '../db/queries/sessions.ts';
import { type AuditActor, OPERATOR, recordAudit } from './audit.ts';
import type { Clock } from './clock.ts';
import { newSessionSecret, sessionIdOf } from './credentials.ts';
import { ServiceError } from './errors.ts';
import { sha256Hex } from './ids.ts';
import { deleteExpiredLinks, SIGNIN_PURPOSE, storeOneTimeLink, useOneTimeLink } from './links.ts';
import { HOW_TO_SIGN_IN, isLocalPath, type PageKit, SESSION_COOKIE, sameOrigin, sessionTokenOf, signinLink } from './pages.ts';

export { SESSION_COOKIE };

export const LINK_TTL_MS = 15 * 60_000;
export const SESSION_TTL_MS = 12 * 3_600_000;

/** A readable refusal of a sign-in request (unknown member, bad `next`); the CLI prints it on one line. */
export class SigninError extends Error {}

export { isLocalPath };

export interface SigninLinkRequest {
  workspaceId: string;
  memberId: string;
  /** Where the browser goes once signed in (default `/`: the member's home page). */
  next?: string;
  /** The service's public origin, e.g. `https://ops.example.com` (the link is `BASE/signin/<token>`). */
  baseUrl: string;
}

export interface SigninLink {
  url: string;
  workspace_id: string;
  member_id: string;
  next: string;
  expires_at: number;
}

/** Ended links and sessions are kept this long (for the 410 page and the log's session ids), then deleted. */
export const ENDED_RETENTION_MS = 24 * 3_600_000;

/**
 * Mints a one-time link (256-bit random token, only its SHA-256 stored) valid for 15 minutes. Minting
 * is rare, so it also deletes links and sessions that ended more than a day ago.
 */
export async function createSigninLink(db: Database, clock: Clock, request: SigninLinkRequest): Promise<SigninLink> {
  const next = request.next ?? '/';
  if (!isLocalPath(next)) throw new SigninError(`--next must be a path on this service starting with a single "/" (got "${next}")`);
  let base: URL;
  try {
    base = new URL(request.baseUrl);
  } catch {
    throw new SigninError(`--base-url must be an absolute http(s) URL (got "${request.baseUrl}")`);
  }
  if (base.protocol !== 'http:' && base.protocol !== 'https:') throw new SigninError(`--base-url must be http or https (got "${request.baseUrl}")`);
  const member = await findMemberForSignin(db.sql, request.memberId);
  if (!member || member.workspace_id !== request.workspaceId) throw new SigninError(`no member ${request.memberId} in workspace ${request.workspaceId}`);
  if (member.disabled_at !== null) throw new SigninError(`member ${request.memberId} is disabled`);
  const now = clock.now();
  const expiresAt = now + LINK_TTL_MS;
  const token = await db.tx(async (sql) => {
    await deleteExpiredLinks(sql, now - ENDED_RETENTION_MS);
    await deleteEndedSessions(sql, now - ENDED_RETENTION_MS);
    return storeOneTimeLink(sql, {
      workspaceId: member.workspace_id, purpose: SIGNIN_PURPOSE, subject: member.id, next, createdAt: now, expiresAt, sessionTtlMs: SESSION_TTL_MS,
    });
  });
  const prefix = base.pathname.replace(/\/+$/, '');
  return { url: `${base.origin}${prefix}/signin/${token}`, workspace_id: member.workspace_id, member_id: member.id, next, expires_at: expiresAt };
}

export type SigninOutcome =
  | { ok: true; sessionToken: string; sessionId: string; next: string; expiresAt: number }
  | { ok: false; status: 404 | 410 };

/**
 * Uses a link: marks it used (one statement, so only one of two concurrent uses wins) and starts a
 * session for its member, in one transaction. Unknown token: 404; used, expired, or its member
 * disabled since: 410.
 */
export async function useSigninLink(db: Database, clock: Clock, token: string): Promise<SigninOutcome> {
  const now = clock.now();
  return db.tx(async (sql): Promise<SigninOutcome> => {
    const link = await useOneTimeLink(sql, 'signin', token, now);
    if (typeof link === 'number') return { ok: false, status: link };
    const member = await findMemberForSignin(sql, link.subject);
    if (!member || member.workspace_id !== link.workspace_id || member.disabled_at !== null) return { ok: false, status: 410 };
    const { sessionId, secret, secretHash } = newSessionSecret();
    const expiresAt = now + SESSION_TTL_MS;
    await insertSession(sql, {
      id: sessionId,
      secret_hash: secretHash,
      workspace_id: member.workspace_id,
      member_id: member.id,
      auth_version: Number(member.auth_version),
      member_role: member.role,
      created_at: now,
      expires_at: expiresAt,
    });
    return { ok: true, sessionToken: secret, sessionId, next: link.next, expiresAt };
  });
}

/**
 * Ends one session, or all of a member's sessions; they are refused from their next request on. Who
 * ends them is recorded in the audit log (`session.revoked`; the admin CLI by default); signing out,
 * a member ending their own session, passes `null` and records nothing.
 */
export async function revokeSession(
  db: Database,
  clock: Clock,
  by: { id: string; secretHash?: string } | { memberId: string },
  actor: AuditActor | null = OPERATOR,
): Promise<{ revoked: number }> {
  const now = clock.now();
  if (!actor) return { revoked: await revokeSessions(db.sql, by, now) };
  return db.tx(async (sql) => {
    // Whose sessions these are, read before they end (a session of an unknown id records nothing).
    const owner = await sql.one<{ workspace_id: string; member_id: string; name: string }>(
      'memberId' in by
        ? `SELECT workspace_id, id AS member_id, name FROM members WHERE id = ?`
        : `SELECT s.workspace_id, s.member_id, m.name FROM member_sessions s JOIN members m ON m.id = s.member_id WHERE s.id = ?`,
      ['memberId' in by ? by.memberId : by.id],
    );
    const revoked = await revokeSessions(sql, by, now);
    if (owner && revoked > 0) {
      await recordAudit(sql, {
        workspaceId: owner.workspace_id,
        actor,
        action: 'session.revoked',
        subject: 'memberId' in by ? { type: 'member', id: owner.member_id, label: owner.name } : { type: 'session', id: by.id, label: owner.name },
        details: 'memberId' in by ? { sessions: revoked } : { member_id: owner.member_id, member_name: owner.name },
        at: now,
      });
    }
    return { revoked };
  });
}

/**
 * Cookie-authenticated requests with an `Origin` header must come from the service's own origin
 * (compared by host, so a TLS-terminating proxy in front does not matter); throws 403 otherwise.
 */
export function checkOrigin(req: Request): void {
  if (!sameOrigin(req)) throw new ServiceError(403, 'forbidden', 'A sign-in session may only be used from pages of this service (Origin differs).');
}

/** `GET /signin/<token>` (opens a session and redirects) and `POST /signout` (a CSRF-protected form, then 303 to `GET /signout`). */
export function signinRoutes(options: { db: Database; clock: Clock; logger: Logger; pages: PageKit }): express.Router {
  const { db, clock, logger, pages } = options;
  const router = pages.router();
  const cookie = (req: Request) => ({ path: '/', httpOnly: true, sameSite: 'lax' as const, secure: req.secure });
  router.get('/signin/:token', async (req: Request<{ token: string }>, res: Response) => {
    // Link checkers and previews send HEAD: it must not use up the link.
    if (req.method === 'HEAD') {
      res.status(200).end();
      return;
    }
    // The token is in this URL: no page reached from here may send it on as a referrer.
    res.setHeader('Referrer-Policy', 'no-referrer');
    let outcome: SigninOutcome;
    try {
      outcome = await useSigninLink(db, clock, req.params.token);
    } catch (err) {
      // The token is in the URL; log neither.
      logger.error({ err }, 'sign-in failed');
      pages.notice(res, 500, 'Sign-in failed', ['Something went wrong on our side. Try the link again in a moment.']);
      return;
    }
    if (!outcome.ok) {
      pages.notice(res, outcome.status, outcome.status === 410 ? 'This sign-in link can no longer be used' : 'Unknown sign-in link', [
        outcome.status === 410
          ? 'Sign-in links work once and for 15 minutes. This one was already used or has expired.'
          : 'This sign-in link does not exist. Check that it was copied completely.',
        'Ask for a new link on the sign-in page: enter your e-mail address and we mail you one.',
      ], undefined, signinLink());
      return;
    }
    res.cookie(SESSION_COOKIE, outcome.sessionToken, { ...cookie(req), maxAge: SESSION_TTL_MS });
    // Checked again: the link row holds what the CLI validated, but a redirect must never leave the origin.
    res.redirect(303, isLocalPath(outcome.next) ? outcome.next : '/');
  });
  router.post('/signout', pages.protectForm, async (req: Request, res: Response) => {
    const token = sessionTokenOf(req);
    const sessionId = token ? sessionIdOf(token) : null;
    if (token && sessionId) {
      // Only the holder of the session secret may end it (its hash must match); no rate limit
      // stands in the way, and a database error is an error, not a silent "signed out".
      await revokeSession(db, clock, { id: sessionId, secretHash: sha256Hex(token) }, null);
    }
    res.clearCookie(SESSION_COOKIE, cookie(req));
    // Post/redirect/get: a reload of the page that says so sends nothing again.
    res.redirect(303, '/signout');
  });
  router.get('/signout', (req: Request, res: Response) => {
    if (sessionTokenOf(req) !== undefined) {
      pages.notice(res, 200, 'Sign out?', ['You are still signed in on this browser.'], pages.csrfToken(req, res));
      return;
    }
    pages.notice(res, 200, 'Signed out', ['Your sign-in session has ended. ' + HOW_TO_SIGN_IN], undefined, signinLink());
  });
  return router;
}
