/**
 * Every way a request to `/v1/mcp` can carry no usable access token, each refused with the right
 * status, our `{error, message, request_id}` body and the RFC 6750 / RFC 9728 challenge:
 * `WWW-Authenticate: Bearer resource_metadata="<metadata URL>", scope="mcp"`, with `error` (and a
 * description) only when a token was presented.
 */
import assert from 'node:assert/strict';
import { disableMember } from '../../server/admin.ts';
import { mcpResource } from '../../handlers/mcp/resource.ts';
import { acme } from '../support/fixtures.ts';
import { forEachDatabase, type TestService } from '../support/service.ts';
import { insertConnection, mcpUrl, mintAccessToken, rawPost, revokeToken } from './tokens.ts';

const initialize = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};
const OPS = ['customers.GetCompany', 'workspace.ListBundles'];

interface Refusal {
  status: number;
  /** The body's `error`. */
  error: string;
  /** The challenge's `error` parameter; null when none is expected. */
  challenge: 'invalid_token' | 'insufficient_scope' | 'invalid_request' | null;
  message: RegExp;
}

async function expectRefusal(svc: TestService, why: string, headers: Record<string, string>, want: Refusal, url = mcpUrl(svc)): Promise<void> {
  const res = await rawPost(svc, initialize, headers, url);
  assert.equal(res.status, want.status, `${why}: status (${res.text.slice(0, 200)})`);
  assert.deepEqual(Object.keys(res.body).sort(), ['error', 'message', 'request_id'], `${why}: body shape`);
  assert.equal(res.body.error, want.error, `${why}: error`);
  assert.match(res.body.message, want.message, `${why}: message`);
  assert.equal(res.body.request_id, res.headers.get('request-id'));
  const challenge = res.headers.get('www-authenticate') ?? '';
  const r = mcpResource(svc.config.publicUrl);
  assert.ok(challenge.startsWith('Bearer '), `${why}: challenge ${challenge}`);
  assert.ok(challenge.includes(`resource_metadata="${r.metadataUrl}"`), `${why}: resource_metadata in ${challenge}`);
  assert.ok(challenge.includes('scope="mcp"'), `${why}: scope in ${challenge}`);
  if (want.challenge === null) assert.ok(!/\berror=/.test(challenge), `${why}: no error code without a token (RFC 6750 §3.1): ${challenge}`);
  else {
    assert.ok(challenge.includes(`error="${want.challenge}"`), `${why}: error="${want.challenge}" in ${challenge}`);
    assert.ok(/error_description="[^"]+"/.test(challenge), `${why}: a description`);
  }
}

forEachDatabase('MCP endpoint: bad access tokens', (svc) => {
  let ws: Awaited<ReturnType<TestService['apply']>>;
  let connection: string;
  before(async () => {
    ws = await svc().apply(acme());
    connection = await insertConnection(svc(), { workspaceId: ws.workspace_id, createdBy: ws.members.ada!, access: 'personal', operations: OPS });
  });
  const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });

  it('a good token passes (the baseline of every case below)', async () => {
    const res = await rawPost(svc(), initialize, bearer(await mintAccessToken(svc(), connection)));
    assert.equal(res.status, 200);
  });

  it('1. no Authorization header: 401, challenge without an error code', async () => {
    await expectRefusal(svc(), 'no header', {}, { status: 401, error: 'invalid_token', challenge: null, message: /No access token/ });
  });

  it('2. another scheme (Basic): 401, challenge without an error code', async () => {
    await expectRefusal(svc(), 'basic', { Authorization: `Basic ${Buffer.from('a:b').toString('base64')}` }, { status: 401, error: 'invalid_token', challenge: null, message: /only OAuth access tokens/ });
  });

  it('3. malformed bearer tokens: 401 invalid_token', async () => {
    for (const value of ['Bearer', 'Bearer ', 'Bearer a b c', 'Bearer ###', 'Bearer short', `Bearer ${'x'.repeat(2000)}`]) {
      await expectRefusal(svc(), value.slice(0, 20), { Authorization: value }, { status: 401, error: 'invalid_token', challenge: 'invalid_token', message: /malformed/ });
    }
  });

  it('4. an unknown token (well formed, never issued; also a JWT): 401 invalid_token', async () => {
    await expectRefusal(svc(), 'unknown', bearer('A'.repeat(43)), { status: 401, error: 'invalid_token', challenge: 'invalid_token', message: /unknown or was revoked/ });
    const jwt = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl';
    await expectRefusal(svc(), 'jwt', bearer(jwt), { status: 401, error: 'invalid_token', challenge: 'invalid_token', message: /unknown or was revoked/ });
  });

  it('5. an expired token: 401 invalid_token (also once it was accepted and cached)', async () => {
    const token = await mintAccessToken(svc(), connection, { expiresIn: 60 });
    assert.equal((await rawPost(svc(), initialize, bearer(token))).status, 200);
    svc().clock.advance(61_000);
    await expectRefusal(svc(), 'expired', bearer(token), { status: 401, error: 'invalid_token', challenge: 'invalid_token', message: /expired/ });
    const old = await mintAccessToken(svc(), connection, { expiresIn: -1 });
    await expectRefusal(svc(), 'expired at issue', bearer(old), { status: 401, error: 'invalid_token', challenge: 'invalid_token', message: /expired/ });
  });

  it('6. a revoked token (its record destroyed by the authorization server): 401 at the next call', async () => {
    const token = await mintAccessToken(svc(), connection);
    assert.equal((await rawPost(svc(), initialize, bearer(token))).status, 200);
    await revokeToken(svc(), token);
    await expectRefusal(svc(), 'revoked', bearer(token), { status: 401, error: 'invalid_token', challenge: 'invalid_token', message: /unknown or was revoked/ });
  });

  it('7. a revoked connection (settings page): 401 at the next call, with any of its tokens', async () => {
    const id = await insertConnection(svc(), { workspaceId: ws.workspace_id, createdBy: ws.members.ada!, access: 'personal', operations: OPS });
    const token = await mintAccessToken(svc(), id);
    assert.equal((await rawPost(svc(), initialize, bearer(token))).status, 200);
    await svc().db.sql.run(`UPDATE mcp_connections SET revoked_at = ? WHERE id = ?`, [svc().clock.now(), id]);
    await expectRefusal(svc(), 'connection revoked', bearer(token), { status: 401, error: 'invalid_token', challenge: 'invalid_token', message: /connection of this access token was revoked/ });
    await expectRefusal(svc(), 'fresh token of a revoked connection', bearer(await mintAccessToken(svc(), id)), { status: 401, error: 'invalid_token', challenge: 'invalid_token', message: /revoked or has ended/ });
  });

  it('8. a token for another resource (audience): 401 invalid_token', async () => {
    for (const aud of ['http://localhost:8080/v1/other', 'https://elsewhere.example/v1/mcp', 'http://localhost:8080/v1/mcp/']) {
      await expectRefusal(svc(), `aud ${aud}`, bearer(await mintAccessToken(svc(), connection, { aud })), { status: 401, error: 'invalid_token', challenge: 'invalid_token', message: /another resource/ });
    }
  });

  it('9. a token from another issuer: 401 invalid_token', async () => {
    await expectRefusal(svc(), 'iss', bearer(await mintAccessToken(svc(), connection, { iss: 'https://evil.example' })), { status: 401, error: 'invalid_token', challenge: 'invalid_token', message: /another authorization server/ });
  });

  it('10. a token without the scope mcp: 403 insufficient_scope', async () => {
    await expectRefusal(svc(), 'scope', bearer(await mintAccessToken(svc(), connection, { scope: 'openid offline_access' })), { status: 403, error: 'insufficient_scope', challenge: 'insufficient_scope', message: /lacks the scope mcp/ });
  });

  it('11. an API key: 401 invalid_token (never accepted, never passed through)', async () => {
    await expectRefusal(svc(), 'api key', bearer(ws.keys.sales!.secret), { status: 401, error: 'invalid_token', challenge: 'invalid_token', message: /API keys are not accepted/ });
  });

  it('12. a token in the URL: 401 without an error code alone, 400 invalid_request beside the header; never logged', async () => {
    const token = await mintAccessToken(svc(), connection);
    await expectRefusal(svc(), 'query only', {}, { status: 401, error: 'invalid_token', challenge: null, message: /in the URL is never accepted/ }, `${mcpUrl(svc())}?access_token=${token}`);
    await expectRefusal(svc(), 'query and header', bearer(token), { status: 400, error: 'invalid_request', challenge: 'invalid_request', message: /only in the header/ }, `${mcpUrl(svc())}?access_token=${token}`);
    assert.ok(!svc().logs().includes(token), 'a token in the URL is cut from the request log');
  });

  it('13. a refresh token used as an access token: 401 invalid_token', async () => {
    const refresh = await mintAccessToken(svc(), connection, { model: 'RefreshToken' });
    await expectRefusal(svc(), 'refresh', bearer(refresh), { status: 401, error: 'invalid_token', challenge: 'invalid_token', message: /unknown or was revoked/ });
  });

  it('14. a sign-in session cookie: 401 invalid_token', async () => {
    await expectRefusal(svc(), 'cookie', { Cookie: `wso_session=wss_${'a'.repeat(24)}_${'b'.repeat(43)}` }, { status: 401, error: 'invalid_token', challenge: 'invalid_token', message: /Sign-in sessions are not accepted/ });
  });

  it('15. a personal connection whose member is disabled or changes role: 401, ended for good', async () => {
    const disabled = await insertConnection(svc(), { workspaceId: ws.workspace_id, createdBy: ws.members.bob!, access: 'personal', operations: OPS });
    const token = await mintAccessToken(svc(), disabled);
    assert.equal((await rawPost(svc(), initialize, bearer(token))).status, 200);
    await disableMember(svc().db, svc().clock, ws.members.bob!);
    await expectRefusal(svc(), 'member disabled', bearer(token), { status: 401, error: 'invalid_token', challenge: 'invalid_token', message: /revoked or has ended/ });
    const row = await svc().db.sql.one<{ revoked_at: number | null }>(`SELECT revoked_at FROM mcp_connections WHERE id = ?`, [disabled]);
    assert.ok(row?.revoked_at !== null, 'the connection is ended for good');
    await svc().db.sql.run(`UPDATE members SET disabled_at = NULL WHERE id = ?`, [ws.members.bob!]);
    await expectRefusal(svc(), 'member enabled again', bearer(token), { status: 401, error: 'invalid_token', challenge: 'invalid_token', message: /revoked or has ended/ });

    const demoted = await insertConnection(svc(), { workspaceId: ws.workspace_id, createdBy: ws.members.olga!, access: 'personal', operations: OPS });
    const demotedToken = await mintAccessToken(svc(), demoted);
    assert.equal((await rawPost(svc(), initialize, bearer(demotedToken))).status, 200);
    await svc().db.sql.run(`UPDATE members SET role = 'member' WHERE id = ?`, [ws.members.olga!]);
    await expectRefusal(svc(), 'role changed', bearer(demotedToken), { status: 401, error: 'invalid_token', challenge: 'invalid_token', message: /revoked or has ended/ });
  });

  it('16. a workspace connection survives its creator\'s changes, but not its revocation', async () => {
    const id = await insertConnection(svc(), { workspaceId: ws.workspace_id, createdBy: ws.members.ada!, access: 'workspace', operations: OPS, resources: { 'core:Company': ['read'] } });
    const token = await mintAccessToken(svc(), id);
    await svc().db.sql.run(`UPDATE members SET role = 'admin' WHERE id = ?`, [ws.members.ada!]);
    assert.equal((await rawPost(svc(), initialize, bearer(token))).status, 200);
  });
});
