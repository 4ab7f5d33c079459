/**
 * The client package's receiver-side webhook verification (`client/src/webhooks.ts`), checked against
 * an independent signer: the `openssl dgst -sha256 -hmac <secret>` CLI, fed `<timestamp>.<raw body>`
 * (resource events, `v1=` signatures) or the raw body alone (legacy `meeting.completed`).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { verifyLegacyWebhook, verifyWebhook, WebhookVerificationError, type WebhookVerificationFailure } from '../../client/src/index.ts';
import { signedHeaders } from '../../handlers/webhooks/signatures.ts';

/** Hex HMAC-SHA256 of `data` keyed with the secret's text, computed by the openssl CLI (data on stdin, so bytes are exact). */
function opensslHmac(secret: string, data: string | Uint8Array): string {
  const out = execFileSync('openssl', ['dgst', '-sha256', '-hmac', secret], { input: typeof data === 'string' ? Buffer.from(data, 'utf8') : data, encoding: 'utf8' });
  const hex = /([0-9a-f]{64})\s*$/.exec(out)?.[1];
  assert.ok(hex, `openssl output: ${out}`);
  return hex;
}

function signV1(secret: string, timestamp: number, body: string | Uint8Array): string {
  const bytes = Buffer.concat([Buffer.from(`${timestamp}.`, 'utf8'), typeof body === 'string' ? Buffer.from(body, 'utf8') : body]);
  return `v1=${opensslHmac(secret, bytes)}`;
}

function refused(fn: () => unknown, reason: WebhookVerificationFailure): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof WebhookVerificationError, `a WebhookVerificationError, got ${String(e)}`);
    assert.equal(e.reason, reason, e.message);
    assert.equal(e.name, 'WebhookVerificationError');
    return true;
  });
}

describe('client package: verifyWebhook, verifyLegacyWebhook (signatures made by openssl)', () => {
  const secret = 'whsec_Q2hhbmdlIG1lOiB0aGlzIGlzIGEgdGVzdCBzZWNyZXQ-_x';
  const oldSecret = 'whsec_b2xkIHNlY3JldCBzdGlsbCBpbiBpdHMgZ3JhY2UgcGVyaW9k';
  const ts = 1_700_000_000; // 2023-11-14, long past
  const now = ts * 1000;
  // Non-ASCII on purpose: the signature covers the UTF-8 bytes.
  const body = JSON.stringify({ event: 'resource.updated', event_id: 'evt_01', webhook_id: 'wh_01', occurred_at: now, resource_type: 'core:SalesPipeline', record_id: 'pl_01', changed_fields: ['name'], note: 'Zürich — 東京' });
  const headersFor = (signature: string, timestamp: number | string = ts): Record<string, string> => ({
    'X-Webhook-Event-Id': 'evt_01',
    'X-Webhook-Delivery-Id': 'whd_01',
    'X-Webhook-Timestamp': String(timestamp),
    'X-Webhook-Signature': signature,
  });

  it('accepts a delivery signed by openssl and returns the parsed body (string, Buffer and ArrayBuffer bodies)', () => {
    const headers = headersFor(signV1(secret, ts, body));
    const expected = JSON.parse(body);
    assert.deepEqual(verifyWebhook(secret, headers, body, { now }), expected);
    const bytes = Buffer.from(body, 'utf8');
    assert.deepEqual(verifyWebhook(secret, headers, bytes, { now }), expected);
    assert.deepEqual(verifyWebhook(secret, headers, new Uint8Array(bytes), { now }), expected);
    assert.deepEqual(verifyWebhook(secret, headers, bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length), { now }), expected);
    const event = verifyWebhook(secret, headers, body, { now });
    assert.equal(event.event, 'resource.updated');
    assert.equal(event.event_id, 'evt_01');
  });

  it('refuses a body changed by one byte, and a wrong secret', () => {
    const headers = headersFor(signV1(secret, ts, body));
    const changed = Buffer.from(body, 'utf8');
    changed[changed.length - 3]! ^= 0x01;
    refused(() => verifyWebhook(secret, headers, changed, { now }), 'bad_signature');
    refused(() => verifyWebhook(secret, headers, `${body} `, { now }), 'bad_signature');
    refused(() => verifyWebhook(`${secret}x`, headers, body, { now }), 'bad_signature');
    refused(() => verifyWebhook(oldSecret, headers, body, { now }), 'bad_signature');
    // The timestamp is signed too: the same signature under another timestamp is refused.
    refused(() => verifyWebhook(secret, { ...headers, 'X-Webhook-Timestamp': String(ts + 1) }, body, { now }), 'bad_signature');
  });

  it('refuses timestamps more than the tolerance away in either direction; exactly 300 s is accepted', () => {
    const headers = headersFor(signV1(secret, ts, body));
    refused(() => verifyWebhook(secret, headers, body, { now: now + 301_000 }), 'stale_timestamp');
    refused(() => verifyWebhook(secret, headers, body, { now: now - 301_000 }), 'stale_timestamp');
    assert.equal(verifyWebhook(secret, headers, body, { now: now + 300_000 }).event_id, 'evt_01');
    assert.equal(verifyWebhook(secret, headers, body, { now: now - 300_000 }).event_id, 'evt_01');
    // A custom tolerance, and the default clock (a delivery signed for right now).
    refused(() => verifyWebhook(secret, headers, body, { now: now + 31_000, toleranceSeconds: 30 }), 'stale_timestamp');
    assert.equal(verifyWebhook(secret, headers, body, { now: now + 30_000, toleranceSeconds: 30 }).event_id, 'evt_01');
    const nowTs = Math.floor(Date.now() / 1000);
    assert.equal(verifyWebhook(secret, headersFor(signV1(secret, nowTs, body), nowTs), body).event_id, 'evt_01');
    refused(() => verifyWebhook(secret, headers, body), 'stale_timestamp'); // ts is long past for the real clock
    assert.throws(() => verifyWebhook(secret, headers, body, { now, toleranceSeconds: -1 }), TypeError);
  });

  it('refuses missing headers and malformed timestamps', () => {
    const signature = signV1(secret, ts, body);
    const { 'X-Webhook-Signature': _s, ...noSignature } = headersFor(signature);
    const { 'X-Webhook-Timestamp': _t, ...noTimestamp } = headersFor(signature);
    refused(() => verifyWebhook(secret, noSignature, body, { now }), 'missing_header');
    refused(() => verifyWebhook(secret, noTimestamp, body, { now }), 'missing_header');
    refused(() => verifyWebhook(secret, {}, body, { now }), 'missing_header');
    refused(() => verifyWebhook(secret, new Headers(), body, { now }), 'missing_header');
    refused(() => verifyWebhook(secret, headersFor(''), body, { now }), 'missing_header');
    for (const bad of ['soon', '1700000000.5', '-1700000000', '1e9', '17900000000000000']) {
      refused(() => verifyWebhook(secret, headersFor(signature, bad), body, { now }), 'bad_timestamp');
    }
    refused(() => verifyWebhook(secret, { ...headersFor(signature), 'x-webhook-timestamp': [String(ts), String(ts)] }, body, { now }), 'bad_timestamp');
  });

  it('accepts any one of several v1= signatures (rotation: new and old), ignores other schemes', () => {
    const withNew = signV1(secret, ts, body);
    const withOld = signV1(oldSecret, ts, body);
    // The receiver still holds only the old secret while the sender signs with both.
    assert.equal(verifyWebhook(oldSecret, headersFor(`${withNew} ${withOld}`), body, { now }).event_id, 'evt_01');
    assert.equal(verifyWebhook(secret, headersFor(`${withNew} ${withOld}`), body, { now }).event_id, 'evt_01');
    // Only the old one is valid for this receiver's secret: still accepted.
    assert.equal(verifyWebhook(oldSecret, headersFor(`v1=${'0'.repeat(64)} ${withOld}`), body, { now }).event_id, 'evt_01');
    // The receiver may hold both secrets during its own switch-over.
    assert.equal(verifyWebhook([secret, oldSecret], headersFor(withOld), body, { now }).event_id, 'evt_01');
    refused(() => verifyWebhook(oldSecret, headersFor(`${withNew} v1=${'0'.repeat(64)}`), body, { now }), 'bad_signature');
    // Unknown schemes are ignored: a valid digest under v2= alone is refused, next to a v1= it does not matter.
    const digest = withNew.slice(3);
    refused(() => verifyWebhook(secret, headersFor(`v2=${digest}`), body, { now }), 'bad_signature');
    refused(() => verifyWebhook(secret, headersFor(digest), body, { now }), 'bad_signature');
    assert.equal(verifyWebhook(secret, headersFor(`v2=${'f'.repeat(64)} ${withNew}`), body, { now }).event_id, 'evt_01');
    // Malformed v1 values (short, not hex) never match and never throw anything else.
    refused(() => verifyWebhook(secret, headersFor(`v1=${digest.slice(0, 63)} v1=${digest}z v1=`), body, { now }), 'bad_signature');
  });

  it('reads headers from a Headers object and from a lowercase plain object (node IncomingMessage style)', () => {
    const signature = signV1(secret, ts, body);
    const fetchHeaders = new Headers(headersFor(signature));
    assert.equal(verifyWebhook(secret, fetchHeaders, body, { now }).event_id, 'evt_01');
    const lower = Object.fromEntries(Object.entries(headersFor(signature)).map(([k, v]) => [k.toLowerCase(), v]));
    assert.equal(verifyWebhook(secret, lower, body, { now }).event_id, 'evt_01');
    const mixed = { 'x-WEBHOOK-timestamp': String(ts), 'X-WEBHOOK-SIGNATURE': [signature], 'content-type': 'application/json', absent: undefined };
    assert.equal(verifyWebhook(secret, mixed, body, { now }).event_id, 'evt_01');
    // Repeated signature headers, which Headers.get joins with ", ".
    const repeated = new Headers({ 'X-Webhook-Timestamp': String(ts) });
    repeated.append('X-Webhook-Signature', `v1=${'0'.repeat(64)}`);
    repeated.append('X-Webhook-Signature', signature);
    assert.equal(verifyWebhook(secret, repeated, body, { now }).event_id, 'evt_01');
  });

  it('verifies the raw bytes before parsing: a validly signed non-JSON body is bad_body, a forged one bad_signature', () => {
    for (const notAnEvent of ['not json', '{"event":', '[1,2]', 'null', '{"event_id":"evt_01"}']) {
      refused(() => verifyWebhook(secret, headersFor(signV1(secret, ts, notAnEvent)), notAnEvent, { now }), 'bad_body');
      refused(() => verifyWebhook(secret, headersFor(`v1=${'0'.repeat(64)}`), notAnEvent, { now }), 'bad_signature');
    }
    const invalidUtf8 = Buffer.from([0x7b, 0xff, 0x7d]);
    refused(() => verifyWebhook(secret, headersFor(signV1(secret, ts, invalidUtf8)), invalidUtf8, { now }), 'bad_body');
    // A parsed object is not a raw body.
    assert.throws(() => verifyWebhook(secret, headersFor(signV1(secret, ts, body)), JSON.parse(body), { now }), TypeError);
    assert.throws(() => verifyWebhook('', headersFor(signV1(secret, ts, body)), body, { now }), TypeError);
  });

  it('verifies legacy meeting.completed deliveries: bare hex over the raw body only', () => {
    const legacyBody = JSON.stringify({ event: 'meeting.completed', event_id: 'evt_02', webhook_id: 'wh_02', occurred_at: now, meeting_id: 'mtg_01' });
    const signature = opensslHmac(secret, legacyBody);
    const headers = { 'X-Webhook-Event-Id': 'evt_02', 'X-Webhook-Delivery-Id': 'whd_02', 'X-Webhook-Signature': signature };
    assert.deepEqual(verifyLegacyWebhook(secret, headers, legacyBody), JSON.parse(legacyBody));
    assert.deepEqual(verifyLegacyWebhook(secret, new Headers(headers), Buffer.from(legacyBody)), JSON.parse(legacyBody));
    refused(() => verifyLegacyWebhook(oldSecret, headers, legacyBody), 'bad_signature');
    refused(() => verifyLegacyWebhook(secret, headers, legacyBody.replace('mtg_01', 'mtg_02')), 'bad_signature');
    refused(() => verifyLegacyWebhook(secret, { ...headers, 'X-Webhook-Signature': `v1=${signature}` }, legacyBody), 'bad_signature');
    refused(() => verifyLegacyWebhook(secret, { 'X-Webhook-Event-Id': 'evt_02' }, legacyBody), 'missing_header');
    refused(() => verifyLegacyWebhook(secret, { 'x-webhook-signature': opensslHmac(secret, 'oops') }, 'oops'), 'bad_body');
    // The two schemes do not cross: a legacy signature is not a v1 signature and vice versa.
    refused(() => verifyWebhook(secret, { ...headers, 'X-Webhook-Timestamp': String(ts) }, legacyBody, { now }), 'bad_signature');
  });

  it("verifies what the service's own signer sends (resource event during a rotation, and legacy)", () => {
    const resource = signedHeaders({ legacy: false, eventId: 'evt_01', attemptId: 'whd_01', body, nowMs: now + 123, secrets: [secret, oldSecret] });
    assert.match(resource['X-Webhook-Signature'], /^v1=[0-9a-f]{64} v1=[0-9a-f]{64}$/);
    assert.equal(resource['X-Webhook-Signature'].split(' ')[0], signV1(secret, ts, body)); // the same bytes as openssl
    assert.equal(verifyWebhook(secret, { ...resource }, body, { now }).event_id, 'evt_01');
    assert.equal(verifyWebhook(oldSecret, { ...resource }, body, { now }).event_id, 'evt_01');
    const legacyBody = JSON.stringify({ event: 'meeting.completed', event_id: 'evt_02', webhook_id: 'wh_02', occurred_at: now, meeting_id: 'mtg_01' });
    const legacy = signedHeaders({ legacy: true, eventId: 'evt_02', attemptId: 'whd_02', body: legacyBody, nowMs: now, secrets: [secret] });
    assert.deepEqual(verifyLegacyWebhook(secret, { ...legacy }, legacyBody), JSON.parse(legacyBody));
  });

  it('works in a node:http receiver that reads the raw body (as in the client README)', async () => {
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        try {
          const event = verifyWebhook(secret, req.headers, Buffer.concat(chunks), { now });
          res.writeHead(204, { 'x-event-id': event.event_id }).end();
        } catch (e) {
          res.writeHead(e instanceof WebhookVerificationError ? 400 : 500, { 'content-type': 'text/plain' }).end(e instanceof WebhookVerificationError ? e.reason : String(e));
        }
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
      const ok = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headersFor(signV1(secret, ts, body)) }, body });
      assert.equal(ok.status, 204);
      assert.equal(ok.headers.get('x-event-id'), 'evt_01');
      const forged = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headersFor(signV1(oldSecret, ts, body)) }, body });
      assert.equal(forged.status, 400);
      assert.equal(await forged.text(), 'bad_signature');
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
