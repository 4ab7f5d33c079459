/**
 * Schema-level comparison for the contract changelog: two Schema Objects of dereferenced documents
 * at the same place (a request body, a response, a header), classified from the client's side.
 */
import { type AddChange, isObject, type Json, type JsonObject, type Severity, show, sortedKeys } from './changes.ts';

const MAX_DEPTH = 40;

/** Where a schema sits, and who produces its values. */
export interface Place {
  /** `request`: the client writes, the server reads. `response`: the server writes, the client reads. */
  dir: 'request' | 'response';
  /** e.g. "request", "response 200", "header `Idempotency-Key`". */
  where: string;
}

/** A schema with its `allOf` merged into one object (properties and required united). */
function normalize(node: Json | undefined, depth = 0): JsonObject | undefined {
  const schema = node;
  if (!isObject(schema)) return undefined;
  if (!Array.isArray(schema.allOf) || depth > MAX_DEPTH) return schema;
  const merged: JsonObject = {};
  const properties: JsonObject = {};
  const required = new Set<string>();
  const { allOf, ...own } = schema;
  for (const part of [...allOf.map((p) => normalize(p, depth + 1)), own]) {
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

/** The schema with `allOf` merged, documentation stripped and keys sorted: two schemas that accept the same values compare equal. */
function canonical(node: Json | undefined, depth = 0): Json {
  if (depth > MAX_DEPTH) return null;
  const value = isObject(node) ? normalize(node) : node;
  if (Array.isArray(value)) return value.map((v) => canonical(v, depth + 1));
  if (!isObject(value)) return value ?? null;
  const out: JsonObject = {};
  for (const key of Object.keys(value).sort()) {
    if (IGNORED.has(key) || key.startsWith('x-')) continue;
    const child = value[key]!;
    if (key === 'enum' || key === 'required') out[key] = [...(child as Json[])].map((v) => JSON.stringify(v)).sort();
    else if (key === 'properties' && isObject(child)) {
      const props: JsonObject = {};
      for (const name of Object.keys(child).sort()) props[name] = canonical(child[name], depth + 1);
      out[key] = props;
    } else out[key] = canonical(child, depth + 1);
  }
  return out;
}

function alternativesOf(schema: JsonObject): Json[] | undefined {
  if (Array.isArray(schema.oneOf)) return schema.oneOf;
  if (Array.isArray(schema.anyOf)) return schema.anyOf;
  return undefined;
}

/** ` (Money)`, ` (string)`, ` (array of Deal)`: how a change names a field's type. */
export function typeOf(node: Json | undefined): string {
  const s = normalize(node);
  if (!s) return '';
  if (alternativesOf(s)) return ' (one of several shapes)';
  const ref = isObject(node) && typeof node['x-component'] === 'string' ? node['x-component'] : undefined;
  const type = typeof s.type === 'string' ? s.type : undefined;
  if (ref) return ` (${ref})`;
  return type ? ` (${type}${type === 'array' && isObject(s.items) ? ` of ${typeOf(s.items).slice(2, -1) || 'items'}` : ''})` : '';
}

/** Compares the schemas of one place of one operation and records each change through `add`. */
export class SchemaDiffer {
  constructor(private readonly add: AddChange) {}

  schema(id: string, place: Place, bNode: Json | undefined, aNode: Json | undefined, at: string, depth: number): void {
    if (depth > MAX_DEPTH) return;
    const b = normalize(bNode);
    const a = normalize(aNode);
    const label = this.label(place, at);
    if (!b && !a) return;
    if (!b || !a) {
      this.add(id, 'schema-changed', b ? this.looser(place, 'breaking') : this.tighter(place), `${label}: schema ${b ? 'removed' : 'added'}`);
      return;
    }
    if ((b.deprecated === true) !== (a.deprecated === true) && a.deprecated === true) this.add(id, 'field-deprecated', 'note', `${label} deprecated`);

    const bAlts = alternativesOf(b);
    const aAlts = alternativesOf(a);
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

    this.enums(id, place, b, a, label);
    this.constraints(id, place, b, a, label);

    if (place.dir === 'request' && show(b.default) !== show(a.default)) {
      this.add(id, 'default-changed', 'note', `${label}: default ${show(b.default)} → ${show(a.default)}`);
    }

    this.properties(id, place, b, a, at, depth);
    if (b.items !== undefined || a.items !== undefined) this.schema(id, place, b.items, a.items, `${at}[]`, depth + 1);
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

  private enums(id: string, place: Place, b: JsonObject, a: JsonObject, label: string): void {
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
      // Text a person reads becoming display-text refuses only bidi controls no honest name holds (a spoofing fix, README): noted.
      const bidiFix = key === 'format' && bv === undefined && av === 'display-text';
      const severity = bidiFix ? 'note' : bv === undefined ? this.tighter(place) : av === undefined ? this.looser(place) : place.dir === 'request' ? 'breaking' : 'note';
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
    const props = (s: JsonObject) => {
      const out: JsonObject = {};
      for (const [name, child] of Object.entries(isObject(s.properties) ? s.properties : {})) {
        if (normalize(child)?.[skip] !== true) out[name] = child;
      }
      return out;
    };
    const bp = props(b);
    const ap = props(a);
    const required = (s: JsonObject) => new Set(Array.isArray(s.required) ? s.required.map(String) : []);
    const [br, ar] = [required(b), required(a)];
    for (const name of sortedKeys(bp, ap)) {
      const field = at ? `${at}.${name}` : name;
      const label = this.label(place, field);
      if (bp[name] === undefined) {
        if (place.dir === 'request') {
          const req = ar.has(name);
          this.add(id, 'request-field-added', req ? 'breaking' : 'additive', `new ${req ? 'required' : 'optional'} request field \`${field}\`${typeOf(ap[name])}`);
        } else this.add(id, 'response-field-added', 'additive', `new ${place.where} field \`${field}\`${typeOf(ap[name])}`);
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
    const key = (s: Json) => JSON.stringify(canonical(s));
    const bKeys = b.map(key);
    const aKeys = a.map(key);
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
    for (const s of unmatchedA) this.add(id, 'alternatives-changed', this.looser(place, 'breaking'), `${label}: new alternative${typeOf(s)}`);
    for (const s of unmatchedB) this.add(id, 'alternatives-changed', this.tighter(place), `${label}: alternative${typeOf(s)} removed`);
  }
}
