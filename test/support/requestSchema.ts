import type { ValidateFunction } from 'ajv';
import { type CatalogueEntry, catalogue } from '../../generated/catalogue.ts';
import { dereferenced } from '../../generated/dereferenced.ts';
import { createAjv, toJsonSchema } from '../../server/ajv.cjs';

/**
 * The documented operations read straight from the dereferenced document (generated/dereferenced.ts)
 * and the catalogue, for the generated bad-input cases and the fuzz test: request schemas translated
 * to JSON Schema (server/ajv.cjs `toJsonSchema`, with `x-ref` and `x-example`), examples, header
 * parameters and documented statuses. Nothing here names an operation or a field.
 */

export type Schema = Record<string, any>;
type Json = Record<string, unknown>;
export type Path = ReadonlyArray<string | number>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const jsonSchema = (node: unknown): Schema => toJsonSchema(node, { annotate: true });

/** An independent validator (its own Ajv instance of the one set-up). */
const ajv = createAjv();
const compiled = new WeakMap<Schema, ValidateFunction>();
export function validatorOf(schema: Schema): ValidateFunction {
  let v = compiled.get(schema);
  if (!v) compiled.set(schema, (v = ajv.compile(schema)));
  return v;
}
export const fits = (schema: Schema, value: unknown): boolean => value !== undefined && validatorOf(schema)(value) === true;

export interface HeaderParam {
  /** As documented, e.g. `Idempotency-Key`. */
  name: string;
  required: boolean;
  schema: Schema;
}

/** A documented operation, as the generated tests see it. */
export interface DocOperation {
  id: string;
  method: 'get' | 'post';
  /** Below /v1. */
  path: string;
  kind: 'query' | 'command' | 'collection';
  actAs: 'none' | 'optional' | 'required';
  /** The catalogue entry (null for the collection endpoints, which are outside the catalogue). */
  entry: CatalogueEntry | null;
  headers: HeaderParam[];
  /** The JSON request body schema, translated; null when the operation takes no body. */
  body: Schema | null;
  /** Request media types (application/json first). */
  contentTypes: string[];
  /** The request example of application/json, as written in the document. */
  example: unknown;
  /** Documented response statuses. */
  statuses: number[];
}

function readOperations(): DocOperation[] {
  const byId = new Map<string, CatalogueEntry>((catalogue as readonly CatalogueEntry[]).map((e) => [e.id, e]));
  const out: DocOperation[] = [];
  for (const [path, item] of Object.entries(dereferenced.paths)) {
    for (const method of ['get', 'post'] as const) {
      const op = item[method];
      if (!op) continue;
      const id = String(op.operationId);
      const media = op.requestBody?.content ?? {};
      const json = media['application/json'] ?? null;
      const headers: HeaderParam[] = [];
      for (const param of op.parameters ?? []) {
        if (param.in === 'header') headers.push({ name: String(param.name), required: param.required === true, schema: jsonSchema(param.schema) });
      }
      out.push({
        id,
        method,
        path,
        kind: (op['x-service-kind'] as DocOperation['kind']) ?? 'query',
        actAs: (op['x-service-act-as'] as DocOperation['actAs']) ?? 'none',
        entry: byId.get(id) ?? null,
        headers,
        body: json ? jsonSchema(json.schema) : null,
        contentTypes: Object.keys(media).sort((a, b) => (a === 'application/json' ? -1 : b === 'application/json' ? 1 : a.localeCompare(b))),
        example: json ? structuredClone(json.example) : undefined,
        statuses: Object.keys(op.responses).map(Number).sort((a, b) => a - b),
      });
    }
  }
  return out.sort((a, b) => a.id.localeCompare(b.id));
}

/** Every operation of the document, sorted by id. */
export const docOperations: readonly DocOperation[] = readOperations();
/** The catalogued ones (operation-call convention: API key, /operations/<id> or a discovery GET). */
export const catalogued = docOperations.filter((o) => o.entry !== null);

// ---- Paths into a JSON value -----------------------------------------------------------------------

export const pathLabel = (path: Path): string =>
  path.length === 0 ? 'body' : `body${path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${p}`)).join('')}`;

export function getAt(root: unknown, path: Path): unknown {
  let at = root;
  for (const key of path) at = isObject(at) || Array.isArray(at) ? (at as Record<string | number, unknown>)[key] : undefined;
  return at;
}

/** A deep copy of `root` with the value at `path` replaced (parents must exist). */
export function setAt<T>(root: T, path: Path, value: unknown): T {
  if (path.length === 0) return structuredClone(value) as T;
  const copy = structuredClone(root) as Record<string | number, unknown>;
  let at = copy;
  for (const key of path.slice(0, -1)) at = at[key] as Record<string | number, unknown>;
  at[path[path.length - 1]!] = structuredClone(value);
  return copy as T;
}

/** A deep copy of `root` without the value at `path`. */
export function deleteAt<T>(root: T, path: Path): T {
  const copy = structuredClone(root) as Record<string | number, unknown>;
  let at = copy;
  for (const key of path.slice(0, -1)) at = at[key] as Record<string | number, unknown>;
  const last = path[path.length - 1]!;
  if (Array.isArray(at) && typeof last === 'number') at.splice(last, 1);
  else delete at[last];
  return copy as T;
}

// ---- Schema shape ------------------------------------------------------------------------------

/** allOf merged into one node (the document uses allOf to add a description to a $ref). */
export function flatten(schema: Schema): Schema {
  if (!Array.isArray(schema.allOf)) return schema;
  const { allOf, ...rest } = schema;
  let out: Schema = {};
  for (const part of [...(allOf as Schema[]).map(flatten), rest]) {
    out = { ...out, ...part, ...(out.properties || part.properties ? { properties: { ...out.properties, ...part.properties } } : {}) };
    if (out.required || part.required) out.required = [...new Set([...(out.required ?? []), ...(part.required ?? [])])];
  }
  return out;
}

export type Kind = 'string' | 'number' | 'integer' | 'boolean' | 'array' | 'object' | 'null';
const ALL_KINDS: readonly Kind[] = ['string', 'number', 'integer', 'boolean', 'array', 'object', 'null'];

function kindOf(value: unknown): Kind {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value as Kind;
}

/** JSON types a schema can accept at all. */
export function acceptedKinds(schema: Schema): Set<Kind> {
  const s = flatten(schema);
  const branches = (s.oneOf ?? s.anyOf) as Schema[] | undefined;
  if (branches) return new Set(branches.flatMap((b) => [...acceptedKinds(b)]));
  let kinds: Set<Kind>;
  if (Array.isArray(s.enum)) kinds = new Set(s.enum.map(kindOf));
  else if (s.type === undefined) kinds = new Set(ALL_KINDS);
  else kinds = new Set([].concat(s.type) as Kind[]);
  if (kinds.has('number')) kinds.add('integer');
  return kinds;
}

const firstType = (s: Schema): string | undefined => [].concat(s.type ?? []).find((t) => t !== 'null');

/** A valid value of `schema`: its example when that fits, else the smallest value built from its keywords. */
export function sampleOf(schema: Schema): unknown {
  const s = flatten(schema);
  const value = build(s);
  if (!fits(schema, value)) throw new Error(`cannot build a valid sample of ${JSON.stringify(schema).slice(0, 300)} (built ${JSON.stringify(value)})`);
  return value;
}

function build(s: Schema): unknown {
  if (s['x-example'] !== undefined && fits(s, s['x-example'])) return structuredClone(s['x-example']);
  if (s.default !== undefined && fits(s, s.default)) return structuredClone(s.default);
  if (Array.isArray(s.enum)) return s.enum[0];
  const branches = (s.oneOf ?? s.anyOf) as Schema[] | undefined;
  if (branches) return sampleOf(branches[0]!);
  switch (firstType(s)) {
    case 'string': {
      const n = Math.max(s.minLength ?? 1, 1);
      const candidates = ['x'.repeat(n), 'a'.repeat(n), '0'.repeat(n), 'A'.repeat(n)];
      return candidates.find((c) => fits(s, c)) ?? candidates[0];
    }
    case 'integer':
    case 'number':
      return typeof s.minimum === 'number' ? s.minimum : typeof s.maximum === 'number' ? Math.min(0, s.maximum) : 0;
    case 'boolean':
      return true;
    case 'array': {
      const n = s.minItems ?? 0;
      const itemSchema = (s.items ?? {}) as Schema;
      const item = flatten(itemSchema);
      if (s.uniqueItems && Array.isArray(item.enum)) return item.enum.slice(0, n);
      return Array.from({ length: n }, () => sampleOf(itemSchema));
    }
    case 'object': {
      const out: Json = {};
      for (const k of (s.required ?? []) as string[]) out[k] = sampleOf((s.properties?.[k] ?? {}) as Schema);
      return out;
    }
    default:
      return s.type === 'null' || (Array.isArray(s.type) && s.type.includes('null')) ? null : 'x';
  }
}

// ---- Bad-input cases from a schema ---------------------------------------------------------------

/** Why a case must be refused: the field's schema, the document's string rule, or the cursor rule. */
export type CaseRule = 'schema' | 'strings' | 'cursor';

export interface BodyCase {
  /** e.g. `body.data.stages[0].id: longer than maxLength 64`. */
  what: string;
  body: unknown;
  rule: CaseRule;
}

const WRONG_TYPES: ReadonlyArray<readonly [Kind, unknown]> = [
  ['string', '1'],
  ['number', 1.5],
  ['integer', 7],
  ['boolean', true],
  ['array', []],
  ['object', {}],
  ['null', null],
];

const show = (v: unknown): string => {
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 40 ? `${s.slice(0, 37)}...` : s;
};

/** A cursor-shaped string no service issued: base64url JSON with and without a made-up signature. */
export const forgedCursors: ReadonlyArray<readonly [string, string]> = [
  ['not a cursor', 'not-a-cursor'],
  ['an unsigned base64url position', Buffer.from(JSON.stringify({ u: 0, i: 'pl_x', p: 1, v: '/', from: 0, to: 1, f: 'AAAAAAAAAAAA' })).toString('base64url')],
  [
    'a position with a made-up signature',
    `${Buffer.from(JSON.stringify({ u: 1e308, i: 'pl_x', p: 1, v: '/', from: 0, to: 2932896, f: 'AAAAAAAAAAAA' })).toString('base64url')}.${Buffer.alloc(16, 7).toString('base64url')}`,
  ],
];

/** String-rule variants of a valid string `v` (same length in code points, so bounds still hold). */
function ruleBreakers(v: string): Array<[string, string]> {
  const swap = (c: string) => (v.length ? `${[...v].slice(0, -1).join('')}${c}` : c);
  return [
    ['with U+0000 (NUL)', swap('\u0000')],
    ['with a lone high surrogate', swap('\ud800')],
    ['with a lone low surrogate', swap('\udc00')],
  ];
}

function stringCases(s: Schema, v: string): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  if (typeof s.minLength === 'number' && s.minLength > 0) out.push([`shorter than minLength ${s.minLength}`, 'x'.repeat(s.minLength - 1)]);
  if (typeof s.maxLength === 'number') out.push([`longer than maxLength ${s.maxLength}`, 'x'.repeat(s.maxLength + 1)]);
  if (typeof s.pattern === 'string') {
    const re = new RegExp(s.pattern, 'u');
    const base = v || 'x';
    const tries = [`${base} x`, `${base}.x`, `${base}/x`, `${base}é`, `${base}\n`, '', ' '];
    const misses = tries.filter((t) => !re.test(t) && t.length >= (s.minLength ?? 0) && t.length <= (s.maxLength ?? Infinity)).slice(0, 3);
    for (const t of misses) out.push([`not matching ${s.pattern}`, t]);
  }
  if (Array.isArray(s.enum)) {
    out.push(['not in the enum', 'zz_not_in_enum']);
    const first = s.enum.find((e: unknown) => typeof e === 'string') as string | undefined;
    if (first) {
      const other = first === first.toUpperCase() ? first.toLowerCase() : first.toUpperCase();
      if (other !== first && !s.enum.includes(other)) out.push(['in the wrong case', other]);
    }
  }
  // display-text: text a person reads, without bidi embedding, override or isolate controls (server/text.cjs).
  if (s.format === 'display-text') {
    for (const c of ['\u202e', '\u2067']) out.push([`with U+${c.codePointAt(0)!.toString(16).toUpperCase()} (a bidi control, not display text)`, v.length ? `${[...v].slice(0, -1).join('')}${c}` : c]);
  } else if (typeof s.format === 'string') out.push([`not a ${s.format}`, `not a ${s.format}`]);
  return out;
}

function numberCases(s: Schema, integer: boolean): Array<[string, number]> {
  const out: Array<[string, number]> = [];
  const step = integer ? 1 : 0.5;
  if (typeof s.minimum === 'number') out.push([`below minimum ${s.minimum}`, s.minimum - step]);
  if (typeof s.exclusiveMinimum === 'number') out.push([`at exclusiveMinimum ${s.exclusiveMinimum}`, s.exclusiveMinimum]);
  if (typeof s.maximum === 'number') out.push([`above maximum ${s.maximum}`, s.maximum + step]);
  if (typeof s.exclusiveMaximum === 'number') out.push([`at exclusiveMaximum ${s.exclusiveMaximum}`, s.exclusiveMaximum]);
  if (typeof s.maximum === 'number' && s.maximum < 2 ** 63) out.push(['2^63 (past any bigint)', 2 ** 63]);
  if (typeof s.minimum === 'number' && s.minimum > -(2 ** 63)) out.push(['-2^63', -(2 ** 63)]);
  if (integer) {
    const lo = typeof s.minimum === 'number' ? s.minimum : 0;
    out.push(['not an integer', lo + 0.5]);
    if (typeof s.maximum !== 'number') out.push(['1e308', 1e308]);
  }
  return out;
}

/**
 * Every bad variant of `base` (a valid body) that the schema describes: each field's wrong JSON
 * types, `null` where not nullable, bounds, patterns and enums, a required field missing, an
 * unknown key where additionalProperties is false, array sizes and duplicates, nested objects and
 * array items included (a missing parent is filled with a valid sample first); plus the string rule
 * on every free-text field and forged cursors on cursor fields. `schema` cases the independent
 * validator accepts, and rule cases it refuses (redundant), are dropped and listed.
 */
export function bodyCases(schema: Schema, base: unknown): { cases: BodyCase[]; dropped: string[] } {
  if (!fits(schema, base)) throw new Error(`the base body does not fit its schema: ${JSON.stringify(base).slice(0, 300)}`);
  const raw: BodyCase[] = [];
  walk(schema, [], base, raw, false);
  const cases: BodyCase[] = [];
  const dropped: string[] = [];
  const seen = new Set<string>();
  for (const c of raw) {
    const key = JSON.stringify(c.body);
    if (seen.has(key)) continue;
    seen.add(key);
    const valid = fits(schema, c.body);
    if ((c.rule === 'schema') === valid) dropped.push(c.what);
    else cases.push(c);
  }
  return { cases, dropped };
}

function walk(schema: Schema, path: Path, ctx: unknown, out: BodyCase[], typesDone: boolean): void {
  const s = flatten(schema);
  const label = pathLabel(path);
  const push = (what: string, body: unknown, rule: CaseRule = 'schema') => out.push({ what: `${label}: ${what}`, body, rule });
  const current = getAt(ctx, path);

  if (path.length > 0 && !typesDone) {
    const kinds = acceptedKinds(s);
    for (const [kind, value] of WRONG_TYPES) {
      if (!kinds.has(kind)) push(kind === 'null' ? 'null, not nullable' : `of the wrong type ${kind} (${show(value)})`, setAt(ctx, path, value));
    }
  }

  const branches = (s.oneOf ?? s.anyOf) as Schema[] | undefined;
  if (branches) {
    for (const branch of branches) {
      const value = fits(branch, current) ? current : sampleOf(branch);
      walk(branch, path, setAt(ctx, path, value), out, true);
    }
    return;
  }

  if (typeof current === 'string') {
    for (const [what, v] of stringCases(s, current)) push(`${what} (${show(v)})`, setAt(ctx, path, v));
    if (s['x-ref'] === 'PageCursor') for (const [what, v] of forgedCursors) push(`a cursor: ${what}`, setAt(ctx, path, v), 'cursor');
    else if (!Array.isArray(s.enum) && s.pattern === undefined && (s.format === undefined || s.format === 'display-text')) {
      for (const [what, v] of ruleBreakers(current)) push(what, setAt(ctx, path, v), 'strings');
    }
  } else if (typeof current === 'number') {
    for (const [what, v] of numberCases(s, firstType(s) === 'integer')) push(`${what} (${v})`, setAt(ctx, path, v));
  } else if (typeof current === 'boolean' && Array.isArray(s.enum)) {
    push('not in the enum', setAt(ctx, path, !current));
  } else if (Array.isArray(current)) {
    const items = (s.items ?? {}) as Schema;
    if (typeof s.minItems === 'number' && s.minItems > 0) push(`fewer than minItems ${s.minItems}`, setAt(ctx, path, current.slice(0, s.minItems - 1)));
    if (typeof s.maxItems === 'number') {
      const pool = current.length ? current : [sampleOf(items)];
      push(`more than maxItems ${s.maxItems}`, setAt(ctx, path, Array.from({ length: s.maxItems + 1 }, (_, i) => pool[i % pool.length])));
    }
    const filled = current.length ? current : [sampleOf(items)];
    if (s.uniqueItems) push('with a duplicate item (uniqueItems)', setAt(ctx, path, [filled[0], ...filled]));
    walk(items, [...path, 0], current.length ? ctx : setAt(ctx, path, filled), out, false);
  } else if (isObject(current)) {
    for (const k of (s.required ?? []) as string[]) push(`required ${k} missing`, deleteAt(ctx, [...path, k]));
    if (s.additionalProperties === false) push('with an unknown key', setAt(ctx, [...path, 'zz_unknown'], 'x'));
    else if (isObject(s.additionalProperties)) {
      const value = sampleOf(s.additionalProperties);
      push('with a key holding U+0000 (NUL)', setAt(ctx, [...path, 'k\u0000'], value), 'strings');
      walk(s.additionalProperties, [...path, 'zz_key'], setAt(ctx, [...path, 'zz_key'], value), out, false);
    }
    for (const [k, prop] of Object.entries((s.properties ?? {}) as Record<string, Schema>)) {
      const present = getAt(ctx, [...path, k]);
      walk(prop, [...path, k], present === undefined ? setAt(ctx, [...path, k], sampleOf(prop)) : ctx, out, false);
    }
  }
}

// ---- Real ids in examples ----------------------------------------------------------------------

/** Ids as the service makes them: a short type prefix, `_`, at least 16 lower-case characters. */
export const ID_PATTERN = /^([a-z]{2,4})_[0-9a-z]{16,}$/;

/** A copy of `value` with every id-like string replaced by a real id of the same prefix, where one is known. */
export function withRealIds<T>(value: T, ids: ReadonlyMap<string, string>): T {
  if (typeof value === 'string') {
    const m = ID_PATTERN.exec(value);
    return (m && ids.has(m[1]!) ? ids.get(m[1]!) : value) as T;
  }
  if (Array.isArray(value)) return value.map((v) => withRealIds(v, ids)) as T;
  if (isObject(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, withRealIds(v, ids)])) as T;
  return value;
}

/** Id prefixes in `value` that `ids` does not know yet. */
export function unknownIdPrefixes(value: unknown, ids: ReadonlyMap<string, string>): string[] {
  const out = new Set<string>();
  const visit = (v: unknown) => {
    if (typeof v === 'string') {
      const m = ID_PATTERN.exec(v);
      if (m && !ids.has(m[1]!)) out.add(m[1]!);
    } else if (Array.isArray(v)) v.forEach(visit);
    else if (isObject(v)) Object.values(v).forEach(visit);
  };
  visit(value);
  return [...out];
}

/** Paths of every node of a schema tree (array items at index 0), for the fuzz test's mutations. */
export function schemaPaths(schema: Schema, path: Path = [], out: Array<{ path: Path; schema: Schema }> = []): Array<{ path: Path; schema: Schema }> {
  const s = flatten(schema);
  out.push({ path, schema: s });
  if (path.length > 12) return out;
  const children = (node: Schema) => {
    for (const [k, prop] of Object.entries((node.properties ?? {}) as Record<string, Schema>)) schemaPaths(prop, [...path, k], out);
    if (isObject(node.items)) schemaPaths(node.items, [...path, 0], out);
  };
  children(s);
  for (const b of (s.oneOf ?? s.anyOf ?? []) as Schema[]) children(flatten(b));
  return out;
}
