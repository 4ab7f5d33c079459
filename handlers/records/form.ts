/**
 * Record forms: a record type's fields (types.ts) as form inputs and back. Input names are `f.<field>`
 * and `f.<field>.<part>` (money, addresses); an empty input is an absent field. Values are passed to
 * the operation as typed (a number that is not one stays text), so the operation's own validation
 * words the refusal, as it would for an API caller.
 *
 * An edit form carries the record's `data` as the person opened it (`_orig`). Saving sends only the
 * fields the person changed: `data` for new values, `unset` for cleared optional fields, and
 * `expected` with each changed field's opened value (`{"$absent": true}` when it had none), so a field
 * someone else changed in between is a `409 conflict` the page shows, never a silent overwrite, while
 * changes to other fields merge.
 */
import { MAX_FORM_JSON_DEPTH, nestsDeeperThan } from '../../server/body.ts';
import { canonicalJson } from '../../server/ids.ts';
import type { RecordField, RecordType } from './types.ts';

export type FormBody = Record<string, unknown>;
type Data = Record<string, unknown>;

const str = (v: unknown): string => (typeof v === 'string' ? v : '');
export const same = (a: unknown, b: unknown): boolean => canonicalJson(a ?? null) === canonicalJson(b ?? null);

/** A form refusal before any call: a field the page could not read (JSON that does not parse). */
export class FormProblem extends Error {}

function scalarFrom(field: RecordField, raw: string): unknown {
  const v = raw.trim();
  if (v === '') return undefined;
  switch (field.kind) {
    case 'integer':
    case 'number': {
      const n = Number(v);
      return Number.isFinite(n) && /^-?\d+(\.\d+)?(e[+-]?\d+)?$/i.test(v) ? n : v;
    }
    case 'boolean':
      return v === 'true' ? true : v === 'false' ? false : v;
    default:
      return v;
  }
}

/** One field's value from the posted form (undefined: left empty). */
export function valueFrom(field: RecordField, body: FormBody, prefix = 'f.'): unknown {
  const name = `${prefix}${field.name}`;
  if (field.kind === 'object') {
    const out: Data = {};
    for (const part of field.fields) {
      const v = scalarFrom(part, str(body[`${name}.${part.name}`]));
      if (v !== undefined) out[part.name] = v;
    }
    return Object.keys(out).length ? out : undefined;
  }
  if (field.kind === 'json') {
    const raw = str(body[name]).trim();
    if (!raw) return undefined;
    let value: unknown;
    try {
      value = JSON.parse(raw) as unknown;
    } catch {
      throw new FormProblem(`${field.label} is not valid JSON: check the brackets, quotes and commas.`);
    }
    if (nestsDeeperThan(value)) throw new FormProblem(`${field.label} nests deeper than ${MAX_FORM_JSON_DEPTH} levels.`);
    return value;
  }
  return scalarFrom(field, str(body[name]));
}

/** What an input shows for a value (`object`: per part). */
export function shown(field: RecordField, value: unknown): string {
  if (value === undefined || value === null) return '';
  if (field.kind === 'json') return JSON.stringify(value, null, 2);
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

/** The writable fields of a type (what forms show). */
export const writable = (type: RecordType): RecordField[] => type.fields.filter((f) => !f.readOnly);

/** The values a posted form gives, by field name (absent fields left out). */
export function formValues(type: RecordType, body: FormBody): Data {
  const out: Data = {};
  for (const f of writable(type)) {
    const v = valueFrom(f, body);
    if (v !== undefined) out[f.name] = v;
  }
  return out;
}

/** The input of a create: every filled field. */
export function createInput(type: RecordType, body: FormBody): { data: Data; private?: boolean } {
  return { data: formValues(type, body), ...(type.canBePrivate && body.private === 'on' ? { private: true } : {}) };
}

/** The opened data an edit form carries (base64url JSON), and reading it back. */
export const encodeOpened = (data: Data): string => Buffer.from(JSON.stringify(data), 'utf8').toString('base64url');
export function decodeOpened(body: FormBody): Data | undefined {
  const raw = str(body._orig);
  if (!raw || raw.length > 200_000) return undefined;
  try {
    const v = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as unknown;
    return v && typeof v === 'object' && !Array.isArray(v) && !nestsDeeperThan(v) ? (v as Data) : undefined;
  } catch {
    return undefined;
  }
}

export interface UpdateInput {
  id: string;
  data?: Data;
  unset?: string[];
  expected?: Data;
}

/**
 * The update a posted edit form asks for, against the data it was opened with: only changed fields,
 * each with its opened value as `expected`. `changed` is empty when nothing changed; `problems` names
 * required fields left empty.
 */
export function updateInput(type: RecordType, id: string, opened: Data, body: FormBody): { input: UpdateInput; changed: string[]; problems: string[] } {
  const data: Data = {};
  const unset: string[] = [];
  const expected: Data = {};
  const changed: string[] = [];
  const problems: string[] = [];
  for (const f of writable(type)) {
    const now = valueFrom(f, body);
    const before = opened[f.name];
    if (same(now, before)) continue;
    if (now === undefined) {
      if (f.required) {
        problems.push(`${f.label} cannot be empty.`);
        continue;
      }
      unset.push(f.name);
    } else data[f.name] = now;
    expected[f.name] = before === undefined ? { $absent: true } : before;
    changed.push(f.name);
  }
  const input: UpdateInput = { id };
  if (Object.keys(data).length) input.data = data;
  if (unset.length) input.unset = unset;
  if (changed.length) input.expected = expected;
  return { input, changed, problems };
}
