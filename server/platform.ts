import crypto from 'node:crypto';
import fs from 'node:fs';
import express, { type NextFunction, type Request, type Response } from 'express';
import type { Logger } from 'pino';
import type { Database, Sql } from '../db/database.ts';
import { type CatalogueEntry, catalogue } from '../generated/catalogue.ts';
import { dereferenced } from '../generated/dereferenced.ts';
import { document } from '../generated/document.ts';
import type { Clock } from './clock.ts';
import type { ServiceConfig } from './config.ts';
import { contentTypeProblem, readJsonObject } from './body.ts';
import { type Credential, CredentialStore, headerCount, TWO_AUTHORIZATION_HEADERS } from './credentials.ts';
import { createExecutor, type ExecuteOperation } from './execute.ts';
import { errorMiddleware, forbidden, invalidInput, invalidJson, methodNotAllowed, noteError, notFound, requestIdOf, toServiceError } from './errors.ts';
import { Idempotency } from './idempotency.ts';
import { InternalCalls } from './internalCalls.ts';
import type { JobQueue } from './jobs.ts';
import { redactUrl, requestScope, type SecretUrlParts, SIGNIN_PREFIX } from './logger.ts';
import { distance } from './suggest.ts';
import type { HandlerMap } from './operation.ts';
import { Metrics } from './metrics.ts';
import { PageKit, sessionTokenOf } from './pages.ts';
import { checkOrigin, signinRoutes } from './signin.ts';
import { ContractValidator } from './validation.ts';

interface Locals {
  credential: Credential;
  entry: CatalogueEntry;
  /** The error answered (`{error, message}`), for the request's log line. */
  error: { code: string; message: string };
  /** Set by a module's API route (`/v1/mcp`) for the request's log line. */
  log: RequestLogNote;
}

/**
 * What a module's API route (mounted with `mountApi`) says of a request for its log line and metrics:
 * the metric's operation label (`mcp`), the URL as it may be logged (never a token), and fields of its
 * own (`connection`, `tool`, `operation`), filled while the request runs.
 */
export interface RequestLogNote {
  metric: string;
  url: string;
  fields: { operation?: string } & Record<string, string | undefined>;
}

/**
 * A module's way to authenticate a /v1 request before API keys and sessions (an MCP connection's access
 * token on the two discovery operations): the credential, or undefined when the request is not its kind.
 * `route` is `METHOD /path` under /v1.
 */
export type RequestCredential = (req: Request, route: string) => Promise<Credential | undefined>;

export interface PlatformOptions {
  db: Database;
  clock: Clock;
  config: ServiceConfig;
  logger: Logger;
  handlers: HandlerMap;
  /** Where handlers enqueue jobs (`ctx.jobs`), in their command's transaction. */
  jobs: JobQueue;
  /** Called after a command committed, with its transaction (the service wakes its outbox reader and, if it enqueued jobs, its job runner). */
  afterCommand?: (sql: Sql) => void;
  /** The modules' lean endpoints, by namespace (for the metrics). */
  endpoints: () => Record<string, { queued: number; refused: number }>;
  /** Path prefixes whose rest is a secret token (the modules' `secretPaths`): cut from the request log. */
  secretPaths?: readonly string[];
  /** Path prefixes whose query string is cut whole from the request log (the modules' `secretQueries`). */
  secretQueries?: readonly string[];
}

/** HSTS for answers that came over https through a trusted proxy: one year, this host only (the operator's proxy may add more). */
export const HSTS = 'max-age=31536000';

const byRoute = new Map<string, CatalogueEntry>(catalogue.map((e) => [`${e.method.toUpperCase()} ${e.path}`, e]));
const byPath = new Map<string, CatalogueEntry>(catalogue.map((e) => [e.path, e]));

/**
 * Why no operation answers a request: the path exists with another method (405 with `Allow`), or no
 * such operation (404, naming the nearest operation id when one is close, case-insensitively).
 */
function noRoute(method: string, path: string): never {
  const other = byPath.get(path);
  if (other) {
    const allow = other.method.toUpperCase();
    throw methodNotAllowed(`${path} is called with ${allow}, not ${method}.`, allow);
  }
  const asked = path.replace(/^\/operations\//, '');
  let best: { id: string; d: number } | null = null;
  for (const e of catalogue) {
    if (!e.listed) continue;
    const d = distance(asked.toLowerCase(), e.id.toLowerCase());
    if (!best || d < best.d) best = { id: e.id, d };
  }
  const hint = path.startsWith('/operations/') && best && best.d <= Math.max(2, Math.floor(asked.length / 4)) ? ` Did you mean ${best.id}?` : '';
  throw notFound(`No operation ${method} ${path}.${hint} GET /v1/operations lists the operations this key may call.`);
}

/**
 * One line per request, and its metrics; secrets never reach it (the key or session id is logged,
 * not the secret; sign-in link tokens are cut from the URL, and from a 404 or 405 (no route: a mangled
 * link) whatever looks like a token). Sets Request-Id, and HSTS when `hsts`.
 */
function requestLog(logger: Logger, metrics: Metrics, hsts: boolean, secret: SecretUrlParts) {
  return (req: Request, res: Response<unknown, Partial<Locals>>, next: NextFunction) => {
    const started = process.hrtime.bigint();
    const id = crypto.randomUUID();
    res.setHeader('Request-Id', id);
    if (hsts && req.secure) res.setHeader('Strict-Transport-Security', HSTS);
    res.on('finish', () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      // A module's API route (e.g. /v1/mcp) says what to log: its metric label, its URL (never a token), its own fields.
      const note = res.locals.log;
      metrics.observe(res.locals.entry?.id ?? note?.metric ?? 'other', res.statusCode, seconds);
      if (!logger.isLevelEnabled('info')) return; // LOG_LEVEL=warn or quieter: the line is not built at all
      logger.info(
        {
          request_id: id,
          req: { id, method: req.method, url: note ? note.url : redactUrl(req.originalUrl, secret, res.statusCode === 404 || res.statusCode === 405) },
          res: { statusCode: res.statusCode },
          key: res.locals.credential?.kind === 'key' ? res.locals.credential.keyId : undefined,
          session: res.locals.credential?.kind === 'session' ? res.locals.credential.keyId : undefined,
          ...note?.fields,
          operation: res.locals.entry?.id ?? note?.fields.operation,
          // 4xx and 5xx: what the caller was told, beside the request id (never more than the body said).
          ...(res.locals.error ? { error: res.locals.error.code, error_message: res.locals.error.message } : {}),
          ms: Number((process.hrtime.bigint() - started) / 1000n) / 1000,
        },
        'request completed',
      );
    });
    requestScope.run({ requestId: id }, next);
  };
}

/**
 * The /v1 router every operation goes through: authentication with the rate limit, operation lookup,
 * JSON body, validation, grants and act-as, then the handler (queries) or the idempotency layer (commands).
 */
function operationsRouter(options: PlatformOptions, parts: { credentials: CredentialStore; execute: ExecuteOperation; validator: ContractValidator; requestCredentials: readonly RequestCredential[] }): express.Router {
  const { config, logger } = options;
  const { credentials, execute, validator, requestCredentials } = parts;

  /** Sends a JSON body, checking it against the document first in development and tests. */
  const send = (res: Response<unknown, Locals>, status: number, body: unknown) => {
    // A replayed error receipt is answered with this request's id, like every error body.
    if (status >= 400 && body && typeof body === 'object') {
      body = { ...body, request_id: requestIdOf(res) };
      noteError(res, body as { error?: unknown; message?: unknown });
    }
    if (config.validateResponses) {
      const problem = validator.responseProblem(res.locals.entry, status, body);
      if (problem) {
        logger.error({ operation: res.locals.entry.id, status, problem }, 'response breaks the document');
        throw new Error(`response breaks the document: ${problem}`);
      }
    }
    res.statusCode = status;
    res.setHeader('Content-Type', 'application/json; charset=utf-8');
    res.end(JSON.stringify(body));
  };

  /** The credential of a /v1 request: the API key when there is one, else a member's sign-in session cookie. */
  const authenticate = async (req: Request): Promise<Credential> => {
    // Node keeps only the first of two Authorization headers in req.headers: a second one is refused, not ignored.
    if (headerCount(req, 'authorization') > 1) throw invalidInput(TWO_AUTHORIZATION_HEADERS);
    const authorization = req.headers.authorization;
    // A module's kind of credential first (an MCP connection's access token on GET /operations and /delegation/members).
    for (const resolve of requestCredentials) {
      const credential = await resolve(req, `${req.method} ${req.path}`);
      if (credential) return credential;
    }
    const session = authorization === undefined ? sessionTokenOf(req) : undefined;
    if (session === undefined) return credentials.authenticate(authorization);
    checkOrigin(req);
    return credentials.authenticateSession(session);
  };

  const v1 = express.Router();
  v1.use(async (req: Request, res: Response<unknown, Locals>) => {
    const credential = (res.locals.credential = await authenticate(req));
    const entry = byRoute.get(`${req.method} ${req.path}`) ?? noRoute(req.method, req.path);
    res.locals.entry = entry;
    // A command on a sign-in session comes from this service's pages only: a browser sends Origin on every POST.
    if (credential.kind === 'session' && entry.kind === 'command' && entry.sessions && req.headers.origin === undefined) {
      throw forbidden(`A sign-in session may call ${entry.id} only from this service's pages: the request must carry an Origin header naming this service.`);
    }
    let input: unknown;
    if (entry.method === 'post') {
      const problem = contentTypeProblem(req, req.is('application/json'));
      if (problem) throw invalidJson(problem);
      input = await readJsonObject(req);
    }
    // Validation, grants and act-as (a session acts as its member), then the handler or the idempotency layer.
    const result = await execute({ credential, entry, input, headers: req.headers, query: req.query as Record<string, unknown> });
    if (result.replayed) res.setHeader('Idempotency-Replayed', 'true');
    return send(res, result.status, result.body);
  });
  // Documented errors of an operation are checked against the document too (development and tests).
  v1.use((err: unknown, _req: Request, res: Response<unknown, Partial<Locals>>, next: NextFunction) => {
    const mapped = toServiceError(err);
    if (mapped && res.locals.entry && config.validateResponses) {
      const problem = validator.responseProblem(res.locals.entry, mapped.status, mapped.bodyFor(requestIdOf(res)));
      if (problem) logger.error({ operation: res.locals.entry.id, status: mapped.status, problem }, 'error response breaks the document');
    }
    next(err);
  });
  return v1;
}

/**
 * Builds the express app every operation goes through, in this order: request log, authentication
 * with the rate limit (one database round trip), operation lookup, JSON body, validation against the
 * document, grants and act-as, then the handler (queries) or the idempotency layer (commands).
 */
export function createPlatform(options: PlatformOptions) {
  const { db, clock, config, logger, handlers } = options;
  const metrics = new Metrics(config.metricsToken, { db, clock, endpoints: options.endpoints });
  const credentials = new CredentialStore(db, clock, { perSecond: config.rateLimitPerSecond, burst: config.rateLimitBurst });
  const idempotency = new Idempotency(db, clock, config.idempotencyLockTimeoutMs);
  const validator = new ContractValidator(dereferenced, catalogue);
  const execute = createExecutor({ db, clock, config, handlers, jobs: options.jobs, idempotency, validator, afterCommand: options.afterCommand });
  const pages = new PageKit({ credentials });
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', config.trustProxy);
  app.set('etag', false);
  app.set('query parser', 'simple');
  // Only a trusted proxy can say the request came over https (X-Forwarded-Proto).
  const hsts = config.trustProxy !== false;

  app.use(requestLog(logger, metrics, hsts, { paths: [SIGNIN_PREFIX, ...(options.secretPaths ?? [])], queries: options.secretQueries ?? [] }));

  // Answers of /v1 are per credential: never stored by a cache, never sniffed as another type.
  app.use('/v1', (_req, res, next) => {
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Cache-Control', 'no-store');
    next();
  });

  // The document itself, without a key: it holds no secrets, and clients and people start from it
  // (the one /v1 answer a cache may keep).
  const documentYaml = fs.readFileSync(new URL('../generated/openapi.yaml', import.meta.url));
  const documentJson = JSON.stringify(document);
  app.get('/v1/openapi.yaml', (_req, res) => {
    res.setHeader('Cache-Control', 'public, max-age=300');
    res.type('application/yaml').send(documentYaml);
  });
  app.get('/v1/openapi.json', (_req, res) => {
    res.setHeader('Cache-Control', 'public, max-age=300');
    res.type('application/json').send(documentJson);
  });

  app.get('/metrics', metrics.handler);

  // For load balancers and orchestrators: 200 while the database answers, 503 when it does not.
  app.get('/healthz', async (_req, res) => {
    res.setHeader('Cache-Control', 'no-store');
    try {
      await db.sql.one('SELECT 1 AS ok');
      res.json({ status: 'ok' });
    } catch (err) {
      logger.warn({ err }, 'health check: the database does not answer');
      res.status(503).json({ status: 'unavailable', message: 'The database does not answer.' });
    }
  });

  // Modules' API routes (agent access: /v1/mcp and its resource metadata), before the operations router.
  const apiRoutes = express.Router();
  app.use(apiRoutes);
  const requestCredentials: RequestCredential[] = [];
  app.use('/v1', operationsRouter(options, { credentials, execute, validator, requestCredentials }));
  app.use(signinRoutes({ db, clock, logger, pages }));
  app.get('/assets/page.css', pages.css);
  app.get('/assets/page.js', pages.js);
  return {
    app,
    credentials,
    pages,
    /** Operations called by the service itself (automation actions), with the same validation and handlers. */
    calls: new InternalCalls(db, clock, config, handlers, validator, options.jobs),
    /** Runs an operation for a credential as /v1 does (validation, grants, idempotency): for a module serving operations another way (MCP). */
    execute,
    /** The document's validator (responses are checked against it in development and tests: `config.validateResponses`). */
    validator,
    /** Adds a module's routes (pages) after the platform's own. */
    mount: (router: express.Router) => void app.use(router),
    /** Adds a module's API routes (`/v1/mcp`), answered before the /v1 operations router. */
    mountApi: (router: express.Router) => void apiRoutes.use(router),
    /** Adds a module's kind of credential to /v1 requests, tried before API keys and sessions. */
    addRequestCredential: (resolve: RequestCredential) => void requestCredentials.push(resolve),
    /** Ends the chain: unknown endpoints and the documented error body. Call after every mount. */
    finish: () => {
      app.use((req, _res, next) => next(notFound(`No such endpoint ${req.method} ${req.path}.`)));
      app.use(errorMiddleware(logger));
    },
  };
}
