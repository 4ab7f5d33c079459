/** The audit log's rows (table audit_log; server/audit.ts). */
import type { Sql, SqlValue } from '../database.ts';

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

/** `LIKE` text matching exactly `prefix` followed by anything (`%`, `_` and `\` taken literally). */
const likePrefix = (prefix: string) => `${prefix.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

/**
 * A workspace's entries, newest first, strictly before `(beforeAt, beforeId)` when given; with
 * `actions`, only those whose action starts with one of the prefixes (e.g. `key.`).
 */
export async function listAuditRows(
  sql: Sql,
  workspaceId: string,
  page: { limit: number; before?: { at: number; id: string }; actions?: readonly string[] },
): Promise<DbAuditRow[]> {
  const where = ['workspace_id = ?'];
  const params: SqlValue[] = [workspaceId];
  if (page.before) {
    where.push('(at < ? OR (at = ? AND id < ?))');
    params.push(page.before.at, page.before.at, page.before.id);
  }
  if (page.actions?.length) {
    where.push(`(${page.actions.map(() => `action LIKE ? ESCAPE '\\'`).join(' OR ')})`);
    params.push(...page.actions.map(likePrefix));
  }
  params.push(page.limit);
  const rows = await sql.all<DbAuditRow>(`SELECT * FROM audit_log WHERE ${where.join(' AND ')} ORDER BY at DESC, id DESC LIMIT ?`, params);
  return rows.map((r) => ({ ...r, at: Number(r.at) }));
}

/** One entry of a workspace (a page's cursor names the entry it continues after). */
export async function findAuditRow(sql: Sql, workspaceId: string, id: string): Promise<DbAuditRow | undefined> {
  const row = await sql.one<DbAuditRow>(`SELECT * FROM audit_log WHERE workspace_id = ? AND id = ?`, [workspaceId, id]);
  return row ? { ...row, at: Number(row.at) } : undefined;
}

/** Removes entries older than `before` (ms); returns how many. */
export function deleteAuditRowsBefore(sql: Sql, before: number): Promise<number> {
  return sql.run(`DELETE FROM audit_log WHERE at < ?`, [before]);
}
