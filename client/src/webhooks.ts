/// <reference types="node" />
/**
 * Receiver-side verification of the service's webhook deliveries (seed section 6), for server-side
 * code only: it uses `node:crypto` (no dependency; any runtime with Node's crypto module). It is
 * exported by the package's main entry and, on its own, by `@workspace-operations/client/webhooks`;
 * a browser bundle of the main entry (the `browser` export condition) leaves it out.
 *
 * Resource events: `X-Webhook-Timestamp` is the attempt's Unix seconds and `X-Webhook-Signature` is
 * `v1=` + 64 lowercase hex characters of HMAC-SHA256, keyed with the signing secret's text (UTF-8),
 * over `<timestamp>.<raw body bytes>`; while a secret is being rotated the header carries several,
 * space-separated (`v1=<new> v1=<old>`), and one match is enough. Legacy `meeting.completed`:
 * `X-Webhook-Signature` is the bare hex HMAC-SHA256 over the raw body only (no timestamp, no `v1=`).
 *
 * The raw bytes are verified before anything is parsed; digests are compared in constant time
 * (`timingSafeEqual` over equal-length buffers).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** Why a delivery was refused (`WebhookVerificationError.reason`). */
export type WebhookVerificationFailure = 'missing_header' | 'bad_signature' | 'stale_timestamp' | 'bad_timestamp' | 'bad_body';

/** Thrown by `verifyWebhook` and `verifyLegacyWebhook` when a delivery must be refused (answer it with 400). */
export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError';
  readonly reason: WebhookVerificationFailure;

  constructor(reason: WebhookVerificationFailure, message: string) {
    super(message);
    this.reason = reason;
  }
}

/**
 * The request's headers: a fetch `Headers` (or anything with a case-insensitive `get(name)`), or a
 * plain object such as node's `IncomingMessage.headers` / express's `req.headers` (names matched
 * case-insensitively).
 */
export type WebhookHeaders = { get(name: string): string | null | undefined } | Readonly<Record<string, string | readonly string[] | undefined>>;

/** The exact bytes received: a `Buffer`/`Uint8Array`, an `ArrayBuffer`, or a string (taken as UTF-8). */
export type WebhookRawBody = string | Uint8Array | ArrayBuffer;

/**
 * A verified resource event's JSON body, typed loosely: `event` (`resource.created`, `resource.updated`,
 * `resource.deleted`, or `webhook.test` for an admin's test delivery), `event_id` (stable across
 * retries and replays: deduplicate by it), `webhook_id`, `occurred_at` (ms), `resource_type`,
 * `record_id` and, for updates, `changed_fields`. A notification is a prompt to read current data.
 */
export interface WebhookEvent {
  event: string;
  event_id: string;
  webhook_id?: string;
  occurred_at?: number;
  resource_type?: string;
  record_id?: string;
  changed_fields?: string[];
  [field: string]: unknown;
}

export interface VerifyWebhookOptions {
  /** How far `X-Webhook-Timestamp` may be from `now`, in either direction, in seconds. Default 300. */
  toleranceSeconds?: number;
  /** The receiver's clock in milliseconds since the epoch (for tests). Default `Date.now()`. */
  now?: number;
}

const SIGNATURE_HEADER = 'x-webhook-signature';
const TIMESTAMP_HEADER = 'x-webhook-timestamp';
const HEX_DIGEST = /^[0-9a-f]{64}$/i;

/**
 * Verifies a resource-event delivery and returns its parsed body. `secret` is the subscription's
 * signing secret as shown once to the admin (e.g. `whsec_...`); during a rotation the receiver may pass
 * both (`[newSecret, oldSecret]`). Throws `WebhookVerificationError` (reason `missing_header`,
 * `bad_timestamp`, `bad_signature`, `stale_timestamp` or `bad_body`), and `TypeError` for misuse (no
 * secret, a body that is not raw bytes or text, a bad tolerance).
 */
export function verifyWebhook(secret: string | readonly string[], headers: WebhookHeaders, rawBody: WebhookRawBody, options: VerifyWebhookOptions = {}): WebhookEvent {
  const secrets = secretsOf(secret);
  const body = bytesOf(rawBody);
  const tolerance = options.toleranceSeconds ?? 300;
  if (typeof tolerance !== 'number' || !Number.isFinite(tolerance) || tolerance < 0) throw new TypeError('toleranceSeconds must be a finite number of seconds, 0 or more.');
  const nowMs = options.now ?? Date.now();
  if (typeof nowMs !== 'number' || !Number.isFinite(nowMs)) throw new TypeError('now must be a finite number of milliseconds since the epoch.');

  const signatureValues = headerValues(headers, SIGNATURE_HEADER);
  if (!signatureValues.some((v) => v.trim() !== '')) throw new WebhookVerificationError('missing_header', 'The X-Webhook-Signature header is missing.');
  const timestampValues = headerValues(headers, TIMESTAMP_HEADER).map((v) => v.trim()).filter((v) => v !== '');
  if (timestampValues.length === 0) throw new WebhookVerificationError('missing_header', 'The X-Webhook-Timestamp header is missing.');
  const timestampText = timestampValues[0]!;
  if (timestampValues.length > 1 || !/^\d{1,12}$/.test(timestampText)) {
    throw new WebhookVerificationError('bad_timestamp', 'X-Webhook-Timestamp is not one whole number of Unix seconds.');
  }

  const candidates: Buffer[] = [];
  for (const token of tokensOf(signatureValues)) {
    const eq = token.indexOf('=');
    if (eq < 0 || token.slice(0, eq) !== 'v1') continue; // other schemes (v2=...) are ignored
    const hex = token.slice(eq + 1);
    if (HEX_DIGEST.test(hex)) candidates.push(Buffer.from(hex, 'hex'));
  }
  if (candidates.length === 0) throw new WebhookVerificationError('bad_signature', 'X-Webhook-Signature carries no v1= signature.');
  const expected = secrets.map((s) => createHmac('sha256', s).update(`${timestampText}.`).update(body).digest());
  if (!anyMatches(expected, candidates)) throw new WebhookVerificationError('bad_signature', 'No signature in X-Webhook-Signature matches the body and timestamp.');

  // Checked after the signature, so this error means an authentic but old (or future) delivery: a replay, or clock skew.
  const skew = Math.abs(nowMs / 1000 - Number(timestampText));
  if (skew > tolerance) {
    throw new WebhookVerificationError('stale_timestamp', `X-Webhook-Timestamp is ${Math.round(skew)} s from this receiver's clock (tolerance ${tolerance} s).`);
  }

  const parsed = parseBody(body);
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed) || typeof (parsed as WebhookEvent).event !== 'string' || typeof (parsed as WebhookEvent).event_id !== 'string') {
    throw new WebhookVerificationError('bad_body', 'The body is not a webhook event (a JSON object with string "event" and "event_id").');
  }
  return parsed as WebhookEvent;
}

/**
 * Verifies a legacy `meeting.completed` delivery (`X-Webhook-Signature`: bare hex HMAC-SHA256 over the
 * raw body; no timestamp, so nothing bounds a replay: deduplicate by the body's `event_id`) and returns
 * its parsed JSON body. Throws like `verifyWebhook` (`missing_header`, `bad_signature`, `bad_body`).
 */
export function verifyLegacyWebhook(secret: string | readonly string[], headers: WebhookHeaders, rawBody: WebhookRawBody): unknown {
  const secrets = secretsOf(secret);
  const body = bytesOf(rawBody);
  const signatureValues = headerValues(headers, SIGNATURE_HEADER);
  if (!signatureValues.some((v) => v.trim() !== '')) throw new WebhookVerificationError('missing_header', 'The X-Webhook-Signature header is missing.');
  const candidates = tokensOf(signatureValues)
    .filter((t) => HEX_DIGEST.test(t))
    .map((t) => Buffer.from(t, 'hex'));
  if (candidates.length === 0) throw new WebhookVerificationError('bad_signature', 'X-Webhook-Signature is not a hex HMAC-SHA256.');
  const expected = secrets.map((s) => createHmac('sha256', s).update(body).digest());
  if (!anyMatches(expected, candidates)) throw new WebhookVerificationError('bad_signature', 'X-Webhook-Signature does not match the body.');
  return parseBody(body);
}

function secretsOf(secret: string | readonly string[]): string[] {
  const list = typeof secret === 'string' ? [secret] : Array.isArray(secret) ? [...(secret as readonly unknown[])] : [];
  if (list.length === 0 || !list.every((s): s is string => typeof s === 'string' && s !== '')) throw new TypeError('The signing secret must be a non-empty string (or a list of them).');
  return list;
}

function bytesOf(rawBody: WebhookRawBody): Uint8Array {
  if (typeof rawBody === 'string') return Buffer.from(rawBody, 'utf8');
  if (rawBody instanceof Uint8Array) return rawBody;
  if (rawBody instanceof ArrayBuffer) return new Uint8Array(rawBody);
  throw new TypeError('rawBody must be the raw request body (Buffer, Uint8Array, ArrayBuffer or string), not a parsed object: read it with express.raw() or by collecting the request stream.');
}

/** Every value of a header, names matched case-insensitively. */
function headerValues(headers: WebhookHeaders, lowerName: string): string[] {
  if (headers === null || typeof headers !== 'object') throw new TypeError('headers must be a Headers object or a plain object of header values.');
  if (typeof (headers as { get?: unknown }).get === 'function') {
    const value = (headers as { get(name: string): string | null | undefined }).get(lowerName);
    return typeof value === 'string' ? [value] : [];
  }
  const values: string[] = [];
  for (const [name, value] of Object.entries(headers as Record<string, unknown>)) {
    if (name.toLowerCase() !== lowerName) continue;
    if (typeof value === 'string') values.push(value);
    else if (Array.isArray(value)) values.push(...value.filter((v): v is string => typeof v === 'string'));
  }
  return values;
}

/** Signatures are space-separated; a comma also separates (as `Headers.get` joins repeated headers). */
function tokensOf(values: readonly string[]): string[] {
  return values.flatMap((v) => v.split(/[\s,]+/)).filter((t) => t !== '');
}

/** Constant-time comparison of every expected digest with every candidate (all 32 bytes long); no early exit. */
function anyMatches(expected: readonly Buffer[], candidates: readonly Buffer[]): boolean {
  let matched = false;
  for (const e of expected) {
    for (const c of candidates) {
      if (c.length === e.length && timingSafeEqual(c, e)) matched = true;
    }
  }
  return matched;
}

function parseBody(body: Uint8Array): unknown {
  try {
    return JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(body));
  } catch {
    throw new WebhookVerificationError('bad_body', 'The body is not UTF-8 JSON.');
  }
}
