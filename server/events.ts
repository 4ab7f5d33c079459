import { insertRecordEvent } from '../db/queries/events.ts';
import { newId } from './ids.ts';
import type { OperationContext } from './operation.ts';

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
