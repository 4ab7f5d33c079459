/**
 * `webhooks listen` (handlers/webhooks/listen.ts) on both databases: the service's fan-out makes the
 * listener's deliveries and its own workers leave them alone; the listener attempts them, verifies
 * each with the client package's verifyWebhook, prints it and forwards it to a real local HTTP server,
 * whose answer is the attempt's outcome (a 500 is retried). Refusals in words (production, a forward
 * address off this machine, types); a listener left by a dead process is deleted; stopping deletes it.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { startListener } from '../../handlers/webhooks/listen.ts';
import { AdminError } from '../../server/admin.ts';
import { createDeal, stages } from '../support/fixtures.ts';
import { forEachDatabase } from '../support/service.ts';
import { deliver, hookWorkspace } from './support.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

interface Got {
  headers: http.IncomingHttpHeaders;
  body: string;
}

forEachDatabase('webhooks listen', (svc) => {
  const got: Got[] = [];
  let status = 200;
  let local: http.Server;
  let port = 0;
  before(async () => {
    local = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        got.push({ headers: req.headers, body });
        res.writeHead(status, { 'content-type': 'text/plain' }).end(status === 200 ? 'thanks' : 'broken');
      });
    });
    await new Promise<void>((resolve) => local.listen(0, '127.0.0.1', resolve));
    port = (local.address() as AddressInfo).port;
  });
  after(() => new Promise<void>((resolve) => local.close(() => resolve())));
  const deps = () => ({ db: svc().db, clock: svc().clock, logger: pino({ level: 'silent' }), config: svc().config, env: {} });

  it("prints and forwards verified deliveries the service's workers leave to it; a failing local answer is retried; stop deletes it", async () => {
    const { ws, api } = await hookWorkspace(svc());
    const lines: string[] = [];
    const listener = await startListener(deps(), { workspaceId: ws.workspace_id, event: 'resource.updated', types: ['core:Deal'], forwardTo: `http://127.0.0.1:${port}/hook` }, (l) => lines.push(l));
    assert.match(lines[0]!, new RegExp(`^Listening for resource.updated of core:Deal in ${ws.workspace_id} as Olga Owner \\(owner\\): webhook wh_`));
    const pipeline = (await api.customers.CreateSalesPipeline({ data: { name: 'New business', stages: stages.basic } })).data!.item;
    const deal = (await api.customers.CreateDeal(createDeal(pipeline.id, 'lead', { name: 'Listened deal' }))).data!.item;
    svc().clock.advance(1000);
    await api.customers.UpdateDeal({ id: deal.id, data: { stage_id: 'proposal' } });

    // The service fans out and runs its own delivery worker: the listener's delivery stays pending.
    await deliver(svc());
    const row = () => svc().db.sql.one<{ status: string; attempts: number }>(`SELECT status, attempts FROM webhook_deliveries WHERE webhook_id = ?`, [listener.webhookId]);
    assert.deepEqual({ ...(await row()) }, { status: 'pending', attempts: 0 });

    await listener.poll();
    assert.equal(got.length, 1);
    const body = JSON.parse(got[0]!.body);
    assert.deepEqual({ event: body.event, record: body.record_id, webhook: body.webhook_id }, { event: 'resource.updated', record: deal.id, webhook: listener.webhookId });
    assert.match(String(got[0]!.headers['x-webhook-signature']), /^v1=[0-9a-f]{64}$/);
    const printed = lines.at(-1)!;
    assert.match(printed, new RegExp(`resource.updated  core:Deal ${deal.id} changed: stage_id, weighted_amount  \\(event evt_\\w+, signature verified\\)`));
    assert.match(printed, new RegExp(`→ http://127.0.0.1:${port}/hook: HTTP 200 in \\d+ ms`));
    assert.deepEqual({ ...(await row()) }, { status: 'succeeded', attempts: 1 });
    const attempt = await svc().db.sql.one<{ status_code: number; response_body: string }>(`SELECT status_code, response_body FROM webhook_attempts WHERE webhook_id = ?`, [listener.webhookId]);
    assert.deepEqual({ code: Number(attempt!.status_code), body: attempt!.response_body }, { code: 200, body: 'thanks' });

    // The local app fails: the attempt fails and is retried on the usual schedule.
    status = 500;
    svc().clock.advance(1000);
    await api.customers.UpdateDeal({ id: deal.id, data: { stage_id: 'won' } });
    await deliver(svc());
    await listener.poll();
    assert.match(lines.at(-1)!, /: HTTP 500 in \d+ ms/);
    const failed = await svc().db.sql.one<{ status: string; next_attempt_at: number | null }>(`SELECT status, next_attempt_at FROM webhook_deliveries WHERE webhook_id = ? AND attempts = 1 AND status <> 'succeeded'`, [listener.webhookId]);
    assert.equal(failed!.status, 'pending');
    assert.ok(Number(failed!.next_attempt_at) > svc().clock.now(), 'retried later');
    status = 200;

    // After a secret rotation on the webhook's page the listener verifies with the new secret.
    const { rotateSecret } = await import('../../handlers/webhooks/subscriptions.ts');
    await rotateSecret(svc().db, svc().clock, ws.workspace_id, listener.webhookId);
    svc().clock.advance(25 * 3_600_000); // past the old secret's grace period
    await listener.poll(); // its heartbeat (a day passed on this clock), and the retry of the failed delivery
    await api.customers.UpdateDeal({ id: deal.id, data: { name: 'Renamed' } });
    await deliver(svc());
    await listener.poll();
    assert.ok(lines.some((l) => /changed: name .*signature verified/s.test(l)), lines.join('\n'));
    assert.ok(!lines.some((l) => /failed verification/.test(l)), 'every delivery verified, before and after the rotation');

    // A listener whose process stops saying it is alive gets no new deliveries; its next poll revives it.
    svc().clock.advance(61_000);
    await api.customers.UpdateDeal({ id: deal.id, data: { name: 'While away' } });
    await deliver(svc());
    const count = async () => Number((await svc().db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM webhook_deliveries WHERE webhook_id = ?`, [listener.webhookId]))!.n);
    const before = await count();
    await listener.poll();
    await api.customers.UpdateDeal({ id: deal.id, data: { name: 'Back' } });
    await deliver(svc());
    assert.equal(await count(), before + 1, 'delivered again once alive');

    const done = await listener.stop();
    // Received: the two changes, the failed one again (retried after the rotation) and the rename.
    assert.deepEqual(done, { webhook_id: listener.webhookId, received: 4, forwarded_failed: 1 });
    assert.equal(await svc().db.sql.one(`SELECT id FROM webhook_subscriptions WHERE id = ?`, [listener.webhookId]), undefined);
  });

  it('refuses in words: production, a forward address off this machine, record types that do not fit', async () => {
    const { ws } = await hookWorkspace(svc());
    const base = { workspaceId: ws.workspace_id, event: 'resource.updated', types: ['core:Deal'] };
    const refused = async (options: object, message: RegExp, env: NodeJS.ProcessEnv = {}) =>
      assert.rejects(startListener({ ...deps(), env }, { ...base, ...options }, () => {}), (err: unknown) => err instanceof AdminError && message.test(err.message));
    await refused({}, /development only: NODE_ENV is production/, { NODE_ENV: 'production' });
    await refused({ forwardTo: 'https://example.com/hook' }, /--forward-to: only an http\(s\) address on this machine/);
    await refused({ types: [] }, /--types: resource.updated needs at least one record type/);
    await refused({ event: 'signing.request.completed' }, /--types: signing.request.completed is not a record change/);
    await refused({ types: ['core:Nothing'] }, /--types: core:Nothing is not a record type/);
    await refused({ memberId: ws.members.max }, /--member: .* is not an active member/);
    await assert.rejects(startListener({ ...deps(), config: { ...svc().config, publicUrl: 'https://ops.example.com' } }, base, () => {}), /PUBLIC_URL \(https:\/\/ops.example.com\) is not an address on this machine/);
    assert.equal((await svc().db.sql.all(`SELECT id FROM webhook_subscriptions WHERE workspace_id = ?`, [ws.workspace_id])).length, 0, 'nothing added');
  });

  it('runs as `npm run admin -- webhooks listen` until Ctrl+C, then deletes its subscription and says what it received; refused in production', async function () {
    this.timeout(60_000);
    const { ws } = await hookWorkspace(svc());
    const run = (env: NodeJS.ProcessEnv) =>
      spawn(process.execPath, ['--import', 'tsx', path.join(root, 'scripts/admin.ts'), 'webhooks', 'listen', '--workspace', ws.workspace_id, '--types', 'core:Deal'], { cwd: root, env: { ...process.env, DATABASE_URL: svc().config.databaseUrl, ...env } });
    const finished = (child: ReturnType<typeof run>) =>
      new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
        let out = '';
        let err = '';
        let interrupted = false;
        child.stdout.on('data', (c) => {
          out += c;
          // One Ctrl+C, once the listener says it listens.
          if (!interrupted && out.includes('Press Ctrl+C')) interrupted = child.kill('SIGINT');
        });
        child.stderr.on('data', (c) => (err += c));
        child.on('exit', (code) => resolve({ code, out, err }));
      });
    const prod = await finished(run({ NODE_ENV: 'production' }));
    assert.equal(prod.code, 1);
    assert.match(prod.err, /webhooks listen is for development only: NODE_ENV is production here/);
    const dev = await finished(run({ NODE_ENV: 'development' }));
    assert.equal(dev.code, 0, dev.err);
    assert.match(dev.out, /Listening for resource.updated of core:Deal in ws_\w+ as Olga Owner \(owner\): webhook wh_\w+\./);
    assert.match(dev.out, /^received: +0$/m);
    assert.equal((await svc().db.sql.all(`SELECT id FROM webhook_subscriptions WHERE workspace_id = ?`, [ws.workspace_id])).length, 0, 'deleted on Ctrl+C');
  });

  it('deletes a listener left on this host by a process that is gone', async () => {
    const { ws } = await hookWorkspace(svc());
    const lines: string[] = [];
    const first = await startListener(deps(), { workspaceId: ws.workspace_id, event: 'resource.created', types: ['core:Deal'] }, () => {});
    // As if its process had died: the same subscription under a pid that does not exist.
    await svc().db.sql.run(`UPDATE webhook_subscriptions SET url = replace(url, ?, ?) WHERE id = ?`, [`/${process.pid}`, '/999999999', first.webhookId]);
    const second = await startListener(deps(), { workspaceId: ws.workspace_id, event: 'resource.created', types: ['core:Deal'] }, (l) => lines.push(l));
    assert.equal(lines[0], `Deleted the listener ${first.webhookId} left by process 999999999, which is gone.`);
    assert.equal(await svc().db.sql.one(`SELECT id FROM webhook_subscriptions WHERE id = ?`, [first.webhookId]), undefined);
    await second.stop();
  });
});
