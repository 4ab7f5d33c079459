/**
 * Operation-level comparison for the contract changelog: which operations came, went or moved, and
 * for each the x-service-* facts, security, parameters, request body and responses (their schemas
 * through SchemaDiffer). Both documents are dereferenced.
 */
import { type AddChange, type ContractChange, isObject, type Json, type JsonObject, show, sortedKeys } from './changes.ts';
import { dereference } from '../dereference.ts';
import { type Place, SchemaDiffer } from './schemas.ts';

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

interface Operation {
  key: string;
  method: string;
  path: string;
  op: JsonObject;
}

export function operationsOf(doc: JsonObject): Map<string, Operation> {
  const out = new Map<string, Operation>();
  const paths = isObject(doc.paths) ? doc.paths : {};
  for (const route of Object.keys(paths).sort()) {
    const item = paths[route];
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

function kindLabel(op: JsonObject): string {
  const kind = op['x-service-kind'];
  return typeof kind === 'string' ? ` (${kind})` : '';
}

/** Compares the operations of two dereferenced documents; `changes` in document order. */
export class OperationDiffer {
  readonly changes: ContractChange[] = [];
  private readonly add: AddChange = (operation, kind, severity, text) => {
    this.changes.push({ operation, kind, severity, text });
  };
  private readonly schemas = new SchemaDiffer(this.add);

  constructor(private readonly before: JsonObject, private readonly after: JsonObject) {}

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
    const params = (op: JsonObject) => {
      const out = new Map<string, JsonObject>();
      for (const param of Array.isArray(op.parameters) ? op.parameters : []) {
        if (isObject(param) && typeof param.name === 'string') {
          const where = String(param.in);
          out.set(`${where}:${where === 'header' ? param.name.toLowerCase() : param.name}`, param);
        }
      }
      return out;
    };
    const [b, a] = [params(bo), params(ao)];
    for (const key of [...new Set([...b.keys(), ...a.keys()])].sort()) {
      const bp = b.get(key);
      const ap = a.get(key);
      const label = `${(ap ?? bp)!.in} \`${(ap ?? bp)!.name}\``;
      if (!bp) this.add(id, 'parameter-added', ap!.required === true ? 'breaking' : 'additive', `new ${ap!.required === true ? 'required' : 'optional'} ${label}`);
      else if (!ap) this.add(id, 'parameter-removed', 'breaking', `${label} removed (a client that sends it is refused)`);
      else {
        if ((bp.required === true) !== (ap.required === true)) this.add(id, 'required-changed', ap.required === true ? 'breaking' : 'additive', `${label} is now ${ap.required === true ? 'required' : 'optional'}`);
        if (ap.deprecated === true && bp.deprecated !== true) this.add(id, 'field-deprecated', 'note', `${label} deprecated`);
        this.schemas.schema(id, { dir: 'request', where: label }, bp.schema, ap.schema, '', 0);
      }
    }
  }

  private requestBody(id: string, bo: JsonObject, ao: JsonObject): void {
    const b = bo.requestBody;
    const a = ao.requestBody;
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
      else this.schemas.schema(id, place, bm.schema, am.schema, '', 0);
    }
  }

  private responses(id: string, bo: JsonObject, ao: JsonObject): void {
    const b = isObject(bo.responses) ? bo.responses : {};
    const a = isObject(ao.responses) ? ao.responses : {};
    for (const status of sortedKeys(b, a)) {
      const br = b[status];
      const ar = a[status];
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
            const bHeader = bh[name];
            const aHeader = ah[name];
            if (isObject(bHeader) && isObject(aHeader)) this.schemas.schema(id, { dir: 'response', where: label }, bHeader.schema, aHeader.schema, '', 0);
          }
        }
        this.content(id, { dir: 'response', where }, br.content, ar.content);
      }
    }
  }
}

const dereferencedDocs = new WeakMap<JsonObject, JsonObject>();

/** `doc` dereferenced (scripts/dereference.ts), once per document object. */
export function dereferencedOf(doc: JsonObject): JsonObject {
  let out = dereferencedDocs.get(doc);
  if (!out) dereferencedDocs.set(doc, (out = dereference(doc)));
  return out;
}

/** The x-service-contract-version of operation `id` in `doc`, if it has one. */
export function versionOf(doc: JsonObject, id: string): number | undefined {
  const v = operationsOf(dereferencedOf(doc)).get(id)?.op['x-service-contract-version'];
  return typeof v === 'number' ? v : undefined;
}
