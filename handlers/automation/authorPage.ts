/**
 * Rules authored on a page (`/settings/automation/new`, owners and admins), besides the workspace
 * file: a name, a trigger (a record type and its change, or a signing or documents event; the fields
 * an update must touch; up to three conditions), and up to three actions (notify, set fields, create a
 * record). "Preview" shows which of the records the member can see match the conditions now, without
 * saving; "Create rule" checks the rule with the same rules as the workspace file (authoring.ts:
 * the document's schemas, then what they cannot say) and stores it, enabled from now on.
 */
import type { Request, Response } from 'express';
import type express from 'express';
import { listWorkspaceMembers } from '../../db/queries/credentials.ts';
import { type CatalogueEntry, catalogue } from '../../generated/catalogue.ts';
import { dereferenced } from '../../generated/dereferenced.ts';
import type { ModuleDeps } from '../../server/module.ts';
import { callAsMember } from '../../server/pages/calls.ts';
import { MAX_FORM_JSON_DEPTH, nestsDeeperThan } from '../../server/body.ts';
import { recordPagePath } from '../../server/pages/paths.ts';
import type { MemberPage, Views } from '../../server/pages.ts';
import { type RuleSpec, ruleSpecProblem, storeRule } from './authoring.ts';
import { allHold } from './conditions.ts';
import type { Action, Condition } from './rules.ts';

export const NEW_RULE_PATH = '/settings/automation/new';
/** Condition and action rows the form offers. */
const ROWS = 3;
/** Records a preview reads (the most recently changed the member can see). */
export const PREVIEW_LIMIT = 50;
const RECORD_EVENTS = ['created', 'updated', 'deleted'];

const triggerSchema = dereferenced.components.schemas.AutomationTrigger!;
const conditionSchema = dereferenced.components.schemas.AutomationCondition!;
const EVENTS = (triggerSchema.properties!.event!.enum ?? []) as string[];
const OPS = (conditionSchema.properties!.op!.enum ?? []) as string[];
const OP_WORDS: Record<string, string> = { eq: 'is', ne: 'is not', in: 'is one of', not_in: 'is none of', exists: 'is set', not_exists: 'is not set', gt: '>', gte: '≥', lt: '<', lte: '≤', contains: 'contains' };
const RECORD_TYPES = [...new Set((catalogue as readonly CatalogueEntry[]).flatMap((e) => (e.resource ? [e.resource] : [])))].sort();
const listOf = (type: string) => (catalogue as readonly CatalogueEntry[]).find((e) => e.resource === type && e.name.startsWith('List'));
const creatable = RECORD_TYPES.filter((t) => (catalogue as readonly CatalogueEntry[]).some((e) => e.resource === t && e.name.startsWith('Create')));

/** The "When" choices: each record type's changes, then the emitted events. */
const WHEN = [
  ...RECORD_TYPES.flatMap((t) => RECORD_EVENTS.map((e) => ({ value: `${t}|${e}`, label: `a ${t} record is ${e}` }))),
  ...EVENTS.filter((e) => !RECORD_EVENTS.includes(e)).map((e) => ({ value: `|${e}`, label: `the event ${e}` })),
];

type Body = Record<string, unknown>;
const str = (body: Body, name: string) => (typeof body[name] === 'string' ? (body[name] as string) : '').trim();

class FormProblem extends Error {}

/** A condition's value as typed: JSON when it parses (numbers, true, arrays), else the text; lists split on commas. */
function conditionValue(op: string, raw: string): unknown {
  if (op === 'exists' || op === 'not_exists') return undefined;
  let v: unknown = raw;
  try {
    v = JSON.parse(raw);
  } catch {
    /* text */
  }
  if (nestsDeeperThan(v)) throw new FormProblem(`A condition’s value nests deeper than ${MAX_FORM_JSON_DEPTH} levels.`);
  if ((op === 'in' || op === 'not_in') && !Array.isArray(v)) return raw.split(',').map((x) => x.trim()).filter(Boolean);
  return v;
}

function json(body: Body, name: string, what: string): Record<string, unknown> | undefined {
  const raw = str(body, name);
  if (!raw) return undefined;
  try {
    const v = JSON.parse(raw) as unknown;
    if (nestsDeeperThan(v)) throw new FormProblem(`${what} nests deeper than ${MAX_FORM_JSON_DEPTH} levels.`);
    if (v && typeof v === 'object' && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch (err) {
    if (err instanceof FormProblem) throw err;
  }
  throw new FormProblem(`${what} must be a JSON object, e.g. {"stage_id": "won"}.`);
}

/** The rule the posted form describes (not yet checked). */
export function specFromForm(body: Body): RuleSpec {
  const [type, event] = str(body, 'when').split('|') as [string, string | undefined];
  const trigger: RuleSpec['trigger'] = { event: (event ?? '') as RuleSpec['trigger']['event'], ...(type ? { resource_type: type } : {}) };
  const fields = str(body, 'fields').split(/[\s,]+/).filter(Boolean);
  if (fields.length) trigger.fields = fields;
  const conditions: Condition[] = [];
  for (let i = 0; i < ROWS; i++) {
    const field = str(body, `cond_field_${i}`);
    if (!field) continue;
    const op = str(body, `cond_op_${i}`) as Condition['op'];
    const value = conditionValue(op, str(body, `cond_value_${i}`));
    conditions.push({ field, op, ...(value === undefined ? {} : { value: value as Condition['value'] }) });
  }
  if (conditions.length) trigger.conditions = conditions;
  const actions: Action[] = [];
  for (let i = 0; i < ROWS; i++) {
    const kind = str(body, `act_type_${i}`);
    const n = `Action ${i + 1}`;
    if (kind === 'notify') {
      const to = str(body, `act_to_${i}`) as 'owners_and_admins' | 'actor' | 'member';
      actions.push({ type: 'notify', to, ...(to === 'member' ? { member_id: str(body, `act_member_${i}`) } : {}), ...(str(body, `act_title_${i}`) ? { title: str(body, `act_title_${i}`) } : {}), ...(str(body, `act_body_${i}`) ? { body: str(body, `act_body_${i}`) } : {}) } as Action);
    } else if (kind === 'set_fields') {
      actions.push({ type: 'set_fields', data: json(body, `act_data_${i}`, `${n}: the fields to set`) ?? {} } as Action);
    } else if (kind === 'create_record') {
      actions.push({ type: 'create_record', resource_type: str(body, `act_resource_${i}`), data: json(body, `act_data_${i}`, `${n}: the new record's data`) ?? {} } as Action);
    }
  }
  const description = str(body, 'description');
  return { name: str(body, 'name'), ...(description ? { description } : {}), trigger, actions };
}

export function ruleAuthoringRoutes(deps: ModuleDeps, router: express.Router, views: Views): void {
  const { db, clock, pages } = deps;

  const render = async (page: MemberPage, status: number, body: Body, o: { problem?: string; preview?: { text: string; matches: Array<{ href: string; name: string }> } } = {}) => {
    const members = (await listWorkspaceMembers(db.sql, page.workspaceId)).filter((m) => m.disabled_at === null);
    const rows = (prefix: string) => Array.from({ length: ROWS }, (_, i) => i).map((i) => ({ i, value: (n: string) => str(body, `${prefix}${n}_${i}`) }));
    await page.send(status, {
      title: 'New automation rule',
      html: views.render('new-rule', {
        action: NEW_RULE_PATH,
        csrf: page.csrf,
        problem: o.problem ?? '',
        preview: o.preview ?? null,
        name: str(body, 'name'),
        description: str(body, 'description'),
        when: WHEN.map((w) => ({ ...w, selected: w.value === (str(body, 'when') || 'core:Deal|updated') })),
        fields: str(body, 'fields'),
        conditions: rows('cond_').map((r) => ({ i: r.i, field: str(body, `cond_field_${r.i}`), value: str(body, `cond_value_${r.i}`), ops: OPS.map((op) => ({ op, words: OP_WORDS[op] ?? op, selected: op === (str(body, `cond_op_${r.i}`) || 'eq') })) })),
        actions: Array.from({ length: ROWS }, (_, i) => ({
          i,
          type: str(body, `act_type_${i}`) || (i === 0 ? 'notify' : ''),
          to: str(body, `act_to_${i}`) || 'owners_and_admins',
          member: str(body, `act_member_${i}`),
          title: str(body, `act_title_${i}`),
          body: str(body, `act_body_${i}`),
          data: str(body, `act_data_${i}`),
          resource: str(body, `act_resource_${i}`),
        })),
        members: members.map((m) => ({ id: m.id, name: m.name })),
        creatable,
      }),
    });
  };

  const ownersOnly = (page: MemberPage) =>
    page.notice(403, 'Not allowed', [`Only owners and admins author automation rules; you are signed in as ${page.member.name} (${page.member.role}).`]);

  router.get(NEW_RULE_PATH, async (req: Request, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    if (!page.manage) return ownersOnly(page);
    await render(page, 200, {});
  });

  router.post(NEW_RULE_PATH, pages.protectForm, async (req: Request, res: Response) => {
    const page = await pages.member(req, res);
    if (!page) return;
    if (!page.manage) return ownersOnly(page);
    const body = (req.body ?? {}) as Body;
    let spec: RuleSpec;
    try {
      spec = specFromForm(body);
    } catch (err) {
      if (err instanceof FormProblem) return render(page, 400, body, { problem: err.message });
      throw err;
    }
    if (body.intent === 'preview') {
      const t = spec.trigger;
      const list = t.resource_type && t.event !== 'deleted' ? listOf(t.resource_type) : undefined;
      if (!list) return render(page, 200, body, { preview: { text: `A preview reads records; this rule runs on the next ${t.event} ${t.resource_type ? `of a ${t.resource_type} record` : 'event'}, with its conditions judged then.`, matches: [] } });
      const r = await callAsMember<{ items: Array<{ id: string; data: Record<string, unknown> }> }>(deps.operations.execute, page, list.id, { limit: PREVIEW_LIMIT });
      if (!r.ok) return render(page, 200, body, { preview: { text: `The preview could not read ${t.resource_type} records: ${r.message}`, matches: [] } });
      const matching = r.body.items.filter((item) => allHold(t.conditions, item.data));
      const names = matching.slice(0, 10).map((m) => ({ href: recordPagePath(m.id), name: String(m.data.name ?? m.id) }));
      const when = t.event === 'updated' ? `; it runs when one of them is updated${t.fields?.length ? ` in ${t.fields.join(', ')}` : ''}` : t.event === 'created' ? '; it runs for records created from now on that match when they are created' : '';
      return render(page, 200, body, { preview: { text: `${matching.length} of the ${r.body.items.length} most recently changed ${t.resource_type} records you can see match the conditions now${when}.`, matches: names } });
    }
    const problem = ruleSpecProblem(spec);
    if (problem) return render(page, 400, body, { problem: `The rule cannot be saved: ${problem}.` });
    const members = new Set((await listWorkspaceMembers(db.sql, page.workspaceId)).filter((m) => m.disabled_at === null).map((m) => m.id));
    if (spec.actions.some((a) => a.type === 'notify' && a.to === 'member' && !members.has(a.member_id ?? ''))) return render(page, 400, body, { problem: 'The rule cannot be saved: choose the member a notice goes to.' });
    const id = await db.tx((sql) => storeRule(sql, { workspaceId: page.workspaceId, appId: 'core', spec, changedBy: `member ${page.member.id}`, now: clock.now() }));
    deps.logger.info({ workspace_id: page.workspaceId, member_id: page.member.id, rule_id: id }, 'automation rule authored on the settings page');
    res.redirect(303, `/settings/automation/core/${encodeURIComponent(id)}?done=created`);
  });
}
