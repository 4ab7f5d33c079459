/**
 * `/v1/mcp`: the Streamable HTTP endpoint of the MCP server (SDK v2 `createMcpHandler`, stateless:
 * revision 2026-07-28 and 2025-era clients from one per-request factory). Before the SDK sees a
 * request: the Host and Origin check (DNS rebinding), the OAuth access token (our check, never the
 * SDK's: audience, issuer, scope, connection), the connection's rate limit, and the JSON body.
 * Refusals at this HTTP level are our `{error, message, request_id}` bodies (401 and 403 with the
 * RFC 6750 / RFC 9728 `WWW-Authenticate` challenge); what happens inside MCP is JSON-RPC.
 */
import { createMcpHandler, isLegacyRequest, type McpHandlerRequestOptions, WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/server';
import { toNodeHandler } from '@modelcontextprotocol/node';
import express, { type Request, type Response } from 'express';
import type { Logger } from 'pino';
import { contentTypeProblem, readJsonObject } from '../../server/body.ts';
import type { Database } from '../../db/database.ts';
import type { Clock } from '../../server/clock.ts';
import type { ServiceConfig } from '../../server/config.ts';
import { type Credential, headerCount, TWO_AUTHORIZATION_HEADERS } from '../../server/credentials.ts';
import { AccessTokenError, type ConnectionCredentials, connectionInfoOf, TOKEN_MALFORMED, TOKEN_UNKNOWN, type TokenSender } from './credential.ts';
import { forbidden, invalidInput, invalidJson, invalidKey, noteError, requestIdOf, ServiceError, toServiceError } from '../../server/errors.ts';
import type { ExecuteOperation } from '../../server/execute.ts';
import { sessionTokenOf } from '../../server/pages.ts';
import type { RequestLogNote } from '../../server/platform.ts';
import type { ContractValidator } from '../../server/validation.ts';
import { DpopProofError, verifyDpopProof } from './dpop.ts';
import { bearerChallenge, dpopChallenge, MCP_PATH, MCP_SCOPE, type McpResource } from './resource.ts';
import { type McpCallContext, mcpServerFactory, SERVED_PROTOCOL_VERSIONS, UNSUPPORTED_PROTOCOL_VERSION } from './server.ts';

export const NO_TOKEN = 'No access token: send Authorization: Bearer <access token>, obtained with OAuth from this service (discovery starts at the WWW-Authenticate resource_metadata URL).';
export const TOKEN_IN_QUERY = 'An access token in the URL is never accepted: send it only as Authorization: Bearer <access token>.';
export const TWO_METHODS = 'The access token was sent in the URL and in the Authorization header: send it only in the header.';
export const NOT_BEARER = 'The MCP endpoint takes only OAuth access tokens as Authorization: Bearer <access token> (or Authorization: DPoP <access token> with a DPoP proof, for a DPoP-bound token).';
export const NO_DPOP_PROOF = 'Authorization: DPoP needs exactly one DPoP header holding a proof (RFC 9449).';
export const API_KEY_REFUSED = 'API keys are not accepted by the MCP endpoint: connect the client with OAuth (the endpoint\'s resource metadata names the authorization server).';
export const SESSION_REFUSED = 'Sign-in sessions are not accepted by the MCP endpoint: connect the client with OAuth (the endpoint\'s resource metadata names the authorization server).';
export const FORBIDDEN_HOST = 'The Host of this request is not this service\'s (PUBLIC_URL): refused against DNS rebinding.';
export const FORBIDDEN_ORIGIN = 'Requests from this Origin may not call the MCP endpoint (allowed: this service\'s own origin and MCP_ALLOWED_ORIGINS).';
/** The same refusal while PUBLIC_URL is a loopback address (development), where loopback origins pass too. */
export const FORBIDDEN_ORIGIN_LOCAL = 'Requests from this Origin may not call the MCP endpoint (allowed: this service\'s own origin, MCP_ALLOWED_ORIGINS, and, while PUBLIC_URL is a loopback address, any http or https origin on a loopback host).';

const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);
const isLoopback = (host: string) => LOOPBACK.has(host.toLowerCase()) || host.toLowerCase().endsWith('.localhost');

/** What the request log line says of an MCP request (never a token). */
export interface McpLogFields {
  [field: string]: string | undefined;
  connection?: string;
  tool?: string;
  operation?: string;
}

export interface McpTransportDeps {
  config: ServiceConfig;
  logger: Logger;
  /** Origins besides PUBLIC_URL's whose browser pages may call `/v1/mcp` (MCP_ALLOWED_ORIGINS). */
  allowedOrigins: readonly string[];
  /** MCP connections' access tokens (the kind of credential this feature adds to the kernel's store). */
  connections: ConnectionCredentials;
  /** The database DPoP proofs' jti are recorded in, and the clock their iat is judged by. */
  db: Database;
  clock: Clock;
  execute: ExecuteOperation;
  resource: McpResource;
  validator?: ContractValidator;
  version: string;
}

/**
 * Whether a request's Host and Origin may reach the MCP endpoint (MCP transports: servers MUST check
 * Origin). Host: PUBLIC_URL's host (any loopback host when PUBLIC_URL is a loopback address, as in
 * development). Origin: absent (desktop and command-line clients), PUBLIC_URL's origin, one of
 * MCP_ALLOWED_ORIGINS, or (loopback PUBLIC_URL) a loopback origin. Returns the refusal, or null.
 */
export function hostOriginProblem(req: Request, config: Pick<ServiceConfig, 'publicUrl'>, allowedOrigins: readonly string[]): string | null {
  const publicUrl = new URL(config.publicUrl);
  const local = isLoopback(publicUrl.hostname);
  const host = req.hostname;
  if (!host || (host.toLowerCase() !== publicUrl.hostname && !(local && isLoopback(host)))) return FORBIDDEN_HOST;
  const origin = req.headers.origin;
  if (origin === undefined) return null;
  if (origin === publicUrl.origin || allowedOrigins.includes(origin)) return null;
  try {
    const o = new URL(origin);
    if (local && isLoopback(o.hostname) && (o.protocol === 'http:' || o.protocol === 'https:')) return null;
  } catch {
    /* "null" and garbage: refused */
  }
  return local ? FORBIDDEN_ORIGIN_LOCAL : FORBIDDEN_ORIGIN;
}

/**
 * A 2026-07-28 answer that names the supported revisions (`server/discover`'s `supportedVersions`, the
 * `-32022` error's `data.supported`), naming every revision the endpoint serves: the SDK's modern entry
 * lists only 2026-07-28, though 2025-era clients are served here too through `initialize`.
 */
async function withServedRevisions(response: globalThis.Response): Promise<globalThis.Response> {
  if (!/^application\/json/.test(response.headers.get('content-type') ?? '')) return response;
  const text = await response.text();
  let body: { result?: { supportedVersions?: unknown }; error?: { code?: unknown; data?: { supported?: unknown } } };
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    return new globalThis.Response(text, { status: response.status, headers: response.headers });
  }
  let changed = false;
  if (body && typeof body === 'object' && Array.isArray(body.result?.supportedVersions)) {
    body.result.supportedVersions = [...SERVED_PROTOCOL_VERSIONS];
    changed = true;
  }
  if (body && typeof body === 'object' && body.error?.code === UNSUPPORTED_PROTOCOL_VERSION && Array.isArray(body.error.data?.supported)) {
    body.error.data.supported = [...SERVED_PROTOCOL_VERSIONS];
    changed = true;
  }
  const headers = new Headers(response.headers);
  if (changed) headers.delete('content-length');
  return new globalThis.Response(changed ? JSON.stringify(body) : text, { status: response.status, statusText: response.statusText, headers });
}

/**
 * How a request sent its access token, for ConnectionCredentials.authenticateAccessToken: `bearer`, or `dpop`
 * with the check of its one `DPoP` proof header against `htu` (the URL of the request from PUBLIC_URL).
 * Throws AccessTokenError (invalid_dpop_proof) for `DPoP` without exactly one proof header.
 */
export function tokenSender(req: Request, deps: Pick<McpTransportDeps, 'db' | 'clock'>, scheme: 'bearer' | 'dpop', token: string, htu: string): TokenSender {
  if (scheme === 'bearer') return { scheme };
  const proof = req.headers.dpop;
  if (headerCount(req, 'dpop') !== 1 || typeof proof !== 'string' || proof.trim() === '') {
    throw new AccessTokenError(401, 'invalid_dpop_proof', NO_DPOP_PROOF, 'invalid_dpop_proof', 'DPoP');
  }
  return {
    scheme,
    verifyProof: async (jkt) => {
      try {
        await verifyDpopProof(deps.db, { proof: proof.trim(), method: req.method, htu, accessToken: token, jkt, now: deps.clock.now() });
      } catch (err) {
        if (err instanceof DpopProofError) throw new AccessTokenError(401, 'invalid_dpop_proof', err.message, 'invalid_dpop_proof', 'DPoP');
        throw err;
      }
    },
  };
}

/**
 * `GET /v1/delegation/members` and `GET /v1/operations` with an MCP connection's access token (`Bearer`,
 * or `DPoP` with its proof): what the connection may call and whom it may act for, as a key learns
 * them. Every other /v1 operation takes API keys and sessions only.
 */
export const CONNECTION_DISCOVERY_ROUTES: ReadonlySet<string> = new Set(['GET /delegation/members', 'GET /operations']);

/**
 * The connection credential of a /v1 discovery request whose Authorization is an access token, or
 * undefined when it is not one (an API key, or no `Bearer`/`DPoP` token): its refusals in the /v1
 * error body (401 invalid_key, 403 forbidden, 400 invalid_input).
 */
export async function discoveryConnectionCredential(
  req: Request,
  deps: Pick<McpTransportDeps, 'db' | 'clock' | 'connections' | 'resource'>,
  route: string,
): Promise<Credential | undefined> {
  if (!CONNECTION_DISCOVERY_ROUTES.has(route)) return undefined;
  const match = /^(Bearer|DPoP) +(\S+)$/i.exec((req.headers.authorization ?? '').trim());
  if (!match || match[2]!.startsWith('wso_') || match[2]!.startsWith('wss_')) return undefined;
  const scheme = match[1]!.toLowerCase() as 'bearer' | 'dpop';
  const token = match[2]!;
  try {
    const htu = `${deps.resource.issuer}${new URL(req.originalUrl, deps.resource.issuer).pathname}`;
    return await deps.connections.authenticateAccessToken(token, tokenSender(req, deps, scheme, token, htu));
  } catch (err) {
    if (!(err instanceof AccessTokenError)) throw err;
    // Not an access token this service knows: answered as any other bad API key (401 invalid_key).
    if (err.message === TOKEN_UNKNOWN || err.message === TOKEN_MALFORMED) return undefined;
    if (err.status === 403) throw forbidden(err.message);
    if (err.status === 400) throw invalidInput(err.message);
    throw invalidKey(err.message);
  }
}

/** The routes of `/v1/mcp` (mount before the /v1 operations router). */
export function mcpRoutes(deps: McpTransportDeps): express.Router {
  const { config, logger, connections, resource } = deps;
  const factory = mcpServerFactory({ execute: deps.execute, logger, validator: deps.validator, version: deps.version });
  // 2026-07-28 traffic: the SDK's per-request entry, one JSON body per answer. `auto` answers exactly as `json`
  // here (it streams only when a handler sends a message before its result, and ours send none), without the
  // console warning `json` prints at every start.
  const modern = createMcpHandler(factory, { legacy: 'reject', responseMode: 'auto', onerror: (err) => logger.warn({ err: { message: err.message } }, 'mcp request refused') });
  // 2025-era traffic: the stateless transport the SDK's own fallback builds, but answering JSON rather than one
  // server-sent event (we emit no mid-call messages): the same answers, cheaper to make and to read.
  const legacy = async (request: globalThis.Request, options: McpHandlerRequestOptions): Promise<globalThis.Response> => {
    const server = factory({ era: 'legacy', authInfo: options.authInfo, requestInfo: request });
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    await server.connect(transport);
    try {
      return await transport.handleRequest(request, options);
    } finally {
      void transport.close().catch(() => undefined);
      void server.close().catch(() => undefined);
    }
  };
  const node = toNodeHandler(
    { fetch: async (request, options = {}) => ((await isLegacyRequest(request, options.parsedBody)) ? legacy(request, options) : withServedRevisions(await modern.fetch(request, options))) },
    { onerror: (err) => logger.error({ err }, 'mcp adapter') },
  );

  /** Answers with our error body (and its challenge on 401 / 403). */
  const refuse = (res: Response, status: number, code: string, message: string, headers: Record<string, string> = {}) => {
    const body = { error: code, message, request_id: requestIdOf(res) };
    noteError(res, body);
    for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
    res.status(status).json(body);
  };
  const challenge = (res: Response, err: AccessTokenError) => {
    const params = err.challengeError ? { error: err.challengeError, description: err.message } : {};
    refuse(res, err.status, err.code, err.message, {
      'WWW-Authenticate': err.scheme === 'DPoP' ? dpopChallenge(resource, params) : bearerChallenge(resource, params),
    });
  };

  /**
   * The credential of a request, or an AccessTokenError: only `Authorization: Bearer <access token>`, or
   * `Authorization: DPoP <access token>` with one `DPoP` proof header (RFC 9449) for a token bound to a key.
   */
  const authenticate = async (req: Request): Promise<Credential> => {
    // Node keeps only the first of two Authorization headers in req.headers: count the raw ones.
    if (headerCount(req, 'authorization') > 1) throw new AccessTokenError(400, 'invalid_request', TWO_AUTHORIZATION_HEADERS);
    const authorization = req.headers.authorization;
    const inQuery = 'access_token' in (req.query as Record<string, unknown>);
    if (authorization === undefined || authorization.trim() === '') {
      if (inQuery) throw new AccessTokenError(401, 'invalid_token', TOKEN_IN_QUERY, null);
      if (sessionTokenOf(req) !== undefined) throw new AccessTokenError(401, 'invalid_token', SESSION_REFUSED);
      throw new AccessTokenError(401, 'invalid_token', NO_TOKEN, null);
    }
    if (inQuery) throw new AccessTokenError(400, 'invalid_request', TWO_METHODS);
    const scheme = /^(\S+)(?: +(.*))?$/.exec(authorization.trim());
    const name = scheme?.[1]!.toLowerCase();
    if (!scheme || (name !== 'bearer' && name !== 'dpop')) throw new AccessTokenError(401, 'invalid_token', NOT_BEARER, null);
    const token = (scheme[2] ?? '').trim();
    if (token.startsWith('wso_')) throw new AccessTokenError(401, 'invalid_token', API_KEY_REFUSED);
    if (token.startsWith('wss_')) throw new AccessTokenError(401, 'invalid_token', SESSION_REFUSED);
    return connections.authenticateAccessToken(token, tokenSender(req, deps, name, token, resource.resource));
  };

  const router = express.Router();
  router.all(MCP_PATH, async (req: Request, res: Response) => {
    const log: McpLogFields = {};
    // The request's log line: the metric `mcp`, the URL without its query (never a token), the connection, tool and operation.
    const note: RequestLogNote = { metric: 'mcp', url: req.originalUrl.includes('?') ? `${MCP_PATH}?[redacted]` : MCP_PATH, fields: log };
    (res.locals as { log?: RequestLogNote }).log = note;
    const problem = hostOriginProblem(req, config, deps.allowedOrigins);
    if (problem) return refuse(res, 403, 'forbidden', problem);
    const origin = req.headers.origin;
    if (origin !== undefined) {
      // An allowed browser client (the check above passed): CORS, so it can read the answers and challenges.
      res.setHeader('Access-Control-Allow-Origin', origin);
      res.setHeader('Vary', 'Origin');
      res.setHeader('Access-Control-Expose-Headers', 'WWW-Authenticate, Mcp-Session-Id, Request-Id, Retry-After');
    }
    if (req.method === 'OPTIONS') {
      res.setHeader('Access-Control-Allow-Methods', 'POST');
      res.setHeader('Access-Control-Allow-Headers', 'Authorization, DPoP, Content-Type, Accept, MCP-Protocol-Version, Mcp-Method, Mcp-Name, Service-Act-As, Last-Event-ID');
      res.setHeader('Access-Control-Max-Age', '600');
      return void res.status(204).end();
    }
    let credential: Credential;
    try {
      credential = await authenticate(req);
    } catch (err) {
      if (err instanceof AccessTokenError) return challenge(res, err);
      const mapped = toServiceError(err);
      if (!mapped) throw err;
      return refuse(res, mapped.status, mapped.code, mapped.message, mapped.headers);
    }
    (res.locals as { credential?: Credential }).credential = credential;
    log.connection = credential.keyId;
    if (req.method !== 'POST') {
      // Stateless: no standalone SSE stream (GET) and no session to end (DELETE).
      return refuse(res, 405, 'method_not_allowed', `/v1/mcp is called with POST, not ${req.method} (no session and no standalone stream: every request is answered on its own).`, { Allow: 'POST' });
    }
    let body: unknown;
    try {
      const problem = contentTypeProblem(req, req.is('application/json'));
      if (problem) throw invalidJson(problem);
      body = await readJsonObject(req);
    } catch (err) {
      const mapped = err instanceof ServiceError ? err : toServiceError(err);
      if (!mapped) throw err;
      return refuse(res, mapped.status, mapped.code, mapped.message, mapped.headers);
    }
    const actAs = req.headers['service-act-as'];
    const call: McpCallContext = { credential, actAs: typeof actAs === 'string' ? actAs : undefined, requestId: requestIdOf(res), note: log };
    // AuthInfo is pass-through for the SDK (it verifies nothing); the token itself is never handed on.
    (req as Request & { auth?: unknown }).auth = {
      token: '[redacted]',
      clientId: connectionInfoOf(credential)?.clientId ?? '',
      scopes: [MCP_SCOPE],
      extra: { mcp: call },
    };
    await node(req, res, body);
  });
  return router;
}
