/**
 * A real clamd for tests: Debian's /usr/sbin/clamd in the foreground on a free 127.0.0.1 port, with a
 * temporary config and a local signature database holding the EICAR test signature (no download here).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { freePort } from '../support/smtp.ts';
import os from 'node:os';
import path from 'node:path';
import { pingClamd, type ClamavConfig } from '../../handlers/documents/clamav.ts';

/** Debian's path; CLAMD_BINARY points elsewhere. */
export const CLAMD_BINARY = process.env.CLAMD_BINARY || '/usr/sbin/clamd';

/** The 68-byte EICAR anti-virus test file, built in two halves so this source is not itself detected. */
export const EICAR = Buffer.from('X5O!P%@AP[4\\PZX54(P^)7CC)7}$' + 'EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*', 'latin1');
/** Signature names in the local database: a whole-file MD5 (.hdb) and a body pattern found anywhere (.ndb). */
export const EICAR_HDB_NAME = 'Test.EICAR-File';
export const EICAR_NDB_NAME = 'Test.EICAR-Body';

export interface LocalClamd {
  config: ClamavConfig;
  port: number;
  streamMaxLength: number;
  /** Milliseconds from spawn to the first PONG. */
  startupMs: number;
  stop(): Promise<void>;
}

/** Why clamd cannot run here, or null when it can. */
export function clamdMissing(): string | null {
  return existsSync(CLAMD_BINARY) ? null : `${CLAMD_BINARY} is not installed (apt-get install clamav-daemon)`;
}

export async function startClamd(options: { streamMaxLength: number }): Promise<LocalClamd> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'clamd-test-'));
  const db = path.join(dir, 'db');
  const tmp = path.join(dir, 'tmp');
  await fs.mkdir(db);
  await fs.mkdir(tmp);
  const md5 = createHash('md5').update(EICAR).digest('hex');
  await fs.writeFile(path.join(db, 'eicar.hdb'), `${md5}:${EICAR.length}:${EICAR_HDB_NAME}\n`);
  await fs.writeFile(path.join(db, 'eicar.ndb'), `${EICAR_NDB_NAME}:0:*:${EICAR.toString('hex')}\n`);
  const port = await freePort();
  const configFile = path.join(dir, 'clamd.conf');
  await fs.writeFile(
    configFile,
    [
      'Foreground yes',
      `TCPSocket ${port}`,
      'TCPAddr 127.0.0.1',
      `DatabaseDirectory ${db}`,
      `TemporaryDirectory ${tmp}`,
      `StreamMaxLength ${options.streamMaxLength}`,
      'MaxThreads 2',
      'LogTime no',
      '',
    ].join('\n'),
  );
  const started = performance.now();
  const child: ChildProcess = spawn(CLAMD_BINARY, ['--config-file', configFile], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let gone = false;
  void exited.then(() => (gone = true));
  const config: ClamavConfig = { address: { kind: 'tcp', host: '127.0.0.1', port }, connectTimeoutMs: 1_000, timeoutMs: 10_000 };
  const stop = async () => {
    if (!gone) {
      child.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5_000))]);
      if (!gone) child.kill('SIGKILL');
    }
    await fs.rm(dir, { recursive: true, force: true });
  };
  // Real time here: the daemon is a separate process loading its database; nothing to inject a clock into.
  const deadline = Date.now() + 30_000;
  while (!(await pingClamd({ ...config, timeoutMs: 1_000 }))) {
    if (gone || Date.now() > deadline) {
      await stop();
      throw new Error(`clamd did not answer PING${gone ? ' (it exited)' : ' within 30 s'}:\n${output.slice(-2000)}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return { config, port, streamMaxLength: options.streamMaxLength, startupMs: Math.round(performance.now() - started), stop };
}
