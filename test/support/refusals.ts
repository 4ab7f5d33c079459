import assert from 'node:assert/strict';
import { listRecordEvents } from '../../db/queries/events.ts';
import type { TestService } from './service.ts';

/** What the generated client answers: openapi-fetch's `{ data, error, response }`. */
interface ClientAnswer {
  response: Response;
  error?: unknown;
}

/**
 * The documented refusal: this status, and a body of exactly `{error, message, request_id}` with this code,
 * the request id of its `Request-Id` header (and,
 * when given, a message matching `message`).
 */
export function assertRefused(res: ClientAnswer, status: number, code: string, message?: RegExp): void {
  const body = res.error as Record<string, unknown> | undefined;
  assert.equal(res.response.status, status, `expected ${status} ${code}, got ${res.response.status} ${JSON.stringify(body)}`);
  assert.ok(body && typeof body === 'object', 'the refusal has no JSON body');
  assert.deepEqual(Object.keys(body).sort(), ['error', 'message', 'request_id']);
  assert.equal(body.request_id, res.response.headers.get('request-id'), 'the body carries the Request-Id of its response');
  assert.equal(body.error, code, JSON.stringify(body));
  assert.equal(typeof body.message, 'string');
  if (message) assert.match(body.message as string, message);
}

/** The change events of a workspace as [type, record id, changed_fields] (oldest first). */
export async function eventsOf(svc: TestService, workspaceId: string): Promise<Array<[string, string, string[] | null]>> {
  const events = await listRecordEvents(svc.db.sql, workspaceId, 0, 1000);
  return events.map((e) => [e.type, e.record_id, e.changed_fields ? (JSON.parse(e.changed_fields) as string[]) : null]);
}
