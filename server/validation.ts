import type { ErrorObject, ValidateFunction } from 'ajv';
import type { CatalogueEntry } from '../generated/catalogue.ts';
import type { DereferencedDocument, SchemaObject } from '../generated/dereferenced.ts';
import { createAjv } from './ajv.cjs';
import { invalidInput } from './errors.ts';
import { nearest } from './suggest.ts';
import { DISPLAY_TEXT_FORMAT, displayTextProblem } from './text.cjs';

type Json = Record<string, unknown>;

interface OperationValidators {
  body: ValidateFunction | null;
  headers: ValidateFunction;
  /** Lower-case names of the documented header parameters (the string rule covers their values). */
  headerNames: string[];
  responses: Map<number, ValidateFunction>;
}

// U+0000, or a UTF-16 surrogate not part of a pair: PostgreSQL refuses the first (500 before this
// rule) and stores the second as U+FFFD, so two different strings would become one.
const SUSPECT = /[\u0000\uD800-\uDFFF]/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function textFault(s: string): string | null {
  if (!SUSPECT.test(s)) return null;
  if (s.includes('\u0000')) return 'contains U+0000 (NUL), which no string may contain';
  return LONE_SURROGATE.test(s) ? 'contains a lone UTF-16 surrogate (not well-formed Unicode)' : null;
}

/**
 * The document's string rule (openapi.yaml, "Strings"): every string of a request, object keys
 * included, at any depth, must be well-formed Unicode without U+0000. Returns the first problem, e.g.
 * `body.data.name contains U+0000 (NUL), ...`, or null.
 */
export function textProblem(where: string, value: unknown): string | null {
  return suspect(value) ? locate(where, value) : null;
}

/** Whether any string or key holds U+0000 or a surrogate (the common case, none, builds no paths). */
function suspect(value: unknown): boolean {
  // Explicit stacks: a deeply nested value must not overflow the call stack.
  const stack: unknown[] = [value];
  while (stack.length) {
    const v = stack.pop();
    if (typeof v === 'string') {
      if (SUSPECT.test(v)) return true;
    } else if (Array.isArray(v)) {
      for (const item of v) stack.push(item);
    } else if (typeof v === 'object' && v !== null) {
      for (const k in v) {
        if (!Object.prototype.hasOwnProperty.call(v, k)) continue;
        if (SUSPECT.test(k)) return true;
        stack.push((v as Record<string, unknown>)[k]);
      }
    }
  }
  return false;
}

function locate(where: string, value: unknown): string | null {
  const stack: Array<[string, unknown]> = [[where, value]];
  while (stack.length) {
    const [at, v] = stack.pop()!;
    if (typeof v === 'string') {
      const fault = textFault(v);
      if (fault) return `${at} ${fault}`;
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push([`${at}[${i}]`, v[i]]);
    } else if (typeof v === 'object' && v !== null) {
      const entries = Object.entries(v);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [k, item] = entries[i]!;
        const fault = textFault(k);
        if (fault) return `${at} has a key that ${fault}`;
        stack.push([`${at}.${k}`, item]);
      }
    }
  }
  return null;
}

/** Enums up to this many values are listed in a refusal; longer ones are described (e.g. 156 currency codes). */
const LISTED_VALUES = 12;

/**
 * What the values of a long enum look like, for a refusal: the schema's description (its first
 * sentence, e.g. "an ISO 4217 code of a circulating currency, upper case") or the values' shape
 * ("3 upper-case letters"), one or two examples, how many there are, and the value meant when the
 * one sent differs only in case or separators.
 */
function manyValues(values: unknown[], schema: unknown, sent: unknown): string {
  const strings = values.filter((v): v is string => typeof v === 'string');
  const s = (schema ?? {}) as { description?: unknown; example?: unknown };
  const first = typeof s.description === 'string' ? /^[^.]*[^.\s]/.exec(s.description.trim().replace(/\s+/g, ' '))?.[0] : undefined;
  let what = first ? first.replace(/^(A|An|The) /, '') : shapeOf(strings);
  if (first) what = `${/^[aeiouAEIOU]/.test(what) ? 'an' : 'a'} ${what[0]!.toLowerCase() === what[0] || /^[A-Z]{2,}/.test(what) ? what : what[0]!.toLowerCase() + what.slice(1)}`;
  const examples = [...new Set([...(typeof s.example === 'string' && strings.includes(s.example) ? [s.example] : []), ...(strings.includes('USD') ? ['USD'] : []), ...strings])].slice(0, 2);
  // Only a value that differs in case or separators: among 156 three-letter codes, most others are two edits from some code.
  const plain = (v: string) => v.toLowerCase().replace(/[-_\s]/g, '');
  const near = typeof sent === 'string' ? (strings.find((v) => plain(v) === plain(sent)) ?? null) : null;
  const meant = near !== null && near !== sent ? `; did you mean "${near}"?` : '';
  return `must be ${what}, such as ${examples.map((v) => `"${v}"`).join(' or ')} (${values.length} accepted values, listed in the document)${meant}`;
}

/** The shape shared by a list of values, e.g. "3 upper-case letters" or "lower-case letters, digits and _ (2 to 20 characters)". */
function shapeOf(values: string[]): string {
  if (!values.length) return 'one of the values the document lists';
  const lengths = values.map((v) => [...v].length);
  const [min, max] = [Math.min(...lengths), Math.max(...lengths)];
  const kinds: string[] = [];
  if (values.some((v) => /[A-Z]/.test(v))) kinds.push('upper-case letters');
  if (values.some((v) => /[a-z]/.test(v))) kinds.push('lower-case letters');
  if (values.some((v) => /[0-9]/.test(v))) kinds.push('digits');
  const others = [...new Set(values.join('').replace(/[A-Za-z0-9]/g, ''))];
  kinds.push(...others.map((c) => c));
  const made = kinds.length > 1 ? `${kinds.slice(0, -1).join(', ')} and ${kinds[kinds.length - 1]}` : kinds[0] ?? 'text';
  return min === max ? `${min} ${made}` : `${made} (${min} to ${max} characters)`;
}

/** One readable problem from an Ajv error, e.g. `body.name is required` (also the collection path's). */
export function describe(where: string, e: ErrorObject): string {
  const path = `${where}${e.instancePath.replace(/\//g, '.')}`;
  if (e.keyword === 'additionalProperties') {
    const field = String(e.params.additionalProperty);
    const known = Object.keys((e.parentSchema as { properties?: Record<string, unknown> } | undefined)?.properties ?? {});
    const near = nearest(field, known);
    const hint = near ? ` (did you mean \`${near}\`?)` : known.length && known.length <= 8 ? ` (known fields: ${known.map((k) => `\`${k}\``).join(', ')})` : '';
    return `${path}.${field} is not a known field${hint}`;
  }
  if (e.keyword === 'required' && where === 'headers' && e.params.missingProperty === 'idempotency-key') {
    return 'header idempotency-key is required: every command takes an Idempotency-Key header (1 to 200 characters, e.g. a UUID v4); a retry with the same key and body answers the first response instead of acting twice';
  }
  if (e.keyword === 'required') return `${path}.${String(e.params.missingProperty)} is required`;
  if (e.keyword === 'enum') {
    const allowed = (e.params.allowedValues as unknown[]).map((v) => JSON.stringify(v));
    // A field with one allowed value says why, from its description (e.g. a pause-only update).
    const why = allowed.length === 1 && typeof e.parentSchema?.description === 'string' ? `: ${e.parentSchema.description.trim()}` : '';
    if (allowed.length === 1) return `${path} must be ${allowed[0]}${why}`;
    if (allowed.length > LISTED_VALUES) return `${path} ${manyValues(e.params.allowedValues as unknown[], e.parentSchema, e.data)}`;
    return `${path} must be one of ${allowed.join(', ')}`;
  }
  if (e.keyword === 'format' && e.params.format === DISPLAY_TEXT_FORMAT) {
    // `data` is there when the instance is verbose (the API's); the rule's own words either way.
    return (typeof e.data === 'string' ? displayTextProblem(path, e.data) : null) ?? `${path} contains a bidi control (U+202A–U+202E, U+2066–U+2069), a control that reorders text; names may not contain bidi controls`;
  }
  return `${path} ${e.message ?? 'is invalid'}`;
}

/**
 * Request and response validators for every operation, compiled once from the dereferenced document
 * (no type coercion, defaults applied, unknown fields refused: server/ajv.cjs).
 */
export class ContractValidator {
  // verbose: an error carries its schema, so a refusal can quote the field's description.
  private readonly ajv = createAjv({ useDefaults: true, verbose: true });
  private readonly byOperation = new Map<string, OperationValidators>();

  constructor(document: DereferencedDocument, entries: readonly CatalogueEntry[]) {
    for (const entry of entries) {
      const op = document.paths[entry.path]?.[entry.method];
      if (!op) throw new Error(`the document has no operation ${entry.method.toUpperCase()} ${entry.path} (${entry.id})`);
      const headerProps: Record<string, SchemaObject> = {};
      const required: string[] = [];
      for (const param of op.parameters ?? []) {
        if (param.in !== 'header') continue;
        const name = param.name.toLowerCase();
        headerProps[name] = param.schema ?? {};
        if (param.required === true) required.push(name);
      }
      const bodySchema = op.requestBody?.content['application/json']?.schema;
      const responses = new Map<number, ValidateFunction>();
      for (const [status, response] of Object.entries(op.responses)) {
        const schema = response.content?.['application/json']?.schema;
        if (schema) responses.set(Number(status), this.ajv.compile(schema));
      }
      this.byOperation.set(entry.id, {
        body: bodySchema ? this.ajv.compile(bodySchema) : null,
        headers: this.ajv.compile({ type: 'object', properties: headerProps, required }),
        headerNames: Object.keys(headerProps),
        responses,
      });
    }
  }

  /**
   * Validates headers, query and body of a request (applying schema defaults to the body), and the
   * string rule on every header parameter, query value and body string; throws 400 invalid_input.
   */
  validateRequest(entry: CatalogueEntry, headers: Json, query: Json, body: unknown): void {
    const v = this.byOperation.get(entry.id)!;
    const unknownQuery = Object.keys(query)[0];
    if (unknownQuery !== undefined) throw invalidInput(`query.${unknownQuery} is not a known query parameter`);
    if (!v.headers(headers)) throw invalidInput(describe('headers', v.headers.errors![0]!).replace(/^headers\./, 'header '));
    for (const name of v.headerNames) {
      const problem = textProblem(`header ${name}`, headers[name]);
      if (problem) throw invalidInput(problem);
    }
    this.validateBody(entry, body);
  }

  /** Validates a request body alone (internal calls, which have no headers): the schema and the string rule; throws 400 invalid_input. */
  validateBody(entry: CatalogueEntry, body: unknown): void {
    const v = this.byOperation.get(entry.id)!;
    if (v.body && !v.body(body)) throw invalidInput(describe('body', v.body.errors![0]!));
    const problem = textProblem('body', body);
    if (problem) throw invalidInput(problem);
  }

  /** The first way a response breaks its declared schema, or null (development and tests). */
  responseProblem(entry: CatalogueEntry, status: number, body: unknown): string | null {
    const validate = this.byOperation.get(entry.id)?.responses.get(status);
    if (!validate) return `${entry.id} does not declare status ${status}`;
    return validate(body) ? null : describe('response', validate.errors![0]!);
  }
}
