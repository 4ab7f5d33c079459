/**
 * The MCP tools generated from the document (generated/mcpTools.ts, built by scripts/mcp-tools.ts;
 * rules in openapi/EXTENSIONS.md, *MCP tools*) and their selection per connection (handlers/mcp/tools.ts).
 *
 * The full `tools/list` answer is compared with the committed snapshot test/fixtures/mcp-tools.snapshot.json:
 * any change to a tool (a name, a description, a schema, an annotation) fails here until the snapshot is
 * updated on purpose, so a tool contract never drifts unnoticed. After `npm run generate`, review the change and
 * update the snapshot with:
 *
 *   UPDATE_MCP_SNAPSHOT=1 npx tsx scripts/test.ts test/platform/mcpTools.test.ts
 *
 * No database: the suite runs once.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { catalogue } from '../../generated/catalogue.ts';
import { dereferenced } from '../../generated/dereferenced.ts';
import { IDEMPOTENCY_ARGUMENT, mcpTools, mcpToolsets } from '../../generated/mcpTools.ts';
import { buildMcpTools, type ToolSource } from '../../scripts/mcp-tools.ts';
import { createAjv } from '../../server/ajv.cjs';
import { allToolDefinitions, toolByName, toolDefinitionsFor, toolsFor, toolsetNames } from '../../handlers/mcp/tools.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const SNAPSHOT = path.join(root, 'test/fixtures/mcp-tools.snapshot.json');

const listed = catalogue.filter((e) => e.listed);
const allIds = listed.map((e) => e.id);
const tool = (name: string) => {
  const def = toolByName(name);
  assert.ok(def, `no tool ${name}`);
  return def.tool;
};

describe('MCP tools (generated/mcpTools.ts, handlers/mcp/tools.ts)', () => {
  it('the full tools/list equals the committed snapshot (UPDATE_MCP_SNAPSHOT=1 to update it)', () => {
    const actual = JSON.stringify({ tools: toolsFor(allIds) }, null, 2) + '\n';
    if (process.env.UPDATE_MCP_SNAPSHOT) fs.writeFileSync(SNAPSHOT, actual);
    assert.ok(fs.existsSync(SNAPSHOT), `${SNAPSHOT} is missing: run with UPDATE_MCP_SNAPSHOT=1`);
    const expected = fs.readFileSync(SNAPSHOT, 'utf8');
    if (actual !== expected) {
      // Name the tools that changed rather than dumping 300 kB.
      const before = new Map((JSON.parse(expected) as { tools: Array<{ name: string }> }).tools.map((t) => [t.name, JSON.stringify(t)]));
      const after = new Map(toolsFor(allIds).map((t) => [t.name, JSON.stringify(t)]));
      const changed = [...new Set([...before.keys(), ...after.keys()])].filter((n) => before.get(n) !== after.get(n)).sort();
      assert.fail(`tools/list drifted from test/fixtures/mcp-tools.snapshot.json (changed, added or removed: ${changed.join(', ')}); review and update with UPDATE_MCP_SNAPSHOT=1`);
    }
  });

  it('has one tool per catalogued operation, sorted, with a name every client accepts', () => {
    assert.deepEqual(mcpTools.map((t) => t.operationId).sort(), [...allIds].sort());
    const names = mcpTools.map((t) => t.tool.name);
    assert.deepEqual(names, [...names].sort());
    assert.equal(new Set(names).size, names.length);
    for (const def of mcpTools) {
      assert.match(def.tool.name, /^[a-zA-Z0-9_-]{1,64}$/);
      assert.equal(def.tool.name, def.operationId.replace('.', '_'));
      assert.equal(def.namespace, def.operationId.split('.')[0]);
      assert.equal(def.kind, catalogue.find((e) => e.id === def.operationId)!.kind);
      assert.ok(def.tool.title.length > 0 && def.tool.description.length > 0, def.tool.name);
      assert.doesNotMatch(def.tool.description, /x-service-/);
      assert.equal(def.tool.annotations.title, def.tool.title);
    }
    assert.equal(tool('customers_UpdateSalesPipeline').title, 'Update a sales pipeline, optionally compare-and-set');
    assert.equal(toolByName('customers.UpdateSalesPipeline'), undefined);
    assert.equal(toolByName('discovery_ListOperations'), undefined); // platform endpoints are not tools
  });

  it('toolsets: one per namespace, described by its tag, covering every tool once', () => {
    assert.deepEqual(toolsetNames, [...new Set(listed.map((e) => e.namespace))].sort());
    assert.deepEqual(mcpToolsets.flatMap((s) => s.tools).sort(), mcpTools.map((t) => t.tool.name));
    for (const set of mcpToolsets) {
      assert.ok(set.description.length > 0, set.name);
      for (const name of set.tools) assert.equal(toolByName(name)!.namespace, set.name);
    }
  });

  it("every inputSchema and outputSchema is a self-contained object schema that Ajv compiles (draft-07 and 2020-12), and the document's examples pass", () => {
    const ajv = createAjv();
    const ajv2020 = new Ajv2020({ strict: true, allowUnionTypes: true });
    let requests = 0;
    let responses = 0;
    for (const def of mcpTools) {
      const { inputSchema, outputSchema, name } = def.tool;
      assert.equal(inputSchema.type, 'object', name);
      assert.equal(outputSchema.type, 'object', name);
      assert.equal(inputSchema.additionalProperties, false, name);
      const text = JSON.stringify([inputSchema, outputSchema]);
      assert.doesNotMatch(text, /"\$ref"|"x-[a-z-]+"|"nullable"|"example"/, name);
      const validateInput = ajv.compile(inputSchema);
      const validateOutput = ajv.compile(outputSchema);
      ajv2020.compile(inputSchema);
      ajv2020.compile(outputSchema);
      const op = dereferenced.paths[`/operations/${def.operationId}`]!.post!;
      const content = op.requestBody!.content['application/json']!;
      const examples = [content.example, ...Object.values((content.examples ?? {}) as Record<string, { value: unknown }>).map((e) => e.value)].filter((e) => e !== undefined);
      for (const example of examples) {
        const args = { ...(example as object), ...(def.kind === 'command' ? { [IDEMPOTENCY_ARGUMENT]: 'retry-1' } : {}) };
        assert.ok(validateInput(args), `${name} request example: ${JSON.stringify(validateInput.errors)}`);
        requests++;
      }
      const ok = op.responses['200']!.content!['application/json']!;
      if (ok.example !== undefined) {
        assert.ok(validateOutput(def.wrapsOutput ? { result: ok.example } : ok.example), `${name} response example: ${JSON.stringify(validateOutput.errors)}`);
        responses++;
      }
    }
    assert.ok(requests >= mcpTools.length && responses > 20, `${requests} request and ${responses} response examples checked`);
  });

  it('input = the request body fields (constraints kept), plus an optional idempotency_key on commands only', () => {
    const update = tool('customers_UpdateSalesPipeline').inputSchema as Record<string, any>;
    assert.deepEqual(Object.keys(update.properties), ['id', 'data', 'unset', 'expected', IDEMPOTENCY_ARGUMENT]);
    assert.deepEqual(update.required, ['id']);
    assert.deepEqual(update.properties.idempotency_key.minLength, 1);
    assert.deepEqual(update.properties.idempotency_key.maxLength, 200);
    assert.match(update.properties.idempotency_key.description, /without it the server derives one from the call so a retried call does not act twice/);
    const remind = tool('signing_RemindSigners').inputSchema as Record<string, any>;
    assert.equal(remind.properties.message.maxLength, 2000);
    for (const def of mcpTools) {
      const props = (def.tool.inputSchema as Record<string, any>).properties;
      assert.equal(IDEMPOTENCY_ARGUMENT in props, def.kind === 'command', def.tool.name);
      assert.ok(!((def.tool.inputSchema as Record<string, any>).required ?? []).includes(IDEMPOTENCY_ARGUMENT));
      assert.deepEqual(def.arguments.body, Object.keys(props).filter((k) => k !== IDEMPOTENCY_ARGUMENT));
      assert.deepEqual([def.arguments.path, def.arguments.query], [[], []]);
    }
    // nullable became a JSON Schema union type
    assert.match(JSON.stringify(tool('customers_CreateCompany').inputSchema), /"type":\["integer","null"\]/);
  });

  it('annotations: read-only exactly for queries', () => {
    for (const name of ['customers_GetDeal', 'customers_ListCompanies', 'analytics_GetSiteAnalyticsSummary', 'signing_VerifySignedDocument']) {
      assert.deepEqual(tool(name).annotations, { title: tool(name).title, readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false }, name);
    }
    for (const name of ['customers_CreateDeal', 'documents_CreateUpload', 'webhooks_PrepareWebhook']) assert.equal(tool(name).annotations.readOnlyHint, false, name);
    for (const def of mcpTools) assert.equal(def.tool.annotations.readOnlyHint, def.kind === 'query', def.tool.name);
  });

  it('annotations: destructive only for deletes, cancels and replacements (a replaced signer loses their links)', () => {
    for (const name of ['customers_DeleteDeal', 'customers_DeleteSalesPipeline', 'automation_DeleteRule', 'signing_CancelSigningRequest', 'signing_ReplaceRecipient']) assert.equal(tool(name).annotations.destructiveHint, true, name);
    for (const name of ['customers_UpdateDeal', 'automation_UpdateRule', 'signing_RemindSigners', 'webhooks_ReplayWebhookEvent', 'customers_CreateCompany', 'customers_GetDeal']) {
      assert.equal(tool(name).annotations.destructiveHint, false, name);
    }
    const destructive = mcpTools.filter((t) => t.tool.annotations.destructiveHint).map((t) => t.tool.name);
    assert.deepEqual(destructive, mcpTools.filter((t) => t.kind === 'command' && /_(Delete|Cancel|Replace)[A-Z]/.test(t.tool.name)).map((t) => t.tool.name));
    assert.ok(destructive.length >= 5);
  });

  it('annotations: idempotent for queries and for updates, upserts, deletes, cancels and completions; not for creating or sending', () => {
    for (const name of ['customers_UpdateSalesPipeline', 'customers_UpsertCompany', 'customers_DeleteCompany', 'signing_CancelSigningRequest', 'signing_UpdateSigningDeadline', 'documents_CompleteUpload', 'customers_GetCompany']) {
      assert.equal(tool(name).annotations.idempotentHint, true, name);
    }
    for (const name of ['customers_CreateDeal', 'signing_RequestFileSignatures', 'signing_RemindSigners', 'webhooks_ReplayWebhookEvent', 'webhooks_RecoverWebhookEvents', 'webhooks_PrepareWebhook', 'documents_CreateUpload']) {
      assert.equal(tool(name).annotations.idempotentHint, false, name);
    }
  });

  it('annotations: open-world only where mail leaves the service (x-service-mcp.open_world)', () => {
    assert.deepEqual(mcpTools.filter((t) => t.tool.annotations.openWorldHint).map((t) => t.tool.name), ['signing_RemindSigners', 'signing_ReplaceRecipient', 'signing_RequestFileSignatures', 'signing_SendTemplate']);
    for (const name of ['signing_CancelSigningRequest', 'webhooks_PrepareWebhook', 'customers_CreateDeal']) assert.equal(tool(name).annotations.openWorldHint, false, name);
  });

  it('toolsFor picks by grants, toolsets and read-only, deterministically', () => {
    const grants = ['signing.RemindSigners', 'customers.GetDeal', 'customers.DeleteDeal', 'signing.GetSigningRequest', 'discovery.ListOperations', 'nope.Unknown'];
    const names = (list: Array<{ name: string }>) => list.map((t) => t.name);
    assert.deepEqual(names(toolsFor(grants)), ['customers_DeleteDeal', 'customers_GetDeal', 'signing_GetSigningRequest', 'signing_RemindSigners']);
    assert.deepEqual(JSON.stringify(toolsFor([...grants].reverse())), JSON.stringify(toolsFor(grants)));
    assert.deepEqual(names(toolsFor(grants, { toolsets: ['signing'] })), ['signing_GetSigningRequest', 'signing_RemindSigners']);
    assert.deepEqual(names(toolsFor(grants, { readOnly: true })), ['customers_GetDeal', 'signing_GetSigningRequest']);
    assert.deepEqual(names(toolsFor(grants, { toolsets: ['customers'], readOnly: true })), ['customers_GetDeal']);
    assert.deepEqual(toolsFor(grants, { toolsets: ['analytics'] }), []); // a toolset narrows, never widens
    assert.deepEqual(toolsFor(grants, { toolsets: [] }), []);
    assert.deepEqual(toolsFor([]), []);
    assert.throws(() => toolsFor(grants, { toolsets: ['customer'] }), /unknown toolset "customer"/);
    assert.equal(toolsFor(allIds).length, allToolDefinitions.length);
    assert.equal(toolsFor(allIds, { readOnly: true }).length, listed.filter((e) => e.kind === 'query').length);
    assert.deepEqual(toolDefinitionsFor(['customers.GetDeal']).map((d) => d.operationId), ['customers.GetDeal']);
    // The same grants give the same bytes whatever else the catalogue holds.
    assert.equal(JSON.stringify(toolsFor(['customers.GetDeal'])), JSON.stringify([tool('customers_GetDeal')]));
  });
});

describe('MCP tool generation refuses what clients cannot take (scripts/mcp-tools.ts)', () => {
  const obj = (properties: Record<string, unknown>, required: string[] = []) => ({ type: 'object', additionalProperties: false, required, properties });
  function build(ops: Array<{ id: string; kind?: 'query' | 'command'; op?: Record<string, unknown>; body?: unknown; response?: unknown }>) {
    const problems: string[] = [];
    const entries: ToolSource[] = ops.map(({ id, kind = 'query' }) => {
      const [namespace = '', name = ''] = id.split('.');
      return { id, namespace, name, method: 'post', path: `/operations/${id}`, kind, listed: true };
    });
    const doc = {
      tags: [{ name: 'things', description: 'Things.' }],
      paths: Object.fromEntries(ops.map(({ id, kind = 'query', op, body, response }) => [`/operations/${id}`, {
        post: {
          operationId: id, summary: 'Do it', description: 'Does it.', 'x-service-kind': kind,
          parameters: kind === 'command' ? [{ name: 'Idempotency-Key', in: 'header', required: true, schema: { type: 'string' } }] : [],
          requestBody: { required: true, content: { 'application/json': { schema: body ?? obj({ id: { type: 'string', maxLength: 10 } }, ['id']) } } },
          responses: { 200: { description: 'ok', content: { 'application/json': { schema: response ?? obj({ ok: { type: 'boolean' } }) } } } },
          ...op,
        },
      }])),
    };
    const out = buildMcpTools(doc as never, entries, (where, what) => problems.push(`${where}: ${what}`));
    return { ...out, problems };
  }

  it('builds a valid operation without problems, wrapping a non-object response and translating nullable', () => {
    const { tools, toolsets, problems } = build([{ id: 'things.GetThing', response: { type: 'array', items: { type: 'string', nullable: true } } }]);
    assert.deepEqual(problems, []);
    assert.equal(tools[0]!.wrapsOutput, true);
    assert.deepEqual(tools[0]!.tool.outputSchema, { type: 'object', properties: { result: { type: 'array', items: { type: ['string', 'null'] } } }, required: ['result'], additionalProperties: false });
    assert.deepEqual(toolsets, [{ name: 'things', description: 'Things.', tools: ['things_GetThing'] }]);
  });

  it('refuses a name clash between a parameter and a body field, and with idempotency_key', () => {
    const clash = build([{ id: 'things.GetThing', op: { parameters: [{ name: 'id', in: 'query', schema: { type: 'string' } }] } }]);
    assert.match(clash.problems.join('\n'), /argument "id" comes from the request body and from another part/);
    const key = build([{ id: 'things.UpdateThing', kind: 'command', body: obj({ idempotency_key: { type: 'string' } }) }]);
    assert.match(key.problems.join('\n'), /argument "idempotency_key" comes from the Idempotency-Key header/);
  });

  it('refuses a name that is too long or collides, a recursive schema, an unknown command verb, x-service jargon, and an unknown x-service-mcp field', () => {
    assert.match(build([{ id: `things.Get${'X'.repeat(60)}` }]).problems.join('\n'), /does not match/);
    assert.match(build([{ id: 'things.GetThing' }, { id: 'things.GetThing' }]).problems.join('\n'), /is also the name of things\.GetThing/);
    assert.match(build([{ id: 'things.GetThing', body: obj({ child: { $ref: '#/components/schemas/Thing' } }) }]).problems.join('\n'), /recursive schema/);
    assert.match(build([{ id: 'things.FrobThing', kind: 'command' }]).problems.join('\n'), /command verb "Frob" is not in COMMAND_VERBS/);
    assert.match(build([{ id: 'things.GetThing', op: { description: 'See `x-service-resource`.' } }]).problems.join('\n'), /mentions an x-service-\* field/);
    assert.match(build([{ id: 'things.GetThing', op: { 'x-service-mcp': { open_world: true } } }]).problems.join('\n'), /only a command sends mail/);
    assert.match(build([{ id: 'things.UpdateThing', kind: 'command', op: { 'x-service-mcp': { destructive: true } } }]).problems.join('\n'), /x-service-mcp\.destructive is not a known field/);
  });
});
