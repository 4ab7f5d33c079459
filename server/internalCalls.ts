/**
 * Operations called by the service itself (automation actions): the same handlers, request
 * validation and record rules as an API call, inside the caller's transaction, as the `system`
 * credential with workspace access. The change events they write carry the cause (the run), which
 * the automation engine reads to guard against loops.
 */
import type { Database, Sql } from '../db/database.ts';
import { type Access, type AnyOperationId, type CatalogueEntry, catalogue, resourceTypes } from '../generated/catalogue.ts';
import type { Clock } from './clock.ts';
import type { ServiceConfig } from './config.ts';
import type { Credential } from './credentials.ts';
import type { JobQueue } from './jobs.ts';
import type { EventCause, HandlerMap, Input, OperationContext, Output } from './operation.ts';
import type { ContractValidator } from './validation.ts';

export interface InternalCall {
  readonly workspaceId: string;
  /** The caller's transaction: the operation's writes commit or roll back with it. */
  readonly sql: Sql;
  readonly now: number;
  readonly cause: EventCause;
}

const everyOperation = new Set<string>(catalogue.map((e) => e.id));
const everyResource = new Map<string, ReadonlySet<Access>>(resourceTypes.map((t) => [t, new Set<Access>(['read', 'write'])]));
const byId = new Map<string, CatalogueEntry>(catalogue.map((e) => [e.id, e]));

export class InternalCalls {
  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    private readonly config: ServiceConfig,
    private readonly handlers: HandlerMap,
    private readonly validator: ContractValidator,
    private readonly jobs: JobQueue,
  ) {}

  /** Every operation of the catalogue (to find a resource type's record operations). */
  operations(): readonly CatalogueEntry[] {
    return catalogue;
  }

  /** Runs an operation as the service (workspace access); its request body is validated as an API call's. Throws its documented errors. */
  async call<Op extends AnyOperationId>(id: Op, input: Input<Op>, call: InternalCall): Promise<Output<Op>> {
    const entry = byId.get(id);
    if (!entry) throw new Error(`no operation ${id}`);
    this.validator.validateBody(entry, input);
    const credential: Credential = {
      kind: 'system',
      keyId: `system:${call.cause.runId}`,
      workspaceId: call.workspaceId,
      name: `automation ${call.cause.rule}`,
      operations: everyOperation,
      resources: everyResource,
      delegation: 'none',
      delegates: new Set(),
      members: new Map(),
      authVersion: 0,
      secretHash: Buffer.alloc(0),
    };
    const ctx: OperationContext = {
      operation: entry,
      credential,
      workspaceId: call.workspaceId,
      member: null,
      now: call.now,
      sql: call.sql,
      db: this.db,
      clock: this.clock,
      config: this.config,
      cause: call.cause,
      jobs: this.jobs,
    };
    const handler = this.handlers[id] as unknown as (input: Input<Op>, ctx: OperationContext) => Promise<Output<Op>>;
    return handler(input, ctx);
  }
}
