/**
 * Rules and runs in words, for the settings pages: "When a core:Deal is updated (stage_id) and
 * amount.amount ≥ 10000", "Notify owners and admins: “Big deal: {{record.data.name}}”".
 */
import type { Action, Condition, Trigger } from './rules.ts';

const OPS: Record<Condition['op'], string> = {
  eq: '=',
  ne: '≠',
  in: 'is one of',
  not_in: 'is not one of',
  exists: 'is set',
  not_exists: 'is not set',
  gt: '>',
  gte: '≥',
  lt: '<',
  lte: '≤',
  contains: 'contains',
};

/** A value of a condition or an action's data: strings quoted, numbers and booleans bare, lists joined. */
export function valueInWords(value: unknown): string {
  if (typeof value === 'string') return `"${value}"`;
  if (Array.isArray(value)) return value.map(valueInWords).join(', ');
  if (value === undefined) return '';
  return JSON.stringify(value);
}

export function conditionInWords(c: Condition): string {
  if (c.op === 'exists' || c.op === 'not_exists') return `${c.field} ${OPS[c.op]}`;
  return `${c.field} ${OPS[c.op]} ${valueInWords(c.value)}`;
}

export function triggerInWords(t: Trigger): string {
  let text = t.resource_type === undefined ? `When ${t.event} happens` : `When a ${t.resource_type} is ${t.event}`;
  if (t.event === 'updated' && t.fields?.length) text += ` (${t.fields.join(', ')})`;
  if (t.conditions?.length) text += ` and ${t.conditions.map(conditionInWords).join(' and ')}`;
  return text;
}

const fieldList = (data: Record<string, unknown> | undefined) => Object.keys(data ?? {}).join(', ');

/** One action in words; `memberName` names a member id (`to: member`). */
export function actionInWords(a: Action, memberName: (id: string) => string): string {
  switch (a.type) {
    case 'notify': {
      const who = a.to === 'actor' ? 'the member who made the change' : a.to === 'member' ? (a.member_id ? memberName(a.member_id) : 'nobody (no member named)') : 'owners and admins';
      return `Notify ${who}: “${a.title ?? 'Automation: {{rule.name}}'}”`;
    }
    case 'set_fields': {
      const parts: string[] = [];
      if (a.data && Object.keys(a.data).length) parts.push(`Set ${fieldList(a.data)}`);
      if (a.unset?.length) parts.push(`remove ${a.unset.join(', ')}`);
      let text = `${parts.join(' and ') || 'Change nothing'} on ${a.record_id ? `the ${a.resource_type ?? ''} record ${a.record_id}` : 'the record'}`;
      if (a.expected && Object.keys(a.expected).length) text += `, only if ${Object.entries(a.expected).map(([k, v]) => `${k} is still ${valueInWords(v)}`).join(' and ')}`;
      return text;
    }
    case 'create_record':
      return `Create a ${a.resource_type ?? '(no type)'} record${a.data && Object.keys(a.data).length ? ` with ${fieldList(a.data)}` : ''}`;
  }
}

/** The values an action writes or says, for the rule page ("name = "Prospect of {{record.data.name}}""). */
export function actionDetails(a: Action): string[] {
  if (a.type === 'notify') return a.body ? [a.body] : [];
  return Object.entries(a.data ?? {}).map(([k, v]) => `${k} = ${valueInWords(v)}`);
}
