import crypto from 'node:crypto';
import { catalogue } from '../../../generated/catalogue.ts';
import type { ErrorCode } from '../../../server/errors.ts';
import { bodyCases, catalogued, type DocOperation, flatten } from '../requestSchema.ts';
import { headersFor } from './calls.ts';
import type { Fixture } from './fixture.ts';
import type { HeaderPatch } from './http.ts';

/** The generated cases: every field, header, body format and route rule of an operation, each with its documented refusal. */

/** One request that must be refused with exactly this status and error code, storing nothing. */
export interface HttpCase {
  what: string;
  method: string;
  /** Below /v1. */
  path: string;
  headers: HeaderPatch;
  body?: string;
  status: number;
  error: ErrorCode;
}

const long = (n: number, c = 'x') => c.repeat(n);
/** The same `wso_<key id>_` prefix with one character of the 43-character secret changed. */
const wrongSecret = (key: string): string => {
  const i = key.length - 43;
  return `${key.slice(0, i)}${key[i] === 'A' ? 'B' : 'A'}${key.slice(i + 1)}`;
};
const unknownMember = (n = 27) => `mb_${crypto.randomBytes(32).toString('hex')}`.slice(0, n);

/** Authorization headers that are not a valid key. */
export const authCases = (fx: Fixture): Array<[string, string | null]> => [
  ['Authorization missing', null],
  ['Authorization with the Basic scheme', `Basic ${Buffer.from(`user:${fx.key}`).toString('base64')}`],
  ['Authorization "Bearer" without a token', 'Bearer'],
  ['the key without the Bearer scheme', fx.key],
  ['a malformed token', 'Bearer not-an-api-key'],
  ['a truncated key', `Bearer ${fx.key.slice(0, -1)}`],
  ['the key followed by junk', `Bearer ${fx.key} junk`],
  ['the right key id with a wrong secret', `Bearer ${wrongSecret(fx.key)}`],
  ['a key id that does not exist', `Bearer wso_${'0'.repeat(24)}_${'A'.repeat(43)}`],
  ['a revoked key', `Bearer ${fx.revoked}`],
];

const badBodies: Array<[string, string]> = [
  ['a body that is not JSON', '{"id": '],
  ['a body that is plain text', 'hello'],
  ['a body with single quotes', "{'id': 'x'}"],
  ['a JSON array', '[]'],
  ['a JSON array of an object', '[{}]'],
  ['a JSON string', '"{}"'],
  ['a JSON number', '42'],
  ['a JSON boolean', 'true'],
  ['JSON null', 'null'],
  ['an empty body', ''],
];

/** JSON text of `base` with one more key written literally (so `__proto__` stays an own key). */
function withRawKey(base: unknown, key: string, valueJson: string): string {
  const rest = JSON.stringify(base).slice(1);
  return `{${JSON.stringify(key)}: ${valueJson}${rest === '}' ? '' : ','}${rest}`;
}

export interface CaseGroups {
  /** Every field of the request schema (and the string and cursor rules). */
  fields: HttpCase[];
  /** The body as a whole: JSON, Content-Type, size. */
  format: HttpCase[];
  /** Authorization, Idempotency-Key, Service-Act-As and every other documented header. */
  headers: HttpCase[];
  /** Query parameters and methods. */
  routing: HttpCase[];
  /** Generated field cases the independent validator found valid after all (dropped). */
  dropped: string[];
}

/** Every bad-input case of one operation, derived from the document and the catalogue entry. */
export function casesOf(op: DocOperation, fx: Fixture, base: unknown): CaseGroups {
  const groups: CaseGroups = { fields: [], format: [], headers: [], routing: [], dropped: [] };
  const method = op.method.toUpperCase();
  const c = (what: string, patch: HeaderPatch, body: string | undefined, status: number, error: ErrorCode, path = op.path, m = method): HttpCase => ({
    what: `${op.id}: ${what}`,
    method: m,
    path,
    headers: { ...headersFor(op, fx), ...patch },
    ...(body === undefined ? {} : { body }),
    status,
    error,
  });
  const json = base === undefined ? undefined : JSON.stringify(base);

  if (op.method === 'post' && op.body) {
    const { cases, dropped } = bodyCases(op.body, base);
    groups.dropped = dropped;
    for (const contentType of op.contentTypes) {
      const label = op.contentTypes.length > 1 ? ` [${contentType}]` : '';
      for (const bc of cases) groups.fields.push(c(`${bc.what}${label}`, { 'Content-Type': contentType }, JSON.stringify(bc.body), 400, 'invalid_input'));
    }
    for (const [what, raw] of badBodies) groups.format.push(c(what, {}, raw, 400, 'invalid_json'));
    groups.format.push(c('no body at all', {}, undefined, 400, 'invalid_json'));
    const refusedTypes: Array<string | null> = [null, 'text/plain', 'text/html', 'application/x-www-form-urlencoded', 'application/json; charset=latin1'];
    for (const type of refusedTypes.filter((t) => t === null || !op.contentTypes.includes(t))) {
      groups.format.push(c(`Content-Type ${type ?? 'missing'}`, { 'Content-Type': type }, json, 400, 'invalid_json'));
    }
    groups.format.push(c('an unknown "__proto__" field', {}, withRawKey(base, '__proto__', '{"polluted": true}'), 400, 'invalid_input'));
    groups.format.push(c('an unknown "constructor" field', {}, withRawKey(base, 'constructor', '{}'), 400, 'invalid_input'));
    // Larger than any body limit (1 MB for operations; the collection endpoint documents its own 413).
    const huge = withRawKey(base, 'padding', JSON.stringify(long(1_100_000)));
    groups.format.push(c('a body over the size limit', {}, huge, op.statuses.includes(413) ? 413 : 400, 'invalid_input'));
  }

  if (op.entry) {
    for (const [what, auth] of authCases(fx)) groups.headers.push(c(what, { Authorization: auth }, json, 401, 'invalid_key'));
    for (const h of op.headers) {
      const s = flatten(h.schema);
      if (h.required) groups.headers.push(c(`${h.name} missing`, { [h.name]: null }, json, 400, 'invalid_input'));
      if (typeof s.minLength === 'number' && s.minLength > 0) groups.headers.push(c(`${h.name} shorter than ${s.minLength}`, { [h.name]: long(s.minLength - 1, 'k') }, json, 400, 'invalid_input'));
      if (typeof s.maxLength === 'number') groups.headers.push(c(`${h.name} of ${s.maxLength + 1} characters`, { [h.name]: long(s.maxLength + 1, 'k') }, json, 400, 'invalid_input'));
    }
    if (op.actAs === 'none') {
      groups.headers.push(c('Service-Act-As naming a delegated member (not accepted here)', { 'Service-Act-As': fx.members.active }, json, 400, 'invalid_input'));
      groups.headers.push(c('Service-Act-As empty (not accepted here)', { 'Service-Act-As': '' }, json, 400, 'invalid_input'));
    } else {
      const forbidden: Array<[string, string]> = [
        ['an unknown member', unknownMember()],
        ['an unknown member id of 64 characters', unknownMember(64)],
        ['a disabled member', fx.members.disabled],
        ['a member of another workspace', fx.members.foreign],
        ["a member outside the key's delegation", fx.members.outsider],
      ];
      for (const [what, member] of forbidden) groups.headers.push(c(`Service-Act-As naming ${what}`, { 'Service-Act-As': member }, json, 403, 'forbidden'));
    }
    groups.routing.push(c('an unknown query parameter', {}, json, 400, 'invalid_input', `${op.path}?dry_run=1`));
    // The path exists with another method: 405 method_not_allowed (with Allow naming it).
    if (op.method === 'post') groups.routing.push(c('GET on the operation path', { 'Content-Type': null }, undefined, 405, 'method_not_allowed', op.path, 'GET'));
    else groups.routing.push(c('POST on the path', { 'Content-Type': 'application/json' }, '{}', 405, 'method_not_allowed', op.path, 'POST'));
  }
  return groups;
}

/** Requests to paths and methods no operation has. */
export function routeCases(fx: Fixture): HttpCase[] {
  const some = catalogued.find((o) => o.method === 'post')!;
  const [ns] = some.id.split('.');
  const routes: Array<[string, string, string]> = [
    ['an unknown operation', 'POST', `/operations/${ns}.DeleteEverything`],
    ['an unknown namespace', 'POST', '/operations/billing.ListInvoices'],
    ['an operation id in the wrong case', 'POST', `/operations/${some.id.toLowerCase()}`],
    ['an operation id without a namespace', 'POST', `/operations/${some.id.split('.')[1]}`],
    ['an empty operation id', 'POST', '/operations/'],
    ['a path below an operation', 'POST', `${some.path}/extra`],
    ['PUT on an operation path', 'PUT', some.path],
    ['PATCH on an operation path', 'PATCH', some.path],
    ['DELETE on an operation path', 'DELETE', some.path],
    ['DELETE on /operations', 'DELETE', '/operations'],
    ['GET on an unknown path', 'GET', '/pipelines'],
    ['POST on an unknown path', 'POST', '/pipelines'],
    ['GET on the /v1 root', 'GET', '/'],
    ['GET on an unknown path below /delegation', 'GET', '/delegation'],
  ];
  // An existing path with another method is 405 method_not_allowed; anything else is 404 not_found.
  const existing = new Set<string>(catalogue.map((e) => e.path));
  return routes.map(([what, method, path]) => ({
    what: `${method} ${path}: ${what}`,
    method,
    path,
    headers: { Authorization: `Bearer ${fx.key}`, ...(method === 'GET' ? {} : { 'Content-Type': 'application/json' }) },
    ...(method === 'GET' ? {} : { body: '{}' }),
    ...(existing.has(path) ? { status: 405, error: 'method_not_allowed' as const } : { status: 404, error: 'not_found' as const }),
  }));
}
