import type { Database, Sql } from '../db/database.ts';
import type { AnyOperationId, CatalogueEntry } from '../generated/catalogue.ts';
import type { operations } from '../generated/openapi.ts';
import type { Clock } from './clock.ts';
import type { ServiceConfig } from './config.ts';
import type { Credential, MemberInfo } from './credentials.ts';
import type { JobQueue } from './jobs.ts';

/** Request body of an operation, from the generated types. */
export type Input<Op extends AnyOperationId> = operations[Op] extends { requestBody: { content: { 'application/json': infer B } } } ? B : undefined;
/** 200 response body of an operation, from the generated types. */
export type Output<Op extends AnyOperationId> = operations[Op] extends { responses: { 200: { content: { 'application/json': infer R } } } } ? R : never;

/** The automation run on whose behalf a change is made: written on its change events (loop guard). */
export interface EventCause {
  readonly runId: string;
  /** `app_id/rule_id` of the run's rule. */
  readonly rule: string;
  /** How many runs led to this one (1 for a run triggered by an API write). */
  readonly depth: number;
}

/** What a handler knows about the call it serves. */
export interface OperationContext {
  readonly operation: CatalogueEntry;
  readonly credential: Credential;
  readonly workspaceId: string;
  /** The member acted for (`Service-Act-As`), or null for workspace access. */
  readonly member: MemberInfo | null;
  /** Request time (Unix ms) from the service clock. */
  readonly now: number;
  /** Queries: autocommit. Commands: the command's transaction, which also stores the idempotency receipt. */
  readonly sql: Sql;
  readonly db: Database;
  readonly clock: Clock;
  /** The service's configuration (e.g. its public URL, the egress policy). */
  readonly config: ServiceConfig;
  /** Set when an automation run makes this call (server/internalCalls.ts); its change events carry it. */
  readonly cause?: EventCause;
  /** Enqueues background jobs in this call's transaction (`ctx.jobs.enqueue(ctx.sql, kind, payload)`): they exist exactly when it commits. */
  readonly jobs: JobQueue;
}

export type Handler<Op extends AnyOperationId> = (input: Input<Op>, ctx: OperationContext) => Promise<Output<Op>>;

/** One handler per operation of the catalogue; the compiler checks that none is missing. */
export type HandlerMap = { [Op in AnyOperationId]: Handler<Op> };
