import assert from 'node:assert/strict';
import { document } from '../../../generated/document.ts';
import type { ErrorCode } from '../../../server/errors.ts';

/** Raw HTTP calls with full control of headers and body bytes, and the documented error body's assertions. */

export interface RawResponse {
  status: number;
  contentType: string;
  headers: Headers;
  text: string;
  body: unknown;
}

/** Headers of a raw call; `null` removes a default header. */
export type HeaderPatch = Record<string, string | null>;

/**
 * A plain HTTP call with full control of method, headers and body bytes. The body is sent as bytes, so
 * fetch adds no Content-Type of its own (a string body would get `text/plain`).
 */
export async function send(baseUrl: string, method: string, path: string, headers: HeaderPatch, body?: string): Promise<RawResponse> {
  const h: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) if (v !== null) h[k] = v;
  const bytes = body === undefined ? undefined : new TextEncoder().encode(body);
  const res = await fetch(`${baseUrl}${path}`, { method, headers: h, ...(bytes === undefined ? {} : { body: bytes }) });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: res.status, contentType: res.headers.get('content-type') ?? '', headers: res.headers, text, body: parsed };
}

/** The codes of components/schemas/Error.yaml. */
export const ERROR_CODES: ReadonlySet<string> = new Set(document.components.schemas.Error.properties.error.enum);

/** Any documented error body: JSON, exactly `{error, message}`, a documented code, a non-empty message, no secret. */
export function assertErrorShape(res: RawResponse, detail: string, secrets: readonly string[] = []): void {
  assert.match(res.contentType, /^application\/json\b/, `not JSON: ${detail}`);
  const body = res.body as Record<string, unknown> | null | undefined;
  assert.ok(body !== null && typeof body === 'object' && !Array.isArray(body), `body is not an object: ${detail}`);
  assert.deepEqual(Object.keys(body).sort(), ['error', 'message', 'request_id'], `body keys: ${detail}`);
  assert.equal(typeof body.error, 'string', `error is not a string: ${detail}`);
  assert.equal(typeof body.message, 'string', `message is not a string: ${detail}`);
  assert.ok((body.message as string).length > 0, `empty message: ${detail}`);
  assert.ok(ERROR_CODES.has(body.error as string), `undocumented error code: ${detail}`);
  for (const s of secrets) assert.ok(!res.text.includes(s), `the error reveals a secret: ${detail}`);
}

/** The documented error: this status, JSON, exactly `{error, message}`, both strings, with this code. */
export function assertErrorBody(res: RawResponse, status: number, code: ErrorCode, label: string, secrets: readonly string[] = []): void {
  const detail = `${label}\n      got ${res.status} ${res.contentType} ${res.text.slice(0, 400)}`;
  assert.equal(res.status, status, `wrong status: ${detail}`);
  assertErrorShape(res, detail, secrets);
  assert.equal((res.body as Record<string, unknown>).error, code, `wrong error code: ${detail}`);
}
