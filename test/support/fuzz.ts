import fc from 'fast-check';
import {
  authCases,
  BROWSER_UA,
  type Fixture,
  type HeaderPatch,
  headersFor,
  openCursor,
  type RawResponse,
  type RealCursor,
  assertErrorShape,
  reseal,
  send,
  stateDiff,
  storedState,
} from './badInput.ts';
import { type DocOperation, flatten, fits, getAt, ID_PATTERN, type Path, pathLabel, type Schema, schemaPaths, setAt, deleteAt, withRealIds } from './requestSchema.ts';
import type { TestService } from './service.ts';

/**
 * The spec-driven fuzz test (test/platform/fuzz.test.ts, and `npm run fuzz` for long runs): request
 * bodies generated from each operation's schema (fast-check), then mutated (wrong types, missing and
 * unknown fields, huge strings, deep nesting, unicode edge cases, numbers at and past bounds, edited
 * cursors) and sent with header variants. Every answer must be a documented status of the operation,
 * never a 5xx; errors exactly `{error, message}` with the code their status documents; a request
 * that breaks the schema, the string rule or a header rule is refused; a refusal stores nothing, and
 * a query never stores anything.
 */

/** A JSON text spliced in where this marker sits (deep nesting and raw numbers JSON.stringify cannot make). */
class RawJson {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text.length > 60 ? `${this.text.slice(0, 30)}...(${this.text.length} chars)` : this.text;
  }
}

function render(value: unknown): string {
  const raws: string[] = [];
  const text = JSON.stringify(value, (_k, v) => {
    if (v instanceof RawJson) {
      raws.push(v.text);
      return `__raw_${raws.length - 1}__`;
    }
    return v;
  });
  return raws.length ? text.replace(/"__raw_(\d+)__"/g, (_m, i) => raws[Number(i)]!) : text;
}

/** What one generated request is. */
export interface FuzzRequest {
  what: string;
  headers: HeaderPatch;
  /** The body text (undefined: no body). */
  body?: string;
}

const show = (v: unknown): string => {
  if (v instanceof RawJson) return String(v);
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 60 ? `${s.slice(0, 57)}...(${s.length} chars)` : s;
};

// ---- Values --------------------------------------------------------------------------------------

const INT32 = 2 ** 31 - 1;

function integerArb(min: number | undefined, max: number | undefined): fc.Arbitrary<number> {
  const lo = min ?? -1_000_000;
  const hi = max ?? 1_000_000;
  if (lo >= -INT32 && hi <= INT32) return fc.integer({ min: lo, max: hi });
  return fc.oneof(fc.constantFrom(lo, hi), fc.integer({ min: Math.max(lo, -INT32), max: Math.min(hi, INT32) }), fc.bigInt({ min: BigInt(lo), max: BigInt(hi) }).map(Number));
}

/** Valid values of a schema (mostly): what a well-behaved client would send, with real ids now and then. */
export function arbitraryOf(schema: Schema, ids: ReadonlyMap<string, string>, depth = 0): fc.Arbitrary<unknown> {
  const s = flatten(schema);
  const alternatives: Array<fc.Arbitrary<unknown>> = [];
  if (s['x-example'] !== undefined && fits(s, withRealIds(s['x-example'], ids))) alternatives.push(fc.constant(withRealIds(s['x-example'], ids)));
  const own = ownArbitrary(s, ids, depth);
  if (!alternatives.length) return own;
  return fc.oneof({ weight: 1, arbitrary: alternatives[0]! }, { weight: 3, arbitrary: own });
}

function ownArbitrary(s: Schema, ids: ReadonlyMap<string, string>, depth: number): fc.Arbitrary<unknown> {
  if (Array.isArray(s.enum)) return fc.constantFrom(...(s.enum as unknown[]));
  const branches = (s.oneOf ?? s.anyOf) as Schema[] | undefined;
  if (branches) return fc.oneof(...branches.map((b) => arbitraryOf(b, ids, depth + 1)));
  const types = ([] as string[]).concat(s.type ?? []);
  const nullable = types.includes('null');
  const type = types.find((t) => t !== 'null');
  let arb: fc.Arbitrary<unknown>;
  switch (type) {
    case 'string': {
      const min = s.minLength ?? 0;
      const max = s.maxLength ?? 200;
      if (typeof s.pattern === 'string') arb = fc.stringMatching(new RegExp(s.pattern)).filter((v) => fits(s, v));
      else {
        const text = fc.oneof(
          { weight: 4, arbitrary: fc.string({ minLength: min, maxLength: Math.min(max, Math.max(min, 24)), unit: 'grapheme' }) },
          { weight: 1, arbitrary: fc.constant('x'.repeat(Math.max(min, max === Infinity ? 1 : max))) },
        ).filter((v) => fits(s, v));
        const example = s['x-example'];
        const prefix = typeof example === 'string' ? ID_PATTERN.exec(example)?.[1] : undefined;
        // An id field: a real id of its example's type mostly, any real id now and then (shared schemas such as RecordId carry one type's example).
        const real = [...ids.values()].filter((id) => fits(s, id));
        arb =
          prefix && real.length
            ? fc.oneof({ weight: 3, arbitrary: fc.constant(ids.get(prefix) ?? real[0]!) }, { weight: 2, arbitrary: fc.constantFrom(...real) }, { weight: 1, arbitrary: text })
            : text;
      }
      break;
    }
    case 'integer':
      arb = integerArb(s.minimum, s.maximum);
      break;
    case 'number':
      arb = fc.double({ min: s.minimum ?? -1e9, max: s.maximum ?? 1e9, noNaN: true, noDefaultInfinity: true });
      break;
    case 'boolean':
      arb = fc.boolean();
      break;
    case 'array': {
      const items = arbitraryOf((s.items ?? {}) as Schema, ids, depth + 1);
      const minLength = s.minItems ?? 0;
      const maxLength = Math.max(minLength, Math.min(s.maxItems ?? 4, depth > 2 ? minLength : 5));
      arb = s.uniqueItems ? fc.uniqueArray(items, { minLength, maxLength, selector: (v) => JSON.stringify(v) }) : fc.array(items, { minLength, maxLength });
      break;
    }
    case 'object': {
      // A cursor is only valid as issued, with its own filters: the cursor mutations send those.
      const props = Object.entries((s.properties ?? {}) as Record<string, Schema>).filter(([, p]) => p['x-ref'] !== 'PageCursor');
      const model = Object.fromEntries(props.map(([k, p]) => [k, arbitraryOf(p, ids, depth + 1)]));
      arb = fc.record(model, { requiredKeys: ((s.required ?? []) as string[]).filter((k) => k in model) });
      break;
    }
    default:
      arb = fc.jsonValue({ maxDepth: 2 });
  }
  return nullable ? fc.option(arb, { nil: null }) : arb;
}

/** Strings a careless or hostile client sends: the string rule's targets and their neighbours. */
const nastyStrings: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    '',
    ' ',
    '\u0000',
    'a\u0000b',
    '\ud800',
    '\udfff',
    'x\ud83d',
    '\ude00x',
    '\udc00\ud800',
    '\ud83d\ude00',
    '😀'.repeat(201),
    '\ufeff',
    '\uffff',
    '\ufffe',
    '\u202e',
    'e\u0301',
    '\u2028\u2029',
    '\u0001\u001f\u007f',
    '\n',
    'Ω',
    '𝕏',
    '%00',
    '\\u0000',
    'null',
    'true',
    '-0',
    '1e308',
    '__proto__',
    "' OR 1=1 --",
    '<script>alert(1)</script>',
  ),
  fc.string({ unit: 'binary', maxLength: 30 }),
  fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)), maxLength: 12 }),
  fc.integer({ min: 0, max: 5000 }).map((n) => 'x'.repeat(n)),
  fc.constantFrom(100_000, 1_100_000).map((n) => 'y'.repeat(n)),
);

const nastyNumbers: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(0, -0, -1, 1, 1.5, 0.1, 2 ** 31, 2 ** 31 - 1, 2 ** 53 - 1, 2 ** 53, 2 ** 53 + 2, 2 ** 63, -(2 ** 63), 1e308, -1e308, Number.MIN_VALUE, Number.EPSILON),
  fc.constantFrom('1e400', '-1e400', '9223372036854775808', '1.0', '-0.0', '1E2', '0.0000000000000000000001').map((t) => new RawJson(t)),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.integer(),
);

const deep: fc.Arbitrary<unknown> = fc.oneof(
  fc.integer({ min: 1, max: 20_000 }).map((n) => new RawJson(`${'['.repeat(n)}${']'.repeat(n)}`)),
  fc.integer({ min: 1, max: 5_000 }).map((n) => new RawJson(`${'{"a":'.repeat(n)}1${'}'.repeat(n)}`)),
);

/** Values of every JSON type, edge-heavy. */
const nasty: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: nastyStrings },
  { weight: 3, arbitrary: nastyNumbers },
  { weight: 1, arbitrary: fc.constantFrom(null, true, false, [], {}, [null], { $absent: true }, { $absent: false }) },
  { weight: 1, arbitrary: deep },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
);

/** Values just inside and just past the node's own bounds. */
function boundaryValues(s: Schema): unknown[] {
  const out: unknown[] = [];
  for (const key of ['minimum', 'maximum'] as const) {
    const b = s[key];
    if (typeof b === 'number') out.push(b, b - 1, b + 1, b + 0.5);
  }
  const chars = ['x', '😀', '\u0301'];
  for (const key of ['minLength', 'maxLength'] as const) {
    const b = s[key];
    if (typeof b === 'number') for (const c of chars) out.push(c.repeat(b), c.repeat(b + 1), c.repeat(Math.max(0, b - 1)));
  }
  for (const key of ['minItems', 'maxItems'] as const) {
    const b = s[key];
    if (typeof b === 'number') out.push(Array.from({ length: b + 1 }, () => 'x'), []);
  }
  if (Array.isArray(s.enum)) for (const e of s.enum) if (typeof e === 'string') out.push(e.toUpperCase(), ` ${e}`, `${e}\u0000`);
  return out;
}

// ---- Requests ------------------------------------------------------------------------------------

interface Built {
  what: string;
  body: unknown;
  /** Raw text instead of `body`. */
  raw?: string;
}

const parentExists = (body: unknown, path: Path) => {
  const parent = getAt(body, path.slice(0, -1));
  return path.length === 0 || (typeof parent === 'object' && parent !== null);
};

/** Every existing key path of a JSON value (objects only), for deletions. */
function keyPaths(value: unknown, path: Path = [], out: Path[] = []): Path[] {
  if (Array.isArray(value)) value.forEach((v, i) => keyPaths(v, [...path, i], out));
  else if (typeof value === 'object' && value !== null) {
    for (const [k, v] of Object.entries(value)) {
      out.push([...path, k]);
      keyPaths(v, [...path, k], out);
    }
  }
  return out;
}

/** Paths of every string in a JSON value. */
function stringPaths(value: unknown, path: Path = [], out: Path[] = []): Path[] {
  if (typeof value === 'string') out.push(path);
  else if (Array.isArray(value)) value.forEach((v, i) => stringPaths(v, [...path, i], out));
  else if (typeof value === 'object' && value !== null) for (const [k, v] of Object.entries(value)) stringPaths(v, [...path, k], out);
  return out;
}

/**
 * One character put in place of another: the string rule's targets, and valid characters PostgreSQL and SQLite must both keep.
 * U+202E is refused where the schema says `format: display-text` (the oracle's `fits` knows the format) and kept elsewhere.
 */
const EDGE_CHARACTERS = ['\u0000', '\ud800', '\udbff', '\udc00', '\udfff', '\udc00\ud800', '😀', 'e\u0301', '\uffff', '\ufeff', '\u202e', '\u0001', '\n', 'ß', '\u2028'];

function objectPaths(value: unknown, path: Path = [], out: Path[] = []): Path[] {
  if (Array.isArray(value)) value.forEach((v, i) => objectPaths(v, [...path, i], out));
  else if (typeof value === 'object' && value !== null) {
    out.push(path);
    for (const [k, v] of Object.entries(value)) objectPaths(v, [...path, k], out);
  }
  return out;
}

/** Generated bodies of `op`: valid ones, and ones mutated in one place. */
function bodies(op: DocOperation, fx: Fixture, cursors: readonly RealCursor[]): fc.Arbitrary<Built> {
  // The operation's example with real ids (the likeliest to pass the operation's own rules), or one generated from the schema.
  const example = op.example !== undefined ? withRealIds(op.example, fx.ids) : undefined;
  const generated = arbitraryOf(op.body!, fx.ids);
  const valid = example !== undefined && fits(op.body!, example) ? fc.oneof({ weight: 1, arbitrary: fc.constant(example) }, { weight: 2, arbitrary: generated }) : generated;
  const nodes = schemaPaths(op.body!);
  const mutations: Array<fc.WeightedArbitrary<Built>> = [
    { weight: 4, arbitrary: valid.map((body) => ({ what: 'a generated body', body })) },
    {
      weight: 5,
      arbitrary: fc.tuple(valid, fc.nat()).chain(([body, i]) => {
        const open = nodes.filter((n) => parentExists(body, n.path));
        const node = open[i % open.length]!;
        const bounds = boundaryValues(node.schema);
        const value = bounds.length ? fc.oneof({ weight: 3, arbitrary: nasty }, { weight: 2, arbitrary: fc.constantFrom(...bounds) }) : nasty;
        return value.map((v) => ({ what: `${pathLabel(node.path)} = ${show(v)}`, body: setAt(body, node.path, v) }));
      }),
    },
    {
      weight: 4,
      arbitrary: fc.tuple(valid, fc.nat(), fc.nat(), fc.constantFrom(...EDGE_CHARACTERS)).map(([body, i, at, c]) => {
        const leaves = stringPaths(body);
        if (!leaves.length) return { what: 'a generated body (no string to edit)', body };
        const path = leaves[i % leaves.length]!;
        const v = getAt(body, path) as string;
        const k = v.length ? at % v.length : 0;
        const edited = `${v.slice(0, k)}${c}${v.slice(k + 1)}`;
        return { what: `${pathLabel(path)} with ${show(c)} at ${k}: ${show(edited)}`, body: setAt(body, path, edited) };
      }),
    },
    {
      weight: 1,
      arbitrary: fc.tuple(valid, fc.nat()).map(([body, i]) => {
        const keys = keyPaths(body);
        if (!keys.length) return { what: 'a generated body (nothing to remove)', body };
        const path = keys[i % keys.length]!;
        return { what: `${pathLabel(path)} removed`, body: deleteAt(body, path) };
      }),
    },
    {
      weight: 1,
      arbitrary: fc.tuple(valid, fc.nat(), fc.constantFrom('zz_unknown', '__proto__', 'constructor', '', 'k\u0000', 'ключ', '$absent'), nasty).map(([body, i, key, v]) => {
        const objects = objectPaths(body);
        const at = objects[i % objects.length] ?? [];
        if (key === '__proto__' && at.length === 0) {
          // JSON.stringify drops __proto__ set by assignment; write it as text.
          const rest = render(body).slice(1);
          return { what: 'body.__proto__ added', body, raw: `{"__proto__": ${render(v)}${rest === '}' ? '' : ','}${rest}` };
        }
        return { what: `${pathLabel([...at, key])} (unknown) = ${show(v)}`, body: setAt(body, [...at, key], v) };
      }),
    },
    { weight: 1, arbitrary: nasty.map((v) => ({ what: `the whole body = ${show(v)}`, body: v })) },
    {
      weight: 1,
      arbitrary: fc.oneof(
        fc.string({ unit: 'binary', maxLength: 40 }).map((raw) => ({ what: `raw text ${show(raw)}`, body: undefined, raw })),
        fc.tuple(valid, fc.nat()).map(([body, i]) => {
          const text = render(body);
          const raw = text.slice(0, i % Math.max(1, text.length));
          return { what: `a body cut after ${raw.length} characters`, body: undefined, raw };
        }),
        valid.map((body) => ({ what: 'a body with a byte order mark', body: undefined, raw: `\ufeff${render(body)}` })),
        valid.map((body) => ({ what: 'a body with a trailing comma', body: undefined, raw: `${render(body).slice(0, -1)},}` })),
      ),
    },
  ];
  const mine = cursors.filter((c) => c.op.id === op.id);
  if (mine.length) {
    const real = mine[0]!;
    const opened = openCursor(real.cursor)!;
    const keys = Object.keys(opened.position);
    const edited: fc.Arbitrary<[string, string]> = fc.oneof(
      fc.tuple(fc.nat(), fc.constantFrom(...'AZaz09-_.=+/ '.split(''))).map(([i, c]): [string, string] => {
        const at = i % real.cursor.length;
        return [`character ${at} changed to ${JSON.stringify(c)}`, `${real.cursor.slice(0, at)}${c}${real.cursor.slice(at + 1)}`];
      }),
      fc.nat().map((i): [string, string] => [`cut to ${i % real.cursor.length} characters`, real.cursor.slice(0, i % real.cursor.length) || 'x']),
      fc.tuple(fc.constantFrom(...keys), nasty).map(([k, v]): [string, string] => [`position ${k} = ${show(v)}, old signature`, reseal({ ...opened.position, [k]: v instanceof RawJson ? v.text : v }, opened.tag)]),
      fc.constantFrom(...cursors).map((c): [string, string] => [`the cursor of ${c.op.id}`, c.cursor]),
      fc.constant<[string, string]>(['the cursor as received', real.cursor]),
    );
    mutations.push({ weight: 2, arbitrary: edited.map(([what, cursor]) => ({ what: `cursor: ${what}`, body: { ...real.body, [real.field]: cursor } })) });
  }
  return fc.oneof(...mutations);
}

/** Header variants: mostly what the operation expects, now and then something else. */
function headerVariants(op: DocOperation, fx: Fixture): fc.Arbitrary<Array<[string, HeaderPatch]>> {
  const choices: Array<fc.Arbitrary<[string, HeaderPatch] | null>> = [];
  const sometimes = (weight: number, arb: fc.Arbitrary<[string, HeaderPatch]>) =>
    fc.oneof({ weight: 10 - weight, arbitrary: fc.constant(null) }, { weight, arbitrary: arb });
  const printable = fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 250 }).map((s) => s.trim());
  if (op.entry) {
    choices.push(sometimes(1, fc.constantFrom(...authCases(fx)).map(([what, v]): [string, HeaderPatch] => [what, { Authorization: v }])));
    const members = [fx.members.active, fx.members.disabled, fx.members.outsider, fx.members.foreign, '', 'mb_unknown', 'x'.repeat(65)];
    choices.push(sometimes(2, fc.oneof(fc.constantFrom(...members), printable).map((v): [string, HeaderPatch] => [`Service-Act-As ${show(v)}`, { 'Service-Act-As': v }])));
    if (op.kind === 'command') {
      const keys = fc.oneof(fc.constantFrom<string | null>(null, '', 'k', 'k'.repeat(200), 'k'.repeat(201), 'ÿ'), printable);
      choices.push(sometimes(2, keys.map((v): [string, HeaderPatch] => [`Idempotency-Key ${show(v)}`, { 'Idempotency-Key': v }])));
    }
  } else {
    choices.push(sometimes(2, fc.constantFrom<string | null>(null, '', 'curl/8.0', 'Googlebot/2.1', BROWSER_UA).map((v): [string, HeaderPatch] => [`User-Agent ${show(v)}`, { 'User-Agent': v }])));
  }
  if (op.method === 'post') {
    const types = fc.constantFrom<string | null>(
      null,
      '',
      'text/plain',
      'text/plain; charset=utf-8',
      'application/json; charset=utf-16',
      'application/json; charset=latin1',
      'APPLICATION/JSON',
      'application/json ; charset=UTF-8',
      'application/jsonx',
      'application/merge-patch+json',
      'multipart/form-data; boundary=x',
      '*/*',
    );
    choices.push(sometimes(1, types.map((v): [string, HeaderPatch] => [`Content-Type ${show(v)}`, { 'Content-Type': v }])));
  }
  return fc.tuple(...choices).map((picked) => picked.filter((p): p is [string, HeaderPatch] => p !== null));
}

/** Generated requests of one operation. */
export function requests(op: DocOperation, fx: Fixture, cursors: readonly RealCursor[]): fc.Arbitrary<FuzzRequest> {
  const body: fc.Arbitrary<Built | null> = op.method === 'post' && op.body ? bodies(op, fx, cursors) : fc.constant(null);
  return fc.tuple(body, headerVariants(op, fx)).map(([b, variants]) => {
    const headers: HeaderPatch = { ...headersFor(op, fx) };
    for (const [, patch] of variants) Object.assign(headers, patch);
    const text = b === null ? undefined : (b.raw ?? (b.body === undefined ? undefined : render(b.body)));
    const what = [b?.what, ...variants.map(([w]) => w)].filter(Boolean).join('; ') || 'the request as documented';
    const req: FuzzRequest = { what, headers, ...(text === undefined ? {} : { body: text }) };
    // How fast-check prints a counterexample: the key's secret left out.
    const shown = () =>
      JSON.stringify({
        ...req,
        headers: { ...headers, ...(headers.Authorization ? { Authorization: headers.Authorization.replace(/_[A-Za-z0-9_-]{43}\b/, '_[secret]') } : {}) },
        ...(req.body && req.body.length > 600 ? { body: `${req.body.slice(0, 600)}...(${req.body.length} characters)` } : {}),
      });
    return Object.assign(req, { [fc.toStringMethod]: shown });
  });
}

// ---- The oracle ----------------------------------------------------------------------------------

/** The status each error code belongs to (every other pairing is wrong). */
const CODE_OF_STATUS: Record<number, readonly string[]> = {
  400: ['invalid_json', 'invalid_input'],
  401: ['invalid_key'],
  403: ['forbidden'],
  404: ['not_found'],
  409: ['conflict'],
  413: ['invalid_input'],
  429: ['rate_limited'],
  503: ['unavailable'],
};
/** Statuses a request that breaks a body or header rule may get: refused before the operation runs. */
const REFUSED = new Set([400, 401, 413, 429, 503]);

const BAD_TEXT = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
function breaksStringRule(value: unknown): boolean {
  if (typeof value === 'string') return BAD_TEXT.test(value);
  if (Array.isArray(value)) return value.some(breaksStringRule);
  if (typeof value === 'object' && value !== null) return Object.entries(value).some(([k, v]) => BAD_TEXT.test(k) || breaksStringRule(v));
  return false;
}

/** Why the request must be refused before the operation runs, judged independently of the service; null when it may pass. */
export function mustRefuse(op: DocOperation, req: FuzzRequest): string | null {
  const h = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k.toLowerCase(), v]));
  if (op.method === 'post' && op.body) {
    if (req.body === undefined) return 'no body';
    let parsed: unknown;
    try {
      parsed = JSON.parse(req.body.replace(/^\ufeff/, '')); // RFC 8259: a parser may ignore a byte order mark
    } catch {
      return 'not JSON';
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return 'not a JSON object';
    if (!fits(op.body, parsed)) return 'breaks its schema';
    if (breaksStringRule(parsed)) return 'breaks the string rule';
  }
  if (op.entry) {
    for (const param of op.headers) {
      const v = h[param.name.toLowerCase()];
      if (v === undefined || v === null) {
        if (param.required) return `${param.name} missing`;
      } else if (!fits(param.schema, v)) return `${param.name} breaks its schema`;
    }
    if (op.actAs === 'none' && typeof h['service-act-as'] === 'string') return 'Service-Act-As not accepted';
  }
  return null;
}

/** Sends one request and checks the answer; returns the problem, or null. `seen` counts the statuses. */
export async function check(svc: TestService, fx: Fixture, op: DocOperation, req: FuzzRequest, seen?: Record<number, number>): Promise<string | null> {
  const before = await storedState(svc);
  let res: RawResponse;
  try {
    res = await send(svc.baseUrl, op.method.toUpperCase(), op.path, req.headers, req.body);
  } catch (err) {
    return `the request failed: ${(err as Error).message}`;
  }
  if (res.status === 202 && op.kind === 'collection') {
    // Accepted means storable: write the queued event now (a failed batch would stay queued and block the rest).
    try {
      await svc.flushEndpoints();
    } catch (err) {
      return `an accepted event could not be stored: ${(err as Error).message}`;
    }
  }
  const after = await storedState(svc);
  if (seen) seen[res.status] = (seen[res.status] ?? 0) + 1;
  const detail = `${res.status} ${res.text.slice(0, 300)}`;
  if (res.status >= 500 && res.status !== 503) return `a ${res.status}: ${detail}`;
  if (!op.statuses.includes(res.status)) return `status ${res.status} is not documented for ${op.id} (${op.statuses.join(', ')}): ${detail}`;
  const why = mustRefuse(op, req);
  if (why && !REFUSED.has(res.status)) return `the request ${why} but was answered ${detail}`;
  if (res.status >= 400) {
    try {
      assertErrorShape(res, detail, [fx.key, fx.revoked, fx.bare]);
    } catch (err) {
      return (err as Error).message;
    }
    const code = (res.body as { error: string }).error;
    if (!CODE_OF_STATUS[res.status]?.includes(code)) return `error code ${code} with status ${res.status}: ${detail}`;
  }
  const diff = stateDiff(before, after);
  if (diff) {
    // A command's own 404 / 409 is stored as its idempotency receipt (documented); nothing else may change.
    const receiptOnly = op.kind === 'command' && (res.status === 404 || res.status === 409) && /^idempotency_receipts \d+ -> \d+$/.test(diff);
    if (op.kind === 'query') return `a query stored something (${diff}): ${detail}`;
    if (res.status >= 400 && !receiptOnly) return `a refusal stored something (${diff}): ${detail}`;
  }
  return null;
}

export interface FuzzOptions {
  runs: number;
  seed: number;
  /** Stop each operation after this long (the long run). */
  timeLimitMs?: number;
  /** fast-check's verbosity on failure (0 to 2). */
  verbose?: 0 | 1 | 2;
}

export interface FuzzResult {
  op: string;
  runs: number;
  failed: boolean;
  report: string | null;
  /** How often each status came back. */
  statuses: Record<number, number>;
}

/** Fuzzes one operation; returns fast-check's report (seed, path, shrunk counterexample) on failure. */
export async function fuzzOperation(svc: TestService, fx: Fixture, op: DocOperation, cursors: readonly RealCursor[], options: FuzzOptions): Promise<FuzzResult> {
  const statuses: Record<number, number> = {};
  const property = fc.asyncProperty(requests(op, fx, cursors), async (req) => {
    const problem = await check(svc, fx, op, req, statuses);
    if (problem) throw new Error(`${op.id}: ${req.what}\n${problem}`);
  });
  const details = await fc.check(property, {
    numRuns: options.runs,
    seed: options.seed,
    verbose: options.verbose ?? 0,
    // The service keeps state (records, the collection queue): the first failing request is the one to report, unshrunk.
    endOnFailure: true,
    ...(options.timeLimitMs ? { interruptAfterTimeLimit: options.timeLimitMs } : {}),
  });
  return { op: op.id, runs: details.numRuns, failed: details.failed, report: details.failed ? (fc.defaultReportMessage(details) ?? 'failed') : null, statuses };
}
