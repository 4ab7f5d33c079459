/**
 * The page layer: every HTML page the service serves (sign-in notices, the analytics dashboard, and
 * later webhook approval, the signer's page, settings and the member inbox) goes through one
 * auto-escaping template engine (Eta: `<%= %>` escapes, `<%~ %>` is only used for HTML rendered by
 * it), one layout and stylesheet, one set of security headers (helmet: Content-Security-Policy
 * without inline script or style, no framing, `Referrer-Policy: same-origin`), express's cookie
 * handling, and CSRF protection for form posts.
 *
 * CSRF: a form carries a token (hidden field `_csrf`) bound to the member's session (csrf-csrf's
 * signed double-submit cookie, keyed by a secret derived from the session secret, so any process of
 * the deployment verifies it without shared state); a post whose token is missing or wrong is refused
 * with 403, and so is a post whose `Origin` names another host. The referrer policy is `same-origin`:
 * with `no-referrer`, Chromium sends `Origin: null` on the page's own form posts.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse as parseCookies } from 'cookie';
import cookieParser from 'cookie-parser';
import { doubleCsrf } from 'csrf-csrf';
import { Eta } from 'eta';
import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import helmet from 'helmet';
import type { Credential, CredentialStore } from './credentials.ts';
import { ServiceError } from './errors.ts';

export const SESSION_COOKIE = 'wso_session';
const CSRF_COOKIE = 'wso_csrf';

const CONTENT_SECURITY_POLICY = {
  useDefaults: false,
  directives: {
    defaultSrc: ["'none'"],
    scriptSrc: ["'self'"],
    styleSrc: ["'self'"],
    imgSrc: ["'self'", 'data:'],
    connectSrc: ["'self'"],
    baseUri: ["'none'"],
    formAction: ["'self'"],
    frameAncestors: ["'none'"],
  },
};

const pageHelmet = helmet({
  contentSecurityPolicy: CONTENT_SECURITY_POLICY,
  referrerPolicy: { policy: 'same-origin' },
  frameguard: { action: 'deny' },
  crossOriginEmbedderPolicy: false,
  strictTransportSecurity: false, // the TLS-terminating proxy in front decides
});

const noStore: RequestHandler = (_req, res, next) => {
  res.setHeader('Cache-Control', 'no-store');
  next();
};

const layoutEngine = new Eta({ views: fileURLToPath(new URL('./pages/templates', import.meta.url)), autoEscape: true, autoTrim: false });
const PAGE_CSS = fs.readFileSync(new URL('./pages/page.css', import.meta.url));

/** What a page is made of; `html` is the body, rendered by a template of the page layer. */
export interface Page {
  title: string;
  html: string;
  styles?: string[];
  scripts?: string[];
  bodyClass?: string;
}

/** A folder of Eta templates (a module's pages), rendered with auto-escaping. */
export interface Views {
  render(name: string, data: Record<string, unknown>): string;
}

/**
 * The session token of a request's `wso_session` cookie, if any: from cookie-parser on pages, else
 * parsed from the header with the same `cookie` package (the /v1 pipeline parses no cookies for keys).
 */
export function sessionTokenOf(req: Request): string | undefined {
  const parsed = req.cookies as Record<string, unknown> | undefined;
  const value: unknown = parsed ? parsed[SESSION_COOKIE] : req.headers.cookie ? parseCookies(req.headers.cookie)[SESSION_COOKIE] : undefined;
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/**
 * Whether a request with an `Origin` header comes from this service: compared by host with the host
 * the request was sent to (`req.host`: `X-Forwarded-Host` when a proxy trusted by TRUST_PROXY rewrote
 * `Host`, else `Host`). The one origin rule of cookie-authenticated requests (pages and /v1).
 */
export function sameOrigin(req: Request): boolean {
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  try {
    return new URL(origin).host === req.host;
  } catch {
    return false;
  }
}

const csrf = doubleCsrf({
  // Derived from the session secret: unguessable, per session, and the same in every process.
  getSecret: (req) => crypto.createHash('sha256').update(`csrf\n${(req && sessionTokenOf(req)) ?? ''}`).digest('base64url'),
  getSessionIdentifier: (req) => sessionTokenOf(req) ?? '',
  cookieName: CSRF_COOKIE,
  cookieOptions: { sameSite: 'strict', path: '/', httpOnly: true },
  getCsrfTokenFromRequest: (req) => {
    const token: unknown = (req.body as Record<string, unknown> | undefined)?._csrf;
    return typeof token === 'string' ? token : undefined;
  },
});

export interface PageKitOptions {
  credentials: CredentialStore;
}

export const HOW_TO_SIGN_IN =
  'Ask an operator for a new sign-in link: npm run admin -- signin-link --workspace <workspace id> --member <member id> --next "/dashboard" (links work once, for 15 minutes).';

/** The page layer of one service process (see the file comment). */
export class PageKit {
  constructor(private readonly options: PageKitOptions) {}

  /** A router for pages: cookies parsed, security headers and no-store set, form bodies read. */
  router(): express.Router {
    const router = express.Router();
    router.use(cookieParser(), pageHelmet, noStore, express.urlencoded({ extended: false, limit: '16kb' }));
    return router;
  }

  /** Templates in `dir` (a module's own pages folder). */
  views(dir: URL): Views {
    const eta = new Eta({ views: fileURLToPath(dir), autoEscape: true, autoTrim: false });
    return { render: (name, data) => eta.render(name, data) };
  }

  /** Sends a page inside the one layout. */
  send(res: Response, status: number, page: Page): void {
    const html = layoutEngine.render('layout', { title: page.title, body: page.html, styles: page.styles ?? [], scripts: page.scripts ?? [], bodyClass: page.bodyClass ?? '' });
    res.status(status).type('html').send(html);
  }

  /** A short notice page: a title and plain-text paragraphs (escaped), optionally with a sign-out button. */
  notice(res: Response, status: number, title: string, paragraphs: string[], signoutToken?: string): void {
    this.send(res, status, { title, bodyClass: 'notice', html: layoutEngine.render('notice', { title, paragraphs, signout: signoutToken ?? '' }) });
  }

  /** The CSRF token for this page's forms (sets its cookie). */
  csrfToken(req: Request, res: Response): string {
    return csrf.generateCsrfToken(req, res, { overwrite: false, cookieOptions: { secure: req.secure } });
  }

  /**
   * Refuses a form post (403 page) that comes from another origin or carries no valid CSRF token.
   * Posts without a session are let through: they can act on nothing.
   */
  readonly protectForm: RequestHandler = (req: Request, res: Response, next: NextFunction) => {
    if (!sameOrigin(req)) return this.notice(res, 403, 'Refused', ['This form may only be sent from a page of this service.']);
    if (sessionTokenOf(req) === undefined) return next();
    if (!csrf.validateRequest(req)) return this.notice(res, 403, 'Refused', ['This form has expired or did not come from this service. Reload the page and try again.']);
    next();
  };

  /**
   * The member session of a page request, or null after answering with a 401 page that says how to
   * get a sign-in link (429 when the session's budget is spent).
   */
  async session(req: Request, res: Response): Promise<Credential | null> {
    const token = sessionTokenOf(req);
    try {
      if (token === undefined) throw new ServiceError(401, 'invalid_key', 'no session');
      return await this.options.credentials.authenticateSession(token);
    } catch (err) {
      if (!(err instanceof ServiceError)) throw err;
      if (err.status === 429) {
        res.setHeader('Retry-After', err.headers['Retry-After'] ?? '1');
        this.notice(res, 429, 'Too many requests', ['Wait a moment and reload the page.']);
      } else {
        this.notice(res, 401, 'Sign-in needed', [
          token === undefined ? 'This page needs a sign-in session.' : 'Your sign-in session has expired or was ended.',
          HOW_TO_SIGN_IN,
        ]);
      }
      return null;
    }
  }

  /** `GET /assets/page.css`: the one stylesheet of every page. */
  readonly css: RequestHandler = (_req, res) => {
    res.setHeader('Content-Type', 'text/css; charset=utf-8');
    res.setHeader('Cache-Control', 'no-cache');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.status(200).send(PAGE_CSS);
  };
}
