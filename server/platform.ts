import crypto from 'node:crypto';
import fs from 'node:fs';
import express, { type NextFunction, type Request, type Response } from 'express';
import type { Logger } from 'pino';
import type { Database, Sql } from '../db/database.ts';
import { type CatalogueEntry, catalogue } from '../generated/catalogue.ts';
import { dereferenced } from '../generated/dereferenced.ts';
import { document } from '../generated/document.ts';
import { authorize } from './access.ts';
import type { Clock } from './clock.ts';
import type { ServiceConfig } from './config.ts';
import { contentTypeProblem, readJsonObject } from './body.ts';
import { type Credential, CredentialStore } from './credentials.ts';
import { errorMiddleware, invalidJson, methodNotAllowed, noteError, notFound, requestIdOf, toServiceError } from './errors.ts';
import { Idempotency } from './idempotency.ts';
import { InternalCalls } from './internalCalls.ts';
import type { JobQueue } from './jobs.ts';
import { redactUrl, requestScope, SIGNIN_PREFIX } from './logger.ts';
import { distance } from './suggest.ts';
import type { HandlerMap, OperationContext } from './operation.ts';
import { Metrics } from './metrics.ts';
import { PageKit, sessionTokenOf } from './pages.ts';
import { checkOrigin, signinRoutes } from './signin.ts';
import { ContractValidator } from './validation.ts';

interface Locals {
  credential: Credential;
  entry: CatalogueEntry;
  /** The error answered (`{error, message}`), for the request's log line. */
  error: { code: string; message: string };
}

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
 * not the secret; sign-in link tokens are cut from the URL). Sets Request-Id, and HSTS when `hsts`.
 */
function requestLog(logger: Logger, metrics: Metrics, hsts: boolean, secretPaths: readonly string[]) {
  return (req: Request, res: Response<unknown, Partial<Locals>>, next: NextFunction) => {
    const started = process.hrtime.bigint();
    const id = crypto.randomUUID();
    res.setHeader('Request-Id', id);
    if (hsts && req.secure) res.setHeader('Strict-Transport-Security', HSTS);
    res.on('finish', () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      metrics.observe(res.locals.entry?.id ?? 'other', res.statusCode, seconds);
      logger.info(
        {
          request_id: id,
          req: { id, method: req.method, url: redactUrl(req.originalUrl, secretPaths) },
          res: { statusCode: res.statusCode },
          key: res.locals.credential?.kind === 'key' ? res.locals.credential.keyId : undefined,
          session: res.locals.credential?.kind === 'session' ? res.locals.credential.keyId : undefined,
          operation: res.locals.entry?.id,
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
function operationsRouter(options: PlatformOptions, parts: { credentials: CredentialStore; idempotency: Idempotency; validator: ContractValidator }): express.Router {
  const { db, clock, config, logger, handlers } = options;
  const { credentials, idempotency, validator } = parts;

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
  const authenticate = (req: Request): Promise<Credential> => {
    const authorization = req.headers.authorization;
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
    let input: unknown;
    if (entry.method === 'post') {
      const problem = contentTypeProblem(req, req.is('application/json'));
      if (problem) throw invalidJson(problem);
      input = await readJsonObject(req);
    }
    validator.validateRequest(entry, req.headers, req.query as Record<string, unknown>, input);
    const actAs = req.headers['service-act-as'];
    // A session acts as its member wherever an operation can run as one (it may call no other).
    const implicit = entry.actAs === 'none' ? undefined : credential.sessionMember?.id;
    const member = authorize(credential, entry, typeof actAs === 'string' ? actAs : implicit);
    const handler = handlers[entry.id as keyof HandlerMap] as (input: unknown, ctx: OperationContext) => Promise<unknown>;
    const base = { operation: entry, credential, workspaceId: credential.workspaceId, member, now: clock.now(), db, clock, config, jobs: options.jobs };
    if (entry.kind === 'query') return send(res, 200, await handler(input, { ...base, sql: db.sql }));
    let committed: Sql | undefined;
    const result = await idempotency.run(
      { keyId: credential.keyId, memberId: member?.id ?? null, operationId: entry.id, idempotencyKey: String(req.headers['idempotency-key']), body: input },
      (sql) => handler(input, { ...base, sql: (committed = sql) }),
    );
    if (result.replayed) res.setHeader('Idempotency-Replayed', 'true');
    else if (result.status === 200 && committed) options.afterCommand?.(committed);
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
  const pages = new PageKit({ credentials });
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', config.trustProxy);
  app.set('etag', false);
  app.set('query parser', 'simple');
  // Only a trusted proxy can say the request came over https (X-Forwarded-Proto).
  const hsts = config.trustProxy !== false;

  app.use(requestLog(logger, metrics, hsts, [SIGNIN_PREFIX, ...(options.secretPaths ?? [])]));

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

  app.use('/v1', operationsRouter(options, { credentials, idempotency, validator }));
  app.use(signinRoutes({ db, clock, logger, pages }));
  app.get('/assets/page.css', pages.css);
  return {
    app,
    credentials,
    pages,
    /** Operations called by the service itself (automation actions), with the same validation and handlers. */
    calls: new InternalCalls(db, clock, config, handlers, validator, options.jobs),
    /** Adds a module's routes (pages) after the platform's own. */
    mount: (router: express.Router) => void app.use(router),
    /** Ends the chain: unknown endpoints and the documented error body. Call after every mount. */
    finish: () => {
      app.use((req, _res, next) => next(notFound(`No such endpoint ${req.method} ${req.path}.`)));
      app.use(errorMiddleware(logger));
    },
  };
}
