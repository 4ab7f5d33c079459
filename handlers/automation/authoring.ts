/**
 * Rules are authored by operators in the workspace file (`automations:` of `npm run admin -- apply`
 * or `workspace add`): each is checked against the document's AutomationTrigger and AutomationAction
 * schemas and against the catalogue (a type an action writes must have the operation it needs).
 */
import { createAjv } from '../../server/ajv.cjs';
import type { Sql } from '../../db/database.ts';
import { catalogue } from '../../generated/catalogue.ts';
import { document } from '../../generated/document.ts';
import { AdminError, type SectionTarget, type WorkspaceFileSection } from '../../server/admin.ts';
import { newId } from '../../server/ids.ts';
import { displayTextProblem } from '../../server/text.cjs';
import { conditionProblem } from './conditions.ts';
import { insertRule } from './queries.ts';
import type { Action, Trigger } from './rules.ts';

interface RuleSpec {
  app?: string;
  name: string;
  description?: string;
  enabled?: boolean;
  trigger: Trigger;
  actions: Action[];
}

// The document's own schemas, so the file and GetRule can never disagree.
const components = JSON.parse(JSON.stringify(document.components).replaceAll('#/components/', 'doc#/components/')) as object;
const ajv = createAjv();
ajv.addSchema({ $id: 'doc', components });

const ruleSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'trigger', 'actions'],
  properties: {
    app: { type: 'string', minLength: 1, maxLength: 64 },
    name: { type: 'string', format: 'display-text', minLength: 1, maxLength: 200 },
    description: { type: 'string', format: 'display-text', maxLength: 2000 },
    enabled: { type: 'boolean' },
    trigger: { $ref: 'doc#/components/schemas/AutomationTrigger' },
    actions: { type: 'array', minItems: 1, maxItems: 20, items: { $ref: 'doc#/components/schemas/AutomationAction' } },
  },
} as const;

const sectionSchema = {
  type: 'object',
  propertyNames: { type: 'string', pattern: '^[A-Za-z0-9_-]{1,64}$' },
  additionalProperties: { type: 'object' },
};
const validateRule = ajv.compile<RuleSpec>(ruleSchema);

const RECORD_TRIGGERS: readonly string[] = ['created', 'updated', 'deleted'];
const hasOperation = (type: string, verb: 'Create' | 'Update') => catalogue.some((e) => e.resource === type && e.name.startsWith(verb));

/** The first problem of a rule that its schema cannot say, or null. */
function ruleProblem(spec: RuleSpec): string | null {
  const t = spec.trigger;
  // A signing or documents event (`signing.request.completed`): no record of its own, conditions on its data.
  const emitted = !RECORD_TRIGGERS.includes(t.event);
  if (emitted && t.resource_type !== undefined) return `trigger.resource_type: ${t.event} is not a record change; leave resource_type out (conditions read the event's data)`;
  if (emitted && t.fields?.length) return 'trigger.fields: only for event updated';
  if (!emitted && t.resource_type === undefined) return `trigger.resource_type: ${t.event} needs the record type (e.g. core:Deal)`;
  if (!emitted && !catalogue.some((e) => e.resource === t.resource_type)) return `trigger.resource_type: no record operations of "${t.resource_type}" (known: ${[...new Set(catalogue.flatMap((e) => (e.resource ? [e.resource] : [])))].join(', ')})`;
  if (t.fields?.length && t.event !== 'updated') return 'trigger.fields: only for event updated';
  if (t.conditions?.length && t.event === 'deleted') return 'trigger.conditions: not for event deleted (the record is gone)';
  for (const c of t.conditions ?? []) {
    const problem = conditionProblem(c);
    if (problem) return `trigger.${problem}`;
  }
  for (const [i, a] of spec.actions.entries()) {
    const where = `actions[${i}] (${a.type})`;
    const allowed: Record<Action['type'], string[]> = {
      set_fields: ['type', 'data', 'unset', 'expected', 'resource_type', 'record_id'],
      create_record: ['type', 'resource_type', 'data'],
      notify: ['type', 'to', 'member_id', 'title', 'body'],
    };
    const extra = Object.keys(a).find((k) => !allowed[a.type].includes(k));
    if (extra) return `${where}: ${extra} is not a field of ${a.type} (it takes ${allowed[a.type].join(', ')})`;
    if (a.type === 'set_fields') {
      if (t.event === 'deleted') return `${where}: a deleted record has no fields to set`;
      if (!a.data && !a.unset) return `${where}: needs data or unset`;
      if ((a.record_id === undefined) !== (a.resource_type === undefined)) return `${where}: resource_type and record_id go together (the record to update instead of the triggering one)`;
      if (emitted && a.record_id === undefined) return `${where}: ${t.event} has no record of its own; name the record to update (resource_type and record_id)`;
      const target = a.resource_type ?? t.resource_type!;
      if (!hasOperation(target, 'Update')) return `${where}: ${target} records cannot be updated`;
    }
    if (a.type === 'create_record') {
      if (!a.resource_type || !hasOperation(a.resource_type, 'Create')) return `${where}: resource_type must be a type that can be created`;
      if (!a.data) return `${where}: needs data`;
    }
    if (a.type === 'notify') {
      if (!a.to) return `${where}: needs to (owners_and_admins, actor or member)`;
      if ((a.to === 'member') !== (a.member_id !== undefined)) return `${where}: member_id goes with to: member, and only with it`;
    }
  }
  return null;
}

/** The rule's value at an Ajv instance path (`/actions/0/title`). */
const valueAt = (value: unknown, path: string): unknown => path.split('/').slice(1).reduce<unknown>((v, k) => (typeof v === 'object' && v !== null ? (v as Record<string, unknown>)[k] : undefined), value);

/** The first problem of a rule as authored (its shape, then what the schema cannot say), or null. */
export function ruleSpecProblem(raw: unknown): string | null {
  if (!validateRule(raw)) {
    const e = validateRule.errors?.[0];
    const bidi = e?.keyword === 'format' ? displayTextProblem(e.instancePath.replace(/^\//, '').replace(/\//g, '.'), String(e.data ?? valueAt(raw, e.instancePath))) : null;
    if (bidi) return bidi;
    return `${e?.instancePath.replace(/^\//, '').replace(/\//g, '.') || 'the rule'} ${e?.message ?? 'is not a rule'}${e?.params && 'allowedValues' in e.params ? ` (${(e.params.allowedValues as unknown[]).join(', ')})` : ''}`;
  }
  return ruleProblem(raw);
}

/** A rule as authored (the workspace file's shape; `member_id` of a notify already a member id). */
export type { RuleSpec };

/** Stores a checked rule (`ruleSpecProblem` gave null) and returns its id. */
export async function storeRule(sql: Sql, r: { workspaceId: string; appId: string; spec: RuleSpec; changedBy: string; now: number }): Promise<string> {
  const id = newId('ru');
  await insertRule(sql, {
    workspace_id: r.workspaceId,
    app_id: r.appId,
    rule_id: id,
    name: r.spec.name,
    description: r.spec.description ?? null,
    enabled: r.spec.enabled ?? true,
    enabled_since: r.now,
    // Emitted events (no record type) are looked up by their name alone.
    resource_type: r.spec.trigger.resource_type ?? '',
    event: r.spec.trigger.event,
    trigger: JSON.stringify(r.spec.trigger),
    actions: JSON.stringify(r.spec.actions),
    changed_by: r.changedBy,
    created_at: r.now,
    updated_at: r.now,
  });
  return id;
}

/** Writes the rules of a workspace file; returns their ids by handle. */
async function applyRules(sql: Sql, target: SectionTarget, value: unknown): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const [handle, raw] of Object.entries(value as Record<string, unknown>)) {
    const where = `automations.${handle}`;
    if (!validateRule(raw)) {
      const e = validateRule.errors?.[0];
      const bidi = e?.keyword === 'format' ? displayTextProblem(`${where}${e.instancePath.replace(/\//g, '.')}`, String(e.data ?? valueAt(raw, e.instancePath))) : null;
      if (bidi) throw new AdminError(bidi);
      throw new AdminError(`${where}${e?.instancePath ?? ''} ${e?.message ?? 'is not a rule'}${e?.params && 'allowedValues' in e.params ? ` (${(e.params.allowedValues as unknown[]).join(', ')})` : ''}`);
    }
    const problem = ruleProblem(raw);
    if (problem) throw new AdminError(`${where}.${problem}`);
    const actions = raw.actions.map((a, i) => (a.type === 'notify' && a.to === 'member' ? { ...a, member_id: target.member(a.member_id!, `${where}.actions[${i}].member_id`) } : a));
    const id = await storeRule(sql, { workspaceId: target.workspaceId, appId: target.app(raw.app ?? 'core', `${where}.app`), spec: { ...raw, actions }, changedBy: 'operator', now: target.now });
    out[handle] = id;
  }
  return out;
}

/** The `automations:` section of the workspace file. */
export const automationsSection: WorkspaceFileSection = { key: 'automations', schema: sectionSchema, apply: applyRules };
