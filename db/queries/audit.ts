/** The audit log's rows (table audit_log; server/audit.ts). */
import type { Sql } from '../database.ts';

export interface DbAuditRow {
  id: string;
  workspace_id: string;
  at: number;
  actor_type: 'member' | 'key' | 'operator' | 'system';
  actor_id: string | null;
  actor_label: string;
  action: string;
  subject_type: string | null;
  subject_id: string | null;
  subject_label: string | null;
  /** JSON object. */
  details: string;
}

export async function insertAuditRow(sql: Sql, row: DbAuditRow): Promise<void> {
  await sql.run(
    `INSERT INTO audit_log (id, workspace_id, at, actor_type, actor_id, actor_label, action, subject_type, subject_id, subject_label, details)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [row.id, row.workspace_id, row.at, row.actor_type, row.actor_id, row.actor_label, row.action, row.subject_type, row.subject_id, row.subject_label, row.details],
  );
}

/** A workspace's entries, newest first, strictly before `(beforeAt, beforeId)` when given. */
export async function listAuditRows(sql: Sql, workspaceId: string, page: { limit: number; before?: { at: number; id: string } }): Promise<DbAuditRow[]> {
  const rows = page.before
    ? await sql.all<DbAuditRow>(
        `SELECT * FROM audit_log WHERE workspace_id = ? AND (at < ? OR (at = ? AND id < ?)) ORDER BY at DESC, id DESC LIMIT ?`,
        [workspaceId, page.before.at, page.before.at, page.before.id, page.limit],
      )
    : await sql.all<DbAuditRow>(`SELECT * FROM audit_log WHERE workspace_id = ? ORDER BY at DESC, id DESC LIMIT ?`, [workspaceId, page.limit]);
  return rows.map((r) => ({ ...r, at: Number(r.at) }));
}

/** Removes entries older than `before` (ms); returns how many. */
export function deleteAuditRowsBefore(sql: Sql, before: number): Promise<number> {
  return sql.run(`DELETE FROM audit_log WHERE at < ?`, [before]);
}
