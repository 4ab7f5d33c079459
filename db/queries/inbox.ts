import type { Sql } from '../database.ts';

export interface DbInboxNotificationRow {
  id: string;
  workspace_id: string;
  member_id: string;
  kind: string;
  title: string;
  body: string;
  link: string | null;
  source_id: string | null;
  created_at: number;
  read_at: number | null;
}

export async function insertNotification(sql: Sql, row: DbInboxNotificationRow): Promise<void> {
  await sql.write(
    `INSERT INTO inbox_notifications (id, workspace_id, member_id, kind, title, body, link, source_id, created_at, read_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [row.id, row.workspace_id, row.member_id, row.kind, row.title, row.body, row.link, row.source_id, row.created_at, row.read_at],
  );
}

/** Active members of a workspace with one of these roles. */
export async function activeMembersWithRoles(sql: Sql, workspaceId: string, roles: readonly string[]): Promise<string[]> {
  const rows = await sql.all<{ id: string }>(
    `SELECT id FROM members WHERE workspace_id = ? AND disabled_at IS NULL AND role IN (${roles.map(() => '?').join(', ')}) ORDER BY id`,
    [workspaceId, ...roles],
  );
  return rows.map((r) => r.id);
}

/** Whether a member is active in the workspace. */
export async function isActiveMember(sql: Sql, workspaceId: string, memberId: string): Promise<boolean> {
  return (await sql.one(`SELECT 1 AS ok FROM members WHERE workspace_id = ? AND id = ? AND disabled_at IS NULL`, [workspaceId, memberId])) !== undefined;
}

/** A member's notices, newest first, before a (created_at, id) position. */
export function listNotifications(sql: Sql, memberId: string, limit: number, before: { createdAt: number; id: string } | null): Promise<DbInboxNotificationRow[]> {
  return before
    ? sql.all<DbInboxNotificationRow>(
        `SELECT * FROM inbox_notifications WHERE member_id = ? AND (created_at < ? OR (created_at = ? AND id < ?)) ORDER BY created_at DESC, id DESC LIMIT ?`,
        [memberId, before.createdAt, before.createdAt, before.id, limit],
      )
    : sql.all<DbInboxNotificationRow>(`SELECT * FROM inbox_notifications WHERE member_id = ? ORDER BY created_at DESC, id DESC LIMIT ?`, [memberId, limit]);
}

export async function unreadCount(sql: Sql, memberId: string): Promise<number> {
  const row = await sql.one<{ n: number | string }>(`SELECT COUNT(*) AS n FROM inbox_notifications WHERE member_id = ? AND read_at IS NULL`, [memberId]);
  return Number(row?.n ?? 0);
}

/** Marks one notice (or, with id null, every notice) of the member read; returns how many changed. */
export function markNotificationsRead(sql: Sql, memberId: string, id: string | null, now: number): Promise<number> {
  return id === null
    ? sql.run(`UPDATE inbox_notifications SET read_at = ? WHERE member_id = ? AND read_at IS NULL`, [now, memberId])
    : sql.run(`UPDATE inbox_notifications SET read_at = ? WHERE member_id = ? AND id = ? AND read_at IS NULL`, [now, memberId, id]);
}
