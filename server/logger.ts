import pino, { type Logger } from 'pino';

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

/** JSON logs on stdout, written asynchronously (lines queue while a write is in flight); call `logger.flush()` before exiting. */
export function createLogger(level = process.env.LOG_LEVEL || 'info'): Logger {
  return pino(
    { level, redact: { paths: REDACT_PATHS, censor: '[redacted]' }, base: { service: 'workspace-operations' } },
    pino.destination({ sync: false }),
  );
}

const SIGNIN_URL = /^(\/+signin)(?:\/|%2f)/i;

/** The request URL as logged: the token of a one-time sign-in link (`/signin/<token>`, any case) is cut out. */
export function redactUrl(url: string): string {
  const match = SIGNIN_URL.exec(url);
  return match ? `${match[1]}/[redacted]` : url;
}
