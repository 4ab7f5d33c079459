/**
 * The condition schema of rule triggers (AutomationCondition in the document) and the placeholders of
 * actions: small, documented, and evaluated here without a general expression language.
 */
import type { Condition } from './rules.ts';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** The value at a dotted path of `data`, or undefined. */
export function valueAt(data: unknown, path: string): unknown {
  let node: unknown = data;
  for (const part of path.split('.')) {
    if (node === null || typeof node !== 'object' || Array.isArray(node)) return undefined;
    node = (node as Record<string, unknown>)[part];
  }
  return node;
}

/** Numbers, and decimal strings (money amounts), as numbers; null for anything else. */
function numeric(value: unknown): number | null {
  if (typeof value === 'number' && Number.isFinite(value)) return value;
  if (typeof value === 'string' && /^-?\d+(\.\d+)?$/.test(value)) return Number(value);
  return null;
}

function equal(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => equal((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

export function holds(condition: Condition, data: unknown): boolean {
  const actual = valueAt(data, condition.field);
  const expected = condition.value as unknown;
  switch (condition.op) {
    case 'exists':
      return actual !== undefined;
    case 'not_exists':
      return actual === undefined;
    case 'eq':
      return actual !== undefined && equal(actual, expected);
    case 'ne':
      return actual === undefined || !equal(actual, expected);
    case 'in':
      return actual !== undefined && Array.isArray(expected) && expected.some((v) => equal(actual, v));
    case 'not_in':
      return Array.isArray(expected) && !expected.some((v) => equal(actual, v));
    case 'contains':
      if (typeof actual === 'string') return typeof expected === 'string' && actual.includes(expected);
      return Array.isArray(actual) && actual.some((v) => equal(v, expected));
    default: {
      const a = numeric(actual);
      const b = numeric(expected);
      if (a === null || b === null) return false;
      if (condition.op === 'gt') return a > b;
      if (condition.op === 'gte') return a >= b;
      if (condition.op === 'lt') return a < b;
      return a <= b;
    }
  }
}

/** Whether every condition holds on `data` (true for none). */
export function allHold(conditions: readonly Condition[] | undefined, data: unknown): boolean {
  return (conditions ?? []).every((c) => holds(c, data));
}

/** A problem with a condition's shape that the schema cannot say (for operators authoring rules), or null. */
export function conditionProblem(c: Condition): string | null {
  const needsValue = c.op !== 'exists' && c.op !== 'not_exists';
  if (needsValue && c.value === undefined) return `condition on ${c.field}: ${c.op} needs a value`;
  if (!needsValue && c.value !== undefined) return `condition on ${c.field}: ${c.op} takes no value`;
  if ((c.op === 'in' || c.op === 'not_in') && !Array.isArray(c.value)) return `condition on ${c.field}: ${c.op} needs an array value`;
  return null;
}

const PLACEHOLDER = /\{\{\s*([a-z_]+(?:\.[A-Za-z0-9_]+)*)\s*\}\}/g;
const WHOLE = /^\{\{\s*([a-z_]+(?:\.[A-Za-z0-9_]+)*)\s*\}\}$/;

/**
 * Placeholders of actions: `{{record.id}}`, `{{record.data.<path>}}`, `{{event.id}}`, `{{event.occurred_at}}`, `{{rule.name}}`.
 * A string that is one placeholder takes the value itself; in an object, a missing one leaves the key out.
 */
export function fill(value: unknown, scope: Record<string, unknown>): unknown {
  if (typeof value === 'string') {
    const whole = WHOLE.exec(value);
    // A whole placeholder keeps the value's type; a missing value leaves the key out (see below).
    if (whole) return valueAt(scope, whole[1]!);
    return value.replace(PLACEHOLDER, (_m, path: string) => {
      const v = valueAt(scope, path);
      return v === undefined || v === null ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v);
    });
  }
  if (Array.isArray(value)) return value.map((v) => fill(v, scope) ?? null);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).flatMap(([k, v]) => {
      const filled = fill(v, scope);
      return filled === undefined ? [] : [[k, filled]];
    }));
  }
  return value as Json;
}
