/**
 * A connection's tool listing (handlers/mcp/listing.ts): the compact listing stays within 30 tools and
 * 10,000 o200k tokens for every grant a connection can have, and reaches every tool (search_tools,
 * describe_tool, call_tool); `full` lists every tool as generated. Destructive tools ask the person
 * through MCP elicitation when the client can show one (2026-07-28 input_required), and run only when
 * allowed. With the SDK's own client, on both databases.
 */
import assert from 'node:assert/strict';
import { encode } from 'gpt-tokenizer/encoding/o200k_base';
import type { Client } from '@modelcontextprotocol/client';
import { memberOperations } from '../../handlers/mcp/connections.ts';
import { COMPACT_MAX_TOKENS, COMPACT_MAX_TOOLS, compactListing, firstSentence, leanSchema, META_TOOLS } from '../../handlers/mcp/listing.ts';
import { allToolDefinitions, toolDefinitionsFor, toolsetNames } from '../../handlers/mcp/tools.ts';
import { acme } from '../support/fixtures.ts';
import { forEachDatabase, type TestService } from '../support/service.ts';
import { connectClient, type Era, insertConnection, mintAccessToken } from './tokens.ts';

const tokensOf = (tools: unknown) => encode(JSON.stringify({ tools })).length;
const textOf = (result: { content?: unknown }) => JSON.parse((result.content as Array<{ type: string; text: string }>)[0]!.text) as Record<string, any>;

describe('compact tool listing (pure)', () => {
  const every = allToolDefinitions.map((d) => d.operationId);
  const grants: Array<[string, string[], { toolsets?: string[]; readOnly?: boolean }]> = [
    ['every operation', every, {}],
    ['every operation, read only', every, { readOnly: true }],
    ...toolsetNames.map((t): [string, string[], { toolsets: string[] }] => [`toolset ${t}`, every, { toolsets: [t] }]),
    ...(['owner', 'admin', 'member'] as const).map((role): [string, string[], object] => [`personal ${role}`, memberOperations(role), {}]),
  ];

  for (const [label, operations, options] of grants) {
    it(`${label}: at most ${COMPACT_MAX_TOOLS} tools and ${COMPACT_MAX_TOKENS.toLocaleString('en-US')} tokens, meta tools first`, () => {
      const defs = toolDefinitionsFor(operations, options);
      const listed = compactListing(defs, [...new Set(defs.map((d) => d.namespace))]);
      assert.ok(listed.length <= COMPACT_MAX_TOOLS, `${listed.length} tools`);
      assert.ok(tokensOf(listed) <= COMPACT_MAX_TOKENS, `${tokensOf(listed)} tokens`);
      assert.deepEqual(listed.slice(0, 3).map((t) => t.name), META_TOOLS);
      // Each listed tool is one of the connection's, lean: no output schema, no prose in its input schema.
      const names = new Set(defs.map((d) => d.tool.name));
      for (const t of listed.slice(3)) {
        assert.ok(names.has(t.name), t.name);
        assert.equal(t.outputSchema, undefined);
        assert.doesNotMatch(JSON.stringify(t.inputSchema), /"description":/);
      }
      // A small grant lists all of its tools directly.
      if (defs.length <= 10) assert.equal(listed.length, defs.length + 3);
    });
  }

  it('keeps the full grant lean: far smaller than the full listing', () => {
    const defs = toolDefinitionsFor(every);
    const full = tokensOf(defs.map((d) => d.tool));
    const compact = tokensOf(compactListing(defs, toolsetNames));
    assert.ok(full > 5 * compact, `full ${full} vs compact ${compact}`);
  });

  it('strips prose from schemas but keeps properties named like keywords, enums and constraints', () => {
    const schema = {
      type: 'object',
      description: 'x',
      properties: { title: { type: 'string', description: 'the title', maxLength: 5 }, description: { type: 'string', enum: ['a', 'b'], examples: ['a'] } },
      required: ['title'],
    };
    assert.deepEqual(leanSchema(schema), { type: 'object', properties: { title: { type: 'string', maxLength: 5 }, description: { type: 'string', enum: ['a', 'b'] } }, required: ['title'] });
    assert.equal(firstSentence('Lists the deals. More here.\n\nAnd more.'), 'Lists the deals.');
    assert.equal(firstSentence('e.g. a list of 1.5 things'), 'e.g. a list of 1.5 things');
  });
});

forEachDatabase('MCP tool listing and confirmations', (svc: () => TestService) => {
  let ws: Awaited<ReturnType<TestService['apply']>>;
  let compactToken: string;
  let fullToken: string;
  before(async () => {
    ws = await svc().apply(acme());
    // Olga (owner) approves every toolset with the default (compact) listing, and once more in full.
    const ops = memberOperations('owner');
    const compact = await insertConnection(svc(), { workspaceId: ws.workspace_id, createdBy: ws.members.olga!, access: 'personal', operations: ops, toolsets: [...toolsetNames], toolListing: 'compact' });
    const full = await insertConnection(svc(), { workspaceId: ws.workspace_id, createdBy: ws.members.olga!, access: 'personal', operations: ops, toolsets: [...toolsetNames], toolListing: 'full' });
    compactToken = await mintAccessToken(svc(), compact);
    fullToken = await mintAccessToken(svc(), full);
  });

  for (const era of ['legacy', 'modern'] as Era[]) {
    describe(`${era} client`, () => {
      let client: Client;
      before(async () => {
        client = await connectClient(svc(), compactToken, era);
      });
      after(() => client.close());

      it('lists at most 30 tools in at most 10,000 tokens; a full connection lists every tool in full', async () => {
        const { tools } = await client.listTools();
        assert.ok(tools.length <= 30, String(tools.length));
        assert.ok(tokensOf(tools) <= 10_000, String(tokensOf(tools)));
        assert.deepEqual(tools.slice(0, 3).map((t) => t.name), ['search_tools', 'describe_tool', 'call_tool']);
        const fullClient = await connectClient(svc(), fullToken, era);
        const all = (await fullClient.listTools()).tools;
        await fullClient.close();
        assert.ok(all.length > tools.length, `${all.length} vs ${tools.length}`);
        assert.ok(all.every((t) => t.outputSchema), 'a full listing has output schemas');
        assert.ok(tokensOf(all) > 40_000, String(tokensOf(all)));
      });

      it('finds, describes and calls a tool the list leaves out', async () => {
        const listed = new Set((await client.listTools()).tools.map((t) => t.name));
        assert.ok(!listed.has('signing_ListTemplates'), 'a late tool is not listed');
        const found = await client.callTool({ name: 'search_tools', arguments: { query: 'template', toolset: 'signing' } });
        assert.equal(found.isError, undefined, JSON.stringify(found));
        const names = (found.structuredContent as { tools: Array<{ name: string; listed: boolean; kind: string }> }).tools;
        const list = names.find((t) => t.name === 'signing_ListTemplates');
        assert.deepEqual({ listed: list?.listed, kind: list?.kind }, { listed: false, kind: 'query' });
        assert.ok(names.every((t) => t.name.startsWith('signing_')));

        const described = await client.callTool({ name: 'describe_tool', arguments: { name: 'customers_UpdateDeal' } });
        const tool = described.structuredContent as { name: string; description: string; inputSchema: unknown; outputSchema: unknown };
        assert.equal(tool.name, 'customers_UpdateDeal');
        assert.ok(tool.outputSchema && tool.description.length > 200, 'describe_tool gives the full definition');

        const called = await client.callTool({ name: 'call_tool', arguments: { name: 'signing_ListTemplates', arguments: {} } });
        assert.equal(called.isError, undefined, JSON.stringify(called));
        assert.ok(Array.isArray(textOf(called).items));
        // The same tool by its own name works as well.
        const direct = await client.callTool({ name: 'signing_ListTemplates', arguments: {} });
        assert.equal(direct.isError, undefined);
      });

      it('refuses meta-tool mistakes as tool results with the API error body', async () => {
        const unknown = await client.callTool({ name: 'call_tool', arguments: { name: 'customers_Nothing', arguments: {} } });
        assert.equal(unknown.isError, true);
        assert.equal(textOf(unknown).error, 'not_found');
        const bad = await client.callTool({ name: 'call_tool', arguments: { name: 'customers_ListDeals', arguments: [1] } });
        assert.equal(textOf(bad).error, 'invalid_input');
        const set = await client.callTool({ name: 'search_tools', arguments: { toolset: 'nope' } });
        assert.equal(textOf(set).error, 'invalid_input');
        // The called tool's own refusal comes through unchanged.
        const missing = await client.callTool({ name: 'call_tool', arguments: { name: 'customers_GetCompany', arguments: { id: 'co_nothere' } } });
        assert.equal(textOf(missing).error, 'not_found');
        assert.match(textOf(missing).request_id, /\S/);
      });
    });
  }

  describe('destructive tools ask the person (MCP elicitation, 2026-07-28)', () => {
    const asking = async (answer: 'accept' | 'decline' | 'untick') => {
      const client = await connectClient(svc(), compactToken, 'modern', {}, { capabilities: { elicitation: { form: {} } } });
      const asked: string[] = [];
      client.setRequestHandler('elicitation/create', async (request) => {
        asked.push((request.params as { message: string }).message);
        if (answer === 'decline') return { action: 'decline' };
        return { action: 'accept', content: { confirm: answer === 'accept' } };
      });
      return { client, asked };
    };
    const newCompany = async (client: Client, name: string) => {
      const made = await client.callTool({ name: 'customers_CreateCompany', arguments: { data: { name } } });
      assert.equal(made.isError, undefined, JSON.stringify(made));
      return (made.structuredContent as { item: { id: string } }).item.id;
    };

    it('runs a delete the person allows, naming the tool and its arguments in the question', async () => {
      const { client, asked } = await asking('accept');
      const id = await newCompany(client, 'Doomed Ltd');
      const deleted = await client.callTool({ name: 'customers_DeleteCompany', arguments: { id } });
      assert.equal(deleted.isError, undefined, JSON.stringify(deleted));
      assert.equal(asked.length, 1, 'asked once; the create did not ask');
      assert.match(asked[0]!, /customers\.DeleteCompany/);
      assert.ok(asked[0]!.includes(id));
      const gone = await client.callTool({ name: 'customers_GetCompany', arguments: { id } });
      assert.equal(textOf(gone).error, 'not_found');
      await client.close();
    });

    for (const answer of ['decline', 'untick'] as const) {
      it(`does nothing when the person ${answer === 'decline' ? 'declines' : 'does not tick the box'}, also through call_tool`, async () => {
        const { client, asked } = await asking(answer);
        const id = await newCompany(client, `Kept ${answer}`);
        for (const call of [{ name: 'customers_DeleteCompany', arguments: { id } }, { name: 'call_tool', arguments: { name: 'customers_DeleteCompany', arguments: { id } } }]) {
          const refused = await client.callTool(call);
          assert.equal(refused.isError, true);
          assert.equal(textOf(refused).error, 'not_confirmed');
        }
        assert.equal(asked.length, 2);
        const kept = await client.callTool({ name: 'customers_GetCompany', arguments: { id } });
        assert.equal(kept.isError, undefined, 'the company is still there');
        await client.close();
      });
    }

    it('does not ask a client that cannot show a form (it runs, as the client approved the call itself)', async () => {
      const client = await connectClient(svc(), compactToken, 'modern');
      const id = await newCompany(client, 'Plain delete');
      const deleted = await client.callTool({ name: 'customers_DeleteCompany', arguments: { id } });
      assert.equal(deleted.isError, undefined, JSON.stringify(deleted));
      await client.close();
    });
  });
});
