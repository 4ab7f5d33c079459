/**
 * CSRF for forms of people who are not signed in (the sign-in form, an invitation's join form), where
 * the page kit's member-session CSRF has nothing to bind to: a random `wso_form` cookie (HttpOnly,
 * SameSite=Strict, path /signin) and, in the form, an HMAC of `<purpose>\n<cookie>` under the
 * deployment's `signin-form` secret (service_secrets: the same in every process). A post is accepted
 * only from this origin, with the cookie and the token of the same purpose.
 */
import crypto from 'node:crypto';
import type { Request, Response } from 'express';
import type { Database } from '../../db/database.ts';
import { serviceSecret } from '../../db/queries/secrets.ts';
import type { Clock } from '../clock.ts';
import { sameOrigin } from '../pages.ts';

export const FORM_COOKIE = 'wso_form';
const COOKIE_VALUE = /^[A-Za-z0-9_-]{43}$/;

export interface SignedOutForms {
  /** The form's token for `purpose` (e.g. `signin`, `invite\n<hash>`), setting the cookie when the visitor has none. */
  token(req: Request, res: Response, purpose: string): Promise<string>;
  /** Whether a post carries this origin, the cookie and the token of `purpose` (`_csrf`). */
  valid(req: Request, purpose: string): Promise<boolean>;
}

export function signedOutForms(store: { db: Database; clock: Clock }): SignedOutForms {
  let secret: Promise<string> | null = null;
  const formSecret = () =>
    (secret ??= serviceSecret(store.db.sql, 'signin-form', crypto.randomBytes(32).toString('base64url'), store.clock.now()).catch((err: unknown) => {
      secret = null;
      throw err;
    }));
  const hmac = async (purpose: string, cookie: string) => crypto.createHmac('sha256', await formSecret()).update(`${purpose}\n${cookie}`).digest('base64url');
  const cookieOf = (req: Request): string | undefined => {
    const value = (req.cookies as Record<string, unknown> | undefined)?.[FORM_COOKIE];
    return typeof value === 'string' && COOKIE_VALUE.test(value) ? value : undefined;
  };
  return {
    async token(req, res, purpose) {
      let cookie = cookieOf(req);
      if (!cookie) {
        cookie = crypto.randomBytes(32).toString('base64url');
        res.cookie(FORM_COOKIE, cookie, { path: '/signin', httpOnly: true, sameSite: 'strict', secure: req.secure });
      }
      return hmac(purpose, cookie);
    },
    async valid(req, purpose) {
      const cookie = cookieOf(req);
      const given = typeof (req.body as Record<string, unknown> | undefined)?._csrf === 'string' ? ((req.body as Record<string, string>)._csrf as string) : '';
      if (!sameOrigin(req) || cookie === undefined) return false;
      const expected = await hmac(purpose, cookie);
      return given.length === expected.length && crypto.timingSafeEqual(Buffer.from(given), Buffer.from(expected));
    },
  };
}
