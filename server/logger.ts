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
/** A shorter run that still looks random: 32+ base64url characters mixing letters and digits (hex digests, other services' tokens). */
const RANDOM_LIKE = /(?=[A-Za-z0-9_-]*[0-9])(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{32,}/;
/** This service's own secrets: API keys (`wso_…`) and session secrets (`wss_…`), wherever they appear. */
const OWN_SECRET = /(^|[^A-Za-z0-9])ws[os]_[A-Za-z0-9]/i;
/** JSON Web Tokens (`eyJ….…`). */
const JWT_LIKE = /eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]/;

/** Words of a query parameter name that mark a credential (`api_key`, `apiKey`, `X-Api-Key`, `access_token`, `code`, …). */
const CREDENTIAL_WORDS = new Set(['key', 'apikey', 'token', 'secret', 'password', 'passwd', 'pwd', 'pass', 'passphrase', 'code', 'auth', 'authorization', 'session', 'sid', 'sig', 'signature', 'credential', 'credentials', 'jwt', 'otp', 'bearer', 'pin', 'cookie']);
/** Parts that mark a credential even glued to other words (`accesstoken`, `clientsecret`, `sessionid`). */
const CREDENTIAL_PARTS = /token|secret|passw|apikey|accesskey|privatekey|session|credential|bearer/;

const decodedPart = (s: string): string => {
  try {
    return decodeURIComponent(s.replace(/\+/g, ' '));
  } catch {
    return s;
  }
};

/** Whether a query parameter's name says it carries a credential. */
export function isCredentialName(name: string): boolean {
  const words = decodedPart(name)
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter(Boolean);
  return words.some((w) => CREDENTIAL_WORDS.has(w) || CREDENTIAL_PARTS.test(w));
}

/** Whether a value (raw or percent-decoded) looks like a key or a token. */
function isSecretValue(value: string): boolean {
  return [value, decodedPart(value)].some((v) => TOKEN_LIKE.test(v) || RANDOM_LIKE.test(v) || OWN_SECRET.test(v) || JWT_LIKE.test(v));
}

/**
 * The query string (and fragment) with the value of every parameter that carries a credential cut: by
 * its name (`api_key`, `token`, `password`, `code`, …) or by its value (a `wso_…` key, a token-like
 * run); names and ordinary parameters stay readable. A bare part that looks secret is cut whole.
 */
function withoutCredentialParams(rest: string): string {
  return rest.replace(/([?#&;])([^?#&;]*)/g, (_m, sep: string, pair: string) => {
    if (pair === '') return sep;
    const eq = pair.indexOf('=');
    if (eq < 0) return sep + (isSecretValue(pair) ? '[redacted]' : pair);
    const name = pair.slice(0, eq);
    if (isSecretValue(name)) return `${sep}[redacted]`;
    return sep + (isCredentialName(name) || isSecretValue(pair.slice(eq + 1)) ? `${name}=[redacted]` : pair);
  });
}

/** The URL with every path segment that holds something token-like replaced by `[redacted]` (unmatched), or only this service's keys (always). */
function withoutSecretParts(url: string, unmatched: boolean): string {
  const hide = (part: string) =>
    OWN_SECRET.test(part) || OWN_SECRET.test(decodedPart(part)) || (unmatched && (TOKEN_LIKE.test(part) || TOKEN_LIKE.test(decodedPart(part)))) ? '[redacted]' : part;
  const cut = url.search(/[?#]/);
  const path = cut >= 0 ? url.slice(0, cut) : url;
  const rest = cut >= 0 ? url.slice(cut) : '';
  return path.split('/').map(hide).join('/') + withoutCredentialParams(rest);
}

/**
 * The request URL as logged: when the path, normalised as a router or a lenient proxy may see it, falls
 * under a prefix that carries a secret token (`/signin/` and each module's `secretPaths`, e.g.
 * `/files/`, `/mailbox/`), everything after the prefix is cut, whatever spelling the request used
 * (`;params` included); under a prefix of `queries` (each module's `secretQueries`, e.g. `/oauth/`), the
 * whole query string is cut. A URL that does not decode is not logged at all. On every URL, the value of a query
 * parameter that carries a credential (by its name: `api_key`, `token`, `password`, `code`, …; or by
 * its value: a `wso_…` key, a token-like run) is cut, and a path segment holding a key too. A request
 * no route answered (`unmatched`: a mistyped or mangled link) has every segment that looks like a token
 * (43+ base64url characters) cut as well.
 */
export function redactUrl(url: string, secret: SecretUrlParts | readonly string[] = [SIGNIN_PREFIX], unmatched = false): string {
  const { paths, queries = [] } = Array.isArray(secret) ? { paths: secret as readonly string[] } : (secret as SecretUrlParts);
  const routed = routedPath(url);
  if (routed === null) return '[undecodable url]';
  for (const prefix of paths) {
    const p = prefix.toLowerCase();
    if (routed.startsWith(p)) return `${prefix}[redacted]`;
  }
  // Paths whose query string is secret as a whole (the authorization server's: state, PKCE challenges, a code a client misplaces).
  if (queries.some((q) => routed.startsWith(q.toLowerCase()))) {
    const cut = url.search(/[?#]/);
    if (cut >= 0) return `${withoutSecretParts(url.slice(0, cut), unmatched)}?[redacted]`;
  }
  return withoutSecretParts(url, unmatched);
}

/** What the request log cuts: path prefixes whose rest is a secret (`/signin/`, `/files/`), and prefixes whose query string is (`/oauth/`). */
export interface SecretUrlParts {
  readonly paths: readonly string[];
  readonly queries?: readonly string[];
}

