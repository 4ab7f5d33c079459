/**
 * The composition root: the platform (server/) with every namespace's handlers (handlers/).
 * Entry points in scripts/ and the tests build the service through this file.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { Database } from './db/database.ts';
import { deleteSaltsCreatedBefore } from './db/queries/collection.ts';
import { deleteReceiptsBefore } from './db/queries/idempotency.ts';
import { analyticsHandlers } from './handlers/analytics.ts';
import { customersHandlers } from './handlers/customers.ts';
import { workspaceHandlers } from './handlers/workspace.ts';
import type { Clock } from './server/clock.ts';
import { createCollector } from './server/collect.ts';
import type { ServiceConfig } from './server/config.ts';
import { JobRunner } from './server/jobs.ts';
import type { HandlerMap } from './server/operation.ts';
import { createPlatform } from './server/platform.ts';

export const handlers = { ...workspaceHandlers, ...customersHandlers, ...analyticsHandlers } satisfies HandlerMap;

export interface ServiceDeps {
  db: Database;
  clock: Clock;
  config: ServiceConfig;
  logger: Logger;
}

/**
 * Builds the HTTP app and the background jobs of one service process. `handler` is the request
 * listener to serve: the lean collection endpoints (server/collect.ts) first, then the express app.
 */
export function createService(deps: ServiceDeps) {
  const { app, credentials } = createPlatform({ ...deps, handlers });
  const jobs = new JobRunner(deps.db, deps.clock, deps.logger);
  jobs.define('idempotency.prune', {
    everyMs: 10 * 60_000,
    run: async () => {
      const removed = await deleteReceiptsBefore(deps.db.sql, deps.clock.now() - deps.config.idempotencyRetentionHours * 3_600_000);
      if (removed) deps.logger.info({ removed }, 'pruned idempotency receipts');
    },
  });
  jobs.define('analytics.salts.prune', {
    everyMs: 60 * 60_000,
    run: async () => {
      const removed = await deleteSaltsCreatedBefore(deps.db.sql, deps.clock.now() - 48 * 3_600_000);
      if (removed) deps.logger.info({ removed }, 'deleted visitor-hash salts older than 48 h');
    },
  });
  const collector = createCollector(deps);
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    if (!collector.handle(req, res)) app(req, res);
  };
  return { app, handler, collector, jobs, credentials };
}
