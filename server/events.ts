/**
 * Change events: written in the writer's transaction into `record_events` (the outbox), read by the
 * modules' consumers (server/outbox.ts). The platform carries an event's kind as an opaque name: it
 * writes the record kinds (`resource.created`, `.updated`, `.deleted`) itself and any other kind is
 * declared by the module that emits it (`eventKind('<namespace-or-thing>.<what>')`, usually also a
 * value of the document's webhook event names), so a new module brings new kinds without a line here.
 */
import type { Sql } from '../db/database.ts';
import { insertRecordEvent } from '../db/queries/events.ts';
import { newId } from './ids.ts';
import type { OperationContext } from './operation.ts';

declare const kindBrand: unique symbol;

/** An event kind's name (`<noun>.<verb>`, e.g. `resource.updated`): declared once by its emitter, carried opaquely. */
export type EventKind<Name extends string = string> = Name & { readonly [kindBrand]: true };

const KIND = /^[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)+$/;

/** Declares an event kind; its name is lowercase dotted words (at most 40 characters, the column's width). */
export function eventKind<Name extends string>(name: Name): EventKind<Name> {
  if (!KIND.test(name) || name.length > 40) throw new Error(`event kind ${JSON.stringify(name)}: lowercase dotted words, e.g. thing.happened`);
  return name as EventKind<Name>;
}

/** The kinds of record changes the record kit writes. */
export const RECORD_EVENTS = {
  created: eventKind('resource.created'),
  updated: eventKind('resource.updated'),
  deleted: eventKind('resource.deleted'),
} as const;

/** A record change's kind (the platform's own names). */
export type RecordEventType = 'resource.created' | 'resource.updated' | 'resource.deleted';

export interface RecordChange {
  type: RecordEventType;
  resourceType: string;
  recordId: string;
  private: boolean;
  /** Keys of `data` that changed (resource.updated). */
  changedFields?: string[];
}

/**
 * Writes the change event of a committed record write, in the caller's transaction, so a rolled-back
 * write leaves no event. Webhook delivery reads these rows.
 */
export async function recordChanged(ctx: OperationContext, change: RecordChange): Promise<void> {
  await insertRecordEvent(ctx.sql, {
    id: newId('evt'),
    workspace_id: ctx.workspaceId,
    type: change.type,
    resource_type: change.resourceType,
    record_id: change.recordId,
    private: change.private,
    changed_fields: change.changedFields ? JSON.stringify(change.changedFields) : null,
    actor_key_id: ctx.credential.kind === 'system' ? null : ctx.credential.keyId,
    actor_member_id: ctx.member?.id ?? null,
    occurred_at: ctx.now,
    cause_run_id: ctx.cause?.runId ?? null,
    cause_rule: ctx.cause?.rule ?? null,
    cause_depth: ctx.cause?.depth ?? null,
  });
}

/** An event of a kind a module declared (not a record change through the record kit). */
export interface EmittedEvent {
  readonly kind: EventKind;
  readonly workspaceId: string;
  /** What it is about: a type name (e.g. `meeting`) and that thing's id. */
  readonly subjectType: string;
  readonly subjectId: string;
  readonly private?: boolean;
  readonly actorKeyId?: string | null;
  readonly actorMemberId?: string | null;
  readonly occurredAt: number;
  /** The payload, of the shape the kind's declaration names (ids, status, counts: never links, tokens, addresses or contents). */
  readonly data?: Readonly<Record<string, unknown>>;
}

/**
 * An event kind a module emits into the outbox (`ServiceModule.events`), beside the platform's record
 * kinds. Webhooks offer it as a subscribable event and automation as a trigger; neither names it.
 */
export interface EventKindDeclaration {
  readonly kind: EventKind;
  /** What happened, in a sentence (the webhook approval page shows it). */
  readonly description: string;
  /** The payload's shape: the name of a schema of the document (`components.schemas`), the `data` of every delivery. */
  readonly payload: string;
  /**
   * The operation a key must be granted to propose a webhook subscription to the kind (the read the
   * event is the push form of).
   */
  readonly readWith: string;
}

/** Writes a module's event into the outbox in `sql` (the caller's transaction); returns its id. */
export async function emitEvent(sql: Sql, event: EmittedEvent): Promise<string> {
  const id = newId('evt');
  await insertRecordEvent(sql, {
    id,
    workspace_id: event.workspaceId,
    type: event.kind,
    resource_type: event.subjectType,
    record_id: event.subjectId,
    private: event.private ?? false,
    changed_fields: null,
    actor_key_id: event.actorKeyId ?? null,
    actor_member_id: event.actorMemberId ?? null,
    occurred_at: event.occurredAt,
    data: event.data ? JSON.stringify(event.data) : null,
  });
  return id;
}
