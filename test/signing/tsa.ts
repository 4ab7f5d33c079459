/**
 * A real RFC 3161 timestamp authority for tests: a key and a timeStamping certificate made with the
 * `openssl` CLI in a temp dir, and a node http server on 127.0.0.1 that answers each
 * `application/timestamp-query` POST by running `openssl ts -reply` on it.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';

export const run = promisify(execFile);

export interface LocalTsa {
  url: string;
  /** The TSA's self-signed certificate (PEM file), the trust anchor for `openssl ts -verify`. */
  certFile: string;
  /** Queries answered so far. */
  requests: number;
  /** When set, answers every query with a genuine token for another value (a TSA or a man in the middle gone wrong). */
  stampOtherValue: boolean;
  close(): Promise<void>;
}

export async function startTsa(dir: string): Promise<LocalTsa> {
  const key = path.join(dir, 'tsa.key');
  const certFile = path.join(dir, 'tsa.crt');
  const config = path.join(dir, 'tsa.cnf');
  await fs.writeFile(
    config,
    [
      '[ req ]',
      'distinguished_name = dn',
      'prompt = no',
      '[ dn ]',
      'CN = Test TSA',
      '[ tsa_ext ]',
      'basicConstraints = critical, CA:false',
      'keyUsage = critical, digitalSignature, nonRepudiation',
      'extendedKeyUsage = critical, timeStamping',
      'subjectKeyIdentifier = hash',
      '[ tsa ]',
      'default_tsa = tsa_config',
      '[ tsa_config ]',
      `serial = ${path.join(dir, 'tsa.serial')}`,
      'crypto_device = builtin',
      `signer_cert = ${certFile}`,
      `certs = ${certFile}`,
      `signer_key = ${key}`,
      'signer_digest = sha256',
      'default_policy = 1.3.6.1.4.1.55555.1',
      'digests = sha256, sha384, sha512',
      'accuracy = secs:1',
      'ordering = yes',
      'tsa_name = yes',
      'ess_cert_id_chain = no',
      'ess_cert_id_alg = sha256',
      '',
    ].join('\n'),
  );
  await fs.writeFile(path.join(dir, 'tsa.serial'), '01\n');
  await run('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', certFile, '-days', '30', '-config', config, '-extensions', 'tsa_ext']);
  let n = 0;
  const tsa: LocalTsa = { url: '', certFile, requests: 0, stampOtherValue: false, close: async () => {} };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        if (req.method !== 'POST' || req.headers['content-type'] !== 'application/timestamp-query') {
          res.writeHead(415).end();
          return;
        }
        const id = ++n;
        const query = path.join(dir, `q${id}.tsq`);
        const reply = path.join(dir, `r${id}.tsr`);
        await fs.writeFile(query, Buffer.concat(chunks));
        if (tsa.stampOtherValue) {
          await fs.writeFile(path.join(dir, 'other.txt'), 'another value');
          await run('openssl', ['ts', '-query', '-data', path.join(dir, 'other.txt'), '-sha256', '-cert', '-out', query]);
        }
        try {
          await run('openssl', ['ts', '-reply', '-config', config, '-queryfile', query, '-out', reply]);
          tsa.requests++;
          res.writeHead(200, { 'Content-Type': 'application/timestamp-reply' }).end(await fs.readFile(reply));
        } catch (err) {
          res.writeHead(500).end(String(err));
        }
      })();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  tsa.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/tsr`;
  tsa.close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return tsa;
}
