/**
 * Member pages call operations through the one execution path (server/execute.ts) with the member's
 * own sign-in session as the credential: the same validation, grants, member access, idempotency and
 * effects as an API call, so nothing a page does is impossible through the API, or the reverse. The
 * operation must list `SessionCookie` in the document, as for a browser's own `/v1` call.
 *
 * A command needs an idempotency key: a form carries one (`idempotencyField`, minted when the form is
 * shown), so a double click or a resent form answers the first request's outcome instead of acting
 * twice.
 */
import crypto from 'node:crypto';
import { type CatalogueEntry, catalogue } from '../../generated/catalogue.ts';
import { ServiceError } from '../errors.ts';
import type { ExecuteOperation } from '../execute.ts';
import type { MemberPage } from '../pages.ts';

const byId = new Map((catalogue as readonly CatalogueEntry[]).map((e) => [e.id, e]));

/** The form field that carries a command's idempotency key. */
export const IDEMPOTENCY_FIELD = '_idem';
const KEY = /^[A-Za-z0-9_-]{16,64}$/;

/** A fresh idempotency key for a form. */
export const newFormKey = (): string => crypto.randomBytes(16).toString('base64url');

/** The idempotency key a posted form carries, or a fresh one when it carries none (or a malformed one). */
export function formKey(body: Record<string, unknown>): string {
  const given = body[IDEMPOTENCY_FIELD];
  return typeof given === 'string' && KEY.test(given) ? given : newFormKey();
}

/** What a page's call answered: the body, or the documented error (status, code, message). */
export type PageCallResult<T> = { ok: true; body: T; replayed: boolean } | { ok: false; status: number; error: string; message: string };

/**
 * Calls operation `id` as the page's member. Documented refusals (400, 403, 404, 409, 429...) come back
 * as `{ok: false}` for the page to show; anything else is thrown (the page kit answers 500).
 */
export async function callAsMember<T = unknown>(execute: ExecuteOperation, page: MemberPage, id: string, input: unknown, idempotencyKey?: string): Promise<PageCallResult<T>> {
  const entry = byId.get(id);
  if (!entry) throw new Error(`page call: no operation ${id}`);
  if (entry.kind === 'command' && !idempotencyKey) throw new Error(`page call: ${id} is a command and needs an idempotency key`);
  try {
    const outcome = await execute({
      credential: page.session,
      entry,
      input,
      headers: entry.kind === 'command' ? { 'idempotency-key': idempotencyKey } : {},
      query: {},
    });
    if (outcome.status !== 200) {
      const body = outcome.body as { error?: string; message?: string };
      return { ok: false, status: outcome.status, error: body.error ?? 'error', message: body.message ?? '' };
    }
    return { ok: true, body: outcome.body as T, replayed: outcome.replayed };
  } catch (err) {
    if (err instanceof ServiceError && err.status < 500) return { ok: false, status: err.status, error: err.code, message: err.message };
    throw err;
  }
}
