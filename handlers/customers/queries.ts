/** The customers' own statements (the record kit's are in db/queries/records.ts). */
import type { Sql } from '../../db/database.ts';
import type { DbSalesPipelineRow } from './rows.ts';

/** Clears is_default at once (not queued), so that the unique default index never sees two defaults. */
export async function clearDefaultSalesPipeline(sql: Sql, id: string, data: string, updatedAt: number): Promise<void> {
  await sql.run(`UPDATE sales_pipelines SET is_default = ?, data = ?, updated_at = ? WHERE id = ?`, [false, data, updatedAt, id]);
}

/** The workspace's current default pipeline other than `exceptId`, locked for update. */
export function findDefaultSalesPipeline(sql: Sql, workspaceId: string, exceptId: string): Promise<DbSalesPipelineRow | undefined> {
  return sql.one<DbSalesPipelineRow>(`SELECT * FROM sales_pipelines WHERE workspace_id = ? AND is_default = ? AND id <> ? FOR UPDATE`, [workspaceId, true, exceptId]);
}

/** Adds stage rows of a pipeline (the targets of deals' foreign key). Runs at once, after the pipeline row exists. */
export async function insertPipelineStages(sql: Sql, pipelineId: string, stageIds: readonly string[]): Promise<void> {
  if (!stageIds.length) return;
  await sql.run(`INSERT INTO sales_pipeline_stages (pipeline_id, stage_id) VALUES ${stageIds.map(() => '(?, ?)').join(', ')}`, stageIds.flatMap((s) => [pipelineId, s]));
}

/** Removes stage rows of a pipeline; refused by the database while a deal is in one of them. */
export async function deletePipelineStages(sql: Sql, pipelineId: string, stageIds: readonly string[]): Promise<void> {
  if (!stageIds.length) return;
  await sql.run(`DELETE FROM sales_pipeline_stages WHERE pipeline_id = ? AND stage_id IN (${stageIds.map(() => '?').join(', ')})`, [pipelineId, ...stageIds]);
}

/** Deals (private ones included) in each of these stages of a pipeline; stages without deals are left out. */
export async function countDealsByStage(sql: Sql, pipelineId: string, stageIds: readonly string[]): Promise<Array<{ stage_id: string; n: number }>> {
  if (!stageIds.length) return [];
  const rows = await sql.all<{ stage_id: string; n: number | string }>(
    `SELECT stage_id, COUNT(*) AS n FROM deals WHERE pipeline_id = ? AND stage_id IN (${stageIds.map(() => '?').join(', ')}) GROUP BY stage_id ORDER BY stage_id`,
    [pipelineId, ...stageIds],
  );
  return rows.map((r) => ({ stage_id: r.stage_id, n: Number(r.n) }));
}
