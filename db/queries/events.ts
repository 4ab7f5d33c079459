import type { Sql } from '../database.ts';
import type { DbRecordEventRow } from '../rows.ts';

type Cause = 'cause_run_id' | 'cause_rule' | 'cause_depth' | 'data';
export type NewRecordEvent = Omit<DbRecordEventRow, 'seq' | Cause> & Partial<Pick<DbRecordEventRow, Cause>>;

export async function insertRecordEvent(sql: Sql, e: NewRecordEvent): Promise<void> {
  await sql.write(
    `INSERT INTO record_events (id, workspace_id, type, resource_type, record_id, private, changed_fields, actor_key_id, actor_member_id, occurred_at, cause_run_id, cause_rule, cause_depth, data)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [e.id, e.workspace_id, e.type, e.resource_type, e.record_id, e.private, e.changed_fields, e.actor_key_id, e.actor_member_id, e.occurred_at, e.cause_run_id ?? null, e.cause_rule ?? null, e.cause_depth ?? null, e.data ?? null],
  );
}

/** Events of a workspace after a sequence number, oldest first. */
export function listRecordEvents(sql: Sql, workspaceId: string, afterSeq = 0, limit = 100): Promise<DbRecordEventRow[]> {
  return sql.all<DbRecordEventRow>(
    `SELECT * FROM record_events WHERE workspace_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
    [workspaceId, afterSeq, limit],
  );
}
