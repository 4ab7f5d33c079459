import {
  clearDefaultSalesPipeline,
  deleteSalesPipeline,
  findDefaultSalesPipeline,
  findSalesPipeline,
  findSalesPipelinesByName,
  insertSalesPipeline,
  listSalesPipelinePage,
  updateSalesPipelineData,
} from '../../db/queries/salesPipelines.ts';
import type { DbSalesPipelineRow } from '../../db/rows.ts';
import type { components } from '../../generated/openapi.ts';
import { decodeCursor, encodeCursor } from '../../server/cursor.ts';
import { conflict, invalidInput, notFound } from '../../server/errors.ts';
import { recordChanged } from '../../server/events.ts';
import { newId } from '../../server/ids.ts';
import type { NamespaceHandlers } from '../../server/module.ts';
import type { OperationContext } from '../../server/operation.ts';
import { applyPatch, assertExpected, assertMemberMay, changedFields, memberReadsShared, visibility } from '../../server/records.ts';

type SalesPipeline = components['schemas']['SalesPipeline'];
type PipelineData = components['schemas']['SalesPipelineData'];
type Stage = components['schemas']['Stage'];
type Expected = components['schemas']['SalesPipelineExpected'];

const RESOURCE = 'core:SalesPipeline';

function toRecord(row: DbSalesPipelineRow): SalesPipeline {
  const data: PipelineData = JSON.parse(row.data);
  return { id: row.id, created_at: row.created_at, updated_at: row.updated_at, created_by: row.created_by, private: row.owner_member_id !== null, data };
}

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

function checkDefault(data: PipelineData, isPrivate: boolean): void {
  if (isPrivate && data.is_default === true) throw invalidInput('data.is_default: a private pipeline cannot be the workspace default.');
}

/** The member that owns a private pipeline to be created, or null for a shared one. */
function ownerFor(ctx: OperationContext, wantsPrivate: boolean | undefined): string | null {
  if (!wantsPrivate) return null;
  if (!ctx.member) throw invalidInput('private: true needs Service-Act-As; a private pipeline belongs to the member acted for.');
  return ctx.member.id;
}

/** Clears is_default on the workspace's current default (other than keepId), with its own event. */
async function demotePreviousDefault(ctx: OperationContext, keepId: string): Promise<void> {
  const previous = await findDefaultSalesPipeline(ctx.sql, ctx.workspaceId, keepId);
  if (!previous) return;
  const data: PipelineData = { ...JSON.parse(previous.data), is_default: false };
  await clearDefaultSalesPipeline(ctx.sql, previous.id, JSON.stringify(data), Math.max(ctx.now, previous.updated_at));
  await recordChanged(ctx, { type: 'resource.updated', resourceType: RESOURCE, recordId: previous.id, private: false, changedFields: ['is_default'] });
}

async function createPipeline(ctx: OperationContext, data: PipelineData, owner: string | null): Promise<SalesPipeline> {
  assertMemberMay(ctx, RESOURCE, owner, 'write');
  checkStages(data.stages);
  checkDefault(data, owner !== null);
  const id = newId('pl');
  if (data.is_default === true) {
    await ctx.db.lock(ctx.sql, `default-pipeline:${ctx.workspaceId}`);
    await demotePreviousDefault(ctx, id);
  }
  const row: DbSalesPipelineRow = {
    id,
    workspace_id: ctx.workspaceId,
    owner_member_id: owner,
    name: data.name,
    is_default: data.is_default === true,
    data: JSON.stringify(data),
    created_by: ctx.member?.id ?? null,
    created_at: ctx.now,
    updated_at: ctx.now,
  };
  await insertSalesPipeline(ctx.sql, row);
  await recordChanged(ctx, { type: 'resource.created', resourceType: RESOURCE, recordId: id, private: owner !== null });
  return toRecord(row);
}

interface Change {
  data?: components['schemas']['SalesPipelinePatch'];
  unset?: components['schemas']['SalesPipelineUnset'];
  expected?: Expected;
}

async function updatePipeline(ctx: OperationContext, row: DbSalesPipelineRow, change: Change): Promise<SalesPipeline> {
  assertMemberMay(ctx, RESOURCE, row.owner_member_id, 'write');
  const current: PipelineData = JSON.parse(row.data);
  assertExpected(current, change.expected);
  const next = applyPatch(current, change.data, change.unset);
  checkDefault(next, row.owner_member_id !== null);
  const changed = changedFields(current, next);
  if (!changed.length) return toRecord(row);
  if (next.is_default === true && current.is_default !== true) {
    await ctx.db.lock(ctx.sql, `default-pipeline:${ctx.workspaceId}`);
    await demotePreviousDefault(ctx, row.id);
  }
  const updatedAt = Math.max(ctx.now, row.updated_at);
  await updateSalesPipelineData(ctx.sql, row.id, next.name, next.is_default === true, JSON.stringify(next), updatedAt);
  await recordChanged(ctx, { type: 'resource.updated', resourceType: RESOURCE, recordId: row.id, private: row.owner_member_id !== null, changedFields: changed });
  return { ...toRecord(row), updated_at: updatedAt, data: next };
}

function checkChange(change: Change): void {
  if (change.unset?.includes('name')) throw invalidInput('unset: name is required in every pipeline and cannot be removed.');
  checkStages(change.data?.stages);
}

/** A visible pipeline by id (row locked for the command's transaction), or 404. */
async function visiblePipeline(ctx: OperationContext, id: string, forUpdate: boolean): Promise<DbSalesPipelineRow | undefined> {
  const row = await findSalesPipeline(ctx.sql, ctx.workspaceId, id, forUpdate);
  return row && visibility(ctx, row.owner_member_id) === 'visible' ? row : undefined;
}

const notVisible = (id: string) => notFound(`No sales pipeline ${id} is visible to this credential.`);

const CURSOR = { u: 'number', i: 'string' } as const;

/** Filters a cursor is bound to: who lists (private records differ per member) and the updated_at window. */
const listingFilters = (ctx: OperationContext, since: number | undefined, before: number | undefined) => [ctx.member?.id ?? null, since ?? null, before ?? null];

export const salesPipelineHandlers = {
  'customers.ListSalesPipelines': async (input, ctx) => {
    const limit = input.limit ?? 50;
    const filters = listingFilters(ctx, input.updated_since, input.updated_before);
    const after = input.cursor
      ? decodeCursor(input.cursor, CURSOR, filters, 'cursor belongs to a listing with other filters (or another member); send the same filters.')
      : null;
    const rows = await listSalesPipelinePage(ctx.sql, {
      workspaceId: ctx.workspaceId,
      memberId: ctx.member?.id ?? null,
      includeShared: memberReadsShared(ctx, RESOURCE),
      updatedSince: input.updated_since ?? null,
      updatedBefore: input.updated_before ?? null,
      after: after ? { updatedAt: after.u, id: after.i } : null,
      limit,
    });
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    const hasMore = rows.length > limit && last !== undefined;
    const nextCursor = hasMore ? encodeCursor<typeof CURSOR>({ u: last.updated_at, i: last.id }, filters) : null;
    return { items: page.map(toRecord), has_more: hasMore, next_cursor: nextCursor };
  },

  'customers.GetSalesPipeline': async (input, ctx) => {
    const row = await visiblePipeline(ctx, input.id, false);
    if (!row) throw notVisible(input.id);
    assertMemberMay(ctx, RESOURCE, row.owner_member_id, 'read');
    return { item: toRecord(row) };
  },

  'customers.CreateSalesPipeline': async (input, ctx) => {
    const owner = ownerFor(ctx, input.private);
    return { item: await createPipeline(ctx, input.data, owner) };
  },

  'customers.UpsertSalesPipeline': async (input, ctx) => {
    checkChange(input);
    const owner = ownerFor(ctx, input.private);
    await ctx.db.lock(ctx.sql, `upsert:${RESOURCE}:${ctx.workspaceId}:${owner ?? ''}:${input.data.name}`);
    const matches = await findSalesPipelinesByName(ctx.sql, ctx.workspaceId, input.data.name, owner);
    const [match, ...others] = matches;
    if (others.length) throw conflict(`${matches.length} pipelines are named "${input.data.name}"; update one by id instead. Nothing was written.`);
    if (!match) {
      assertExpected({}, input.expected);
      return { item: await createPipeline(ctx, input.data, owner), created: true };
    }
    return { item: await updatePipeline(ctx, match, input), created: false };
  },

  'customers.UpdateSalesPipeline': async (input, ctx) => {
    checkChange(input);
    const row = await visiblePipeline(ctx, input.id, true);
    if (!row) throw notVisible(input.id);
    return { item: await updatePipeline(ctx, row, input) };
  },

  'customers.DeleteSalesPipeline': async (input, ctx) => {
    const row = await visiblePipeline(ctx, input.id, true);
    if (!row) return { id: input.id, deleted: false };
    assertMemberMay(ctx, RESOURCE, row.owner_member_id, 'write');
    assertExpected(JSON.parse(row.data), input.expected);
    await deleteSalesPipeline(ctx.sql, row.id);
    await recordChanged(ctx, { type: 'resource.deleted', resourceType: RESOURCE, recordId: row.id, private: row.owner_member_id !== null });
    return { id: row.id, deleted: true };
  },
} satisfies Partial<NamespaceHandlers<'customers'>>;
