import type { Sql } from '../database.ts';

export interface DbMailboxMessageRow {
  id: string;
  workspace_id: string | null;
  message_id: string;
  from_address: string;
  /** JSON array of addresses. */
  recipients: string;
  subject: string;
  body_text: string;
  body_html: string;
  /** JSON object of extra headers. */
  headers: string;
  tag: string | null;
  created_at: number;
}

export async function insertMailboxMessage(sql: Sql, row: DbMailboxMessageRow): Promise<void> {
  await sql.write(
    `INSERT INTO mailbox_messages (id, workspace_id, message_id, from_address, recipients, subject, body_text, body_html, headers, tag, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [row.id, row.workspace_id, row.message_id, row.from_address, row.recipients, row.subject, row.body_text, row.body_html, row.headers, row.tag, row.created_at],
  );
}

export interface MailboxFilter {
  readonly workspaceId?: string;
  /** Only mails with this recipient (exact, case-insensitive). */
  readonly to?: string;
  readonly tag?: string;
  readonly limit: number;
}

export type DbMailboxSummaryRow = Pick<DbMailboxMessageRow, 'id' | 'workspace_id' | 'recipients' | 'subject' | 'tag' | 'created_at'>;

/** Newest first, without the bodies. */
export function listMailboxMessages(sql: Sql, filter: MailboxFilter): Promise<DbMailboxSummaryRow[]> {
  const where: string[] = [];
  const params: (string | number)[] = [];
  if (filter.workspaceId !== undefined) {
    where.push('workspace_id = ?');
    params.push(filter.workspaceId);
  }
  if (filter.tag !== undefined) {
    where.push('tag = ?');
    params.push(filter.tag);
  }
  if (filter.to !== undefined) {
    // recipients is a JSON array of strings written by JSON.stringify: a quoted address matches one element.
    where.push(`LOWER(recipients) LIKE ? ESCAPE '\\'`);
    params.push(`%${JSON.stringify(filter.to.toLowerCase()).replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
  }
  return sql.all<DbMailboxSummaryRow>(
    `SELECT id, workspace_id, recipients, subject, tag, created_at FROM mailbox_messages ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY created_at DESC, id DESC LIMIT ?`,
    [...params, filter.limit],
  );
}

export function getMailboxMessage(sql: Sql, id: string): Promise<DbMailboxMessageRow | undefined> {
  return sql.one<DbMailboxMessageRow>(`SELECT * FROM mailbox_messages WHERE id = ?`, [id]);
}

/** Deletes mails created before `before` (Unix ms); returns how many. */
export function deleteMailboxMessagesBefore(sql: Sql, before: number): Promise<number> {
  return sql.run(`DELETE FROM mailbox_messages WHERE created_at < ?`, [before]);
}
