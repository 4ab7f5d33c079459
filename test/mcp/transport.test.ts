/**
 * `/v1/mcp` with the SDK's own client (`@modelcontextprotocol/client` 2.4.0) in both eras (2025-11-25
 * with initialize, and pinned to 2026-07-28) and with raw requests: discovery, tools per connection,
 * queries and commands through the same execution path as HTTP, refusals as tool results, idempotency
 * with and without idempotency_key, act-as, Host and Origin, methods, protocol versions, revocation,
 * the request log and last use. Connections and tokens are rows (test/mcp/tokens.ts), as the consent
 * page and the authorization server write them.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { Client } from '@modelcontextprotocol/client';
import { disableMember } from '../../server/admin.ts';
import { derivedIdempotencyKey } from '../../handlers/mcp/server.ts';
import { acme } from '../support/fixtures.ts';
import { forEachDatabase, type TestService } from '../support/service.ts';
import { connectClient, type Era, insertConnection, mcpUrl, mintAccessToken, modern, rawPost } from './tokens.ts';

type Workspace = Awaited<ReturnType<TestService['apply']>>;

const PERSONAL_OPS = ['customers.CreateCompany', 'customers.GetCompany', 'customers.ListCompanies', 'customers.UpdateCompany', 'workspace.ListBundles'];

/** A raw request with any Host header (fetch does not let a caller set Host). */
function rawHttp(svc: TestService, options: { method?: string; headers?: Record<string, string>; body?: string }): Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }> {
  const url = new URL(mcpUrl(svc));
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: url.hostname, port: url.port, path: url.pathname, method: options.method ?? 'POST', headers: options.headers ?? {} },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text }));
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

const initialize = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};

/** The JSON body of a tool result's text block. */
const textOf = (result: { content?: unknown }) => JSON.parse((result.content as Array<{ type: string; text: string }>)[0]!.text) as Record<string, any>;

forEachDatabase(
  'MCP endpoint /v1/mcp',
  (svc) => {
    let ws: Workspace;
    let personal: string;
    let personalToken: string;
    before(async () => {
      ws = await svc().apply(acme());
      personal = await insertConnection(svc(), { workspaceId: ws.workspace_id, createdBy: ws.members.ada!, access: 'personal', operations: PERSONAL_OPS });
      personalToken = await mintAccessToken(svc(), personal);
    });

    it('serves the protected resource metadata at both well-known addresses (RFC 9728)', async () => {
      for (const path of ['/.well-known/oauth-protected-resource/v1/mcp', '/.well-known/oauth-protected-resource']) {
        const res = await fetch(`${svc().origin}${path}`);
        assert.equal(res.status, 200, path);
        assert.equal(res.headers.get('access-control-allow-origin'), '*');
        assert.match(res.headers.get('cache-control') ?? '', /max-age=300/);
        assert.deepEqual(await res.json(), {
          resource: 'http://localhost:8080/v1/mcp',
          authorization_servers: ['http://localhost:8080'],
          scopes_supported: ['mcp'],
          bearer_methods_supported: ['header'],
          dpop_signing_alg_values_supported: ['ES256', 'Ed25519', 'EdDSA'],
          dpop_bound_access_tokens_required: false,
          resource_name: 'Workspace Operations',
          resource_documentation: 'http://localhost:8080/docs',
        });
      }
    });

    for (const era of ['legacy', 'modern'] as const satisfies readonly Era[]) {
      describe(`SDK client, ${era === 'legacy' ? '2025-11-25 (initialize)' : 'pinned to 2026-07-28'}`, () => {
        let client: Client;
        before(async () => {
          client = await connectClient(svc(), personalToken, era);
        });
        after(async () => {
          await client.close();
        });

        it('connects in its era and lists exactly the connection\'s tools', async () => {
          assert.equal(client.getNegotiatedProtocolVersion?.(), era === 'legacy' ? '2025-11-25' : '2026-07-28');
          const { tools } = await client.listTools();
          assert.deepEqual(
            tools.map((t) => t.name),
            ['customers_CreateCompany', 'customers_GetCompany', 'customers_ListCompanies', 'customers_UpdateCompany', 'workspace_ListBundles'],
          );
          const create = tools.find((t) => t.name === 'customers_CreateCompany')!;
          assert.equal(create.annotations?.readOnlyHint, false);
          assert.ok((create.inputSchema.properties as Record<string, unknown>).idempotency_key, 'commands take idempotency_key');
          assert.equal(tools.find((t) => t.name === 'customers_GetCompany')!.annotations?.readOnlyHint, true);
        });

        it('runs a command and a query as the member (structuredContent equals the text block)', async () => {
          const created = await client.callTool({ name: 'customers_CreateCompany', arguments: { data: { name: `Globex ${era}`, domain: `globex-${era}.com` } } });
          assert.equal(created.isError, undefined, JSON.stringify(created));
          const item = (created.structuredContent as { item: { id: string; created_by: string; data: { name: string } } }).item;
          assert.deepEqual(textOf(created), created.structuredContent);
          assert.equal(item.created_by, ws.members.ada, 'a personal connection acts as its member');
          assert.equal(item.data.name, `Globex ${era}`);
          const read = await client.callTool({ name: 'customers_GetCompany', arguments: { id: item.id } });
          assert.equal((read.structuredContent as { item: { id: string } }).item.id, item.id);
          // The same record over HTTP, with a key.
          const http = await svc().client(ws.keys.sales!.secret).customers.GetCompany({ id: item.id });
          assert.equal(http.response.status, 200);
          assert.equal(http.data!.item.data.name, `Globex ${era}`);
        });

        it('answers a refused call with isError and the error body ({error, message, request_id}), no structuredContent', async () => {
          const missing = await client.callTool({ name: 'customers_GetCompany', arguments: { id: 'co_nothere' } });
          assert.equal(missing.isError, true);
          assert.equal(missing.structuredContent, undefined);
          const body = textOf(missing);
          assert.deepEqual(Object.keys(body).sort(), ['error', 'message', 'request_id']);
          assert.equal(body.error, 'not_found');
          const bad = await client.callTool({ name: 'customers_CreateCompany', arguments: { data: { name: '' } } });
          assert.equal(bad.isError, true);
          assert.equal(textOf(bad).error, 'invalid_input');
          const unknownArg = await client.callTool({ name: 'customers_GetCompany', arguments: { id: 'co_x', idempotency_key: 'k' } });
          assert.equal(textOf(unknownArg).error, 'invalid_input', 'a query takes no idempotency_key');
        });

        it('refuses a tool outside the connection with JSON-RPC -32602 (not a tool result)', async () => {
          await assert.rejects(
            client.callTool({ name: 'customers_DeleteCompany', arguments: { id: 'co_x' } }),
            (err: { code?: number; message?: string }) => err.code === -32602 && /Unknown tool: customers_DeleteCompany/.test(err.message ?? ''),
          );
          await assert.rejects(client.callTool({ name: 'no_such_tool', arguments: {} }), (err: { code?: number }) => err.code === -32602);
        });

        it('replays a command retried without idempotency_key (derived key), and with the same idempotency_key', async () => {
          const args = { data: { name: `Initech ${era}`, domain: `initech-${era}.com` } };
          const first = await client.callTool({ name: 'customers_CreateCompany', arguments: args });
          const again = await client.callTool({ name: 'customers_CreateCompany', arguments: args });
          assert.deepEqual(again.structuredContent, first.structuredContent, 'the same call replays the first answer');
          const keyed = { data: { name: `Hooli ${era}`, domain: `hooli-${era}.com` }, idempotency_key: `k-${era}-1` };
          const k1 = await client.callTool({ name: 'customers_CreateCompany', arguments: keyed });
          const k2 = await client.callTool({ name: 'customers_CreateCompany', arguments: keyed });
          assert.deepEqual(k2.structuredContent, k1.structuredContent);
          // Another key does it again: the domain is now taken (409), so nothing twice by accident.
          const k3 = await client.callTool({ name: 'customers_CreateCompany', arguments: { ...keyed, idempotency_key: `k-${era}-2` } });
          assert.equal(k3.isError, true);
          assert.equal(textOf(k3).error, 'conflict');
          // The same key with other arguments is refused as over HTTP.
          const k4 = await client.callTool({ name: 'customers_CreateCompany', arguments: { ...keyed, data: { name: 'Other' } } });
          assert.equal(textOf(k4).error, 'invalid_input');
          const list = await svc().client(ws.keys.sales!.secret).customers.ListCompanies({ limit: 100 });
          const names = list.data!.items.map((c) => c.data.name);
          assert.equal(names.filter((n) => n === `Initech ${era}`).length, 1);
          assert.equal(names.filter((n) => n === `Hooli ${era}`).length, 1);
          // The receipt is stored under the derived key, in the connection's and member's scope.
          const key = derivedIdempotencyKey('customers_CreateCompany', args);
          assert.match(key, /^mcp-[A-Za-z0-9_-]{43}$/);
          const receipt = await svc().db.sql.one<{ scope: string }>(`SELECT scope FROM idempotency_receipts WHERE idem_key = ?`, [key]);
          assert.equal(receipt?.scope, `${personal}:${ws.members.ada}`);
        });
      });
    }

    it('lists per connection: personal toolsets, read-only, and workspace grants', async () => {
      const tools = async (id: string) => {
        const client = await connectClient(svc(), await mintAccessToken(svc(), id), 'modern');
        const names = (await client.listTools()).tools.map((t) => t.name);
        await client.close();
        return names;
      };
      const readOnly = await insertConnection(svc(), { workspaceId: ws.workspace_id, createdBy: ws.members.olga!, access: 'personal', operations: PERSONAL_OPS, readOnly: true });
      assert.deepEqual(await tools(readOnly), ['customers_GetCompany', 'customers_ListCompanies', 'workspace_ListBundles']);
      const oneToolset = await insertConnection(svc(), { workspaceId: ws.workspace_id, createdBy: ws.members.olga!, access: 'personal', operations: PERSONAL_OPS, toolsets: ['workspace'] });
      assert.deepEqual(await tools(oneToolset), ['workspace_ListBundles']);
      const workspaceAccess = await insertConnection(svc(), {
        workspaceId: ws.workspace_id,
        createdBy: ws.members.olga!,
        access: 'workspace',
        operations: ['customers.ListSalesPipelines', 'customers.GetSalesPipeline'],
        resources: { 'core:SalesPipeline': ['read'] },
      });
      assert.deepEqual(await tools(workspaceAccess), ['customers_GetSalesPipeline', 'customers_ListSalesPipelines']);
      // A read-only connection cannot call a command even by name.
      const client = await connectClient(svc(), await mintAccessToken(svc(), readOnly), 'legacy');
      await assert.rejects(client.callTool({ name: 'customers_CreateCompany', arguments: { data: { name: 'X' } } }), (err: { code?: number }) => err.code === -32602);
      await client.close();
    });

    it('acts as a delegated member on a workspace connection (Service-Act-As of the MCP request), never as another', async () => {
      const id = await insertConnection(svc(), {
        workspaceId: ws.workspace_id,
        createdBy: ws.members.olga!,
        access: 'workspace',
        operations: ['customers.CreateCompany', 'customers.GetCompany'],
        resources: { 'core:Company': ['read', 'write'] },
        delegation: 'selected',
        delegates: [ws.members.bob!],
      });
      const token = await mintAccessToken(svc(), id);
      for (const era of ['legacy', 'modern'] as const) {
        const asBob = await connectClient(svc(), token, era, { 'Service-Act-As': ws.members.bob! });
        const mine = await asBob.callTool({ name: 'customers_CreateCompany', arguments: { data: { name: `Bob's ${era}` }, private: true } });
        const item = (mine.structuredContent as { item: { id: string; created_by: string; private: boolean } }).item;
        assert.deepEqual([item.created_by, item.private], [ws.members.bob, true]);
        await asBob.close();
        // Without the header: workspace access, which cannot see Bob's private company.
        const plain = await connectClient(svc(), token, era);
        const hidden = await plain.callTool({ name: 'customers_GetCompany', arguments: { id: item.id } });
        assert.equal(textOf(hidden).error, 'not_found');
        const shared = await plain.callTool({ name: 'customers_CreateCompany', arguments: { data: { name: `Shared ${era}` } } });
        assert.equal((shared.structuredContent as { item: { created_by: string | null } }).item.created_by, null);
        await plain.close();
        const asAda = await connectClient(svc(), token, era, { 'Service-Act-As': ws.members.ada! });
        const refused = await asAda.callTool({ name: 'customers_GetCompany', arguments: { id: item.id } });
        assert.equal(refused.isError, true);
        assert.equal(textOf(refused).error, 'forbidden');
        assert.match(textOf(refused).message, /this connection may not act for/);
        await asAda.close();
      }
      // A personal connection acts only as its member.
      const personalAsBob = await connectClient(svc(), personalToken, 'modern', { 'Service-Act-As': ws.members.bob! });
      const refused = await personalAsBob.callTool({ name: 'customers_ListCompanies', arguments: {} });
      assert.equal(textOf(refused).error, 'forbidden');
      assert.match(textOf(refused).message, /acts only as the member who approved it/);
      await personalAsBob.close();
    });

    it('speaks both eras at the wire: initialize, server/discover, and refuses unknown protocol versions and a missing Mcp-Name', async () => {
      const auth = { Authorization: `Bearer ${personalToken}` };
      const init = await rawPost(svc(), initialize, auth);
      assert.equal(init.status, 200);
      assert.equal(init.body.result.protocolVersion, '2025-11-25');
      assert.deepEqual(init.body.result.capabilities.tools, { listChanged: false });
      assert.equal(init.body.result.serverInfo.name, 'workspace-operations');
      assert.equal(init.headers.get('mcp-session-id'), null, 'stateless: no session');
      assert.match(init.headers.get('content-type') ?? '', /^application\/json/, 'one JSON body, also for 2025 clients');

      const discover = modern('server/discover');
      const found = await rawPost(svc(), discover.body, { ...discover.headers, ...auth });
      assert.equal(found.status, 200);
      // Every served revision (issue 21): 2025-era clients are served too, through initialize.
      assert.deepEqual(found.body.result.supportedVersions, ['2026-07-28', '2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05', '2024-10-07']);
      assert.ok(found.body.result.capabilities.tools);

      const legacyList = await rawPost(svc(), { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} }, { ...auth, 'MCP-Protocol-Version': '1999-01-01' });
      assert.equal(legacyList.status, 400);
      assert.match(JSON.stringify(legacyList.body), /Unsupported protocol version: 1999-01-01/);

      const future = modern('tools/list');
      (future.body as { params: { _meta: Record<string, string> } }).params._meta['io.modelcontextprotocol/protocolVersion'] = '2099-01-01';
      const refused = await rawPost(svc(), future.body, { ...future.headers, 'MCP-Protocol-Version': '2099-01-01', ...auth });
      assert.equal(refused.status, 400);
      assert.equal(refused.body.error.code, -32022);
      assert.deepEqual(refused.body.error.data.supported, ['2026-07-28', '2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05', '2024-10-07']);

      const call = modern('tools/call', { name: 'customers_ListCompanies', arguments: {} });
      const { 'Mcp-Name': _, ...withoutName } = call.headers;
      const noName = await rawPost(svc(), call.body, { ...withoutName, ...auth });
      assert.equal(noName.status, 400);
      assert.equal(noName.body.error.code, -32020);
      assert.match(noName.body.error.message, /Mcp-Name/);
      const ok = await rawPost(svc(), call.body, { ...call.headers, ...auth });
      assert.equal(ok.status, 200);
      assert.match(ok.headers.get('content-type') ?? '', /^application\/json/);
      assert.equal(ok.body.result.resultType, 'complete');
      assert.ok(Array.isArray(ok.body.result.structuredContent.items));
    });

    it('answers GET and DELETE with 405 (no stream, no session), and bodies that are not JSON with 400', async () => {
      const auth = { Authorization: `Bearer ${personalToken}` };
      for (const method of ['GET', 'DELETE']) {
        const res = await fetch(mcpUrl(svc()), { method, headers: { ...auth, Accept: 'text/event-stream' } });
        assert.equal(res.status, 405, method);
        assert.equal(res.headers.get('allow'), 'POST');
        const body = (await res.json()) as Record<string, string>;
        assert.equal(body.error, 'method_not_allowed');
      }
      const broken = await rawPost(svc(), '{"jsonrpc":', auth);
      assert.equal(broken.status, 400);
      assert.equal(broken.body.error, 'invalid_json');
      const text = await fetch(mcpUrl(svc()), { method: 'POST', headers: { ...auth, 'Content-Type': 'text/plain' }, body: '{}' });
      assert.equal(text.status, 400);
    });

    it('checks Host and Origin before anything else (DNS rebinding), and lets allowed browser origins in with CORS', async () => {
      const port = new URL(svc().origin).port;
      const body = JSON.stringify(initialize);
      const headers = (extra: Record<string, string>) => ({ 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', Authorization: `Bearer ${personalToken}`, ...extra });
      const evilHost = await rawHttp(svc(), { headers: headers({ Host: 'evil.example.com', Origin: 'http://evil.example.com' }), body });
      assert.equal(evilHost.status, 403);
      assert.match(JSON.parse(evilHost.text).message, /Host/);
      const evilOrigin = await rawHttp(svc(), { headers: headers({ Host: `localhost:${port}`, Origin: 'http://evil.example.com' }), body });
      assert.equal(evilOrigin.status, 403);
      assert.equal(JSON.parse(evilOrigin.text).error, 'forbidden');
      const nullOrigin = await rawHttp(svc(), { headers: headers({ Origin: 'null' }), body });
      assert.equal(nullOrigin.status, 403);
      // Refused before authentication: no token needed to be refused, and no challenge.
      const noToken = await rawHttp(svc(), { headers: { 'Content-Type': 'application/json', Host: 'evil.example.com' }, body });
      assert.equal(noToken.status, 403);
      assert.equal(noToken.headers['www-authenticate'], undefined);
      const local = await rawHttp(svc(), { headers: headers({ Host: `localhost:${port}`, Origin: `http://localhost:${port}` }), body });
      assert.equal(local.status, 200);
      const noOrigin = await rawHttp(svc(), { headers: headers({}), body });
      assert.equal(noOrigin.status, 200);
      const allowed = await rawHttp(svc(), { headers: headers({ Origin: 'https://inspector.example' }), body });
      assert.equal(allowed.status, 200);
      assert.equal(allowed.headers['access-control-allow-origin'], 'https://inspector.example');
      assert.match(String(allowed.headers['access-control-expose-headers']), /WWW-Authenticate/);
      const preflight = await rawHttp(svc(), { method: 'OPTIONS', headers: { Origin: 'https://inspector.example', 'Access-Control-Request-Method': 'POST' } });
      assert.equal(preflight.status, 204);
      assert.match(String(preflight.headers['access-control-allow-headers']), /Mcp-Name/);
    });

    it('logs the connection, tool and operation of a call, never the token; records last use at most once a minute', async () => {
      const before = svc().logs().length;
      const client = await connectClient(svc(), personalToken, 'modern');
      await client.callTool({ name: 'workspace_ListBundles', arguments: {} });
      await client.close();
      await svc().credentials.usageWritten();
      const lines = svc()
        .logs()
        .slice(before)
        .split('\n')
        .filter((l) => l.includes('"request completed"') || l.includes('request completed'))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      const call = lines.find((l) => l.tool === 'workspace_ListBundles');
      assert.ok(call, 'a log line for the tool call');
      assert.deepEqual([call.connection, call.operation, (call.req as { url: string }).url], [personal, 'workspace.ListBundles', '/v1/mcp']);
      assert.ok(!svc().logs().includes(personalToken), 'the token is never logged');
      const row = await svc().db.sql.one<{ last_used_at: number | null }>(`SELECT last_used_at FROM mcp_connections WHERE id = ?`, [personal]);
      assert.ok(row?.last_used_at !== null && Number(row!.last_used_at) <= svc().clock.now());
    });

    it('ends a connection at its next call when it is revoked, or its member disabled', async () => {
      const id = await insertConnection(svc(), { workspaceId: ws.workspace_id, createdBy: ws.members.bob!, access: 'personal', operations: PERSONAL_OPS });
      const token = await mintAccessToken(svc(), id);
      const client = await connectClient(svc(), token, 'modern');
      assert.equal((await client.callTool({ name: 'workspace_ListBundles', arguments: {} })).isError, undefined);
      await svc().db.sql.run(`UPDATE mcp_connections SET revoked_at = ? WHERE id = ?`, [svc().clock.now(), id]);
      const res = await rawPost(svc(), initialize, { Authorization: `Bearer ${token}` });
      assert.equal(res.status, 401);
      assert.match(res.headers.get('www-authenticate') ?? '', /error="invalid_token"/);
      assert.equal(res.body.error, 'invalid_token');
      await client.close().catch(() => undefined);

      const other = await insertConnection(svc(), { workspaceId: ws.workspace_id, createdBy: ws.members.olga!, access: 'personal', operations: PERSONAL_OPS });
      const otherToken = await mintAccessToken(svc(), other);
      assert.equal((await rawPost(svc(), initialize, { Authorization: `Bearer ${otherToken}` })).status, 200);
      await disableMember(svc().db, svc().clock, ws.members.olga!);
      assert.equal((await rawPost(svc(), initialize, { Authorization: `Bearer ${otherToken}` })).status, 401);
    });
  },
  { env: { MCP_ALLOWED_ORIGINS: 'https://inspector.example' } },
);

forEachDatabase(
  'MCP endpoint rate limit',
  (svc) => {
    it("takes every request from the connection's own bucket: 429 with Retry-After past the burst, other connections unaffected", async () => {
      const ws = await svc().apply(acme());
      const a = await mintAccessToken(svc(), await insertConnection(svc(), { workspaceId: ws.workspace_id, createdBy: ws.members.ada!, access: 'personal', operations: PERSONAL_OPS }));
      const b = await mintAccessToken(svc(), await insertConnection(svc(), { workspaceId: ws.workspace_id, createdBy: ws.members.ada!, access: 'personal', operations: PERSONAL_OPS }));
      for (let i = 0; i < 3; i++) assert.equal((await rawPost(svc(), initialize, { Authorization: `Bearer ${a}` })).status, 200);
      const limited = await rawPost(svc(), initialize, { Authorization: `Bearer ${a}` });
      assert.equal(limited.status, 429);
      assert.equal(limited.body.error, 'rate_limited');
      assert.ok(Number(limited.headers.get('retry-after')) >= 1);
      assert.equal((await rawPost(svc(), initialize, { Authorization: `Bearer ${b}` })).status, 200);
      svc().clock.advance(2000);
      assert.equal((await rawPost(svc(), initialize, { Authorization: `Bearer ${a}` })).status, 200);
    });
  },
  { rateLimitPerSecond: 1, rateLimitBurst: 3 },
);

forEachDatabase(
  'MCP endpoint behind its public name',
  (svc) => {
    it('takes requests for PUBLIC_URL\'s host only, and tokens issued for PUBLIC_URL + /v1/mcp', async () => {
      const ws = await svc().apply(acme());
      const id = await insertConnection(svc(), { workspaceId: ws.workspace_id, createdBy: ws.members.ada!, access: 'personal', operations: PERSONAL_OPS });
      const token = await mintAccessToken(svc(), id);
      const body = JSON.stringify(initialize);
      const headers = (extra: Record<string, string>) => ({ 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', Authorization: `Bearer ${token}`, ...extra });
      assert.equal((await rawHttp(svc(), { headers: headers({ Host: 'ops.example.com' }), body })).status, 200);
      assert.equal((await rawHttp(svc(), { headers: headers({ Host: 'ops.example.com', Origin: 'https://ops.example.com' }), body })).status, 200);
      // Loopback is no longer a way in once PUBLIC_URL names a host.
      assert.equal((await rawHttp(svc(), { headers: headers({}), body })).status, 403);
      assert.equal((await rawHttp(svc(), { headers: headers({ Host: 'ops.example.com', Origin: 'http://localhost:6274' }), body })).status, 403);
      assert.equal((await rawHttp(svc(), { headers: headers({ Host: 'ops.example.com.evil.test' }), body })).status, 403);
      const meta = await rawHttp(svc(), { method: 'GET', headers: { Host: 'ops.example.com' } });
      const challenge = await rawHttp(svc(), { headers: { 'Content-Type': 'application/json', Host: 'ops.example.com' }, body });
      assert.equal(challenge.status, 401);
      assert.equal(challenge.headers['www-authenticate'], 'Bearer resource_metadata="https://ops.example.com/.well-known/oauth-protected-resource/v1/mcp", scope="mcp"');
      assert.equal(meta.status, 401);
      const prm = await fetch(`${svc().origin}/.well-known/oauth-protected-resource/v1/mcp`);
      assert.equal(((await prm.json()) as { resource: string }).resource, 'https://ops.example.com/v1/mcp');
    });
  },
  { publicUrl: 'https://ops.example.com' },
);
