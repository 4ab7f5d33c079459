import assert from 'node:assert/strict';
import { listRecordEvents } from '../../db/queries/events.ts';
import { dereferenced } from '../../generated/dereferenced.ts';
import { acme, createPipeline } from '../support/fixtures.ts';
import { forEachDatabase } from '../support/service.ts';

describe('the document on replayed answers', () => {
  it('declares Idempotency-Replayed on every answer a command stores and replays (200, 404, 409)', () => {
    let checked = 0;
    for (const item of Object.values(dereferenced.paths)) {
      for (const op of Object.values(item)) {
        if (op['x-service-kind'] !== 'command') continue;
        for (const status of ['200', '404', '409']) {
          const response = op.responses[status];
          if (!response) continue;
          checked++;
          assert.ok(response.headers?.['Idempotency-Replayed'], `${op.operationId} ${status} does not declare Idempotency-Replayed`);
        }
      }
    }
    assert.ok(checked > 20);
  });
});

forEachDatabase('idempotency', (svc) => {
  it('replays the stored response for a retry with the same key and body, with no second effect', async () => {
    const ws = await svc().apply(acme());
    const api = svc().client(ws.keys.ci!.secret);
    const first = await api.customers.CreateSalesPipeline(createPipeline('Once'), { idempotencyKey: 'create-once' });
    assert.equal(first.response.headers.get('Idempotency-Replayed'), null);
    svc().clock.advance(60_000);
    const retry = await api.customers.CreateSalesPipeline(createPipeline('Once'), { idempotencyKey: 'create-once' });
    assert.equal(retry.response.status, 200);
    assert.equal(retry.response.headers.get('Idempotency-Replayed'), 'true');
    assert.deepEqual(retry.data, first.data);
    assert.equal((await api.customers.ListSalesPipelines({})).data!.items.length, 1);
    assert.equal((await listRecordEvents(svc().db.sql, ws.workspace_id)).length, 1);
  });

  it('refuses the same key with a different body or operation, without effect', async () => {
    const ws = await svc().apply(acme());
    const api = svc().client(ws.keys.ci!.secret);
    const { item } = (await api.customers.CreateSalesPipeline(createPipeline('A'), { idempotencyKey: 'k1' })).data!;
    const otherBody = await api.customers.CreateSalesPipeline(createPipeline('B'), { idempotencyKey: 'k1' });
    assert.equal(otherBody.response.status, 400);
    assert.equal(otherBody.error!.error, 'invalid_input');
    assert.match(otherBody.error!.message, /Idempotency-Key was already used/);
    const otherOp = await api.customers.UpdateSalesPipeline({ id: item.id, data: { name: 'C' } }, { idempotencyKey: 'k1' });
    assert.equal(otherOp.response.status, 400);
    assert.deepEqual((await api.customers.ListSalesPipelines({})).data!.items.map((p) => p.data.name), ['A']);
  });

  it('answers 409 while the first request with the key is still running, and takes over an abandoned lock', async () => {
    const ws = await svc().apply(acme());
    const api = svc().client(ws.keys.ci!.secret);
    await api.customers.CreateSalesPipeline(createPipeline('A'), { idempotencyKey: 'in-flight' });
    // Make the receipt look like a request still running in another process.
    await svc().db.sql.run(`UPDATE idempotency_receipts SET completed_at = NULL, status_code = NULL, response_body = NULL, locked_at = ? WHERE idem_key = ?`, [svc().clock.now(), 'in-flight']);
    const busy = await api.customers.CreateSalesPipeline(createPipeline('A'), { idempotencyKey: 'in-flight' });
    assert.equal(busy.response.status, 409);
    assert.equal(busy.error!.error, 'conflict');
    assert.equal((await api.customers.ListSalesPipelines({})).data!.items.length, 1);
    svc().clock.advance(svc().config.idempotencyLockTimeoutMs + 1);
    const takeover = await api.customers.CreateSalesPipeline(createPipeline('A'), { idempotencyKey: 'in-flight' });
    assert.equal(takeover.response.status, 200);
    assert.equal(takeover.response.headers.get('Idempotency-Replayed'), null);
  });

  it('gives concurrent retries of one key exactly one effect', async () => {
    const ws = await svc().apply(acme());
    const api = svc().client(ws.keys.ci!.secret);
    const results = await Promise.all(Array.from({ length: 12 }, () => api.customers.CreateSalesPipeline(createPipeline('Race'), { idempotencyKey: 'race' })));
    const statuses = results.map((r) => r.response.status);
    assert.ok(statuses.every((s) => s === 200 || s === 409), statuses.join(','));
    const ids = new Set(results.filter((r) => r.data).map((r) => r.data!.item.id));
    assert.equal(ids.size, 1);
    assert.equal((await api.customers.ListSalesPipelines({})).data!.items.length, 1);
    assert.equal((await listRecordEvents(svc().db.sql, ws.workspace_id)).length, 1);
  });

  it('scopes keys per credential and per member acted for', async () => {
    const ws = await svc().apply(acme());
    const body = { data: { name: 'Scoped' }, private: true };
    const ada = await svc().client(ws.keys.ci!.secret, ws.members.ada).customers.CreateSalesPipeline(body, { idempotencyKey: 'shared-key' });
    const olga = await svc().client(ws.keys.ci!.secret, ws.members.olga).customers.CreateSalesPipeline(body, { idempotencyKey: 'shared-key' });
    const other = await svc().client(ws.keys.all!.secret, ws.members.ada).customers.CreateSalesPipeline(body, { idempotencyKey: 'shared-key' });
    assert.equal(olga.response.headers.get('Idempotency-Replayed'), null);
    assert.equal(other.response.headers.get('Idempotency-Replayed'), null);
    assert.equal(new Set([ada.data!.item.id, olga.data!.item.id, other.data!.item.id]).size, 3);
  });

  it('stores 404 and 409 answers but not validation errors', async () => {
    const ws = await svc().apply(acme());
    const api = svc().client(ws.keys.ci!.secret);
    const missing = await api.customers.UpdateSalesPipeline({ id: 'pl_missing', data: { name: 'x' } }, { idempotencyKey: 'k404' });
    assert.equal(missing.response.status, 404);
    const again = await api.customers.UpdateSalesPipeline({ id: 'pl_missing', data: { name: 'x' } }, { idempotencyKey: 'k404' });
    assert.equal(again.response.status, 404);
    assert.equal(again.response.headers.get('Idempotency-Replayed'), 'true');
    const pipeline = (await api.customers.CreateSalesPipeline(createPipeline('Real'))).data!.item;
    const stale = { id: pipeline.id, data: { name: 'New' }, expected: { name: 'Not the name' } };
    assert.equal((await api.customers.UpdateSalesPipeline(stale, { idempotencyKey: 'k409' })).response.status, 409);
    const replayed = await api.customers.UpdateSalesPipeline(stale, { idempotencyKey: 'k409' });
    assert.deepEqual([replayed.response.status, replayed.response.headers.get('Idempotency-Replayed')], [409, 'true']);

    const auth = { Authorization: `Bearer ${ws.keys.ci!.secret}`, 'Idempotency-Key': 'k400' };
    const bad = await svc().post('customers.CreateSalesPipeline', { data: { name: '' } }, auth);
    assert.equal(bad.status, 400);
    const fixed = await svc().post('customers.CreateSalesPipeline', { data: { name: 'Fixed' } }, auth);
    assert.equal(fixed.status, 200, 'a corrected retry may reuse the key');
    const stageRules = await svc().post('customers.CreateSalesPipeline', { data: { name: 'x', stages: [{ id: 'a', label: 'A', kind: 'won' }, { id: 'a', label: 'B', kind: 'lost' }] } }, { ...auth, 'Idempotency-Key': 'k400b' });
    assert.equal(stageRules.status, 400);
    const stageFixed = await svc().post('customers.CreateSalesPipeline', { data: { name: 'y' } }, { ...auth, 'Idempotency-Key': 'k400b' });
    assert.equal(stageFixed.status, 200);
  });

  it('keeps receipts at least 24 hours, then prunes them in the background job', async () => {
    const ws = await svc().apply(acme());
    const api = svc().client(ws.keys.ci!.secret);
    await api.customers.CreateSalesPipeline(createPipeline('Kept'), { idempotencyKey: 'kept' });
    await svc().jobs.scheduleRecurring();
    svc().clock.advance(23 * 3_600_000);
    await svc().jobs.runDue();
    assert.equal((await api.customers.CreateSalesPipeline(createPipeline('Kept'), { idempotencyKey: 'kept' })).response.headers.get('Idempotency-Replayed'), 'true');
    svc().clock.advance(2 * 3_600_000);
    await svc().jobs.runDue();
    const count = await svc().db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM idempotency_receipts WHERE scope = ?`, [`${ws.keys.ci!.id}:-`]);
    assert.equal(Number(count!.n), 0);
  });
});
