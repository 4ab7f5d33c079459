/**
 * Hardened outbound HTTPS (webhook deliveries): only public HTTPS destinations, checked at every call.
 *
 * - `checkDestination`: syntax only (no DNS): https, no credentials, port 443 (or allowed), the host
 *   an address that is public or a name that is not obviously private (`localhost`, single labels,
 *   `.local`, `.internal`, `.home.arpa`, ...). IPv4 written in decimal / hex / octal / short forms is
 *   normalised to dotted decimal by the WHATWG URL parser first, so the parsed host is what is checked.
 * - `resolveDestination`: every A/AAAA answer of the name must be public (ipaddr.js ranges: only
 *   `unicast`, and for IPv6 only global unicast 2000::/3; IPv4-mapped / -compatible refused; 6to4 and
 *   NAT64 judged by the IPv4 address they embed; Teredo refused), else the whole destination is refused.
 * - `post`: connects to the very address that was checked (undici connector with the host replaced,
 *   the hostname kept for SNI, certificate verification and `Host`): no DNS-rebinding window. Never
 *   follows redirects, one total deadline (DNS, connect, TLS, headers, body), response body capped.
 *   A connection is kept for the next attempt only to the same origin and the same checked address
 *   (see `takeClient`), so the checks still run at every attempt and the TLS handshake does not.
 *
 * The only relaxations are explicit operator settings for local test receivers (exact loopback
 * address:port pairs, extra ports, an extra CA), off by default; `relaxations()` names them for the log.
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import { StringDecoder } from 'node:string_decoder';
import tls from 'node:tls';
import ipaddr from 'ipaddr.js';
import { buildConnector, Client } from 'undici';

export interface EgressPolicy {
  /** Ports allowed besides 443 (EGRESS_ALLOWED_PORTS, e.g. "8443"); default none. */
  readonly allowedPorts: readonly number[];
  /**
   * Exact loopback destinations allowed for test receivers, e.g. [{ host: '127.0.0.1', port: 9443 }]
   * (EGRESS_ALLOW_DESTINATIONS="127.0.0.1:9443"); default none. Only these exact address:port pairs
   * bypass the non-public refusal; never a name, never a range. `host` is the canonical address
   * (`127.0.0.1`, `::1`), without brackets.
   */
  readonly allowDestinations: ReadonlyArray<{ host: string; port: number }>;
  /** Extra CA certificates (PEM) trusted for TLS, for test receivers (EGRESS_TEST_CA_FILE); default none (system CAs only). */
  readonly testCa: string | null;
}

/** The strict default: public HTTPS on 443 only, the platform's CA bundle only. */
export const STRICT_EGRESS_POLICY: EgressPolicy = Object.freeze({ allowedPorts: Object.freeze([]), allowDestinations: Object.freeze([]), testCa: null });

export type EgressRefusalReason =
  | 'invalid_url'
  | 'not_https'
  | 'credentials'
  | 'port'
  | 'non_public_address'
  | 'non_public_name'
  | 'dns_failed';

/** A destination this service will not connect to. Thrown before any connection is opened. */
export class EgressRefused extends Error {
  override readonly name = 'EgressRefused';
  /** Machine-readable reason (see EgressRefusalReason). */
  readonly reason: EgressRefusalReason;
  /** True only for `dns_failed` (the name may resolve later); every other refusal is permanent for that URL. */
  readonly transient: boolean;
  constructor(reason: EgressRefusalReason, message: string) {
    super(message);
    this.reason = reason;
    this.transient = reason === 'dns_failed';
  }
}

/** Resolves a hostname to every address (A and AAAA); injected by tests. */
export type LookupAll = (hostname: string) => Promise<ReadonlyArray<{ address: string; family: number }>>;

/** The system resolver (getaddrinfo: /etc/hosts and DNS), every answer of both families, in resolver order. */
export const systemLookup: LookupAll = (hostname) => dnsLookup(hostname, { all: true, family: 0, verbatim: true });

// ---------------------------------------------------------------------------------------------
// Addresses

type Address = ipaddr.IPv4 | ipaddr.IPv6;
export type AddressVerdict = { public: true } | { public: false; why: string };

const v4Cidr = (cidr: string) => ipaddr.IPv4.parseCIDR(cidr);
const v6Cidr = (cidr: string) => ipaddr.IPv6.parseCIDR(cidr);
/** Finer names than ipaddr.js's `reserved` for the messages. */
const V4_NAMED: Array<[string, [ipaddr.IPv4, number]]> = [
  ['documentation (TEST-NET-1)', v4Cidr('192.0.2.0/24')],
  ['documentation (TEST-NET-2)', v4Cidr('198.51.100.0/24')],
  ['documentation (TEST-NET-3)', v4Cidr('203.0.113.0/24')],
  ['benchmarking', v4Cidr('198.18.0.0/15')],
  ['IETF protocol assignments', v4Cidr('192.0.0.0/24')],
  ['reserved (240.0.0.0/4)', v4Cidr('240.0.0.0/4')],
];
const V6_GLOBAL_UNICAST = v6Cidr('2000::/3');
const V6_NAT64 = v6Cidr('64:ff9b::/96');
const V6_NAT64_LOCAL = v6Cidr('64:ff9b:1::/48');
const V6_6TO4 = v6Cidr('2002::/16');
const V6_TEREDO = v6Cidr('2001::/32');
const V6_DOCUMENTATION = [v6Cidr('2001:db8::/32'), v6Cidr('3fff::/20')];

const v4FromParts = (high: number, low: number) => ipaddr.fromByteArray([high >> 8, high & 0xff, low >> 8, low & 0xff]) as ipaddr.IPv4;

function classifyV4(address: ipaddr.IPv4): AddressVerdict {
  const range = address.range();
  if (range === 'unicast') return { public: true };
  if (range === 'reserved') for (const [name, cidr] of V4_NAMED) if (address.match(cidr)) return { public: false, why: name };
  return { public: false, why: range };
}

function classifyV6(address: ipaddr.IPv6): AddressVerdict {
  const p = address.parts;
  if (address.isIPv4MappedAddress()) return { public: false, why: `IPv4-mapped IPv6 (${address.toIPv4Address().toString()})` };
  if (p.slice(0, 6).every((x) => x === 0)) {
    if (p[6] === 0 && p[7] === 0) return { public: false, why: 'unspecified' };
    if (p[6] === 0 && p[7] === 1) return { public: false, why: 'loopback' };
    return { public: false, why: `IPv4-compatible IPv6 (${v4FromParts(p[6]!, p[7]!).toString()})` };
  }
  if (address.match(V6_NAT64)) {
    // RFC 6052 well-known prefix: a NAT64 gateway connects to the embedded IPv4 address.
    const embedded = v4FromParts(p[6]!, p[7]!);
    const verdict = classifyV4(embedded);
    return verdict.public ? verdict : { public: false, why: `NAT64 address embedding ${embedded.toString()} (${verdict.why})` };
  }
  if (address.match(V6_NAT64_LOCAL)) return { public: false, why: 'local-use NAT64 (64:ff9b:1::/48)' };
  if (address.match(V6_6TO4)) {
    const embedded = v4FromParts(p[1]!, p[2]!);
    const verdict = classifyV4(embedded);
    return verdict.public ? verdict : { public: false, why: `6to4 address embedding ${embedded.toString()} (${verdict.why})` };
  }
  if (address.match(V6_TEREDO)) {
    // Tunnelled through a relay to the client (last 32 bits inverted); never a webhook receiver.
    const client = v4FromParts(~p[6]! & 0xffff, ~p[7]! & 0xffff);
    return { public: false, why: `Teredo (embedding ${client.toString()})` };
  }
  if (V6_DOCUMENTATION.some((cidr) => address.match(cidr))) return { public: false, why: 'documentation' };
  const range = address.range();
  if (range !== 'unicast') return { public: false, why: (range as string) === 'deprecatedSiteLocal' ? 'site-local' : range };
  if (!address.match(V6_GLOBAL_UNICAST)) return { public: false, why: 'not global unicast (outside 2000::/3)' };
  return { public: true };
}

/** Whether an address (any textual form ipaddr.js accepts, IPv6 with or without brackets) is public. */
export function classifyAddress(text: string): AddressVerdict {
  const bare = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  let address: Address;
  try {
    address = ipaddr.parse(bare);
  } catch {
    return { public: false, why: 'not an IP address' };
  }
  return address.kind() === 'ipv4' ? classifyV4(address as ipaddr.IPv4) : classifyV6(address as ipaddr.IPv6);
}

/** Canonical text of an address (`127.0.0.1`, `::1`), or null when it is not one in a standard form. */
function canonicalAddress(text: string): { address: string; family: 4 | 6 } | null {
  const bare = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  if (ipaddr.IPv4.isValidFourPartDecimal(bare)) return { address: ipaddr.IPv4.parse(bare).toString(), family: 4 };
  if (ipaddr.IPv6.isValid(bare) && bare.includes(':')) return { address: ipaddr.IPv6.parse(bare).toString(), family: 6 };
  return null;
}

// ---------------------------------------------------------------------------------------------
// Names

/**
 * Suffixes that never name a public webhook receiver: RFC 6761 special-use names, mDNS (RFC 6762),
 * home networks (RFC 8375), ICANN's private-use `.internal`, `.alt` (RFC 9476), Tor, the reverse
 * zones, and the private TLDs commonly used on internal networks.
 */
const NON_PUBLIC_SUFFIXES = [
  'localhost', 'localdomain', 'local', 'internal', 'home.arpa', 'arpa', 'test', 'example', 'invalid', 'onion', 'alt',
  'intranet', 'private', 'corp', 'home', 'lan',
];

function nameVerdict(hostname: string): string | null {
  const name = hostname.endsWith('.') ? hostname.slice(0, -1) : hostname;
  if (!name) return 'empty host name';
  if (!name.includes('.')) return `"${name}" is not a fully qualified name`;
  const suffix = NON_PUBLIC_SUFFIXES.find((s) => name === s || name.endsWith(`.${s}`));
  if (suffix) return `names under .${suffix} are not public`;
  if (name.split('.').some((label) => label === '')) return 'empty label in host name';
  return null;
}

// ---------------------------------------------------------------------------------------------
// Checks

const isAllowListed = (policy: EgressPolicy, address: string, port: number) =>
  policy.allowDestinations.some((d) => d.host === address && d.port === port);

/** The URL's port as a number (443 when absent). */
const portOf = (url: URL) => (url.port === '' ? 443 : Number(url.port));

/** Syntactic check, no DNS: throws EgressRefused. Returns the normalised URL (fragment dropped). */
export function checkDestination(url: string, policy: EgressPolicy): URL {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new EgressRefused('invalid_url', 'not a valid absolute URL');
  }
  if (parsed.protocol !== 'https:') throw new EgressRefused('not_https', `only https URLs are allowed (got ${parsed.protocol.replace(/:$/, '')})`);
  if (parsed.username !== '' || parsed.password !== '') throw new EgressRefused('credentials', 'URLs with credentials (user:password@) are not allowed');
  if (!parsed.hostname) throw new EgressRefused('invalid_url', 'the URL has no host');
  const port = portOf(parsed);
  const literal = canonicalAddress(parsed.hostname);
  if (literal) {
    const allowListed = isAllowListed(policy, literal.address, port);
    if (!allowListed) {
      const verdict = classifyAddress(literal.address);
      if (!verdict.public) throw new EgressRefused('non_public_address', `${literal.address} is not a public address (${verdict.why})`);
    }
    if (!allowListed && port !== 443 && !policy.allowedPorts.includes(port)) throw portRefusal(port);
  } else {
    // The WHATWG parser turns every IPv4 form into dotted decimal; anything else ipaddr.js reads as an address is refused.
    if (ipaddr.isValid(parsed.hostname)) throw new EgressRefused('non_public_address', `${parsed.hostname} is not a standard address form`);
    const why = nameVerdict(parsed.hostname);
    if (why) throw new EgressRefused('non_public_name', `${parsed.hostname}: ${why}`);
    // A name's answers may only use a non-443 port when they are the allow-listed address on it (checked on resolution).
    if (port !== 443 && !policy.allowedPorts.includes(port) && !policy.allowDestinations.some((d) => d.port === port)) throw portRefusal(port);
  }
  parsed.hash = '';
  return parsed;
}

const portRefusal = (port: number) => new EgressRefused('port', `port ${port} is not allowed (443 only, or EGRESS_ALLOWED_PORTS)`);

/** Strips the brackets of an IPv6 URL host. */
const bareHost = (url: URL) => (url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname);

/**
 * Resolves the host (every A and AAAA answer), refuses if ANY answer is non-public (unless the exact
 * address:port is allow-listed); returns the address to connect to (the first IPv4 answer, else the
 * first IPv6 one) and every checked answer. IP literals are checked without DNS.
 */
export async function resolveDestination(
  url: URL,
  policy: EgressPolicy,
  lookup: LookupAll = systemLookup,
): Promise<{ address: string; family: 4 | 6; addresses: Array<{ address: string; family: 4 | 6 }> }> {
  checkDestination(url.href, policy); // the URL object may come from elsewhere: never trust it unchecked
  const port = portOf(url);
  const literal = canonicalAddress(url.hostname);
  if (literal) return { ...literal, addresses: [literal] };

  const hostname = bareHost(url);
  let answers: ReadonlyArray<{ address: string; family: number }>;
  try {
    answers = await lookup(hostname);
  } catch (error) {
    const code = (error as { code?: string }).code;
    throw new EgressRefused('dns_failed', `${hostname} could not be resolved${code ? ` (${code})` : ''}`);
  }
  if (!answers.length) throw new EgressRefused('dns_failed', `${hostname} has no A or AAAA record`);

  const checked: Array<{ address: string; family: 4 | 6 }> = [];
  for (const answer of answers) {
    const canonical = canonicalAddress(answer.address);
    if (!canonical) throw new EgressRefused('non_public_address', `${hostname} resolves to "${answer.address}", not an IP address`);
    if (!isAllowListed(policy, canonical.address, port)) {
      const verdict = classifyAddress(canonical.address);
      if (!verdict.public) throw new EgressRefused('non_public_address', `${hostname} resolves to ${canonical.address}, not a public address (${verdict.why})`);
      if (port !== 443 && !policy.allowedPorts.includes(port)) throw portRefusal(port);
    }
    checked.push(canonical);
  }
  const chosen = checked.find((a) => a.family === 4) ?? checked[0]!;
  return { ...chosen, addresses: checked };
}

// ---------------------------------------------------------------------------------------------
// The client

export interface PostInit {
  headers: Record<string, string>;
  body: Buffer | string;
  /** Total deadline: resolution, connection, TLS, request, response headers and body. */
  timeoutMs: number;
  /** Response body bytes kept; the rest is discarded and the connection closed. */
  maxResponseBytes: number;
}

export type PostOutcome =
  | { kind: 'response'; status: number; headers: Record<string, string>; body: string; truncated: boolean; durationMs: number; address: string }
  | { kind: 'error'; error: string; durationMs: number; address: string | null };

/** Request headers the client sets itself (framing, Host): a caller may not send them. */
const RESERVED_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', 'expect', 'te', 'trailer', 'proxy-connection', 'proxy-authorization']);

class Deadline extends Error {}

/**
 * With a test CA: Node's bundle plus the test CA (the `ca` option replaces the defaults), built once
 * per CA text rather than on every connection.
 */
let trustCache: { pem: string; context: tls.SecureContext; id: number } | null = null;
let trustIds = 0;
function secureContextFor(policy: EgressPolicy): { context: tls.SecureContext | undefined; id: number } {
  if (!policy.testCa) return { context: undefined, id: 0 };
  if (trustCache?.pem !== policy.testCa) trustCache = { pem: policy.testCa, context: tls.createSecureContext({ ca: [...tls.rootCertificates, policy.testCa] }), id: ++trustIds };
  return { context: trustCache.context, id: trustCache.id };
}

/**
 * Keep-alive connections. Each is an undici `Client` (one connection, one request at a time), kept
 * idle under a key of the URL's origin, the checked address it connects to, the trust and the connect
 * timeout. Every attempt still checks the URL and every DNS answer first, and reuses an idle
 * connection only when that check chose the very same address (the key holds it): a connection is
 * never pinned to anything but a checked address, and a name that now resolves elsewhere gets a new
 * one (a non-public answer is refused before this). The TLS handshake (certificate verified against
 * the URL's name) happens once per connection instead of once per attempt. Only a connection whose
 * response was read to its end goes back; a response cut at maxResponseBytes, a timeout or any error
 * destroys it, as before. undici closes an idle socket after the receiver's keep-alive hint (4 s by
 * default); idle clients unused for IDLE_MS are closed and forgotten; at most MAX_IDLE_PER_KEY per key
 * and MAX_KEYS keys are kept.
 */
const IDLE_MS = 60_000;
const MAX_IDLE_PER_KEY = 64;
const MAX_KEYS = 256;
const idleClients = new Map<string, { clients: Client[]; usedAt: number }>();
let sweepTimer: NodeJS.Timeout | null = null;

function forget(key: string): void {
  const entry = idleClients.get(key);
  idleClients.delete(key);
  for (const c of entry?.clients ?? []) c.close().catch(() => {});
}

function sweepIdle(now: number): void {
  for (const [key, entry] of idleClients) if (now - entry.usedAt > IDLE_MS) forget(key);
  if (!idleClients.size && sweepTimer) {
    clearInterval(sweepTimer);
    sweepTimer = null;
  }
}

/** An idle kept connection of this key, or a new one. */
function takeClient(key: string, make: () => Client): Client {
  const entry = idleClients.get(key);
  if (entry) {
    entry.usedAt = Date.now();
    // Most recently used last: the first key is the one dropped when there are too many.
    idleClients.delete(key);
    idleClients.set(key, entry);
    const client = entry.clients.pop();
    if (client) return client;
  }
  return make();
}

/** Keeps a connection whose response was read to its end, for the next attempt with the same key. */
function keepClient(key: string, client: Client): void {
  let entry = idleClients.get(key);
  if (!entry) {
    if (idleClients.size >= MAX_KEYS) forget(idleClients.keys().next().value!);
    entry = { clients: [], usedAt: Date.now() };
    idleClients.set(key, entry);
  }
  if (client.destroyed || client.closed || entry.clients.length >= MAX_IDLE_PER_KEY) {
    client.close().catch(() => {});
    return;
  }
  entry.clients.push(client);
  if (!sweepTimer) {
    sweepTimer = setInterval(() => sweepIdle(Date.now()), IDLE_MS / 2);
    sweepTimer.unref();
  }
}

/** Closes every kept connection (tests; a process that exits need not). */
export async function closeEgressConnections(): Promise<void> {
  const all = [...idleClients.values()].flatMap((e) => e.clients);
  idleClients.clear();
  await Promise.all(all.map((c) => c.destroy().catch(() => {})));
}

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

/**
 * One POST: checks, resolves, connects to the checked address (the hostname kept for SNI, certificate
 * verification and Host), never follows redirects, one total timeout, response body read up to
 * maxResponseBytes (the rest discarded, connection closed). Network errors and timeouts are returned
 * as outcomes, not thrown; EgressRefused is thrown before any connection (a resolution that outlasts
 * the deadline is a timeout outcome).
 */
export async function post(url: string, init: PostInit, policy: EgressPolicy, lookup: LookupAll = systemLookup): Promise<PostOutcome> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  const target = checkDestination(url, policy);
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
    resolved = await Promise.race([resolveDestination(target, policy, lookup), deadline]);
  } catch (error) {
    if (error instanceof Deadline) return { kind: 'error', error: `${timeoutMessage} (resolving ${bareHost(target)})`, durationMs: elapsed(), address: null };
    clearTimeout(timer);
    throw error;
  }

  const hostname = bareHost(target);
  const isLiteral = canonicalAddress(target.hostname) !== null;
  const trust = secureContextFor(policy);
  const address = resolved.address;
  const key = `${target.origin} ${address} ${trust.id} ${init.timeoutMs}`;
  const client = takeClient(key, () => {
    const connector = buildConnector({ timeout: init.timeoutMs, maxCachedSessions: 0, rejectUnauthorized: true, ...(trust.context ? { secureContext: trust.context } : {}) });
    return new Client(target.origin, {
      // The checked address, never a second resolution; SNI and certificate check against the URL's name.
      connect: (options, callback) => connector({ ...options, hostname: address, servername: isLiteral ? undefined : hostname }, callback),
    });
  });
  let reusable = false;
  try {
    const response = await client.request({
      path: `${target.pathname}${target.search}`,
      method: 'POST',
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
    if (reusable) keepClient(key, client);
    else client.destroy().catch(() => {});
  }
}

// ---------------------------------------------------------------------------------------------
// Configuration

const MAX_PORT = 65535;

function portFrom(name: string, raw: string): number {
  if (!/^\d{1,5}$/.test(raw) || Number(raw) < 1 || Number(raw) > MAX_PORT) throw new Error(`${name}: "${raw}" is not a port (1-${MAX_PORT})`);
  return Number(raw);
}

const listFrom = (raw: string | undefined) => (raw ?? '').split(/[\s,]+/).filter(Boolean);

/** Reads EGRESS_ALLOWED_PORTS, EGRESS_ALLOW_DESTINATIONS and EGRESS_TEST_CA_FILE; throws a readable error on bad values. */
export function egressPolicyFromEnv(env: NodeJS.ProcessEnv): EgressPolicy {
  const allowedPorts = [...new Set(listFrom(env.EGRESS_ALLOWED_PORTS).map((p) => portFrom('EGRESS_ALLOWED_PORTS', p)))].filter((p) => p !== 443);

  const allowDestinations: Array<{ host: string; port: number }> = [];
  for (const entry of listFrom(env.EGRESS_ALLOW_DESTINATIONS)) {
    const rule = 'only exact loopback address:port pairs such as 127.0.0.1:9443 or [::1]:9443 (no names, no ranges)';
    const match = /^(?:\[([0-9a-fA-F:.]+)\]|(\d{1,3}(?:\.\d{1,3}){3})):(\d+)$/.exec(entry);
    if (!match) throw new Error(`EGRESS_ALLOW_DESTINATIONS: "${entry}" is not allowed: ${rule}`);
    const canonical = canonicalAddress(match[1] ?? match[2]!);
    if (!canonical) throw new Error(`EGRESS_ALLOW_DESTINATIONS: "${entry}" is not allowed: ${rule}`);
    const range = ipaddr.parse(canonical.address).range();
    if (range !== 'loopback') throw new Error(`EGRESS_ALLOW_DESTINATIONS: "${entry}" is not a loopback address (${range}): ${rule}`);
    const port = portFrom('EGRESS_ALLOW_DESTINATIONS', match[3]!);
    if (!allowDestinations.some((d) => d.host === canonical.address && d.port === port)) allowDestinations.push({ host: canonical.address, port });
  }

  let testCa: string | null = null;
  const caFile = env.EGRESS_TEST_CA_FILE?.trim();
  if (caFile) {
    let pem: string;
    try {
      pem = fs.readFileSync(caFile, 'utf8');
    } catch (error) {
      throw new Error(`EGRESS_TEST_CA_FILE: cannot read "${caFile}" (${(error as { code?: string }).code ?? (error as Error).message})`);
    }
    if (!/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/.test(pem)) throw new Error(`EGRESS_TEST_CA_FILE: "${caFile}" holds no PEM certificate`);
    try {
      tls.createSecureContext({ ca: pem });
    } catch (error) {
      throw new Error(`EGRESS_TEST_CA_FILE: "${caFile}" is not a usable CA certificate (${(error as Error).message})`);
    }
    testCa = pem;
  }
  return Object.freeze({ allowedPorts: Object.freeze(allowedPorts), allowDestinations: Object.freeze(allowDestinations), testCa });
}

const formatDestination = (d: { host: string; port: number }) => (d.host.includes(':') ? `[${d.host}]:${d.port}` : `${d.host}:${d.port}`);

/** Lines to log loudly at start when the policy relaxes anything (test CA, allow-listed destinations, extra ports); empty otherwise. */
export function relaxations(policy: EgressPolicy): string[] {
  const lines: string[] = [];
  if (policy.allowDestinations.length) {
    lines.push(`EGRESS RELAXED: webhook deliveries may reach these non-public destinations (EGRESS_ALLOW_DESTINATIONS, for test receivers only): ${policy.allowDestinations.map(formatDestination).join(', ')}`);
  }
  if (policy.testCa) {
    const count = (policy.testCa.match(/-----BEGIN CERTIFICATE-----/g) ?? []).length;
    lines.push(`EGRESS RELAXED: ${count} extra CA certificate${count === 1 ? '' : 's'} trusted for webhook TLS (EGRESS_TEST_CA_FILE, for test receivers only)`);
  }
  if (policy.allowedPorts.length) {
    lines.push(`EGRESS RELAXED: webhook deliveries may use ports besides 443 (EGRESS_ALLOWED_PORTS): ${policy.allowedPorts.join(', ')}`);
  }
  return lines;
}
