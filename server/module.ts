import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Command } from 'commander';
import type { Router } from 'express';
import type { Logger } from 'pino';
import type { Database, MigrationFolder } from '../db/database.ts';
import type { AnyOperationId } from '../generated/catalogue.ts';
import type { WorkspaceFileSection } from './admin.ts';
import type { AuditWords } from './audit.ts';
import type { BrowserBundle } from './bundle.ts';
import type { Clock } from './clock.ts';
import type { ServiceConfig, ServiceEnv } from './config.ts';
import type { CredentialStore } from './credentials.ts';
import type { EgressClient } from './egress.ts';
import type { InternalCalls } from './internalCalls.ts';
import type { JobDefinition, JobQueue } from './jobs.ts';
import type { Mailer } from './mailer.ts';
import type { ExecuteOperation } from './execute.ts';
import type { Handler } from './operation.ts';
import type { RequestCredential } from './platform.ts';
import type { ProvidedService, Services } from './services.ts';
import type { ContractValidator } from './validation.ts';
import type { EventKindDeclaration } from './events.ts';
import type { EventConsumer } from './outbox.ts';
import type { NavEntry, PageKit } from './pages.ts';
import type { BlobStore } from './storage.ts';
import type { BackgroundWorker, Workers } from './workers.ts';

/** The operations of one namespace, each with its handler: a missing or extra one fails `tsc`. */
export type NamespaceHandlers<NS extends string> = {
  [Op in AnyOperationId as Op extends `${NS}.${string}` ? Op : never]: Handler<Op>;
};

/** What a module's pages, jobs, consumers and commands are built with (one service process). */
export interface ModuleDeps<Settings = unknown> {
  readonly db: Database;
  readonly clock: Clock;
  readonly config: ServiceConfig;
  readonly logger: Logger;
  readonly credentials: CredentialStore;
  /** The page layer: templates, the layout, security headers, sessions and CSRF for pages. */
  readonly pages: PageKit;
  /** Operations called by the service itself, as an API call would run them (automation actions). */
  readonly calls: InternalCalls;
  /** This process's module workers: `wake(name)` after committing work for one. */
  readonly workers: Pick<Workers, 'wake'>;
  /** Background jobs: `enqueue(sql, kind, payload, { runAt, key })` in the caller's transaction. */
  readonly jobs: JobQueue;
  /** Outbound HTTPS under the egress policy (webhook deliveries); the service closes it at shutdown. */
  readonly egress: EgressClient;
  /** The blob store (file bytes; the database or a shared volume, STORAGE): ask for it, never build one. */
  readonly storage: BlobStore;
  /** The mailer (SMTP, or the development mailbox without SMTP_URL): ask for it, never build one; the service closes it at shutdown. */
  readonly mailer: Mailer;
  /** The module's own settings (`ServiceModule.config`), read once when the process starts. */
  readonly settings: Settings;
  /** The event kinds every module declares (`ServiceModule.events`), by name: what webhooks and automation offer. */
  readonly eventKinds: ReadonlyMap<string, EventKindDeclaration>;
  /**
   * The one execution path of operations (validation, grants, act-as, idempotency, the handlers), for a
   * module that serves operations another way than /v1 (MCP tools), and the document's validator.
   */
  readonly operations: { readonly execute: ExecuteOperation; readonly validator: ContractValidator };
  /** What other modules provide (`ServiceModule.provides`), asked for by reference: `services.get(documentFiles)`. */
  readonly services: Services;
}

/**
 * A lean listener tried before express for its own paths (the collection endpoints): `handle` returns
 * false for requests that are not its own. `close` writes what it holds before the process ends.
 */
export interface RawEndpoint {
  handle(req: IncomingMessage, res: ServerResponse): boolean;
  /** Writes what it holds now and keeps serving (tests, which run without flush timers). */
  flush(): Promise<void>;
  close(): Promise<void>;
  /** Items held in memory and not yet stored (logged at shutdown). */
  readonly queued: number;
  /** Items refused because the queue was full, since the process started (metrics). */
  readonly refused: number;
}

/** What the admin CLI gives a module's commands: the database of DATABASE_URL, opened and migrated. */
export interface AdminDeps {
  /** Runs fn with the database and prints its result: a table for a person, JSON with `--json` (scripts/adminTable.ts). */
  withDb<T>(fn: (db: Database) => Promise<T>): Promise<void>;
  readonly clock: Clock;
}

/**
 * One module of the service (Backstage plugin, Medusa module): a namespace of the document with its
 * handlers, typed from the generated operations of that namespace, or a platform feature (members,
 * API keys, the audit log, sign-in by e-mail, the development mailbox) with no operations; and where it
 * has them its pages, lean endpoints, background jobs, record-event consumers, settings, migrations and
 * admin commands. `app.ts` lists the modules; the kernel (server/) never imports one.
 */
export interface ServiceModule<NS extends string = string, Settings = undefined> {
  /**
   * Its name: the namespace of its operations (`customers`: `customers.CreateDeal`), and the prefix of
   * its jobs, workers, consumers and event kinds. A feature without operations has a name too
   * (`members`), and `handlers: {}` (tsc checks that no operation of the document has that namespace).
   */
  readonly namespace: NS;
  /**
   * Its operations' handlers: the map itself, or a function of the module's dependencies that makes it
   * once per process (handlers that send mail, read the blob store or their settings close over `deps`).
   */
  readonly handlers: NamespaceHandlers<NS> | ((deps: ModuleDeps<Settings>) => NamespaceHandlers<NS>);
  /**
   * Its settings, read from the environment when the process starts (a bad value throws a readable
   * error) and given to its factories as `deps.settings`. Each variable is listed in `.env.example`
   * and the README's configuration table; the platform names none of them.
   */
  config?(env: ServiceEnv): Settings;
  /**
   * The services it provides to other modules (`provide(ref, impl)`, references in handlers/interfaces/):
   * made before any module's handlers, pages or jobs, so every module may ask for them in its factories.
   */
  provides?(deps: ModuleDeps<Settings>): readonly ProvidedService[];
  /** Pages and other routes outside /v1/operations, mounted at the root. */
  routes?(deps: ModuleDeps<Settings>): Router;
  /** API routes answered before the /v1 operations router (`/v1/mcp`, its resource metadata). */
  apiRoutes?(deps: ModuleDeps<Settings>): Router;
  /**
   * Its kind of credential on /v1 requests, tried before API keys and sessions (an MCP connection's
   * access token on the discovery operations); register the kind itself with `deps.credentials.registerKind`.
   */
  requestCredential?(deps: ModuleDeps<Settings>): RequestCredential;
  /** Its entries of the navigation bar on every member page (label, path, badge, who sees it). */
  navigation?(deps: ModuleDeps<Settings>): NavEntry[];
  /**
   * Path prefixes of its routes whose rest is a secret token (`/files/` for signed transfer URLs, `/sign/`
   * for signers' links): the request log cuts everything after the prefix, however the path is spelled.
   */
  readonly secretPaths?: readonly string[];
  /** Path prefixes whose query string is secret as a whole (`/oauth/`: state, PKCE challenges): the request log cuts it. */
  readonly secretQueries?: readonly string[];
  /** Its CSS file, appended to the one stylesheet of every page. */
  readonly stylesheet?: URL;
  /** Browser scripts its pages load, bundled into its compiled folder by `npm run build` (server/bundle.ts). */
  readonly browserBundles?: readonly BrowserBundle[];
  /** Lean endpoints served before express. */
  endpoints?(deps: ModuleDeps<Settings>): RawEndpoint;
  /** Background jobs by kind (`<namespace>.<what>`), run by the database-backed job runner. */
  jobs?(deps: ModuleDeps<Settings>): Record<string, JobDefinition>;
  /** Background loops by name (`<namespace>.<what>`), e.g. webhook delivery; run where jobs run. */
  workers?(deps: ModuleDeps<Settings>): Record<string, BackgroundWorker>;
  /**
   * The event kinds it emits into the outbox with `emitEvent` (in the change's transaction), each with
   * a description, its payload's schema and the operation that reads what it tells; the platform names none.
   */
  readonly events?: readonly EventKindDeclaration[];
  /** Readers of the change-event outbox by consumer name (`<namespace>.<what>`). */
  consumers?(deps: ModuleDeps<Settings>): Record<string, EventConsumer>;
  /** Operator commands, added under `npm run admin --`. */
  admin?(program: Command, deps: AdminDeps): void;
  /** What it says of the audit entries it records: their families and a sentence per action (server/audit.ts). */
  readonly audit?: AuditWords;
  /** Its section of the workspace file (`npm run admin -- apply`, `workspace add`). */
  readonly workspaceFile?: WorkspaceFileSection;
  /**
   * Its migrations folder (`YYYYMMDDHHMMSS_what_it_does.ts`), run with the platform's and every other
   * module's in one order by name. A migration's name never changes, even when its file moves.
   */
  readonly migrations?: MigrationFolder;
}

/** Any module, whatever its namespace (what the platform composes). */
export type AnyServiceModule = Omit<ServiceModule<string, unknown>, 'namespace' | 'handlers'> & { readonly namespace: string; readonly handlers: object };
