/**
 * A real HTTPS webhook receiver for tests: a throwaway CA and a certificate for 127.0.0.1 and
 * localhost made with the `openssl` CLI (once per test process), and an `https` server on 127.0.0.1
 * that records every request's headers and exact body bytes and answers as the test says.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';

export interface TestCertificates {
  /** The CA certificate (PEM), to trust through the egress policy's test CA. */
  caPem: string;
  caFile: string;
  keyPem: string;
  certPem: string;
}

let certificates: TestCertificates | null = null;

/** The test CA and a server certificate for 127.0.0.1 / localhost (made once per process). */
export function testCertificates(): TestCertificates {
  if (certificates) return certificates;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wsops-ca-'));
  const run = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  run('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=wsops test CA', '-keyout', 'ca.key', '-out', 'ca.pem');
  run('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=127.0.0.1', '-keyout', 'server.key', '-out', 'server.csr');
  fs.writeFileSync(path.join(dir, 'ext.cnf'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n');
  run('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2', '-extfile', 'ext.cnf', '-out', 'server.pem');
  const read = (f: string) => fs.readFileSync(path.join(dir, f), 'utf8');
  certificates = { caPem: read('ca.pem'), caFile: path.join(dir, 'ca.pem'), keyPem: read('server.key'), certPem: read('server.pem') };
  return certificates;
}

export interface ReceivedRequest {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  /** The exact body bytes. */
  body: Buffer;
  at: number;
}

export type Answer = { status: number; headers?: Record<string, string>; body?: string } | 'hang' | 'destroy';

export interface Receiver {
  /** `https://127.0.0.1:<port>/hook` */
  url: string;
  port: number;
  requests: ReceivedRequest[];
  /** How the next requests are answered (default 200 "ok"). */
  answer(fn: (req: ReceivedRequest) => Answer): void;
  /** Resolves once `n` requests have arrived in total (bounded). */
  waitFor(n: number, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const certs = testCertificates();
  const requests: ReceivedRequest[] = [];
  let answer: (req: ReceivedRequest) => Answer = () => ({ status: 200, body: 'ok' });
  const waiters: Array<() => void> = [];
  const hanging = new Set<ServerResponse>();
  const server = https.createServer({ key: certs.keyPem, cert: certs.certPem }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const got: ReceivedRequest = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks), at: Date.now() };
      requests.push(got);
      for (const w of waiters.splice(0)) w();
      const a = answer(got);
      if (a === 'hang') return void hanging.add(res);
      if (a === 'destroy') return void req.socket.destroy();
      res.writeHead(a.status, a.headers ?? {});
      res.end(a.body ?? '');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `https://127.0.0.1:${port}/hook`,
    port,
    requests,
    answer(fn) {
      answer = fn;
    },
    async waitFor(n, timeoutMs = 10_000) {
      const until = Date.now() + timeoutMs;
      while (requests.length < n) {
        if (Date.now() > until) throw new Error(`the receiver got ${requests.length} requests, not ${n}`);
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 50);
        });
      }
    },
    async close() {
      for (const r of hanging) r.destroy();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
