import type { DbDealRow } from './rows.ts';
import type { components } from '../../generated/openapi.ts';
import { invalidInput } from '../../server/errors.ts';
import { RecordType } from '../../server/recordKit.ts';
import { companies } from './companies.ts';
import { canonicalMoney, weightedMoney } from './money.ts';
import { salesPipelines } from './salesPipelines.ts';

type DealInput = components['schemas']['DealInput'];
type DealData = components['schemas']['DealData'];
type Stage = components['schemas']['Stage'];
/** What a deal stores: the written fields and `closed_at` (derived at write time; `weighted_amount` is derived at read time). */
type DealStored = DealInput & { closed_at?: number };

/** A real UTC calendar day (the schema's pattern admits 2027-02-30). */
function checkCloseDate(day: string | undefined): void {
  if (day === undefined) return;
  const [y, m, d] = day.split('-').map(Number) as [number, number, number];
  const date = new Date(Date.UTC(y, m - 1, d));
  if (y < 1970 || date.getUTCFullYear() !== y || date.getUTCMonth() !== m - 1 || date.getUTCDate() !== d) {
    throw invalidInput(`data.close_date "${day}" is not a calendar day from 1970-01-01 on.`);
  }
}

/** The probability weighted_amount uses: the stage's own, else 100 % for won and 0 % for lost; none for an open stage without one. */
function probabilityOf(stage: Stage | undefined): number | undefined {
  if (!stage) return undefined;
  return stage.probability ?? (stage.kind === 'won' ? 100 : stage.kind === 'lost' ? 0 : undefined);
}

/**
 * `core:Deal` on the record kit. A deal sits in a stage of a pipeline and may be with a company; the
 * references are checked under share locks (so the pipeline, stage and company cannot go away before
 * commit) and enforced by foreign keys. No upsert: a deal has no natural key.
 */
export const deals = new RecordType<DealStored, DealData, DbDealRow>({
  table: { name: 'deals', columns: ['pipeline_id', 'stage_id', 'company_id'] },
  idPrefix: 'dl',
  noun: 'deal',
  plural: 'deals',
  dataSchema: 'DealInput',
  columns: (data) => ({ pipeline_id: data.pipeline_id, stage_id: data.stage_id, company_id: data.company_id ?? null }),
  filters: ['pipeline_id', 'company_id'],
  rules: {
    checkInput: (data) => checkCloseDate(data.close_date),
    normalise(data, where) {
      return data.amount === undefined ? data : { ...data, amount: canonicalMoney(data.amount, `${where}.amount`) };
    },
    async prepare({ ctx, before, next, owner }) {
      const out: DealStored = { ...next };
      if (!before || before.data.pipeline_id !== next.pipeline_id || before.data.stage_id !== next.stage_id) {
        const pipeline = await salesPipelines.readable(ctx, next.pipeline_id, 'share');
        if (!pipeline) throw invalidInput(`data.pipeline_id: no sales pipeline ${next.pipeline_id} is visible to this credential.`);
        if (owner === null && pipeline.row.private_owner_id !== null) throw invalidInput('data.pipeline_id: a shared deal cannot be in a private pipeline (only its owner\'s private deals can).');
        const stages = pipeline.data.stages ?? [];
        const stage = stages.find((s) => s.id === next.stage_id);
        if (!stage) {
          throw invalidInput(
            `data.stage_id: pipeline ${next.pipeline_id} has no stage "${next.stage_id}" (${stages.length ? `its stages: ${stages.map((s) => s.id).join(', ')}` : 'it has no stages'}).`,
          );
        }
        // Entering the won or lost stage closes the deal now; an open stage reopens it.
        if (stage.kind === 'open') delete out.closed_at;
        else out.closed_at = ctx.now;
      }
      if (next.company_id !== undefined && next.company_id !== before?.data.company_id) {
        const company = await companies.readable(ctx, next.company_id, 'share');
        if (!company) throw invalidInput(`data.company_id: no company ${next.company_id} is visible to this credential.`);
        if (owner === null && company.row.private_owner_id !== null) throw invalidInput('data.company_id: a shared deal cannot be with a private company (only its owner\'s private deals can).');
      }
      return out;
    },
    async view(ctx, records) {
      const pipelines = await salesPipelines.byIds(ctx, records.filter((r) => r.data.amount !== undefined).map((r) => r.data.pipeline_id));
      return records.map(({ data }) => {
        const stage = pipelines.get(data.pipeline_id)?.data.stages?.find((s) => s.id === data.stage_id);
        const percent = probabilityOf(stage);
        return data.amount !== undefined && percent !== undefined ? { ...data, weighted_amount: weightedMoney(data.amount, percent) } : { ...data };
      });
    },
  },
});

export const dealHandlers = deals.operations({
  list: 'customers.ListDeals',
  get: 'customers.GetDeal',
  create: 'customers.CreateDeal',
  update: 'customers.UpdateDeal',
  delete: 'customers.DeleteDeal',
});
