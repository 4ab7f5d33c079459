/**
 * The one path an authenticated call of an operation takes, whoever makes it: the HTTP `/v1` router
 * (an API key or a sign-in session) and the MCP endpoint (a connection's tool call). Validation
 * against the document, grants and act-as, then the handler (queries) or the idempotency layer
 * (commands; a phased command's `prepare` runs first, outside any transaction), then the
 * after-commit wake-up and the command's declared effects (jobs enqueued with `beforeAnswer`), run
 * with no transaction open and waited for before the answer; a command made with
 * `answeredAfterEffects` then reads its answer, which the idempotency receipt stores in place of the
 * one held at commit. Errors are thrown as the documented ServiceErrors; the
 * caller turns them into its own answer (an HTTP error body, or an MCP tool result with isError).
 */
import type { Database, Sql } from '../db/database.ts';
import type { CatalogueEntry } from '../generated/catalogue.ts';
import { authorize } from './access.ts';
import type { Clock } from './clock.ts';
import type { ServiceConfig } from './config.ts';
import type { Credential, MemberInfo } from './credentials.ts';
import type { Idempotency } from './idempotency.ts';
import type { EffectReport, JobQueue } from './jobs.ts';
import type { HandlerMap, OperationContext } from './operation.ts';
import type { ContractValidator } from './validation.ts';

export interface ExecutionParts {
  db: Database;
  clock: Clock;
  config: ServiceConfig;
  handlers: HandlerMap;
  jobs: JobQueue;
  idempotency: Idempotency;
  validator: ContractValidator;
  /** Called after a command committed (not for a replay), with its transaction. */
  afterCommand?: (sql: Sql) => void;
}

export interface OperationCall {
  credential: Credential;
  entry: CatalogueEntry;
  /** The JSON body (POST operations), else undefined. */
  input: unknown;
  /** Request headers by lower-case name, as validated against the operation (`idempotency-key`, `service-act-as`). */
  headers: Record<string, unknown>;
  /** Query parameters. */
  query: Record<string, unknown>;
}

export interface OperationOutcome {
  status: number;
  body: unknown;
  /** A command answered from its idempotency receipt. */
  replayed: boolean;
  /** The member acted for, or null for workspace access. */
  member: MemberInfo | null;
}

export type ExecuteOperation = (call: OperationCall) => Promise<OperationOutcome>;

/** The execution function of one process (the platform makes one and hands it to the /v1 router and the MCP endpoint). */
export function createExecutor(parts: ExecutionParts): ExecuteOperation {
  const { db, clock, config, handlers, jobs, idempotency, validator } = parts;
  return async ({ credential, entry, input, headers, query }) => {
    validator.validateRequest(entry, headers, query, input);
    const actAs = headers['service-act-as'];
    // A session, or a personal connection, acts as its member wherever an operation can run as one.
    const implicit = entry.actAs === 'none' ? undefined : credential.sessionMember?.id;
    const member = authorize(credential, entry, typeof actAs === 'string' ? actAs : implicit);
    const handler = handlers[entry.id as keyof HandlerMap] as (input: unknown, ctx: OperationContext) => Promise<unknown>;
    const base = { operation: entry, credential, workspaceId: credential.workspaceId, member, now: clock.now(), db, clock, config, jobs };
    if (entry.kind === 'query') return { status: 200, body: await handler(input, { ...base, sql: db.sql }), replayed: false, member };
    // A phased command's checks and outside reads, before its transaction opens (server/operation.ts).
    const { prepare, answer } = handler as {
      prepare?: (input: unknown, ctx: OperationContext) => Promise<unknown>;
      answer?: (input: unknown, ctx: OperationContext, stored: unknown, effects: readonly EffectReport[]) => Promise<unknown>;
    };
    const prepared = prepare ? { value: await prepare(input, { ...base, sql: db.sql }) } : undefined;
    let committed: Sql | undefined;
    const result = await idempotency.run(
      { keyId: credential.keyId, memberId: member?.id ?? null, operationId: entry.id, idempotencyKey: String(headers['idempotency-key']), body: input },
      (sql) => handler(input, { ...base, sql: (committed = sql), ...(prepared ? { prepared } : {}) }),
      { answerAfterEffects: answer !== undefined },
    );
    if (result.replayed || result.status !== 200 || !committed) return { ...result, member };
    // Started before the wake-up, so this process runs them (their rows are claimed by it already).
    const effects = jobs.runAfterCommit(committed);
    parts.afterCommand?.(committed);
    const report = await effects;
    if (!result.settle) return { status: result.status, body: result.body, replayed: false, member };
    let body = result.body;
    try {
      if (answer) body = await answer(input, { ...base, sql: db.sql }, result.body, report);
    } catch {
      body = result.body; // the answer stored at commit
    }
    // Should this small write fail, the receipt keeps the answer held at commit, replayed once its lock is stale.
    await result.settle(body).catch(() => undefined);
    return { status: result.status, body, replayed: false, member };
  };
}
