import { AsyncLocalStorage } from 'node:async_hooks';
import pino, { type Logger, type LoggerOptions } from 'pino';

/** Paths that may hold secrets; pino replaces them before anything is written. */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'authorization',
  'secret',
  '*.secret',
  'apiKey',
  '*.apiKey',
];

/** The request being answered, for every log line written while it runs (pino's mixin reads it). */
export const requestScope = new AsyncLocalStorage<{ requestId: string }>();

/** Adds `request_id` to a log line written inside a request (the id its `Request-Id` header and error body carry). */
export function requestIdMixin(): { request_id?: string } {
  const scope = requestScope.getStore();
  return scope ? { request_id: scope.requestId } : {};
}

/** The options of every service logger: secrets redacted, the request id on lines written inside a request. */
export function loggerOptions(level: string): LoggerOptions {
  return { level, redact: { paths: REDACT_PATHS, censor: '[redacted]' }, base: { service: 'workspace-operations' }, mixin: requestIdMixin };
}

/** JSON logs on stdout, written asynchronously (lines queue while a write is in flight); call `logger.flush()` before exiting. */
export function createLogger(level = process.env.LOG_LEVEL || 'info'): Logger {
  return pino(loggerOptions(level), pino.destination({ sync: false }));
}

const SIGNIN_URL = /^(\/+signin)(?:\/|%2f)/i;

/** The request URL as logged: the token of a one-time sign-in link (`/signin/<token>`, any case) is cut out. */
export function redactUrl(url: string): string {
  const match = SIGNIN_URL.exec(url);
  return match ? `${match[1]}/[redacted]` : url;
}
