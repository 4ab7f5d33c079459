import assert from 'node:assert/strict';
import type { RequestBody } from '../../generated/client.ts';
import { acme, createCompany, createDeal, stages } from '../support/fixtures.ts';
import { assertRefused, eventsOf } from '../support/refusals.ts';
import { forEachDatabase, type TestService } from '../support/service.ts';

type Stage = NonNullable<RequestBody<'customers.CreateSalesPipeline'>['data']['stages']>[number];

/** A workspace with the sales key, a shared pipeline of `stages.basic` and a shared company. */
async function salesWorkspace(svc: TestService) {
  const ws = await svc.apply(acme());
  const api = svc.client(ws.keys.sales!.secret);
  const pipeline = (await api.customers.CreateSalesPipeline({ data: { name: 'New business', stages: stages.basic } })).data!.item;
  const company = (await api.customers.CreateCompany(createCompany('Globex', 'globex.com'))).data!.item;
  return { ws, api, pipeline, company };
}

forEachDatabase('deals', (svc) => {
  it('creates, reads, lists, updates and deletes a deal, with derived weighted_amount and closed_at and their events', async () => {
    const { ws, api, pipeline, company } = await salesWorkspace(svc());
    const created = await api.customers.CreateDeal(createDeal(pipeline.id, 'proposal', { company_id: company.id, close_date: '2027-03-31' }));
    assert.equal(created.response.status, 200, JSON.stringify(created.error));
    const deal = created.data!.item;
    assert.match(deal.id, /^dl_/);
    assert.equal(deal.private, false);
    assert.equal(deal.created_by, null);
    assert.deepEqual(deal.data, {
      name: 'Fleet renewal',
      pipeline_id: pipeline.id,
      stage_id: 'proposal',
      amount: { amount: '1000.00', currency: 'EUR' },
      company_id: company.id,
      close_date: '2027-03-31',
      weighted_amount: { amount: '600.00', currency: 'EUR' },
    });
    assert.deepEqual((await api.customers.GetDeal({ id: deal.id })).data!.item, deal);

    // Into the won stage: closed_at is set to now and the weighted amount is the whole amount.
    svc().clock.advance(1000);
    const won = (await api.customers.UpdateDeal({ id: deal.id, data: { stage_id: 'won' }, expected: { stage_id: 'proposal' } })).data!.item;
    assert.equal(won.data.closed_at, svc().clock.now());
    assert.deepEqual(won.data.weighted_amount, { amount: '1000.00', currency: 'EUR' });
    assert.equal(won.updated_at, svc().clock.now());
    // Other fields change, closed_at stays.
    svc().clock.advance(1000);
    const renamed = (await api.customers.UpdateDeal({ id: deal.id, data: { name: 'Fleet renewal (signed)' } })).data!.item;
    assert.equal(renamed.data.closed_at, won.data.closed_at);
    // From won to lost: entering the lost stage closes it again, now.
    svc().clock.advance(1000);
    const lost = (await api.customers.UpdateDeal({ id: deal.id, data: { stage_id: 'lost' } })).data!.item;
    assert.equal(lost.data.closed_at, svc().clock.now());
    assert.deepEqual(lost.data.weighted_amount, { amount: '0.00', currency: 'EUR' });
    // Back to an open stage: reopened, closed_at removed.
    const reopened = (await api.customers.UpdateDeal({ id: deal.id, data: { stage_id: 'lead' } })).data!.item;
    assert.equal('closed_at' in reopened.data, false);
    assert.deepEqual(reopened.data.weighted_amount, { amount: '100.00', currency: 'EUR' });
    const unsetAmount = (await api.customers.UpdateDeal({ id: deal.id, unset: ['amount', 'company_id'] })).data!.item;
    assert.equal('weighted_amount' in unsetAmount.data, false);
    assert.equal('company_id' in unsetAmount.data, false);

    assert.deepEqual((await api.customers.ListDeals({})).data!.items, [unsetAmount]);
    assert.deepEqual((await api.customers.DeleteDeal({ id: deal.id, expected: { amount: { $absent: true } } })).data, { id: deal.id, deleted: true });
    assert.deepEqual((await api.customers.DeleteDeal({ id: deal.id })).data, { id: deal.id, deleted: false });
    assertRefused(await api.customers.GetDeal({ id: deal.id }), 404, 'not_found');

    const events = (await eventsOf(svc(), ws.workspace_id)).filter(([, id]) => id === deal.id);
    assert.deepEqual(events, [
      ['resource.created', deal.id, null],
      ['resource.updated', deal.id, ['closed_at', 'stage_id', 'weighted_amount']],
      ['resource.updated', deal.id, ['name']],
      ['resource.updated', deal.id, ['closed_at', 'stage_id', 'weighted_amount']],
      ['resource.updated', deal.id, ['closed_at', 'stage_id', 'weighted_amount']],
      ['resource.updated', deal.id, ['amount', 'company_id', 'weighted_amount']],
      ['resource.deleted', deal.id, null],
    ]);
  });

  it('computes weighted_amount exactly, from the stage\'s current probability', async () => {
    const { ws, api } = await salesWorkspace(svc());
    const odd: Stage[] = [
      { id: 'maybe', label: 'Maybe', kind: 'open', probability: 15 },
      { id: 'unknown', label: 'No probability', kind: 'open' },
      { id: 'won', label: 'Won', kind: 'won' },
      { id: 'lost', label: 'Lost', kind: 'lost' },
    ];
    const p = (await api.customers.CreateSalesPipeline({ data: { name: 'Odd', stages: odd } })).data!.item;
    const cases: Array<[string, string, string, string | undefined]> = [
      ['maybe', '10.01', 'EUR', '1.5015'],
      ['maybe', '0.01', 'EUR', '0.0015'],
      ['maybe', '999999999999999.99', 'USD', '149999999999999.9985'],
      ['maybe', '1000', 'JPY', '150'],
      ['maybe', '333', 'JPY', '49.95'],
      ['maybe', '1.001', 'BHD', '0.15015'],
      ['unknown', '500', 'EUR', undefined],
      ['won', '500', 'EUR', '500.00'],
      ['lost', '500', 'EUR', '0.00'],
    ];
    const ids: string[] = [];
    for (const [stage, amount, currency, weighted] of cases) {
      const res = await api.customers.CreateDeal({ data: { name: `${stage} ${amount}`, pipeline_id: p.id, stage_id: stage, amount: { amount, currency: currency as 'EUR' } } });
      assert.equal(res.response.status, 200, JSON.stringify(res.error));
      assert.deepEqual(res.data!.item.data.weighted_amount, weighted === undefined ? undefined : { amount: weighted, currency }, `${stage} ${amount} ${currency}`);
      ids.push(res.data!.item.id);
    }
    // A new probability changes weighted_amount when read, not the deal (no updated_at, no event).
    const deal = (await api.customers.GetDeal({ id: ids[0]! })).data!.item;
    const events = await eventsOf(svc(), ws.workspace_id);
    svc().clock.advance(1000);
    await api.customers.UpdateSalesPipeline({ id: p.id, data: { stages: [{ ...odd[0]!, probability: 50 }, ...odd.slice(1)] } });
    const after = (await api.customers.GetDeal({ id: deal.id })).data!.item;
    assert.deepEqual(after.data.weighted_amount, { amount: '5.005', currency: 'EUR' });
    assert.equal(after.updated_at, deal.updated_at);
    assert.deepEqual((await eventsOf(svc(), ws.workspace_id)).slice(events.length), [['resource.updated', p.id, ['stages']]]);
  });

  it('keeps the stage a stage of the pipeline, and references to records the caller can read', async () => {
    const { ws, api, pipeline, company } = await salesWorkspace(svc());
    const other = (await api.customers.CreateSalesPipeline({ data: { name: 'Renewals', stages: [{ id: 'due', label: 'Due', kind: 'open', probability: 70 }, ...stages.basic.slice(2)] } })).data!.item;
    const bare = (await api.customers.CreateSalesPipeline({ data: { name: 'No stages' } })).data!.item;
    const ada = svc().client(ws.keys.sales!.secret, ws.members.ada);
    const adaPipeline = (await ada.customers.CreateSalesPipeline({ data: { name: 'Mine', stages: stages.basic }, private: true })).data!.item;
    const adaCompany = (await ada.customers.CreateCompany({ ...createCompany('Mine', 'mine.example'), private: true })).data!.item;
    const before = await eventsOf(svc(), ws.workspace_id);

    assertRefused(await api.customers.CreateDeal(createDeal(pipeline.id, 'due')), 400, 'invalid_input', /stage_id.*lead, proposal, won, lost/);
    assertRefused(await api.customers.CreateDeal(createDeal(bare.id, 'lead')), 400, 'invalid_input', /no stages/);
    assertRefused(await api.customers.CreateDeal(createDeal('pl_nope', 'lead')), 400, 'invalid_input', /pipeline_id/);
    assertRefused(await api.customers.CreateDeal(createDeal(pipeline.id, 'lead', { company_id: 'co_nope' })), 400, 'invalid_input', /company_id/);
    // Another member's private records are as absent; a shared deal refers only to shared records.
    assertRefused(await api.customers.CreateDeal(createDeal(adaPipeline.id, 'lead')), 400, 'invalid_input', /pipeline_id/);
    assertRefused(await api.customers.CreateDeal(createDeal(pipeline.id, 'lead', { company_id: adaCompany.id })), 400, 'invalid_input', /company_id/);
    assertRefused(await ada.customers.CreateDeal(createDeal(adaPipeline.id, 'lead')), 400, 'invalid_input', /shared deal cannot be in a private pipeline/);
    assertRefused(await ada.customers.CreateDeal(createDeal(pipeline.id, 'lead', { company_id: adaCompany.id })), 400, 'invalid_input', /shared deal cannot be with a private company/);
    const mine = await ada.customers.CreateDeal({ ...createDeal(adaPipeline.id, 'lead', { company_id: adaCompany.id }), private: true });
    assert.equal(mine.response.status, 200, JSON.stringify(mine.error));
    assert.equal((await ada.customers.CreateDeal({ ...createDeal(pipeline.id, 'lead', { company_id: company.id }), private: true })).response.status, 200);

    const deal = (await api.customers.CreateDeal(createDeal(pipeline.id, 'lead', { company_id: company.id }))).data!.item;
    // Moving to another pipeline needs a stage of that pipeline.
    assertRefused(await api.customers.UpdateDeal({ id: deal.id, data: { pipeline_id: other.id } }), 400, 'invalid_input', /stage_id/);
    assertRefused(await api.customers.UpdateDeal({ id: deal.id, data: { stage_id: 'due' } }), 400, 'invalid_input', /stage_id/);
    const moved = await api.customers.UpdateDeal({ id: deal.id, data: { pipeline_id: other.id, stage_id: 'due' } });
    assert.equal(moved.response.status, 200, JSON.stringify(moved.error));
    assert.deepEqual(moved.data!.item.data.weighted_amount, { amount: '700.00', currency: 'EUR' });
    assertRefused(await api.customers.UpdateDeal({ id: deal.id, unset: ['stage_id'] }), 400, 'invalid_input', /stage_id/);
    assertRefused(await api.customers.UpdateDeal({ id: deal.id, unset: ['pipeline_id'] }), 400, 'invalid_input');
    assertRefused(await api.customers.UpdateDeal({ id: deal.id, data: { close_date: '2027-02-29' } }), 400, 'invalid_input', /close_date/);
    assertRefused(await api.customers.UpdateDeal({ id: deal.id, data: { close_date: '2027-02-30' } }), 400, 'invalid_input', /close_date/);
    assert.equal((await api.customers.UpdateDeal({ id: deal.id, data: { close_date: '2028-02-29' } })).response.status, 200);
    const auth = { Authorization: `Bearer ${ws.keys.sales!.secret}` };
    for (const [i, data] of [
      { weighted_amount: { amount: '1.00', currency: 'EUR' } },
      { closed_at: 1 },
      { company_id: null },
      { close_date: '2027-3-1' },
      { close_date: 20_779 },
      { amount: { amount: 1000, currency: 'EUR' } },
    ].entries()) {
      const res = await svc().post('customers.UpdateDeal', { id: deal.id, data }, { ...auth, 'Idempotency-Key': `ro-${i}` });
      assert.equal(res.status, 400, JSON.stringify(data));
      assert.deepEqual(Object.keys(res.body).sort(), ['error', 'message', 'request_id']);
      assert.equal(res.body.error, 'invalid_input');
    }
    const events = await eventsOf(svc(), ws.workspace_id);
    assert.deepEqual(events.slice(0, before.length), before);
    assert.deepEqual(events.slice(before.length).map(([type, , fields]) => [type, fields]), [
      ['resource.created', null],
      ['resource.created', null],
      ['resource.created', null],
      ['resource.updated', ['pipeline_id', 'stage_id', 'weighted_amount']],
      ['resource.updated', ['close_date']],
    ]);
  });

  it('refuses to remove a stage, or delete a pipeline or company, that deals refer to, naming the count and writing nothing', async () => {
    const { ws, api, pipeline, company } = await salesWorkspace(svc());
    const ada = svc().client(ws.keys.sales!.secret, ws.members.ada);
    const d1 = (await api.customers.CreateDeal(createDeal(pipeline.id, 'proposal', { company_id: company.id }))).data!.item;
    const d2 = (await api.customers.CreateDeal(createDeal(pipeline.id, 'proposal'))).data!.item;
    // A private deal of another member counts too.
    const d3 = (await ada.customers.CreateDeal({ ...createDeal(pipeline.id, 'lead', { company_id: company.id }), private: true })).data!.item;
    const before = { pipeline: (await api.customers.GetSalesPipeline({ id: pipeline.id })).data!.item, company: (await api.customers.GetCompany({ id: company.id })).data!.item };
    const events = await eventsOf(svc(), ws.workspace_id);
    const [lead, proposal, won, lost] = stages.basic as unknown as [Stage, Stage, Stage, Stage];

    assertRefused(await api.customers.UpdateSalesPipeline({ id: pipeline.id, data: { stages: [lead, won, lost] } }), 409, 'conflict', /"proposal" \(2 deals\)/);
    assertRefused(await api.customers.UpdateSalesPipeline({ id: pipeline.id, data: { stages: [won, lost] } }), 409, 'conflict', /"lead" \(1 deal\), "proposal" \(2 deals\)/);
    assertRefused(await api.customers.UpdateSalesPipeline({ id: pipeline.id, unset: ['stages'] }), 409, 'conflict', /Stages/);
    assertRefused(
      await api.customers.UpdateSalesPipeline({ id: pipeline.id, data: { stages: [lead, { ...won, kind: 'open', probability: 90 }, { ...proposal, kind: 'won', probability: 100 }, lost] } }),
      409,
      'conflict',
      /"proposal" \(2 deals\)/,
    );
    assertRefused(await api.customers.UpsertSalesPipeline({ data: { name: pipeline.data.name, stages: [lead, won, lost] } }), 409, 'conflict', /proposal/);
    assertRefused(await api.customers.DeleteSalesPipeline({ id: pipeline.id }), 409, 'conflict', /3 deals are in this pipeline/);
    assertRefused(await api.customers.DeleteCompany({ id: company.id }), 409, 'conflict', /2 deals refer to this company/);
    // Nothing was written: the records, their stage rows, the events.
    assert.deepEqual((await api.customers.GetSalesPipeline({ id: pipeline.id })).data!.item, before.pipeline);
    assert.deepEqual((await api.customers.GetCompany({ id: company.id })).data!.item, before.company);
    assert.deepEqual(await eventsOf(svc(), ws.workspace_id), events);
    const stageRows = await svc().db.sql.all<{ stage_id: string }>('SELECT stage_id FROM sales_pipeline_stages WHERE pipeline_id = ? ORDER BY stage_id', [pipeline.id]);
    assert.deepEqual(stageRows.map((r) => r.stage_id), ['lead', 'lost', 'proposal', 'won']);
    // The database refuses the same by itself (foreign keys).
    await assert.rejects(svc().db.sql.run('DELETE FROM sales_pipeline_stages WHERE pipeline_id = ? AND stage_id = ?', [pipeline.id, 'proposal']));
    await assert.rejects(svc().db.sql.run('DELETE FROM companies WHERE id = ?', [company.id]));

    // Free stages change freely: rename, reorder, re-weight, add, and remove a stage no deal is in.
    const changed = await api.customers.UpdateSalesPipeline({
      id: pipeline.id,
      data: { stages: [{ ...proposal, label: 'Proposal', probability: 50 }, lead, { id: 'demo', label: 'Demo', kind: 'open' }, won, lost] },
    });
    assert.equal(changed.response.status, 200, JSON.stringify(changed.error));
    assert.deepEqual((await api.customers.GetDeal({ id: d1.id })).data!.item.data.weighted_amount, { amount: '500.00', currency: 'EUR' });
    assert.equal((await api.customers.UpdateSalesPipeline({ id: pipeline.id, data: { stages: [proposal, lead, won, lost] } })).response.status, 200);

    // Once the deals are gone (or moved), the same requests succeed.
    await api.customers.UpdateDeal({ id: d1.id, unset: ['company_id'] });
    assertRefused(await api.customers.DeleteCompany({ id: company.id }), 409, 'conflict', /1 deal refers to this company/);
    await ada.customers.DeleteDeal({ id: d3.id });
    assert.deepEqual((await api.customers.DeleteCompany({ id: company.id })).data, { id: company.id, deleted: true });
    await api.customers.UpdateDeal({ id: d1.id, data: { stage_id: 'lead' } });
    assertRefused(await api.customers.UpdateSalesPipeline({ id: pipeline.id, data: { stages: [lead, won, lost] } }), 409, 'conflict', /"proposal" \(1 deal\)/);
    await api.customers.DeleteDeal({ id: d2.id });
    assert.equal((await api.customers.UpdateSalesPipeline({ id: pipeline.id, data: { stages: [lead, won, lost] } })).response.status, 200);
    assertRefused(await api.customers.DeleteSalesPipeline({ id: pipeline.id }), 409, 'conflict', /1 deal is in this pipeline/);
    await api.customers.DeleteDeal({ id: d1.id });
    assert.deepEqual((await api.customers.DeleteSalesPipeline({ id: pipeline.id })).data, { id: pipeline.id, deleted: true });
    assert.deepEqual(await svc().db.sql.all('SELECT * FROM sales_pipeline_stages WHERE pipeline_id = ?', [pipeline.id]), []);
  });

  it('never leaves a deal in a removed stage when deal writes race a stage removal', async () => {
    const { api, pipeline } = await salesWorkspace(svc());
    const [lead, , won, lost] = stages.basic as unknown as [Stage, Stage, Stage, Stage];
    const results = await Promise.all([
      ...Array.from({ length: 6 }, (_, i) => api.customers.CreateDeal({ ...createDeal(pipeline.id, 'proposal'), data: { ...createDeal(pipeline.id, 'proposal').data, name: `Race ${i}` } })),
      api.customers.UpdateSalesPipeline({ id: pipeline.id, data: { stages: [lead, won, lost] } }),
      ...Array.from({ length: 6 }, (_, i) => api.customers.CreateDeal({ ...createDeal(pipeline.id, 'proposal'), data: { ...createDeal(pipeline.id, 'proposal').data, name: `Late ${i}` } })),
    ]);
    for (const r of results) assert.ok([200, 400, 409].includes(r.response.status), `${r.response.status} ${JSON.stringify(r.error)}`);
    const current = (await api.customers.GetSalesPipeline({ id: pipeline.id })).data!.item;
    const stageIds = new Set((current.data.stages ?? []).map((s) => s.id));
    const all = (await api.customers.ListDeals({ limit: 100 })).data!.items;
    assert.ok(all.every((d) => stageIds.has(d.data.stage_id)), 'a deal sits in a stage its pipeline no longer has');
    const removed = results[6]!.response.status === 200;
    assert.equal(stageIds.has('proposal'), !removed);
    if (removed) assert.equal(all.filter((d) => d.data.stage_id === 'proposal').length, 0);
  });

  it('lets members write deals and companies but not pipelines, and keeps private deals to their owner', async () => {
    const { ws, api, pipeline, company } = await salesWorkspace(svc());
    const ada = svc().client(ws.keys.sales!.secret, ws.members.ada);
    const bob = svc().client(ws.keys.sales!.secret, ws.members.bob);
    const workspace = api;
    // Members read pipelines but may not write them (x-service-member-roles).
    assert.equal((await ada.customers.GetSalesPipeline({ id: pipeline.id })).response.status, 200);
    assertRefused(await ada.customers.UpdateSalesPipeline({ id: pipeline.id, data: { name: 'Mine now' } }), 403, 'forbidden', /core:SalesPipeline/);
    assertRefused(await ada.customers.CreateSalesPipeline({ data: { name: 'Shared by a member' } }), 403, 'forbidden');
    assertRefused(await ada.customers.DeleteSalesPipeline({ id: pipeline.id }), 403, 'forbidden');
    assert.equal((await bob.customers.UpdateSalesPipeline({ id: pipeline.id, data: { name: 'Admin edit' } })).response.status, 200);
    // ...and write shared deals.
    const shared = await ada.customers.CreateDeal(createDeal(pipeline.id, 'lead', { company_id: company.id }));
    assert.equal(shared.response.status, 200, JSON.stringify(shared.error));
    assert.equal(shared.data!.item.created_by, ws.members.ada);
    assert.equal((await ada.customers.UpdateDeal({ id: shared.data!.item.id, data: { stage_id: 'won' } })).response.status, 200);
    const mine = (await ada.customers.CreateDeal({ ...createDeal(pipeline.id, 'lead'), private: true })).data!.item;
    assert.equal(mine.private, true);
    assert.deepEqual((await ada.customers.ListDeals({})).data!.items.map((d) => d.id).sort(), [shared.data!.item.id, mine.id].sort());
    for (const other of [bob, workspace]) {
      assert.deepEqual((await other.customers.ListDeals({})).data!.items.map((d) => d.id), [shared.data!.item.id]);
      assertRefused(await other.customers.GetDeal({ id: mine.id }), 404, 'not_found');
      assertRefused(await other.customers.UpdateDeal({ id: mine.id, data: { name: 'x' } }), 404, 'not_found');
      assert.deepEqual((await other.customers.DeleteDeal({ id: mine.id })).data, { id: mine.id, deleted: false });
    }
    assertRefused(await workspace.customers.CreateDeal({ ...createDeal(pipeline.id), private: true }), 400, 'invalid_input', /Service-Act-As/);
    // The key's own grants come first: ci has customers.* but no access on core:Deal.
    assertRefused(await svc().client(ws.keys.ci!.secret).customers.CreateDeal(createDeal(pipeline.id)), 403, 'forbidden', /core:Deal/);
    assert.deepEqual((await ada.customers.DeleteDeal({ id: shared.data!.item.id })).data, { id: shared.data!.item.id, deleted: true });
  });

  it('refuses a write whose expected values no longer match, with 409 and no write or event', async () => {
    const { ws, api, pipeline } = await salesWorkspace(svc());
    const deal = (await api.customers.CreateDeal(createDeal(pipeline.id, 'proposal', { close_date: '2027-01-31' }))).data!.item;
    const events = await eventsOf(svc(), ws.workspace_id);
    const cases: Array<NonNullable<RequestBody<'customers.UpdateDeal'>['expected']>> = [
      { stage_id: 'lead' },
      { amount: { amount: '999', currency: 'EUR' } },
      { amount: { amount: '1000', currency: 'USD' } },
      { amount: { $absent: true } },
      { company_id: 'co_x' },
      { close_date: '2027-02-01' },
      { name: 'Fleet renewal', close_date: { $absent: true } },
    ];
    for (const expected of cases) {
      assertRefused(await api.customers.UpdateDeal({ id: deal.id, data: { stage_id: 'won' }, expected }), 409, 'conflict', /expected\./);
      assertRefused(await api.customers.DeleteDeal({ id: deal.id, expected }), 409, 'conflict');
    }
    assert.deepEqual((await api.customers.GetDeal({ id: deal.id })).data!.item, deal);
    assert.deepEqual(await eventsOf(svc(), ws.workspace_id), events);
    // Money in expected compares in the stored form.
    const ok = await api.customers.UpdateDeal({ id: deal.id, data: { stage_id: 'won' }, expected: { amount: { amount: '1000.0', currency: 'EUR' }, company_id: { $absent: true } } });
    assert.equal(ok.response.status, 200, JSON.stringify(ok.error));
    // An update that changes nothing writes nothing.
    svc().clock.advance(100);
    const same = await api.customers.UpdateDeal({ id: deal.id, data: { stage_id: 'won', amount: { amount: '1000', currency: 'EUR' } } });
    assert.equal(same.data!.item.updated_at, ok.data!.item.updated_at);
    assert.equal(same.data!.item.data.closed_at, ok.data!.item.data.closed_at);
    assert.equal((await eventsOf(svc(), ws.workspace_id)).length, events.length + 1);
  });

  it('lists with pipeline and company filters, cursors bound to them, and updated_at windows', async () => {
    const { ws, api, pipeline, company } = await salesWorkspace(svc());
    const other = (await api.customers.CreateSalesPipeline({ data: { name: 'Other', stages: stages.basic } })).data!.item;
    const t0 = svc().clock.now();
    const inPipeline: string[] = [];
    for (let i = 0; i < 5; i++) {
      inPipeline.push((await api.customers.CreateDeal(createDeal(pipeline.id, 'lead', i % 2 ? { company_id: company.id } : {}))).data!.item.id);
      await api.customers.CreateDeal(createDeal(other.id, 'lead'));
      svc().clock.advance(10);
    }
    const seen: string[] = [];
    let cursor: string | undefined;
    for (;;) {
      const page = (await api.customers.ListDeals({ limit: 2, pipeline_id: pipeline.id, ...(cursor ? { cursor } : {}) })).data!;
      assert.ok(page.items.every((d) => d.data.pipeline_id === pipeline.id));
      seen.push(...page.items.map((d) => d.id));
      if (!page.has_more) break;
      cursor = page.next_cursor!;
    }
    assert.deepEqual(seen, inPipeline);
    assert.equal((await api.customers.ListDeals({ company_id: company.id })).data!.items.length, 2);
    assert.equal((await api.customers.ListDeals({ company_id: company.id, pipeline_id: other.id })).data!.items.length, 0);
    assert.equal((await api.customers.ListDeals({ limit: 100 })).data!.items.length, 10);
    assert.equal((await api.customers.ListDeals({ updated_since: t0 + 10, updated_before: t0 + 30 })).data!.items.length, 4);
    const first = (await api.customers.ListDeals({ limit: 1, pipeline_id: pipeline.id })).data!;
    assertRefused(await api.customers.ListDeals({ limit: 1, cursor: first.next_cursor! }), 400, 'invalid_input', /filters/);
    assertRefused(await api.customers.ListDeals({ limit: 1, cursor: first.next_cursor!, pipeline_id: other.id }), 400, 'invalid_input');
    assert.equal((await api.customers.ListDeals({ limit: 1, cursor: first.next_cursor!, pipeline_id: pipeline.id })).response.status, 200);
    assertRefused(await svc().client(ws.keys.sales!.secret, ws.members.ada).customers.ListDeals({ limit: 1, cursor: first.next_cursor!, pipeline_id: pipeline.id }), 400, 'invalid_input');
  });
});

forEachDatabase('deal references and key grants', (svc) => {
  it('treats a pipeline or company the key has no read grant on as not there (no stages or probabilities leak)', async () => {
    const spec = acme();
    spec.keys = {
      ...spec.keys,
      dealsOnly: { name: 'Deals only', operations: ['customers.*'], resources: { 'core:Deal': ['read', 'write'] } },
    };
    const ws = await svc().apply(spec);
    const sales = svc().client(ws.keys.sales!.secret);
    const pipeline = (await sales.customers.CreateSalesPipeline({ data: { name: 'New business', stages: stages.basic } })).data!.item;
    const company = (await sales.customers.CreateCompany(createCompany('Globex', 'globex.com'))).data!.item;
    const narrow = svc().client(ws.keys.dealsOnly!.secret);
    assert.equal((await narrow.customers.GetSalesPipeline({ id: pipeline.id })).response.status, 403);
    const before = await eventsOf(svc(), ws.workspace_id);
    const noPipeline = await narrow.customers.CreateDeal(createDeal(pipeline.id, 'nope'));
    assert.equal(noPipeline.response.status, 400);
    assert.equal(noPipeline.error!.message, `data.pipeline_id: no sales pipeline ${pipeline.id} is visible to this credential.`);
    const withStage = await narrow.customers.CreateDeal(createDeal(pipeline.id, 'proposal'));
    assert.equal(withStage.response.status, 400);
    assert.doesNotMatch(withStage.error!.message, /stages|proposal/);
    assert.deepEqual(await eventsOf(svc(), ws.workspace_id), before, 'nothing written');
    // With the grant on pipelines but not companies, the company is not there either.
    const spec2 = acme();
    spec2.keys = { ...spec2.keys, noCompanies: { name: 'No companies', operations: ['customers.*'], resources: { 'core:Deal': ['read', 'write'], 'core:SalesPipeline': ['read'] } } };
    const ws2 = await svc().apply(spec2);
    const sales2 = svc().client(ws2.keys.sales!.secret);
    const p2 = (await sales2.customers.CreateSalesPipeline({ data: { name: 'New business', stages: stages.basic } })).data!.item;
    const c2 = (await sales2.customers.CreateCompany(createCompany('Initech', 'initech.com'))).data!.item;
    const refused = await svc().client(ws2.keys.noCompanies!.secret).customers.CreateDeal(createDeal(p2.id, 'proposal', { company_id: c2.id }));
    assert.equal(refused.response.status, 400);
    assert.equal(refused.error!.message, `data.company_id: no company ${c2.id} is visible to this credential.`);
  });
});
