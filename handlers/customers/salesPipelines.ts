import { countRows } from '../../db/queries/records.ts';
import type { components } from '../../generated/openapi.ts';
import { conflict, invalidInput } from '../../server/errors.ts';
import { recordChanged } from '../../server/events.ts';
import type { OperationContext } from '../../server/operation.ts';
import { RecordType, type RecordWrite } from '../../server/recordKit.ts';
import { clearDefaultSalesPipeline, countDealsByStage, deletePipelineStages, findDefaultSalesPipeline, insertPipelineStages } from './queries.ts';
import type { DbSalesPipelineRow } from './rows.ts';

type PipelineData = components['schemas']['SalesPipelineData'];
type Stage = components['schemas']['Stage'];

/** Stage rules of section 2.2 that a schema cannot say. */
function checkStages(stages: Stage[] | undefined): void {
  if (!stages) return;
  const ids = new Set<string>();
  for (const stage of stages) {
    if (ids.has(stage.id)) throw invalidInput(`stages: stage id "${stage.id}" is used twice; stage ids are unique.`);
    ids.add(stage.id);
  }
  const won = stages.filter((s) => s.kind === 'won');
  const lost = stages.filter((s) => s.kind === 'lost');
  if (won.length !== 1 || lost.length !== 1) throw invalidInput('stages: a pipeline has exactly one won stage and one lost stage.');
  const lastTwo = stages.slice(-2).map((s) => s.kind).sort().join(',');
  if (lastTwo !== 'lost,won') throw invalidInput('stages: the won and lost stages are the last two stages.');
  for (const s of stages) {
    if (s.kind === 'won' && s.probability !== undefined && s.probability !== 100) throw invalidInput(`stages: the won stage "${s.id}" has probability 100.`);
    if (s.kind === 'lost' && s.probability !== undefined && s.probability !== 0) throw invalidInput(`stages: the lost stage "${s.id}" has probability 0.`);
  }
}

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

/** Clears is_default on the workspace's current default (other than keepId), with its own event. */
async function demotePreviousDefault(ctx: OperationContext, resource: string, keepId: string): Promise<void> {
  const previous = await findDefaultSalesPipeline(ctx.sql, ctx.workspaceId, keepId);
  if (!previous) return;
  const data: PipelineData = { ...JSON.parse(previous.data), is_default: false };
  await clearDefaultSalesPipeline(ctx.sql, previous.id, JSON.stringify(data), Math.max(ctx.now, previous.updated_at));
  await recordChanged(ctx, { type: 'resource.updated', resourceType: resource, recordId: previous.id, private: false, changedFields: ['is_default'] });
}

/**
 * Stage ids are what deals refer to: a write may not remove a stage that deals are in, nor change its
 * kind (their `closed_at` says when they entered a won or lost stage). 409 naming the count per stage.
 */
async function assertStagesFree(w: RecordWrite<PipelineData, DbSalesPipelineRow>): Promise<void> {
  if (!w.before) return;
  const next = new Map((w.next.stages ?? []).map((s) => [s.id, s]));
  const touched = (w.before.data.stages ?? []).filter((s) => next.get(s.id)?.kind !== s.kind).map((s) => s.id);
  const held = await countDealsByStage(w.ctx.sql, w.id, touched);
  if (!held.length) return;
  const list = held.map((h) => `"${h.stage_id}" (${plural(h.n, 'deal', 'deals')})`).join(', ');
  throw conflict(
    `${held.length === 1 ? 'Stage' : 'Stages'} ${list} cannot be removed or change kind while deals are in ${held.length === 1 ? 'it' : 'them'} ` +
      '(private deals included); move those deals to another stage or delete them first. Nothing was written.',
  );
}

/** Keeps the stage rows (the targets of deals' foreign key) in step with `data.stages`. */
async function syncStageRows(w: RecordWrite<PipelineData, DbSalesPipelineRow>): Promise<void> {
  const before = new Set((w.before?.data.stages ?? []).map((s) => s.id));
  const after = new Set((w.next.stages ?? []).map((s) => s.id));
  await deletePipelineStages(w.ctx.sql, w.id, [...before].filter((id) => !after.has(id)));
  await insertPipelineStages(w.ctx.sql, w.id, [...after].filter((id) => !before.has(id)));
}

/** `core:SalesPipeline` on the record kit: upsert by exact name, one default per workspace, stages deals refer to. */
export const salesPipelines = new RecordType<PipelineData, PipelineData, DbSalesPipelineRow>({
  table: { name: 'sales_pipelines', columns: ['name', 'is_default'] },
  idPrefix: 'pl',
  noun: 'sales pipeline',
  plural: 'pipelines',
  dataSchema: 'SalesPipelineData',
  columns: (data) => ({ name: data.name, is_default: data.is_default === true }),
  match: { field: 'name', column: 'name', unique: false },
  rules: {
    checkInput: (data) => checkStages(data.stages),
    async prepare(w) {
      if (w.owner !== null && w.next.is_default === true) throw invalidInput('data.is_default: a private pipeline cannot be the workspace default.');
    },
    async beforeWrite(w) {
      await assertStagesFree(w);
      if (w.next.is_default === true && w.before?.data.is_default !== true) {
        await w.ctx.db.lock(w.ctx.sql, `default-pipeline:${w.ctx.workspaceId}`);
        await demotePreviousDefault(w.ctx, w.resource, w.id);
      }
    },
    afterWrite: syncStageRows,
    async beforeDelete(ctx, pipeline) {
      const n = await countRows(ctx.sql, 'deals', { pipeline_id: pipeline.row.id });
      if (n) {
        throw conflict(`${plural(n, 'deal is', 'deals are')} in this pipeline (private deals included); move them to another pipeline or delete them first. Nothing was written.`);
      }
    },
  },
});

export const salesPipelineHandlers = salesPipelines.operations({
  list: 'customers.ListSalesPipelines',
  get: 'customers.GetSalesPipeline',
  create: 'customers.CreateSalesPipeline',
  upsert: 'customers.UpsertSalesPipeline',
  update: 'customers.UpdateSalesPipeline',
  delete: 'customers.DeleteSalesPipeline',
});
