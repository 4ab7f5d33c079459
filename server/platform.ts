import crypto from 'node:crypto';
import express, { type NextFunction, type Request, type Response } from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import { pinoHttp } from 'pino-http';
import type { Logger } from 'pino';
import type { Database } from '../db/database.ts';
import { type CatalogueEntry, catalogue } from '../generated/catalogue.ts';
import { document } from '../generated/document.ts';
import type { paths } from '../generated/openapi.ts';
import { authorize, delegableMembers, keyMayCall } from './access.ts';
import type { Clock } from './clock.ts';
import type { ServiceConfig } from './config.ts';
import { type Credential, CredentialStore } from './credentials.ts';
import { errorMiddleware, invalidJson, notFound } from './errors.ts';
import { Idempotency } from './idempotency.ts';
import type { HandlerMap, OperationContext } from './operation.ts';

type OperationsList = paths['/operations']['get']['responses'][200]['content']['application/json'];
type MembersList = paths['/delegation/members']['get']['responses'][200]['content']['application/json'];

interface Locals {
  credential: Credential;
  entry: CatalogueEntry;
  bodyBytes?: number;
}

export interface PlatformOptions {
  db: Database;
  clock: Clock;
  config: ServiceConfig;
  logger: Logger;
  handlers: HandlerMap;
}

const byRoute = new Map<string, CatalogueEntry>(catalogue.map((e) => [`${e.method.toUpperCase()} ${e.path}`, e]));

/** Builds the express app every operation goes through: auth, rate limit, validation, grants, act-as, idempotency, errors. */
export function createPlatform(options: PlatformOptions) {
  const { db, clock, config, logger, handlers } = options;
  const credentials = new CredentialStore(db, clock, { perSecond: config.rateLimitPerSecond, burst: config.rateLimitBurst });
  const idempotency = new Idempotency(db, clock, config.idempotencyLockTimeoutMs);
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');

  app.use(
    pinoHttp({
      logger,
      genReqId: (req, res) => {
        const id = crypto.randomUUID();
        res.setHeader('Request-Id', id);
        return id;
      },
      serializers: {
        req: (req: { id: string; method: string; url: string }) => ({ id: req.id, method: req.method, url: req.url }),
        res: (res: { statusCode: number }) => ({ statusCode: res.statusCode }),
      },
      customProps: (_req, res) => {
        const locals = res.locals as Partial<Locals> | undefined;
        return { key: locals?.credential?.keyId, operation: locals?.entry?.id };
      },
    }),
  );

  app.get('/healthz', async (_req, res) => {
    await db.sql.one('SELECT 1 AS ok');
    res.json({ status: 'ok' });
  });

  const v1 = express.Router();
  v1.use(async (req: Request, res: Response<unknown, Locals>, next: NextFunction) => {
    res.locals.credential = await credentials.authenticate(req.headers.authorization);
    const entry = byRoute.get(`${req.method} ${req.path}`);
    if (!entry) throw notFound(`No operation ${req.method} ${req.path}.`);
    res.locals.entry = entry;
    if (entry.method === 'post' && !req.is('application/json')) throw invalidJson('Content-Type must be application/json.');
    next();
  });
  v1.use(
    express.json({
      limit: '1mb',
      strict: true,
      type: 'application/json',
      verify: (_req, res, buf) => {
        (res as Response<unknown, Locals>).locals.bodyBytes = buf.length;
      },
    }),
  );
  v1.use((req: Request, res: Response<unknown, Locals>, next: NextFunction) => {
    if (res.locals.entry.method !== 'post') return next();
    // body-parser turns an empty body into {}; an empty body is not a JSON object.
    if (!res.locals.bodyBytes || typeof req.body !== 'object' || req.body === null || Array.isArray(req.body)) {
      throw invalidJson('The body must be a JSON object.');
    }
    next();
  });
  app.use('/v1', v1);
  app.use(
    OpenApiValidator.middleware({
      apiSpec: structuredClone(document) as never,
      validateRequests: { allowUnknownQueryParameters: false, coerceTypes: false },
      validateResponses: config.validateResponses ? { removeAdditional: false } : false,
      validateSecurity: false,
      ignoreUndocumented: true,
    }),
  );
  app.use('/v1', async (req: Request, res: Response<unknown, Locals>) => {
    const { credential, entry } = res.locals;
    const actAs = req.headers['service-act-as'];
    const member = authorize(credential, entry, typeof actAs === 'string' ? actAs : undefined);
    if (entry.path === '/operations') {
      const items: OperationsList['items'] = catalogue
        .filter((e) => e.listed && keyMayCall(credential, e))
        .map((e) => ({
          id: e.id,
          kind: e.kind,
          contract_version: e.contractVersion,
          workspace_supported: e.workspaceSupported,
          deprecated: e.deprecated,
          act_as: e.actAs,
          ...(e.resource ? { resource: e.resource, access: [...e.access] } : {}),
        }));
      res.json({ items } satisfies OperationsList);
      return;
    }
    if (entry.path === '/delegation/members') {
      res.json({ items: delegableMembers(credential).map((m) => ({ id: m.id, name: m.name })) } satisfies MembersList);
      return;
    }
    const handler = handlers[entry.id as keyof HandlerMap] as (input: unknown, ctx: OperationContext) => Promise<unknown>;
    const base = { operation: entry, credential, workspaceId: credential.workspaceId, member, now: clock.now(), db, clock };
    if (entry.kind === 'query') {
      res.json(await handler(req.body, { ...base, sql: db.sql }));
      return;
    }
    const result = await idempotency.run(
      { keyId: credential.keyId, memberId: member?.id ?? null, operationId: entry.id, idempotencyKey: String(req.headers['idempotency-key']), body: req.body },
      (sql) => handler(req.body, { ...base, sql }),
    );
    if (result.replayed) res.setHeader('Idempotency-Replayed', 'true');
    res.status(result.status).json(result.body);
  });
  app.use((req, _res, next) => next(notFound(`No such endpoint ${req.method} ${req.path}.`)));
  app.use(errorMiddleware(logger));
  return { app, credentials };
}
