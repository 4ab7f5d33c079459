/**
 * Automation rules: the built-in rules every workspace has (in code, locked) and the rules operators
 * author (rows of `automation_rules`), one shape for both.
 */
import type { components } from '../../generated/openapi.ts';
import type { DbAutomationRuleRow } from './queries.ts';

export type Trigger = components['schemas']['AutomationTrigger'];
export type Condition = components['schemas']['AutomationCondition'];
export type Action = components['schemas']['AutomationAction'];
export type RuleView = components['schemas']['AutomationRule'];

export interface Rule {
  readonly appId: string;
  readonly ruleId: string;
  readonly name: string;
  readonly description: string | null;
  readonly enabled: boolean;
  /** Changes made before this time (Unix ms) never run the rule: before it existed, or before it was last resumed. */
  readonly enabledSince: number;
  readonly builtIn: boolean;
  readonly trigger: Trigger;
  readonly actions: readonly Action[];
  readonly createdAt: number;
  readonly updatedAt: number;
}

/** `app_id/rule_id`: how a run's change events name their rule (the loop guard compares it). */
export const ruleKey = (r: { appId: string; ruleId: string }) => `${r.appId}/${r.ruleId}`;

/** Rules of the service itself, in every workspace: visible, never paused or deleted (`can_manage: false`). */
export const BUILT_IN_RULES: readonly Rule[] = [
  {
    appId: 'core',
    ruleId: 'builtin.deal-closed',
    name: 'Tell owners and admins when a deal closes',
    description: 'When a deal enters a won or lost stage (its closed_at is set), every active owner and admin gets a notice in their inbox.',
    enabled: true,
    enabledSince: 0,
    builtIn: true,
    trigger: { resource_type: 'core:Deal', event: 'updated', fields: ['closed_at'], conditions: [{ field: 'closed_at', op: 'exists' }] },
    actions: [
      {
        type: 'notify',
        to: 'owners_and_admins',
        title: 'Deal closed: {{record.data.name}}',
        body: 'The deal "{{record.data.name}}" ({{record.id}}) entered its closing stage "{{record.data.stage_id}}".',
      },
    ],
    createdAt: 0,
    updatedAt: 0,
  },
];

export function ruleFromRow(row: DbAutomationRuleRow): Rule {
  return {
    appId: row.app_id,
    ruleId: row.rule_id,
    name: row.name,
    description: row.description,
    enabled: Boolean(row.enabled),
    enabledSince: Number(row.enabled_since),
    builtIn: false,
    trigger: JSON.parse(row.trigger) as Trigger,
    actions: JSON.parse(row.actions) as Action[],
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  };
}

/** The API's view of a rule for a caller: `can_manage` says whether that caller may pause or delete it. */
export function ruleView(rule: Rule, canManage: boolean): RuleView {
  return {
    rule_id: rule.ruleId,
    app_id: rule.appId,
    name: rule.name,
    ...(rule.description ? { description: rule.description } : {}),
    enabled: rule.enabled,
    can_manage: canManage && !rule.builtIn,
    built_in: rule.builtIn,
    trigger: rule.trigger,
    actions: [...rule.actions],
    created_at: rule.createdAt,
    updated_at: rule.updatedAt,
  };
}

/** Built-in rules matching a list filter, in (app_id, rule_id) order. */
export function builtInRules(filter: { appId?: string; enabled?: boolean }): Rule[] {
  return BUILT_IN_RULES.filter((r) => (filter.appId === undefined || r.appId === filter.appId) && (filter.enabled === undefined || r.enabled === filter.enabled)).sort(compareRules);
}

export function compareRules(a: { appId: string; ruleId: string }, b: { appId: string; ruleId: string }): number {
  return a.appId < b.appId ? -1 : a.appId > b.appId ? 1 : a.ruleId < b.ruleId ? -1 : a.ruleId > b.ruleId ? 1 : 0;
}
