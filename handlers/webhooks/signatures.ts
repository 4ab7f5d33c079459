/**
 * Webhook signatures. Resource events (Standard Webhooks style, our header names): `X-Webhook-Timestamp`
 * is the attempt's Unix seconds and `X-Webhook-Signature` is `v1=` + hex HMAC-SHA256, keyed with the
 * signing secret (its text, as given to the receiver), over `<timestamp>.<raw body>`; during a secret
 * rotation's grace period the header carries two, space-separated: `v1=<new> v1=<old>`. Legacy
 * `meeting.completed`: `X-Webhook-Signature` is the bare hex HMAC-SHA256 over the raw body only, with no
 * timestamp (the existing contract, seed 6 and 9.5).
 */
import crypto from 'node:crypto';

/** A new signing secret: `whsec_` and 32 random bytes in base64url (the whole text is the HMAC key). */
/** The secret a rotation replaced, while its grace period lasts (deliveries are signed with it too), else null. */
export function previousSecret(s: { previous_secret: string | null; previous_secret_until: number | null }, now: number): string | null {
  return s.previous_secret && Number(s.previous_secret_until ?? 0) > now ? s.previous_secret : null;
}

export function newSigningSecret(): string {
  return `whsec_${crypto.randomBytes(32).toString('base64url')}`;
}

export function hmacHex(secret: string, data: string | Buffer): string {
  return crypto.createHmac('sha256', secret).update(data).digest('hex');
}

export interface SignedHeaders {
  'X-Webhook-Event-Id': string;
  'X-Webhook-Delivery-Id': string;
  'X-Webhook-Signature': string;
  'X-Webhook-Timestamp'?: string;
}

/** The headers of one attempt: fresh delivery id, timestamp and signature; the event id never changes. */
export function signedHeaders(input: { legacy: boolean; eventId: string; attemptId: string; body: string; nowMs: number; secrets: readonly string[] }): SignedHeaders {
  if (input.legacy) {
    return { 'X-Webhook-Event-Id': input.eventId, 'X-Webhook-Delivery-Id': input.attemptId, 'X-Webhook-Signature': hmacHex(input.secrets[0]!, input.body) };
  }
  const timestamp = String(Math.floor(input.nowMs / 1000));
  return {
    'X-Webhook-Event-Id': input.eventId,
    'X-Webhook-Delivery-Id': input.attemptId,
    'X-Webhook-Timestamp': timestamp,
    'X-Webhook-Signature': input.secrets.map((s) => `v1=${hmacHex(s, `${timestamp}.${input.body}`)}`).join(' '),
  };
}
