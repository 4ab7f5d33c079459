import type { ErrorRequestHandler } from 'express';
import type { Logger } from 'pino';

export type ErrorCode = 'invalid_json' | 'invalid_input' | 'invalid_key' | 'forbidden' | 'not_found' | 'method_not_allowed' | 'conflict' | 'rate_limited' | 'unavailable' | 'internal_error';

/** An error with a documented code and status; the error middleware turns it into `{error, message}`. */
export class ServiceError extends Error {
  constructor(
    readonly status: number,
    readonly code: ErrorCode,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
  /** The body as stored in an idempotency receipt (the request id is added when it is sent). */
  body(): { error: ErrorCode; message: string } {
    return { error: this.code, message: this.message };
  }
  /** The body as sent: with the id of the request that answers it (its `Request-Id` header). */
  bodyFor(requestId: string): ErrorBody {
    return { error: this.code, message: this.message, request_id: requestId };
  }
}

/** The documented error body (`Error` in the document). */
export interface ErrorBody {
  error: ErrorCode;
  message: string;
  request_id: string;
}

/** The `Request-Id` a response already carries (set first thing for every request). */
export function requestIdOf(res: { getHeader(name: string): unknown }): string {
  const id = res.getHeader('Request-Id');
  return typeof id === 'string' ? id : '';
}

export const invalidJson = (message: string) => new ServiceError(400, 'invalid_json', message);
/** 413: a body over the limit (the status says so; the code stays the seed's `invalid_input`). */
export const payloadTooLarge = (message: string) => new ServiceError(413, 'invalid_input', message);
export const invalidInput = (message: string) => new ServiceError(400, 'invalid_input', message);
/** 401 with the challenge every 401 carries (RFC 9110): a workspace API key as a Bearer token. */
export const invalidKey = (message = 'The API key is unknown or revoked.') =>
  new ServiceError(401, 'invalid_key', message, { 'WWW-Authenticate': 'Bearer realm="workspace-operations"' });
export const forbidden = (message: string) => new ServiceError(403, 'forbidden', message);
export const notFound = (message: string) => new ServiceError(404, 'not_found', message);
/** 405 for a path that exists with another method; `Allow` names it. */
export const methodNotAllowed = (message: string, allow: string) => new ServiceError(405, 'method_not_allowed', message, { Allow: allow });
export const conflict = (message: string) => new ServiceError(409, 'conflict', message);
export const rateLimited = (retryAfterSeconds: number) =>
  new ServiceError(429, 'rate_limited', `Rate limit exceeded for this credential; retry after ${retryAfterSeconds} s.`, {
    'Retry-After': String(retryAfterSeconds),
  });

/** Turns body-parser errors (which carry a `type`) into our documented errors; null for anything else. */
export function toServiceError(err: unknown): ServiceError | null {
  if (err instanceof ServiceError) return err;
  const type = (err as { type?: unknown } | null)?.type;
  if (type === 'entity.parse.failed') return invalidJson('The body is not valid JSON.');
  // Only the pages' form parser uses body-parser now (/v1 reads its bodies in body.ts): say its own limit.
  if (type === 'entity.too.large') return invalidInput(`The body is larger than ${String((err as { limit?: unknown }).limit ?? 'allowed')} bytes.`);
  if (type === 'encoding.unsupported' || type === 'charset.unsupported') return invalidJson('The body must be UTF-8 JSON.');
  return null;
}

/** Keeps the error a response carries (`{error, message}`) for the request's log line. */
export function noteError(res: { locals: object }, body: { error?: unknown; message?: unknown }): void {
  if (typeof body.error === 'string' && typeof body.message === 'string') (res.locals as { error?: unknown }).error = { code: body.error, message: body.message };
}

/** The last middleware: every error leaves as the documented `{error, message}` body. */
export function errorMiddleware(logger: Logger): ErrorRequestHandler {
  return (err, req, res, _next) => {
    const mapped = toServiceError(err);
    if (!mapped) {
      logger.error({ err, method: req.method, path: req.path }, 'unhandled error');
    }
    const out = mapped ?? new ServiceError(500, 'internal_error', 'Internal server error.');
    if (res.headersSent) return;
    const body = out.bodyFor(requestIdOf(res));
    noteError(res, body);
    res.status(out.status).set(out.headers).json(body);
  };
}
