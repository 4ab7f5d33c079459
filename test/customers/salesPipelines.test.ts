import assert from 'node:assert/strict';
import { listRecordEvents } from '../../db/queries/events.ts';
import type { RequestBody } from '../../generated/client.ts';
import { acme, createPipeline, stages } from '../support/fixtures.ts';
import { forEachDatabase } from '../support/service.ts';

forEachDatabase('sales pipelines', (svc) => {
  it('creates, reads, lists, updates and deletes a pipeline in the record envelope', async () => {
    const ws = await svc().apply(acme());
    const api = svc().client(ws.keys.ci!.secret);
    const created = await api.customers.CreateSalesPipeline(createPipeline('Deals'));
    assert.equal(created.response.status, 200);
    const item = created.data!.item;
    assert.match(item.id, /^pl_/);
    assert.equal(item.created_by, null);
    assert.equal(item.private, false);
    assert.equal(item.created_at, svc().clock.now());
    assert.deepEqual(item.data, { name: 'Deals', stages: stages.basic });

    const got = await api.customers.GetSalesPipeline({ id: item.id });
    assert.deepEqual(got.data!.item, item);

    svc().clock.advance(1000);
    const updated = await api.customers.UpdateSalesPipeline({ id: item.id, data: { name: 'Deals 2' }, expected: { name: 'Deals', is_default: { $absent: true } } });
    assert.equal(updated.response.status, 200);
    assert.equal(updated.data!.item.data.name, 'Deals 2');
    assert.deepEqual(updated.data!.item.data.stages, stages.basic);
    assert.equal(updated.data!.item.updated_at, item.created_at + 1000);

    const list = await api.customers.ListSalesPipelines({});
    assert.deepEqual(list.data!.items.map((p) => p.id), [item.id]);
    assert.equal(list.data!.has_more, false);
    assert.equal(list.data!.next_cursor, null);

    const del = await api.customers.DeleteSalesPipeline({ id: item.id });
    assert.deepEqual(del.data, { id: item.id, deleted: true });
    const again = await api.customers.DeleteSalesPipeline({ id: item.id });
    assert.deepEqual(again.data, { id: item.id, deleted: false });
    const gone = await api.customers.GetSalesPipeline({ id: item.id });
    assert.equal(gone.response.status, 404);
    assert.equal(gone.error!.error, 'not_found');

    const events = await listRecordEvents(svc().db.sql, ws.workspace_id);
    assert.deepEqual(events.map((e) => [e.type, e.record_id, e.changed_fields ? JSON.parse(e.changed_fields) : null]), [
      ['resource.created', item.id, null],
      ['resource.updated', item.id, ['name']],
      ['resource.deleted', item.id, null],
    ]);
    assert.ok(events.every((e) => /^evt_/.test(e.id) && e.actor_key_id === ws.keys.ci!.id));
  });

  it('refuses a write whose expected values no longer match, with 409 and no write or event', async () => {
    const ws = await svc().apply(acme());
    const api = svc().client(ws.keys.ci!.secret);
    const { item } = (await api.customers.CreateSalesPipeline(createPipeline('A'))).data!;
    const cases: Array<NonNullable<RequestBody<'customers.UpdateSalesPipeline'>['expected']>> = [
      { name: 'B' },
      { name: { $absent: true } },
      { stages: { $absent: true } },
      { is_default: false },
      { stages: stages.basic.slice(1) },
    ];
    for (const expected of cases) {
      const res = await api.customers.UpdateSalesPipeline({ id: item.id, data: { name: 'C' }, expected });
      assert.equal(res.response.status, 409, JSON.stringify(expected));
      assert.equal(res.error!.error, 'conflict');
    }
    const del = await api.customers.DeleteSalesPipeline({ id: item.id, expected: { name: 'nope' } });
    assert.equal(del.response.status, 409);
    assert.deepEqual((await api.customers.GetSalesPipeline({ id: item.id })).data!.item, item);
    const events = await listRecordEvents(svc().db.sql, ws.workspace_id);
    assert.deepEqual(events.map((e) => e.type), ['resource.created']);
  });

  it('matches expected values deeply, ignoring object key order but not array order', async () => {
    const ws = await svc().apply(acme());
    const api = svc().client(ws.keys.ci!.secret);
    const { item } = (await api.customers.CreateSalesPipeline(createPipeline('A'))).data!;
    const reordered = stages.basic.map((s) => ({ tone: s.tone, probability: s.probability, kind: s.kind, label: s.label, id: s.id }));
    const ok = await api.customers.UpdateSalesPipeline({ id: item.id, data: { is_default: true }, expected: { stages: reordered, is_default: { $absent: true } } });
    assert.equal(ok.response.status, 200);
    const swapped = [stages.basic[1]!, stages.basic[0]!, stages.basic[2]!, stages.basic[3]!];
    const bad = await api.customers.UpdateSalesPipeline({ id: item.id, data: { name: 'x' }, expected: { stages: swapped } });
    assert.equal(bad.response.status, 409);
  });

  it('unset removes optional fields; an update that changes nothing writes no event and keeps updated_at', async () => {
    const ws = await svc().apply(acme());
    const api = svc().client(ws.keys.ci!.secret);
    const { item } = (await api.customers.CreateSalesPipeline({ data: { name: 'A', stages: stages.basic, is_default: false } })).data!;
    svc().clock.advance(5000);
    const same = await api.customers.UpdateSalesPipeline({ id: item.id, data: { name: 'A', stages: stages.basic } });
    assert.equal(same.data!.item.updated_at, item.updated_at);
    const absentAlready = await api.customers.UpdateSalesPipeline({ id: item.id, unset: [] });
    assert.equal(absentAlready.data!.item.updated_at, item.updated_at);
    const unset = await api.customers.UpdateSalesPipeline({ id: item.id, unset: ['stages', 'is_default'] });
    assert.deepEqual(unset.data!.item.data, { name: 'A' });
    assert.equal(unset.data!.item.updated_at, item.updated_at + 5000);
    const unsetAgain = await api.customers.UpdateSalesPipeline({ id: item.id, unset: ['stages'] });
    assert.deepEqual(unsetAgain.data!.item.data, { name: 'A' });
    const events = await listRecordEvents(svc().db.sql, ws.workspace_id);
    assert.deepEqual(events.map((e) => [e.type, e.changed_fields]), [
      ['resource.created', null],
      ['resource.updated', '["is_default","stages"]'],
    ]);
  });

  it('rejects unsetting name, setting and unsetting one field, and null values', async () => {
    const ws = await svc().apply(acme());
    const api = svc().client(ws.keys.ci!.secret);
    const { item } = (await api.customers.CreateSalesPipeline(createPipeline('A'))).data!;
    const name = await api.customers.UpdateSalesPipeline({ id: item.id, unset: ['name'] });
    assert.equal(name.response.status, 400);
    assert.equal(name.error!.error, 'invalid_input');
    const both = await api.customers.UpdateSalesPipeline({ id: item.id, data: { stages: stages.basic }, unset: ['stages'] });
    assert.equal(both.response.status, 400);
    const nul = await svc().post('customers.UpdateSalesPipeline', { id: item.id, data: { is_default: null } }, { Authorization: `Bearer ${ws.keys.ci!.secret}`, 'Idempotency-Key': 'k-null' });
    assert.equal(nul.status, 400);
    assert.equal(nul.body.error, 'invalid_input');
  });

  it('enforces the stage rules', async () => {
    const ws = await svc().apply(acme());
    const api = svc().client(ws.keys.ci!.secret);
    const [lead, proposal, won, lost] = stages.basic as [any, any, any, any];
    const cases: Array<[string, unknown[]]> = [
      ['duplicate id', [lead, { ...proposal, id: 'lead' }, won, lost]],
      ['no won stage', [lead, proposal, { ...won, kind: 'open', probability: 50 }, lost]],
      ['two lost stages', [lead, { ...proposal, kind: 'lost', probability: 0 }, won, lost]],
      ['won not last', [won, lead, proposal, lost]],
      ['won probability', [lead, { ...won, probability: 90 }, lost]],
      ['lost probability', [lead, won, { ...lost, probability: 5 }]],
    ];
    for (const [why, list] of cases) {
      const res = await svc().post('customers.CreateSalesPipeline', { data: { name: why, stages: list } }, { Authorization: `Bearer ${ws.keys.ci!.secret}`, 'Idempotency-Key': `k-${why}` });
      assert.equal(res.status, 400, why);
      assert.equal(res.body.error, 'invalid_input', why);
    }
    const lostFirst = await api.customers.CreateSalesPipeline({ data: { name: 'lost then won', stages: [lead, lost, won] } });
    assert.equal(lostFirst.response.status, 200);
    const noProbability = await api.customers.CreateSalesPipeline({ data: { name: 'plain', stages: [{ id: 'w', label: 'W', kind: 'won' }, { id: 'l', label: 'L', kind: 'lost' }] } });
    assert.equal(noProbability.response.status, 200);
    assert.equal((await api.customers.ListSalesPipelines({})).data!.items.length, 2);
  });

  it('keeps one default pipeline per workspace and tells the previous default it changed', async () => {
    const ws = await svc().apply(acme());
    const api = svc().client(ws.keys.ci!.secret);
    const a = (await api.customers.CreateSalesPipeline({ data: { name: 'A', is_default: true } })).data!.item;
    const b = (await api.customers.CreateSalesPipeline({ data: { name: 'B', is_default: true } })).data!.item;
    assert.equal((await api.customers.GetSalesPipeline({ id: a.id })).data!.item.data.is_default, false);
    assert.equal(b.data.is_default, true);
    await api.customers.UpdateSalesPipeline({ id: a.id, data: { is_default: true } });
    assert.equal((await api.customers.GetSalesPipeline({ id: b.id })).data!.item.data.is_default, false);
    const events = await listRecordEvents(svc().db.sql, ws.workspace_id);
    assert.deepEqual(events.map((e) => [e.type, e.record_id, e.changed_fields]), [
      ['resource.created', a.id, null],
      ['resource.updated', a.id, '["is_default"]'],
      ['resource.created', b.id, null],
      ['resource.updated', b.id, '["is_default"]'],
      ['resource.updated', a.id, '["is_default"]'],
    ]);
  });

  it('keeps private pipelines visible only to their owner', async () => {
    const ws = await svc().apply(acme());
    const ada = svc().client(ws.keys.ci!.secret, ws.members.ada);
    const olga = svc().client(ws.keys.ci!.secret, ws.members.olga);
    const workspace = svc().client(ws.keys.ci!.secret);
    const mine = (await ada.customers.CreateSalesPipeline({ data: { name: 'My deals' }, private: true })).data!.item;
    assert.equal(mine.private, true);
    assert.equal(mine.created_by, ws.members.ada);
    const shared = (await olga.customers.CreateSalesPipeline({ data: { name: 'Team deals' } })).data!.item;
    assert.equal(shared.created_by, ws.members.olga);

    assert.deepEqual((await ada.customers.ListSalesPipelines({})).data!.items.map((p) => p.id).sort(), [mine.id, shared.id].sort());
    assert.deepEqual((await olga.customers.ListSalesPipelines({})).data!.items.map((p) => p.id), [shared.id]);
    assert.deepEqual((await workspace.customers.ListSalesPipelines({})).data!.items.map((p) => p.id), [shared.id]);
    for (const other of [olga, workspace]) {
      assert.equal((await other.customers.GetSalesPipeline({ id: mine.id })).response.status, 404);
      assert.equal((await other.customers.UpdateSalesPipeline({ id: mine.id, data: { name: 'x' } })).response.status, 404);
      assert.deepEqual((await other.customers.DeleteSalesPipeline({ id: mine.id })).data, { id: mine.id, deleted: false });
    }
    assert.equal((await ada.customers.UpdateSalesPipeline({ id: mine.id, data: { name: 'Mine' } })).response.status, 200);
    const privateDefault = await ada.customers.UpdateSalesPipeline({ id: mine.id, data: { is_default: true } });
    assert.equal(privateDefault.response.status, 400);
    const noMember = await workspace.customers.CreateSalesPipeline({ data: { name: 'x' }, private: true });
    assert.equal(noMember.response.status, 400);
    assert.equal(noMember.error!.error, 'invalid_input');
    const events = await listRecordEvents(svc().db.sql, ws.workspace_id);
    assert.deepEqual(events.map((e) => [e.record_id, Boolean(e.private)]), [[mine.id, true], [shared.id, false], [mine.id, true]]);
  });

  it("applies the member's own role when acting for them", async () => {
    const ws = await svc().apply(acme());
    const olga = svc().client(ws.keys.ci!.secret, ws.members.olga);
    const ada = svc().client(ws.keys.ci!.secret, ws.members.ada);
    const shared = (await olga.customers.CreateSalesPipeline({ data: { name: 'Team' } })).data!.item;
    assert.equal((await ada.customers.GetSalesPipeline({ id: shared.id })).response.status, 200);
    const update = await ada.customers.UpdateSalesPipeline({ id: shared.id, data: { name: 'Mine now' } });
    assert.equal(update.response.status, 403);
    assert.equal(update.error!.error, 'forbidden');
    assert.equal((await ada.customers.CreateSalesPipeline({ data: { name: 'Shared by a member' } })).response.status, 403);
    assert.equal((await ada.customers.DeleteSalesPipeline({ id: shared.id })).response.status, 403);
    const bob = svc().client(ws.keys.all!.secret, ws.members.bob);
    assert.equal((await bob.customers.UpdateSalesPipeline({ id: shared.id, data: { name: 'Admin edit' } })).response.status, 200);
  });

  it('upserts by name: creates, then updates the one match, and refuses ambiguous names', async () => {
    const ws = await svc().apply(acme());
    const api = svc().client(ws.keys.ci!.secret);
    const first = await api.customers.UpsertSalesPipeline({ data: { name: 'Renewals', stages: stages.basic } });
    assert.equal(first.data!.created, true);
    const second = await api.customers.UpsertSalesPipeline({ data: { name: 'Renewals', is_default: true }, unset: ['stages'], expected: { is_default: { $absent: true } } });
    assert.equal(second.data!.created, false);
    assert.equal(second.data!.item.id, first.data!.item.id);
    assert.deepEqual(second.data!.item.data, { name: 'Renewals', is_default: true });
    const mismatch = await api.customers.UpsertSalesPipeline({ data: { name: 'Renewals' }, expected: { is_default: false } });
    assert.equal(mismatch.response.status, 409);
    const noneExpected = await api.customers.UpsertSalesPipeline({ data: { name: 'Fresh' }, expected: { name: 'Fresh' } });
    assert.equal(noneExpected.response.status, 409);
    await api.customers.CreateSalesPipeline({ data: { name: 'Twice' } });
    await api.customers.CreateSalesPipeline({ data: { name: 'Twice' } });
    const ambiguous = await api.customers.UpsertSalesPipeline({ data: { name: 'Twice' } });
    assert.equal(ambiguous.response.status, 409);
    const ada = svc().client(ws.keys.ci!.secret, ws.members.ada);
    const priv = await ada.customers.UpsertSalesPipeline({ data: { name: 'Renewals' }, private: true });
    assert.equal(priv.data!.created, true, 'private scope is separate from shared');
    const concurrent = await Promise.all(Array.from({ length: 8 }, () => api.customers.UpsertSalesPipeline({ data: { name: 'Race' } })));
    assert.equal(concurrent.filter((r) => r.data?.created).length, 1);
    const all = (await api.customers.ListSalesPipelines({ limit: 100 })).data!.items;
    assert.equal(all.filter((p) => p.data.name === 'Race').length, 1);
  });

  it('pages by (updated_at, id) with cursors and updated_at windows', async () => {
    const ws = await svc().apply(acme());
    const api = svc().client(ws.keys.ci!.secret);
    const t0 = svc().clock.now();
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) {
      ids.push((await api.customers.CreateSalesPipeline({ data: { name: `P${i}` } })).data!.item.id);
      if (i % 2 === 1) svc().clock.advance(10);
    }
    const seen: string[] = [];
    let cursor: string | undefined;
    for (;;) {
      const page = (await api.customers.ListSalesPipelines({ limit: 3, ...(cursor ? { cursor } : {}) })).data!;
      seen.push(...page.items.map((p) => p.id));
      assert.ok(page.items.length <= 3);
      if (!page.has_more) {
        assert.equal(page.next_cursor, null);
        break;
      }
      cursor = page.next_cursor!;
    }
    assert.deepEqual(seen.sort(), [...ids].sort());
    const all = (await api.customers.ListSalesPipelines({})).data!.items;
    const order = all.map((p) => [p.updated_at, p.id] as const);
    assert.deepEqual(order, [...order].sort((a, b) => a[0] - b[0] || (a[1] < b[1] ? -1 : 1)));

    const window = (await api.customers.ListSalesPipelines({ updated_since: t0 + 10, updated_before: t0 + 30 })).data!.items;
    assert.deepEqual(window.map((p) => p.data.name).sort(), ['P2', 'P3', 'P4', 'P5']);
    const first = (await api.customers.ListSalesPipelines({ limit: 1 })).data!;
    const wrongFilter = await api.customers.ListSalesPipelines({ limit: 1, cursor: first.next_cursor!, updated_since: t0 });
    assert.equal(wrongFilter.response.status, 400);
    const junk = await api.customers.ListSalesPipelines({ cursor: 'not-a-cursor' });
    assert.equal(junk.response.status, 400);
    assert.equal(junk.error!.error, 'invalid_input');
  });

  it('lists the workspace sites and apps', async () => {
    const ws = await svc().apply(acme());
    const api = svc().client(ws.keys.ci!.secret);
    const bundles = (await api.workspace.ListBundles({})).data!;
    assert.deepEqual(bundles.items, [{ content_id: ws.bundles.docs!, name: 'Docs site', domain: 'docs.acme.test', created_at: svc().clock.now() }]);
    const apps = (await api.workspace.ListApps({})).data!;
    assert.deepEqual(apps.items, [{ app_id: ws.apps.tickets!, name: 'Tickets', resource_types: ['tickets:Ticket'], created_at: svc().clock.now() }]);
  });
});
