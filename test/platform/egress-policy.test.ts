/**
 * The egress policy (server/egress/policy.ts) that webhook deliveries go through: the SSRF refusal
 * matrix (every address and name form, each with its reason, also refused by the client before any
 * lookup) and DNS answers checked one by one (injected resolver). No database, no connection.
 */
import assert from 'node:assert/strict';
import { checkDestination, classifyAddress, type EgressPolicy, resolveDestination, systemLookup } from '../../server/egress.ts';
import { closeEgressClients, fakeDns, noDns, post, refused, strict } from '../support/egress.ts';

after(closeEgressClients);

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
