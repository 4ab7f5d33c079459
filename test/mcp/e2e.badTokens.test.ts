/**
 * Bad tokens at /v1/mcp, each refused with the right status and challenge (RFC 6750 §3, RFC 9728 §5.1,
 * the MCP authorization specification), on both databases: 401 with
 * `WWW-Authenticate: Bearer resource_metadata="<PUBLIC_URL>/.well-known/oauth-protected-resource/v1/mcp", scope="mcp"`
 * (plus `error="invalid_token"` when a token was presented; none when the request carried no
 * credentials), 403 `insufficient_scope` for a token without the scope mcp, 400 `invalid_request`
 * for two ways of sending a token at once; always the `{error, message}` body, never a tool answer.
 *
 * Tokens are written as the authorization server writes them (test/mcp/e2e.tokens.ts), with one thing
 * wrong each; a good token of the same connection is checked to work first, so each refusal is about
 * the one thing changed.
 */
import assert from 'node:assert/strict';
import type { ApplyResult } from '../../server/admin.ts';
import { sha256Hex } from '../../server/ids.ts';
import { mcpResource } from '../../handlers/mcp/resource.ts';
import { acme } from '../support/fixtures.ts';
import { databases, startTestService, type TestService } from '../support/service.ts';
import { freePort } from '../support/smtp.ts';
import { mintAccessToken, mintConnection } from './e2e.tokens.ts';

const LIST = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} });

for (const database of databases) {
  describe(`MCP bad tokens: each refused with its challenge [${database.name}]`, function () {
    this.timeout(60_000);
    let svc: TestService;
    let ws: ApplyResult;
    let url: string;
    let metadataUrl: string;
    let good: { token: string; connectionId: string; grantId: string };

    /** tools/list with these headers (and URL suffix); the status, challenge and body. */
    async function call(headers: Record<string, string>, query = '') {
      const res = await fetch(`${url}${query}`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'MCP-Protocol-Version': '2025-11-25', ...headers },
        body: LIST,
      });
      const text = await res.text();
      let body: Record<string, unknown> = {};
      try {
        body = JSON.parse(text) as Record<string, unknown>;
      } catch {
        /* checked below */
      }
      return { status: res.status, challenge: res.headers.get('www-authenticate') ?? '', body, text };
    }
    const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });

    /** The challenge names the metadata and the scope; `error` as given (absent: none). */
    function challenged(got: Awaited<ReturnType<typeof call>>, status: number, error: string | null) {
      assert.equal(got.status, status, got.text);
      assert.match(got.challenge, /^Bearer /);
      assert.ok(got.challenge.includes(`resource_metadata="${metadataUrl}"`), got.challenge);
      assert.ok(got.challenge.includes('scope="mcp"'), got.challenge);
      if (error) assert.ok(got.challenge.includes(`error="${error}"`), got.challenge);
      else assert.doesNotMatch(got.challenge, /error=/);
      assert.equal(typeof got.body.error, 'string', got.text);
      assert.equal(typeof got.body.message, 'string', got.text);
      assert.equal(got.body.result, undefined);
      assert.equal(got.body.jsonrpc, undefined, 'an HTTP refusal, not a JSON-RPC answer');
    }

    before(async () => {
      const port = await freePort();
      svc = await startTestService(database.url(), { port, publicUrl: `http://localhost:${port}` });
      ws = await svc.apply(acme());
      url = `http://localhost:${port}/v1/mcp`;
      metadataUrl = mcpResource(svc.config.publicUrl).metadataUrl;
      good = await mintConnection(svc, ws, { access: 'personal', member: 'ada', memberRole: 'member', operations: ['customers.ListSalesPipelines'] });
    });
    after(async () => svc?.close());

    it('a good token of the same kind works (the baseline)', async () => {
      const got = await call(bearer(good.token));
      assert.equal(got.status, 200, got.text);
    });

    it('1. no Authorization header: 401, a challenge without an error code', async () => {
      challenged(await call({}), 401, null);
    });

    it('2. another scheme (Basic): 401', async () => {
      const got = await call({ Authorization: `Basic ${Buffer.from('ada:secret').toString('base64')}` });
      assert.equal(got.status, 401, got.text);
      assert.ok(got.challenge.includes(`resource_metadata="${metadataUrl}"`), got.challenge);
    });

    it('3. a malformed token: 401 invalid_token', async () => {
      challenged(await call({ Authorization: 'Bearer not a token' }), 401, 'invalid_token');
      challenged(await call({ Authorization: 'Bearer ' }), 401, 'invalid_token');
      challenged(await call(bearer('%%%')), 401, 'invalid_token');
    });

    it('4. an unknown token (well formed, never issued): 401 invalid_token', async () => {
      challenged(await call(bearer('A'.repeat(43))), 401, 'invalid_token');
    });

    it('5. an expired token: 401 invalid_token', async () => {
      const token = await mintAccessToken(svc, { connectionId: good.connectionId, grantId: good.grantId, ttlS: 60 });
      assert.equal((await call(bearer(token))).status, 200);
      svc.clock.advance(61_000);
      challenged(await call(bearer(token)), 401, 'invalid_token');
    });

    it('6. a revoked token (its record gone, as /oauth/revoke leaves it): 401 invalid_token', async () => {
      const token = await mintAccessToken(svc, { connectionId: good.connectionId, grantId: good.grantId });
      assert.equal((await call(bearer(token))).status, 200);
      await svc.db.sql.run(`DELETE FROM oauth_records WHERE model = 'AccessToken' AND id_hash = ?`, [sha256Hex(token)]);
      challenged(await call(bearer(token)), 401, 'invalid_token');
    });

    it('7. a token for another resource (audience): 401 invalid_token', async () => {
      const r = mcpResource(svc.config.publicUrl);
      for (const audience of [`${r.issuer}/v1/other`, 'https://elsewhere.example/v1/mcp', `${r.resource}/`]) {
        const token = await mintAccessToken(svc, { connectionId: good.connectionId, grantId: good.grantId, audience });
        challenged(await call(bearer(token)), 401, 'invalid_token');
      }
    });

    it('8. a token of another issuer: 401 invalid_token', async () => {
      const token = await mintAccessToken(svc, { connectionId: good.connectionId, grantId: good.grantId, issuer: 'https://other-as.example' });
      challenged(await call(bearer(token)), 401, 'invalid_token');
    });

    it('9. a token without the scope mcp: 403 insufficient_scope', async () => {
      const token = await mintAccessToken(svc, { connectionId: good.connectionId, grantId: good.grantId, scope: 'openid offline_access' });
      challenged(await call(bearer(token)), 403, 'insufficient_scope');
    });

    it('10. an API key (never accepted, never passed through): 401 invalid_token', async () => {
      challenged(await call(bearer(ws.keys.sales!.secret)), 401, 'invalid_token');
    });

    it('11. a token in the query string is never read: without a header 401 (no credentials), with one 400 invalid_request', async () => {
      challenged(await call({}, `?access_token=${good.token}`), 401, null);
      const both = await call(bearer(good.token), `?access_token=${good.token}`);
      assert.equal(both.status, 400, both.text);
      assert.ok(both.challenge.includes('error="invalid_request"'), both.challenge);
    });

    it('12. a connection revoked on the settings page: 401 invalid_token on the next call', async () => {
      const other = await mintConnection(svc, ws, { access: 'personal', member: 'olga', memberRole: 'owner', operations: ['customers.ListSalesPipelines'] });
      assert.equal((await call(bearer(other.token))).status, 200);
      await svc.db.sql.run(`UPDATE mcp_connections SET revoked_at = ? WHERE id = ?`, [svc.clock.now(), other.connectionId]);
      challenged(await call(bearer(other.token)), 401, 'invalid_token');
    });

    it('13. a personal connection whose member is disabled: 401 invalid_token', async () => {
      const gone = await mintConnection(svc, ws, { access: 'personal', member: 'bob', memberRole: 'admin', operations: ['customers.ListSalesPipelines'] });
      assert.equal((await call(bearer(gone.token))).status, 200);
      await svc.db.sql.run(`UPDATE members SET disabled_at = ? WHERE id = ?`, [svc.clock.now(), ws.members.bob!]);
      challenged(await call(bearer(gone.token)), 401, 'invalid_token');
    });

    it('14. a refresh token presented as an access token: 401 invalid_token', async () => {
      const refresh = 'R'.repeat(43);
      await svc.db.sql.run(`INSERT INTO oauth_records (model, id_hash, grant_id, uid_hash, payload, expires_at, consumed_at) VALUES ('RefreshToken', ?, ?, NULL, ?, ?, NULL)`, [
        sha256Hex(refresh),
        good.grantId,
        JSON.stringify({ kind: 'RefreshToken', accountId: good.connectionId, aud: mcpResource(svc.config.publicUrl).resource, iss: mcpResource(svc.config.publicUrl).issuer, scope: 'mcp', grantId: good.grantId }),
        svc.clock.now() + 86_400_000,
      ]);
      challenged(await call(bearer(refresh)), 401, 'invalid_token');
    });

    it('15. a member session cookie instead of a token: 401', async () => {
      const got = await call({ Cookie: 'wso_session=wss_000000000000000000000000_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' });
      assert.equal(got.status, 401, got.text);
      assert.ok(got.challenge.includes(`resource_metadata="${metadataUrl}"`), got.challenge);
    });

    it('the good token still works after all that (nothing above touched it)', async () => {
      assert.equal((await call(bearer(good.token))).status, 200);
    });
  });
}
