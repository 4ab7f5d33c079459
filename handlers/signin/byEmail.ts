/**
 * Sign-in by e-mail (`GET /signin`, `POST /signin`): a member enters their address and is mailed a
 * one-time sign-in link (createSigninLink: 256-bit token, only its hash stored, 15 minutes, single use).
 *
 * - No account enumeration: whatever the address, the answer is the same page, and the same work is
 *   done before answering (the form's checks and the two rate-limit steps). Looking the address up,
 *   minting links and sending happen after the answer, one request at a time per process.
 * - One address may belong to members of several workspaces: one mail lists one link per workspace
 *   (each link signs in to its workspace). Disabled members get nothing.
 * - Rate limits, in the platform's `rate_limits` table (shared by every process): 20 requests per hour
 *   per client address (`req.ip`, so TRUST_PROXY decides) and 5 per hour per e-mail address (GCRA:
 *   a full budget at once, then one more every 3 and 12 minutes). A limited request gets the same page
 *   and sends nothing.
 * - CSRF for a signed-out visitor (server/pages/signedOutForms.ts): a random `wso_form` cookie (httpOnly, SameSite=Strict) and a form
 *   token that is its HMAC under a secret every process shares (service_secrets): a post without both
 *   is refused with 403; so is a post whose `Origin` names another host.
 * - `next` is kept from the form when it is a local path (else `/`).
 * - Logs never show the address (a short hash at most) nor the token (links are under /signin/, cut
 *   from the request log).
 */
import express, { type Request, type Response } from 'express';
import type { Logger } from 'pino';
import type { Database } from '../../db/database.ts';
import { deleteIdleSigninFormBuckets, findActiveMembersByEmail, takeSigninFormToken } from '../../db/queries/signinByEmail.ts';
import type { Clock } from '../../server/clock.ts';
import { sha256Hex } from '../../server/ids.ts';
import { isMailAddress, type Mailer, mailTemplates } from '../../server/mailer.ts';
import { isLocalPath, type PageKit } from '../../server/pages.ts';
import { signedOutForms } from '../../server/pages/signedOutForms.ts';
import { createSigninLink, LINK_TTL_MS } from '../../server/signin.ts';

const HOUR_US = 3_600_000_000;
/** Requests per hour: per client address, per e-mail address. */
export const SIGNIN_LIMITS = { client: 20, address: 5 } as const;

const mails = mailTemplates(new URL('./mails', import.meta.url));

function step(nowMs: number, perHour: number) {
  const intervalUs = HOUR_US / perHour;
  return { nowUs: nowMs * 1000, intervalUs, toleranceUs: intervalUs * (perHour - 1) };
}

const hash = sha256Hex;

export interface EmailSigninOptions {
  db: Database;
  clock: Clock;
  logger: Logger;
  pages: PageKit;
  mailer: Mailer;
  /** The service's public origin (links are `BASE/signin/<token>`). */
  baseUrl: string;
}

export function emailSigninRoutes(options: EmailSigninOptions): express.Router {
  const { db, clock, logger, pages, mailer, baseUrl } = options;
  const router = pages.router();
  const views = pages.views(new URL('./pages', import.meta.url));
  const forms = signedOutForms({ db, clock });
  const nextOf = (value: unknown) => (typeof value === 'string' && isLocalPath(value) ? value : '/');

  const sendForm = async (req: Request, res: Response, status: number, data: { next: string; email?: string; error?: string }) => {
    const html = views.render('signin', { sent: false, csrf: await forms.token(req, res, 'signin'), next: data.next, email: data.email ?? '', error: data.error ?? '', again: '' });
    pages.send(res, status, { title: 'Sign in', bodyClass: 'notice', html });
  };

  // The lookups and mails of answered requests, one at a time (in this process), in order.
  let queue: Promise<void> = Promise.resolve();
  const later = (work: () => Promise<void>) => {
    queue = queue.then(work).catch((err: unknown) => logger.error({ err }, 'sign-in by e-mail: the link could not be sent'));
  };

  const sendLinks = async (email: string, next: string) => {
    const members = await findActiveMembersByEmail(db.sql, email);
    if (!members.length) return;
    const links = [];
    for (const m of members) {
      const link = await createSigninLink(db, clock, { workspaceId: m.workspace_id, memberId: m.id, next, baseUrl });
      links.push({ workspace: m.workspace_name, url: link.url });
    }
    const subject = links.length === 1 ? `Sign in to ${links[0]!.workspace}` : 'Your sign-in links';
    const { text, html } = mails.render('signin', { subject, email, links, minutes: LINK_TTL_MS / 60_000 });
    const sent = await mailer.send({ to: email, subject, text, html, tag: 'platform.signin', workspaceId: links.length === 1 ? members[0]!.workspace_id : null });
    logger.info({ address: hash(email.toLowerCase()).slice(0, 12), links: links.length, accepted: sent.accepted.length }, 'sign-in link mailed');
  };

  router.get('/signin', async (req: Request, res: Response) => {
    await sendForm(req, res, 200, { next: nextOf(req.query.next) });
  });

  router.post('/signin', async (req: Request, res: Response) => {
    const body = (req.body ?? {}) as Record<string, unknown>;
    if (!(await forms.valid(req, 'signin'))) {
      pages.notice(res, 403, 'Refused', ['This form has expired or did not come from this service. Open the sign-in page again and send it from there.']);
      return;
    }
    const next = nextOf(body.next);
    const email = typeof body.email === 'string' ? body.email.trim() : '';
    if (!isMailAddress(email)) {
      await sendForm(req, res, 400, { next, email: email.slice(0, 254), error: 'Enter an e-mail address, such as name@example.com.' });
      return;
    }
    // The same two steps for every address: the client's budget, then (when it allows) the address's.
    const now = clock.now();
    const client = await takeSigninFormToken(db.sql, `signin-client:${hash(req.ip ?? '')}`, step(now, SIGNIN_LIMITS.client));
    const address = client && (await takeSigninFormToken(db.sql, `signin-address:${hash(email.toLowerCase())}`, step(now, SIGNIN_LIMITS.address)));
    const html = views.render('signin', { sent: true, csrf: '', next, email: '', error: '', again: `/signin?next=${encodeURIComponent(next)}` });
    pages.send(res, 200, { title: 'Check your mail', bodyClass: 'notice', html });
    if (!client || !address) {
      logger.info({ limited: client ? 'address' : 'client' }, 'sign-in by e-mail: rate limited, nothing sent');
      return;
    }
    later(async () => {
      await deleteIdleSigninFormBuckets(db.sql, clock.now() * 1000);
      await sendLinks(email, next);
    });
  });
  return router;
}
