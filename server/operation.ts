import type { Database, Sql } from '../db/database.ts';
import type { AnyOperationId, CatalogueEntry } from '../generated/catalogue.ts';
import type { operations } from '../generated/openapi.ts';
import type { Clock } from './clock.ts';
import type { ServiceConfig } from './config.ts';
import type { Credential, MemberInfo } from './credentials.ts';
import type { EffectReport, JobQueue } from './jobs.ts';

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
  /**
   * Enqueues background jobs in this call's transaction (`ctx.jobs.enqueue(ctx.sql, kind, payload)`): they exist exactly when it commits.
   * A command's effects outside the database (a mail) are declared this way, never done in the transaction: with
   * `{ beforeAnswer: { waitMs } }` the job runs right after the commit, before the command answers (see `answeredAfterEffects`).
   */
  readonly jobs: JobQueue;
  /** What a phased command's `prepare` found before its transaction opened (set by the executor; see `phased`). */
  readonly prepared?: { readonly value: unknown };
}

/**
 * An operation's handler. A command made with `phased` also carries its first phase, `prepare`, which
 * the executor runs before the transaction (and before the idempotency key is taken).
 */
export type Handler<Op extends AnyOperationId> = ((input: Input<Op>, ctx: OperationContext) => Promise<Output<Op>>) & {
  readonly prepare?: (input: Input<Op>, ctx: OperationContext) => Promise<unknown>;
  readonly answer?: (input: Input<Op>, ctx: OperationContext, stored: Output<Op>, effects: readonly EffectReport[]) => Promise<Output<Op>>;
};

/** The two phases of a command whose checks need slow or outside work (reading stored files, a scan). */
export interface CommandPhases<Op extends AnyOperationId, P> {
  /**
   * Checks and reads with no transaction open (`ctx.sql` autocommits): stored bytes, a parse, a
   * virus scan, anything that may take seconds or wait on another server. Writes nothing; it may run
   * again for a replay, and its findings may be stale by the time `run` starts, so `run` re-checks
   * what it relies on. Throws the documented errors that need no transaction (503, 400).
   */
  prepare(input: Input<Op>, ctx: OperationContext): Promise<P>;
  /** The writes, in the command's transaction, given what `prepare` found. */
  run(input: Input<Op>, ctx: OperationContext, prepared: P): Promise<Output<Op>>;
}

/**
 * A command in two phases (checks and outside reads before the transaction, writes in it), so that no
 * slow read or outside call holds the transaction: on SQLite that is the process's one connection.
 * Called without the executor (an internal call), both phases run in the caller's transaction.
 */
export function phased<Op extends AnyOperationId, P>(phases: CommandPhases<Op, P>): Handler<Op> {
  const handler = async (input: Input<Op>, ctx: OperationContext): Promise<Output<Op>> =>
    phases.run(input, ctx, ctx.prepared ? (ctx.prepared.value as P) : await phases.prepare(input, ctx));
  return Object.assign(handler, { prepare: phases.prepare });
}

/** A command whose answer reports what its declared effects did (e.g. which mails the mail server refused). */
export interface AnsweredPhases<Op extends AnyOperationId> {
  /** The checks and writes, in the command's transaction; declares its effects (`ctx.jobs.enqueue(..., { beforeAnswer })`). Its result is the answer stored at commit. */
  run(input: Input<Op>, ctx: OperationContext): Promise<Output<Op>>;
  /**
   * After the commit and the declared effects (each ran, or its wait ended: `effects`), with no transaction
   * open (`ctx.sql` autocommits): the answer, read from the database. Writes nothing; if it throws, the
   * answer stored at commit is given.
   */
  answer(input: Input<Op>, ctx: OperationContext, stored: Output<Op>, effects: readonly EffectReport[]): Promise<Output<Op>>;
}

/**
 * A command that answers after its effects: the executor commits `run` (the idempotency receipt holds its
 * answer), runs the declared effects, then asks `answer` and stores that in the receipt. Called without
 * the executor (an internal call), only `run` is, and the effects run as soon as the caller's transaction
 * commits (`jobs.committed`).
 */
export function answeredAfterEffects<Op extends AnyOperationId>(phases: AnsweredPhases<Op>): Handler<Op> {
  return Object.assign((input: Input<Op>, ctx: OperationContext) => phases.run(input, ctx), { answer: phases.answer });
}

/** One handler per operation of the catalogue; the compiler checks that none is missing. */
export type HandlerMap = { [Op in AnyOperationId]: Handler<Op> };
