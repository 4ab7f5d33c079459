import { AsyncLocalStorage } from 'node:async_hooks';
import pino, { type Logger, type LoggerOptions } from 'pino';
import { logFormat, prettyDestination } from './logFormat.ts';

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

/**
 * Logs on stdout: JSON lines written asynchronously (lines queue while a write is in flight; call
 * `logger.flush()` before exiting), or readable lines with ISO times when stdout is a terminal or
 * LOG_FORMAT=pretty (server/logFormat.ts).
 */
export function createLogger(level = process.env.LOG_LEVEL || 'info'): Logger {
  if (logFormat(process.env, Boolean(process.stdout.isTTY)) === 'pretty') return pino(loggerOptions(level), prettyDestination(process.stdout));
  return pino(loggerOptions(level), pino.destination({ sync: false }));
}

/** The platform's own link prefix (`/signin/<token>`, `/signin/scoped/<token>`); modules add theirs (`ServiceModule.secretPaths`). */
export const SIGNIN_PREFIX = '/signin/';

/**
 * The path as a router (or a lenient proxy) may see it: percent-escapes decoded, `//` collapsed, `.` and
 * `..` segments resolved, `;params` cut from each segment, lower-cased (`/sign%69n/x`, `//SignIn/x`,
 * `/signin;x/x` and `/v1/../signin/x` are all `/signin/x`); null when it does not decode.
 */
function routedPath(url: string): string | null {
  const path = url.split(/[?#]/, 1)[0]!;
  const out: string[] = [];
  for (const raw of path.split('/')) {
    let segment: string;
    try {
      segment = decodeURIComponent(raw);
    } catch {
      return null;
    }
    // A decoded `/` (`%2f`) splits the segment, as the router would see it after decoding.
    for (const whole of segment.split('/')) {
      // Conservative: a `;param` (some proxies and mangled links add one) never hides a secret prefix.
      const part = whole.split(';', 1)[0]!;
      if (part === '' || part === '.') continue;
      if (part === '..') out.pop();
      else out.push(part.toLowerCase());
    }
  }
  return `/${out.join('/')}${path.endsWith('/') && out.length ? '/' : ''}`;
}

/** What looks like a link token: 43 or more base64url characters (32 random bytes and up). */
const TOKEN_LIKE = /[A-Za-z0-9_-]{43,}/;

/** The URL with every path segment and query part that holds something token-like replaced by `[redacted]`. */
function withoutTokenLikeParts(url: string): string {
  const decoded = (s: string) => {
    try {
      return decodeURIComponent(s.replace(/\+/g, ' '));
    } catch {
      return s;
    }
  };
  const hide = (part: string) => (TOKEN_LIKE.test(part) || TOKEN_LIKE.test(decoded(part)) ? '[redacted]' : part);
  const cut = url.search(/[?#]/);
  const path = cut >= 0 ? url.slice(0, cut) : url;
  const rest = cut >= 0 ? url.slice(cut) : '';
  const query = rest.replace(/([?#&=])([^?#&=]*)/g, (_m, sep: string, part: string) => sep + hide(part));
  return path.split('/').map(hide).join('/') + query;
}

/**
 * The request URL as logged: when the path, normalised as a router or a lenient proxy may see it, falls
 * under a prefix that carries a secret token (`/signin/` and each module's `secretPaths`, e.g. `/files/`),
 * everything after the prefix is cut, whatever spelling the request used (`;params` included). A URL
 * that does not decode is not logged at all. A request no route answered (`unmatched`: a mistyped or
 * mangled link) has every segment or query part that looks like a token (43+ base64url characters) cut too.
 */
export function redactUrl(url: string, secretPrefixes: readonly string[] = [SIGNIN_PREFIX], unmatched = false): string {
  const routed = routedPath(url);
  if (routed === null) return '[undecodable url]';
  for (const prefix of [...secretPrefixes, ...OAUTH_SECRET_PREFIXES]) {
    const p = prefix.toLowerCase();
    if (routed.startsWith(p)) return `${prefix}[redacted]`;
  }
  // The authorization server's requests: no query string (state, PKCE challenges, a code a client misplaces).
  if (routed.startsWith('/oauth/') || routed.startsWith('/.well-known/')) {
    const cut = url.search(/[?#]/);
    if (cut >= 0) return `${url.slice(0, cut)}?[redacted]`;
  }
  return unmatched ? withoutTokenLikeParts(url) : url;
}

/** Paths of the authorization server that carry an interaction id (server/oauth): cut like sign-in links. */
const OAUTH_SECRET_PREFIXES = ['/oauth/authorize/', '/oauth/consent/'];
