import type { Sql } from '../db/database.ts';

/** A committed change event as consumers read it (the `record_events` outbox). */
export interface OutboxEvent {
  /** Position in the outbox: increasing in commit-visible order per consumer read. */
  readonly seq: number;
  readonly id: string;
  readonly workspaceId: string;
  readonly type: 'resource.created' | 'resource.updated' | 'resource.deleted';
  readonly resourceType: string;
  readonly recordId: string;
  readonly private: boolean;
  readonly changedFields: readonly string[] | null;
  readonly actorKeyId: string | null;
  readonly actorMemberId: string | null;
  readonly occurredAt: number;
}

/** A named reader of the outbox: every committed event reaches it at least once, in order. */
export interface EventConsumer {
  /** Handles one event inside `sql`, the transaction that also advances the consumer's position. */
  handle(event: OutboxEvent, sql: Sql): Promise<void>;
}
