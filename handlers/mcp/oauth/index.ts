/**
 * The OAuth 2.1 authorization server of the MCP endpoint (issue 17): oidc-provider 9, issuer = the
 * PUBLIC_URL origin, its routes under /oauth/* plus the two discovery documents, mounted at the root
 * of the express app behind a path filter (mounting it under a path makes it advertise wrong URLs).
 *
 * - One resource: RESOURCE = PUBLIC_URL + '/v1/mcp' (RFC 8707), scope `mcp`, opaque access tokens
 *   (stored hashed: adapter.ts; /v1/mcp looks them up by SHA-256), audience = RESOURCE.
 * - PKCE S256 for every client (plain is refused by oidc-provider 9), RFC 9207 `iss` on every
 *   authorization response, refresh tokens always rotated (a reused one revokes the whole grant),
 *   revocation (RFC 7009) at /oauth/revoke.
 * - Clients: dynamic registration (RFC 7591) at /oauth/register, ids `mcl_...`, secrets (confidential
 *   clients) stored hashed; client id metadata documents (draft-ietf-oauth-client-id-metadata-document-02)
 *   fetched through the hardened egress (public HTTPS only, no redirects, 5 KiB, 2.5 s).
 * - A guard before the provider canonicalises `resource` on /oauth/token and /oauth/authorize and
 *   answers invalid_target itself for anything else: oidc-provider consumes a refresh token before it
 *   checks the resource, so a client that sent `.../v1/mcp/` would otherwise see its retry taken for a
 *   replay and lose the grant.
 * - Interactions go to /oauth/consent/<uid> (the consent page, handlers/mcp/consent.ts), which calls
 *   `interaction`, `approve` and `deny` here; every approval asks again (no silent re-use of a grant),
 *   and a browser whose provider session names a connection revoked since is sent there too.
 * - /oauth/authorize: rate limited per client address (OAUTH_LIMITS.authorize); without `scope` it asks
 *   for `mcp`, a scope without `mcp` is invalid_scope. Its errors go back to the client's redirect
 *   address only when a member approved the client for that address (a live connection made with it);
 *   otherwise they are a page of the service (no open redirector). `http` redirect addresses only on
 *   loopback hosts, at registration (invalid_redirect_uri) and at authorization.
 * - A client id metadata document that failed is not fetched again for FAILED_DOCUMENT_TTL_MS (an
 *   in-process cache in front of the provider, whose error path would otherwise look the client up twice).
 * - The signing key and cookie keys live in service_secrets, shared by every process.
 */
import crypto from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Request, Response } from 'express';
import express from 'express';
import { LRUCache } from 'lru-cache';
import { calculateJwkThumbprint, exportJWK, generateKeyPair } from 'jose';
import type { ClientInstance, KoaContextish, OIDCProviderError, default as Provider } from 'oidc-provider';
import type { Logger } from 'pino';
import type { Database } from '../../../db/database.ts';
import { serviceSecret } from '../../../db/queries/secrets.ts';
import { takeSigninFormToken } from '../../../db/queries/signinByEmail.ts';
import type { Clock } from '../../../server/clock.ts';
import type { ServiceConfig } from '../../../server/config.ts';
import type { EgressClient } from '../../../server/egress.ts';
import { randomIdPart, sha256Hex } from '../../../server/ids.ts';
import type { JobDefinition } from '../../../server/jobs.ts';
import { DPOP_ALGS } from '../dpop.ts';
import { MCP_SCOPE, mcpResource } from '../resource.ts';
import type { PageKit } from '../../../server/pages.ts';
import { CLIENT_SECRET_PREFIX, deleteGrantRecords, knexAdapterFor, pruneRecords, pruneUnusedClients } from './adapter.ts';


/**
 * Requests per client address to the open endpoints (shared by every process): registrations, token
 * and revocation requests, and authorization requests (`/oauth/authorize` itself, not the resume after
 * the consent page; each may fetch a client id metadata document).
 */
export const OAUTH_LIMITS = {
  register: { requests: 20, perMs: 3_600_000 },
  token: { requests: 120, perMs: 60_000 },
  authorize: { requests: 30, perMs: 60_000 },
} as const;

/**
 * How long a client id metadata document that could not be used (unreachable, refused by the egress,
 * not 200, too large, not a valid document) is not fetched again, per process.
 */
export const FAILED_DOCUMENT_TTL_MS = 60_000;
export interface OAuthDeps {
  db: Database;
  clock: Clock;
  logger: Logger;
  config: ServiceConfig;
  egress: EgressClient;
  /** The page layer, for the provider's error pages (without it: a bare page with the same security headers). */
  pages?: PageKit;
}

/** What the consent page shows of a pending authorization request. */
export interface InteractionDetails {
  uid: string;
  clientId: string;
  clientName: string;
  redirectUri: string;
  clientUri?: string;
  resource: string;
  scopes: string[];
}

export interface OAuthServer {
  /** The authorization server's routes (mount filter + the resource-canonicalising guard). */
  routes(): express.Router;
  /** The pending interaction of this browser at /oauth/consent/<uid>; null when it is gone or expired. */
  interaction(req: Request, res: Response): Promise<InteractionDetails | null>;
  /** Grants RESOURCE with scope mcp to the connection, records its grant id, answers with the provider's redirect. */
  approve(req: Request, res: Response, input: { connectionId: string }): Promise<void>;
  /** access_denied back to the client (answers with the redirect). */
  deny(req: Request, res: Response): Promise<void>;
  /** Every token of the grant dead. */
  revokeGrant(grantId: string): Promise<void>;
  /** The `oauth.prune` job definition (hourly: records expired for a day, client registrations unused for 30 days). */
  pruneJob(): JobDefinition;
}


/** Lifetimes (seconds). */
export const OAUTH_TTL = {
  AccessToken: 3600,
  AuthorizationCode: 60,
  RefreshToken: 30 * 86_400,
  Interaction: 30 * 60,
  Session: 30 * 60,
  Grant: 365 * 86_400,
} as const;

/** Records this long past their expiry are deleted by `oauth.prune`. */
const PRUNE_GRACE_MS = 86_400_000;
/** Registered clients no connection names are deleted this long after registration (`oauth.prune`). */
const UNUSED_CLIENT_MS = 30 * 86_400_000;

/** Bytes and time a client id metadata document may take. */
const CIMD_MAX_BYTES = 5 * 1024;
const CIMD_TIMEOUT_MS = 2500;

/** Hosts an `http:` redirect address may name (RFC 8252 §7.3 loopback; everything else must be https). */
const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/** The problem with a redirect address the service never sends a browser to; null when it is fine. */
export function redirectUriProblem(uri: unknown): string | null {
  if (typeof uri !== 'string') return null; // the provider answers malformed metadata itself
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return null;
  }
  if (url.protocol === 'http:' && !LOOPBACK_HOSTS.has(url.hostname)) {
    return `redirect_uris: ${uri.slice(0, 200)} uses http on a host that is not this computer's loopback (localhost, 127.0.0.1, [::1]); use https`;
  }
  return null;
}

/** A redirect address as compared with an approved one: a loopback http address's port is the client's to choose (RFC 8252 §7.3). */
function redirectKey(uri: string): string {
  try {
    const url = new URL(uri);
    if (url.protocol === 'http:' && LOOPBACK_HOSTS.has(url.hostname)) {
      url.port = '';
      return url.href;
    }
  } catch {
    // compared as it is
  }
  return uri;
}

const OWN_PATHS = /^\/(oauth\/(authorize|token|register|revoke|jwks)(\/.*)?|\.well-known\/(oauth-authorization-server|openid-configuration))$/;

/**
 * A resource indicator in canonical form (RFC 8707 §2 / the MCP spec: lowercase scheme and host,
 * default port dropped, no trailing slash, no fragment); null when it is not an absolute http(s) URI
 * or carries a query or fragment.
 */
export function canonicalResource(value: string): string | null {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return null;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return null;
  if (url.search || url.hash || url.username || url.password) return null;
  const path = url.pathname.replace(/\/+$/, '');
  return `${url.protocol}//${url.host}${path}`;
}

const SECURITY_HEADERS: Record<string, string> = {
  'Content-Security-Policy': "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  'X-Frame-Options': 'DENY',
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'same-origin',
  'Cache-Control': 'no-store',
};

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/**
 * A body another middleware already read (the page routers mounted before this one parse every form
 * body): the parsed value, or undefined when the stream is still unread.
 */
function parsedBody(req: IncomingMessage): unknown {
  const r = req as IncomingMessage & { _body?: boolean; body?: unknown };
  return r._body === true || !req.readable ? (r.body ?? '') : undefined;
}

/** A form body as URLSearchParams, whether still unread or already parsed (flat object) upstream; null when larger than the limit. */
async function readForm(req: IncomingMessage): Promise<URLSearchParams | null> {
  const parsed = parsedBody(req);
  if (parsed === undefined) {
    const raw = await readBody(req);
    return raw === null ? null : new URLSearchParams(raw.toString('utf8'));
  }
  if (typeof parsed === 'string' || Buffer.isBuffer(parsed)) return new URLSearchParams(parsed.toString());
  const form = new URLSearchParams();
  if (parsed && typeof parsed === 'object') {
    for (const [name, value] of Object.entries(parsed)) for (const v of Array.isArray(value) ? value : [value]) form.append(name, String(v));
  }
  return form;
}

/** Reads a request body (the provider's own limit, 56 KiB); null when it is larger. */
async function readBody(req: IncomingMessage, limit = 56 * 1024): Promise<Buffer | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) return null;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

type OidcModule = typeof import('oidc-provider');
let oidcModule: Promise<OidcModule> | null = null;
/** Where oidc-provider's console warnings go (the latest server's logger). */
let warnings: Logger | null = null;

/**
 * oidc-provider, loaded on first use (not when the service is imported: the CLI never loads it). Its
 * console warnings (on Node 20: "Unsupported runtime"; an already read body, which the resource guard
 * causes on purpose) go to the service log at warn level instead of stderr.
 */
function loadOidc(logger: Logger): Promise<OidcModule> {
  warnings = logger;
  if (!oidcModule) {
    const original = console.warn;
    console.warn = (...args: unknown[]) => {
      const first = typeof args[0] === 'string' ? args[0] : '';
      if (first.includes('oidc-provider WARNING:') && warnings) warnings.warn({ library: 'oidc-provider' }, first.replace(/\x1b\[[0-9;]*m/g, ''));
      else original.apply(console, args);
    };
    oidcModule = import('oidc-provider');
  }
  return oidcModule;
}

export function createOAuthServer(deps: OAuthDeps): OAuthServer {
  const { db, clock, logger, config, egress } = deps;
  const { issuer, resource: RESOURCE } = mcpResource(config.publicUrl);
  const ownOrigin = issuer;
  const publicOrigin = new URL(issuer);

  /** The provider, built once its keys are read from service_secrets. */
  let providerPromise: Promise<Provider> | null = null;
  let handle: ((req: IncomingMessage, res: ServerResponse) => void) | null = null;
  let oidcErrors: OidcModule['errors'] | null = null;
  /**
   * Authorization requests of a client no member approved for the redirect address they name: their
   * errors are a page of the service, never a redirect (the provider would send them to any address
   * the client registered, making this host an open redirector).
   */
  const unapproved = new WeakSet<IncomingMessage>();
  /** Client id metadata documents that failed lately (in front of the provider's fetch; per process). */
  const failedDocuments = new LRUCache<string, string>({ max: 1000, ttl: FAILED_DOCUMENT_TTL_MS, ttlResolution: 0, perf: { now: () => clock.now() } });
  const provider = (): Promise<Provider> => {
    providerPromise ??= build().catch((err: unknown) => {
      providerPromise = null;
      throw err;
    });
    return providerPromise;
  };

  /**
   * The signing key (ES256; only its private scalar `d` is kept in service_secrets, the public point is
   * derived) and the cookie key, shared by every process through service_secrets.
   */
  async function keys(): Promise<{ signing: Record<string, unknown>; cookie: string }> {
    const { privateKey } = await generateKeyPair('ES256', { extractable: true });
    const d = await serviceSecret(db.sql, 'oauth-signing-key', String((await exportJWK(privateKey)).d), clock.now());
    // ECPrivateKey (RFC 5915) of the scalar on P-256; Node computes the public point from it.
    const der = Buffer.concat([Buffer.from('30310201010420', 'hex'), Buffer.from(d, 'base64url'), Buffer.from('a00a06082a8648ce3d030107', 'hex')]);
    const jwk = crypto.createPrivateKey({ key: der, format: 'der', type: 'sec1' }).export({ format: 'jwk' }) as Record<string, string>;
    const signing = { ...jwk, alg: 'ES256', use: 'sig', kid: await calculateJwkThumbprint({ kty: 'EC', crv: 'P-256', x: jwk.x!, y: jwk.y! }) };
    const cookie = await serviceSecret(db.sql, 'oauth-cookie-key', crypto.randomBytes(32).toString('base64url'), clock.now());
    return { signing, cookie };
  }

  /** oidc-provider's `fetch`: through the hardened egress, GET only, no redirects, capped. */
  async function egressFetch(url: string | URL, options: { method?: string; headers?: Headers }): Promise<globalThis.Response> {
    if ((options.method ?? 'GET').toUpperCase() !== 'GET') throw new Error('only GET requests leave the authorization server');
    const accept = options.headers?.get('accept');
    const outcome = await egress.get(String(url), { headers: accept ? { accept } : {}, timeoutMs: CIMD_TIMEOUT_MS, maxResponseBytes: CIMD_MAX_BYTES + 1 });
    if (outcome.kind === 'error') throw new Error(outcome.error);
    if (outcome.truncated) throw new Error('response too large');
    const headers = new Headers();
    for (const name of ['content-type', 'cache-control', 'expires']) if (outcome.headers[name]) headers.set(name, outcome.headers[name]!);
    return new globalThis.Response(outcome.status === 204 || outcome.status === 304 ? null : outcome.body, { status: outcome.status, headers });
  }

  async function renderError(ctx: KoaContextish, out: Record<string, unknown>, error: OIDCProviderError): Promise<void> {
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) ctx.set(name, value);
    const code = typeof out.error === 'string' ? out.error : 'server_error';
    const description = typeof out.error_description === 'string' ? out.error_description : 'The authorization request could not be processed.';
    if (ctx.status >= 500) logger.error({ err: error }, 'authorization server error');
    const title = 'Authorization failed';
    const paragraphs = [`${description} (${code})`, 'Go back to the application that sent you here and connect again.'];
    ctx.type = 'html';
    if (deps.pages) {
      let html = '';
      const capture = {
        status: () => capture,
        type: () => capture,
        send: (body: string) => {
          html = body;
          return capture;
        },
      };
      deps.pages.notice(capture as unknown as Response, ctx.status, title, paragraphs);
      ctx.body = html;
    } else {
      ctx.body = `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>${title}</title></head><body><h1>${title}</h1>${paragraphs.map((p) => `<p>${escapeHtml(p)}</p>`).join('')}</body></html>`;
    }
  }

  async function build(): Promise<Provider> {
    const { default: Provider, errors, interactionPolicy } = await loadOidc(logger);
    oidcErrors = errors;
    const { signing, cookie } = await keys();
    // A browser whose provider session names a connection that is gone (revoked since) is signed out
    // for the provider: the request goes to the consent page again (the default policy would go on to
    // the consent checks without an account and fail).
    const policy = interactionPolicy.base();
    policy.get('login')!.checks.add(
      new interactionPolicy.Check('connection_gone', 'the connection of this browser session has ended', (ctx) => Boolean(ctx.oidc.session?.accountId && !ctx.oidc.account)),
      0,
    );
    const p = new Provider(issuer, {
      adapter: knexAdapterFor(db, clock, issuer, errors),
      jwks: { keys: [signing] },
      cookies: { keys: [cookie] },
      routes: {
        authorization: '/oauth/authorize',
        token: '/oauth/token',
        registration: '/oauth/register',
        revocation: '/oauth/revoke',
        jwks: '/oauth/jwks',
        end_session: '/oauth/session/end',
        userinfo: '/oauth/me',
        introspection: '/oauth/introspect',
        pushed_authorization_request: '/oauth/par',
        backchannel_authentication: '/oauth/backchannel',
        device_authorization: '/oauth/device/auth',
        code_verification: '/oauth/device',
        challenge: '/oauth/challenge',
        credential: '/oauth/credential',
      },
      responseTypes: ['code'],
      // 'mcp' too: MCP clients copy the resource's scope into their registration metadata (the SDK's client does).
      scopes: ['openid', 'offline_access', 'mcp'],
      claims: { openid: ['sub'] },
      clientAuthMethods: ['none', 'private_key_jwt', 'client_secret_basic', 'client_secret_post'],
      clientDefaults: {
        grant_types: ['authorization_code', 'refresh_token'],
        id_token_signed_response_alg: 'ES256',
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_basic',
      },
      enabledJWA: {
        // No HMAC anywhere: a client secret is only stored hashed, so it can never be a signing key.
        clientAuthSigningAlgValues: ['RS256', 'PS256', 'ES256', 'EdDSA'],
        idTokenSigningAlgValues: ['ES256'],
        requestObjectSigningAlgValues: ['RS256', 'PS256', 'ES256', 'EdDSA'],
        // DPoP (RFC 9449): the algorithms /v1/mcp verifies proofs with (handlers/mcp/dpop.ts), one list.
        dPoPSigningAlgValues: DPOP_ALGS,
      },
      pkce: { required: () => true },
      features: {
        devInteractions: { enabled: false },
        registration: { enabled: true, idFactory: () => `mcl_${randomIdPart()}`, issueRegistrationAccessToken: false },
        revocation: { enabled: true },
        userinfo: { enabled: false },
        introspection: { enabled: false },
        pushedAuthorizationRequests: { enabled: false },
        rpInitiatedLogout: { enabled: false },
        clientIdMetadataDocument: {
          enabled: true,
          ack: 'draft-02',
          // Never our own origin (it would ask this server for its own pages); the egress refuses the rest.
          allowFetch: (_ctx: unknown, id: string) => new URL(id).origin !== ownOrigin,
          allowClient: () => true,
        },
        resourceIndicators: {
          enabled: true,
          defaultResource: () => RESOURCE,
          useGrantedResource: () => true,
          getResourceServerInfo: (ctx: { oidc?: { route?: string; params?: { scope?: unknown } } }, resource: string) => {
            if (canonicalResource(resource) !== RESOURCE) throw new errors.InvalidTarget();
            // The resource serves scope mcp only: a request without it (only `openid`) would end in a token for nothing.
            const scope = ctx.oidc?.route === 'authorization' ? ctx.oidc.params?.scope : undefined;
            if (typeof scope === 'string' && !scope.split(' ').includes(MCP_SCOPE)) throw new errors.InvalidScope(`the scope must include ${MCP_SCOPE} (the only scope of ${RESOURCE})`, scope);
            return { scope: MCP_SCOPE, audience: RESOURCE, accessTokenFormat: 'opaque', accessTokenTTL: OAUTH_TTL.AccessToken };
          },
        },
      },
      fetch: egressFetch,
      fetchResponseBodyLimits: { 'client_id metadata document': CIMD_MAX_BYTES, jwks_uri: CIMD_MAX_BYTES, sector_identifier_uri: CIMD_MAX_BYTES },
      ttl: { ...OAUTH_TTL },
      issueRefreshToken: async (_ctx: unknown, client: { grantTypeAllowed(t: string): boolean }) => client.grantTypeAllowed('refresh_token'),
      expiresWithSession: async () => false,
      rotateRefreshToken: true,
      interactions: { policy, url: (_ctx: unknown, interaction: { uid: string }) => `/oauth/consent/${interaction.uid}` },
      // Only the grant the member approved in this very interaction (resume after the consent page); never an
      // earlier grant of the browser's session: every authorization goes through the consent page.
      loadExistingGrant: async (ctx: { oidc: { result?: { consent?: { grantId?: string } }; provider: Provider } }) => {
        const grantId = ctx.oidc.result?.consent?.grantId;
        return grantId ? ctx.oidc.provider.Grant.find(grantId) : undefined;
      },
      findAccount: async (_ctx: unknown, id: string) => {
        const row = await db.sql.one(`SELECT id FROM mcp_connections WHERE id = ? AND revoked_at IS NULL`, [id]);
        if (!row) return undefined;
        return { accountId: id, claims: async () => ({ sub: id }) };
      },
      renderError,
    });
    // Reads X-Forwarded-Proto / -Host, which the router sets from PUBLIC_URL on every request it hands over.
    p.proxy = true;
    // Client secrets are stored hashed (adapter.ts): compare hashes, in constant time.
    p.Client.prototype.compareClientSecret = function compareClientSecret(this: ClientInstance, actual: string): boolean {
      const stored = this.clientSecret;
      if (typeof stored !== 'string' || typeof actual !== 'string') return false;
      const expected = stored.startsWith(CLIENT_SECRET_PREFIX) ? stored : `${CLIENT_SECRET_PREFIX}${sha256Hex(stored)}`;
      const given = `${CLIENT_SECRET_PREFIX}${sha256Hex(actual)}`;
      return crypto.timingSafeEqual(Buffer.from(expected), Buffer.from(given));
    };
    // Every client, registered or described by a metadata document: http only on loopback hosts.
    const redirectUriAllowed = p.Client.prototype.redirectUriAllowed;
    p.Client.prototype.redirectUriAllowed = function allowed(this: ClientInstance, value: string): boolean {
      return redirectUriProblem(value) === null && redirectUriAllowed.call(this, value);
    };
    // A metadata document that failed is not fetched again for FAILED_DOCUMENT_TTL_MS: the provider looks a
    // client up again to word its error (two fetches per request otherwise), and a failure is worth nothing new.
    const find = p.Client.find.bind(p.Client);
    p.Client.find = async (id: string) => {
      const failed = typeof id === 'string' ? failedDocuments.get(sha256Hex(id)) : undefined;
      if (failed !== undefined) throw new errors.InvalidClient('client_id metadata document fetch failed', `${failed} (not fetched again for ${FAILED_DOCUMENT_TTL_MS / 1000} seconds)`);
      try {
        return await find(id);
      } catch (err) {
        if (/^https:\/\//i.test(id) && err instanceof errors.OIDCProviderError && err.expose) {
          failedDocuments.set(sha256Hex(id), String((err as { error_detail?: unknown }).error_detail ?? err.error_description ?? err.message).slice(0, 300));
        }
        throw err;
      }
    };
    // The provider decides between a page and a redirect after these events (synchronously): a client no
    // member approved for this address gets the page (see `unapproved`).
    const noRedirect = (ctx: unknown, err: unknown) => {
      const c = ctx as { req?: IncomingMessage; status: number };
      if (!c.req || !unapproved.has(c.req) || !err || typeof err !== 'object') return;
      (err as { allow_redirect?: boolean }).allow_redirect = false;
      // prompt=none's errors carry 303 (meant for the redirect): a page of an error is a 400.
      if (c.status >= 300 && c.status < 400) c.status = 400;
    };
    p.on('authorization.error', noRedirect);
    p.on('server_error', (ctx: unknown, err: unknown) => {
      noRedirect(ctx, err);
      logger.error({ err }, 'authorization server error');
    });
    return p;
  }

  /**
   * Whether a member approved `clientId` sending browsers to `redirectUri`: a live connection made on
   * the consent page, which showed that address (any live connection when the request names none: the
   * provider then uses the client's only address).
   */
  const approvedFor = async (clientId: string, redirectUri: string | null): Promise<boolean> => {
    if (!clientId) return false;
    const rows = await db.sql.all<{ redirect_uri: string }>(`SELECT DISTINCT redirect_uri FROM mcp_connections WHERE client_id = ? AND revoked_at IS NULL`, [clientId]);
    if (redirectUri === null) return rows.length > 0;
    const wanted = redirectKey(redirectUri);
    return rows.some((r) => redirectKey(r.redirect_uri) === wanted);
  };

  /** The resource guard: one canonical `resource` for the provider, or invalid_target before it consumes anything. */
  const resourceProblem = (values: string[]): { canonical: string } | { problem: string } => {
    for (const value of values) {
      if (canonicalResource(value) !== RESOURCE) return { problem: `unknown resource "${value.slice(0, 200)}": this server grants tokens for ${RESOURCE} only` };
    }
    return { canonical: RESOURCE };
  };

  const sendOAuthError = (res: ServerResponse, status: number, error: string, description: string) => {
    res.statusCode = status;
    res.setHeader('Content-Type', 'application/json; charset=utf-8');
    res.setHeader('Cache-Control', 'no-store');
    // Browser-based clients read the token endpoint's errors cross-origin (no credentials involved).
    res.setHeader('Access-Control-Allow-Origin', '*');
    res.end(JSON.stringify({ error, error_description: description }));
  };

  /**
   * Rewrites a form body's `resource` values to the canonical one and hands the body to the provider;
   * `strict` (token endpoint): another resource is answered invalid_target here. Returns the form as
   * handed over, or null when it answered.
   */
  const guardForm = async (req: Request, res: Response, strict: boolean, rewrite: (form: URLSearchParams) => void = () => undefined): Promise<URLSearchParams | null> => {
    const form = await readForm(req);
    if (form === null) {
      sendOAuthError(res, 413, 'invalid_request', 'the request body is too large');
      return null;
    }
    const values = form.getAll('resource');
    if (values.length) {
      const verdict = resourceProblem(values);
      if ('problem' in verdict) {
        if (strict) {
          sendOAuthError(res, 400, 'invalid_target', verdict.problem);
          return null;
        }
      } else {
        form.delete('resource');
        form.append('resource', verdict.canonical);
      }
    }
    rewrite(form);
    // oidc-provider reads an already read body from req.body (a string is parsed as the form).
    (req as unknown as { body: string }).body = form.toString();
    return form;
  };

  /** An authorization request without `scope` asks for the default one, `mcp` (RFC 6749 §3.3). */
  const defaultScope = (params: URLSearchParams) => {
    if (!params.getAll('scope').some((v) => v.trim() !== '')) {
      params.delete('scope');
      params.set('scope', MCP_SCOPE);
    }
  };

  /** Marks an authorization request whose client no member approved for its redirect address (see `unapproved`). */
  const markUnapproved = async (req: Request, params: URLSearchParams) => {
    const redirectUri = params.get('redirect_uri');
    if (!(await approvedFor(params.get('client_id') ?? '', redirectUri || null))) unapproved.add(req);
  };

  /**
   * Dynamic registration without `application_type` whose redirect addresses use a private scheme
   * (`cursor://...`, `vscode://...`): registered as a native client, which is what such a client is
   * (clients MUST send application_type since the 2026-07-28 revision; earlier ones often do not).
   */
  const guardRegistration = async (req: Request, res: Response): Promise<boolean> => {
    const parsed = parsedBody(req);
    const raw = parsed === undefined ? await readBody(req) : Buffer.from(typeof parsed === 'string' || Buffer.isBuffer(parsed) ? parsed.toString() : JSON.stringify(parsed));
    if (raw === null) {
      sendOAuthError(res, 413, 'invalid_request', 'the request body is too large');
      return false;
    }
    let text = raw.toString('utf8');
    try {
      const body = JSON.parse(text) as unknown;
      if (body && typeof body === 'object' && !Array.isArray(body)) {
        const metadata = body as Record<string, unknown>;
        const uris = Array.isArray(metadata.redirect_uris) ? metadata.redirect_uris : [];
        const problem = uris.map(redirectUriProblem).find((p) => p !== null);
        if (problem) {
          sendOAuthError(res, 400, 'invalid_redirect_uri', problem);
          return false;
        }
        const privateScheme = uris.some((u) => typeof u === 'string' && /^[a-z][a-z0-9+.-]*:/i.test(u) && !/^https?:/i.test(u));
        if (metadata.application_type === undefined && privateScheme) text = JSON.stringify({ ...metadata, application_type: 'native' });
      }
    } catch {
      // Not JSON: the provider answers it.
    }
    (req as unknown as { body: string }).body = text;
    return true;
  };

  /**
   * Budgets per client address (`req.ip`, so TRUST_PROXY decides) in the platform's shared
   * `rate_limits` table: registration is open, so it gets few; the token and revocation endpoints get
   * what a busy desktop client needs many times over. Past it: 429 with Retry-After, nothing consumed.
   */
  const limited = async (req: Request, res: Response): Promise<boolean> => {
    const budget = req.path === '/oauth/authorize' && (req.method === 'GET' || req.method === 'POST')
      ? OAUTH_LIMITS.authorize
      : req.method !== 'POST'
        ? null
        : req.path === '/oauth/register'
          ? OAUTH_LIMITS.register
          : req.path === '/oauth/token' || req.path === '/oauth/revoke'
            ? OAUTH_LIMITS.token
            : null;
    if (!budget) return false;
    const intervalUs = (budget.perMs * 1000) / budget.requests;
    const nowUs = clock.now() * 1000;
    const bucket = `signin-oauth${req.path.slice('/oauth'.length)}:${sha256Hex(req.ip ?? '')}`;
    if (await takeSigninFormToken(db.sql, bucket, { nowUs, intervalUs, toleranceUs: intervalUs * (budget.requests - 1) })) return false;
    res.setHeader('Retry-After', String(Math.max(1, Math.ceil(intervalUs / 1_000_000))));
    sendOAuthError(res, 429, 'rate_limited', `too many requests to ${req.path} from this address (${budget.requests} per ${budget.perMs / 60_000} minutes); retry later`);
    logger.info({ path: req.path }, 'oauth: rate limited');
    return true;
  };

  const router = express.Router();
  router.use(async (req: Request, res: Response, next) => {
    if (!OWN_PATHS.test(req.path)) return next();
    try {
      if (await limited(req, res)) return;
      const p = await provider();
      const formBody = req.method === 'POST' && (req.headers['content-type'] ?? '').toLowerCase().startsWith('application/x-www-form-urlencoded');
      if (req.path === '/oauth/token' && formBody) {
        if (!(await guardForm(req, res, true))) return;
      } else if (req.path === '/oauth/register' && req.method === 'POST' && (req.headers['content-type'] ?? '').toLowerCase().startsWith('application/json')) {
        if (!(await guardRegistration(req, res))) return;
      } else if (req.path === '/oauth/authorize' && formBody) {
        const form = await guardForm(req, res, false, defaultScope);
        if (!form) return;
        await markUnapproved(req, form);
      } else if (req.path === '/oauth/authorize' && req.method === 'GET') {
        const q = req.url.indexOf('?');
        const params = new URLSearchParams(q >= 0 ? req.url.slice(q + 1) : '');
        const values = params.getAll('resource');
        // A resource other than ours is left to the provider: it answers invalid_target (to the client's redirect address once approved).
        if (values.length && !('problem' in resourceProblem(values))) {
          params.delete('resource');
          params.append('resource', RESOURCE);
        }
        defaultScope(params);
        req.url = `${q >= 0 ? req.url.slice(0, q) : req.url}?${params.toString()}`;
        await markUnapproved(req, params);
      } else if (req.path === '/oauth/authorize') {
        unapproved.add(req);
      }
      // The provider names its endpoints and sets its cookies from the request's origin: make that PUBLIC_URL's
      // whatever the proxy in front forwards (a client can send nothing here that the provider believes).
      req.headers['x-forwarded-proto'] = publicOrigin.protocol.slice(0, -1);
      req.headers['x-forwarded-host'] = publicOrigin.host;
      req.headers['x-forwarded-for'] = req.ip ?? '';
      handle ??= p.callback();
      handle(req, res);
    } catch (err) {
      next(err);
    }
  });

  return {
    routes: () => router,

    async interaction(req, res) {
      const p = await provider();
      let details;
      try {
        details = await p.interactionDetails(req, res);
      } catch (err) {
        if (oidcErrors && err instanceof oidcErrors.OIDCProviderError) return null;
        throw err;
      }
      const match = /\/oauth\/consent\/([^/?#]+)/.exec(req.originalUrl ?? req.url);
      if (match && match[1] !== details.uid) return null;
      const params = details.params;
      const clientId = String(params.client_id ?? '');
      const client = await p.Client.find(clientId);
      if (!client) return null;
      const requested = typeof params.resource === 'string' ? params.resource : RESOURCE;
      return {
        uid: details.uid,
        clientId,
        clientName: client.clientName ?? clientId,
        redirectUri: String(params.redirect_uri ?? client.redirectUris?.[0] ?? ''),
        ...(client.clientUri ? { clientUri: client.clientUri } : {}),
        resource: canonicalResource(requested) ?? requested,
        scopes: typeof params.scope === 'string' ? params.scope.split(' ').filter(Boolean) : [],
      };
    },

    async approve(req, res, { connectionId }) {
      const p = await provider();
      const details = await p.interactionDetails(req, res);
      const clientId = String(details.params.client_id ?? '');
      const grant = new p.Grant({ accountId: connectionId, clientId });
      grant.addResourceScope(RESOURCE, MCP_SCOPE);
      const requested = typeof details.params.scope === 'string' ? details.params.scope.split(' ') : [];
      // `mcp` is also one of the provider's scopes (clients register with it), so a request naming it needs it granted there too.
      for (const scope of requested) if (scope === 'openid' || scope === 'offline_access' || scope === MCP_SCOPE) grant.addOIDCScope(scope);
      const grantId = await grant.save();
      await db.sql.run(`UPDATE mcp_connections SET grant_id = ? WHERE id = ?`, [grantId, connectionId]);
      // Each approval is a new connection, so a new account: the browser's earlier provider session (another
      // connection's) ends here, or the provider would ask the browser to log out first.
      if (details.session) {
        const sessionUid = details.session.uid;
        delete details.session;
        // oidc-provider's own time base (its records' exp are real seconds).
        await details.save(details.exp - Math.floor(Date.now() / 1000));
        if (sessionUid) await db.sql.run(`DELETE FROM oauth_records WHERE model = 'Session' AND uid_hash = ?`, [sha256Hex(sessionUid)]);
      }
      await p.interactionFinished(req, res, { login: { accountId: connectionId }, consent: { grantId } }, { mergeWithLastSubmission: false });
    },

    async deny(req, res) {
      const p = await provider();
      await p.interactionFinished(req, res, { error: 'access_denied', error_description: 'The member declined the connection.' }, { mergeWithLastSubmission: false });
    },

    async revokeGrant(grantId) {
      await deleteGrantRecords(db, grantId);
    },

    pruneJob: () => ({
      everyMs: 60 * 60_000,
      run: async () => {
        const removed = await pruneRecords(db, clock.now() - PRUNE_GRACE_MS);
        const clients = await pruneUnusedClients(db, clock.now() - UNUSED_CLIENT_MS);
        if (removed || clients) logger.info({ removed, clients }, 'pruned expired authorization server records and unused client registrations');
      },
    }),
  };
}
