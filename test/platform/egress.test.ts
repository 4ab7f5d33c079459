/**
 * The hardened egress layer (server/egress.ts) that webhook deliveries use: the SSRF refusal matrix
 * (every address and name form, each with its reason), DNS answers checked one by one (injected
 * resolver), and a real HTTPS receiver on 127.0.0.1 with a throwaway CA made here with the openssl
 * CLI: delivery to the checked address with SNI and Host from the URL, refusal before any connection,
 * TLS trust, redirects not followed, the total timeout, the response cap and refused connections.
 * No database; all traffic stays on 127.0.0.1.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import type { IncomingHttpHeaders } from 'node:http';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { once } from 'node:events';
import {
  checkDestination,
  classifyAddress,
  EgressClient,
  type EgressPolicy,
  EgressRefused,
  egressPolicyFromEnv,
  type LookupAll,
  type PostInit,
  relaxations,
  resolveDestination,
  STRICT_EGRESS_POLICY,
  systemLookup,
} from '../../server/egress.ts';
import { loadConfig } from '../../server/config.ts';
import { freePort } from '../../scripts/ports.ts';

const strict: EgressPolicy = STRICT_EGRESS_POLICY;

/** One client per policy, as a service owns one for its policy; closed when the run ends. */
const clients = new Map<string, EgressClient>();
const post = (url: string, init: PostInit, policy: EgressPolicy, lookup?: LookupAll) => {
  const key = JSON.stringify(policy);
  if (!clients.has(key)) clients.set(key, new EgressClient(policy));
  return clients.get(key)!.post(url, init, lookup);
};
after(() => Promise.all([...clients.values()].map((c) => c.close())));

/** Asserts that `fn` throws (or rejects with) an EgressRefused with `reason`; returns it. */
async function refused(fn: () => unknown, reason: string): Promise<EgressRefused> {
  try {
    await fn();
  } catch (error) {
    assert.ok(error instanceof EgressRefused, `expected EgressRefused(${reason}), got ${String(error)}`);
    assert.equal(error.reason, reason, `reason for: ${error.message}`);
    return error;
  }
  assert.fail(`expected EgressRefused(${reason}), but it was accepted`);
}

/** A resolver that answers from a table and records the names it was asked. */
function fakeDns(table: Record<string, Array<{ address: string; family: number }>>) {
  const asked: string[] = [];
  const lookup: LookupAll = async (hostname) => {
    asked.push(hostname);
    const answers = table[hostname];
    if (!answers) throw Object.assign(new Error(`queryA ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    return answers;
  };
  return { lookup, asked };
}
const noDns: LookupAll = async (hostname) => assert.fail(`no DNS lookup expected (asked for ${hostname})`);

describe('egress: the refusal matrix (checkDestination, no DNS)', function () {
  const matrix: Array<[string, string, string]> = [
    // [what, url, reason]
    ['an unparsable URL', 'not a url', 'invalid_url'],
    ['a relative URL', '/hooks', 'invalid_url'],
    ['plain http', 'http://hooks.example.com/in', 'not_https'],
    ['ftp', 'ftp://hooks.example.com/in', 'not_https'],
    ['a user name', 'https://user@hooks.example.com/in', 'credentials'],
    ['a user and password', 'https://user:secret@hooks.example.com/in', 'credentials'],
    ['an empty password', 'https://:secret@hooks.example.com/in', 'credentials'],
    ['port 80', 'https://hooks.example.com:80/in', 'port'],
    ['port 8443 not allowed', 'https://hooks.example.com:8443/in', 'port'],
    ['port 22 on a public address', 'https://8.8.8.8:22/', 'port'],
    // IPv4 loopback in every spelling (the WHATWG parser normalises them: the parsed host is checked)
    ['127.0.0.1', 'https://127.0.0.1/', 'non_public_address'],
    ['127.0.0.1 with a trailing dot', 'https://127.0.0.1./', 'non_public_address'],
    ['another loopback address', 'https://127.255.0.7/', 'non_public_address'],
    ['decimal IPv4 (2130706433)', 'https://2130706433/', 'non_public_address'],
    ['hex IPv4 (0x7f000001)', 'https://0x7f000001/', 'non_public_address'],
    ['octal IPv4 (0177.0.0.1)', 'https://0177.0.0.1/', 'non_public_address'],
    ['short IPv4 (127.1)', 'https://127.1/', 'non_public_address'],
    ['short hex IPv4 (0x7f.1)', 'https://0x7f.1/', 'non_public_address'],
    ['mixed-radix IPv4 (0x7f.0.0.01)', 'https://0x7f.0.0.01/', 'non_public_address'],
    ['percent-encoded IPv4', 'https://%31%32%37.0.0.1/', 'non_public_address'],
    ['decimal 10.0.0.1 (167772161)', 'https://167772161/', 'non_public_address'],
    // IPv4 ranges
    ['unspecified 0.0.0.0', 'https://0.0.0.0/', 'non_public_address'],
    ['unspecified short form 0', 'https://0/', 'non_public_address'],
    ['private 10/8', 'https://10.1.2.3/', 'non_public_address'],
    ['private 172.16/12', 'https://172.31.255.1/', 'non_public_address'],
    ['private 192.168/16', 'https://192.168.1.1/', 'non_public_address'],
    ['link-local metadata 169.254.169.254', 'https://169.254.169.254/latest/meta-data/', 'non_public_address'],
    ['CGNAT 100.64/10', 'https://100.64.0.1/', 'non_public_address'],
    ['CGNAT 100.127.255.254', 'https://100.127.255.254/', 'non_public_address'],
    ['multicast 224.0.0.1', 'https://224.0.0.1/', 'non_public_address'],
    ['multicast 239.255.255.250', 'https://239.255.255.250/', 'non_public_address'],
    ['reserved 240/4', 'https://240.0.0.1/', 'non_public_address'],
    ['broadcast', 'https://255.255.255.255/', 'non_public_address'],
    ['documentation 192.0.2/24', 'https://192.0.2.10/', 'non_public_address'],
    ['documentation 198.51.100/24', 'https://198.51.100.10/', 'non_public_address'],
    ['documentation 203.0.113/24', 'https://203.0.113.10/', 'non_public_address'],
    ['benchmarking 198.18/15', 'https://198.19.0.1/', 'non_public_address'],
    ['IETF protocol assignments 192.0.0/24', 'https://192.0.0.8/', 'non_public_address'],
    // IPv6
    ['IPv6 loopback', 'https://[::1]/', 'non_public_address'],
    ['IPv6 unspecified', 'https://[::]/', 'non_public_address'],
    ['IPv4-mapped dotted [::ffff:127.0.0.1]', 'https://[::ffff:127.0.0.1]/', 'non_public_address'],
    ['IPv4-mapped hex [::ffff:7f00:1]', 'https://[::ffff:7f00:1]/', 'non_public_address'],
    ['IPv4-mapped public [::ffff:8.8.8.8]', 'https://[::ffff:8.8.8.8]/', 'non_public_address'],
    ['IPv4-mapped metadata [::ffff:169.254.169.254]', 'https://[::ffff:169.254.169.254]/', 'non_public_address'],
    ['IPv4-compatible [::127.0.0.1]', 'https://[::127.0.0.1]/', 'non_public_address'],
    ['IPv4-compatible [::7f00:1]', 'https://[::7f00:1]/', 'non_public_address'],
    ['IPv4-translated [::ffff:0:7f00:1]', 'https://[::ffff:0:7f00:1]/', 'non_public_address'],
    ['unique-local fc00::/7', 'https://[fd12:3456:789a::1]/', 'non_public_address'],
    ['unique-local fc00::', 'https://[fc00::1]/', 'non_public_address'],
    ['link-local fe80::/10', 'https://[fe80::1]/', 'non_public_address'],
    ['site-local fec0::/10', 'https://[fec0::1]/', 'non_public_address'],
    ['multicast ff02::1', 'https://[ff02::1]/', 'non_public_address'],
    ['documentation 2001:db8::/32', 'https://[2001:db8::1]/', 'non_public_address'],
    ['documentation 3fff::/20', 'https://[3fff::1]/', 'non_public_address'],
    ['benchmarking 2001:2::/48', 'https://[2001:2::1]/', 'non_public_address'],
    ['6to4 embedding 127.0.0.1', 'https://[2002:7f00:1::1]/', 'non_public_address'],
    ['6to4 embedding 10.0.0.1', 'https://[2002:a00:1::]/', 'non_public_address'],
    ['6to4 embedding 169.254.169.254', 'https://[2002:a9fe:a9fe::]/', 'non_public_address'],
    ['NAT64 embedding 127.0.0.1', 'https://[64:ff9b::127.0.0.1]/', 'non_public_address'],
    ['NAT64 embedding 192.168.0.1', 'https://[64:ff9b::c0a8:1]/', 'non_public_address'],
    ['local-use NAT64 64:ff9b:1::/48', 'https://[64:ff9b:1::808:808]/', 'non_public_address'],
    ['Teredo (client 127.0.0.1)', 'https://[2001:0:4136:e378:8000:63bf:80ff:fffe]/', 'non_public_address'],
    ['discard-only 100::/64', 'https://[100::1]/', 'non_public_address'],
    ['outside global unicast (4000::)', 'https://[4000::1]/', 'non_public_address'],
    // names
    ['localhost', 'https://localhost/', 'non_public_name'],
    ['LOCALHOST with a port', 'https://LOCALHOST:443/', 'non_public_name'],
    ['localhost.', 'https://localhost./', 'non_public_name'],
    ['*.localhost', 'https://api.localhost/', 'non_public_name'],
    ['*.localhost.', 'https://a.b.localhost./', 'non_public_name'],
    ['a name without a dot', 'https://intranet/', 'non_public_name'],
    ['a name without a dot, trailing dot', 'https://metadata./', 'non_public_name'],
    ['.local (mDNS)', 'https://printer.local/', 'non_public_name'],
    ['.internal', 'https://metadata.google.internal/', 'non_public_name'],
    ['.home.arpa', 'https://router.home.arpa/', 'non_public_name'],
    ['.arpa (reverse zone)', 'https://1.0.0.127.in-addr.arpa/', 'non_public_name'],
    ['.localdomain', 'https://host.localdomain/', 'non_public_name'],
    ['.lan', 'https://nas.lan/', 'non_public_name'],
    ['.corp', 'https://jira.corp/', 'non_public_name'],
    ['.test', 'https://receiver.test/', 'non_public_name'],
    ['.invalid', 'https://x.invalid/', 'non_public_name'],
    ['.onion', 'https://abcdefghijklmnop.onion/', 'non_public_name'],
  ];
  for (const [what, url, reason] of matrix) {
    it(`refuses ${what}: ${url} (${reason})`, async () => {
      const error = await refused(() => checkDestination(url, strict), reason);
      assert.ok(error.message.length > 0);
      // And the resolver step refuses it the same way, without a lookup.
      if (reason !== 'invalid_url') await refused(() => post(url, { headers: {}, body: '{}', timeoutMs: 1000, maxResponseBytes: 10 }, strict, noDns), reason);
    });
  }

  it('names the range in the message (embedded addresses too)', async () => {
    assert.match((await refused(() => checkDestination('https://169.254.169.254/', strict), 'non_public_address')).message, /linkLocal/);
    assert.match((await refused(() => checkDestination('https://[::ffff:7f00:1]/', strict), 'non_public_address')).message, /IPv4-mapped.*127\.0\.0\.1/);
    assert.match((await refused(() => checkDestination('https://[2002:a00:1::]/', strict), 'non_public_address')).message, /6to4.*10\.0\.0\.1.*private/);
    assert.match((await refused(() => checkDestination('https://198.18.0.1/', strict), 'non_public_address')).message, /benchmarking/);
    assert.match((await refused(() => checkDestination('https://203.0.113.9/', strict), 'non_public_address')).message, /documentation/);
    assert.ok((await refused(() => checkDestination('http://x.example.com/', strict), 'not_https')).transient === false);
  });

  it('accepts public destinations and normalises the URL', () => {
    assert.equal(checkDestination('https://hooks.example.com/in?a=1#frag', strict).href, 'https://hooks.example.com/in?a=1');
    assert.equal(checkDestination('HTTPS://Hooks.EXAMPLE.com:443/in', strict).href, 'https://hooks.example.com/in');
    assert.equal(checkDestination('https://8.8.8.8/', strict).href, 'https://8.8.8.8/');
    assert.equal(checkDestination('https://134744072/', strict).href, 'https://8.8.8.8/', 'decimal forms are normalised, then judged');
    assert.equal(checkDestination('https://[2606:4700:4700::1111]/', strict).hostname, '[2606:4700:4700::1111]');
    assert.equal(checkDestination('https://[64:ff9b::808:808]/', strict).hostname, '[64:ff9b::808:808]', 'NAT64 of a public address');
    assert.equal(checkDestination('https://[2002:808:808::1]/', strict).hostname, '[2002:808:808::1]', '6to4 of a public address');
    assert.equal(checkDestination('https://xn--mnchen-3ya.de/', strict).hostname, 'xn--mnchen-3ya.de');
    assert.equal(checkDestination('https://münchen.de/', strict).hostname, 'xn--mnchen-3ya.de');
  });

  it('allows other ports only when configured, and a non-public address only as an exact allow-listed pair', async () => {
    const ports: EgressPolicy = { ...strict, allowedPorts: [8443] };
    assert.equal(checkDestination('https://hooks.example.com:8443/', ports).port, '8443');
    await refused(() => checkDestination('https://hooks.example.com:8444/', ports), 'port');
    await refused(() => checkDestination('https://127.0.0.1:8443/', ports), 'non_public_address');

    const allow: EgressPolicy = { ...strict, allowDestinations: [{ host: '127.0.0.1', port: 9443 }] };
    assert.equal(checkDestination('https://127.0.0.1:9443/in', allow).href, 'https://127.0.0.1:9443/in');
    assert.equal(checkDestination('https://2130706433:9443/in', allow).href, 'https://127.0.0.1:9443/in', 'the same address in another spelling');
    await refused(() => checkDestination('https://127.0.0.1/', allow), 'non_public_address'); // another port
    await refused(() => checkDestination('https://127.0.0.1:9444/', allow), 'non_public_address');
    await refused(() => checkDestination('https://127.0.0.2:9443/', allow), 'non_public_address'); // another address
    await refused(() => checkDestination('https://[::ffff:127.0.0.1]:9443/', allow), 'non_public_address'); // mapped: not the pair
    await refused(() => checkDestination('https://[::1]:9443/', allow), 'non_public_address');
    await refused(() => checkDestination('https://localhost:9443/', allow), 'non_public_name'); // never a name
    await refused(() => checkDestination('http://127.0.0.1:9443/', allow), 'not_https');
    await refused(() => checkDestination('https://u:p@127.0.0.1:9443/', allow), 'credentials');
    await refused(() => checkDestination('https://8.8.8.8:9443/', allow), 'port'); // the pair's port is not a general allowance
  });
});

describe('egress: every DNS answer is checked (resolveDestination)', function () {
  const pub4 = { address: '93.184.215.14', family: 4 };
  const pub6 = { address: '2606:2800:21f:cb07:6820:80da:af6b:8b2c', family: 6 };

  it('accepts a name whose every answer is public, prefers IPv4, does not connect', async () => {
    const dns = fakeDns({ 'hooks.example.com': [pub6, pub4] });
    const got = await resolveDestination(checkDestination('https://hooks.example.com/in', strict), strict, dns.lookup);
    assert.deepEqual({ address: got.address, family: got.family }, { address: '93.184.215.14', family: 4 });
    assert.deepEqual(got.addresses.map((a) => a.address), ['2606:2800:21f:cb07:6820:80da:af6b:8b2c', '93.184.215.14']);
    assert.deepEqual(dns.asked, ['hooks.example.com']);
    const only6 = await resolveDestination(new URL('https://v6.example.com/'), strict, fakeDns({ 'v6.example.com': [pub6] }).lookup);
    assert.deepEqual({ address: only6.address, family: only6.family }, { address: pub6.address, family: 6 });
  });

  const mixed: Array<[string, Array<{ address: string; family: number }>]> = [
    ['a public A and a loopback A', [pub4, { address: '127.0.0.1', family: 4 }]],
    ['a private A after public ones', [pub4, { address: '93.184.215.15', family: 4 }, { address: '10.0.0.5', family: 4 }]],
    ['a public A and a link-local A (metadata)', [pub4, { address: '169.254.169.254', family: 4 }]],
    ['a public A and a loopback AAAA', [pub4, { address: '::1', family: 6 }]],
    ['a public A and a unique-local AAAA', [pub4, { address: 'fd00::1', family: 6 }]],
    ['a public AAAA and an IPv4-mapped loopback AAAA', [pub6, { address: '::ffff:127.0.0.1', family: 6 }]],
    ['a public A and a CGNAT A', [pub4, { address: '100.64.1.1', family: 4 }]],
    ['a public A and an unspecified A', [pub4, { address: '0.0.0.0', family: 4 }]],
    ['a public A and a NAT64 AAAA of a private address', [pub4, { address: '64:ff9b::a00:1', family: 6 }]],
    ['an answer that is not an address', [pub4, { address: 'evil', family: 4 }]],
  ];
  for (const [what, answers] of mixed) {
    it(`refuses a name resolving to ${what}`, async () => {
      await refused(() => resolveDestination(new URL('https://rebind.example.com/'), strict, fakeDns({ 'rebind.example.com': answers }).lookup), 'non_public_address');
    });
  }

  it('refuses a public-looking name that resolves to loopback (e.g. 127.0.0.1.nip.io)', async () => {
    await refused(() => resolveDestination(new URL('https://127.0.0.1.nip.io/'), strict, fakeDns({ '127.0.0.1.nip.io': [{ address: '127.0.0.1', family: 4 }] }).lookup), 'non_public_address');
  });

  it('refuses unresolvable names and empty answers as dns_failed (transient)', async () => {
    const error = await refused(() => resolveDestination(new URL('https://nowhere.example.com/'), strict, fakeDns({}).lookup), 'dns_failed');
    assert.equal(error.transient, true);
    assert.match(error.message, /ENOTFOUND/);
    await refused(() => resolveDestination(new URL('https://empty.example.com/'), strict, fakeDns({ 'empty.example.com': [] }).lookup), 'dns_failed');
  });

  it('the default resolver returns every answer (here localhost from /etc/hosts), each judged', async () => {
    const answers = await systemLookup('localhost');
    assert.ok(answers.length >= 1);
    for (const a of answers) assert.equal(classifyAddress(a.address).public, false, a.address);
    await refused(() => resolveDestination(new URL('https://loopback.example.com/'), strict, () => systemLookup('localhost')), 'non_public_address');
  });

  it('checks IP literals without DNS, and never resolves a name it refuses syntactically', async () => {
    const got = await resolveDestination(new URL('https://8.8.8.8/'), strict, noDns);
    assert.deepEqual({ address: got.address, family: got.family }, { address: '8.8.8.8', family: 4 });
    const v6 = await resolveDestination(new URL('https://[2606:4700:4700::1111]/'), strict, noDns);
    assert.deepEqual({ address: v6.address, family: v6.family }, { address: '2606:4700:4700::1111', family: 6 });
    await refused(() => resolveDestination(new URL('https://127.1/'), strict, noDns), 'non_public_address');
    await refused(() => resolveDestination(new URL('https://metadata.google.internal/'), strict, noDns), 'non_public_name');
    await refused(() => resolveDestination(new URL('http://hooks.example.com/'), strict, noDns), 'not_https');
  });

  it('lets a name reach an allow-listed loopback pair only on that port, and only when every answer is allowed', async () => {
    const allow: EgressPolicy = { ...strict, allowDestinations: [{ host: '127.0.0.1', port: 9443 }] };
    const lookup = fakeDns({ 'hooks.example.com': [{ address: '127.0.0.1', family: 4 }], 'both.example.com': [{ address: '127.0.0.1', family: 4 }, pub4] }).lookup;
    assert.equal((await resolveDestination(new URL('https://hooks.example.com:9443/'), allow, lookup)).address, '127.0.0.1');
    await refused(() => resolveDestination(new URL('https://hooks.example.com/'), allow, lookup), 'non_public_address');
    await refused(() => resolveDestination(new URL('https://both.example.com:9443/'), allow, lookup), 'port'); // the public answer may not use 9443
  });
});

// ------------------------------------------------------------------------------------------------
// A real HTTPS receiver on 127.0.0.1

interface Pki {
  dir: string;
  caPem: string;
  caFile: string;
  key: string;
  cert: string;
}

function makePki(): Pki {
  try {
    execFileSync('openssl', ['version'], { stdio: 'pipe' });
  } catch {
    throw new Error('these tests need the openssl CLI (Debian package "openssl")');
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'egress-test-'));
  const at = (f: string) => path.join(dir, f);
  const run = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  run(['req', '-x509', ...ec, '-keyout', at('ca.key'), '-out', at('ca.pem'), '-days', '2', '-subj', '/CN=Egress test CA (throwaway)',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  run(['req', ...ec, '-keyout', at('server.key'), '-out', at('server.csr'), '-subj', '/CN=127.0.0.1']);
  fs.writeFileSync(at('server.ext'), [
    'basicConstraints=CA:FALSE',
    'keyUsage=critical,digitalSignature',
    'extendedKeyUsage=serverAuth',
    'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:hooks.example.com',
  ].join('\n'));
  run(['x509', '-req', '-in', at('server.csr'), '-CA', at('ca.pem'), '-CAkey', at('ca.key'), '-CAcreateserial', '-out', at('server.pem'), '-days', '2', '-extfile', at('server.ext')]);
  return { dir, caPem: fs.readFileSync(at('ca.pem'), 'utf8'), caFile: at('ca.pem'), key: fs.readFileSync(at('server.key'), 'utf8'), cert: fs.readFileSync(at('server.pem'), 'utf8') };
}

interface Received {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
  body: Buffer;
  servername: string | false | null | undefined;
}

interface Receiver {
  port: number;
  /** TCP connections accepted (before TLS). */
  connections: number;
  requests: Received[];
  /** Sockets the server has seen close. */
  closed: Set<net.Socket>;
  close(): Promise<void>;
}

type Handler = (req: Received, res: import('node:http').ServerResponse, socket: net.Socket) => void;

async function startReceiver(pki: Pki, handler: Handler): Promise<Receiver> {
  const sockets = new Set<net.Socket>();
  const receiver: Receiver = { port: 0, connections: 0, requests: [], closed: new Set(), close: async () => {} };
  const server = https.createServer({ key: pki.key, cert: pki.cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const tlsSocket = req.socket as import('node:tls').TLSSocket;
      const got: Received = { method: req.method!, url: req.url!, headers: req.headers, rawHeaders: req.rawHeaders, body: Buffer.concat(chunks), servername: tlsSocket.servername };
      receiver.requests.push(got);
      handler(got, res, req.socket);
    });
  });
  server.on('connection', (socket: net.Socket) => {
    receiver.connections++;
    sockets.add(socket);
    socket.on('close', () => receiver.closed.add(socket));
  });
  server.on('tlsClientError', () => {}); // the no-CA case: the client aborts the handshake
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  receiver.port = (server.address() as net.AddressInfo).port;
  receiver.close = async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return receiver;
}

const waitFor = async (what: string, predicate: () => boolean, ms = 2000) => {
  const until = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > until) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
};

describe('egress: post() to a real HTTPS receiver on 127.0.0.1 (throwaway CA made with openssl)', function () {
  let pki: Pki;
  const receivers: Receiver[] = [];
  const receiver = async (handler: Handler) => {
    const r = await startReceiver(pki, handler);
    receivers.push(r);
    return r;
  };
  /** The test setting: exactly these receivers allowed, the test CA trusted. */
  const policyFor = (...rs: Receiver[]): EgressPolicy => ({ allowedPorts: [], allowDestinations: rs.map((r) => ({ host: '127.0.0.1', port: r.port })), testCa: pki.caPem });
  const init = (over: Partial<Parameters<typeof post>[1]> = {}) => ({ headers: {}, body: '{}', timeoutMs: 5000, maxResponseBytes: 64 * 1024, ...over });

  before(function () {
    this.timeout(30_000);
    pki = makePki();
  });
  afterEach(async () => {
    await Promise.all(receivers.splice(0).map((r) => r.close()));
  });
  after(() => {
    if (pki) fs.rmSync(pki.dir, { recursive: true, force: true });
  });

  it('delivers the exact body bytes and headers to the allow-listed address, with the right Host, and returns the response', async () => {
    const r = await receiver((_req, res) => {
      res.writeHead(202, { 'content-type': 'application/json', 'x-receiver': 'yes' });
      res.end('{"ok":true,"note":"é"}');
    });
    const body = Buffer.concat([Buffer.from('{"event":"record.updated","name":"Zoë ✓"}'), Buffer.from([0x00, 0xff, 0xfe, 0x0a])]);
    const headers = {
      'content-type': 'application/json',
      'user-agent': 'WorkspaceOperations-Webhooks/1',
      'x-webhook-event-id': 'evt_01',
      'x-webhook-signature': 'v1=' + 'ab'.repeat(32),
    };
    const outcome = await post(`https://127.0.0.1:${r.port}/hooks/in?x=1`, init({ headers, body }), policyFor(r));
    assert.equal(outcome.kind, 'response', JSON.stringify(outcome));
    assert.ok(outcome.kind === 'response');
    assert.equal(outcome.status, 202);
    assert.equal(outcome.body, '{"ok":true,"note":"é"}');
    assert.equal(outcome.truncated, false);
    assert.equal(outcome.headers['x-receiver'], 'yes');
    assert.equal(outcome.headers['content-type'], 'application/json');
    assert.equal(outcome.address, '127.0.0.1');
    assert.ok(outcome.durationMs >= 0 && outcome.durationMs < 5000);

    assert.equal(r.requests.length, 1);
    const got = r.requests[0]!;
    assert.equal(got.method, 'POST');
    assert.equal(got.url, '/hooks/in?x=1');
    assert.ok(got.body.equals(body), 'the exact body bytes');
    assert.equal(got.headers.host, `127.0.0.1:${r.port}`);
    assert.equal(got.headers['content-length'], String(body.length));
    for (const [name, value] of Object.entries(headers)) assert.equal(got.headers[name], value, name);
    assert.equal(got.servername, false, 'no SNI for an IP address');
  });

  it('keeps the URL\'s name for SNI, certificate verification and Host while connecting to the checked address', async () => {
    const r = await receiver((_req, res) => res.end('ok'));
    const dns = fakeDns({ 'hooks.example.com': [{ address: '127.0.0.1', family: 4 }] });
    const outcome = await post(`https://hooks.example.com:${r.port}/in`, init({ body: 'hello' }), policyFor(r), dns.lookup);
    assert.equal(outcome.kind, 'response', JSON.stringify(outcome));
    assert.deepEqual(dns.asked, ['hooks.example.com'], 'resolved once, by the checked resolver only');
    const got = r.requests[0]!;
    assert.equal(got.headers.host, `hooks.example.com:${r.port}`);
    assert.equal(got.servername, 'hooks.example.com');
    assert.equal(got.body.toString(), 'hello');

    // A name the certificate does not carry fails verification even though the address is the same.
    const other = await post(`https://other.example.org:${r.port}/in`, init(), policyFor(r), fakeDns({ 'other.example.org': [{ address: '127.0.0.1', family: 4 }] }).lookup);
    assert.equal(other.kind, 'error');
    assert.ok(other.kind === 'error');
    assert.match(other.error, /^TLS: certificate does not match the host/);
    assert.equal(r.requests.length, 1);
  });

  it('keeps a connection for the next attempt to the same origin and checked address; every attempt is still checked first', async () => {
    const r = await receiver((_req, res) => res.end('ok'));
    for (let i = 0; i < 3; i++) assert.equal((await post(`https://127.0.0.1:${r.port}/in`, init(), policyFor(r))).kind, 'response');
    assert.equal(r.requests.length, 3);
    assert.equal(r.connections, 1, 'one TLS connection for three attempts');

    // Another origin (a name, so other SNI and Host) on the same address: its own connection.
    const table: Record<string, Array<{ address: string; family: number }>> = { 'hooks.example.com': [{ address: '127.0.0.1', family: 4 }] };
    const dns = fakeDns(table);
    const named = await post(`https://hooks.example.com:${r.port}/in`, init(), policyFor(r), dns.lookup);
    assert.equal(named.kind, 'response', JSON.stringify(named));
    assert.equal(r.connections, 2);
    assert.equal(r.requests[3]!.headers.host, `hooks.example.com:${r.port}`);

    // The name now resolves to an address that is not allowed: refused before any connection, kept one or not.
    table['hooks.example.com'] = [{ address: '127.0.0.2', family: 4 }];
    await refused(() => post(`https://hooks.example.com:${r.port}/in`, init(), policyFor(r), dns.lookup), 'non_public_address');
    assert.deepEqual(dns.asked, ['hooks.example.com', 'hooks.example.com'], 'resolved and checked at every attempt');
    assert.equal(r.requests.length, 4);
    assert.equal(r.connections, 2);
  });

  it('a closed client (the service at shutdown) drops its kept connections; later posts still work and keep none', async () => {
    const r = await receiver((_req, res) => res.end('ok'));
    const client = new EgressClient(policyFor(r));
    for (let i = 0; i < 2; i++) assert.equal((await client.post(`https://127.0.0.1:${r.port}/in`, init())).kind, 'response');
    assert.equal(r.connections, 1);
    await client.close();
    for (let i = 0; i < 2; i++) assert.equal((await client.post(`https://127.0.0.1:${r.port}/in`, init())).kind, 'response');
    assert.equal(r.connections, 3, 'a new connection for each post after close');
  });

  it('keeps a connection after an answer read in full (any status) and closes one that timed out', async () => {
    let hang = false;
    const r = await receiver((_req, res) => {
      if (hang) return; // never answers
      res.writeHead(503);
      res.end('busy');
    });
    // The same deadline each time: it is part of what a kept connection is kept under.
    const first = await post(`https://127.0.0.1:${r.port}/`, init({ timeoutMs: 300 }), policyFor(r));
    assert.ok(first.kind === 'response' && first.status === 503);
    hang = true;
    const second = await post(`https://127.0.0.1:${r.port}/`, init({ timeoutMs: 300 }), policyFor(r));
    assert.equal(second.kind, 'error');
    assert.equal(r.connections, 1, 'the 503 read in full left the connection usable, and the next attempt used it');
    await waitFor('the client to close the timed-out connection', () => r.closed.size === 1);
    hang = false;
    const third = await post(`https://127.0.0.1:${r.port}/`, init({ timeoutMs: 300 }), policyFor(r));
    assert.ok(third.kind === 'response' && third.status === 503);
    assert.equal(r.connections, 2, 'a new connection after the timed-out one was closed');
  });

  it('refuses before connecting when the destination is not allow-listed (the server sees nothing)', async () => {
    const r = await receiver((_req, res) => res.end('should not happen'));
    const noAllow: EgressPolicy = { allowedPorts: [r.port], allowDestinations: [], testCa: pki.caPem };
    await refused(() => post(`https://127.0.0.1:${r.port}/`, init(), noAllow), 'non_public_address');
    await refused(() => post(`https://hooks.example.com:${r.port}/`, init(), noAllow, fakeDns({ 'hooks.example.com': [{ address: '127.0.0.1', family: 4 }] }).lookup), 'non_public_address');
    await refused(() => post(`https://localhost:${r.port}/`, init(), policyFor(r)), 'non_public_name');
    await refused(() => post(`https://[::ffff:127.0.0.1]:${r.port}/`, init(), policyFor(r)), 'non_public_address');
    await refused(() => post('https://0x7f000001/', init(), policyFor(r)), 'non_public_address'); // allow-listed address, other port
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(r.connections, 0);
    assert.equal(r.requests.length, 0);
  });

  it('fails TLS without the test CA (system CAs only)', async () => {
    const r = await receiver((_req, res) => res.end('should not happen'));
    const outcome = await post(`https://127.0.0.1:${r.port}/`, init(), { ...policyFor(r), testCa: null });
    assert.equal(outcome.kind, 'error');
    assert.ok(outcome.kind === 'error');
    assert.match(outcome.error, /^TLS: certificate not trusted/);
    assert.equal(r.requests.length, 0, 'no request was sent over an unverified connection');
  });

  for (const status of [301, 302, 307, 308]) {
    it(`returns a ${status} as a response and does not follow it (the target gets nothing)`, async () => {
      const target = await receiver((_req, res) => res.end('followed'));
      const r = await receiver((_req, res) => {
        res.writeHead(status, { location: `https://127.0.0.1:${target.port}/elsewhere` });
        res.end('moved');
      });
      const outcome = await post(`https://127.0.0.1:${r.port}/`, init(), policyFor(r, target));
      assert.equal(outcome.kind, 'response');
      assert.ok(outcome.kind === 'response');
      assert.equal(outcome.status, status);
      assert.equal(outcome.headers.location, `https://127.0.0.1:${target.port}/elsewhere`);
      assert.equal(outcome.body, 'moved');
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(target.connections, 0);
    });
  }

  it('gives up at the total timeout when the server never answers, and closes the connection', async () => {
    const r = await receiver(() => {}); // reads the request, never answers
    const outcome = await post(`https://127.0.0.1:${r.port}/`, init({ timeoutMs: 300 }), policyFor(r));
    assert.deepEqual({ kind: outcome.kind, error: outcome.kind === 'error' ? outcome.error : null }, { kind: 'error', error: 'timeout after 300 ms' });
    assert.ok(outcome.durationMs >= 290 && outcome.durationMs < 2000, `durationMs ${outcome.durationMs}`);
    assert.equal(r.requests.length, 1, 'the request was sent');
    await waitFor('the client to close the connection', () => r.closed.size === 1);
  });

  it('counts a slow body against the same deadline', async () => {
    const r = await receiver((_req, res) => {
      res.writeHead(200);
      res.write('partial'); // and nothing more
    });
    const outcome = await post(`https://127.0.0.1:${r.port}/`, init({ timeoutMs: 300 }), policyFor(r));
    assert.equal(outcome.kind, 'error');
    assert.ok(outcome.kind === 'error');
    assert.equal(outcome.error, 'timeout after 300 ms');
  });

  it('counts a slow DNS answer against the deadline', async () => {
    const outcome = await post('https://slow.example.com/', init({ timeoutMs: 100 }), strict, () => new Promise(() => {}));
    assert.equal(outcome.kind, 'error');
    assert.ok(outcome.kind === 'error');
    assert.match(outcome.error, /^timeout after 100 ms \(resolving slow\.example\.com\)$/);
  });

  it('truncates a large response body to maxResponseBytes, discards the rest and closes the connection', async () => {
    let sent = 0;
    const r = await receiver((_req, res, socket) => {
      res.writeHead(500, { 'content-type': 'text/plain' });
      const chunk = Buffer.alloc(64 * 1024, 'x');
      // An endless body: only closing the connection ends it.
      const pump = () => {
        while (!socket.destroyed) {
          sent += chunk.length;
          if (!res.write(chunk)) break;
        }
        if (!socket.destroyed) res.once('drain', pump);
      };
      pump();
    });
    const outcome = await post(`https://127.0.0.1:${r.port}/`, init({ maxResponseBytes: 1000, timeoutMs: 5000 }), policyFor(r));
    assert.equal(outcome.kind, 'response', JSON.stringify(outcome).slice(0, 300));
    assert.ok(outcome.kind === 'response');
    assert.equal(outcome.status, 500);
    assert.equal(outcome.truncated, true);
    assert.equal(outcome.body, 'x'.repeat(1000));
    await waitFor('the client to close the connection', () => r.closed.size === 1);
    assert.ok(sent >= 64 * 1024, 'the server was sending far more than was kept');
  });

  it('keeps whole characters when the cap cuts a UTF-8 sequence, and does not mark a body that fits as truncated', async () => {
    const r = await receiver((_req, res) => res.end('€€€'));
    const cut = await post(`https://127.0.0.1:${r.port}/`, init({ maxResponseBytes: 4 }), policyFor(r));
    assert.ok(cut.kind === 'response');
    assert.deepEqual([cut.body, cut.truncated], ['€', true]);
    const exact = await post(`https://127.0.0.1:${r.port}/`, init({ maxResponseBytes: 9 }), policyFor(r));
    assert.ok(exact.kind === 'response');
    assert.deepEqual([exact.body, exact.truncated], ['€€€', false]);
  });

  it('returns a refused connection (a closed port) as an error outcome', async () => {
    const port = await freePort();
    const outcome = await post(`https://127.0.0.1:${port}/`, init(), { allowedPorts: [], allowDestinations: [{ host: '127.0.0.1', port }], testCa: pki.caPem });
    assert.equal(outcome.kind, 'error');
    assert.ok(outcome.kind === 'error');
    assert.equal(outcome.error, 'connection refused');
  });

  it('refuses headers the client must set itself (Host, framing)', async () => {
    const r = await receiver((_req, res) => res.end());
    for (const name of ['Host', 'content-length', 'Transfer-Encoding', 'connection']) {
      await assert.rejects(post(`https://127.0.0.1:${r.port}/`, init({ headers: { [name]: 'x' } }), policyFor(r)), /set by the client/);
    }
    assert.equal(r.connections, 0);
  });
});

describe('egress: configuration (egressPolicyFromEnv, loadConfig, relaxations)', function () {
  let dir: string;
  let caFile: string;
  before(function () {
    this.timeout(20_000);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'egress-env-'));
    caFile = path.join(dir, 'ca.pem');
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', path.join(dir, 'ca.key'), '-out', caFile, '-days', '1', '-subj', '/CN=env test CA'], { stdio: 'pipe' });
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('is strict by default: 443 only, no allow-listed destination, system CAs only, nothing to log', () => {
    const policy = egressPolicyFromEnv({});
    assert.deepEqual(policy, { allowedPorts: [], allowDestinations: [], testCa: null });
    assert.deepEqual(egressPolicyFromEnv({ EGRESS_ALLOWED_PORTS: '', EGRESS_ALLOW_DESTINATIONS: ' ', EGRESS_TEST_CA_FILE: '' }), policy);
    assert.deepEqual(relaxations(policy), []);
    assert.deepEqual(loadConfig({}).egress, policy);
  });

  it('reads extra ports, exact loopback pairs and a test CA, and names every relaxation', () => {
    const policy = egressPolicyFromEnv({
      EGRESS_ALLOWED_PORTS: '8443, 9000,8443 443',
      EGRESS_ALLOW_DESTINATIONS: '127.0.0.1:9443,[::1]:9444 127.0.0.5:9443',
      EGRESS_TEST_CA_FILE: caFile,
    });
    assert.deepEqual(policy.allowedPorts, [8443, 9000]);
    assert.deepEqual(policy.allowDestinations, [{ host: '127.0.0.1', port: 9443 }, { host: '::1', port: 9444 }, { host: '127.0.0.5', port: 9443 }]);
    assert.equal(policy.testCa, fs.readFileSync(caFile, 'utf8'));
    const lines = relaxations(policy);
    assert.equal(lines.length, 3);
    assert.match(lines.join('\n'), /127\.0\.0\.1:9443, \[::1\]:9444, 127\.0\.0\.5:9443/);
    assert.match(lines.join('\n'), /EGRESS_TEST_CA_FILE/);
    assert.match(lines.join('\n'), /8443, 9000/);
    assert.deepEqual(loadConfig({ EGRESS_ALLOW_DESTINATIONS: '127.0.0.1:9443' }).egress.allowDestinations, [{ host: '127.0.0.1', port: 9443 }]);
    assert.deepEqual(relaxations(egressPolicyFromEnv({ EGRESS_ALLOWED_PORTS: '8443' })), ['EGRESS RELAXED: webhook deliveries may use ports besides 443 (EGRESS_ALLOWED_PORTS): 8443']);
  });

  const bad: Array<[string, string, RegExp]> = [
    ['EGRESS_ALLOW_DESTINATIONS', '10.0.0.0/8', /EGRESS_ALLOW_DESTINATIONS: "10\.0\.0\.0\/8" is not allowed: only exact loopback/],
    ['EGRESS_ALLOW_DESTINATIONS', '127.0.0.0/8', /only exact loopback/],
    ['EGRESS_ALLOW_DESTINATIONS', 'localhost:9443', /"localhost:9443" is not allowed/],
    ['EGRESS_ALLOW_DESTINATIONS', 'receiver.example.com:9443', /no names/],
    ['EGRESS_ALLOW_DESTINATIONS', '127.0.0.1', /"127\.0\.0\.1" is not allowed/],
    ['EGRESS_ALLOW_DESTINATIONS', '127.0.0.1:*', /is not allowed/],
    ['EGRESS_ALLOW_DESTINATIONS', '127.0.0.1:0', /not a port/],
    ['EGRESS_ALLOW_DESTINATIONS', '127.0.0.1:70000', /not a port/],
    ['EGRESS_ALLOW_DESTINATIONS', '10.0.0.1:9443', /not a loopback address \(private\)/],
    ['EGRESS_ALLOW_DESTINATIONS', '8.8.8.8:443', /not a loopback address \(unicast\)/],
    ['EGRESS_ALLOW_DESTINATIONS', '169.254.169.254:80', /not a loopback address/],
    ['EGRESS_ALLOW_DESTINATIONS', '127.1:9443', /is not allowed/],
    ['EGRESS_ALLOW_DESTINATIONS', '0x7f000001:9443', /is not allowed/],
    ['EGRESS_ALLOW_DESTINATIONS', '[::ffff:127.0.0.1]:9443', /not a loopback address/],
    ['EGRESS_ALLOW_DESTINATIONS', '::1:9443', /is not allowed/],
    ['EGRESS_ALLOW_DESTINATIONS', 'https://127.0.0.1:9443', /is not allowed/],
    ['EGRESS_ALLOWED_PORTS', 'abc', /EGRESS_ALLOWED_PORTS: "abc" is not a port/],
    ['EGRESS_ALLOWED_PORTS', '0', /not a port/],
    ['EGRESS_ALLOWED_PORTS', '65536', /not a port/],
    ['EGRESS_ALLOWED_PORTS', '-1', /not a port/],
    ['EGRESS_ALLOWED_PORTS', '8000-9000', /not a port/],
    ['EGRESS_TEST_CA_FILE', '/nonexistent/ca.pem', /EGRESS_TEST_CA_FILE: cannot read "\/nonexistent\/ca\.pem" \(ENOENT\)/],
  ];
  for (const [name, value, message] of bad) {
    it(`refuses ${name}="${value}" with a readable error (loadConfig too)`, () => {
      assert.throws(() => egressPolicyFromEnv({ [name]: value }), message);
      assert.throws(() => loadConfig({ [name]: value }), message);
    });
  }

  it('refuses a test CA file that holds no certificate', () => {
    const notPem = path.join(dir, 'not.pem');
    fs.writeFileSync(notPem, 'hello');
    assert.throws(() => egressPolicyFromEnv({ EGRESS_TEST_CA_FILE: notPem }), /holds no PEM certificate/);
    assert.throws(() => egressPolicyFromEnv({ EGRESS_TEST_CA_FILE: path.join(dir, 'ca.key') }), /holds no PEM certificate/);
  });
});
