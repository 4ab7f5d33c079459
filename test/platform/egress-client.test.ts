/**
 * The egress client (server/egress/client.ts) against a real HTTPS receiver on 127.0.0.1 with a
 * throwaway CA made here with the openssl CLI: delivery to the checked address with SNI and Host from
 * the URL, kept connections, refusal before any connection, TLS trust, redirects not followed, the
 * total timeout, the response cap and refused connections. No database; all traffic stays on 127.0.0.1.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import https from 'node:https';
import type { IncomingHttpHeaders } from 'node:http';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { EgressClient, type EgressPolicy } from '../../server/egress.ts';
import { freePort } from '../../scripts/ports.ts';
import { closeEgressClients, fakeDns, post, refused, strict } from '../support/egress.ts';

after(closeEgressClients);

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
