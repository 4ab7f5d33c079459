/**
 * The contract changelog: compares the bundled document with the last released one
 * (openapi/released/openapi.json), classifies every change from a client's point of view, writes
 * generated/CHANGELOG.md (Unreleased, then the released history of openapi/released/releases.yaml)
 * and refuses a breaking change to an operation whose x-service-contract-version was not raised
 * (seed section 9). Called by `npm run generate` (scripts/generate.ts) and `npm run release`
 * (scripts/release.ts). Pure functions over plain JSON: local `$ref`s are resolved here.
 */
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

/**
 * `breaking`: a client written against the released contract can fail (a request it sends is now
 * refused, or a response it reads lacks something or has a shape it did not expect).
 * `additive`: existing clients are unaffected. `note`: existing clients keep working but should know
 * (a response enum value or a looser response bound, a deprecation, a changed default, a raised version).
 */
export type Severity = 'breaking' | 'additive' | 'note';

export type ChangeKind =
  | 'operation-added'
  | 'operation-removed'
  | 'operation-moved'
  | 'operation-deprecated'
  | 'operation-undeprecated'
  | 'contract-version-raised'
  | 'contract-version-lowered'
  | 'kind-changed'
  | 'act-as-changed'
  | 'workspace-supported-changed'
  | 'resource-changed'
  | 'resource-access-changed'
  | 'security-changed'
  | 'listed-changed'
  | 'parameter-added'
  | 'parameter-removed'
  | 'request-body-changed'
  | 'media-type-added'
  | 'media-type-removed'
  | 'request-field-added'
  | 'request-field-removed'
  | 'response-field-added'
  | 'response-field-removed'
  | 'required-changed'
  | 'status-added'
  | 'status-removed'
  | 'response-header-added'
  | 'response-header-removed'
  | 'enum-value-added'
  | 'enum-value-removed'
  | 'type-changed'
  | 'nullable-changed'
  | 'constraint-changed'
  | 'default-changed'
  | 'field-deprecated'
  | 'alternatives-changed'
  | 'schema-changed';

export interface ContractChange {
  /** The operationId (or `METHOD /path` for an operation without one). */
  operation: string;
  kind: ChangeKind;
  severity: Severity;
  /** One sentence naming the place and the change, e.g. "new required request field `data.colour`". */
  text: string;
}

export interface Release {
  name: string;
  /** UTC day the release was recorded. */
  date: string;
  changes: ContractChange[];
}

export const RELEASED_DIR = 'openapi/released';
export const SNAPSHOT_FILE = `${RELEASED_DIR}/openapi.json`;
export const RELEASES_FILE = `${RELEASED_DIR}/releases.yaml`;
export const CHANGELOG_FILE = 'generated/CHANGELOG.md';

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;
const MAX_DEPTH = 40;

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const sortedKeys = (...objects: Array<JsonObject | undefined>): string[] =>
  [...new Set(objects.flatMap((o) => (o ? Object.keys(o) : [])))].sort();

const show = (value: Json | undefined): string => (value === undefined ? 'none' : JSON.stringify(value));

/** Follows local `$ref`s (`#/components/...`) until a non-reference node; undefined when dangling. */
function deref(doc: JsonObject, node: Json | undefined): Json | undefined {
  let current = node;
  for (let hops = 0; hops < 32 && isObject(current) && typeof current.$ref === 'string'; hops++) {
    const ref: string = current.$ref;
    if (!ref.startsWith('#/')) return current;
    let target: Json | undefined = doc;
    for (const part of ref.slice(2).split('/')) target = isObject(target) ? target[part.replace(/~1/g, '/').replace(/~0/g, '~')] : undefined;
    current = target;
  }
  return current;
}

/** A schema with its `$ref` resolved and its `allOf` merged into one object (properties and required united). */
function normalize(doc: JsonObject, node: Json | undefined, depth = 0): JsonObject | undefined {
  const schema = deref(doc, node);
  if (!isObject(schema)) return undefined;
  if (!Array.isArray(schema.allOf) || depth > MAX_DEPTH) return schema;
  const merged: JsonObject = {};
  const properties: JsonObject = {};
  const required = new Set<string>();
  const { allOf, ...own } = schema;
  for (const part of [...allOf.map((p) => normalize(doc, p, depth + 1)), own]) {
    if (!part) continue;
    for (const [key, value] of Object.entries(part)) {
      if (key === 'properties' && isObject(value)) Object.assign(properties, value);
      else if (key === 'required' && Array.isArray(value)) for (const r of value) required.add(String(r));
      else merged[key] = value;
    }
  }
  if (Object.keys(properties).length) merged.properties = properties;
  if (required.size) merged.required = [...required].sort();
  return merged;
}

const IGNORED = new Set(['description', 'example', 'examples', 'title', 'externalDocs', 'summary']);

/** The schema fully resolved, documentation stripped and keys sorted: two schemas that accept the same values compare equal. */
function canonical(doc: JsonObject, node: Json | undefined, depth = 0): Json {
  if (depth > MAX_DEPTH) return null;
  const value = isObject(node) ? normalize(doc, node) : node;
  if (Array.isArray(value)) return value.map((v) => canonical(doc, v, depth + 1));
  if (!isObject(value)) return value ?? null;
  const out: JsonObject = {};
  for (const key of Object.keys(value).sort()) {
    if (IGNORED.has(key) || key.startsWith('x-')) continue;
    const child = value[key]!;
    if (key === 'enum' || key === 'required') out[key] = [...(child as Json[])].map((v) => JSON.stringify(v)).sort();
    else if (key === 'properties' && isObject(child)) {
      const props: JsonObject = {};
      for (const name of Object.keys(child).sort()) props[name] = canonical(doc, child[name], depth + 1);
      out[key] = props;
    } else out[key] = canonical(doc, child, depth + 1);
  }
  return out;
}

interface Operation {
  key: string;
  method: string;
  path: string;
  op: JsonObject;
}

function operationsOf(doc: JsonObject): Map<string, Operation> {
  const out = new Map<string, Operation>();
  const paths = isObject(doc.paths) ? doc.paths : {};
  for (const route of Object.keys(paths).sort()) {
    const item = deref(doc, paths[route]);
    if (!isObject(item)) continue;
    for (const method of METHODS) {
      const op = item[method];
      if (!isObject(op)) continue;
      const key = typeof op.operationId === 'string' ? op.operationId : `${method.toUpperCase()} ${route}`;
      const shared = Array.isArray(item.parameters) ? item.parameters : [];
      const own = Array.isArray(op.parameters) ? op.parameters : [];
      out.set(key, { key, method, path: route, op: { ...op, parameters: [...shared, ...own] } });
    }
  }
  return out;
}

/** Where a schema sits, and who produces its values. */
interface Place {
  /** `request`: the client writes, the server reads. `response`: the server writes, the client reads. */
  dir: 'request' | 'response';
  /** e.g. "request", "response 200", "header `Idempotency-Key`". */
  where: string;
}

class Differ {
  readonly changes: ContractChange[] = [];
  constructor(private readonly before: JsonObject, private readonly after: JsonObject) {}

  add(operation: string, kind: ChangeKind, severity: Severity, text: string): void {
    this.changes.push({ operation, kind, severity, text });
  }

  operations(): void {
    const before = operationsOf(this.before);
    const after = operationsOf(this.after);
    for (const key of [...new Set([...before.keys(), ...after.keys()])].sort()) {
      const b = before.get(key);
      const a = after.get(key);
      if (!b && a) this.add(key, 'operation-added', 'additive', `new operation \`${a.method.toUpperCase()} ${a.path}\`${kindLabel(a.op)}`);
      else if (b && !a) this.add(key, 'operation-removed', 'breaking', `operation \`${b.method.toUpperCase()} ${b.path}\` removed`);
      else if (b && a) this.operation(key, b, a);
    }
  }

  private operation(id: string, b: Operation, a: Operation): void {
    const bo = b.op;
    const ao = a.op;
    if (b.method !== a.method || b.path !== a.path) {
      this.add(id, 'operation-moved', 'breaking', `now called as \`${a.method.toUpperCase()} ${a.path}\` (was \`${b.method.toUpperCase()} ${b.path}\`)`);
    }
    const bv = bo['x-service-contract-version'];
    const av = ao['x-service-contract-version'];
    if (typeof bv === 'number' && typeof av === 'number' && av !== bv) {
      if (av > bv) this.add(id, 'contract-version-raised', 'note', `contract version raised from ${bv} to ${av}`);
      else this.add(id, 'contract-version-lowered', 'breaking', `contract version lowered from ${bv} to ${av}`);
    } else if (av !== bv) this.add(id, 'contract-version-lowered', 'breaking', `x-service-contract-version changed from ${show(bv)} to ${show(av)}`);
    if ((bo.deprecated === true) !== (ao.deprecated === true)) {
      if (ao.deprecated === true) this.add(id, 'operation-deprecated', 'note', 'operation deprecated');
      else this.add(id, 'operation-undeprecated', 'note', 'operation no longer deprecated');
    }
    if (bo['x-service-kind'] !== ao['x-service-kind']) {
      this.add(id, 'kind-changed', 'breaking', `x-service-kind changed from ${show(bo['x-service-kind'])} to ${show(ao['x-service-kind'])} (idempotency and grants follow the kind)`);
    }
    const actAs = (v: Json | undefined) => (v === 'optional' || v === 'required' ? v : 'none');
    const [ba, aa] = [actAs(bo['x-service-act-as']), actAs(ao['x-service-act-as'])];
    if (ba !== aa) {
      // Accepting the header where it was refused, or no longer requiring it, breaks nobody.
      const additive = (ba === 'none' && aa === 'optional') || (ba === 'required' && aa === 'optional');
      this.add(id, 'act-as-changed', additive ? 'additive' : 'breaking', `x-service-act-as changed from ${ba} to ${aa}`);
    }
    const [bw, aw] = [bo['x-service-workspace-supported'] === true, ao['x-service-workspace-supported'] === true];
    if (bw !== aw) {
      this.add(id, 'workspace-supported-changed', aw ? 'additive' : 'breaking', aw ? 'now runs with workspace access (x-service-workspace-supported: true)' : 'no longer runs with workspace access (x-service-workspace-supported: false)');
    }
    if (bo['x-service-resource'] !== ao['x-service-resource']) {
      this.add(id, 'resource-changed', 'breaking', `x-service-resource changed from ${show(bo['x-service-resource'])} to ${show(ao['x-service-resource'])} (keys' resource grants no longer match)`);
    }
    const access = (v: Json | undefined) => new Set(Array.isArray(v) ? v.map(String) : []);
    const [bAccess, aAccess] = [access(bo['x-service-resource-access']), access(ao['x-service-resource-access'])];
    for (const needed of [...aAccess].sort()) if (!bAccess.has(needed)) this.add(id, 'resource-access-changed', 'breaking', `now needs \`${needed}\` access on the resource`);
    for (const dropped of [...bAccess].sort()) if (!aAccess.has(dropped)) this.add(id, 'resource-access-changed', 'additive', `no longer needs \`${dropped}\` access on the resource`);
    if ((bo['x-service-listed'] !== false) !== (ao['x-service-listed'] !== false)) {
      this.add(id, 'listed-changed', 'breaking', ao['x-service-listed'] === false ? 'no longer listed by discovery nor grantable (x-service-listed: false)' : 'now listed by discovery and granted per operation (x-service-listed: true)');
    }
    this.security(id, bo, ao);
    this.parameters(id, bo, ao);
    this.requestBody(id, bo, ao);
    this.responses(id, bo, ao);
  }

  private security(id: string, bo: JsonObject, ao: JsonObject): void {
    const schemes = (doc: JsonObject, op: JsonObject) => {
      const security = op.security ?? doc.security;
      return new Set(Array.isArray(security) ? security.map((req) => (isObject(req) ? Object.keys(req).sort().join('+') || '(none)' : '?')) : ['(none)']);
    };
    const [b, a] = [schemes(this.before, bo), schemes(this.after, ao)];
    for (const s of [...a].sort()) if (!b.has(s)) this.add(id, 'security-changed', 'additive', `now also accepts ${s === '(none)' ? 'no credential' : `\`${s}\``}`);
    for (const s of [...b].sort()) if (!a.has(s)) this.add(id, 'security-changed', 'breaking', `no longer accepts ${s === '(none)' ? 'no credential' : `\`${s}\``}`);
  }

  private parameters(id: string, bo: JsonObject, ao: JsonObject): void {
    const params = (doc: JsonObject, op: JsonObject) => {
      const out = new Map<string, JsonObject>();
      for (const p of Array.isArray(op.parameters) ? op.parameters : []) {
        const param = deref(doc, p);
        if (isObject(param) && typeof param.name === 'string') {
          const where = String(param.in);
          out.set(`${where}:${where === 'header' ? param.name.toLowerCase() : param.name}`, param);
        }
      }
      return out;
    };
    const [b, a] = [params(this.before, bo), params(this.after, ao)];
    for (const key of [...new Set([...b.keys(), ...a.keys()])].sort()) {
      const bp = b.get(key);
      const ap = a.get(key);
      const label = `${(ap ?? bp)!.in} \`${(ap ?? bp)!.name}\``;
      if (!bp) this.add(id, 'parameter-added', ap!.required === true ? 'breaking' : 'additive', `new ${ap!.required === true ? 'required' : 'optional'} ${label}`);
      else if (!ap) this.add(id, 'parameter-removed', 'breaking', `${label} removed (a client that sends it is refused)`);
      else {
        if ((bp.required === true) !== (ap.required === true)) this.add(id, 'required-changed', ap.required === true ? 'breaking' : 'additive', `${label} is now ${ap.required === true ? 'required' : 'optional'}`);
        if (ap.deprecated === true && bp.deprecated !== true) this.add(id, 'field-deprecated', 'note', `${label} deprecated`);
        this.schema(id, { dir: 'request', where: label }, bp.schema, ap.schema, '', 0);
      }
    }
  }

  private requestBody(id: string, bo: JsonObject, ao: JsonObject): void {
    const b = deref(this.before, bo.requestBody);
    const a = deref(this.after, ao.requestBody);
    if (!isObject(b) && !isObject(a)) return;
    if (!isObject(b)) {
      const required = isObject(a) && a.required === true;
      this.add(id, 'request-body-changed', required ? 'breaking' : 'additive', `new ${required ? 'required' : 'optional'} request body`);
      return;
    }
    if (!isObject(a)) {
      this.add(id, 'request-body-changed', 'breaking', 'request body removed');
      return;
    }
    if ((b.required === true) !== (a.required === true)) this.add(id, 'request-body-changed', a.required === true ? 'breaking' : 'additive', `request body is now ${a.required === true ? 'required' : 'optional'}`);
    this.content(id, { dir: 'request', where: 'request' }, b.content, a.content);
  }

  private content(id: string, place: Place, bc: Json | undefined, ac: Json | undefined): void {
    const b = isObject(bc) ? bc : {};
    const a = isObject(ac) ? ac : {};
    for (const type of sortedKeys(b, a)) {
      const bm = b[type];
      const am = a[type];
      if (!isObject(bm)) this.add(id, 'media-type-added', 'additive', `${place.where}: new media type \`${type}\``);
      else if (!isObject(am)) this.add(id, 'media-type-removed', 'breaking', `${place.where}: media type \`${type}\` removed`);
      else this.schema(id, place, bm.schema, am.schema, '', 0);
    }
  }

  private responses(id: string, bo: JsonObject, ao: JsonObject): void {
    const b = isObject(bo.responses) ? bo.responses : {};
    const a = isObject(ao.responses) ? ao.responses : {};
    for (const status of sortedKeys(b, a)) {
      const br = deref(this.before, b[status]);
      const ar = deref(this.after, a[status]);
      if (!isObject(br) && isObject(ar)) this.add(id, 'status-added', 'additive', `new status ${status}`);
      else if (isObject(br) && !isObject(ar)) this.add(id, 'status-removed', 'breaking', `status ${status} removed`);
      else if (isObject(br) && isObject(ar)) {
        const where = `response ${status}`;
        const bh = isObject(br.headers) ? br.headers : {};
        const ah = isObject(ar.headers) ? ar.headers : {};
        for (const name of sortedKeys(bh, ah)) {
          const label = `${where} header \`${name}\``;
          if (bh[name] === undefined) this.add(id, 'response-header-added', 'additive', `new ${label}`);
          else if (ah[name] === undefined) this.add(id, 'response-header-removed', 'breaking', `${label} removed`);
          else {
            const bHeader = deref(this.before, bh[name]);
            const aHeader = deref(this.after, ah[name]);
            if (isObject(bHeader) && isObject(aHeader)) this.schema(id, { dir: 'response', where: label }, bHeader.schema, aHeader.schema, '', 0);
          }
        }
        this.content(id, { dir: 'response', where }, br.content, ar.content);
      }
    }
  }

  /** Severity of a change that lets more values through: new accepted input is additive, new output is worth a note (or breaking, for shapes). */
  private looser(place: Place, inResponse: Severity = 'note'): Severity {
    return place.dir === 'request' ? 'additive' : inResponse;
  }

  /** Severity of a change that lets fewer values through: refused input is breaking, narrower output is additive. */
  private tighter(place: Place): Severity {
    return place.dir === 'request' ? 'breaking' : 'additive';
  }

  private label(place: Place, at: string): string {
    if (at) return `${place.where} field \`${at}\``;
    const body = place.where === 'request' || (place.where.startsWith('response ') && !place.where.includes('header'));
    return body ? `${place.where} body` : place.where;
  }

  private schema(id: string, place: Place, bNode: Json | undefined, aNode: Json | undefined, at: string, depth: number): void {
    if (depth > MAX_DEPTH) return;
    const b = normalize(this.before, bNode);
    const a = normalize(this.after, aNode);
    const label = this.label(place, at);
    if (!b && !a) return;
    if (!b || !a) {
      this.add(id, 'schema-changed', b ? this.looser(place, 'breaking') : this.tighter(place), `${label}: schema ${b ? 'removed' : 'added'}`);
      return;
    }
    if ((b.deprecated === true) !== (a.deprecated === true) && a.deprecated === true) this.add(id, 'field-deprecated', 'note', `${label} deprecated`);

    const bAlts = alternatives(b);
    const aAlts = alternatives(a);
    if (bAlts || aAlts) {
      this.alternatives(id, place, bAlts ?? [b], aAlts ?? [a], at, label, depth);
      return;
    }

    // type
    const bt = typeof b.type === 'string' ? b.type : undefined;
    const at_ = typeof a.type === 'string' ? a.type : undefined;
    if (bt !== at_) {
      if (bt === undefined) this.add(id, 'type-changed', this.tighter(place), `${label}: now of type ${at_}`);
      else if (at_ === undefined) this.add(id, 'type-changed', this.looser(place, 'breaking'), `${label}: no longer restricted to type ${bt}`);
      else if (bt === 'integer' && at_ === 'number') this.add(id, 'type-changed', this.looser(place, 'breaking'), `${label}: type integer → number`);
      else if (bt === 'number' && at_ === 'integer') this.add(id, 'type-changed', this.tighter(place), `${label}: type number → integer`);
      else {
        this.add(id, 'type-changed', 'breaking', `${label}: type ${bt} → ${at_}`);
        return;
      }
    }

    // nullable
    if ((b.nullable === true) !== (a.nullable === true)) {
      this.add(id, 'nullable-changed', a.nullable === true ? this.looser(place, 'breaking') : this.tighter(place), `${label}: ${a.nullable === true ? 'now' : 'no longer'} nullable`);
    }

    // enum
    const bEnum = Array.isArray(b.enum) ? b.enum : undefined;
    const aEnum = Array.isArray(a.enum) ? a.enum : undefined;
    if (bEnum && !aEnum) this.add(id, 'enum-value-added', this.looser(place), `${label}: no longer limited to ${bEnum.map(show).join(', ')}`);
    else if (!bEnum && aEnum) this.add(id, 'enum-value-removed', this.tighter(place), `${label}: now limited to ${aEnum.map(show).join(', ')}`);
    else if (bEnum && aEnum) {
      const bSet = new Set(bEnum.map((v) => JSON.stringify(v)));
      const aSet = new Set(aEnum.map((v) => JSON.stringify(v)));
      for (const v of [...aSet].sort()) if (!bSet.has(v)) this.add(id, 'enum-value-added', this.looser(place), `${label}: new enum value ${v}${place.dir === 'response' ? ' (clients must accept values they do not know)' : ''}`);
      for (const v of [...bSet].sort()) if (!aSet.has(v)) this.add(id, 'enum-value-removed', this.tighter(place), `${label}: enum value ${v} removed`);
    }

    this.constraints(id, place, b, a, label);

    if (place.dir === 'request' && show(b.default) !== show(a.default)) {
      this.add(id, 'default-changed', 'note', `${label}: default ${show(b.default)} → ${show(a.default)}`);
    }

    this.properties(id, place, b, a, at, depth);
    if (b.items !== undefined || a.items !== undefined) this.schema(id, place, b.items, a.items, `${at}[]`, depth + 1);
  }

  private constraints(id: string, place: Place, b: JsonObject, a: JsonObject, label: string): void {
    const num = (v: Json | undefined) => (typeof v === 'number' ? v : undefined);
    // A lower upper bound or a higher lower bound lets fewer values through.
    for (const [key, upper] of [['maxLength', true], ['maxItems', true], ['maxProperties', true], ['maximum', true], ['minLength', false], ['minItems', false], ['minProperties', false], ['minimum', false]] as const) {
      const bv = num(b[key]);
      const av = num(a[key]);
      if (bv === av) continue;
      const tighter = bv === undefined ? true : av === undefined ? false : upper ? av < bv : av > bv;
      this.add(id, 'constraint-changed', tighter ? this.tighter(place) : this.looser(place), `${label}: ${key} ${bv ?? 'none'} → ${av ?? 'none'}`);
    }
    for (const key of ['exclusiveMinimum', 'exclusiveMaximum', 'uniqueItems'] as const) {
      const [bv, av] = [b[key] === true, a[key] === true];
      if (bv !== av) this.add(id, 'constraint-changed', av ? this.tighter(place) : this.looser(place), `${label}: ${key} ${bv} → ${av}`);
    }
    for (const key of ['pattern', 'format', 'multipleOf'] as const) {
      const [bv, av] = [b[key], a[key]];
      if (show(bv) === show(av)) continue;
      const severity = bv === undefined ? this.tighter(place) : av === undefined ? this.looser(place) : place.dir === 'request' ? 'breaking' : 'note';
      this.add(id, 'constraint-changed', severity, `${label}: ${key} ${show(bv)} → ${show(av)}`);
    }
    // Extra keys of an object: closed (false), open (true or absent), or a map with a value schema.
    const extra = (s: JsonObject): 'closed' | 'map' | 'open' => (s.additionalProperties === false ? 'closed' : isObject(s.additionalProperties) ? 'map' : 'open');
    const [be, ae] = [extra(b), extra(a)];
    if (be !== ae && (isObject(b.properties) || isObject(a.properties) || be === 'map' || ae === 'map')) {
      const rank = { closed: 0, map: 1, open: 2 } as const;
      this.add(id, 'constraint-changed', rank[ae] > rank[be] ? this.looser(place) : this.tighter(place), `${label}: unknown keys ${be === 'closed' ? 'refused' : be === 'map' ? 'limited to the map schema' : 'allowed'} → ${ae === 'closed' ? 'refused' : ae === 'map' ? 'limited to the map schema' : 'allowed'}`);
    }
  }

  private properties(id: string, place: Place, b: JsonObject, a: JsonObject, at: string, depth: number): void {
    // readOnly fields are never sent, writeOnly fields never returned (OpenAPI 3.0).
    const skip = place.dir === 'request' ? 'readOnly' : 'writeOnly';
    const props = (doc: JsonObject, s: JsonObject) => {
      const out: JsonObject = {};
      for (const [name, child] of Object.entries(isObject(s.properties) ? s.properties : {})) {
        if (normalize(doc, child)?.[skip] !== true) out[name] = child;
      }
      return out;
    };
    const bp = props(this.before, b);
    const ap = props(this.after, a);
    const required = (s: JsonObject) => new Set(Array.isArray(s.required) ? s.required.map(String) : []);
    const [br, ar] = [required(b), required(a)];
    for (const name of sortedKeys(bp, ap)) {
      const field = at ? `${at}.${name}` : name;
      const label = this.label(place, field);
      if (bp[name] === undefined) {
        if (place.dir === 'request') {
          const req = ar.has(name);
          this.add(id, 'request-field-added', req ? 'breaking' : 'additive', `new ${req ? 'required' : 'optional'} request field \`${field}\`${typeOf(this.after, ap[name])}`);
        } else this.add(id, 'response-field-added', 'additive', `new ${place.where} field \`${field}\`${typeOf(this.after, ap[name])}`);
      } else if (ap[name] === undefined) {
        if (place.dir === 'request') this.add(id, 'request-field-removed', 'breaking', `request field \`${field}\` removed (a client that sends it is refused)`);
        else this.add(id, 'response-field-removed', 'breaking', `${place.where} field \`${field}\` removed`);
      } else {
        if (br.has(name) !== ar.has(name)) {
          const nowRequired = ar.has(name);
          if (place.dir === 'request') this.add(id, 'required-changed', nowRequired ? 'breaking' : 'additive', `${label} is now ${nowRequired ? 'required' : 'optional'}`);
          else this.add(id, 'required-changed', nowRequired ? 'additive' : 'breaking', nowRequired ? `${label} is now always present` : `${label} may now be absent`);
        }
        this.schema(id, place, bp[name], ap[name], field, depth + 1);
      }
    }
    if (isObject(b.additionalProperties) && isObject(a.additionalProperties)) {
      this.schema(id, place, b.additionalProperties, a.additionalProperties, at ? `${at}.*` : '*', depth + 1);
    }
  }

  /** oneOf / anyOf: alternatives that accept the same values are paired; the rest are added or removed. */
  private alternatives(id: string, place: Place, b: Json[], a: Json[], at: string, label: string, depth: number): void {
    const key = (doc: JsonObject, s: Json) => JSON.stringify(canonical(doc, s));
    const bKeys = b.map((s) => key(this.before, s));
    const aKeys = a.map((s) => key(this.after, s));
    const unmatchedB = b.filter((_, i) => !aKeys.includes(bKeys[i]!));
    const unmatchedA = a.filter((_, i) => !bKeys.includes(aKeys[i]!));
    if (unmatchedA.length === unmatchedB.length) {
      // Same number changed: compare them in order (a schema edited in place).
      unmatchedB.forEach((s, i) => this.schema(id, place, s, unmatchedA[i], at, depth + 1));
      return;
    }
    if (unmatchedA.length && unmatchedB.length) {
      this.add(id, 'alternatives-changed', 'breaking', `${label}: schema changed (alternatives ${b.length} → ${a.length}, not classified: review it)`);
      return;
    }
    for (const s of unmatchedA) this.add(id, 'alternatives-changed', this.looser(place, 'breaking'), `${label}: new alternative${typeOf(this.after, s)}`);
    for (const s of unmatchedB) this.add(id, 'alternatives-changed', this.tighter(place), `${label}: alternative${typeOf(this.before, s)} removed`);
  }
}

function alternatives(schema: JsonObject): Json[] | undefined {
  if (Array.isArray(schema.oneOf)) return schema.oneOf;
  if (Array.isArray(schema.anyOf)) return schema.anyOf;
  return undefined;
}

function typeOf(doc: JsonObject, node: Json | undefined): string {
  const s = normalize(doc, node);
  if (!s) return '';
  if (alternatives(s)) return ' (one of several shapes)';
  const ref = isObject(node) && typeof node.$ref === 'string' ? node.$ref.split('/').pop() : undefined;
  const type = typeof s.type === 'string' ? s.type : undefined;
  if (ref) return ` (${ref})`;
  return type ? ` (${type}${type === 'array' && isObject(s.items) ? ` of ${typeOf(doc, s.items).slice(2, -1) || 'items'}` : ''})` : '';
}

function kindLabel(op: JsonObject): string {
  const kind = op['x-service-kind'];
  return typeof kind === 'string' ? ` (${kind})` : '';
}

/** Every change from `released` to `current`, ordered by operation (then as found), each classified. */
export function diffContracts(released: JsonObject, current: JsonObject): ContractChange[] {
  const differ = new Differ(released, current);
  differ.operations();
  // Stable sort by operation: within one operation, changes stay in document order.
  return differ.changes.map((c, i) => ({ c, i })).sort((x, y) => (x.c.operation < y.c.operation ? -1 : x.c.operation > y.c.operation ? 1 : x.i - y.i)).map((x) => x.c);
}

function versionOf(doc: JsonObject, id: string): number | undefined {
  const v = operationsOf(doc).get(id)?.op['x-service-contract-version'];
  return typeof v === 'number' ? v : undefined;
}

/**
 * The breaking changes the released contract forbids: each breaking change of an operation whose
 * x-service-contract-version is not higher than in the released document. A removed operation or a
 * lowered version is always refused. Each message names the operation and the change.
 */
export function contractRefusals(released: JsonObject, current: JsonObject, changes = diffContracts(released, current)): string[] {
  const out: string[] = [];
  for (const c of changes) {
    if (c.severity !== 'breaking') continue;
    const before = versionOf(released, c.operation);
    const after = versionOf(current, c.operation);
    const raised = before !== undefined && after !== undefined && after > before;
    if (raised && c.kind !== 'operation-removed') continue;
    const version = before === undefined ? '' : ` of contract version ${before}`;
    out.push(`${c.operation}: ${c.text} — a breaking change${version}` + (c.kind === 'operation-removed' ? ' (a released operation is not removed; deprecate it instead)' : c.kind === 'contract-version-lowered' ? '' : '; make it additive or raise x-service-contract-version'));
  }
  return out;
}

/** Throws, naming every refused change, when `current` breaks the released contract (what `npm run generate` checks). */
export function checkAgainstRelease(released: JsonObject, current: JsonObject): ContractChange[] {
  const changes = diffContracts(released, current);
  const refusals = contractRefusals(released, current, changes);
  if (refusals.length) {
    throw new Error(
      `openapi/ breaks the released contract (${SNAPSHOT_FILE}; versioning, seed section 9):\n- ${refusals.join('\n- ')}\n` +
        'A client written against the released contract would fail. Make the change additive (a new optional field, a new operation), ' +
        'or raise the operation\'s x-service-contract-version.',
    );
  }
  return changes;
}

const SEVERITY_LABEL: Record<Severity, string> = { breaking: 'Breaking', additive: 'Added', note: 'Note' };

function renderChanges(changes: ContractChange[], current: JsonObject | undefined, released: JsonObject | undefined): string[] {
  const lines: string[] = [];
  const byOp = new Map<string, ContractChange[]>();
  for (const c of changes) byOp.set(c.operation, [...(byOp.get(c.operation) ?? []), c]);
  for (const [op, list] of [...byOp].sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0))) {
    const before = released ? versionOf(released, op) : undefined;
    const after = current ? versionOf(current, op) : undefined;
    const version = before !== undefined && after !== undefined && after > before ? ` (contract version ${before} → ${after})` : '';
    lines.push(`### \`${op}\`${version}`, '');
    // The same change in several responses (a shared error schema) is one line naming the statuses.
    const merged = new Map<string, { severity: Severity; statuses: string[]; text: string }>();
    for (const c of list) {
      const status = /\bresponse (\d{3}|default)\b/.exec(c.text)?.[1];
      const key = `${c.severity}\n${status ? c.text.replace(/\bresponse (\d{3}|default)\b/, 'response #') : c.text}`;
      const entry = merged.get(key);
      if (entry && status) entry.statuses.push(status);
      else merged.set(key, { severity: c.severity, statuses: status ? [status] : [], text: c.text });
    }
    for (const { severity, statuses, text } of merged.values()) {
      const line = statuses.length > 1 ? text.replace(/\bresponse (\d{3}|default)\b/, `response ${statuses.join(', ')}`) : text;
      lines.push(`- **${SEVERITY_LABEL[severity]}**: ${line}`);
    }
    lines.push('');
  }
  return lines;
}

/** generated/CHANGELOG.md: the unreleased changes by operation, then every release, newest first. */
export function renderChangelog(unreleased: ContractChange[], releases: Release[], released: JsonObject | undefined, current: JsonObject): string {
  const lines = [
    '<!-- This file is generated by npm run generate (scripts/contract-diff.ts) from openapi/ and openapi/released/. Do not edit. -->',
    '',
    '# Contract changelog',
    '',
    'Changes of the operations of the Workspace Operations API (`/v1`), by operation. **Breaking**: a client',
    'written against the previous release can fail; allowed only with a raised `x-service-contract-version`',
    '(`npm run generate` refuses it otherwise). **Added**: existing clients are unaffected. **Note**: existing',
    'clients keep working but should know (a new value in a response enum, a looser response bound, a',
    'deprecation, a changed default, a raised contract version). `npm run release -- <name>` records the',
    'Unreleased changes as a release.',
    '',
    '## Unreleased',
    '',
  ];
  if (!unreleased.length) lines.push(releases.length ? `No changes since ${releases[0]!.name}.` : 'No changes.', '');
  else lines.push(...renderChanges(unreleased, current, released));
  for (const release of releases) {
    lines.push(`## ${release.name}${release.date !== release.name ? ` (${release.date})` : ''}`, '');
    if (!release.changes.length) lines.push('No changes.', '');
    else if (release === releases[releases.length - 1] && release.changes.every((c) => c.kind === 'operation-added')) {
      lines.push(`First release: ${release.changes.length} operations.`, '');
    }
    lines.push(...renderChanges(release.changes, undefined, undefined));
  }
  return lines.join('\n').replace(/\n+$/, '\n');
}

export function readReleased(root: string): { snapshot: JsonObject | undefined; releases: Release[] } {
  const snapshotPath = path.join(root, SNAPSHOT_FILE);
  const releasesPath = path.join(root, RELEASES_FILE);
  const snapshot = fs.existsSync(snapshotPath) ? (JSON.parse(fs.readFileSync(snapshotPath, 'utf8')) as JsonObject) : undefined;
  const parsed: unknown = fs.existsSync(releasesPath) ? YAML.parse(fs.readFileSync(releasesPath, 'utf8')) : undefined;
  const releases = isObject(parsed) && Array.isArray(parsed.releases) ? (parsed.releases as unknown as Release[]) : [];
  return { snapshot, releases };
}

export function releasesYaml(releases: Release[]): string {
  return (
    '# Released contracts, newest first, each with the changes it brought (the first lists every operation).\n' +
    '# Written by npm run release (scripts/release.ts) together with openapi.json, the bundled document of the\n' +
    '# newest release. Do not edit by hand.\n' +
    YAML.stringify({ releases }, { lineWidth: 0 })
  );
}

/**
 * The step of `npm run generate`: refuses (exit status 1, naming each operation and change) a breaking
 * change to a released contract version, otherwise writes generated/CHANGELOG.md.
 */
export function writeChangelog(current: JsonObject, root: string): void {
  const { snapshot, releases } = readReleased(root);
  let changes: ContractChange[];
  try {
    changes = snapshot ? checkAgainstRelease(snapshot, current) : diffContracts({}, current);
  } catch (error) {
    console.error((error as Error).message);
    process.exit(1);
  }
  fs.mkdirSync(path.join(root, 'generated'), { recursive: true });
  fs.writeFileSync(path.join(root, CHANGELOG_FILE), renderChangelog(changes, releases, snapshot, current));
  const breaking = changes.filter((c) => c.severity === 'breaking').length;
  console.log(`${CHANGELOG_FILE}: ${changes.length} unreleased change${changes.length === 1 ? '' : 's'}${breaking ? ` (${breaking} breaking, on raised contract versions)` : ''} since ${releases[0]?.name ?? 'the start'}`);
}
