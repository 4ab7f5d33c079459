import assert from 'node:assert/strict';
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { openDatabase } from '../../db/database.ts';
import { applyWorkspace } from '../../server/admin.ts';
import { systemClock } from '../../server/clock.ts';
import { acme } from '../support/fixtures.ts';
import { databases } from '../support/service.ts';
import { freePort } from '../../scripts/ports.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');


function startServer(databaseUrl: string, port: number): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
  let output = '';
  const child = spawn(path.join(root, 'node_modules/.bin/tsx'), ['scripts/start.ts'], {
    cwd: root,
    env: { ...process.env, DATABASE_URL: databaseUrl, PORT: String(port), JOBS: 'off', LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, output: () => output, exited };
}

async function waitForHealth(port: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/healthz`);
      if (res.ok) return;
    } catch {
      /* not listening yet */
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('the server did not become healthy');
}

for (const database of databases) {
  describe(`the server process [${database.name}]`, function () {
    this.timeout(60_000);

    it('migrates on start, says how to begin, answers /healthz, and finishes a request in flight on SIGTERM', async () => {
      const url = database.url();
      const port = await freePort();
      const server = startServer(url, port);
      try {
        await waitForHealth(port);
        assert.deepEqual(await (await fetch(`http://127.0.0.1:${port}/healthz`)).json(), { status: 'ok' });
        for (let i = 0; i < 50 && !/no workspace yet/.test(server.output()); i++) await new Promise((r) => setTimeout(r, 100));
        assert.match(server.output(), /no workspace yet: run `npm run demo`/);

        const db = openDatabase(url);
        const ws = await applyWorkspace(db, systemClock, acme());
        await db.close();

        // Send the headers and half of the body, stop the server, then send the rest.
        const body = '{"data":{"name":"In flight"}}';
        const socket = net.connect(port, '127.0.0.1');
        await new Promise((r) => socket.once('connect', r));
        let response = '';
        socket.on('data', (d) => (response += d));
        const closed = new Promise((r) => socket.once('close', r));
        socket.write(
          `POST /v1/operations/customers.CreateSalesPipeline HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${ws.keys.ci!.secret}\r\n` +
            `Content-Type: application/json\r\nIdempotency-Key: in-flight-1\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body.slice(0, 10)}`,
        );
        // Time for the server to read the headers (the request is then in flight, not an idle socket).
        await new Promise((r) => setTimeout(r, 1000));
        server.child.kill('SIGTERM');
        for (let i = 0; i < 50 && !server.output().includes('shutting down'); i++) await new Promise((r) => setTimeout(r, 100));
        assert.match(server.output(), /shutting down: finishing requests in flight/);
        socket.write(body.slice(10));
        await closed;
        assert.match(response, /^HTTP\/1\.1 200 OK/);
        assert.match(response, /"name":"In flight"/);
        assert.equal(await server.exited, 0);
        const secret = ws.keys.ci!.secret;
        assert.ok(!server.output().includes(secret.slice(secret.indexOf('_', 4) + 1)), 'a key secret reached the logs');
      } finally {
        if (server.child.exitCode === null) server.child.kill('SIGKILL');
        if (database.name === 'postgres') {
          const schema = new URL(url).searchParams.get('schema');
          const db = openDatabase(url);
          if (schema) await db.knex.raw(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
          await db.close();
        }
      }
    });
  });
}

describe('starting the server', function () {
  this.timeout(60_000);
  const sqliteUrl = () => databases.find((d) => d.name === 'sqlite')!.url();

  it('says in one line, without a stack trace, that the port is taken, and exits with 1', async () => {
    const blocker = net.createServer();
    const port = await freePort();
    await new Promise<void>((resolve) => blocker.listen(port, resolve));
    try {
      const server = startServer(sqliteUrl(), port);
      const code = await server.exited;
      assert.equal(code, 1);
      assert.match(server.output(), new RegExp(`start: port ${port} is already in use \\(another copy of the service\\?\\); set PORT to a free port`));
      assert.doesNotMatch(server.output(), /\n\s+at /, 'no stack trace');
    } finally {
      blocker.close();
    }
  });

  it('npm start passes SIGINT and SIGTERM on to the server, which stops gracefully (process managers signal npm)', async function () {
    // npm start compiles dist/ first when it is older than the sources (scripts/build.ts): done here, outside the wait for /healthz.
    this.timeout(300_000);
    await promisify(execFile)('npm', ['run', '--silent', 'build', '--', '--if-stale'], { cwd: root });
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      const port = await freePort();
      let output = '';
      const npm = spawn('npm', ['start', '--silent'], {
        cwd: root,
        env: { ...process.env, DATABASE_URL: sqliteUrl(), PORT: String(port), JOBS: 'off' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      npm.stdout!.on('data', (d) => (output += d));
      npm.stderr!.on('data', (d) => (output += d));
      const exited = new Promise<number | null>((resolve) => npm.on('exit', (code) => resolve(code)));
      await waitForHealth(port);
      npm.kill(signal);
      assert.equal(await exited, 0, output);
      assert.match(output, new RegExp(`"signal":"${signal}".*shutting down`));
      assert.match(output, /"msg":"stopped"/);
    }
  });
});
