/**
 * The resource side of agent access, issue 21 (findings 13, 14, 18, 19), on both databases:
 * - two Authorization headers are refused (400) at /v1 and /v1/mcp, whichever comes first;
 * - server/discover and the -32022 error list every served revision (2026-07-28 and the 2025-era ones);
 * - a connection ended by its member's change says so (page and CLI words), not "revoked";
 * - a workspace connection with delegation learns whom it may act for (GET /v1/delegation/members and
 *   GET /v1/operations with its access token), as its 403 says;
 * - the workspace's API-key switch covers workspace-access connections (stopped: refused; off: none
 *   approved), never personal ones.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { listWorkspaceMembers } from '../../db/queries/credentials.ts';
import { AdminError, disableMember, setApiKeyAccess } from '../../server/admin.ts';
import { createConnection, listConnections } from '../../handlers/mcp/connections.ts';
import { connectionInWords } from '../../handlers/mcp/connectionsPage.ts';
import { acme } from '../support/fixtures.ts';
import { forEachDatabase, type TestService } from '../support/service.ts';
import { insertConnection, mintAccessToken, modern, rawPost } from './tokens.ts';

type Workspace = Awaited<ReturnType<TestService['apply']>>;
const LIST = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} };
const LEGACY = { 'MCP-Protocol-Version': '2025-11-25' };
const SERVED = ['2026-07-28', '2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05', '2024-10-07'];

/** A request with raw header lines (a repeated name stays two lines; fetch would join them). */
function rawRequest(svc: TestService, path: string, method: string, headers: string[], body?: string): Promise<{ status: number; json: any }> {
  const url = new URL(`${svc.origin}${path}`);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method, headers: ['Host', url.host, ...headers] }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (text += c));
      res.on('end', () => {
        let json: unknown = text;
        try {
          json = JSON.parse(text);
        } catch {
          /* kept as text */
        }
        resolve({ status: res.statusCode!, json });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

const v1 = (svc: TestService, path: string, authorization: string) => fetch(`${svc.origin}/v1${path}`, { headers: { Authorization: authorization } });

forEachDatabase('Agent access, resource side (issue 21)', (svc) => {
  let ws: Workspace;
  before(async () => {
    ws = await svc().apply(acme());
  });

  describe('13. two Authorization headers', () => {
    it('/v1 answers 400 invalid_input whichever header comes first (never serves the valid one)', async () => {
      const key = `Bearer ${ws.keys.ci!.secret}`;
      const alone = await rawRequest(svc(), '/v1/operations', 'GET', ['Authorization', key]);
      assert.equal(alone.status, 200);
      for (const headers of [
        ['Authorization', key, 'Authorization', 'Bearer wso_garbage'],
        ['Authorization', 'Bearer wso_garbage', 'Authorization', key],
        ['Authorization', key, 'Authorization', key],
      ]) {
        const got = await rawRequest(svc(), '/v1/operations', 'GET', headers);
        assert.equal(got.status, 400, JSON.stringify(got.json));
        assert.equal(got.json.error, 'invalid_input');
        assert.match(got.json.message, /more than one Authorization header/);
        assert.equal(typeof got.json.request_id, 'string');
      }
    });

    it('/v1/mcp answers 400 invalid_request with a good token first', async () => {
      const connection = await insertConnection(svc(), { workspaceId: ws.workspace_id, createdBy: ws.members.ada!, access: 'personal', operations: ['customers.ListCompanies'] });
      const token = await mintAccessToken(svc(), connection);
      const base = ['Content-Type', 'application/json', 'Accept', 'application/json, text/event-stream', 'MCP-Protocol-Version', '2025-11-25'];
      assert.equal((await rawRequest(svc(), '/v1/mcp', 'POST', [...base, 'Authorization', `Bearer ${token}`], JSON.stringify(LIST))).status, 200);
      const got = await rawRequest(svc(), '/v1/mcp', 'POST', [...base, 'Authorization', `Bearer ${token}`, 'Authorization', 'Bearer other'], JSON.stringify(LIST));
      assert.equal(got.status, 400, JSON.stringify(got.json));
      assert.equal(got.json.error, 'invalid_request');
      assert.match(got.json.message, /more than one Authorization header/);
    });
  });

  describe('14. what the endpoint and the pages say', () => {
    it('server/discover and the -32022 refusal list every served revision, 2025-11-25 included', async () => {
      const connection = await insertConnection(svc(), { workspaceId: ws.workspace_id, createdBy: ws.members.ada!, access: 'personal', operations: ['customers.ListCompanies'] });
      const auth = { Authorization: `Bearer ${await mintAccessToken(svc(), connection)}` };
      const discover = modern('server/discover');
      const found = await rawPost(svc(), discover.body, { ...discover.headers, ...auth });
      assert.equal(found.status, 200, found.text);
      assert.deepEqual(found.body.result.supportedVersions, SERVED);
      const future = modern('tools/list');
      (future.body as { params: { _meta: Record<string, string> } }).params._meta['io.modelcontextprotocol/protocolVersion'] = '2099-01-01';
      const refused = await rawPost(svc(), future.body, { ...future.headers, 'MCP-Protocol-Version': '2099-01-01', ...auth });
      assert.equal(refused.status, 400, refused.text);
      assert.equal(refused.body.error.code, -32022);
      assert.deepEqual(refused.body.error.data.supported, SERVED);
    });

    it('while PUBLIC_URL is loopback, any loopback Origin passes, and the refusal of another Origin says so', async () => {
      const connection = await insertConnection(svc(), { workspaceId: ws.workspace_id, createdBy: ws.members.ada!, access: 'personal', operations: ['customers.ListCompanies'] });
      const auth = { ...LEGACY, Authorization: `Bearer ${await mintAccessToken(svc(), connection)}` };
      assert.equal(svc().config.publicUrl, 'http://localhost:8080');
      for (const origin of ['http://127.0.0.1:6274', 'https://localhost:1', 'http://[::1]:9', 'http://inspector.localhost:6274']) {
        assert.equal((await rawPost(svc(), LIST, { ...auth, Origin: origin })).status, 200, origin);
      }
      const refused = await rawPost(svc(), LIST, { ...auth, Origin: 'http://evil.example.com' });
      assert.equal(refused.status, 403);
      assert.match(refused.body.message, /MCP_ALLOWED_ORIGINS, and, while PUBLIC_URL is a loopback address, any http or https origin on a loopback host/);
    });

    it('a personal connection ended by its member being disabled says so, also after the member is enabled again', async () => {
      const connection = await insertConnection(svc(), { workspaceId: ws.workspace_id, createdBy: ws.members.ada!, access: 'personal', operations: ['customers.ListCompanies'] });
      const token = await mintAccessToken(svc(), connection);
      assert.equal((await rawPost(svc(), LIST, { ...LEGACY, Authorization: `Bearer ${token}` })).status, 200);
      await disableMember(svc().db, svc().clock, ws.members.ada!);
      svc().credentials.invalidate();
      assert.equal((await rawPost(svc(), LIST, { ...LEGACY, Authorization: `Bearer ${token}` })).status, 401);
      // Enabled again (as an operator would): the ended connection stays ended, and says why.
      await svc().db.sql.run(`UPDATE members SET disabled_at = NULL WHERE id = ?`, [ws.members.ada!]);
      const members = new Map((await listWorkspaceMembers(svc().db.sql, ws.workspace_id)).map((m) => [m.id, { name: m.name, role: m.role, disabled: m.disabled_at !== null }]));
      const c = (await listConnections(svc().db.sql, ws.workspace_id)).find((x) => x.id === connection)!;
      // The page and `connection list` both show connectionInWords(...).state.
      const words = connectionInWords(c, members);
      assert.equal(words.ended, true);
      assert.match(words.state, /^ended on .*: its member was disabled$/);
      assert.doesNotMatch(words.state, /revoked/);
    });
  });

  describe('18. a workspace connection with delegation learns whom it may act for', () => {
    it('GET /v1/delegation/members and GET /v1/operations answer its access token; other operations still refuse it', async () => {
      const connection = await insertConnection(svc(), {
        workspaceId: ws.workspace_id,
        createdBy: ws.members.olga!,
        access: 'workspace',
        operations: ['customers.ListCompanies', 'customers.GetCompany'],
        resources: { 'core:Company': ['read'] },
        delegation: 'selected',
        delegates: [ws.members.ada!, ws.members.max!],
      });
      const token = await mintAccessToken(svc(), connection);
      // Its own 403 points there…
      const call = modern('tools/call', { name: 'customers_ListCompanies', arguments: {} });
      const refused = await rawPost(svc(), call.body, { ...call.headers, Authorization: `Bearer ${token}`, 'Service-Act-As': ws.members.bob! });
      assert.match(JSON.parse(refused.body.result.content[0].text).message, /GET \/v1\/delegation\/members/);
      // …and it answers: the active delegates (max is disabled).
      const members = await v1(svc(), '/delegation/members', `Bearer ${token}`);
      assert.equal(members.status, 200);
      assert.deepEqual(await members.json(), { items: [{ id: ws.members.ada, name: 'Ada Member' }] });
      const ops = await v1(svc(), '/operations', `Bearer ${token}`);
      assert.equal(ops.status, 200);
      assert.deepEqual(((await ops.json()) as { items: Array<{ id: string }> }).items.map((i) => i.id).sort(), ['customers.GetCompany', 'customers.ListCompanies']);
      const other = await v1(svc(), '/operations/customers.ListCompanies', `Bearer ${token}`);
      assert.equal(other.status, 401);
      const unknown = await v1(svc(), '/delegation/members', 'Bearer AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA');
      assert.equal(unknown.status, 401);
      assert.equal(((await unknown.json()) as { error: string }).error, 'invalid_key');
    });
  });

  describe('19. the API-key switch covers workspace-access connections', () => {
    let other: Workspace;
    before(async () => {
      other = await svc().apply({ ...acme(), workspace: { name: 'Switch' } });
    });

    it('stopped: a workspace connection is refused (403) like a key; a personal connection keeps working; on again: it works', async () => {
      const shared = await insertConnection(svc(), { workspaceId: other.workspace_id, createdBy: other.members.olga!, access: 'workspace', operations: ['customers.ListCompanies'], resources: { 'core:Company': ['read'] } });
      const personal = await insertConnection(svc(), { workspaceId: other.workspace_id, createdBy: other.members.ada!, access: 'personal', operations: ['customers.ListCompanies'] });
      const sharedToken = await mintAccessToken(svc(), shared);
      const personalToken = await mintAccessToken(svc(), personal);
      assert.equal((await rawPost(svc(), LIST, { ...LEGACY, Authorization: `Bearer ${sharedToken}` })).status, 200);
      await setApiKeyAccess(svc().db, svc().clock, other.workspace_id, 'stopped');
      const refused = await rawPost(svc(), LIST, { ...LEGACY, Authorization: `Bearer ${sharedToken}` });
      assert.equal(refused.status, 403, refused.text);
      assert.equal(refused.body.error, 'forbidden');
      assert.match(refused.body.message, /stopped/);
      assert.equal((await rawPost(svc(), LIST, { ...LEGACY, Authorization: `Bearer ${personalToken}` })).status, 200);
      await setApiKeyAccess(svc().db, svc().clock, other.workspace_id, 'on');
      assert.equal((await rawPost(svc(), LIST, { ...LEGACY, Authorization: `Bearer ${sharedToken}` })).status, 200);
    });

    it('off or stopped: no workspace-access connection can be approved; personal ones can', async () => {
      const input = (access: 'personal' | 'workspace') => ({
        workspaceId: other.workspace_id,
        clientId: 'https://client.example/metadata.json',
        clientName: 'Test client',
        redirectUri: 'http://127.0.0.1:33418/callback',
        access,
        member: { id: other.members.olga!, name: 'Olga Owner', role: 'owner' as const },
        toolsets: ['customers'],
        readOnly: true,
        operations: ['customers.ListCompanies'],
        resources: { 'core:Company': ['read' as const] },
        now: svc().clock.now(),
      });
      for (const state of ['off', 'stopped'] as const) {
        await setApiKeyAccess(svc().db, svc().clock, other.workspace_id, state);
        await assert.rejects(
          svc().db.tx((sql) => createConnection(sql, input('workspace'))),
          (err: unknown) => err instanceof AdminError && /API keys/.test(err.message) && /personal access/.test(err.message),
        );
        const made = await svc().db.tx((sql) => createConnection(sql, input('personal')));
        assert.equal(made.access, 'personal');
      }
      await setApiKeyAccess(svc().db, svc().clock, other.workspace_id, 'on');
      assert.equal((await svc().db.tx((sql) => createConnection(sql, input('workspace')))).access, 'workspace');
    });
  });
});
