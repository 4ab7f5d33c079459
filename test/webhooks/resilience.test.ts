import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startReceiver, testCertificates } from '../support/receiver.ts';
import { forEachDatabase } from '../support/service.ts';
import { deliver, deliveries, fanOut, hookWorkspace, receiverPolicy, subscribe } from './support.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const receiver = await startReceiver();
after(() => receiver.close());

forEachDatabase('webhook resilience', (svc) => {
  beforeEach(() => {
    receiver.requests.length = 0;
    receiver.answer(() => ({ status: 200 }));
  });

  it('kill -9 of a worker process mid-delivery: the delivery is attempted again by another worker once its lease ends (PostgreSQL)', async function () {
    if (svc().db.dialect !== 'pg') this.skip();
    this.timeout(60_000);
    const { ws, api } = await hookWorkspace(svc());
    const hook = await subscribe(svc(), ws, receiver.url, 'resource.created', ['core:Company']);
    await api.customers.CreateCompany({ data: { name: 'Killed', domain: 'killed.example' } });
    await fanOut(svc());
    // The first attempt never gets an answer: the worker process is mid-delivery when it is killed.
    receiver.answer((r) => (receiver.requests.indexOf(r) === 0 ? 'hang' : { status: 200 }));
    const fs = await import('node:fs');
    const caFile = path.join(fs.mkdtempSync(path.join((await import('node:os')).tmpdir(), 'wsops-ca-')), 'ca.pem');
    fs.writeFileSync(caFile, testCertificates().caPem);
    const worker = spawn(process.execPath, ['--import', 'tsx', 'scripts/worker.ts'], {
      cwd: root,
      env: {
        ...process.env,
        DATABASE_URL: svc().databaseUrl,
        EGRESS_ALLOW_DESTINATIONS: `127.0.0.1:${receiver.port}`,
        EGRESS_ALLOWED_PORTS: String(receiver.port),
        EGRESS_TEST_CA_FILE: caFile,
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    worker.stdout.on('data', (c: Buffer) => (output += c.toString()));
    worker.stderr.on('data', (c: Buffer) => (output += c.toString()));
    try {
      await receiver.waitFor(1, 30_000);
    } finally {
      worker.kill('SIGKILL');
      await new Promise((resolve) => worker.once('exit', resolve));
    }
    assert.match(output, /EGRESS_ALLOW_DESTINATIONS|allow|relax/i, 'the relaxed egress policy is logged loudly at start');
    const [held] = await deliveries(svc(), hook.id);
    assert.equal(held!.status, 'delivering', 'the killed worker still holds the delivery');
    // Until its lease ends nobody else takes it; then the next worker attempts it again.
    svc().clock.set(Date.now());
    assert.equal(await svc().workers.runOnce('webhooks.deliver'), 0);
    svc().clock.set(Date.now() + 60_001);
    await deliver(svc());
    assert.equal(receiver.requests.length, 2);
    assert.equal(receiver.requests[0]!.headers['x-webhook-event-id'], receiver.requests[1]!.headers['x-webhook-event-id']);
    const [done] = await deliveries(svc(), hook.id);
    assert.deepEqual([done!.status, Number(done!.attempts)], ['succeeded', 1], 'the killed attempt was never recorded; the delivery succeeded once recorded');
  });

  it('caps attempts at 600 per workspace per minute across its subscriptions; the rest wait, none dropped', async function () {
    this.timeout(120_000);
    const { ws, api } = await hookWorkspace(svc());
    for (let i = 0; i < 11; i++) await subscribe(svc(), ws, `${receiver.url}?s=${i}`, 'resource.created', ['core:Company']);
    svc().clock.set(Math.ceil(svc().clock.now() / 60_000) * 60_000 + 1000);
    for (let n = 0; n < 55; n++) await api.customers.CreateCompany({ data: { name: `W${n}`, domain: `w${n}.example` } });
    await deliver(svc());
    assert.equal(receiver.requests.length, 600, 'the workspace budget of the minute');
    const waiting = await svc().db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM webhook_deliveries WHERE workspace_id = ? AND status = 'pending' AND attempts = 0`, [ws.workspace_id]);
    assert.equal(Number(waiting!.n), 5);
    svc().clock.advance(61_000);
    await deliver(svc());
    assert.equal(receiver.requests.length, 605);
  });

  it('a job prunes deliveries and attempts older than 30 days, keeping newer ones', async () => {
    const { ws, api } = await hookWorkspace(svc());
    const hook = await subscribe(svc(), ws, receiver.url, 'resource.created', ['core:Company']);
    await api.customers.CreateCompany({ data: { name: 'Old', domain: 'old.example' } });
    await deliver(svc());
    svc().clock.advance(29 * 86_400_000);
    await api.customers.CreateCompany({ data: { name: 'New', domain: 'new.example' } });
    await deliver(svc());
    assert.equal((await deliveries(svc(), hook.id)).length, 2);
    svc().clock.advance(2 * 86_400_000);
    await svc().jobs.scheduleRecurring();
    await svc().jobs.runDue();
    const left = await deliveries(svc(), hook.id);
    assert.equal(left.length, 1, 'the delivery of 31 days ago is gone');
    const attempts = await svc().db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM webhook_attempts WHERE webhook_id = ?`, [hook.id]);
    assert.equal(Number(attempts!.n), 1);
  });
}, receiverPolicy(receiver));
