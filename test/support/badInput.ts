import assert from 'node:assert/strict';
import type { ErrorCode } from '../../server/errors.ts';

/** Helpers of test/badInput.test.ts: raw HTTP calls, the error-body assertion and field-case tables. */

export interface RawResponse {
  status: number;
  contentType: string;
  headers: Headers;
  text: string;
  body: unknown;
}

/** Headers of a raw call; `null` removes a default header. */
export type HeaderPatch = Record<string, string | null>;

/**
 * A plain HTTP call with full control of method, headers and body bytes. The body is sent as bytes, so
 * fetch adds no Content-Type of its own (a string body would get `text/plain`).
 */
export async function send(baseUrl: string, method: string, path: string, headers: HeaderPatch, body?: string): Promise<RawResponse> {
  const h: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) if (v !== null) h[k] = v;
  const res = await fetch(`${baseUrl}${path}`, { method, headers: h, ...(body === undefined ? {} : { body: new TextEncoder().encode(body) }) });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: res.status, contentType: res.headers.get('content-type') ?? '', headers: res.headers, text, body: parsed };
}

/** The documented error: this status, JSON, exactly `{error, message}`, both strings, with this code. */
export function assertErrorBody(res: RawResponse, status: number, code: ErrorCode, label: string, secrets: readonly string[] = []): void {
  const detail = `${label}\n      got ${res.status} ${res.contentType} ${res.text.slice(0, 400)}`;
  assert.equal(res.status, status, `wrong status: ${detail}`);
  assert.match(res.contentType, /^application\/json\b/, `not JSON: ${detail}`);
  const body = res.body as Record<string, unknown> | null;
  assert.ok(body !== null && typeof body === 'object' && !Array.isArray(body), `body is not an object: ${detail}`);
  assert.deepEqual(Object.keys(body).sort(), ['error', 'message'], `body keys: ${detail}`);
  assert.equal(typeof body.error, 'string', `error is not a string: ${detail}`);
  assert.equal(typeof body.message, 'string', `message is not a string: ${detail}`);
  assert.ok((body.message as string).length > 0, `empty message: ${detail}`);
  assert.equal(body.error, code, `wrong error code: ${detail}`);
  for (const s of secrets) assert.ok(!res.text.includes(s), `the error reveals a secret: ${detail}`);
}

export type Path = ReadonlyArray<string | number>;

export const pathLabel = (path: Path): string =>
  path.length === 0 ? 'body' : path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? p : `.${p}`)).join('');

/** A deep copy of `root` with the value at `path` replaced (created when missing). */
export function setAt<T>(root: T, path: Path, value: unknown): T {
  if (path.length === 0) return value as T;
  const copy = structuredClone(root) as Record<string | number, unknown>;
  let at: Record<string | number, unknown> = copy;
  for (const key of path.slice(0, -1)) at = at[key] as Record<string | number, unknown>;
  at[path[path.length - 1]!] = value;
  return copy as T;
}

/** A deep copy of `root` without the value at `path`. */
export function deleteAt<T>(root: T, path: Path): T {
  const copy = structuredClone(root) as Record<string | number, unknown>;
  let at: Record<string | number, unknown> = copy;
  for (const key of path.slice(0, -1)) at = at[key] as Record<string | number, unknown>;
  delete at[path[path.length - 1]!];
  return copy as T;
}

export function getAt(root: unknown, path: Path): unknown {
  let at = root as Record<string | number, unknown> | undefined;
  for (const key of path) at = at?.[key] as Record<string | number, unknown> | undefined;
  return at;
}

/** JSON types a schema may accept; `integer` values are numbers too. */
export type Kind = 'string' | 'number' | 'integer' | 'boolean' | 'array' | 'object' | 'null';

/** One value of every JSON type (a numeric string proves types are not coerced). */
const samples: ReadonlyArray<[Kind, unknown]> = [
  ['string', '1'],
  ['number', 1.5],
  ['integer', 7],
  ['boolean', true],
  ['array', []],
  ['object', {}],
  ['null', null],
];

/** How one request field is constrained. */
export interface FieldRule {
  path: Path;
  /** JSON types the schema accepts (every other type is a case). */
  accepts: Kind[];
  required?: boolean;
  /** Values of an accepted type that break a bound, enum or pattern. */
  bad?: ReadonlyArray<readonly [string, unknown]>;
  /** An object with `additionalProperties: false`: an unknown key is a case. */
  closed?: boolean;
}

export interface BodyCase {
  what: string;
  body: unknown;
}

const show = (v: unknown): string => {
  const s = JSON.stringify(v);
  return s.length > 40 ? `${s.slice(0, 37)}...` : s;
};

/** Every bad variant of `base` the rules describe: missing, each wrong JSON type, each bad value, an unknown key. */
export function fieldCases(base: unknown, rules: readonly FieldRule[]): BodyCase[] {
  const out: BodyCase[] = [];
  for (const rule of rules) {
    const at = pathLabel(rule.path);
    if (rule.path.length === 0) {
      if (rule.closed) out.push({ what: 'an unknown top-level field', body: { ...(base as object), colour: 'red' } });
      continue;
    }
    if (rule.required) out.push({ what: `${at} missing`, body: deleteAt(base, rule.path) });
    for (const [kind, value] of samples) {
      if (rule.accepts.includes(kind) || (kind === 'integer' && rule.accepts.includes('number'))) continue;
      out.push({ what: `${at} of the wrong type ${kind} (${show(value)})`, body: setAt(base, rule.path, value) });
    }
    for (const [why, value] of rule.bad ?? []) out.push({ what: `${at} ${why} (${show(value)})`, body: setAt(base, rule.path, value) });
    if (rule.closed) {
      const current = getAt(base, rule.path);
      out.push({ what: `${at} with an unknown key`, body: setAt(base, rule.path, { ...(current as object), colour: 'red' }) });
    }
  }
  return out;
}
