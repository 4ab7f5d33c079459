/**
 * The egress client: one per service process (`ModuleDeps.egress`), closed at shutdown. `post`
 * checks the URL and every DNS answer against the policy (policy.ts), then connects to the very
 * address that was checked (undici connector with the host replaced, the hostname kept for SNI,
 * certificate verification and `Host`): no DNS-rebinding window. Never follows redirects, one total
 * deadline (DNS, connect, TLS, headers, body), response body capped.
 *
 * Keep-alive connections: each is an undici `Client` (one connection, one request at a time), kept
 * idle under a key of the URL's origin, the checked address it connects to and the connect timeout.
 * Every attempt still checks the URL and every DNS answer first, and reuses an idle connection only
 * when that check chose the very same address (the key holds it): a connection is never pinned to
 * anything but a checked address, and a name that now resolves elsewhere gets a new one. The TLS
 * handshake (certificate verified against the URL's name) happens once per connection instead of once
 * per attempt. Only a connection whose response was read to its end goes back; a response cut at
 * maxResponseBytes, a timeout or any error destroys it. undici closes an idle socket after the
 * receiver's keep-alive hint (4 s by default); keys unused for IDLE_MS are dropped (least recently
 * used first beyond MAX_KEYS), at most MAX_IDLE_PER_KEY connections each.
 */
import { performance } from 'node:perf_hooks';
import { StringDecoder } from 'node:string_decoder';
import tls from 'node:tls';
import { LRUCache } from 'lru-cache';
import { buildConnector, Client } from 'undici';
import { bareHost, canonicalAddress, checkDestination, type EgressPolicy, type LookupAll, resolveDestination, systemLookup } from './policy.ts';

export interface PostInit {
  headers: Record<string, string>;
  body: Buffer | string;
  /** Total deadline: resolution, connection, TLS, request, response headers and body. */
  timeoutMs: number;
  /** Response body bytes kept; the rest is discarded and the connection closed. */
  maxResponseBytes: number;
}

/** A GET (`get`): no body; the same limits as a POST. */
export interface GetInit {
  headers?: Record<string, string>;
  /** Total deadline: resolution, connection, TLS, request, response headers and body. */
  timeoutMs: number;
  /** Response body bytes kept; the rest is discarded and the connection closed (`truncated: true`). */
  maxResponseBytes: number;
}

export type PostOutcome =
  | { kind: 'response'; status: number; headers: Record<string, string>; body: string; truncated: boolean; durationMs: number; address: string }
  | { kind: 'error'; error: string; durationMs: number; address: string | null };

/** Request headers the client sets itself (framing, Host): a caller may not send them. */
const RESERVED_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', 'expect', 'te', 'trailer', 'proxy-connection', 'proxy-authorization']);

const IDLE_MS = 60_000;
const MAX_IDLE_PER_KEY = 64;
const MAX_KEYS = 256;

class Deadline extends Error {}

const TLS_CODES = /^(ERR_TLS_|ERR_SSL_|CERT_|DEPTH_ZERO|SELF_SIGNED|UNABLE_TO_|HOSTNAME_MISMATCH|ERR_OSSL)/;

function describeError(error: unknown): string {
  const chain: Array<{ code?: string; message?: string }> = [];
  for (let e = error as { code?: string; message?: string; cause?: unknown } | undefined, i = 0; e && i < 5; e = e.cause as typeof e, i++) chain.push(e);
  for (const e of chain) {
    const code = e.code ?? '';
    if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') return `TLS: certificate does not match the host (${e.message ?? code})`;
    if (TLS_CODES.test(code)) return `TLS: ${/CERT|SIGNED|ISSUER|UNABLE_TO/.test(code) ? 'certificate not trusted' : 'handshake failed'} (${e.message ?? code}; ${code})`;
    switch (code) {
      case 'ECONNREFUSED': return 'connection refused';
      case 'ECONNRESET': return 'connection reset by the receiver';
      case 'EHOSTUNREACH': return 'host unreachable';
      case 'ENETUNREACH': return 'network unreachable';
      case 'ETIMEDOUT': return 'connection timed out';
      case 'EPIPE': return 'connection closed by the receiver while sending';
      case 'UND_ERR_SOCKET': return `connection closed by the receiver (${e.message})`;
      case 'HPE_INVALID_CONSTANT': case 'HPE_INVALID_STATUS': case 'HPE_INVALID_HEADER_TOKEN':
        return `invalid HTTP response (${code})`;
      default:
    }
  }
  const first = chain[0];
  return first?.code ? `${first.code}: ${first.message}` : String(first?.message ?? error);
}

/** Outbound HTTPS under one policy, with the connections it keeps; `close()` at shutdown. */
export class EgressClient {
  private readonly idle = new LRUCache<string, Client[]>({
    max: MAX_KEYS,
    ttl: IDLE_MS,
    updateAgeOnGet: true,
    dispose: (clients) => {
      for (const c of clients) c.close().catch(() => {});
    },
  });
  /** With a test CA: Node's bundle plus the test CA (the `ca` option replaces the defaults), built once. */
  private readonly trust: tls.SecureContext | undefined;
  private closed = false;
  private lastPurge = 0;

  constructor(
    readonly policy: EgressPolicy,
    private readonly lookup: LookupAll = systemLookup,
  ) {
    this.trust = policy.testCa ? tls.createSecureContext({ ca: [...tls.rootCertificates, policy.testCa] }) : undefined;
  }

  /** Syntactic check of a destination under this client's policy (see `checkDestination`). */
  check(url: string): URL {
    return checkDestination(url, this.policy);
  }

  /**
   * One POST: checks, resolves, connects to the checked address (the hostname kept for SNI, certificate
   * verification and Host), never follows redirects, one total timeout, response body read up to
   * maxResponseBytes (the rest discarded, connection closed). Network errors and timeouts are returned
   * as outcomes, not thrown; EgressRefused is thrown before any connection (a resolution that outlasts
   * the deadline is a timeout outcome). `lookup` replaces the client's resolver for this call (tests).
   */
  async post(url: string, init: PostInit, lookup: LookupAll = this.lookup): Promise<PostOutcome> {
    return this.send('POST', url, init, lookup);
  }

  /**
   * One GET under the same rules as `post` (documents the service reads, e.g. an OAuth client's
   * metadata document): public HTTPS only, the checked address, no redirects (a 3xx is returned as
   * it is), one total deadline, the body capped at maxResponseBytes.
   */
  async get(url: string, init: GetInit, lookup: LookupAll = this.lookup): Promise<PostOutcome> {
    return this.send('GET', url, { headers: init.headers ?? {}, body: undefined, timeoutMs: init.timeoutMs, maxResponseBytes: init.maxResponseBytes }, lookup);
  }

  private async send(method: 'GET' | 'POST', url: string, init: Omit<PostInit, 'body'> & { body: PostInit['body'] | undefined }, lookup: LookupAll): Promise<PostOutcome> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const target = checkDestination(url, this.policy);
    for (const name of Object.keys(init.headers)) {
      if (RESERVED_HEADERS.has(name.toLowerCase())) throw new TypeError(`egress: the "${name}" header is set by the client, not by the caller`);
    }
    const timeoutMessage = `timeout after ${init.timeoutMs} ms`;

    let timer: NodeJS.Timeout | undefined;
    const controller = new AbortController();
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        controller.abort(new Deadline(timeoutMessage));
        reject(new Deadline(timeoutMessage));
      }, init.timeoutMs);
    });
    deadline.catch(() => {});

    let resolved: { address: string; family: 4 | 6 };
    try {
      resolved = await Promise.race([resolveDestination(target, this.policy, lookup), deadline]);
    } catch (error) {
      if (error instanceof Deadline) return { kind: 'error', error: `${timeoutMessage} (resolving ${bareHost(target)})`, durationMs: elapsed(), address: null };
      clearTimeout(timer);
      throw error;
    }

    const key = `${target.origin} ${resolved.address} ${init.timeoutMs}`;
    const client = this.take(key) ?? this.connect(target, resolved.address, init.timeoutMs);
    let reusable = false;
    try {
      const response = await client.request({
        path: `${target.pathname}${target.search}`,
        method,
        signal: controller.signal,
        headers: init.headers,
        body: init.body,
        headersTimeout: init.timeoutMs,
        bodyTimeout: init.timeoutMs,
      });
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(response.headers)) {
        if (value !== undefined) headers[name.toLowerCase()] = Array.isArray(value) ? value.join(', ') : value;
      }
      const chunks: Buffer[] = [];
      let kept = 0;
      let truncated = false;
      for await (const chunk of response.body) {
        const buffer = chunk as Buffer;
        const room = init.maxResponseBytes - kept;
        if (buffer.length > room) {
          if (room > 0) chunks.push(buffer.subarray(0, room));
          kept += Math.max(room, 0);
          truncated = true;
          break;
        }
        chunks.push(buffer);
        kept += buffer.length;
      }
      if (truncated) response.body.destroy();
      // Only whole characters: a cut in the middle of a UTF-8 sequence drops the partial character.
      const decoder = new StringDecoder('utf8');
      const body = truncated ? decoder.write(Buffer.concat(chunks)) : decoder.write(Buffer.concat(chunks)) + decoder.end();
      reusable = !truncated && !controller.signal.aborted;
      return { kind: 'response', status: response.statusCode, headers, body, truncated, durationMs: elapsed(), address: resolved.address };
    } catch (error) {
      const message = controller.signal.aborted ? timeoutMessage : describeError(error);
      return { kind: 'error', error: message, durationMs: elapsed(), address: resolved.address };
    } finally {
      clearTimeout(timer);
      if (reusable) this.keep(key, client);
      else client.destroy().catch(() => {});
    }
  }

  /** Closes every kept connection; later posts still work but keep none. */
  async close(): Promise<void> {
    this.closed = true;
    const all = [...this.idle.values()].flat();
    this.idle.clear();
    await Promise.all(all.map((c) => c.destroy().catch(() => {})));
  }

  private connect(target: URL, address: string, timeoutMs: number): Client {
    const isLiteral = canonicalAddress(target.hostname) !== null;
    const hostname = bareHost(target);
    const connector = buildConnector({ timeout: timeoutMs, maxCachedSessions: 0, rejectUnauthorized: true, ...(this.trust ? { secureContext: this.trust } : {}) });
    return new Client(target.origin, {
      // The checked address, never a second resolution; SNI and certificate check against the URL's name.
      connect: (options, callback) => connector({ ...options, hostname: address, servername: isLiteral ? undefined : hostname }, callback),
    });
  }

  /** An idle kept connection of this key, if any. */
  private take(key: string): Client | undefined {
    return this.idle.get(key)?.pop();
  }

  /** Keeps a connection whose response was read to its end, for the next attempt with the same key. */
  private keep(key: string, client: Client): void {
    const clients = this.idle.get(key) ?? [];
    if (this.closed || client.destroyed || client.closed || clients.length >= MAX_IDLE_PER_KEY) {
      client.close().catch(() => {});
      return;
    }
    clients.push(client);
    if (clients.length === 1) this.idle.set(key, clients);
    const now = Date.now();
    if (now - this.lastPurge > IDLE_MS / 2) {
      this.lastPurge = now;
      this.idle.purgeStale();
    }
  }
}
