/**
 * DPoP at `/v1/mcp` (issue 21, finding 11; RFC 9449 §4.3, §7): the authorization server issues
 * `token_type: DPoP` tokens bound to the proof's key (`jkt` on the AccessToken record); the resource
 * server takes such a token only as `Authorization: DPoP <token>` with a fresh, single-use proof by that
 * key naming this request. A stolen bound token sent as Bearer is refused; an unbound token keeps
 * working as Bearer. Tokens are records as the authorization server writes them (test/mcp/tokens.ts),
 * plus `jkt`; the first test checks the real token endpoint does write `jkt`.
 */
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { sha256Hex } from '../../server/ids.ts';
import { mcpResource } from '../../handlers/mcp/resource.ts';
import { acme } from '../support/fixtures.ts';
import { databases, forEachDatabase, type TestService } from '../support/service.ts';
import { authorize, pkce, REDIRECT, register, startAuthServer, token as tokenRequest } from '../oauth/support.ts';
import { insertConnection, mintAccessToken, rawPost } from './tokens.ts';

/** The documented freshness window of a proof's iat (handlers/mcp/dpop.ts DPOP_IAT_WINDOW_S). */
const DPOP_IAT_WINDOW_S = 300;
const LIST = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} };
const HEADERS = { 'MCP-Protocol-Version': '2025-11-25' };
const OPS = ['customers.GetCompany', 'customers.ListCompanies'];

interface Key {
  privateKey: CryptoKey;
  jwk: JWK;
  jkt: string;
}

async function newKey(alg = 'ES256'): Promise<Key> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = await exportJWK(publicKey);
  return { privateKey, jwk, jkt: await calculateJwkThumbprint(jwk) };
}

const ath = (token: string) => crypto.createHash('sha256').update(token).digest('base64url');

/** A DPoP proof (RFC 9449 §4.2) for POST /v1/mcp at the service clock; any part overridable. */
async function proof(
  svc: TestService,
  key: Key,
  token: string | undefined,
  over: { htm?: string; htu?: string; iat?: number; jti?: string; ath?: string | null; typ?: string; jwk?: JWK; alg?: string } = {},
): Promise<string> {
  const claims: Record<string, unknown> = {
    htm: over.htm ?? 'POST',
    htu: over.htu ?? mcpResource(svc.config.publicUrl).resource,
    iat: over.iat ?? Math.floor(svc.clock.now() / 1000),
    jti: over.jti ?? crypto.randomUUID(),
  };
  if (over.ath !== null && (token !== undefined || over.ath !== undefined)) claims.ath = over.ath ?? ath(token!);
  return new SignJWT(claims).setProtectedHeader({ alg: over.alg ?? 'ES256', typ: over.typ ?? 'dpop+jwt', jwk: over.jwk ?? key.jwk }).sign(key.privateKey);
}

/** A token of the connection bound to `jkt`, written as oidc-provider writes a DPoP-bound one. */
async function mintBound(svc: TestService, connectionId: string, jkt: string): Promise<string> {
  const token = await mintAccessToken(svc, connectionId);
  const row = await svc.db.sql.one<{ payload: string }>(`SELECT payload FROM oauth_records WHERE model = 'AccessToken' AND id_hash = ?`, [sha256Hex(token)]);
  const payload = { ...(JSON.parse(row!.payload) as Record<string, unknown>), jkt };
  await svc.db.sql.run(`UPDATE oauth_records SET payload = ? WHERE model = 'AccessToken' AND id_hash = ?`, [JSON.stringify(payload), sha256Hex(token)]);
  return token;
}

/** POST /v1/mcp with raw header lines (repeated names kept as separate lines, as fetch cannot send them). */
function rawHeaders(svc: TestService, headers: string[]): Promise<{ status: number; text: string; challenge: string }> {
  const url = new URL(`${svc.origin}/v1/mcp`);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: ['Host', url.host, ...headers, 'Accept', 'application/json, text/event-stream'] }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, text, challenge: String(res.headers['www-authenticate'] ?? '') }));
    });
    req.on('error', reject);
    req.end(JSON.stringify(LIST));
  });
}

for (const database of databases) {
  describe(`DPoP: the token endpoint binds the token to the proof's key [${database.name}]`, function () {
    this.timeout(30_000);
    it('a token request with a DPoP proof answers token_type DPoP and records jkt on the AccessToken', async () => {
      const as = await startAuthServer(database.url());
      try {
        const key = await newKey();
        const client = await register(as.origin, { client_name: 'DPoP client', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' });
        const clientId = client.json.client_id as string;
        const { verifier, challenge } = pkce();
        const { callback } = await authorize(as, { clientId, challenge });
        const code = callback.searchParams.get('code')!;
        // oidc-provider judges iat by the real clock, not the service's.
        const dpop = await new SignJWT({ htm: 'POST', htu: `${as.origin}/oauth/token`, iat: Math.floor(Date.now() / 1000), jti: crypto.randomUUID() })
          .setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk: key.jwk })
          .sign(key.privateKey);
        const answer = await tokenRequest(as.origin, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: verifier, client_id: clientId, resource: as.resource }, { DPoP: dpop });
        assert.equal(answer.status, 200, answer.text);
        assert.equal(answer.json.token_type, 'DPoP');
        const row = await as.db.sql.one<{ payload: string }>(`SELECT payload FROM oauth_records WHERE model = 'AccessToken' AND id_hash = ?`, [sha256Hex(answer.json.access_token as string)]);
        assert.equal((JSON.parse(row!.payload) as { jkt?: string }).jkt, key.jkt);
      } finally {
        await as.close();
      }
    });
  });
}

forEachDatabase('DPoP at /v1/mcp (RFC 9449)', (svc) => {
  let connectionId: string;
  let key: Key;
  let bound: string;
  before(async () => {
    const ws = await svc().apply(acme());
    connectionId = await insertConnection(svc(), { workspaceId: ws.workspace_id, createdBy: ws.members.ada!, access: 'personal', operations: OPS });
    key = await newKey();
    bound = await mintBound(svc(), connectionId, key.jkt);
  });

  const dpopCall = async (token: string, dpop: string | undefined, extra: Record<string, string> = {}) =>
    rawPost(svc(), LIST, { ...HEADERS, Authorization: `DPoP ${token}`, ...(dpop === undefined ? {} : { DPoP: dpop }), ...extra });

  function refusedDpop(got: Awaited<ReturnType<typeof rawPost>>, error: string, message: RegExp) {
    assert.equal(got.status, 401, got.text);
    assert.equal(got.body.error, error, got.text);
    assert.match(got.body.message, message);
    const challenge = got.headers.get('www-authenticate') ?? '';
    assert.match(challenge, /^DPoP /, challenge);
    assert.ok(challenge.includes('algs="ES256 Ed25519 EdDSA"'), challenge);
    assert.ok(challenge.includes(`error="${error}"`), challenge);
  }

  it('serves a DPoP-bound token sent as Authorization: DPoP with a good proof', async () => {
    const got = await dpopCall(bound, await proof(svc(), key, bound));
    assert.equal(got.status, 200, got.text);
    assert.deepEqual(got.body.result.tools.map((t: { name: string }) => t.name), ['customers_GetCompany', 'customers_ListCompanies']);
  });

  it('refuses the bound token sent as Bearer without a proof: a stolen token alone does not work', async () => {
    const got = await rawPost(svc(), LIST, { ...HEADERS, Authorization: `Bearer ${bound}` });
    refusedDpop(got, 'invalid_token', /bound to a DPoP key/);
    // …and as Bearer with a proof beside it too: the scheme must be DPoP.
    const withProof = await rawPost(svc(), LIST, { ...HEADERS, Authorization: `Bearer ${bound}`, DPoP: await proof(svc(), key, bound) });
    refusedDpop(withProof, 'invalid_token', /bound to a DPoP key/);
  });

  it('refuses Authorization: DPoP without a DPoP header, or with two', async () => {
    refusedDpop(await dpopCall(bound, undefined), 'invalid_dpop_proof', /exactly one DPoP header/);
    const [a, b] = [await proof(svc(), key, bound), await proof(svc(), key, bound)];
    const two = await rawHeaders(svc(), ['Content-Type', 'application/json', 'MCP-Protocol-Version', '2025-11-25', 'Authorization', `DPoP ${bound}`, 'DPoP', a, 'DPoP', b]);
    assert.equal(two.status, 401, `${two.status} ${two.text}`);
    assert.equal(JSON.parse(two.text).error, 'invalid_dpop_proof');
  });

  it('refuses a proof signed by another key than the token\'s (the thief\'s own key)', async () => {
    const thief = await newKey();
    refusedDpop(await dpopCall(bound, await proof(svc(), thief, bound)), 'invalid_dpop_proof', /another key/);
  });

  it('refuses a replayed proof (same jti), also from another process sharing the database', async () => {
    const once = await proof(svc(), key, bound);
    assert.equal((await dpopCall(bound, once)).status, 200);
    refusedDpop(await dpopCall(bound, once), 'invalid_dpop_proof', /used before/);
    // The record is in the shared table, not in the process's memory.
    const stored = await svc().db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM oauth_records WHERE model = 'DPoPProof'`);
    assert.ok(Number(stored!.n) >= 1);
  });

  it('refuses a proof for another method or URL; the query of htu is ignored', async () => {
    refusedDpop(await dpopCall(bound, await proof(svc(), key, bound, { htm: 'GET' })), 'invalid_dpop_proof', /htm/);
    refusedDpop(await dpopCall(bound, await proof(svc(), key, bound, { htu: 'http://localhost:8080/v1/operations' })), 'invalid_dpop_proof', /htu/);
    refusedDpop(await dpopCall(bound, await proof(svc(), key, bound, { htu: 'https://evil.example/v1/mcp' })), 'invalid_dpop_proof', /htu/);
    const withQuery = await dpopCall(bound, await proof(svc(), key, bound, { htu: 'HTTP://LOCALHOST:8080/v1/mcp?x=1#f' }));
    assert.equal(withQuery.status, 200, withQuery.text);
  });

  it(`refuses a proof whose iat is more than ${DPOP_IAT_WINDOW_S} s from the service clock`, async () => {
    const nowS = Math.floor(svc().clock.now() / 1000);
    refusedDpop(await dpopCall(bound, await proof(svc(), key, bound, { iat: nowS - DPOP_IAT_WINDOW_S - 1 })), 'invalid_dpop_proof', /iat/);
    refusedDpop(await dpopCall(bound, await proof(svc(), key, bound, { iat: nowS + DPOP_IAT_WINDOW_S + 1 })), 'invalid_dpop_proof', /iat/);
    const edge = await dpopCall(bound, await proof(svc(), key, bound, { iat: nowS - DPOP_IAT_WINDOW_S + 1 }));
    assert.equal(edge.status, 200, edge.text);
  });

  it('refuses a proof without ath or with the hash of another token', async () => {
    refusedDpop(await dpopCall(bound, await proof(svc(), key, bound, { ath: null })), 'invalid_dpop_proof', /ath/);
    refusedDpop(await dpopCall(bound, await proof(svc(), key, bound, { ath: ath('another token') })), 'invalid_dpop_proof', /ath/);
  });

  it('refuses a proof with the wrong typ, a symmetric alg, a private jwk, or no signature', async () => {
    refusedDpop(await dpopCall(bound, await proof(svc(), key, bound, { typ: 'JWT' })), 'invalid_dpop_proof', /typ/);
    const secret = crypto.randomBytes(32);
    const hs = await new SignJWT({ htm: 'POST', htu: mcpResource(svc().config.publicUrl).resource, iat: Math.floor(svc().clock.now() / 1000), jti: 'hs', ath: ath(bound) })
      .setProtectedHeader({ alg: 'HS256', typ: 'dpop+jwt', jwk: { kty: 'oct', k: secret.toString('base64url') } as JWK })
      .sign(secret);
    refusedDpop(await dpopCall(bound, hs), 'invalid_dpop_proof', /alg/);
    const privateJwk = await exportJWK(key.privateKey);
    refusedDpop(await dpopCall(bound, await proof(svc(), key, bound, { jwk: privateJwk })), 'invalid_dpop_proof', /public key/);
    const good = await proof(svc(), key, bound);
    const [h, p] = good.split('.');
    const none = `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'dpop+jwt', jwk: key.jwk })).toString('base64url')}.${p}.`;
    refusedDpop(await dpopCall(bound, none), 'invalid_dpop_proof', /alg/);
    refusedDpop(await dpopCall(bound, `${h}.${p}.${'A'.repeat(86)}`), 'invalid_dpop_proof', /signature/);
  });

  it('keeps serving an unbound token as Bearer, and refuses it as DPoP', async () => {
    const plain = await mintAccessToken(svc(), connectionId);
    const got = await rawPost(svc(), LIST, { ...HEADERS, Authorization: `Bearer ${plain}` });
    assert.equal(got.status, 200, got.text);
    refusedDpop(await dpopCall(plain, await proof(svc(), key, plain)), 'invalid_token', /not bound/);
  });

  it('advertises DPoP in the protected resource metadata (RFC 9728)', async () => {
    const res = await fetch(`${svc().origin}/.well-known/oauth-protected-resource/v1/mcp`);
    const meta = (await res.json()) as Record<string, unknown>;
    assert.deepEqual(meta.dpop_signing_alg_values_supported, ['ES256', 'Ed25519', 'EdDSA']);
    assert.equal(meta.dpop_bound_access_tokens_required, false);
  });
});
