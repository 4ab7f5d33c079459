/**
 * `EgressClient.get` (the authorization server's fetch of client id metadata documents): a GET to a
 * real HTTPS receiver on 127.0.0.1 (allow-listed with a test CA, as webhook tests do), no body, no
 * redirects followed, the body capped, the deadline, and the strict policy's refusals before any
 * connection. Also the request log's redaction of the authorization server's URLs.
 */
import assert from 'node:assert/strict';
import { EgressClient, type EgressPolicy } from '../../server/egress.ts';
import { redactUrl } from '../../server/logger.ts';
import { fakeDns, refused, strict } from '../support/egress.ts';
import { serviceSecretUrls } from '../support/secretUrls.ts';
import { type Receiver, startReceiver, testCertificates } from '../support/receiver.ts';

describe('egress: get', () => {
  let receiver: Receiver;
  let client: EgressClient;
  let strictClient: EgressClient;
  before(async () => {
    receiver = await startReceiver();
    const policy: EgressPolicy = Object.freeze({ allowedPorts: Object.freeze([]), allowDestinations: Object.freeze([{ host: '127.0.0.1', port: receiver.port }]), testCa: testCertificates().caPem });
    client = new EgressClient(policy);
    strictClient = new EgressClient(strict);
  });
  after(async () => {
    await client.close();
    await strictClient.close();
    await receiver.close();
  });

  const base = () => `https://127.0.0.1:${receiver.port}`;

  it('sends a GET without a body and returns the answer', async () => {
    receiver.answer(() => ({ status: 200, headers: { 'content-type': 'application/json', 'cache-control': 'max-age=60' }, body: '{"a":1}' }));
    const out = await client.get(`${base()}/doc.json`, { headers: { accept: 'application/json' }, timeoutMs: 2500, maxResponseBytes: 5121 });
    assert.equal(out.kind, 'response');
    if (out.kind !== 'response') return;
    assert.equal(out.status, 200);
    assert.equal(out.body, '{"a":1}');
    assert.equal(out.truncated, false);
    assert.equal(out.headers['cache-control'], 'max-age=60');
    const got = receiver.requests.at(-1)!;
    assert.equal(got.method, 'GET');
    assert.equal(got.url, '/doc.json');
    assert.equal(got.headers.accept, 'application/json');
    assert.equal(got.body.length, 0);
    assert.equal(got.headers['content-length'], undefined);
  });

  it('does not follow a redirect', async () => {
    receiver.answer(() => ({ status: 302, headers: { location: 'https://example.com/' } }));
    const before = receiver.requests.length;
    const out = await client.get(`${base()}/moved`, { timeoutMs: 2500, maxResponseBytes: 100 });
    assert.equal(out.kind === 'response' && out.status, 302);
    assert.equal(receiver.requests.length, before + 1);
  });

  it('caps the body', async () => {
    receiver.answer(() => ({ status: 200, body: 'x'.repeat(10_000) }));
    const out = await client.get(`${base()}/big`, { timeoutMs: 2500, maxResponseBytes: 5121 });
    assert.equal(out.kind === 'response' && out.truncated, true);
    assert.equal(out.kind === 'response' && out.body.length, 5121);
  });

  it('gives up at the deadline', async () => {
    receiver.answer(() => 'hang');
    const out = await client.get(`${base()}/slow`, { timeoutMs: 200, maxResponseBytes: 100 });
    assert.equal(out.kind, 'error');
    assert.match(out.kind === 'error' ? out.error : '', /timeout after 200 ms/);
  });

  it('refuses plain http, private addresses and names resolving to them, before connecting', async () => {
    await refused(() => strictClient.get('http://example.com/c.json', { timeoutMs: 100, maxResponseBytes: 10 }), 'not_https');
    await refused(() => strictClient.get(`${base()}/c.json`, { timeoutMs: 100, maxResponseBytes: 10 }), 'non_public_address');
    await refused(() => strictClient.get('https://10.1.2.3/c.json', { timeoutMs: 100, maxResponseBytes: 10 }), 'non_public_address');
    await refused(() => strictClient.get('https://localhost/c.json', { timeoutMs: 100, maxResponseBytes: 10 }), 'non_public_name');
    const dns = fakeDns({ 'client.example.com': [{ address: '192.168.1.5', family: 4 }] });
    await refused(() => strictClient.get('https://client.example.com/c.json', { timeoutMs: 1000, maxResponseBytes: 10 }, dns.lookup), 'non_public_address');
  });
});

describe('request log: the authorization server\'s URLs', () => {
  const redact = (url: string) => redactUrl(url, serviceSecretUrls);
  it('cuts query strings under /oauth/ and the well-known documents, and interaction ids', () => {
    assert.equal(redact('/oauth/authorize?client_id=mcl_x&code_challenge=abc&state=s'), '/oauth/authorize?[redacted]');
    assert.equal(redact('/oauth/token?code=secretcode'), '/oauth/token?[redacted]');
    assert.equal(redact('/oauth/token'), '/oauth/token');
    assert.equal(redact('/oauth/authorize/Abc123uid'), '/oauth/authorize/[redacted]');
    assert.equal(redact('/oauth/consent/Abc123uid?x=1'), '/oauth/consent/[redacted]');
    assert.equal(redact('/OAuth/%63onsent/Abc123uid'), '/oauth/consent/[redacted]');
    assert.equal(redact('/.well-known/openid-configuration?x=1'), '/.well-known/openid-configuration?[redacted]');
    assert.equal(redact('/v1/operations/ListCompanies?x=1'), '/v1/operations/ListCompanies?x=1');
  });
});
