import type { Sql } from '../database.ts';

/** Deals (private ones included) in each of these stages of a pipeline; stages without deals are left out. */
export async function countDealsByStage(sql: Sql, pipelineId: string, stageIds: readonly string[]): Promise<Array<{ stage_id: string; n: number }>> {
  if (!stageIds.length) return [];
  const rows = await sql.all<{ stage_id: string; n: number | string }>(
    `SELECT stage_id, COUNT(*) AS n FROM deals WHERE pipeline_id = ? AND stage_id IN (${stageIds.map(() => '?').join(', ')}) GROUP BY stage_id ORDER BY stage_id`,
    [pipelineId, ...stageIds],
  );
  return rows.map((r) => ({ stage_id: r.stage_id, n: Number(r.n) }));
}
