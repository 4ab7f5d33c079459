/**
 * One slow receiver must not hold back every webhook: a destination that never answers costs its own
 * deliveries only (at most PER_SUBSCRIPTION_IN_FLIGHT attempts in flight to it, each ended by the
 * 10 s limit), never another subscription's or workspace's. Real HTTPS receiver, a route that stalls.
 */
import assert from 'node:assert/strict';
import { ATTEMPT_TIMEOUT_MS } from '../../handlers/webhooks/delivery.ts';
import { PER_SUBSCRIPTION_IN_FLIGHT } from '../../handlers/webhooks/worker.ts';
import { acme } from '../support/fixtures.ts';
import { startReceiver } from '../support/receiver.ts';
import { forEachDatabase } from '../support/service.ts';
import { deliver, deliveries, fanOut, hookWorkspace, receiverPolicy, subscribe } from './support.ts';

const receiver = await startReceiver();
after(() => receiver.close());
const stallUrl = `https://127.0.0.1:${receiver.port}/stall`;
const arrivedAt = (path: string) => receiver.requests.filter((r) => r.url.startsWith(path)).map((r) => r.at);

/** Waits (real time, bounded) until `done`, while the workers' loops run as in a serving process. */
async function waitUntil(done: () => boolean | Promise<boolean>, ms: number): Promise<void> {
  const until = Date.now() + ms;
  while (!(await done()) && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 5));
}

forEachDatabase('webhook delivery isolation', (svc) => {
  afterEach(() => svc().workers.stop());

  it('a receiver that never answers holds back only its own deliveries, in this workspace and others', async function () {
    this.timeout(60_000);
    receiver.requests.length = 0;
    receiver.answer((r) => (r.url.startsWith('/stall') ? 'hang' : { status: 200 }));
    const { ws, api } = await hookWorkspace(svc());
    const stalled = await subscribe(svc(), ws, stallUrl, 'resource.created', ['core:Company']);
    const healthy = await subscribe(svc(), ws, `${receiver.url}/same`, 'resource.created', ['core:Company']);
    const spec = acme();
    spec.workspace = { name: 'Globex' };
    spec.keys!.hooks = { name: 'Globex hooks', operations: ['webhooks.*', 'customers.*'], resources: { 'core:Company': ['read', 'write'] } };
    const globex = await svc().apply(spec);
    const otherApi = svc().client(globex.keys.hooks!.secret);
    const other = await subscribe(svc(), globex, `${receiver.url}/other`, 'resource.created', ['core:Company']);

    for (let n = 0; n < 8; n++) await api.customers.CreateCompany({ data: { name: `S${n}`, domain: `s${n}.example` } });
    await otherApi.customers.CreateCompany({ data: { name: 'Other', domain: 'other.example' } });
    await fanOut(svc());
    const started = Date.now();
    svc().workers.start();
    await waitUntil(() => arrivedAt('/hook/same').length === 8 && arrivedAt('/hook/other').length === 1, 8000);
    const healthyMs = Math.max(...arrivedAt('/hook/same'), ...arrivedAt('/hook/other')) - started;
    assert.equal(arrivedAt('/hook/same').length, 8, 'every delivery of the healthy subscription arrived');
    assert.equal(arrivedAt('/hook/other').length, 1, "the other workspace's delivery arrived");
    assert.ok(healthyMs < ATTEMPT_TIMEOUT_MS / 2, `healthy first attempts took ${healthyMs} ms, not held back by the stalled receiver`);
    assert.equal(arrivedAt('/stall').length, PER_SUBSCRIPTION_IN_FLIGHT, 'at most the per-subscription number of attempts in flight to the stalled one');
    // Recorded as soon as each answer is read (the arrival above comes first).
    const succeeded = async (id: string) => (await deliveries(svc(), id)).every((d) => d.status === 'succeeded');
    await waitUntil(async () => (await succeeded(healthy.id)) && (await succeeded(other.id)), 5000);
    assert.ok(await succeeded(healthy.id));
    assert.ok(await succeeded(other.id));
    const stuck = await deliveries(svc(), stalled.id);
    assert.deepEqual(stuck.map((d) => d.status).sort(), [...Array(PER_SUBSCRIPTION_IN_FLIGHT).fill('delivering'), ...Array(8 - PER_SUBSCRIPTION_IN_FLIGHT).fill('pending')].sort());

    // A change committed while the stalled attempts still hang reaches the healthy receiver at once.
    await api.customers.CreateCompany({ data: { name: 'Later', domain: 'later.example' } });
    await fanOut(svc());
    const later = Date.now();
    await waitUntil(() => arrivedAt('/hook/same').length === 9, 5000);
    assert.equal(arrivedAt('/hook/same').length, 9);
    assert.ok(arrivedAt('/hook/same')[8]! - later < ATTEMPT_TIMEOUT_MS / 2, 'a new event is not queued behind the stalled attempts');

    // The receiver recovers; the 10 s limit ends the stalled attempts (failures, retried later) and the rest go through.
    receiver.answer(() => ({ status: 200 }));
    await svc().workers.stop();
    await deliver(svc(), 3 * ATTEMPT_TIMEOUT_MS);
    const ended = await svc().db.sql.all<{ error: string | null }>(`SELECT error FROM webhook_attempts WHERE webhook_id = ? AND error IS NOT NULL`, [stalled.id]);
    assert.equal(ended.length, PER_SUBSCRIPTION_IN_FLIGHT);
    assert.ok(ended.every((a) => /timeout after 10000 ms/.test(a.error!)), JSON.stringify(ended));
    const final = await deliveries(svc(), stalled.id);
    assert.deepEqual(final.map((d) => d.status).sort(), [...Array(PER_SUBSCRIPTION_IN_FLIGHT).fill('pending'), ...Array(9 - PER_SUBSCRIPTION_IN_FLIGHT).fill('succeeded')].sort(), 'the rest went through once it answered');
  });
}, receiverPolicy(receiver));
