import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { document } from '../../generated/document.ts';
import {
  CHANGELOG_FILE, checkAgainstRelease, contractRefusals, diffContracts, readReleased, renderChangelog,
  type ContractChange, type JsonObject,
} from '../../scripts/contract-diff.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

type Schema = JsonObject;

/** A one-operation document (customers.UpdateThing, a command) with the given request and 200 response schemas. */
function doc(options: { request?: Schema; response?: Schema; op?: JsonObject; statuses?: string[]; schemas?: JsonObject; extraOps?: string[] } = {}): JsonObject {
  const request: Schema = options.request ?? { type: 'object', additionalProperties: false, required: ['id'], properties: { id: { type: 'string', maxLength: 64 } } };
  const response: Schema = options.response ?? { type: 'object', required: ['id', 'name'], properties: { id: { type: 'string' }, name: { type: 'string' } } };
  const operation = (id: string): JsonObject => ({
    operationId: id,
    'x-service-kind': 'command',
    'x-service-contract-version': 1,
    'x-service-workspace-supported': true,
    'x-service-act-as': 'none',
    deprecated: false,
    parameters: [{ $ref: '#/components/parameters/IdempotencyKey' }],
    requestBody: { required: true, content: { 'application/json': { schema: request } } },
    responses: Object.fromEntries([
      ['200', { description: 'ok', content: { 'application/json': { schema: response } } }],
      ...(options.statuses ?? ['400']).map((s) => [s, { $ref: '#/components/responses/Error' }]),
    ]),
    ...(id === 'customers.UpdateThing' ? options.op : {}),
  });
  const ids = ['customers.UpdateThing', ...(options.extraOps ?? [])];
  return {
    openapi: '3.0.3',
    paths: Object.fromEntries(ids.map((id) => [`/operations/${id}`, { post: operation(id) }])),
    components: {
      parameters: { IdempotencyKey: { name: 'Idempotency-Key', in: 'header', required: true, schema: { type: 'string', minLength: 1, maxLength: 200 } } },
      responses: { Error: { description: 'error', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } } },
      schemas: { Error: { type: 'object', required: ['error'], properties: { error: { type: 'string' } } }, ...options.schemas },
    },
  };
}

const only = (changes: ContractChange[]) => changes.map(({ kind, severity, text }) => ({ kind, severity, text }));

describe('contract changelog (scripts/contract-diff.ts)', () => {
  it('finds no change between a document and itself', () => {
    assert.deepEqual(diffContracts(doc(), doc()), []);
    assert.deepEqual(diffContracts(document as unknown as JsonObject, document as unknown as JsonObject), []);
  });

  it('an added operation is additive; a removed operation is breaking and refused even with a raised version', () => {
    const changes = diffContracts(doc(), doc({ extraOps: ['customers.GetThing'] }));
    assert.deepEqual(only(changes), [{ kind: 'operation-added', severity: 'additive', text: 'new operation `POST /operations/customers.GetThing` (command)' }]);
    assert.equal(changes[0]!.operation, 'customers.GetThing');
    const removed = diffContracts(doc({ extraOps: ['customers.GetThing'] }), doc());
    assert.deepEqual(removed.map((c) => [c.operation, c.kind, c.severity]), [['customers.GetThing', 'operation-removed', 'breaking']]);
    assert.match(contractRefusals(doc({ extraOps: ['customers.GetThing'] }), doc())[0]!, /^customers\.GetThing: operation `POST \/operations\/customers\.GetThing` removed/);
  });

  it('a new optional request field is additive, a new required one breaking', () => {
    const base = { type: 'object', additionalProperties: false, required: ['id'], properties: { id: { type: 'string', maxLength: 64 } } };
    const optional = diffContracts(doc({ request: base }), doc({ request: { ...base, properties: { ...base.properties, note: { type: 'string' } } } }));
    assert.deepEqual(only(optional), [{ kind: 'request-field-added', severity: 'additive', text: 'new optional request field `note` (string)' }]);
    const required = diffContracts(doc({ request: base }), doc({ request: { ...base, required: ['id', 'note'], properties: { ...base.properties, note: { type: 'string' } } } }));
    assert.deepEqual(only(required), [{ kind: 'request-field-added', severity: 'breaking', text: 'new required request field `note` (string)' }]);
    const removed = diffContracts(doc({ request: { ...base, properties: { ...base.properties, note: { type: 'string' } } } }), doc({ request: base }));
    assert.deepEqual(removed.map((c) => [c.kind, c.severity]), [['request-field-removed', 'breaking']]);
    const nowRequired = diffContracts(doc({ request: { ...base, properties: { ...base.properties, note: { type: 'string' } } } }), doc({ request: { ...base, required: ['id', 'note'], properties: { ...base.properties, note: { type: 'string' } } } }));
    assert.deepEqual(only(nowRequired), [{ kind: 'required-changed', severity: 'breaking', text: 'request field `note` is now required' }]);
  });

  it('a removed response field is breaking, an added one additive, a field that may be absent breaking', () => {
    const response = { type: 'object', required: ['id', 'name'], properties: { id: { type: 'string' }, name: { type: 'string' } } };
    const removed = diffContracts(doc({ response }), doc({ response: { ...response, required: ['id'], properties: { id: { type: 'string' } } } }));
    assert.deepEqual(only(removed), [{ kind: 'response-field-removed', severity: 'breaking', text: 'response 200 field `name` removed' }]);
    const added = diffContracts(doc({ response }), doc({ response: { ...response, properties: { ...response.properties, size: { type: 'integer' } } } }));
    assert.deepEqual(only(added), [{ kind: 'response-field-added', severity: 'additive', text: 'new response 200 field `size` (integer)' }]);
    const optional = diffContracts(doc({ response }), doc({ response: { ...response, required: ['id'] } }));
    assert.deepEqual(only(optional), [{ kind: 'required-changed', severity: 'breaking', text: 'response 200 field `name` may now be absent' }]);
  });

  it('an added status is additive, a removed one breaking', () => {
    assert.deepEqual(only(diffContracts(doc(), doc({ statuses: ['400', '409'] }))), [{ kind: 'status-added', severity: 'additive', text: 'new status 409' }]);
    assert.deepEqual(only(diffContracts(doc({ statuses: ['400', '409'] }), doc())), [{ kind: 'status-removed', severity: 'breaking', text: 'status 409 removed' }]);
  });

  it('an enum value: added to a request is additive, to a response a note; removed from a request breaking', () => {
    const request = (values: string[]) => ({ type: 'object', additionalProperties: false, properties: { tone: { type: 'string', enum: values } } });
    assert.deepEqual(only(diffContracts(doc({ request: request(['a', 'b']) }), doc({ request: request(['a', 'b', 'c']) }))), [
      { kind: 'enum-value-added', severity: 'additive', text: 'request field `tone`: new enum value "c"' },
    ]);
    assert.deepEqual(only(diffContracts(doc({ request: request(['a', 'b']) }), doc({ request: request(['a']) }))), [
      { kind: 'enum-value-removed', severity: 'breaking', text: 'request field `tone`: enum value "b" removed' },
    ]);
    const response = (values: string[]) => ({ type: 'object', required: ['tone'], properties: { tone: { type: 'string', enum: values } } });
    assert.deepEqual(only(diffContracts(doc({ response: response(['a']) }), doc({ response: response(['a', 'z']) }))), [
      { kind: 'enum-value-added', severity: 'note', text: 'response 200 field `tone`: new enum value "z" (clients must accept values they do not know)' },
    ]);
  });

  it('tightening a request bound is breaking, loosening it additive; types and nullability too', () => {
    const request = (id: Schema) => ({ type: 'object', additionalProperties: false, required: ['id'], properties: { id } });
    assert.deepEqual(only(diffContracts(doc({ request: request({ type: 'string', maxLength: 64 }) }), doc({ request: request({ type: 'string', maxLength: 32 }) }))), [
      { kind: 'constraint-changed', severity: 'breaking', text: 'request field `id`: maxLength 64 → 32' },
    ]);
    assert.deepEqual(diffContracts(doc({ request: request({ type: 'string', maxLength: 64 }) }), doc({ request: request({ type: 'string', maxLength: 128 }) })).map((c) => c.severity), ['additive']);
    assert.deepEqual(diffContracts(doc({ request: request({ type: 'string' }) }), doc({ request: request({ type: 'string', pattern: '^[a-z]+$' }) })).map((c) => c.severity), ['breaking']);
    assert.deepEqual(only(diffContracts(doc({ request: request({ type: 'string' }) }), doc({ request: request({ type: 'integer' }) }))), [
      { kind: 'type-changed', severity: 'breaking', text: 'request field `id`: type string → integer' },
    ]);
    const response = (name: Schema) => ({ type: 'object', required: ['name'], properties: { name } });
    assert.deepEqual(only(diffContracts(doc({ response: response({ type: 'string' }) }), doc({ response: response({ type: 'string', nullable: true }) }))), [
      { kind: 'nullable-changed', severity: 'breaking', text: 'response 200 field `name`: now nullable' },
    ]);
  });

  it('resolves $ref and allOf, pairs oneOf alternatives, ignores readOnly fields in requests', () => {
    const request = { type: 'object', additionalProperties: false, properties: { data: { allOf: [{ $ref: '#/components/schemas/Data' }], description: 'd' } } };
    const data = (extra: JsonObject, required: string[] = []) => ({ Data: { type: 'object', additionalProperties: false, required, properties: { name: { type: 'string' }, ...extra } } });
    assert.deepEqual(only(diffContracts(doc({ request, schemas: data({}) }), doc({ request, schemas: data({ size: { type: 'integer' } }, ['size']) }))), [
      { kind: 'request-field-added', severity: 'breaking', text: 'new required request field `data.size` (integer)' },
    ]);
    assert.deepEqual(diffContracts(doc({ request, schemas: data({}) }), doc({ request, schemas: data({ total: { type: 'integer', readOnly: true } }, ['total']) })), []);
    const expected = (alts: Schema[] | undefined): Schema => ({ type: 'object', additionalProperties: false, properties: { name: alts ? { oneOf: alts } : { type: 'string' } } });
    const absent = { type: 'object', additionalProperties: false, required: ['$absent'], properties: { $absent: { type: 'boolean', enum: [true] } } };
    assert.deepEqual(only(diffContracts(doc({ request: expected(undefined) }), doc({ request: expected([{ type: 'string' }, absent]) }))), [
      { kind: 'alternatives-changed', severity: 'additive', text: 'request field `name`: new alternative (object)' },
    ]);
    assert.deepEqual(diffContracts(doc({ request: expected([{ type: 'string' }, absent]) }), doc({ request: expected([{ type: 'string', maxLength: 10 }, absent]) })).map((c) => [c.kind, c.severity]), [['constraint-changed', 'breaking']]);
    // Unpairable alternatives: reported, not crashed on.
    const changed = diffContracts(doc({ request: expected([{ type: 'string' }, absent]) }), doc({ request: expected([{ type: 'integer' }, { type: 'boolean' }, { type: 'number' }]) }));
    assert.deepEqual(changed.map((c) => [c.kind, c.severity]), [['alternatives-changed', 'breaking']]);
  });

  it('x-service-* changes: act-as, kind, resource access, deprecation, headers', () => {
    const optional: JsonObject = { 'x-service-act-as': 'optional', parameters: [{ $ref: '#/components/parameters/IdempotencyKey' }, { name: 'Service-Act-As', in: 'header', required: false, schema: { type: 'string' } }] };
    const required: JsonObject = { 'x-service-act-as': 'required', parameters: [{ $ref: '#/components/parameters/IdempotencyKey' }, { name: 'Service-Act-As', in: 'header', required: true, schema: { type: 'string' } }] };
    assert.deepEqual(diffContracts(doc(), doc({ op: optional })).map((c) => [c.kind, c.severity]), [['act-as-changed', 'additive'], ['parameter-added', 'additive']]);
    assert.deepEqual(diffContracts(doc({ op: optional }), doc({ op: required })).map((c) => [c.kind, c.severity]), [['act-as-changed', 'breaking'], ['required-changed', 'breaking']]);
    assert.deepEqual(diffContracts(doc(), doc({ op: { 'x-service-kind': 'query' } })).map((c) => [c.kind, c.severity]), [['kind-changed', 'breaking']]);
    assert.deepEqual(
      diffContracts(doc({ op: { 'x-service-resource': 'core:Thing', 'x-service-resource-access': ['read'] } }), doc({ op: { 'x-service-resource': 'core:Thing', 'x-service-resource-access': ['read', 'write'] } })).map((c) => c.text),
      ['now needs `write` access on the resource'],
    );
    assert.deepEqual(only(diffContracts(doc(), doc({ op: { deprecated: true } }))), [{ kind: 'operation-deprecated', severity: 'note', text: 'operation deprecated' }]);
  });

  it('a raised x-service-contract-version allows the breaking changes of that operation', () => {
    const before = doc();
    const after = doc({ response: { type: 'object', required: ['id'], properties: { id: { type: 'string' } } }, op: { 'x-service-contract-version': 2 } });
    const changes = checkAgainstRelease(before, after);
    assert.deepEqual(changes.map((c) => [c.kind, c.severity]), [['contract-version-raised', 'note'], ['response-field-removed', 'breaking']]);
    assert.deepEqual(contractRefusals(before, after), []);
    const text = renderChangelog(changes, [], before, after);
    assert.match(text, /### `customers\.UpdateThing` \(contract version 1 → 2\)\n\n- \*\*Note\*\*: contract version raised from 1 to 2\n- \*\*Breaking\*\*: response 200 field `name` removed\n/);
    // A lowered version is refused.
    assert.match(contractRefusals(after, before).join('\n'), /customers\.UpdateThing: contract version lowered from 2 to 1/);
  });

  it('the generator refuses a breaking change to an unraised contract version, naming the operation and the change', () => {
    const before = doc();
    const after = doc({ request: { type: 'object', additionalProperties: false, required: ['id', 'colour'], properties: { id: { type: 'string', maxLength: 64 }, colour: { type: 'string' } } } });
    assert.throws(() => checkAgainstRelease(before, after), (error: Error) => {
      assert.match(error.message, /^openapi\/ breaks the released contract \(openapi\/released\/openapi\.json; versioning, seed section 9\):/);
      assert.match(error.message, /\n- customers\.UpdateThing: new required request field `colour` \(string\) — a breaking change of contract version 1; make it additive or raise x-service-contract-version\n/);
      return true;
    });
    // Additive changes pass and come back for the changelog.
    assert.equal(checkAgainstRelease(before, doc({ statuses: ['400', '404'] })).length, 1);
  });

  it('the committed document has no breaking change against the released snapshot, and generated/CHANGELOG.md is current', () => {
    const { snapshot, releases } = readReleased(root);
    assert.ok(snapshot, 'openapi/released/openapi.json exists');
    assert.ok(releases.length >= 1 && releases[releases.length - 1]!.changes.every((c) => c.kind === 'operation-added'));
    const current = document as unknown as JsonObject;
    assert.deepEqual(contractRefusals(snapshot, current), []);
    const text = renderChangelog(diffContracts(snapshot, current), releases, snapshot, current);
    assert.ok(text.startsWith('<!-- This file is generated by npm run generate'));
    assert.equal(fs.readFileSync(path.join(root, CHANGELOG_FILE), 'utf8'), text, 'run npm run generate');
  });
});
