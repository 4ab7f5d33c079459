import type { Sql, SqlValue } from '../database.ts';
import type { DbRecordRow } from '../rows.ts';

/**
 * A record table (server/recordKit.ts): the base columns of `DbRecordRow` plus typed columns mirrored
 * from `data`. Table and column names are constants of the code, never request input.
 */
export interface RecordTable {
  readonly name: string;
  /** Typed columns beyond the base ones, written from each record's data. */
  readonly columns: readonly string[];
}

/** Row lock for the rest of the transaction: `update` to change the row, `share` to rely on it staying as it is. */
export type RowLock = 'update' | 'share' | null;

const lockClause = (lock: RowLock) => (lock === 'update' ? ' FOR UPDATE' : lock === 'share' ? ' FOR SHARE' : '');

/** A record by id within a workspace, whatever its visibility (the kit decides). */
export function findRecord<R extends DbRecordRow>(sql: Sql, table: RecordTable, workspaceId: string, id: string, lock: RowLock = null): Promise<R | undefined> {
  return sql.one<R>(`SELECT * FROM ${table.name} WHERE workspace_id = ? AND id = ?${lockClause(lock)}`, [workspaceId, id]);
}

/** Records by id within a workspace (at most a page's worth of ids), in no particular order. */
export function findRecords<R extends DbRecordRow>(sql: Sql, table: RecordTable, workspaceId: string, ids: readonly string[]): Promise<R[]> {
  if (!ids.length) return Promise.resolve([]);
  return sql.all<R>(`SELECT * FROM ${table.name} WHERE workspace_id = ? AND id IN (${ids.map(() => '?').join(', ')})`, [workspaceId, ...ids]);
}

/** Records of one scope (shared when `owner` is null, else that member's private ones) whose `column` equals `value`, locked for update. */
export function findByColumn<R extends DbRecordRow>(sql: Sql, table: RecordTable, workspaceId: string, column: string, value: SqlValue, owner: string | null): Promise<R[]> {
  return owner === null
    ? sql.all<R>(`SELECT * FROM ${table.name} WHERE workspace_id = ? AND ${column} = ? AND private_owner_id IS NULL ORDER BY id FOR UPDATE`, [workspaceId, value])
    : sql.all<R>(`SELECT * FROM ${table.name} WHERE workspace_id = ? AND ${column} = ? AND private_owner_id = ? ORDER BY id FOR UPDATE`, [workspaceId, value, owner]);
}

export interface RecordPage {
  workspaceId: string;
  /** Include this member's private records (shared ones are included when `includeShared`). */
  memberId: string | null;
  includeShared: boolean;
  /** Equality filters on typed columns. */
  where: Readonly<Record<string, SqlValue>>;
  updatedSince: number | null;
  updatedBefore: number | null;
  /** Position after which to continue: (updated_at, id). */
  after: { updatedAt: number; id: string } | null;
  limit: number;
}

/** One page ordered by (updated_at, id); fetches limit + 1 rows so the caller knows whether more follow. */
export function listRecordPage<R extends DbRecordRow>(sql: Sql, table: RecordTable, p: RecordPage): Promise<R[]> {
  const where: string[] = ['workspace_id = ?'];
  const params: SqlValue[] = [p.workspaceId];
  const scopes: string[] = [];
  if (p.includeShared) scopes.push('private_owner_id IS NULL');
  if (p.memberId !== null) {
    scopes.push('private_owner_id = ?');
    params.push(p.memberId);
  }
  if (!scopes.length) return Promise.resolve([]);
  where.push(`(${scopes.join(' OR ')})`);
  for (const [column, value] of Object.entries(p.where)) {
    if (!table.columns.includes(column)) throw new Error(`${table.name} has no typed column ${column}`);
    where.push(`${column} = ?`);
    params.push(value);
  }
  if (p.updatedSince !== null) {
    where.push('updated_at >= ?');
    params.push(p.updatedSince);
  }
  if (p.updatedBefore !== null) {
    where.push('updated_at < ?');
    params.push(p.updatedBefore);
  }
  if (p.after) {
    where.push('(updated_at > ? OR (updated_at = ? AND id > ?))');
    params.push(p.after.updatedAt, p.after.updatedAt, p.after.id);
  }
  params.push(p.limit + 1);
  return sql.all<R>(`SELECT * FROM ${table.name} WHERE ${where.join(' AND ')} ORDER BY updated_at, id LIMIT ?`, params);
}

const BASE = ['id', 'workspace_id', 'private_owner_id', 'data', 'created_by', 'created_at', 'updated_at'] as const;

/** Inserts a record (queued with the transaction's other writes on PostgreSQL). */
export async function insertRecord(sql: Sql, table: RecordTable, row: DbRecordRow, typed: Readonly<Record<string, SqlValue>>): Promise<void> {
  const columns = [...BASE, ...table.columns];
  const values = [...BASE.map((c) => row[c]), ...table.columns.map((c) => typed[c] ?? null)];
  await sql.write(`INSERT INTO ${table.name} (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`, values);
}

/** Writes a record's new data, typed columns and updated_at. */
export async function updateRecord(sql: Sql, table: RecordTable, id: string, data: string, updatedAt: number, typed: Readonly<Record<string, SqlValue>>): Promise<void> {
  const sets = ['data = ?', 'updated_at = ?', ...table.columns.map((c) => `${c} = ?`)];
  await sql.write(`UPDATE ${table.name} SET ${sets.join(', ')} WHERE id = ?`, [data, updatedAt, ...table.columns.map((c) => typed[c] ?? null), id]);
}

/** Deletes a record at once (not queued), so that a foreign-key refusal surfaces here. */
export function deleteRecord(sql: Sql, table: RecordTable, id: string): Promise<number> {
  return sql.run(`DELETE FROM ${table.name} WHERE id = ?`, [id]);
}

/** How many rows of a table match every equality (a value list means "any of"), e.g. the deals that use a pipeline. */
export async function countRows(sql: Sql, tableName: string, where: Readonly<Record<string, SqlValue | readonly SqlValue[]>>): Promise<number> {
  const clauses: string[] = [];
  const params: SqlValue[] = [];
  for (const [column, value] of Object.entries(where)) {
    if (Array.isArray(value)) {
      if (!value.length) return 0;
      clauses.push(`${column} IN (${value.map(() => '?').join(', ')})`);
      params.push(...value);
    } else {
      clauses.push(`${column} = ?`);
      params.push(value as SqlValue);
    }
  }
  const row = await sql.one<{ n: number | string }>(`SELECT COUNT(*) AS n FROM ${tableName} WHERE ${clauses.join(' AND ')}`, params);
  return Number(row?.n ?? 0);
}
