import crypto from 'node:crypto';
import type { DocOperation } from '../requestSchema.ts';
import type { TestService } from '../service.ts';
import type { Fixture } from './fixture.ts';
import { type HeaderPatch, type RawResponse, send } from './http.ts';

/** Calls of a catalogued operation with the fixture's key and the headers the operation needs. */

export const BROWSER_UA = 'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0';

/** Default headers of a call to `op` with the fixture's main key. */
export function headersFor(op: DocOperation, fx: Fixture, contentType = op.contentTypes[0]): HeaderPatch {
  const h: HeaderPatch = {};
  if (op.entry) h.Authorization = `Bearer ${fx.key}`;
  else h['User-Agent'] = BROWSER_UA;
  if (op.method === 'post') h['Content-Type'] = contentType ?? 'application/json';
  if (op.kind === 'command') h['Idempotency-Key'] = `bad-input-${crypto.randomUUID()}`;
  // An operation that requires a member acts for the workspace's first role (the owner).
  if (op.actAs === 'required') h['Service-Act-As'] = fx.members.active;
  return h;
}

/** One call of `op` with a JSON body and its default headers (plus `extra`). */
export function call(svc: TestService, fx: Fixture, op: DocOperation, body: unknown, extra: HeaderPatch = {}): Promise<RawResponse> {
  return send(svc.baseUrl, op.method.toUpperCase(), op.path, { ...headersFor(op, fx), ...extra }, op.method === 'post' ? JSON.stringify(body) : undefined);
}
