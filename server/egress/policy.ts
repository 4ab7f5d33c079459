/**
 * The egress policy (address and name rules, no I/O but DNS): only public HTTPS destinations.
 *
 * - `checkDestination`: syntax only (no DNS): https, no credentials, port 443 (or allowed), the host
 *   an address that is public or a name that is not obviously private (`localhost`, single labels,
 *   `.local`, `.internal`, `.home.arpa`, ...). IPv4 written in decimal / hex / octal / short forms is
 *   normalised to dotted decimal by the WHATWG URL parser first, so the parsed host is what is checked.
 * - `resolveDestination`: every A/AAAA answer of the name must be public (ipaddr.js ranges: only
 *   `unicast`, and for IPv6 only global unicast 2000::/3; IPv4-mapped / -compatible refused; 6to4 and
 *   NAT64 judged by the IPv4 address they embed; Teredo refused), else the whole destination is refused.
 *
 * The only relaxations are explicit operator settings for local test receivers (exact loopback
 * address:port pairs, extra ports, an extra CA: environment.ts), off by default.
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import ipaddr from 'ipaddr.js';

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
export function canonicalAddress(text: string): { address: string; family: 4 | 6 } | null {
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
export const bareHost = (url: URL) => (url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname);

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
