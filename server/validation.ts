import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import type { CatalogueEntry } from '../generated/catalogue.ts';
import { invalidInput } from './errors.ts';

type Json = Record<string, unknown>;

interface OperationValidators {
  body: ValidateFunction | null;
  headers: ValidateFunction;
  responses: Map<number, ValidateFunction>;
}

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Points local `#/components/...` refs at the document registered under the id `doc`. */
function rebase(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(rebase);
  if (!isObject(schema)) return schema;
  const out: Json = {};
  for (const [k, v] of Object.entries(schema)) out[k] = k === '$ref' && typeof v === 'string' && v.startsWith('#/') ? `doc${v}` : rebase(v);
  return out;
}

function resolve(doc: Json, node: unknown): Json {
  let current = node;
  while (isObject(current) && typeof current.$ref === 'string') {
    let target: unknown = doc;
    for (const part of current.$ref.replace(/^#\//, '').split('/')) target = isObject(target) ? target[part] : undefined;
    current = target;
  }
  return isObject(current) ? current : {};
}

/** One readable problem from an Ajv error, e.g. `body.name is required` (also the collection path's). */
export function describe(where: string, e: ErrorObject): string {
  const path = `${where}${e.instancePath.replace(/\//g, '.')}`;
  if (e.keyword === 'additionalProperties') return `${path}.${String(e.params.additionalProperty)} is not a known field`;
  if (e.keyword === 'required') return `${path}.${String(e.params.missingProperty)} is required`;
  return `${path} ${e.message ?? 'is invalid'}`;
}

/**
 * Request and response validators for every operation, compiled once from the bundled document with
 * the options the document assumes (no type coercion, defaults applied, unknown fields refused).
 */
export class ContractValidator {
  private readonly ajv = new Ajv({ strict: false, allErrors: false, useDefaults: true, coerceTypes: false, discriminator: false });
  private readonly byOperation = new Map<string, OperationValidators>();

  constructor(document: Json, entries: readonly CatalogueEntry[]) {
    this.ajv.addSchema({ $id: 'doc', components: rebase(document.components) } as never);
    const paths = isObject(document.paths) ? document.paths : {};
    for (const entry of entries) {
      const op = resolve(document, resolve(document, paths[entry.path])[entry.method]);
      const headerProps: Json = {};
      const required: string[] = [];
      for (const p of Array.isArray(op.parameters) ? op.parameters : []) {
        const param = resolve(document, p);
        if (param.in !== 'header' || typeof param.name !== 'string') continue;
        const name = param.name.toLowerCase();
        headerProps[name] = rebase(param.schema ?? {});
        if (param.required === true) required.push(name);
      }
      const content = resolve(document, op.requestBody).content;
      const bodySchema = isObject(content) && isObject(content['application/json']) ? content['application/json'].schema : undefined;
      const responses = new Map<number, ValidateFunction>();
      for (const [status, response] of Object.entries(isObject(op.responses) ? op.responses : {})) {
        const rc = resolve(document, response).content;
        const schema = isObject(rc) && isObject(rc['application/json']) ? rc['application/json'].schema : undefined;
        if (schema) responses.set(Number(status), this.ajv.compile(rebase(schema) as Json));
      }
      this.byOperation.set(entry.id, {
        body: bodySchema ? this.ajv.compile(rebase(bodySchema) as Json) : null,
        headers: this.ajv.compile({ type: 'object', properties: headerProps, required }),
        responses,
      });
    }
  }

  /** Validates headers, query and body of a request (applying schema defaults to the body); throws 400 invalid_input. */
  validateRequest(entry: CatalogueEntry, headers: Json, query: Json, body: unknown): void {
    const v = this.byOperation.get(entry.id)!;
    const unknownQuery = Object.keys(query)[0];
    if (unknownQuery !== undefined) throw invalidInput(`query.${unknownQuery} is not a known query parameter`);
    if (!v.headers(headers)) throw invalidInput(describe('headers', v.headers.errors![0]!).replace(/^headers\./, 'header '));
    if (v.body && !v.body(body)) throw invalidInput(describe('body', v.body.errors![0]!));
  }

  /** The first way a response breaks its declared schema, or null (development and tests). */
  responseProblem(entry: CatalogueEntry, status: number, body: unknown): string | null {
    const validate = this.byOperation.get(entry.id)?.responses.get(status);
    if (!validate) return `${entry.id} does not declare status ${status}`;
    return validate(body) ? null : describe('response', validate.errors![0]!);
  }
}
