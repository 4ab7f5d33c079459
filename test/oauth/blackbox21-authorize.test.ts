/**
 * Issue 21 (an outside MCP/OAuth client written from the RFCs), the authorization endpoint:
 * - errors for a client no member has approved (no live connection with that redirect address) are a
 *   page of the service, never a redirect to the client (no open redirector on the service's host);
 *   PKCE and prompt=none included; registration takes `http` redirect addresses only on loopback hosts;
 * - /oauth/authorize is rate limited per client address in the shared rate_limits table, and a client id
 *   metadata document that failed is fetched once (not twice per request, not again for a while);
 * - a browser whose provider session names a revoked connection reaches the consent page again (not a 500);
 * - a request without `scope` gets the default `mcp`; one without `mcp` (only `openid`) is invalid_scope.
 */
import assert from 'node:assert/strict';
import { revokeConnection } from '../../handlers/mcp/connections.ts';
import { FAILED_DOCUMENT_TTL_MS, OAUTH_LIMITS } from '../../handlers/mcp/oauth/index.ts';
import { type Receiver, startReceiver, testCertificates } from '../support/receiver.ts';
import { databases } from '../support/service.ts';
import { authorize, type Answer, Browser, pkce, REDIRECT, register, startAuthServer, type TestAuthServer, token } from './support.ts';

const EVIL = 'https://evil.example/landing';

/** A page of the service, not a redirect anywhere. */
function assertPage(answer: Answer, error: string, what: string): void {
  assert.equal(answer.location, null, `${what}: redirected to ${answer.location}`);
  assert.equal(answer.status, 400, `${what}: ${answer.status} ${answer.text.slice(0, 200)}`);
  assert.match(answer.headers.get('content-type')!, /text\/html/, what);
  assert.match(answer.text, new RegExp(error), what);
}

for (const database of databases) {
  describe(`oauth: authorization endpoint, issue 21 [${database.name}]`, function () {
    this.timeout(60_000);
    let server: TestAuthServer;
    let receiver: Receiver;

    before(async () => {
      receiver = await startReceiver();
      const policy = Object.freeze({ allowedPorts: Object.freeze([]), allowDestinations: Object.freeze([{ host: '127.0.0.1', port: receiver.port }]), testCa: testCertificates().caPem });
      server = await startAuthServer(database.url(), policy);
    });
    after(async () => {
      await server?.close();
      await receiver?.close();
    });
    // Every test starts with the address's authorize budget full again (the limit has its own test).
    beforeEach(() => server.clock.advance(OAUTH_LIMITS.authorize.perMs));

    const client = async (redirectUris: string[], extra: Record<string, unknown> = {}) => {
      const reg = await register(server.origin, { client_name: 'Outside Agent', redirect_uris: redirectUris, token_endpoint_auth_method: 'none', ...extra });
      assert.equal(reg.status, 201, reg.text);
      return reg.json.client_id as string;
    };
    const query = (clientId: string, redirectUri: string, extra: Record<string, string> = {}) =>
      new URLSearchParams({ client_id: clientId, response_type: 'code', redirect_uri: redirectUri, scope: 'mcp', state: 's1', code_challenge: pkce().challenge, code_challenge_method: 'S256', resource: server.resource, ...extra });
    const withoutPkce = (q: URLSearchParams) => {
      q.delete('code_challenge');
      q.delete('code_challenge_method');
      return q;
    };

    it('shows errors for a client nobody approved as a page (no PKCE, plain PKCE, prompt=none, another resource), redirects them once a member approved it', async () => {
      const clientId = await client([EVIL]);
      const anonymous = () => new Browser(server.origin);
      assertPage(await anonymous().request(`/oauth/authorize?${withoutPkce(query(clientId, EVIL))}`), 'invalid_request', 'without PKCE');
      assertPage(await anonymous().request(`/oauth/authorize?${query(clientId, EVIL, { code_challenge: 'x'.repeat(43), code_challenge_method: 'plain' })}`), 'invalid_request', 'plain PKCE');
      assertPage(await anonymous().request(`/oauth/authorize?${query(clientId, EVIL, { prompt: 'none' })}`), 'login_required', 'prompt=none');
      assertPage(await anonymous().request(`/oauth/authorize?${query(clientId, EVIL, { resource: 'https://other.example/mcp' })}`), 'invalid_target', 'another resource');
      const posted = await anonymous().request('/oauth/authorize', { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: withoutPkce(query(clientId, EVIL)).toString() });
      // The endpoint takes GET only (oidc-provider's enableHttpPostMethods is off): never a redirect either.
      assert.equal(posted.location, null);
      assert.equal(posted.status, 404);

      // A member approves it (the consent page shows the address): from then on errors go back to the client (RFC 6749 §4.1.2.1).
      const { challenge } = pkce();
      const approved = await authorize(server, { clientId, challenge, redirectUri: EVIL });
      assert.equal(`${approved.callback.origin}${approved.callback.pathname}`, EVIL);
      const after = await anonymous().request(`/oauth/authorize?${withoutPkce(query(clientId, EVIL))}`);
      assert.equal(after.status, 303, after.text.slice(0, 200));
      const back = new URL(after.location!);
      assert.equal(`${back.origin}${back.pathname}`, EVIL);
      assert.equal(back.searchParams.get('error'), 'invalid_request');
      assert.equal(back.searchParams.get('state'), 's1');
      assert.equal(back.searchParams.get('iss'), server.origin);
      const none = await anonymous().request(`/oauth/authorize?${query(clientId, EVIL, { prompt: 'none' })}`);
      assert.equal(new URL(none.location!).searchParams.get('error'), 'login_required');

      // Revoked: nobody approves it any more, so a page again.
      await revokeConnection(server.db, server.clock, approved.connectionId!, { revokeGrant: (g) => server.oauth.revokeGrant(g) });
      assertPage(await anonymous().request(`/oauth/authorize?${withoutPkce(query(clientId, EVIL))}`), 'invalid_request', 'after the revoke');
    });

    it('approval is for the address the member saw: another registered address of the client gets a page', async () => {
      const other = 'https://app.example/second';
      const clientId = await client([EVIL, other]);
      await authorize(server, { clientId, challenge: pkce().challenge, redirectUri: EVIL });
      assertPage(await new Browser(server.origin).request(`/oauth/authorize?${withoutPkce(query(clientId, other))}`), 'invalid_request', 'other address');
    });

    it('registers http redirect addresses on loopback hosts only (invalid_redirect_uri otherwise, RFC 7591)', async () => {
      for (const uri of ['http://evil.example/landing', 'http://192.168.1.10/cb', 'http://127.0.0.1.evil.example/cb']) {
        for (const applicationType of ['web', 'native']) {
          const reg = await register(server.origin, { client_name: 'x', redirect_uris: [uri], token_endpoint_auth_method: 'none', application_type: applicationType });
          assert.equal(reg.status, 400, `${uri} (${applicationType}): ${reg.status} ${reg.text}`);
          assert.equal(reg.json.error, 'invalid_redirect_uri', `${uri} (${applicationType})`);
        }
      }
      // A metadata document naming such an address: refused at the authorization endpoint, on a page.
      const documentId = `https://127.0.0.1:${receiver.port}/clients/http.json`;
      receiver.answer((req) =>
        req.url === '/clients/http.json'
          ? { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ client_id: documentId, client_name: 'Doc', redirect_uris: ['http://evil.example/cb'], token_endpoint_auth_method: 'none' }) }
          : { status: 404 },
      );
      assertPage(await new Browser(server.origin).request(`/oauth/authorize?${query(documentId, 'http://evil.example/cb')}`), 'invalid_redirect_uri', 'document with an http address');
      const mixed = await register(server.origin, { client_name: 'x', redirect_uris: [REDIRECT, 'http://evil.example/cb'], token_endpoint_auth_method: 'none' });
      assert.equal(mixed.status, 400, mixed.text);
      for (const uri of ['http://127.0.0.1:5555/cb', 'http://localhost:8080/callback', 'http://[::1]:9000/cb', 'https://app.example/cb', 'cursor://anysphere.cursor-mcp/oauth/callback']) {
        const reg = await register(server.origin, { client_name: 'x', redirect_uris: [uri], token_endpoint_auth_method: 'none' });
        assert.equal(reg.status, 201, `${uri}: ${reg.text}`);
      }
    });

    it('fetches a failing client id metadata document once per request and not again for a while', async () => {
      receiver.answer(() => ({ status: 404, body: 'no' }));
      const fetchesOf = (path: string) => receiver.requests.filter((r) => r.url === path).length;
      const path = '/clients/missing.json';
      const clientId = `https://127.0.0.1:${receiver.port}${path}`;
      const first = await new Browser(server.origin).request(`/oauth/authorize?${query(clientId, REDIRECT)}`);
      assertPage(first, 'invalid_client', 'missing document');
      assert.equal(fetchesOf(path), 1);
      for (let i = 0; i < 5; i++) assertPage(await new Browser(server.origin).request(`/oauth/authorize?${query(clientId, REDIRECT)}`), 'invalid_client', `again ${i}`);
      assert.equal(fetchesOf(path), 1, 'the failure is remembered');
      server.clock.advance(FAILED_DOCUMENT_TTL_MS + 1);
      await new Browser(server.origin).request(`/oauth/authorize?${query(clientId, REDIRECT)}`);
      assert.equal(fetchesOf(path), 2, 'tried again after FAILED_DOCUMENT_TTL_MS');
      // A new id each time: one fetch each, not two.
      for (let i = 0; i < 5; i++) await new Browser(server.origin).request(`/oauth/authorize?${query(`https://127.0.0.1:${receiver.port}/clients/n${i}.json`, REDIRECT)}`);
      for (let i = 0; i < 5; i++) assert.equal(fetchesOf(`/clients/n${i}.json`), 1, `n${i}`);
    });

    it('limits /oauth/authorize per client address in the shared rate_limits table (429 with Retry-After, nothing fetched past it)', async () => {
      receiver.answer(() => ({ status: 404, body: 'no' }));
      const before = receiver.requests.length;
      const { requests } = OAUTH_LIMITS.authorize;
      const answers: number[] = [];
      for (let i = 0; i < requests + 5; i++) {
        const res = await new Browser(server.origin).request(`/oauth/authorize?${query(`https://127.0.0.1:${receiver.port}/clients/flood-${i}.json`, REDIRECT)}`);
        answers.push(res.status);
        if (res.status === 429) {
          assert.match(res.headers.get('retry-after')!, /^\d+$/);
          assert.equal(res.json.error, 'rate_limited');
        }
      }
      assert.deepEqual(answers, [...Array<number>(requests).fill(400), ...Array<number>(5).fill(429)]);
      assert.equal(receiver.requests.length - before, requests, 'one fetch per admitted request, none for refused ones');
      const bucket = await server.db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM rate_limits WHERE bucket LIKE 'signin-oauth/authorize:%'`);
      assert.equal(Number(bucket!.n), 1);
      server.clock.advance(OAUTH_LIMITS.authorize.perMs);
      assert.equal((await new Browser(server.origin).request(`/oauth/authorize?${query('mcl_nosuch', REDIRECT)}`)).status, 400);
    });

    it('reconnecting in the same browser after the connection was revoked reaches the consent page again', async () => {
      const clientId = await client([REDIRECT], { application_type: 'native' });
      for (const revokeGrant of [(g: string) => server.oauth.revokeGrant(g), undefined]) {
        const first = await authorize(server, { clientId, challenge: pkce().challenge });
        await revokeConnection(server.db, server.clock, first.connectionId!, revokeGrant ? { revokeGrant } : {});
        const { verifier, challenge } = pkce();
        const again = await authorize(server, { clientId, challenge, browser: first.browser, state: 'again' });
        assert.notEqual(again.connectionId, first.connectionId);
        const t = await token(server.origin, { grant_type: 'authorization_code', code: again.callback.searchParams.get('code')!, redirect_uri: REDIRECT, client_id: clientId, code_verifier: verifier, resource: server.resource });
        assert.equal(t.status, 200, t.text);
      }
      assert.doesNotMatch(server.logs(), /getOIDCScopeEncountered/);
    });

    it('gives a request without scope the default scope mcp (a browser with a session too); refuses one without mcp with invalid_scope', async () => {
      const web = 'https://app.example/cb';
      const clientId = await client([web], { application_type: 'web' });
      const { verifier, challenge } = pkce();
      const first = await authorize(server, { clientId, challenge, redirectUri: web });
      const t1 = await token(server.origin, { grant_type: 'authorization_code', code: first.callback.searchParams.get('code')!, redirect_uri: web, client_id: clientId, code_verifier: verifier, resource: server.resource });
      assert.equal(t1.status, 200, t1.text);

      // The same browser (it holds the provider session now), no scope: the consent page, then a token for mcp.
      const q = query(clientId, web, { code_challenge: challenge });
      q.delete('scope');
      const start = await first.browser.request(`/oauth/authorize?${q}`);
      assert.equal(start.status, 303, start.text.slice(0, 200));
      assert.match(start.location!, /^\/oauth\/consent\//, start.location!);
      const details = await first.browser.request(start.location!);
      assert.deepEqual(details.json.scopes, ['mcp']);
      const decided = await first.browser.request(`${start.location}/approve`, { method: 'POST' });
      const resumed = await first.browser.request(decided.location!);
      const code = new URL(resumed.location!).searchParams.get('code');
      assert.ok(code, resumed.location!);
      const t2 = await token(server.origin, { grant_type: 'authorization_code', code, redirect_uri: web, client_id: clientId, code_verifier: verifier, resource: server.resource });
      assert.equal(t2.status, 200, t2.text);
      assert.equal(t2.json.scope, 'mcp');

      // Only openid (or offline_access): no token with an empty scope; the client is approved, so the error goes back to it.
      for (const scope of ['openid', 'openid offline_access']) {
        const only = await first.browser.request(`/oauth/authorize?${query(clientId, web, { scope })}`);
        assert.equal(only.status, 303, `${scope}: ${only.text.slice(0, 200)}`);
        const back = new URL(only.location!);
        assert.equal(`${back.origin}${back.pathname}`, web, scope);
        assert.equal(back.searchParams.get('error'), 'invalid_scope', scope);
      }
      // For a client nobody approved: the same error on a page.
      const fresh = await client([web], { application_type: 'web' });
      assertPage(await new Browser(server.origin).request(`/oauth/authorize?${query(fresh, web, { scope: 'openid' })}`), 'invalid_scope', 'openid only, unapproved');
    });
  });
}
