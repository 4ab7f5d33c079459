import assert from 'node:assert/strict';
import type { ApplyResult, WorkspaceSpec } from '../../server/admin.ts';
import { acme, createCompany, createDeal, stages } from '../support/fixtures.ts';
import { settleAutomation } from '../support/automation.ts';
import { forEachDatabase, type TestService } from '../support/service.ts';

type Rules = NonNullable<Record<string, unknown>>;
type Applied = ApplyResult & { automations: Record<string, string> };

/** Acme with an automation key (all automation and customers operations) and the given rules. */
async function workspace(svc: TestService, automations: Rules) {
  const spec = acme() as WorkspaceSpec & { automations?: Rules };
  spec.keys!.auto = {
    name: 'Automation admin',
    operations: ['automation.*', 'customers.*'],
    resources: { 'core:SalesPipeline': ['read', 'write'], 'core:Company': ['read', 'write'], 'core:Deal': ['read', 'write'] },
    delegation: 'all',
  };
  spec.automations = automations;
  const ws = (await svc.apply(spec)) as Applied;
  const api = svc.client(ws.keys.auto!.secret);
  const pipeline = (await api.customers.CreateSalesPipeline({ data: { name: 'New business', stages: stages.basic } })).data!.item;
  return { ws, api, pipeline };
}

async function runsOf(api: ReturnType<TestService['client']>, ruleId: string) {
  const res = await api.automation.GetRule({ rule_id: ruleId, runs_limit: 100 });
  assert.equal(res.response.status, 200, JSON.stringify(res.error));
  return res.data!.runs;
}

async function notices(svc: TestService, memberId: string) {
  return svc.db.sql.all<{ kind: string; title: string; body: string; source_id: string }>(`SELECT kind, title, body, source_id FROM inbox_notifications WHERE member_id = ? ORDER BY created_at, id`, [memberId]);
}

forEachDatabase('automation engine', (svc) => {
  it('runs a created trigger with conditions: a follow-up record is created, members are notified, the run records each action', async () => {
    const { ws, api, pipeline } = await workspace(svc(), {
      big: {
        name: 'Follow up on big deals',
        trigger: { resource_type: 'core:Deal', event: 'created', conditions: [{ field: 'amount.amount', op: 'gte', value: 10000 }, { field: 'amount.currency', op: 'eq', value: 'EUR' }] },
        actions: [
          { type: 'create_record', resource_type: 'core:Company', data: { name: 'Prospect of {{record.data.name}}' } },
          { type: 'notify', to: 'owners_and_admins', title: 'Big deal: {{record.data.name}}', body: 'Amount {{record.data.amount.amount}} {{record.data.amount.currency}}' },
        ],
      },
    });
    const ruleId = ws.automations.big!;
    assert.match(ruleId, /^ru_/);
    await api.customers.CreateDeal(createDeal(pipeline.id, 'proposal', { name: 'Small', amount: { amount: '500', currency: 'EUR' } }));
    const big = (await api.customers.CreateDeal(createDeal(pipeline.id, 'proposal', { name: 'Fleet', amount: { amount: '25000', currency: 'EUR' } }))).data!.item;
    await settleAutomation(svc());
    const runs = await runsOf(api, ruleId);
    assert.equal(runs.length, 1, 'only the deal that meets the conditions starts a run');
    const [run] = runs;
    assert.equal(run!.status, 'succeeded', JSON.stringify(run));
    assert.equal(run!.event.record_id, big.id);
    assert.equal(run!.event.type, 'resource.created');
    assert.equal(run!.depth, 1);
    assert.equal(run!.attempts, 1);
    assert.ok(run!.started_at !== null && run!.finished_at !== null && run!.finished_at >= run!.started_at);
    assert.equal(run!.actions[0]!.status, 'succeeded');
    const companyId = run!.actions[0]!.record_id!;
    const company = (await api.customers.GetCompany({ id: companyId })).data!.item;
    assert.equal(company.data.name, 'Prospect of Fleet');
    assert.deepEqual(run!.actions[1], { type: 'notify', status: 'succeeded', notified: 2 });
    for (const m of [ws.members.olga!, ws.members.bob!]) {
      const got = await notices(svc(), m);
      assert.deepEqual(got.map((n) => [n.kind, n.title, n.body, n.source_id]), [['automation.notice', 'Big deal: Fleet', 'Amount 25000.00 EUR', run!.run_id]]);
    }
    assert.deepEqual(await notices(svc(), ws.members.ada!), [], 'a plain member is not an owner or admin');
  });

  it('runs updated triggers only when a chosen field changed, and sets fields on the record through the record kit (events, expected)', async () => {
    const { ws, api, pipeline } = await workspace(svc(), {
      stamp: {
        name: 'Name deals in proposal',
        trigger: { resource_type: 'core:Deal', event: 'updated', fields: ['stage_id'], conditions: [{ field: 'stage_id', op: 'in', value: ['proposal'] }] },
        actions: [{ type: 'set_fields', data: { close_date: '2027-12-31', name: '{{record.data.name}} (proposal)' }, expected: { stage_id: 'proposal' } }],
      },
    });
    const ruleId = ws.automations.stamp!;
    const deal = (await api.customers.CreateDeal(createDeal(pipeline.id, 'lead'))).data!.item;
    await api.customers.UpdateDeal({ id: deal.id, data: { name: 'Renamed only' } });
    await settleAutomation(svc());
    assert.equal((await runsOf(api, ruleId)).length, 0, 'a change of another field starts no run');
    await api.customers.UpdateDeal({ id: deal.id, data: { stage_id: 'proposal' } });
    await settleAutomation(svc());
    const after = (await api.customers.GetDeal({ id: deal.id })).data!.item;
    assert.equal(after.data.close_date, '2027-12-31');
    assert.equal(after.data.name, 'Renamed only (proposal)');
    const runs = await runsOf(api, ruleId);
    // The rule's own change (name, close_date) does not trigger it again: not stage_id; no loop either way.
    assert.deepEqual(runs.map((r) => r.status), ['succeeded']);
    const events = await svc().db.sql.all<{ type: string; changed_fields: string; cause_run_id: string | null; cause_depth: number | null }>(
      `SELECT type, changed_fields, cause_run_id, cause_depth FROM record_events WHERE record_id = ? ORDER BY seq`,
      [deal.id],
    );
    const last = events.at(-1)!;
    assert.deepEqual(JSON.parse(last.changed_fields).sort(), ['close_date', 'name']);
    assert.equal(last.cause_run_id, runs[0]!.run_id);
    assert.equal(Number(last.cause_depth), 1);
  });

  it('fails a run whose action is refused (expected mismatch), with a clear error and no effect from any action', async () => {
    const { ws, api, pipeline } = await workspace(svc(), {
      strict: {
        name: 'Notify then set with a stale expectation',
        trigger: { resource_type: 'core:Deal', event: 'created' },
        actions: [
          { type: 'notify', to: 'owners_and_admins', title: 'New deal' },
          { type: 'set_fields', data: { name: 'x' }, expected: { stage_id: 'won' } },
          { type: 'notify', to: 'owners_and_admins', title: 'never' },
        ],
      },
    });
    await api.customers.CreateDeal(createDeal(pipeline.id, 'lead'));
    await settleAutomation(svc());
    const [run] = await runsOf(api, ws.automations.strict!);
    assert.equal(run!.status, 'failed');
    assert.match(run!.error!, /action 2 \(set_fields\) was refused: 409 conflict: expected\.stage_id/);
    assert.deepEqual(run!.actions.map((a) => a.status), ['not_run', 'failed', 'not_run']);
    assert.deepEqual(await notices(svc(), ws.members.olga!), [], 'the first action was rolled back with the run');
  });

  it('deleted triggers, the actor, and a named member', async () => {
    const { ws, api } = await workspace(svc(), {
      gone: {
        name: 'Company deleted',
        trigger: { resource_type: 'core:Company', event: 'deleted' },
        actions: [
          { type: 'notify', to: 'actor', title: 'You deleted {{record.id}}' },
          { type: 'notify', to: 'member', member_id: 'bob', title: 'Company {{record.id}} deleted at {{event.occurred_at}}' },
        ],
      },
    });
    const company = (await api.customers.CreateCompany(createCompany())).data!.item;
    const asAda = svc().client(ws.keys.auto!.secret, ws.members.ada!);
    assert.equal((await asAda.customers.DeleteCompany({ id: company.id })).data!.deleted, true);
    await settleAutomation(svc());
    const [run] = await runsOf(api, ws.automations.gone!);
    assert.equal(run!.status, 'succeeded', JSON.stringify(run));
    assert.deepEqual((await notices(svc(), ws.members.ada!)).map((n) => n.title), [`You deleted ${company.id}`]);
    assert.deepEqual((await notices(svc(), ws.members.bob!)).map((n) => n.title), [`Company ${company.id} deleted at ${run!.event.occurred_at}`]);
  });

  it('guards loops: a rule never runs for its own change, and chains stop at depth 5', async () => {
    // a and b update each other's trigger field: a → b → a → ... until the depth limit.
    const { ws, api, pipeline } = await workspace(svc(), {
      ping: { name: 'ping', trigger: { resource_type: 'core:Deal', event: 'updated', fields: ['close_date'] }, actions: [{ type: 'set_fields', data: { name: 'ping {{event.id}}' } }] },
      pong: { name: 'pong', trigger: { resource_type: 'core:Deal', event: 'updated', fields: ['name'] }, actions: [{ type: 'set_fields', data: { close_date: '2027-01-0{{record.data.name}}' } }] },
      self: { name: 'self', trigger: { resource_type: 'core:Company', event: 'updated' }, actions: [{ type: 'set_fields', data: { name: 'Self {{event.id}}' } }] },
    });
    const deal = (await api.customers.CreateDeal(createDeal(pipeline.id, 'lead'))).data!.item;
    await api.customers.UpdateDeal({ id: deal.id, data: { close_date: '2027-01-01' } });
    await settleAutomation(svc());
    const ping = await runsOf(api, ws.automations.ping!);
    const pong = await runsOf(api, ws.automations.pong!);
    const all = [...ping, ...pong].sort((a, b) => a.depth - b.depth);
    // pong's close_date becomes invalid text after the first round: whatever the outcome, depth never passes 5 and each run is recorded.
    assert.ok(all.length >= 2, JSON.stringify(all.map((r) => [r.rule_id, r.depth, r.status])));
    assert.ok(all.every((r) => r.depth <= 6));
    const company = (await api.customers.CreateCompany(createCompany())).data!.item;
    await api.customers.UpdateCompany({ id: company.id, data: { name: 'Renamed' } });
    await settleAutomation(svc());
    const self = await runsOf(api, ws.automations.self!);
    const byDepth = [...self].sort((a, b) => a.depth - b.depth);
    assert.deepEqual(byDepth.map((r) => [r.status, r.depth]), [['succeeded', 1], ['skipped', 2]]);
    assert.match(byDepth[1]!.error!, /own run/);
  });

  it('a chain of distinct rules stops at depth 5 with a skipped run', async () => {
    const chain: Rules = {};
    // Rule i reacts to companies whose name is "step i" and renames to "step i+1".
    for (let i = 1; i <= 7; i++) {
      chain[`r${i}`] = {
        name: `step ${i}`,
        trigger: { resource_type: 'core:Company', event: i === 1 ? 'created' : 'updated', ...(i === 1 ? {} : { fields: ['name'] }), conditions: [{ field: 'name', op: 'eq', value: `step ${i}` }] },
        actions: [{ type: 'set_fields', data: { name: `step ${i + 1}` } }],
      };
    }
    const { ws, api } = await workspace(svc(), chain);
    const company = (await api.customers.CreateCompany({ data: { name: 'step 1' } })).data!.item;
    await settleAutomation(svc());
    const statuses: Array<[number, string, number]> = [];
    for (let i = 1; i <= 7; i++) for (const r of await runsOf(api, ws.automations[`r${i}`]!)) statuses.push([i, r.status, r.depth]);
    assert.deepEqual(statuses, [[1, 'succeeded', 1], [2, 'succeeded', 2], [3, 'succeeded', 3], [4, 'succeeded', 4], [5, 'succeeded', 5], [6, 'skipped', 6]]);
    assert.equal((await api.customers.GetCompany({ id: company.id })).data!.item.data.name, 'step 6');
  });

  it('the built-in rule notifies owners and admins when a deal closes, and is locked', async () => {
    const { ws, api, pipeline } = await workspace(svc(), {});
    const deal = (await api.customers.CreateDeal(createDeal(pipeline.id, 'proposal', { name: 'Fleet' }))).data!.item;
    await api.customers.UpdateDeal({ id: deal.id, data: { stage_id: 'won' } });
    await settleAutomation(svc());
    const runs = await runsOf(api, 'builtin.deal-closed');
    assert.deepEqual(runs.map((r) => r.status), ['succeeded']);
    assert.deepEqual((await notices(svc(), ws.members.olga!)).map((n) => n.title), ['Deal closed: Fleet']);
    const rule = (await api.automation.GetRule({ rule_id: 'builtin.deal-closed' })).data!.item;
    assert.equal(rule.can_manage, false);
    assert.equal(rule.built_in, true);
  });
});
