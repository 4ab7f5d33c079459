import type { ErrorRequestHandler } from 'express';
import type { Logger } from 'pino';

export type ErrorCode = 'invalid_json' | 'invalid_input' | 'invalid_key' | 'forbidden' | 'not_found' | 'conflict' | 'rate_limited' | 'internal_error';

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
  body(): { error: ErrorCode; message: string } {
    return { error: this.code, message: this.message };
  }
}

export const invalidJson = (message: string) => new ServiceError(400, 'invalid_json', message);
export const invalidInput = (message: string) => new ServiceError(400, 'invalid_input', message);
export const invalidKey = (message = 'The API key is missing, invalid or revoked.') => new ServiceError(401, 'invalid_key', message);
export const forbidden = (message: string) => new ServiceError(403, 'forbidden', message);
export const notFound = (message: string) => new ServiceError(404, 'not_found', message);
export const conflict = (message: string) => new ServiceError(409, 'conflict', message);
export const rateLimited = (retryAfterSeconds: number) =>
  new ServiceError(429, 'rate_limited', `Rate limit exceeded for this credential; retry after ${retryAfterSeconds} s.`, {
    'Retry-After': String(retryAfterSeconds),
  });

interface ValidatorError {
  status?: number;
  errors?: Array<{ path?: string; message?: string }>;
  message?: string;
  type?: string;
}

/** Turns express-openapi-validator and body-parser errors into our documented errors. */
export function toServiceError(err: unknown): ServiceError | null {
  if (err instanceof ServiceError) return err;
  const e = err as ValidatorError;
  if (e && typeof e === 'object') {
    if (e.type === 'entity.parse.failed') return invalidJson('The body is not valid JSON.');
    if (e.type === 'entity.too.large') return invalidInput('The body is larger than 1 MB.');
    if (e.type === 'encoding.unsupported' || e.type === 'charset.unsupported') return invalidJson('The body must be UTF-8 JSON.');
    if (e.status === 415) return invalidJson('Content-Type must be application/json.');
    if (e.status === 404 || e.status === 405) return notFound('No such operation.');
    if (e.status === 400 && Array.isArray(e.errors)) {
      const details = e.errors.map((x) => `${(x.path ?? '').replace(/^\//, '').replace(/\//g, '.')} ${x.message ?? ''}`.trim());
      return invalidInput(details.join('; ') || 'Invalid request.');
    }
  }
  return null;
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
    res.status(out.status).set(out.headers).json(out.body());
  };
}
