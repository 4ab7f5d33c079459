/** The automation operations: list, get (with runs), pause, delete. */
import type { Sql } from '../../db/database.ts';
import { mayManageSettings } from '../../server/capabilities.ts';
import { DEFAULT_PAGE_LIMIT, decodeCursor, encodeCursor, positionField } from '../../server/cursor.ts';
import { forbidden, notFound } from '../../server/errors.ts';
import type { NamespaceHandlers } from '../../server/module.ts';
import type { OperationContext } from '../../server/operation.ts';
import { deleteRule, findRule, listRules, listRuns, setRuleEnabled, type DbAutomationRunRow } from './queries.ts';
import { BUILT_IN_RULES, builtInRules, compareRules, type Rule, ruleFromRow, ruleView } from './rules.ts';

const RULE_CURSOR = { a: { type: 'string', maxLength: 40 }, r: { type: 'string', maxLength: 64 } } as const;
const RUN_CURSOR = { t: positionField.millis, i: { type: 'string', maxLength: 40 } } as const;
const MISMATCH = 'cursor belongs to a listing with other filters; send the same filters.';

/** Who may pause and delete rules: with workspace access the key's grant decides; a member must be an owner or admin. */
export function mayManage(ctx: Pick<OperationContext, 'member'>): boolean {
  return !ctx.member || mayManageSettings(ctx.member.role);
}

/** A rule of the workspace (built-in or authored) by id, and app when given. */
export async function findAnyRule(sql: Sql, workspaceId: string, ruleId: string, appId: string | undefined, lock = false): Promise<Rule | undefined> {
  const builtIn = BUILT_IN_RULES.find((r) => r.ruleId === ruleId && (appId === undefined || r.appId === appId));
  if (builtIn) return builtIn;
  const row = await findRule(sql, workspaceId, ruleId, appId, lock);
  return row && ruleFromRow(row);
}

function runView(run: DbAutomationRunRow) {
  return {
    run_id: run.id,
    rule_id: run.rule_id,
    app_id: run.app_id,
    status: run.status,
    event: {
      event_id: run.event_id,
      type: run.event_type as 'resource.created' | 'resource.updated' | 'resource.deleted',
      resource_type: run.resource_type,
      record_id: run.record_id,
      occurred_at: Number(run.event_occurred_at),
    },
    depth: Number(run.depth),
    attempts: Number(run.attempts),
    queued_at: Number(run.queued_at),
    started_at: run.started_at === null ? null : Number(run.started_at),
    finished_at: run.finished_at === null ? null : Number(run.finished_at),
    error: run.error,
    actions: run.actions ? JSON.parse(run.actions) : [],
  };
}

/** Why this caller may not pause or delete the rule, or null. */
function refusal(ctx: OperationContext, rule: Rule, verb: 'paused' | 'deleted'): string | null {
  if (rule.builtIn) return `Rule ${rule.ruleId} is built in (can_manage: false): it cannot be ${verb}.`;
  if (!mayManage(ctx)) return `${ctx.member!.name} (${ctx.member!.role}) may not manage automation rules; owners and admins may.`;
  return null;
}

export const automationHandlers: NamespaceHandlers<'automation'> = {
  'automation.ListRules': async (input, ctx) => {
    const limit = input.limit ?? DEFAULT_PAGE_LIMIT;
    const filter = { appId: input.app_id, enabled: input.enabled };
    const filters = [ctx.workspaceId, input.app_id ?? null, input.enabled ?? null];
    const after = input.cursor ? await decodeCursor(ctx, input.cursor, RULE_CURSOR, filters, MISMATCH) : null;
    const position = after && { appId: after.a, ruleId: after.r };
    const stored = (await listRules(ctx.sql, ctx.workspaceId, filter, position, limit + 1)).map(ruleFromRow);
    const builtIns = builtInRules(filter).filter((r) => !position || compareRules(r, position) > 0);
    const rules = [...builtIns, ...stored].sort(compareRules).slice(0, limit + 1);
    const page = rules.slice(0, limit);
    const last = page.at(-1);
    const hasMore = rules.length > limit && last !== undefined;
    return {
      items: page.map((r) => ruleView(r, mayManage(ctx))),
      has_more: hasMore,
      next_cursor: hasMore ? await encodeCursor(ctx, RULE_CURSOR, { a: last.appId, r: last.ruleId }, filters) : null,
    };
  },

  'automation.GetRule': async (input, ctx) => {
    const rule = await findAnyRule(ctx.sql, ctx.workspaceId, input.rule_id, input.app_id);
    if (!rule) throw notFound(`No automation rule ${input.rule_id}${input.app_id ? ` of app ${input.app_id}` : ''} in this workspace.`);
    const limit = input.runs_limit ?? 20;
    const filters = [ctx.workspaceId, rule.appId, rule.ruleId, limit];
    const before = input.runs_cursor ? await decodeCursor(ctx, input.runs_cursor, RUN_CURSOR, filters, MISMATCH) : null;
    const runs = await listRuns(ctx.sql, ctx.workspaceId, rule.appId, rule.ruleId, before && { at: before.t, id: before.i }, limit + 1);
    const page = runs.slice(0, limit);
    const last = page.at(-1);
    const hasMore = runs.length > limit && last !== undefined;
    return {
      item: ruleView(rule, mayManage(ctx)),
      runs: page.map(runView),
      runs_has_more: hasMore,
      runs_next_cursor: hasMore ? await encodeCursor(ctx, RUN_CURSOR, { t: Number(last.queued_at), i: last.id }, filters) : null,
    };
  },

  'automation.UpdateRule': async (input, ctx) => {
    const rule = await findAnyRule(ctx.sql, ctx.workspaceId, input.rule_id, input.app_id, true);
    if (!rule) throw notFound(`No automation rule ${input.rule_id}${input.app_id ? ` of app ${input.app_id}` : ''} in this workspace.`);
    const refused = refusal(ctx, rule, 'paused');
    if (refused) throw forbidden(refused);
    if (!rule.enabled) return { item: ruleView(rule, true) };
    const by = ctx.member ? `member ${ctx.member.id}` : `key ${ctx.credential.keyId}`;
    await setRuleEnabled(ctx.sql, ctx.workspaceId, rule.appId, rule.ruleId, false, by, ctx.now);
    return { item: ruleView({ ...rule, enabled: false, updatedAt: Math.max(ctx.now, rule.updatedAt) }, true) };
  },

  'automation.DeleteRule': async (input, ctx) => {
    const rule = await findAnyRule(ctx.sql, ctx.workspaceId, input.rule_id, input.app_id, true);
    if (!rule) return { rule_id: input.rule_id, app_id: input.app_id ?? 'core', deleted: false };
    const refused = refusal(ctx, rule, 'deleted');
    if (refused) throw forbidden(refused);
    const removed = await deleteRule(ctx.sql, ctx.workspaceId, rule.appId, rule.ruleId);
    return { rule_id: rule.ruleId, app_id: rule.appId, deleted: removed > 0 };
  },
};
