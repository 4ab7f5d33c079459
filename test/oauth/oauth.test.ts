/**
 * The authorization server of the MCP endpoint (handlers/mcp/oauth), end to end over HTTP on both databases:
 * discovery documents, dynamic registration (public and confidential clients), client id metadata
 * documents fetched through the egress from a local HTTPS server, PKCE, RFC 9207 `iss`, RFC 8707
 * resource binding and its guard, refresh rotation and replay, revocation, the interaction hand-over
 * (approve / deny), revokeGrant, the prune job, and what the table holds (never a token, code or secret).
 */
import assert from 'node:assert/strict';
import { sha256Hex } from '../../server/ids.ts';
import { canonicalResource } from '../../handlers/mcp/oauth/index.ts';
import { type Receiver, startReceiver, testCertificates } from '../support/receiver.ts';
import { databases } from '../support/service.ts';
import { authorize, Browser, pkce, REDIRECT, register, startAuthServer, startSecondProcess, type TestAuthServer, token } from './support.ts';

describe('oauth: canonical resource', () => {
  it('lowercases scheme and host, drops the default port and a trailing slash, refuses queries and fragments', () => {
    assert.equal(canonicalResource('HTTPS://Ops.Example.COM:443/v1/mcp/'), 'https://ops.example.com/v1/mcp');
    assert.equal(canonicalResource('http://127.0.0.1:8080/v1/mcp'), 'http://127.0.0.1:8080/v1/mcp');
    assert.equal(canonicalResource('https://ops.example.com/v1/mcp?x=1'), null);
    assert.equal(canonicalResource('https://ops.example.com/v1/mcp#f'), null);
    assert.equal(canonicalResource('urn:x'), null);
    assert.equal(canonicalResource('not a url'), null);
  });
});

for (const database of databases) {
  describe(`oauth: authorization server [${database.name}]`, function () {
    this.timeout(30_000);
    let server: TestAuthServer;
    let receiver: Receiver;
    /** Every secret value seen on the wire: none may be in oauth_records. */
    const secrets = new Set<string>();

    before(async () => {
      receiver = await startReceiver();
      const policy = Object.freeze({ allowedPorts: Object.freeze([]), allowDestinations: Object.freeze([{ host: '127.0.0.1', port: receiver.port }]), testCa: testCertificates().caPem });
      server = await startAuthServer(database.url(), policy);
    });
    after(async () => {
      await server?.close();
      await receiver?.close();
    });

    const publicClient = async (extra: Record<string, unknown> = {}) => {
      const reg = await register(server.origin, { client_name: 'Desk Agent', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none', application_type: 'native', ...extra });
      assert.equal(reg.status, 201, reg.text);
      return reg.json.client_id as string;
    };

    const fullFlow = async (clientId: string, auth: Record<string, string> = {}, headers: Record<string, string> = {}) => {
      const { verifier, challenge } = pkce();
      const { callback, connectionId, uid, browser } = await authorize(server, { clientId, challenge });
      const code = callback.searchParams.get('code')!;
      secrets.add(code);
      secrets.add(uid);
      for (const v of browser.cookieValues()) if (v.length >= 20) secrets.add(v);
      const t = await token(server.origin, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: verifier, resource: server.resource, ...auth }, headers);
      assert.equal(t.status, 200, t.text);
      secrets.add(t.json.access_token);
      secrets.add(t.json.refresh_token);
      return { ...t.json, connectionId } as { access_token: string; refresh_token: string; connectionId: string; scope: string; expires_in: number };
    };

    const accessRecord = async (accessToken: string) => {
      const row = await server.db.sql.one<{ payload: string; expires_at: number; grant_id: string }>(`SELECT payload, expires_at, grant_id FROM oauth_records WHERE model = 'AccessToken' AND id_hash = ?`, [sha256Hex(accessToken)]);
      return row ? { ...row, payload: JSON.parse(row.payload) } : undefined;
    };

    it('serves the authorization server metadata (RFC 8414) and the OpenID discovery document', async () => {
      for (const path of ['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration']) {
        const doc = await new Browser(server.origin).request(path);
        assert.equal(doc.status, 200, path);
        const m = doc.json;
        assert.equal(m.issuer, server.origin);
        assert.equal(m.authorization_endpoint, `${server.origin}/oauth/authorize`);
        assert.equal(m.token_endpoint, `${server.origin}/oauth/token`);
        assert.equal(m.registration_endpoint, `${server.origin}/oauth/register`);
        assert.equal(m.revocation_endpoint, `${server.origin}/oauth/revoke`);
        assert.deepEqual(m.response_types_supported, ['code']);
        assert.deepEqual(m.code_challenge_methods_supported, ['S256']);
        assert.equal(m.authorization_response_iss_parameter_supported, true);
        assert.equal(m.client_id_metadata_document_supported, true);
        assert.ok(m.grant_types_supported.includes('authorization_code') && m.grant_types_supported.includes('refresh_token'));
        assert.ok(!m.grant_types_supported.includes('implicit'));
        assert.ok(m.token_endpoint_auth_methods_supported.includes('none'));
        assert.ok(!m.token_endpoint_auth_methods_supported.includes('client_secret_jwt'));
        assert.equal(m.introspection_endpoint, undefined);
        assert.equal(m.userinfo_endpoint, undefined);
      }
    });

    it('registers a public client (DCR) with an mcl_ id and no secret', async () => {
      const reg = await register(server.origin, { client_name: 'Desk Agent', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none', application_type: 'native' });
      assert.equal(reg.status, 201, reg.text);
      assert.match(reg.json.client_id, /^mcl_[A-Za-z0-9_-]+$/);
      assert.equal(reg.json.client_secret, undefined);
      assert.equal(reg.json.registration_access_token, undefined);
      assert.deepEqual(reg.json.grant_types, ['authorization_code', 'refresh_token']);
    });

    it('registers a client with private-scheme redirect addresses and no application_type as native', async () => {
      const reg = await register(server.origin, { client_name: 'Editor', redirect_uris: ['cursor://anysphere.cursor-retrieval/oauth/callback'], token_endpoint_auth_method: 'none' });
      assert.equal(reg.status, 201, reg.text);
      assert.equal(reg.json.application_type, 'native');
      const web = await register(server.origin, { client_name: 'Editor', redirect_uris: ['cursor://x/cb'], token_endpoint_auth_method: 'none', application_type: 'web' });
      assert.equal(web.status, 400);
      assert.equal(web.json.error, 'invalid_redirect_uri');
      const loopback = await register(server.origin, { client_name: 'CLI', redirect_uris: ['http://localhost:33418/callback'], token_endpoint_auth_method: 'none' });
      assert.equal(loopback.status, 201, loopback.text);
      const notJson = await new Browser(server.origin).request('/oauth/register', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{nope' });
      assert.equal(notJson.status, 400);
      assert.equal(notJson.json.error, 'invalid_request');
    });

    it('refuses a registration with bad metadata', async () => {
      const reg = await register(server.origin, { client_name: 'x', redirect_uris: ['not a url'], token_endpoint_auth_method: 'none' });
      assert.equal(reg.status, 400);
      assert.equal(reg.json.error, 'invalid_redirect_uri');
    });

    it('runs the authorization code flow: iss on the redirect, a token bound to the resource and the connection', async () => {
      const clientId = await publicClient();
      const { verifier, challenge } = pkce();
      const { callback, connectionId, details } = await authorize(server, { clientId, challenge, state: 'abc' });
      assert.equal(`${callback.origin}${callback.pathname}`, REDIRECT);
      assert.equal(callback.searchParams.get('iss'), server.origin);
      assert.equal(callback.searchParams.get('state'), 'abc');
      assert.deepEqual(
        { clientId: details.clientId, clientName: details.clientName, redirectUri: details.redirectUri, resource: details.resource, scopes: details.scopes },
        { clientId, clientName: 'Desk Agent', redirectUri: REDIRECT, resource: server.resource, scopes: ['mcp'] },
      );
      const code = callback.searchParams.get('code')!;
      secrets.add(code);
      const t = await token(server.origin, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, client_id: clientId, code_verifier: verifier, resource: server.resource });
      assert.equal(t.status, 200, t.text);
      assert.equal(t.json.token_type, 'Bearer');
      assert.equal(t.json.scope, 'mcp');
      assert.equal(t.json.expires_in, 3600);
      assert.match(t.json.access_token, /^[A-Za-z0-9_-]{43}$/);
      assert.ok(t.json.refresh_token);
      secrets.add(t.json.access_token);
      secrets.add(t.json.refresh_token);
      const record = await accessRecord(t.json.access_token);
      assert.ok(record, 'the access token is stored under its hash');
      assert.equal(record.payload.aud, server.resource);
      assert.equal(record.payload.iss, server.origin);
      assert.equal(record.payload.accountId, connectionId);
      assert.equal(record.payload.clientId, clientId);
      assert.equal(record.payload.scope, 'mcp');
      assert.equal(record.payload.jti, undefined);
      assert.equal(record.expires_at, server.clock.now() + 3600_000);
      const conn = await server.db.sql.one<{ grant_id: string }>(`SELECT grant_id FROM mcp_connections WHERE id = ?`, [connectionId]);
      assert.equal(conn?.grant_id, record.payload.grantId);
      assert.equal(record.grant_id, record.payload.grantId);
      // The code works once.
      const again = await token(server.origin, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, client_id: clientId, code_verifier: verifier, resource: server.resource });
      assert.equal(again.status, 400);
      assert.equal(again.json.error, 'invalid_grant');
    });

    it('refuses plain PKCE and a request without PKCE, with iss on the error redirect (a client a member approved; others get a page: blackbox21-authorize)', async () => {
      const clientId = await publicClient();
      await authorize(server, { clientId, challenge: pkce().challenge });
      const { verifier } = pkce();
      const base = { client_id: clientId, response_type: 'code', redirect_uri: REDIRECT, scope: 'mcp', state: 's', resource: server.resource };
      const plain = await new Browser(server.origin).request(`/oauth/authorize?${new URLSearchParams({ ...base, code_challenge: verifier, code_challenge_method: 'plain' })}`);
      assert.equal(plain.status, 303);
      const p = new URL(plain.location!);
      assert.equal(p.searchParams.get('error'), 'invalid_request');
      assert.match(p.searchParams.get('error_description')!, /code_challenge_method/);
      assert.equal(p.searchParams.get('iss'), server.origin);
      const none = await new Browser(server.origin).request(`/oauth/authorize?${new URLSearchParams(base)}`);
      assert.equal(none.status, 303);
      const n = new URL(none.location!);
      assert.equal(n.searchParams.get('error'), 'invalid_request');
      assert.match(n.searchParams.get("error_description")!, /PKCE/);
      assert.equal(n.searchParams.get('iss'), server.origin);
    });

    it('refuses a wrong code_verifier', async () => {
      const clientId = await publicClient();
      const { challenge } = pkce();
      const { callback } = await authorize(server, { clientId, challenge });
      const t = await token(server.origin, { grant_type: 'authorization_code', code: callback.searchParams.get('code')!, redirect_uri: REDIRECT, client_id: clientId, code_verifier: pkce().verifier, resource: server.resource });
      assert.equal(t.status, 400);
      assert.equal(t.json.error, 'invalid_grant');
    });

    it('answers invalid_target for another resource at the authorization and token endpoints, before anything is consumed', async () => {
      const clientId = await publicClient();
      const { verifier, challenge } = pkce();
      const { callback } = await authorize(server, { clientId, challenge });
      // Approved by a member now, so the error goes back to the client.
      const q = new URLSearchParams({ client_id: clientId, response_type: 'code', redirect_uri: REDIRECT, scope: 'mcp', state: 's', code_challenge: challenge, code_challenge_method: 'S256', resource: 'https://other.example/mcp' });
      const at = await new Browser(server.origin).request(`/oauth/authorize?${q}`);
      assert.equal(at.status, 303);
      assert.equal(new URL(at.location!).searchParams.get('error'), 'invalid_target');
      assert.equal(new URL(at.location!).searchParams.get('iss'), server.origin);

      const code = callback.searchParams.get('code')!;
      secrets.add(code);
      for (const other of ['https://other.example/mcp', `${server.resource}/x`, `${server.resource}?a=1`]) {
        const bad = await token(server.origin, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, client_id: clientId, code_verifier: verifier, resource: other });
        assert.equal(bad.status, 400, other);
        assert.equal(bad.json.error, 'invalid_target', other);
      }
      // Still unused: the exchange with the right resource (spelt with a trailing slash and upper-case host) works.
      const spelt = server.resource.replace('127.0.0.1', '127.0.0.1').replace('http://', 'HTTP://') + '/';
      const good = await token(server.origin, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, client_id: clientId, code_verifier: verifier, resource: spelt });
      assert.equal(good.status, 200, good.text);
      secrets.add(good.json.access_token);
      secrets.add(good.json.refresh_token);
      assert.equal((await accessRecord(good.json.access_token))?.payload.aud, server.resource);
    });

    it('accepts a trailing-slash resource at the authorization endpoint', async () => {
      const clientId = await publicClient();
      const { verifier, challenge } = pkce();
      const { callback } = await authorize(server, { clientId, challenge, resource: `${server.resource}/` });
      const t = await token(server.origin, { grant_type: 'authorization_code', code: callback.searchParams.get('code')!, redirect_uri: REDIRECT, client_id: clientId, code_verifier: verifier, resource: server.resource });
      assert.equal(t.status, 200, t.text);
      secrets.add(t.json.access_token);
      secrets.add(t.json.refresh_token);
    });

    it('rotates refresh tokens, accepts a trailing-slash resource on refresh, and revokes the family on replay', async () => {
      const clientId = await publicClient();
      const first = await fullFlow(clientId, { client_id: clientId });
      // Another resource on refresh: refused before the token is consumed.
      const other = await token(server.origin, { grant_type: 'refresh_token', refresh_token: first.refresh_token, client_id: clientId, resource: 'https://other.example/mcp' });
      assert.equal(other.status, 400);
      assert.equal(other.json.error, 'invalid_target');
      const second = await token(server.origin, { grant_type: 'refresh_token', refresh_token: first.refresh_token, client_id: clientId, resource: `${server.resource}/` });
      assert.equal(second.status, 200, second.text);
      secrets.add(second.json.access_token);
      secrets.add(second.json.refresh_token);
      assert.notEqual(second.json.refresh_token, first.refresh_token, 'rotated');
      assert.equal((await accessRecord(second.json.access_token))?.payload.aud, server.resource);
      // Without a resource: the granted one.
      const third = await token(server.origin, { grant_type: 'refresh_token', refresh_token: second.json.refresh_token, client_id: clientId });
      assert.equal(third.status, 200, third.text);
      secrets.add(third.json.access_token);
      secrets.add(third.json.refresh_token);
      assert.equal((await accessRecord(third.json.access_token))?.payload.aud, server.resource);
      // Replay of a used one: invalid_grant, and every token of the grant is dead.
      const replay = await token(server.origin, { grant_type: 'refresh_token', refresh_token: first.refresh_token, client_id: clientId, resource: server.resource });
      assert.equal(replay.status, 400);
      assert.equal(replay.json.error, 'invalid_grant');
      const newest = await token(server.origin, { grant_type: 'refresh_token', refresh_token: third.json.refresh_token, client_id: clientId, resource: server.resource });
      assert.equal(newest.status, 400);
      assert.equal(newest.json.error, 'invalid_grant');
      assert.equal(await accessRecord(third.json.access_token), undefined);
      assert.equal(await accessRecord(first.access_token), undefined);
    });

    it('lets one of two simultaneous refreshes win; the loser revokes the grant', async () => {
      const clientId = await publicClient();
      const first = await fullFlow(clientId, { client_id: clientId });
      const both = await Promise.all([0, 1].map(() => token(server.origin, { grant_type: 'refresh_token', refresh_token: first.refresh_token, client_id: clientId, resource: server.resource })));
      for (const b of both) if (b.status === 200) (secrets.add(b.json.access_token), secrets.add(b.json.refresh_token));
      assert.ok(both.some((b) => b.status === 400 && b.json.error === 'invalid_grant'), JSON.stringify(both.map((b) => b.json)));
      const rows = await server.db.sql.all(`SELECT model FROM oauth_records WHERE grant_id = (SELECT grant_id FROM mcp_connections WHERE id = ?)`, [first.connectionId]);
      assert.deepEqual(rows, []);
    });

    it('revokes access and refresh tokens at the revocation endpoint (RFC 7009)', async () => {
      const clientId = await publicClient();
      const t = await fullFlow(clientId, { client_id: clientId });
      const revoke = (tokenValue: string, hint?: string) =>
        new Browser(server.origin).request('/oauth/revoke', { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ token: tokenValue, client_id: clientId, ...(hint ? { token_type_hint: hint } : {}) }).toString() });
      assert.equal((await revoke(t.access_token, 'access_token')).status, 200);
      assert.equal(await accessRecord(t.access_token), undefined);
      assert.equal((await revoke(t.refresh_token)).status, 200);
      const after = await token(server.origin, { grant_type: 'refresh_token', refresh_token: t.refresh_token, client_id: clientId, resource: server.resource });
      assert.equal(after.status, 400);
      assert.equal(after.json.error, 'invalid_grant');
      // An unknown token is answered 200 too (RFC 7009 §2.2).
      assert.equal((await revoke('x'.repeat(43))).status, 200);
    });

    it('registers a confidential client whose secret is stored hashed and checked at the token endpoint', async () => {
      const reg = await register(server.origin, { client_name: 'Web Agent', redirect_uris: ['https://agent.example/cb', REDIRECT], token_endpoint_auth_method: 'client_secret_basic', application_type: 'native' });
      assert.equal(reg.status, 201, reg.text);
      const { client_id: clientId, client_secret: secret } = reg.json as { client_id: string; client_secret: string };
      assert.ok(secret && secret.length >= 43);
      secrets.add(secret);
      const basic = (s: string) => ({ authorization: `Basic ${Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(s)}`).toString('base64')}` });
      const t = await fullFlow(clientId, {}, basic(secret));
      assert.ok(t.access_token);
      const wrong = await token(server.origin, { grant_type: 'refresh_token', refresh_token: t.refresh_token, resource: server.resource }, basic(`${secret}x`));
      assert.equal(wrong.status, 401);
      assert.equal(wrong.json.error, 'invalid_client');
      const right = await token(server.origin, { grant_type: 'refresh_token', refresh_token: t.refresh_token, resource: server.resource }, basic(secret));
      assert.equal(right.status, 200, right.text);
      secrets.add(right.json.access_token);
      secrets.add(right.json.refresh_token);
      const stored = await server.db.sql.one<{ payload: string }>(`SELECT payload FROM oauth_records WHERE model = 'Client' AND id_hash = ?`, [sha256Hex(clientId)]);
      assert.equal(JSON.parse(stored!.payload).client_secret, `sha256:${sha256Hex(secret)}`);
    });

    it('accepts a client id metadata document fetched over HTTPS through the egress', async () => {
      const clientId = `https://127.0.0.1:${receiver.port}/clients/desk.json`;
      receiver.answer((req) =>
        req.url === '/clients/desk.json'
          ? { status: 200, headers: { 'content-type': 'application/json', 'cache-control': 'max-age=60' }, body: JSON.stringify({ client_id: clientId, client_name: 'Metadata Agent', client_uri: 'https://agent.example', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none', application_type: 'native', grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'] }) }
          : { status: 404, body: 'no' },
      );
      const { verifier, challenge } = pkce();
      const { callback, details } = await authorize(server, { clientId, challenge });
      assert.equal(details.clientName, 'Metadata Agent');
      assert.equal(details.clientUri, 'https://agent.example');
      const t = await token(server.origin, { grant_type: 'authorization_code', code: callback.searchParams.get('code')!, redirect_uri: REDIRECT, client_id: clientId, code_verifier: verifier, resource: server.resource });
      assert.equal(t.status, 200, t.text);
      secrets.add(t.json.access_token);
      secrets.add(t.json.refresh_token);
      assert.equal((await accessRecord(t.json.access_token))?.payload.clientId, clientId);
      assert.ok(receiver.requests.some((r) => r.method === 'GET' && r.url === '/clients/desk.json'));
      // Metadata-document clients are not stored (the document is).
      assert.equal(await server.db.sql.one(`SELECT 1 AS x FROM oauth_records WHERE model = 'Client' AND id_hash = ?`, [sha256Hex(clientId)]), undefined);
    });

    it('refuses a metadata document that names another client, is too large, redirects, or is not reachable under the egress policy', async () => {
      const cases: Array<{ path: string; answer: { status: number; headers?: Record<string, string>; body?: string } }> = [
        { path: '/c/mismatch.json', answer: { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ client_id: 'https://elsewhere.example/c.json', client_name: 'x', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' }) } },
        { path: '/c/large.json', answer: { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ client_id: `https://127.0.0.1:${receiver.port}/c/large.json`, client_name: 'x'.repeat(6000), redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' }) } },
        { path: '/c/moved.json', answer: { status: 302, headers: { location: `https://127.0.0.1:${receiver.port}/clients/desk.json` } } },
        { path: '/c/secret.json', answer: { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ client_id: `https://127.0.0.1:${receiver.port}/c/secret.json`, client_name: 'x', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'client_secret_basic' }) } },
      ];
      receiver.answer((req) => cases.find((c) => c.path === req.url)?.answer ?? { status: 404 });
      const { challenge } = pkce();
      const urls = [...cases.map((c) => `https://127.0.0.1:${receiver.port}${c.path}`), 'https://127.0.0.2:9/c.json', 'https://10.0.0.1/c.json'];
      for (const clientId of urls) {
        const q = new URLSearchParams({ client_id: clientId, response_type: 'code', redirect_uri: REDIRECT, scope: 'mcp', code_challenge: challenge, code_challenge_method: 'S256', resource: server.resource });
        const page = await new Browser(server.origin).request(`/oauth/authorize?${q}`);
        assert.equal(page.status, 400, `${clientId}: ${page.status} ${page.location}`);
        assert.match(page.headers.get('content-type')!, /text\/html/);
        assert.match(page.headers.get('content-security-policy')!, /frame-ancestors 'none'/);
        assert.equal(page.headers.get('x-frame-options'), 'DENY');
        assert.match(page.text, /invalid_client/);
      }
    });

    it('accepts the OpenID scopes beside mcp (an ID token naming the connection; refresh either way)', async () => {
      const clientId = await publicClient();
      const { verifier, challenge } = pkce();
      const { callback, connectionId } = await authorize(server, { clientId, challenge, scope: 'openid offline_access mcp' });
      const t = await token(server.origin, { grant_type: 'authorization_code', code: callback.searchParams.get('code')!, redirect_uri: REDIRECT, client_id: clientId, code_verifier: verifier, resource: server.resource });
      assert.equal(t.status, 200, t.text);
      secrets.add(t.json.access_token);
      secrets.add(t.json.refresh_token);
      assert.ok(t.json.refresh_token);
      assert.equal(JSON.parse(Buffer.from(t.json.id_token.split('.')[1], 'base64url').toString()).sub, connectionId);
      assert.equal(JSON.parse(Buffer.from(t.json.id_token.split('.')[0], 'base64url').toString()).alg, 'ES256');
      assert.equal((await accessRecord(t.json.access_token))?.payload.aud, server.resource);
    });

    it('is one authorization server across processes: keys from service_secrets, records in the database', async () => {
      const clientId = await publicClient();
      const t = await fullFlow(clientId, { client_id: clientId });
      const other = await startSecondProcess(server);
      try {
        const jwks = async (origin: string) => (await new Browser(origin).request('/oauth/jwks')).json;
        assert.deepEqual(await jwks(other.origin), await jwks(server.origin));
        assert.equal((await jwks(server.origin)).keys[0].d, undefined);
        const r = await token(other.origin, { grant_type: 'refresh_token', refresh_token: t.refresh_token, client_id: clientId, resource: server.resource });
        assert.equal(r.status, 200, r.text);
        secrets.add(r.json.access_token);
        secrets.add(r.json.refresh_token);
        assert.equal((await accessRecord(r.json.access_token))?.payload.iss, server.origin);
      } finally {
        await other.close();
      }
    });

    it('authorizes again in the same browser as a new connection, through the consent page again', async () => {
      const clientId = await publicClient();
      const { challenge, verifier } = pkce();
      const first = await authorize(server, { clientId, challenge });
      for (const v of first.browser.cookieValues()) if (v.length >= 20) secrets.add(v);
      const second = await authorize(server, { clientId, challenge, browser: first.browser, state: 'again' });
      for (const v of second.browser.cookieValues()) if (v.length >= 20) secrets.add(v);
      assert.notEqual(second.connectionId, first.connectionId);
      assert.equal(second.callback.searchParams.get('state'), 'again');
      const t = await token(server.origin, { grant_type: 'authorization_code', code: second.callback.searchParams.get('code')!, redirect_uri: REDIRECT, client_id: clientId, code_verifier: verifier, resource: server.resource });
      assert.equal(t.status, 200, t.text);
      secrets.add(t.json.access_token);
      secrets.add(t.json.refresh_token);
      assert.equal((await accessRecord(t.json.access_token))?.payload.accountId, second.connectionId);
    });

    it('sends access_denied back to the client when the member declines', async () => {
      const clientId = await publicClient();
      const { challenge } = pkce();
      const { callback, connectionId } = await authorize(server, { clientId, challenge, deny: true, state: 'd1' });
      assert.equal(connectionId, null);
      assert.equal(callback.searchParams.get('error'), 'access_denied');
      assert.equal(callback.searchParams.get('state'), 'd1');
      assert.equal(callback.searchParams.get('iss'), server.origin);
      assert.equal(callback.searchParams.get('code'), null);
    });

    it('answers null for an interaction that is gone, and for a uid that is not this browser\'s', async () => {
      const page = await new Browser(server.origin).request('/oauth/consent/nosuchuid');
      assert.equal(page.status, 404);
    });

    it('revokeGrant kills every token of the grant; a revoked connection gets no new token', async () => {
      const clientId = await publicClient();
      const t = await fullFlow(clientId, { client_id: clientId });
      const { grant_id: grantId } = (await server.db.sql.one<{ grant_id: string }>(`SELECT grant_id FROM mcp_connections WHERE id = ?`, [t.connectionId]))!;
      await server.oauth.revokeGrant(grantId);
      assert.equal(await accessRecord(t.access_token), undefined);
      const r = await token(server.origin, { grant_type: 'refresh_token', refresh_token: t.refresh_token, client_id: clientId, resource: server.resource });
      assert.equal(r.status, 400);
      assert.equal(r.json.error, 'invalid_grant');

      const u = await fullFlow(clientId, { client_id: clientId });
      await server.db.sql.run(`UPDATE mcp_connections SET revoked_at = ? WHERE id = ?`, [server.clock.now(), u.connectionId]);
      const v = await token(server.origin, { grant_type: 'refresh_token', refresh_token: u.refresh_token, client_id: clientId, resource: server.resource });
      assert.equal(v.status, 400);
      assert.equal(v.json.error, 'invalid_grant');
    });

    it('holds no token, code, client secret, session id or interaction uid in clear', async () => {
      assert.ok(secrets.size > 20, `collected ${secrets.size} secrets`);
      const rows = await server.db.sql.all<Record<string, unknown>>(`SELECT * FROM oauth_records`);
      assert.ok(rows.length > 10);
      const dump = JSON.stringify(rows);
      for (const s of secrets) assert.ok(!dump.includes(s), `a secret value is stored in clear (${s.slice(0, 6)}...)`);
      for (const row of rows) {
        assert.match(String(row.id_hash), /^[0-9a-f]{64}$/);
        const payload = JSON.parse(String(row.payload));
        assert.equal(payload.jti, undefined);
        assert.equal(payload.iss, server.origin);
        if (row.model === 'Interaction') assert.equal(payload.session?.cookie, undefined);
      }
    });

    it('prunes records a day past their expiry (oauth.prune)', async () => {
      const before = Number((await server.db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM oauth_records WHERE expires_at IS NOT NULL`))!.n);
      assert.ok(before > 0);
      const job = server.oauth.pruneJob();
      assert.equal(job.everyMs, 3_600_000);
      await job.run(undefined);
      assert.equal(Number((await server.db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM oauth_records WHERE expires_at IS NOT NULL`))!.n), before);
      const clients = await server.db.sql.all<{ id_hash: string }>(`SELECT id_hash FROM oauth_records WHERE model = 'Client'`);
      server.clock.advance(366 * 86_400_000 + 86_400_000 + 1000);
      await job.run(undefined);
      assert.equal(Number((await server.db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM oauth_records WHERE expires_at IS NOT NULL`))!.n), 0);
      // Registrations: those a connection names stay; the others go 30 days after registration.
      const used = new Set((await server.db.sql.all<{ client_id: string }>(`SELECT DISTINCT client_id FROM mcp_connections`)).map((r) => sha256Hex(r.client_id)));
      const unused = clients.filter((c) => !used.has(c.id_hash));
      assert.ok(unused.length > 0 && clients.length > unused.length);
      const remaining = await server.db.sql.all<{ id_hash: string }>(`SELECT id_hash FROM oauth_records WHERE model = 'Client'`);
      assert.deepEqual(remaining.map((c) => c.id_hash).sort(), clients.filter((c) => used.has(c.id_hash)).map((c) => c.id_hash).sort());
    });
  });
}
