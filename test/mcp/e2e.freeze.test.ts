/**
 * Contract freeze: a connection's tool contract is what it was approved with. An operation added to
 * the catalogue later never widens it, and its `tools/list` stays byte-identical.
 *
 * The extended catalogue is built for real, without touching generated/: the document
 * (generated/dereferenced.ts) gets one more operation (`customers.GetDealForecast`, a copy of
 * `customers.GetDeal` under a new id), the generator (scripts/mcp-tools.ts `buildMcpTools` and
 * `mcpToolsModule`, what `npm run generate` runs) writes the extended generated/mcpTools.ts into a
 * temporary folder, next to a copy of handlers/mcp/tools.ts, which is then imported: the same selection
 * code on the extended catalogue. The old connections' answers (a full grant frozen before the
 * addition, a personal connection with toolsets and a read-only one) are compared byte for byte; a
 * connection approved after the addition with every operation does see the new tool (so the
 * extension is real).
 *
 * Then the service: connections written as the consent page writes them (frozen operations, toolsets,
 * read-only) answer `tools/list` over /v1/mcp with exactly the bytes the extended catalogue's toolsFor
 * gives for their frozen operations (both revisions), on both databases.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { catalogue } from '../../generated/catalogue.ts';
import { dereferenced } from '../../generated/dereferenced.ts';
import { buildMcpTools, mcpToolsModule, type ToolSource } from '../../scripts/mcp-tools.ts';
import * as current from '../../handlers/mcp/tools.ts';
import { acme } from '../support/fixtures.ts';
import { databases, startTestService, type TestService } from '../support/service.ts';
import { freePort } from '../support/smtp.ts';
import { mintConnection } from './e2e.tokens.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const NEW_ID = 'customers.GetDealForecast';
const NEW_TOOL = 'customers_GetDealForecast';

type Tools = typeof current;

/** The catalogue with one more operation, generated into a temporary tree; answers its tools.ts. */
async function extendedCatalogue(dir: string): Promise<Tools> {
  const doc = structuredClone(dereferenced) as unknown as { paths: Record<string, Record<string, Record<string, unknown>>> };
  const from = catalogue.find((e) => e.id === 'customers.GetDeal')!;
  const op = structuredClone(doc.paths[from.path]![from.method]!);
  op.operationId = NEW_ID;
  op.summary = 'Forecast of one deal';
  op.description = 'A deal with its forecast (added to the catalogue after the connections of this test were approved).';
  const newPath = `/operations/${NEW_ID}`;
  doc.paths[newPath] = { [from.method]: op };
  const entries: ToolSource[] = [...catalogue.map((e) => ({ ...e })), { ...from, id: NEW_ID, name: 'GetDealForecast', path: newPath, listed: true }];
  const problems: string[] = [];
  const built = buildMcpTools(doc as never, entries, (where, what) => problems.push(`${where}: ${what}`));
  assert.deepEqual(problems, []);
  assert.ok(built.tools.some((t) => t.operationId === NEW_ID), 'the generator made no tool for the added operation');
  fs.mkdirSync(path.join(dir, 'generated'), { recursive: true });
  fs.mkdirSync(path.join(dir, 'handlers', 'mcp'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'generated', 'mcpTools.ts'), '// extended catalogue (test)\n' + mcpToolsModule(built.tools, built.toolsets));
  const source = fs.readFileSync(path.join(root, 'handlers', 'mcp', 'tools.ts'), 'utf8');
  // The copy must need nothing but the generated module, or it would not be the same code on another catalogue.
  const imports = [...source.matchAll(/from '([^']+)'/g)].map((m) => m[1]);
  assert.deepEqual([...new Set(imports)], ['../../generated/mcpTools.ts'], 'handlers/mcp/tools.ts imports more than generated/mcpTools.ts: extend this test');
  fs.writeFileSync(path.join(dir, 'handlers', 'mcp', 'tools.ts'), source);
  return (await import(pathToFileURL(path.join(dir, 'handlers', 'mcp', 'tools.ts')).href)) as Tools;
}

describe('MCP contract freeze: an operation added to the catalogue never changes an approved connection', () => {
  const everyBefore = current.allToolDefinitions.map((d) => d.operationId);
  let dir: string;
  let extended: Tools;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wsops-mcp-freeze-'));
    extended = await extendedCatalogue(dir);
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('the extended catalogue has the new tool, in the customers toolset, and every old tool unchanged', () => {
    assert.equal(extended.allToolDefinitions.length, current.allToolDefinitions.length + 1);
    assert.ok(extended.toolByName(NEW_TOOL));
    assert.equal(current.toolByName(NEW_TOOL), undefined);
    for (const def of current.allToolDefinitions) assert.equal(JSON.stringify(extended.toolByName(def.tool.name)), JSON.stringify(def));
  });

  const connections: Array<{ name: string; operations: () => string[]; options: { toolsets?: string[]; readOnly?: boolean } }> = [
    { name: 'a full grant approved before the addition', operations: () => everyBefore, options: {} },
    { name: 'a full grant narrowed to the customers toolset', operations: () => everyBefore, options: { toolsets: ['customers'] } },
    { name: 'a read-only full grant', operations: () => everyBefore, options: { readOnly: true } },
    {
      name: 'a workspace connection granted customers.* when it was approved (the grant expanded then, frozen)',
      operations: () => everyBefore.filter((id) => id.startsWith('customers.')),
      options: { toolsets: ['customers', 'workspace'] },
    },
  ];
  for (const c of connections) {
    it(`${c.name}: tools/list byte-identical`, () => {
      const before = JSON.stringify({ tools: current.toolsFor(c.operations(), c.options) });
      const after = JSON.stringify({ tools: extended.toolsFor(c.operations(), c.options) });
      assert.ok(before.length > 100);
      assert.equal(after, before);
      assert.ok(!after.includes(NEW_TOOL));
    });
  }

  it('a connection approved after the addition with every operation sees the new tool (read-only too: it is a query)', () => {
    const every = extended.allToolDefinitions.map((d) => d.operationId);
    assert.ok(extended.toolsFor(every).some((t) => t.name === NEW_TOOL));
    assert.ok(extended.toolsFor(every, { readOnly: true, toolsets: ['customers'] }).some((t) => t.name === NEW_TOOL));
  });
});

for (const database of databases) {
  describe(`MCP contract freeze at the service: tools/list of approved connections over /v1/mcp [${database.name}]`, function () {
    this.timeout(60_000);
    let svc: TestService;
    let dir: string;
    let extended: Tools;
    before(async () => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wsops-mcp-freeze-'));
      extended = await extendedCatalogue(dir);
      const port = await freePort();
      svc = await startTestService(database.url(), { port, publicUrl: `http://localhost:${port}` });
    });
    after(async () => {
      await svc?.close();
      fs.rmSync(dir, { recursive: true, force: true });
    });

    /** The `tools` of a tools/list answer, as the bytes the server sent for them. */
    async function listed(token: string, version: '2025-11-25' | '2026-07-28'): Promise<string> {
      const modern = version === '2026-07-28';
      const res = await fetch(`${svc.config.publicUrl}/v1/mcp`, {
        method: 'POST',
        headers: {
          Authorization: `Bearer ${token}`,
          'Content-Type': 'application/json',
          Accept: 'application/json, text/event-stream',
          'MCP-Protocol-Version': version,
          ...(modern ? { 'Mcp-Method': 'tools/list' } : {}),
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'tools/list',
          params: modern ? { _meta: { 'io.modelcontextprotocol/protocolVersion': version, 'io.modelcontextprotocol/clientCapabilities': {} } } : {},
        }),
      });
      const text = await res.text();
      assert.equal(res.status, 200, text);
      const json = text.trimStart().startsWith('{') ? text : /^data: (.*)$/m.exec(text)![1]!;
      return JSON.stringify((JSON.parse(json) as { result: { tools: unknown[] } }).result.tools);
    }

    const cases: Array<{ name: string; spec: Parameters<typeof mintConnection>[2]; options: { toolsets?: string[]; readOnly?: boolean } }> = [
      { name: 'personal, the owner, every toolset', spec: { access: 'personal', member: 'olga', memberRole: 'owner', operations: [], toolsets: [...current.toolsetNames] }, options: { toolsets: [...current.toolsetNames] } },
      { name: 'personal, customers only, read-only', spec: { access: 'personal', member: 'olga', memberRole: 'owner', operations: [], toolsets: ['customers'], readOnly: true }, options: { toolsets: ['customers'], readOnly: true } },
      { name: 'workspace, customers.* frozen at approval', spec: { access: 'workspace', operations: [], toolsets: ['customers'], resources: { 'core:Deal': ['read', 'write'], 'core:Company': ['read', 'write'], 'core:SalesPipeline': ['read', 'write'] } }, options: { toolsets: ['customers'] } },
    ];
    for (const c of cases) {
      it(`${c.name}: the served tools/list is byte for byte the extended catalogue's toolsFor of its frozen operations, without the new tool`, async () => {
        const ws = await svc.apply(acme());
        // The operations as the consent page freezes them: what toolsFor selects from the catalogue of that day.
        const frozen = current.toolDefinitionsFor(current.allToolDefinitions.map((d) => d.operationId), c.options).map((d) => d.operationId);
        const { token } = await mintConnection(svc, ws, { ...c.spec, operations: frozen });
        const expected = JSON.stringify(extended.toolsFor(frozen, c.options));
        for (const version of ['2025-11-25', '2026-07-28'] as const) {
          const served = await listed(token, version);
          assert.equal(served, expected, `tools/list over ${version}`);
          assert.ok(!served.includes(NEW_TOOL));
        }
      });
    }
  });
}
