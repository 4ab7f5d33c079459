import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { Database, Sql } from '../db/database.ts';
import { deleteReceiptsBefore } from '../db/queries/idempotency.ts';
import type { Clock } from './clock.ts';
import type { ServiceConfig } from './config.ts';
import { EgressClient } from './egress.ts';
import { JobRunner } from './jobs.ts';
import { createMailer, mailStartupLine, pruneMailboxJob } from './mailer.ts';
import type { AnyServiceModule, ModuleDeps, RawEndpoint } from './module.ts';
import type { HandlerMap } from './operation.ts';
import type { EventKindDeclaration } from './events.ts';
import { type EventConsumer, OutboxRunner, pruneOutboxJob } from './outbox.ts';
import { createPlatform } from './platform.ts';
import { ServiceRegistry } from './services.ts';
import { createBlobStore } from './storage.ts';
import { type BackgroundWorker, Workers } from './workers.ts';

export interface ServiceDeps {
  db: Database;
  clock: Clock;
  config: ServiceConfig;
  logger: Logger;
}

/**
 * Builds one service process from the platform and the given modules: the HTTP listener (each
 * module's lean endpoints first, then the express app with every module's handlers and pages) and
 * the background jobs (the platform's and each module's), and every module's change-event consumers.
 */
export function buildService(deps: ServiceDeps, modules: readonly AnyServiceModule[]) {
  // Filled below once the modules' dependencies exist (a module may make its handlers from them); read per call.
  const handlers = {} as HandlerMap;
  const byNamespace: Record<string, RawEndpoint> = {};
  let outbox: OutboxRunner | null = null;
  const jobs = new JobRunner(deps.db, deps.clock, deps.logger);
  const afterCommand = (sql: Sql) => {
    outbox?.wake();
    jobs.committed(sql);
  };
  const secretPaths = modules.flatMap((m) => m.secretPaths ?? []);
  const secretQueries = modules.flatMap((m) => m.secretQueries ?? []);
  const platform = createPlatform({ ...deps, handlers, jobs, endpoints: () => byNamespace, afterCommand, secretPaths, secretQueries });
  // The workers are built from the modules below; what a module is given wakes them once they exist.
  let workers: Workers | null = null;
  const wakeWorker = { wake: (name: string) => workers?.wake(name) };
  const egress = new EgressClient(deps.config.egress);
  // One mailer per process; where mail goes is said at start (the development mailbox, with how to read it).
  const mailer = createMailer(deps.config.mail, deps);
  const mailLine = mailStartupLine(deps.config.mail);
  deps.logger[mailLine.level](mailLine.fields, mailLine.message);
  const storage = createBlobStore(deps.db, deps.clock, deps.config.storage);
  const eventKinds = new Map<string, EventKindDeclaration>();
  for (const e of modules.flatMap((m) => m.events ?? [])) {
    if (eventKinds.has(e.kind)) throw new Error(`two modules declare the event kind ${e.kind}`);
    eventKinds.set(e.kind, e);
  }
  const operations = { execute: platform.execute, validator: platform.validator };
  const services = new ServiceRegistry();
  const shared = { ...deps, credentials: platform.credentials, pages: platform.pages, calls: platform.calls, workers: wakeWorker, egress, mailer, storage, jobs, eventKinds, operations, services };
  // Each module's settings are read once, here, so a bad value stops the process at start.
  const depsOf = new Map(modules.map((m): [AnyServiceModule, ModuleDeps] => [m, { ...shared, settings: m.config?.(deps.config.env) }]));
  const moduleDeps = (m: AnyServiceModule): ModuleDeps => depsOf.get(m)!;
  // What modules provide each other, before anything of theirs is made.
  for (const m of modules) if (m.provides) services.add(m.namespace, m.provides(moduleDeps(m)));
  for (const m of modules) Object.assign(handlers, typeof m.handlers === 'function' ? (m.handlers as (deps: ModuleDeps) => object)(moduleDeps(m)) : m.handlers);
  platform.pages.compose(deps, [
    ...modules.map((m) => ({ navigation: m.navigation?.(moduleDeps(m)), stylesheet: m.stylesheet })),
  ]);
  // Modules' API routes (before /v1's operations), their kinds of credential on /v1, then their pages.
  for (const m of modules) if (m.apiRoutes) platform.mountApi(m.apiRoutes(moduleDeps(m)));
  for (const m of modules) if (m.requestCredential) platform.addRequestCredential(m.requestCredential(moduleDeps(m)));
  for (const m of modules) if (m.routes) platform.mount(m.routes(moduleDeps(m)));
  // `GET /`, scoped links, and the HTML 404 / 405 pages outside /v1: after every module's pages.
  platform.mount(platform.pages.routes());
  platform.finish();

  jobs.define('idempotency.prune', {
    everyMs: 10 * 60_000,
    run: async () => {
      const removed = await deleteReceiptsBefore(deps.db.sql, deps.clock.now() - deps.config.idempotencyRetentionHours * 3_600_000);
      if (removed) deps.logger.info({ removed }, 'pruned idempotency receipts');
    },
  });
  jobs.define('storage.cleanup', {
    everyMs: 60 * 60_000,
    run: async () => {
      // A put still being written touches its blob with every chunk; a day without one is a crashed process's.
      const removed = await storage.removeIncompleteBlobs(deps.clock.now() - 86_400_000);
      if (removed) deps.logger.info({ removed }, 'removed unfinished blobs');
    },
  });
  for (const m of modules) for (const [kind, def] of Object.entries(m.jobs?.(moduleDeps(m)) ?? {})) jobs.define(kind, def);

  const consumers: Record<string, EventConsumer> = {};
  for (const m of modules) {
    for (const [name, consumer] of Object.entries(m.consumers?.(moduleDeps(m)) ?? {})) {
      if (name in consumers) throw new Error(`two modules define the outbox consumer ${name}`);
      consumers[name] = consumer;
    }
  }
  outbox = new OutboxRunner(deps.db, deps.clock, deps.logger, consumers, { onCommit: (sql) => jobs.committed(sql) });
  jobs.define('mailbox.prune', pruneMailboxJob(deps.db, deps.clock, deps.logger));
  jobs.define('outbox.prune', pruneOutboxJob(deps.db, deps.clock, deps.logger, deps.config.outboxRetentionDays * 86_400_000));

  const loops: Record<string, BackgroundWorker> = {};
  for (const m of modules) {
    for (const [name, worker] of Object.entries(m.workers?.(moduleDeps(m)) ?? {})) {
      if (name in loops) throw new Error(`two modules define the worker ${name}`);
      loops[name] = worker;
    }
  }
  workers = new Workers(loops, deps.logger);

  for (const m of modules) if (m.endpoints) byNamespace[m.namespace] = m.endpoints(moduleDeps(m));
  const endpoints = Object.values(byNamespace);
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    for (const e of endpoints) if (e.handle(req, res)) return;
    platform.app(req, res);
  };
  return {
    app: platform.app,
    handler,
    jobs,
    /** The change-event consumers of every module (`outbox.runOnce()` in tests, `start()` / `stop()` in a server). */
    outbox,
    /** The modules' background workers (`start()` / `stop()` in a process that runs jobs; `runOnce(name)` in tests). */
    workers,
    credentials: platform.credentials,
    /** The mailer the modules are given (`deps.mailer`). */
    mailer,
    /** The blob store the modules are given (`deps.storage`). */
    storage,
    /** Items the lean endpoints hold in memory, not yet stored. */
    get queued() {
      return endpoints.reduce((n, e) => n + e.queued, 0);
    },
    /** Stores what the lean endpoints hold and closes the egress client's and the mailer's kept connections (at shutdown). */
    closeEndpoints: () => Promise.all([...endpoints.map((e) => e.close()), egress.close(), mailer.close()]).then(() => undefined),
    /** The lean endpoints by namespace. */
    endpoints: byNamespace,
  };
}
