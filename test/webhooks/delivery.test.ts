import assert from 'node:assert/strict';
import { ATTEMPT_OFFSETS_MS } from '../../handlers/webhooks/delivery.ts';
import { recordMeetingCompleted } from '../../handlers/webhooks/subscriptions.ts';
import { createDeal, stages } from '../support/fixtures.ts';
import { assertRefused } from '../support/refusals.ts';
import { startReceiver } from '../support/receiver.ts';
import { forEachDatabase, startTestService, type TestService } from '../support/service.ts';
import { deliver, deliveries, fanOut, hookWorkspace, opensslHmac, receiverPolicy, subscribe } from './support.ts';

const receiver = await startReceiver();
after(() => receiver.close());

/** Moves the clock to each next attempt and delivers, until no delivery is pending (at most 8 rounds each). */
async function untilFinished(svc: TestService): Promise<void> {
  for (let round = 0; round < 20; round++) {
    const next = await svc.db.sql.one<{ at: number | null }>(`SELECT MAX(next_attempt_at) AS at FROM webhook_deliveries WHERE status = 'pending'`);
    if (next?.at === null || next?.at === undefined) return;
    svc.clock.set(Math.max(svc.clock.now(), Number(next.at)));
    await deliver(svc);
  }
  throw new Error('deliveries still pending after 20 rounds');
}

async function pipelineOf(svc: TestService, api: ReturnType<TestService['client']>) {
  void svc;
  return (await api.customers.CreateSalesPipeline({ data: { name: 'New business', stages: stages.basic } })).data!.item;
}

forEachDatabase('webhook delivery', (svc) => {
  beforeEach(() => {
    receiver.requests.length = 0;
    receiver.answer(() => ({ status: 200, body: 'ok' }));
  });

  it('delivers a committed change once, signed (verified by openssl), with stable event id and no record data', async () => {
    const { ws, api } = await hookWorkspace(svc());
    const hook = await subscribe(svc(), ws, receiver.url, 'resource.created', ['core:Deal']);
    assert.match(hook.secret, /^whsec_[A-Za-z0-9_-]{43}$/);
    assert.match(hook.proposal.approval_url, /\/settings\/webhooks\/proposals\/whp_/);
    const pipeline = await pipelineOf(svc(), api);
    const deal = (await api.customers.CreateDeal(createDeal(pipeline.id, 'lead', { name: 'Secret deal name' }))).data!.item;
    await deliver(svc());
    assert.equal(receiver.requests.length, 1, 'the pipeline is not a subscribed type; the deal is delivered once');
    const got = receiver.requests[0]!;
    assert.equal(got.method, 'POST');
    assert.equal(got.url, '/hook');
    assert.equal(got.headers['content-type'], 'application/json');
    const body = JSON.parse(got.body.toString());
    assert.deepEqual(Object.keys(body).sort(), ['event', 'event_id', 'occurred_at', 'record_id', 'resource_type', 'webhook_id']);
    assert.equal(body.event, 'resource.created');
    assert.equal(body.record_id, deal.id);
    assert.equal(body.resource_type, 'core:Deal');
    assert.equal(body.webhook_id, hook.id);
    assert.ok(!got.body.toString().includes('Secret deal name'), 'no record data in the payload');
    assert.equal(got.headers['x-webhook-event-id'], body.event_id);
    assert.match(String(got.headers['x-webhook-delivery-id']), /^wha_/);
    const ts = String(got.headers['x-webhook-timestamp']);
    assert.equal(ts, String(Math.floor(svc().clock.now() / 1000)));
    const expected = opensslHmac(hook.secret, Buffer.concat([Buffer.from(`${ts}.`), got.body]));
    assert.equal(got.headers['x-webhook-signature'], `v1=${expected}`);
    const [d] = await deliveries(svc(), hook.id);
    assert.deepEqual([d!.status, Number(d!.attempts)], ['succeeded', 1]);
    // The receiver reads current data with its own key; the subscription shows the success.
    const listed = (await api.webhooks.ListWebhookSubscriptions({})).data!.items;
    assert.equal(listed.length, 1);
    assert.equal(listed[0]!.last_success_at, svc().clock.now());
    assert.equal(JSON.stringify(listed).includes(receiver.url), false, 'never the destination');
    assert.equal(JSON.stringify(listed).includes(hook.secret), false, 'never the secret');
  });

  it('updated events carry changed_fields; rolled-back and no-op writes, private records and other types send nothing', async () => {
    const { ws, api } = await hookWorkspace(svc());
    const hook = await subscribe(svc(), ws, receiver.url, 'resource.updated', ['core:Deal']);
    const pipeline = await pipelineOf(svc(), api);
    const deal = (await api.customers.CreateDeal(createDeal(pipeline.id, 'lead'))).data!.item;
    await api.customers.UpdateDeal({ id: deal.id, data: { stage_id: 'proposal' } });
    await api.customers.UpdateDeal({ id: deal.id, data: { stage_id: 'proposal' } }); // changes nothing
    const refused = await api.customers.UpdateDeal({ id: deal.id, data: { name: 'x' }, expected: { stage_id: 'won' } }); // rolled back
    assert.equal(refused.response.status, 409);
    const asAda = svc().client(ws.keys.hooks!.secret, ws.members.ada!);
    const mine = (await asAda.customers.CreateDeal({ ...createDeal(pipeline.id, 'lead'), private: true } as never)).data;
    if (mine) await asAda.customers.UpdateDeal({ id: (mine as { item: { id: string } }).item.id, data: { name: 'private change' } });
    await api.customers.UpdateSalesPipeline({ id: pipeline.id, data: { name: 'Renamed' } });
    await deliver(svc());
    assert.equal(receiver.requests.length, 1);
    const body = JSON.parse(receiver.requests[0]!.body.toString());
    assert.deepEqual([body.event, body.record_id], ['resource.updated', deal.id]);
    assert.deepEqual(body.changed_fields.sort(), ['stage_id', 'weighted_amount']);
    assert.equal((await deliveries(svc(), hook.id)).length, 1);
  });

  it('retries failures on the schedule (500, redirect, reset, refused), same event id, fresh delivery id and signature; Retry-After is honoured; attempts are listed', async () => {
    const { ws, api } = await hookWorkspace(svc());
    const hook = await subscribe(svc(), ws, receiver.url, 'resource.deleted', ['core:Company']);
    const company = (await api.customers.CreateCompany({ data: { name: 'Gone', domain: 'gone.example' } })).data!.item;
    await api.customers.DeleteCompany({ id: company.id });
    const answers: Array<Parameters<typeof receiver.answer>[0] extends (r: never) => infer A ? A : never> = [
      { status: 500, body: 'boom' },
      { status: 302, headers: { Location: 'https://example.com/' } },
      'destroy',
      { status: 503, headers: { 'Retry-After': '3600' } },
      { status: 200 },
    ];
    let i = 0;
    receiver.answer(() => answers[Math.min(i++, answers.length - 1)]!);
    await deliver(svc());
    const first = (await deliveries(svc(), hook.id))[0]!;
    const firstAt = Number(first.first_attempt_at);
    assert.equal(first.status, 'pending');
    const offsets = [ATTEMPT_OFFSETS_MS[1], ATTEMPT_OFFSETS_MS[2], ATTEMPT_OFFSETS_MS[3]];
    for (const offset of offsets) {
      const due = Number((await deliveries(svc(), hook.id))[0]!.next_attempt_at);
      const gap = offset - ATTEMPT_OFFSETS_MS[offsets.indexOf(offset)]!;
      assert.ok(due >= firstAt + offset && due <= firstAt + offset + gap * 0.1, `attempt due at +${due - firstAt} ms, expected +${offset} ms with at most 10 % jitter`);
      svc().clock.set(due - 1);
      assert.equal(await svc().workers.runOnce('webhooks.deliver'), 0, 'not before its time');
      svc().clock.set(due);
      await deliver(svc());
    }
    // The 503 asked for an hour: later than the nominal +30 min.
    const afterRetry = (await deliveries(svc(), hook.id))[0]!;
    assert.ok(Number(afterRetry.next_attempt_at) >= svc().clock.now() + 3_600_000);
    svc().clock.set(Number(afterRetry.next_attempt_at));
    await deliver(svc());
    assert.equal(receiver.requests.length, 5);
    // Each failed attempt is a warn line naming the subscription and the outcome, never the destination.
    const warned = svc().logs().trim().split('\n').map((l) => JSON.parse(l)).filter((l) => l.level === 40 && l.webhook === hook.id && /webhook attempt failed/.test(l.msg));
    assert.equal(warned.length, 4);
    assert.ok(!warned.some((l) => JSON.stringify(l).includes(receiver.url)), 'the destination is not logged');
    const ids = new Set(receiver.requests.map((r) => r.headers['x-webhook-event-id']));
    assert.equal(ids.size, 1, 'one event id across retries');
    assert.equal(new Set(receiver.requests.map((r) => r.headers['x-webhook-delivery-id'])).size, 5, 'a fresh delivery id per attempt');
    assert.equal(new Set(receiver.requests.map((r) => r.body.toString())).size, 1, 'the payload never changes');
    for (const r of receiver.requests) {
      const ts = String(r.headers['x-webhook-timestamp']);
      assert.equal(r.headers['x-webhook-signature'], `v1=${opensslHmac(hook.secret, Buffer.concat([Buffer.from(`${ts}.`), r.body]))}`);
    }
    const done = (await deliveries(svc(), hook.id))[0]!;
    assert.deepEqual([done.status, Number(done.attempts)], ['succeeded', 5]);
    const events = (await api.webhooks.ListWebhookEvents({ webhook_id: hook.id })).data!.items;
    assert.equal(events[0]!.status, 'succeeded');
    const attempts = (await api.webhooks.ListWebhookAttempts({ webhook_id: hook.id, delivery_id: done.id })).data!.items;
    assert.deepEqual(attempts.map((a) => [a.attempt, a.status_code]), [[1, 500], [2, 302], [3, null], [4, 503], [5, 200]]);
    assert.equal(attempts[0]!.error, 'HTTP 500');
    assert.equal(attempts[0]!.response_body, 'boom');
    assert.equal(attempts[1]!.error, 'redirect (not followed): 302');
    assert.ok(attempts[2]!.error);
    assert.equal(attempts[4]!.error, null);
  });

  it('eight attempts exhaust a delivery; ten exhausted deliveries in a row disable the subscription and notify owners and admins', async () => {
    const { ws, api } = await hookWorkspace(svc());
    const hook = await subscribe(svc(), ws, receiver.url, 'resource.created', ['core:Company']);
    receiver.answer(() => ({ status: 500 }));
    for (let n = 0; n < 10; n++) await api.customers.CreateCompany({ data: { name: `C${n}`, domain: `c${n}.example` } });
    await deliver(svc());
    await untilFinished(svc());
    const all = await deliveries(svc(), hook.id);
    assert.equal(all.length, 10);
    assert.ok(all.every((d) => d.status === 'failed' && Number(d.attempts) === 8), JSON.stringify(all.map((d) => [d.status, d.attempts])));
    const sub = (await api.webhooks.ListWebhookSubscriptions({})).data!.items[0]!;
    assert.equal(sub.enabled, false);
    assert.equal(sub.consecutive_failures, 10);
    const notes = await svc().db.sql.all<{ member_id: string; kind: string; title: string }>(`SELECT member_id, kind, title FROM inbox_notifications WHERE kind = 'webhooks.disabled' ORDER BY member_id`);
    assert.deepEqual(notes.map((n) => n.member_id).sort(), [ws.members.bob!, ws.members.olga!].sort());
    assert.match(notes[0]!.title, /Webhook to 127\.0\.0\.1:\d+ disabled/);
    // While disabled, nothing new is delivered.
    const before = receiver.requests.length;
    await api.customers.CreateCompany({ data: { name: 'Later', domain: 'later.example' } });
    await deliver(svc());
    assert.equal(receiver.requests.length, before);
    assert.equal((await deliveries(svc(), hook.id)).length, 10);
    assertRefused(await api.webhooks.ReplayWebhookEvent({ webhook_id: hook.id, event_id: all[0]!.event_id }), 409, 'conflict', /disabled/);
  });

  it('a late failure never overrides a more recent success', async () => {
    const { ws, api } = await hookWorkspace(svc());
    const hook = await subscribe(svc(), ws, receiver.url, 'resource.created', ['core:Company']);
    receiver.answer(() => ({ status: 500 }));
    await api.customers.CreateCompany({ data: { name: 'Old', domain: 'old.example' } });
    await deliver(svc());
    receiver.answer((r) => (JSON.parse(r.body.toString()).record_id ? { status: 200 } : { status: 500 }));
    // A newer event succeeds while the old one keeps failing.
    receiver.answer(() => ({ status: 200 }));
    svc().clock.advance(1000);
    await api.customers.CreateCompany({ data: { name: 'New', domain: 'new.example' } });
    await deliver(svc());
    receiver.answer(() => ({ status: 500 }));
    await untilFinished(svc());
    const sub = (await api.webhooks.ListWebhookSubscriptions({})).data!.items[0]!;
    assert.equal(sub.enabled, true);
    assert.equal(sub.consecutive_failures, 0, 'the exhausted delivery began before the success');
    assert.ok(sub.last_success_at! < sub.last_failure_at!);
    assert.deepEqual((await deliveries(svc(), hook.id)).map((d) => d.status), ['failed', 'succeeded']);
  });

  it('replays one event and recovers a time range: same event id, new deliveries', async () => {
    const { ws, api } = await hookWorkspace(svc());
    const hook = await subscribe(svc(), ws, receiver.url, 'resource.created', ['core:Company']);
    receiver.answer(() => ({ status: 500 }));
    const t0 = svc().clock.now();
    for (let n = 0; n < 3; n++) await api.customers.CreateCompany({ data: { name: `R${n}`, domain: `r${n}.example` } });
    await deliver(svc());
    await untilFinished(svc());
    const failed = await deliveries(svc(), hook.id);
    assert.ok(failed.every((d) => d.status === 'failed'));
    receiver.answer(() => ({ status: 204 }));
    receiver.requests.length = 0;
    const replayed = await api.webhooks.ReplayWebhookEvent({ webhook_id: hook.id, event_id: failed[0]!.event_id });
    assert.equal(replayed.response.status, 200, JSON.stringify(replayed.error));
    assert.equal(replayed.data!.item.replay_of, failed[0]!.id);
    assertRefused(await api.webhooks.ReplayWebhookEvent({ webhook_id: hook.id, event_id: failed[0]!.event_id }), 409, 'conflict', /still being delivered/);
    await deliver(svc());
    assert.equal(receiver.requests.length, 1);
    assert.equal(receiver.requests[0]!.headers['x-webhook-event-id'], failed[0]!.event_id);
    const recovered = await api.webhooks.RecoverWebhookEvents({ webhook_id: hook.id, since: t0 });
    assert.deepEqual(recovered.data, { webhook_id: hook.id, replayed: 2 }, 'the replayed event succeeded: only the two others');
    await deliver(svc());
    assert.deepEqual(new Set(receiver.requests.map((r) => r.headers['x-webhook-event-id'])), new Set(failed.map((d) => d.event_id)));
    assertRefused(await api.webhooks.ReplayWebhookEvent({ webhook_id: hook.id, event_id: 'evt_nope' }), 404, 'not_found');
    assertRefused(await api.webhooks.ListWebhookEvents({ webhook_id: 'wh_nope' }), 404, 'not_found');
  });

  it('limits attempts to 60 per subscription per minute: the rest wait for the next minute, none dropped', async () => {
    const { ws, api } = await hookWorkspace(svc());
    const hook = await subscribe(svc(), ws, receiver.url, 'resource.created', ['core:Company']);
    svc().clock.set(Math.ceil(svc().clock.now() / 60_000) * 60_000 + 1000);
    for (let n = 0; n < 70; n++) await api.customers.CreateCompany({ data: { name: `L${n}`, domain: `l${n}.example` } });
    await deliver(svc());
    assert.equal(receiver.requests.length, 60);
    const waiting = (await deliveries(svc(), hook.id)).filter((d) => d.status === 'pending');
    assert.equal(waiting.length, 10);
    assert.ok(waiting.every((d) => Number(d.attempts) === 0 && Number(d.next_attempt_at) >= Math.ceil(svc().clock.now() / 60_000) * 60_000));
    svc().clock.advance(62_000);
    await deliver(svc());
    assert.equal(receiver.requests.length, 70);
  });

  it('legacy meeting.completed: bare hex HMAC over the body, no timestamp', async () => {
    const { ws } = await hookWorkspace(svc());
    const hook = await subscribe(svc(), ws, receiver.url, 'meeting.completed', []);
    const { event_id } = await recordMeetingCompleted(svc().db, svc().clock, ws.workspace_id, 'mtg_42');
    await deliver(svc());
    assert.equal(receiver.requests.length, 1);
    const got = receiver.requests[0]!;
    assert.deepEqual(JSON.parse(got.body.toString()), { event: 'meeting.completed', event_id, webhook_id: hook.id, occurred_at: svc().clock.now(), meeting_id: 'mtg_42' });
    assert.equal(got.headers['x-webhook-timestamp'], undefined);
    assert.equal(got.headers['x-webhook-signature'], opensslHmac(hook.secret, got.body));
  });

  it('refuses non-public and malformed destinations and wrong types when proposing', async () => {
    const { ws, api } = await hookWorkspace(svc());
    for (const url of ['http://hooks.acme-receiver.com/x', 'https://127.0.0.1/x', 'https://[::ffff:127.0.0.1]/x', 'https://2130706433/x', 'https://localhost/x', 'https://user:pw@hooks.acme-receiver.com/', 'https://169.254.169.254/latest', 'https://10.0.0.8/x', 'https://hooks.acme-receiver.com:8443/x']) {
      assertRefused(await api.webhooks.PrepareWebhook({ url, event: 'resource.created', resource_types: ['core:Deal'] }), 400, 'invalid_input', /^url: /);
    }
    assertRefused(await api.webhooks.PrepareWebhook({ url: 'https://hooks.acme-receiver.com/x', event: 'resource.created' }), 400, 'invalid_input', /at least one/);
    assertRefused(await api.webhooks.PrepareWebhook({ url: 'https://hooks.acme-receiver.com/x', event: 'meeting.completed', resource_types: ['core:Deal'] }), 400, 'invalid_input', /takes none/);
    assertRefused(await api.webhooks.PrepareWebhook({ url: 'https://hooks.acme-receiver.com/x', event: 'resource.created', resource_types: ['tickets:Ticket'] }), 400, 'invalid_input', /not a published/);
    const narrow = svc().client(ws.keys.ci!.secret);
    assertRefused(await narrow.webhooks.PrepareWebhook({ url: 'https://hooks.acme-receiver.com/x', event: 'resource.created', resource_types: ['core:Deal'] }), 403, 'forbidden');
    const ok = await api.webhooks.PrepareWebhook({ url: 'https://hooks.acme-receiver.com/x', event: 'resource.created', resource_types: ['core:Deal'] });
    assert.equal(ok.response.status, 200, JSON.stringify(ok.error));
    assert.equal(ok.data!.status, 'pending');
  });

  it('a delivery whose worker died mid-attempt is attempted again once its lease ends', async () => {
    const { ws, api } = await hookWorkspace(svc());
    const hook = await subscribe(svc(), ws, receiver.url, 'resource.created', ['core:Company']);
    await api.customers.CreateCompany({ data: { name: 'K', domain: 'k.example' } });
    await fanOut(svc());
    const now = svc().clock.now();
    // A worker claimed it and was killed before recording anything.
    await svc().db.sql.run(`UPDATE webhook_deliveries SET status = 'delivering', leased_by = 'killed-worker', lease_until = ? WHERE webhook_id = ?`, [now + 60_000, hook.id]);
    assert.equal(await svc().workers.runOnce('webhooks.deliver'), 0);
    svc().clock.advance(60_001);
    await deliver(svc());
    assert.equal(receiver.requests.length, 1);
    const [d] = await deliveries(svc(), hook.id);
    assert.deepEqual([d!.status, Number(d!.attempts)], ['succeeded', 1]);
  });

  it('two processes deliver each event once between them (PostgreSQL)', async function () {
    if (svc().db.dialect !== 'pg') this.skip();
    const { ws, api } = await hookWorkspace(svc());
    const hook = await subscribe(svc(), ws, receiver.url, 'resource.created', ['core:Company']);
    const second = await startTestService(svc().databaseUrl, receiverPolicy(receiver));
    try {
      second.clock.set(svc().clock.now());
      for (let n = 0; n < 40; n++) await api.customers.CreateCompany({ data: { name: `P${n}`, domain: `p${n}.example` } });
      await fanOut(svc());
      for (let round = 0; round < 5; round++) await Promise.all([svc().workers.runOnce('webhooks.deliver'), second.workers.runOnce('webhooks.deliver')]);
      await deliver(svc());
      assert.equal(receiver.requests.length, 40);
      assert.equal(new Set(receiver.requests.map((r) => r.headers['x-webhook-event-id'])).size, 40);
      assert.ok((await deliveries(svc(), hook.id)).every((d) => d.status === 'succeeded' && Number(d.attempts) === 1));
    } finally {
      await second.close({ keepData: true });
    }
  });
}, receiverPolicy(receiver));
