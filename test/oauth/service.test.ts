/**
 * The authorization server inside the service (server/service.ts mounts it): its discovery documents
 * at the root, a registration, its errors through the page layer, and the request log's lines for its
 * URLs (no query string, no interaction id).
 */
import assert from 'node:assert/strict';
import { OAUTH_LIMITS } from '../../handlers/mcp/oauth/index.ts';
import { forEachDatabase } from '../support/service.ts';

forEachDatabase('oauth: in the service', (ctx) => {
  it('serves the discovery documents and registration at the root of the service', async () => {
    const { origin } = ctx();
    for (const path of ['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration']) {
      const res = await fetch(`${origin}${path}`);
      assert.equal(res.status, 200, path);
      const doc = (await res.json()) as Record<string, unknown>;
      assert.equal(doc.issuer, ctx().config.publicUrl);
      // Endpoints under PUBLIC_URL, whatever host the request used.
      assert.equal(doc.token_endpoint, `${ctx().config.publicUrl}/oauth/token`);
    }
    const reg = await fetch(`${origin}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'Agent', redirect_uris: ['http://127.0.0.1:5555/cb'], token_endpoint_auth_method: 'none', application_type: 'native' }),
    });
    assert.equal(reg.status, 201);
    const clientId = ((await reg.json()) as { client_id: string }).client_id;
    assert.match(clientId, /^mcl_/);
    // The token endpoint reads its form body (nothing before it in the service consumed it).
    const post = (params: Record<string, string>) =>
      fetch(`${origin}/oauth/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(params).toString() });
    const unknown = await post({ grant_type: 'refresh_token', refresh_token: 'x'.repeat(43), client_id: clientId });
    assert.equal(unknown.status, 400);
    const unknownBody = (await unknown.json()) as { error: string };
    assert.equal(unknownBody.error, 'invalid_grant', JSON.stringify(unknownBody));
    const other = await post({ grant_type: 'refresh_token', refresh_token: 'x'.repeat(43), client_id: clientId, resource: 'https://other.example/v1/mcp' });
    assert.equal(other.status, 400);
    assert.equal(((await other.json()) as { error: string }).error, 'invalid_target');
  });

  it('shows authorization errors on a page of the service, framed by nobody', async () => {
    const { origin } = ctx();
    const res = await fetch(`${origin}/oauth/authorize?client_id=mcl_nosuchclient&response_type=code&code_challenge=x&code_challenge_method=S256&state=secretstate`, { redirect: 'manual' });
    assert.equal(res.status, 400);
    assert.match(res.headers.get('content-type')!, /text\/html/);
    assert.match(res.headers.get('content-security-policy')!, /frame-ancestors 'none'/);
    const html = await res.text();
    assert.match(html, /Authorization failed/);
    assert.match(html, /invalid_client/);
    assert.match(html, /<link[^>]+page\.css/);
    const line = ctx().logs().split('\n').find((l) => l.includes('/oauth/authorize'));
    assert.ok(line, 'a request log line');
    assert.ok(!line.includes('secretstate'), line);
    assert.match(line, /\/oauth\/authorize\?\[redacted\]/);
  });

  it('limits registrations and token requests per client address (shared table), 429 with Retry-After, and lets them in again later', async () => {
    const { origin, clock } = ctx();
    const register = () =>
      fetch(`${origin}/oauth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ client_name: 'Flood', redirect_uris: ['http://127.0.0.1:5555/cb'], token_endpoint_auth_method: 'none', application_type: 'native' }),
      });
    // The first test registered once from this address already.
    const answers: number[] = [];
    for (let i = 0; i < OAUTH_LIMITS.register.requests; i++) answers.push((await register()).status);
    assert.deepEqual(answers.slice(0, -1), Array(OAUTH_LIMITS.register.requests - 1).fill(201));
    assert.equal(answers.at(-1), 429);
    const refused = await register();
    assert.equal(refused.status, 429);
    assert.ok(Number(refused.headers.get('retry-after')) >= 1);
    const body = (await refused.json()) as { error: string; error_description: string };
    assert.equal(body.error, 'rate_limited');
    assert.match(body.error_description, /too many requests to \/oauth\/register/);
    // The token endpoint has its own budget: still open.
    const token = await fetch(`${origin}/oauth/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'grant_type=refresh_token&refresh_token=x' });
    assert.equal(token.status, 400);
    clock.advance(OAUTH_LIMITS.register.perMs);
    assert.equal((await register()).status, 201);
  });

  it('defines the oauth.prune job', async () => {
    const { db, jobs } = ctx();
    assert.equal(await db.tx((sql) => jobs.enqueue(sql, 'oauth.prune', {})), true);
    await jobs.runDue();
  });
});
