/**
 * The page layer: every HTML page the service serves (sign-in notices, the modules' member pages, the
 * pages of people who are not members) goes through one auto-escaping template engine (Eta: `<%= %>`
 * escapes, `<%~ %>` is only used for HTML rendered by it), one layout with one frame (the navigation
 * bar the modules contribute to, server/pages/frame.ts), one stylesheet (the platform's and the
 * modules' contributions), one set of security headers (helmet: Content-Security-Policy without inline
 * script or style, no framing, `Referrer-Policy: same-origin`), express's cookie handling, CSRF
 * protection for form posts, and HTML error pages (404, 405, 410) for every path outside /v1 (an API
 * call that left out /v1 gets the API's JSON 404 instead, saying where the API is; a form post or a
 * request asking for HTML, without a key, is a browser's and gets the HTML page).
 *
 * A member page starts with `pages.member(req, res)` (session, member, role, capabilities and the
 * frame in one call). Form posts answer with a redirect (post/redirect/get); what a post must show
 * once is held for the next view of the page it redirects to (server/pages/holds.ts).
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
import type { Database } from '../db/database.ts';
import { catalogue } from '../generated/catalogue.ts';
import { mayManageSettings } from './capabilities.ts';
import type { Clock } from './clock.ts';
import type { Credential, CredentialStore, MemberInfo } from './credentials.ts';
import { notFound, ServiceError } from './errors.ts';
import { type Frame, type NavEntry, Navigation, SETTINGS_PATH, type Viewer } from './pages/frame.ts';
import { hold, take } from './pages/holds.ts';
import { isLocalPath } from './pages/paths.ts';
import { authenticateScoped, inspectScopedLink, openScopedLink, SCOPED_COOKIE, type ScopedSession } from './pages/scoped.ts';
import { textProblem } from './validation.ts';

export type { NavEntry, Viewer };
export { isLocalPath };

export const SESSION_COOKIE = 'wso_session';
const CSRF_COOKIE = 'wso_csrf';

const CONTENT_SECURITY_POLICY = {
  useDefaults: false,
  directives: {
    defaultSrc: ["'none'"],
    scriptSrc: ["'self'"],
    styleSrc: ["'self'"],
    imgSrc: ["'self'", 'data:'],
    // Fonts only from this service (pdf.js's standard fonts, for the pages that draw a PDF).
    fontSrc: ["'self'"],
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
const PAGE_JS = fs.readFileSync(new URL('./pages/page.js', import.meta.url));
/** The page kit's script (copy buttons: `button[data-copy]`), sent with the pages that have a copy button. */
export const PAGE_JS_PATH = '/assets/page.js';

/** What a page is made of; `html` is the body, rendered by a template of the page layer. */
export interface Page {
  title: string;
  html: string;
  styles?: string[];
  scripts?: string[];
  bodyClass?: string;
  /** The navigation bar (member pages). */
  frame?: Frame;
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

/** What a module adds to every page (`ServiceModule.navigation` and `.stylesheet`). */
export interface PageContribution {
  navigation?: readonly NavEntry[];
  /** A CSS file of the module, appended to the one stylesheet. */
  stylesheet?: URL;
}

/** Whether `/v1<path>` is an endpoint of the API (an operation, the operation list, the document). */
function isApiPath(path: string): boolean {
  return path.startsWith('/operations/') || catalogue.some((e) => e.path === path) || path === '/openapi.json' || path === '/openapi.yaml';
}

/** Where the API is, for a request that left out `/v1` (JSON 404 and HTML 404 alike). */
function withoutV1Hint(path: string, api: boolean): string {
  return `the API is under /v1: did you mean /v1${path}?${api ? '' : ' (GET /v1/operations lists the operations a key may call)'}`;
}

/** What a signed-out person is told (with a link to the sign-in page, `signinLink`). */
export const HOW_TO_SIGN_IN = 'Sign in with your e-mail address: we mail you a link that works once, for 15 minutes.';

/** The link to the sign-in page (`GET /signin`), keeping where the person was going when it is a page path. */
export function signinLink(next?: string): { href: string; label: string } {
  return { href: next && isLocalPath(next) && next !== '/' ? `/signin?next=${encodeURIComponent(next)}` : '/signin', label: 'Sign in' };
}

/** A member page's request, signed in: who, what they may do, and how to answer inside the frame. */
export interface MemberPage {
  readonly session: Credential;
  readonly member: MemberInfo;
  readonly workspaceId: string;
  readonly viewer: Viewer;
  /** May manage the workspace's settings (server/capabilities.ts). */
  readonly manage: boolean;
  /** The CSRF token for this page's forms. */
  readonly csrf: string;
  /** Sends a page inside the layout and the frame. */
  send(status: number, page: Omit<Page, 'frame'>): Promise<void>;
  /** A short notice (error pages: 400, 403, 404, 409, 410) inside the frame. */
  notice(status: number, title: string, paragraphs: string[]): Promise<void>;
  /** Holds a value for this session's next view of `path` (post/redirect/get). */
  hold(path: string, value: unknown): Promise<void>;
  /** Takes what a post held for this page (`req.path` unless given), once; undefined when nothing is held. */
  take(path?: string): Promise<unknown>;
}

/** The page layer of one service process (see the file comment). */
export class PageKit {
  private readonly navigation = new Navigation();
  private stylesheet: Buffer = PAGE_CSS;
  private readonly routers: express.Router[] = [];
  private store: { db: Database; clock: Clock } | null = null;

  constructor(private readonly options: PageKitOptions) {}

  /** Takes the modules' contributions and the database (once, when the service is composed). */
  compose(store: { db: Database; clock: Clock }, contributions: readonly PageContribution[]): void {
    this.store = store;
    const css = [PAGE_CSS];
    for (const c of contributions) {
      this.navigation.add(c.navigation ?? []);
      if (c.stylesheet) css.push(Buffer.from(`\n/* ${fileURLToPath(c.stylesheet).split('/').slice(-3).join('/')} */\n`), fs.readFileSync(c.stylesheet));
    }
    this.stylesheet = Buffer.concat(css);
  }

  private get db(): { db: Database; clock: Clock } {
    if (!this.store) throw new Error('the page kit is used before the service composed it');
    return this.store;
  }

  /** A router for pages: cookies parsed, security headers and no-store set, form bodies read. */
  router(): express.Router {
    const router = express.Router();
    router.use(cookieParser(), pageHelmet, noStore, express.urlencoded({ extended: false, limit: '16kb' }), this.refuseBadText);
    this.routers.push(router);
    return router;
  }

  /**
   * The API's string rule (server/validation.ts `textProblem`) on every page form and query: a value
   * (or field name) with U+0000 or a lone UTF-16 surrogate is refused with a 400 page before any route
   * sees it (PostgreSQL cannot store the first and would answer 500; SQLite would store it), so every
   * form of every page refuses it alike on both databases, and nothing is stored.
   */
  private readonly refuseBadText: RequestHandler = (req, res, next) => {
    if (req.path === '/v1' || req.path.startsWith('/v1/')) return next();
    const problem = textProblem('form field', req.body) ?? textProblem('query parameter', req.query);
    if (problem === null) return next();
    const field = /^(form field|query parameter)(?:\.([^ ]*))?( has a key that)? (.*)$/.exec(problem);
    const what = field ? `The ${field[1]}${field[2] ? ` “${field[2]}”` : ''}${field[3] ? ' has a name that' : ''} ${field[4]}` : problem;
    this.notice(res, 400, 'Not accepted', [`${what}.`, 'Remove that character and send the form again; nothing was changed.']);
  };

  /** Templates in `dir` (a module's own pages folder). */
  views(dir: URL): Views {
    const eta = new Eta({ views: fileURLToPath(dir), autoEscape: true, autoTrim: false });
    return { render: (name, data) => eta.render(name, data) };
  }

  /** Sends a page inside the one layout. */
  send(res: Response, status: number, page: Page): void {
    const html = layoutEngine.render('layout', {
      title: page.title,
      body: page.html,
      styles: page.styles ?? [],
      // The kit's script goes only to pages that use it (a copy button): a page without one stays script-free.
      scripts: page.html.includes('data-copy=') ? [PAGE_JS_PATH, ...(page.scripts ?? [])] : (page.scripts ?? []),
      bodyClass: page.bodyClass ?? '',
      frame: page.frame ?? null,
    });
    res.status(status).type('html').send(html);
  }

  /** A short notice page: a title and plain-text paragraphs (escaped), optionally with a sign-out button or a link. */
  notice(res: Response, status: number, title: string, paragraphs: string[], signoutToken?: string, link?: { href: string; label: string }): void {
    this.send(res, status, { title, bodyClass: 'notice', html: layoutEngine.render('notice', { title, paragraphs, signout: signoutToken ?? '', link: link ?? null, framed: false }) });
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
        this.notice(
          res,
          401,
          'Sign-in needed',
          [token === undefined ? 'This page needs a sign-in session.' : 'Your sign-in session has expired or was ended.', HOW_TO_SIGN_IN],
          undefined,
          signinLink(req.method === 'GET' ? req.originalUrl : undefined),
        );
      }
      return null;
    }
  }

  /** A member page request: the session, its member and the frame in one call; null after a 401 or 429 page. */
  async member(req: Request, res: Response): Promise<MemberPage | null> {
    const session = await this.session(req, res);
    if (!session) return null;
    const member = session.sessionMember!;
    const token = sessionTokenOf(req)!;
    const manage = mayManageSettings(member.role);
    const viewer: Viewer = { id: member.id, name: member.name, role: member.role, workspaceId: session.workspaceId, manage };
    const csrfToken = this.csrfToken(req, res);
    const frame = () => this.navigation.frame(viewer, req.path, csrfToken);
    const held = { id: session.keyId, token };
    const { db, clock } = this.db;
    return {
      session,
      member,
      workspaceId: session.workspaceId,
      viewer,
      manage,
      csrf: csrfToken,
      send: async (status, page) => this.send(res, status, { bodyClass: 'page', ...page, frame: await frame() }),
      notice: async (status, title, paragraphs) =>
        this.send(res, status, { title, bodyClass: 'page', frame: await frame(), html: layoutEngine.render('notice', { title, paragraphs, signout: '', link: null, framed: true }) }),
      hold: (path, value) => hold(db, clock, held, path, value),
      take: (path) => take(db, clock, held, path ?? req.path),
    };
  }

  /**
   * The scoped session (server/pages/scoped.ts) of a page for people who are not members, for one
   * purpose; null after a 401 page (no session, or one for another purpose). Member sessions do not count.
   */
  async scoped(req: Request, res: Response, purpose: string): Promise<ScopedSession | null> {
    const { db, clock } = this.db;
    const cookies = req.cookies as Record<string, unknown> | undefined;
    const token = cookies?.[SCOPED_COOKIE];
    const session = await authenticateScoped(db, clock, typeof token === 'string' ? token : undefined);
    if (session && session.purpose === purpose) return session;
    this.notice(res, 401, 'Link needed', ['This page opens through the link you were sent, for a limited time. Open the link again, or ask the sender for a new one.']);
    return null;
  }

  /** An HTML 404 page (inside the frame when the request is a member's). */
  notFound(res: Response, what = 'There is no page at this address.'): void {
    this.notice(res, 404, 'Not found', [what]);
  }

  /**
   * The kit's own routes, mounted after every module's: `GET /` (a signed-in member to the home entry
   * of the navigation, anyone else to the public landing entry), the scoped links, and the HTML
   * 404 and 405 pages for every path outside /v1 that no route answered.
   */
  routes(): express.Router {
    const router = this.router();
    router.get('/', async (req: Request, res: Response) => {
      const token = sessionTokenOf(req);
      let member = false;
      if (token !== undefined) member = await this.options.credentials.authenticateSession(token).then(() => true, () => false);
      const to = member ? this.navigation.home : this.navigation.landing;
      if (to === null) return this.notFound(res);
      res.redirect(303, to);
    });
    // The settings index: the settings pages this member may open, each with what it is for.
    router.get(SETTINGS_PATH, async (req: Request, res: Response) => {
      const page = await this.member(req, res);
      if (!page) return;
      await page.send(200, { title: 'Settings', html: layoutEngine.render('settings', { entries: this.navigation.settings(page.viewer), manage: page.manage }) });
    });
    // The token is in these URLs; the page policy (same-origin) sends it as a referrer to this service
    // only (never logged), and Chromium sends `Origin: null` on a form post from a no-referrer page.
    router.get('/signin/scoped/:token', async (req: Request<{ token: string }>, res: Response) => {
      const link = await inspectScopedLink(this.db.db, this.db.clock, req.params.token);
      if (link === 404 || link === 410) return this.scopedLinkRefused(res, link);
      // Opening takes a click (a POST): mail scanners and previews fetch links, and must not use them up.
      this.send(res, 200, { title: 'Continue', bodyClass: 'notice', html: layoutEngine.render('open-link', { action: req.originalUrl }) });
    });
    router.post('/signin/scoped/:token', async (req: Request<{ token: string }>, res: Response) => {
      if (!sameOrigin(req)) return this.notice(res, 403, 'Refused', ['This form may only be sent from a page of this service.']);
      const opened = await openScopedLink(this.db.db, this.db.clock, req.params.token);
      if (!opened.ok) return this.scopedLinkRefused(res, opened.status);
      res.cookie(SCOPED_COOKIE, opened.token, { path: '/', httpOnly: true, sameSite: 'lax', secure: req.secure, maxAge: opened.ttlMs });
      res.redirect(303, isLocalPath(opened.next) ? opened.next : '/');
    });
    router.use((req: Request, res: Response, next: NextFunction) => {
      if (req.path === '/v1' || req.path.startsWith('/v1/')) return next();
      const allowed = this.methodsAt(req.path);
      if (allowed.length && !allowed.includes(req.method)) {
        res.setHeader('Allow', allowed.join(', '));
        return this.notice(res, 405, 'Not allowed here', [`This address answers ${allowed.join(' and ')}, not ${req.method}.`]);
      }
      const api = isApiPath(req.path);
      // A browser: it asks for HTML, or posts a form (urlencoded or multipart) without asking for JSON; never with a key.
      const form = /^\s*(application\/x-www-form-urlencoded|multipart\/form-data)\s*(;|$)/i.test(req.headers['content-type'] ?? '');
      const browser = req.headers.authorization === undefined && (/text\/html/.test(req.headers.accept ?? '') || (form && !/json/.test(req.headers.accept ?? '')));
      const caller = req.headers.authorization !== undefined || !['GET', 'HEAD'].includes(req.method) || /json/.test(req.headers.accept ?? '') || api;
      // An API call without the /v1 prefix gets the API's JSON 404, saying where the API is.
      if (!browser && caller) return next(notFound(`No endpoint ${req.method} ${req.path}: ${withoutV1Hint(req.path, api)}`));
      this.notFound(res, api ? `There is no page at this address: ${withoutV1Hint(req.path, api)}` : undefined);
    });
    return router;
  }

  private scopedLinkRefused(res: Response, status: 404 | 410): void {
    this.notice(res, status, status === 410 ? 'This link can no longer be used' : 'Unknown link', [
      status === 410 ? 'This link was already used or has expired. Ask the sender for a new one.' : 'This link does not exist. Check that it was copied completely.',
    ]);
  }

  /** The methods the page routes answer at a path (GET implies HEAD), for 405 and its `Allow`. */
  private methodsAt(path: string): string[] {
    const methods = new Set<string>();
    for (const router of this.routers) {
      for (const layer of router.stack as unknown as Array<{ route?: { methods: Record<string, boolean> }; match(path: string): boolean }>) {
        if (layer.route && layer.match(path)) for (const [m, on] of Object.entries(layer.route.methods)) if (on) methods.add(m.toUpperCase());
      }
    }
    if (methods.has('GET')) methods.add('HEAD');
    return [...methods].sort();
  }

  /** `GET /assets/page.js`: the page kit's script (copy buttons), for the pages that have one. */
  readonly js: RequestHandler = (_req, res) => {
    res.setHeader('Content-Type', 'text/javascript; charset=utf-8');
    res.setHeader('Cache-Control', 'no-cache');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.status(200).send(PAGE_JS);
  };

  /** `GET /assets/page.css`: the one stylesheet of every page (the platform's, then each module's). */
  readonly css: RequestHandler = (_req, res) => {
    res.setHeader('Content-Type', 'text/css; charset=utf-8');
    res.setHeader('Cache-Control', 'no-cache');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.status(200).send(this.stylesheet);
  };
}
