import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import http, { type Server } from 'node:http';
import { Writable } from 'node:stream';
import pino, { type Logger } from 'pino';
import { createService, migrations } from '../../app.ts';
import { type Database, openDatabase } from '../../db/database.ts';
import { createClient, type ServiceClient } from '../../generated/client.ts';
import { type ApplyResult, applyWorkspace, type WorkspaceSpec } from '../../server/admin.ts';
import { FakeClock } from '../../server/clock.ts';
import { loadConfig, type ServiceConfig } from '../../server/config.ts';
import { loggerOptions } from '../../server/logger.ts';
import type { RawEndpoint } from '../../server/module.ts';

/** A fresh schema per test service, so runs never see each other's rows; dropped when the service closes. */
function withSchema(url: string): string {
  const u = new URL(url);
  u.searchParams.set('schema', `wsops_test_${process.pid}_${Math.random().toString(36).slice(2, 10)}`);
  return u.toString();
}

export interface TestDatabase {
  name: 'sqlite' | 'postgres';
  url: () => string;
}

/** The databases this run covers: SQLite always; PostgreSQL when TEST_POSTGRES_URL is set (npm test sets it). */
export const databases: TestDatabase[] = [
  { name: 'sqlite' as const, url: () => `sqlite:${path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'wsops-test-')), 'service.sqlite')}` },
  ...(process.env.TEST_POSTGRES_URL ? [{ name: 'postgres' as const, url: () => withSchema(process.env.TEST_POSTGRES_URL!) }] : []),
].filter((d) => !process.env.TEST_DATABASES || process.env.TEST_DATABASES.split(',').includes(d.name));

/** Runs a suite once per database (Backstage's describe.each(databases)). */
export function forEachDatabase(title: string, suite: (ctx: () => TestService) => void, overrides: Partial<ServiceConfig> = {}): void {
  for (const database of databases) {
    describe(`${title} [${database.name}]`, function () {
      this.timeout(20_000);
      let service: TestService | undefined;
      before(async () => {
        service = await startTestService(database.url(), overrides);
      });
      after(async () => {
        const logs = service?.logs() ?? '';
        await service?.close();
        const broken = logs.split('\n').filter((l) => l.includes('breaks the document'));
        if (broken.length) throw new Error(`responses broke the document:\n${broken.slice(0, 5).join('\n')}`);
      });
      suite(() => {
        if (!service) throw new Error('service not started');
        return service;
      });
    });
  }
}

export interface TestService {
  baseUrl: string;
  databaseUrl: string;
  db: Database;
  clock: FakeClock;
  config: ServiceConfig;
  /** Everything the service logged, as text. */
  logs(): string;
  jobs: ReturnType<typeof createService>['jobs'];
  /** The modules' change-event consumers; not polling: `outbox.runOnce()` handles what is there. */
  outbox: ReturnType<typeof createService>['outbox'];
  /** The modules' background workers; not polling: `workers.runOnce(name)` does what is due. */
  workers: ReturnType<typeof createService>['workers'];
  /** The modules' lean endpoints by namespace (tests run them without flush timers). */
  endpoints: Readonly<Record<string, RawEndpoint>>;
  /** The process's credential store (e.g. `usageWritten()` after calls with a key). */
  credentials: ReturnType<typeof createService>['credentials'];
  /** Stores what every lean endpoint holds (e.g. collected events). */
  flushEndpoints(): Promise<void>;
  /** The server's origin, e.g. http://127.0.0.1:PORT (the collection endpoints are below /v1 too). */
  origin: string;
  /** Creates a workspace (fresh ids each call) and returns its ids and key secrets. */
  apply(spec: WorkspaceSpec): Promise<ApplyResult>;
  client(apiKey: string, actAs?: string): ServiceClient;
  /** A plain HTTP call, for requests the typed client will not make (malformed bodies, headers). */
  post(operation: string, body: unknown, headers?: Record<string, string>): Promise<{ status: number; body: any; headers: Headers }>;
  /** Stops the service; its PostgreSQL schema is dropped unless `keepData` (a second service on the same database). */
  close(options?: { keepData?: boolean }): Promise<void>;
}

/** A logger as the entry points build it (level info), whose output the test reads back as text. */
export function capturedLogger(): { logger: Logger; logs(): string } {
  let text = '';
  const sink = new Writable({
    write(chunk, _enc, done) {
      text += chunk.toString();
      done();
    },
  });
  return { logger: pino(loggerOptions('info'), sink), logs: () => text };
}

export async function startTestService(databaseUrl: string, overrides: Partial<ServiceConfig> = {}): Promise<TestService> {
  const config: ServiceConfig = { ...loadConfig({}), databaseUrl, validateResponses: true, rateLimitPerSecond: 1000, rateLimitBurst: 1000, ...overrides, env: { COLLECT_FLUSH_INTERVAL_MS: '0', ...overrides.env } };
  const clock = new FakeClock();
  const { logger, logs } = capturedLogger();
  const db = openDatabase(databaseUrl);
  await db.migrate(migrations);
  const service = createService({ db, clock, config, logger });
  const { handler, jobs, outbox } = service;
  // As a serving process does at start: consumers that begin at the end begin here, not at their first poll.
  await outbox.prepare();
  const server: Server = await new Promise((resolve) => {
    // overrides.port: listen there (a test whose PUBLIC_URL names the port, e.g. the MCP and OAuth tests); else any free port.
    const s = http.createServer(handler).listen(overrides.port ?? 0, '127.0.0.1', () => resolve(s));
  });
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const baseUrl = `${origin}/v1`;
  return {
    baseUrl,
    databaseUrl,
    db,
    clock,
    config,
    jobs,
    outbox,
    workers: service.workers,
    endpoints: service.endpoints,
    credentials: service.credentials,
    flushEndpoints: () => Promise.all(Object.values(service.endpoints).map((e) => e.flush())).then(() => undefined),
    origin,
    logs,
    apply: (spec) => applyWorkspace(db, clock, spec),
    client: (apiKey, actAs) => createClient({ baseUrl, apiKey, ...(actAs ? { actAs } : {}) }),
    async post(operation, body, headers = {}) {
      const res = await fetch(`${baseUrl}/operations/${operation}`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', ...headers },
        body: typeof body === 'string' ? body : JSON.stringify(body),
      });
      const text = await res.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        /* keep text */
      }
      return { status: res.status, body: parsed, headers: res.headers };
    },
    async close(options = {}) {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await service.closeEndpoints();
      const schema = db.dialect === 'pg' && !options.keepData ? new URL(databaseUrl).searchParams.get('schema') : null;
      if (schema) await db.knex.raw(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await db.close();
    },
  };
}
