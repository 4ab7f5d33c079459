import type { Sql } from '../database.ts';
import type { DbSalesPipelineRow } from '../rows.ts';

/** A pipeline by id within a workspace; `forUpdate` locks the row until the transaction ends. */
export function findSalesPipeline(sql: Sql, workspaceId: string, id: string, forUpdate = false): Promise<DbSalesPipelineRow | undefined> {
  return sql.one<DbSalesPipelineRow>(
    `SELECT * FROM sales_pipelines WHERE workspace_id = ? AND id = ?${forUpdate ? ' FOR UPDATE' : ''}`,
    [workspaceId, id],
  );
}

/** Pipelines with exactly this name in one visibility scope: shared (owner null) or one member's private ones. */
export function findSalesPipelinesByName(sql: Sql, workspaceId: string, name: string, ownerMemberId: string | null): Promise<DbSalesPipelineRow[]> {
  return ownerMemberId === null
    ? sql.all<DbSalesPipelineRow>(`SELECT * FROM sales_pipelines WHERE workspace_id = ? AND name = ? AND owner_member_id IS NULL ORDER BY id FOR UPDATE`, [workspaceId, name])
    : sql.all<DbSalesPipelineRow>(`SELECT * FROM sales_pipelines WHERE workspace_id = ? AND name = ? AND owner_member_id = ? ORDER BY id FOR UPDATE`, [workspaceId, name, ownerMemberId]);
}

export interface SalesPipelinePage {
  workspaceId: string;
  /** Include this member's private pipelines (shared ones are included when `includeShared`). */
  memberId: string | null;
  includeShared: boolean;
  updatedSince: number | null;
  updatedBefore: number | null;
  /** Position after which to continue: (updated_at, id). */
  after: { updatedAt: number; id: string } | null;
  limit: number;
}

/** One page ordered by (updated_at, id); fetches limit + 1 rows so the caller knows whether more follow. */
export function listSalesPipelinePage(sql: Sql, p: SalesPipelinePage): Promise<DbSalesPipelineRow[]> {
  const where: string[] = ['workspace_id = ?'];
  const params: Array<string | number> = [p.workspaceId];
  const scopes: string[] = [];
  if (p.includeShared) scopes.push('owner_member_id IS NULL');
  if (p.memberId !== null) {
    scopes.push('owner_member_id = ?');
    params.push(p.memberId);
  }
  if (!scopes.length) return Promise.resolve([]);
  where.push(`(${scopes.join(' OR ')})`);
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
  return sql.all<DbSalesPipelineRow>(`SELECT * FROM sales_pipelines WHERE ${where.join(' AND ')} ORDER BY updated_at, id LIMIT ?`, params);
}

export async function insertSalesPipeline(sql: Sql, row: DbSalesPipelineRow): Promise<void> {
  await sql.write(
    `INSERT INTO sales_pipelines (id, workspace_id, owner_member_id, name, is_default, data, created_by, created_at, updated_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [row.id, row.workspace_id, row.owner_member_id, row.name, row.is_default === true || row.is_default === 1, row.data, row.created_by, row.created_at, row.updated_at],
  );
}

export async function updateSalesPipelineData(sql: Sql, id: string, name: string, isDefault: boolean, data: string, updatedAt: number): Promise<void> {
  await sql.write(`UPDATE sales_pipelines SET name = ?, is_default = ?, data = ?, updated_at = ? WHERE id = ?`, [name, isDefault, data, updatedAt, id]);
}

/** Clears is_default at once (not queued), so that the unique default index never sees two defaults. */
export async function clearDefaultSalesPipeline(sql: Sql, id: string, data: string, updatedAt: number): Promise<void> {
  await sql.run(`UPDATE sales_pipelines SET is_default = ?, data = ?, updated_at = ? WHERE id = ?`, [false, data, updatedAt, id]);
}

export async function deleteSalesPipeline(sql: Sql, id: string): Promise<void> {
  await sql.write(`DELETE FROM sales_pipelines WHERE id = ?`, [id]);
}

/** The workspace's current default pipeline other than `exceptId`, locked for update. */
export function findDefaultSalesPipeline(sql: Sql, workspaceId: string, exceptId: string): Promise<DbSalesPipelineRow | undefined> {
  return sql.one<DbSalesPipelineRow>(`SELECT * FROM sales_pipelines WHERE workspace_id = ? AND is_default = ? AND id <> ? FOR UPDATE`, [workspaceId, true, exceptId]);
}
