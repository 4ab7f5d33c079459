/**
 * What is wrong with an operator's workspace file, in words: `members.ada.role must be one of owner,
 * admin, member (got "boss")` instead of Ajv's `/members/ada/role must be equal to one of the allowed
 * values`. Every problem Ajv found (the file is checked with `allErrors`), at most a few, one line.
 */
import type { ErrorObject } from 'ajv';
import { DISPLAY_TEXT_FORMAT, displayTextProblem } from './text.cjs';

const MAX_PROBLEMS = 4;

/** Patterns of the workspace file's schema, said as a person would. */
const PATTERNS: Record<string, string> = {
  '^[^@\\s]+@[^@\\s]+$': 'must be an e-mail address such as ada@example.com',
  '^[a-z0-9.-]{1,253}$': 'must be a host name in lower case, such as docs.example.com',
  '^[A-Za-z0-9_-]{1,64}$': 'must be 1 to 64 letters, digits, _ or -',
  '^[a-z][a-z0-9_]{0,63}$': 'must start with a lower-case letter, then up to 63 lower-case letters, digits or _',
  '^[A-Z][A-Za-z0-9]{0,63}$': 'must start with an upper-case letter, then up to 63 letters or digits (e.g. Ticket)',
};

const TYPES: Record<string, string> = {
  string: 'text',
  number: 'a number',
  integer: 'a whole number',
  boolean: 'true or false',
  object: 'a mapping (name: value lines)',
  array: 'a list',
  null: 'empty',
};

/** `members.ada.role` from `/members/ada/role`; the whole file is "the file". */
function where(instancePath: string, property?: string): string {
  const parts = instancePath.split('/').slice(1).map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  if (property !== undefined) parts.push(property);
  return parts.length ? parts.join('.') : 'the file';
}

const listed = (values: unknown[]) => values.map((v) => (typeof v === 'string' ? v : JSON.stringify(v))).join(', ');
const got = (data: unknown) => (data === undefined || (typeof data === 'object' && data !== null) ? '' : ` (got ${JSON.stringify(data)})`);

/** The file's value at an Ajv instance path (errors carry it only when the validator is verbose). */
function valueAt(input: unknown, instancePath: string): unknown {
  let v = input;
  for (const part of instancePath.split('/').slice(1).map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))) {
    if (typeof v !== 'object' || v === null || !Object.hasOwn(v, part)) return undefined;
    v = (v as Record<string, unknown>)[part];
  }
  return v;
}

/** One Ajv error in words. */
function describeError(raw: ErrorObject, siblings: readonly ErrorObject[], input: unknown): string {
  const e = raw.data === undefined ? { ...raw, data: valueAt(input, raw.instancePath) } : raw;
  const at = where(e.instancePath);
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'required':
      return `${where(e.instancePath, String(p.missingProperty))} is required`;
    case 'additionalProperties':
      return `${where(e.instancePath, String(p.additionalProperty))} is not a known field`;
    case 'enum':
      return `${at} must be one of ${listed(p.allowedValues as unknown[])}${got(e.data)}`;
    case 'type':
      return `${at} must be ${String(p.type).split(',').map((t) => TYPES[t] ?? t).join(' or ')}${got(e.data)}`;
    case 'pattern':
      return `${at} ${PATTERNS[String(p.pattern)] ?? `must match ${String(p.pattern)}`}${got(e.data)}`;
    case 'propertyNames': {
      const name = String(p.propertyName);
      const inner = siblings.find((s) => s.keyword === 'pattern' && s.instancePath === e.instancePath && s.propertyName === name) ?? siblings.find((s) => s.keyword === 'pattern' && s.propertyName === name);
      const rule = inner ? (PATTERNS[String(inner.params.pattern)] ?? `must match ${String(inner.params.pattern)}`) : 'is not a valid name';
      return `${where(e.instancePath)}: the name "${name}" ${rule}`;
    }
    case 'format':
      if (p.format === DISPLAY_TEXT_FORMAT && typeof e.data === 'string') return displayTextProblem(at, e.data) ?? `${at} ${e.message ?? 'is invalid'}`;
      return `${at} ${e.message ?? 'is invalid'}`;
    case 'minLength':
      return Number(p.limit) === 1 ? `${at} must not be empty` : `${at} must be at least ${String(p.limit)} characters`;
    case 'maxLength':
      return `${at} must be at most ${String(p.limit)} characters`;
    case 'oneOf':
    case 'anyOf': {
      // The branches' own errors at the same place say what would do: e.g. `all`, `none` or a list.
      const options: string[] = [];
      for (const s of siblings) {
        if (s === raw || s.instancePath !== e.instancePath || !s.schemaPath.startsWith(e.schemaPath.replace(/\/(oneOf|anyOf)$/, ''))) continue;
        if (s.keyword === 'enum') options.push(...(s.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)));
        else if (s.keyword === 'type') options.push(TYPES[String(s.params.type)] ?? String(s.params.type));
      }
      const unique = [...new Set(options)];
      return unique.length ? `${at} must be ${unique.slice(0, -1).join(', ')}${unique.length > 1 ? ' or ' : ''}${unique[unique.length - 1]}${got(e.data)}` : `${at} ${e.message ?? 'is invalid'}`;
    }
    default:
      return `${at} ${e.message ?? 'is invalid'}`;
  }
}

/** Errors a `oneOf`/`anyOf` branch or a `propertyNames` rule produced: said once, by their parent. */
function isPart(e: ErrorObject, all: readonly ErrorObject[]): boolean {
  if (e.propertyName !== undefined) return all.some((o) => o.keyword === 'propertyNames' && o.params.propertyName === e.propertyName);
  return all.some((o) => (o.keyword === 'oneOf' || o.keyword === 'anyOf') && o !== e && e.instancePath === o.instancePath && e.schemaPath.startsWith(o.schemaPath.replace(/\/(oneOf|anyOf)$/, '/$1/')));
}

/** The problems of a workspace file from its validator's errors, in words, on one line. */
export function fileProblems(errors: readonly ErrorObject[] | null | undefined, input?: unknown): string {
  if (!errors?.length) return 'the file must be a mapping (workspace:, members:, keys: ...)';
  const said = [...new Set(errors.filter((e) => !isPart(e, errors)).map((e) => describeError(e, errors, input)))];
  const shown = said.slice(0, MAX_PROBLEMS).join('; ');
  return said.length > MAX_PROBLEMS ? `${shown}; and ${said.length - MAX_PROBLEMS} more` : shown;
}
