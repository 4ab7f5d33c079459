import assert from 'node:assert/strict';
import { RUN_LEASE_MS } from '../../handlers/automation/engine.ts';
import { claimRuns } from '../../handlers/automation/queries.ts';
import { AdminError, type ApplyResult, type WorkspaceSpec } from '../../server/admin.ts';
import { setEnabled } from '../../handlers/automation/admin.ts';
import { acme, createDeal, stages } from '../support/fixtures.ts';
import { assertRefused } from '../support/refusals.ts';
import { settleAutomation } from '../support/automation.ts';
import { forEachDatabase, startTestService, type TestService } from '../support/service.ts';

type Applied = ApplyResult & { automations: Record<string, string> };

const notifyOnDeal = (name: string, event: 'created' | 'updated' = 'created') => ({
  name,
  trigger: { resource_type: 'core:Deal', event },
  actions: [{ type: 'notify', to: 'owners_and_admins', title: `${name}: {{record.data.name}}` }],
});

async function workspace(svc: TestService, automations: Record<string, unknown>, apps = true) {
  const spec = acme() as WorkspaceSpec & { automations?: Record<string, unknown> };
  spec.keys!.auto = {
    name: 'Automation admin',
    operations: ['automation.*', 'customers.*'],
    resources: { 'core:SalesPipeline': ['read', 'write'], 'core:Company': ['read', 'write'], 'core:Deal': ['read', 'write'] },
    delegation: 'all',
  };
  spec.keys!.viewer = { name: 'Rules reader', operations: ['automation.ListRules', 'automation.GetRule'] };
  if (!apps) delete spec.apps;
  spec.automations = automations;
  const ws = (await svc.apply(spec)) as Applied;
  const api = svc.client(ws.keys.auto!.secret);
  const pipeline = (await api.customers.CreateSalesPipeline({ data: { name: 'New business', stages: stages.basic } })).data!.item;
  return { ws, api, pipeline };
}

const noticeCount = async (svc: TestService, memberId: string) =>
  Number((await svc.db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM inbox_notifications WHERE member_id = ?`, [memberId]))!.n);

forEachDatabase('automation operations', (svc) => {
  it('lists built-in and authored rules in (app_id, rule_id) order, filtered by app and enabled, paged by a cursor bound to the filters', async () => {
    const { ws, api } = await workspace(svc(), {
      a: notifyOnDeal('A'),
      b: { ...notifyOnDeal('B'), enabled: false },
      t: { ...notifyOnDeal('Ticket app rule'), app: 'tickets' },
    });
    const all = (await api.automation.ListRules({})).data!;
    const expected = [
      [ws.apps.tickets!, ws.automations.t!],
      ['core', 'builtin.deal-closed'],
      ...[ws.automations.a!, ws.automations.b!].sort().map((id) => ['core', id]),
    ];
    assert.deepEqual(all.items.map((r) => [r.app_id, r.rule_id]), expected);
    assert.equal(all.has_more, false);
    assert.equal(all.next_cursor, null);
    const builtIn = all.items.find((r) => r.built_in)!;
    assert.deepEqual([builtIn.can_manage, builtIn.enabled], [false, true]);
    assert.ok(all.items.filter((r) => !r.built_in).every((r) => r.can_manage));
    assert.deepEqual((await api.automation.ListRules({ enabled: false })).data!.items.map((r) => r.rule_id), [ws.automations.b!]);
    assert.deepEqual((await api.automation.ListRules({ app_id: ws.apps.tickets! })).data!.items.map((r) => r.name), ['Ticket app rule']);
    // Pages of one: the same four, in order.
    const seen: string[] = [];
    let cursor: string | undefined;
    for (;;) {
      const page = (await api.automation.ListRules({ limit: 1, ...(cursor ? { cursor } : {}) })).data!;
      seen.push(...page.items.map((r) => r.rule_id));
      if (!page.has_more) break;
      cursor = page.next_cursor!;
    }
    assert.deepEqual(seen, expected.map(([, id]) => id));
    const first = (await api.automation.ListRules({ limit: 1 })).data!;
    assertRefused(await api.automation.ListRules({ limit: 1, cursor: first.next_cursor!, enabled: true }), 400, 'invalid_input', /other filters/);
    // A member who is not an owner or admin reads rules but may not manage them.
    const asAda = svc().client(ws.keys.auto!.secret, ws.members.ada!);
    assert.ok((await asAda.automation.ListRules({})).data!.items.every((r) => !r.can_manage));
  });

  it('reads a rule with its runs newest first, paged; an unknown rule is 404', async () => {
    const { ws, api, pipeline } = await workspace(svc(), { a: notifyOnDeal('A') });
    for (let i = 0; i < 5; i++) {
      await api.customers.CreateDeal(createDeal(pipeline.id, 'lead', { name: `Deal ${i}` }));
      svc().clock.advance(1000);
      await settleAutomation(svc());
    }
    const got = (await api.automation.GetRule({ rule_id: ws.automations.a!, app_id: 'core', runs_limit: 2 })).data!;
    assert.equal(got.item.name, 'A');
    assert.deepEqual(got.item.trigger, { resource_type: 'core:Deal', event: 'created' });
    const runs = [...got.runs];
    let next = got.runs_next_cursor;
    while (next) {
      const page = (await api.automation.GetRule({ rule_id: ws.automations.a!, app_id: 'core', runs_limit: 2, runs_cursor: next })).data!;
      runs.push(...page.runs);
      next = page.runs_has_more ? page.runs_next_cursor : null;
    }
    assert.equal(runs.length, 5);
    const times = runs.map((r) => r.queued_at);
    assert.deepEqual(times, [...times].sort((a, b) => b - a), 'newest first');
    assert.ok(runs.every((r) => r.status === 'succeeded'));
    assertRefused(await api.automation.GetRule({ rule_id: 'ru_nope' }), 404, 'not_found');
    assertRefused(await api.automation.GetRule({ rule_id: ws.automations.a!, app_id: ws.apps.tickets! }), 404, 'not_found');
    // The read-only key reads; it may not pause (no grant).
    const viewer = svc().client(ws.keys.viewer!.secret);
    assert.equal((await viewer.automation.GetRule({ rule_id: ws.automations.a! })).response.status, 200);
    assertRefused(await viewer.automation.UpdateRule({ rule_id: ws.automations.a!, enabled: false }), 403, 'forbidden');
  });

  it('pauses with UpdateRule only: idempotent, true and other fields refused, built-ins and plain members refused', async () => {
    const { ws, api } = await workspace(svc(), { a: notifyOnDeal('A') });
    const id = ws.automations.a!;
    svc().clock.advance(5000);
    const paused = await api.automation.UpdateRule({ rule_id: id, enabled: false });
    assert.equal(paused.response.status, 200, JSON.stringify(paused.error));
    assert.equal(paused.data!.item.enabled, false);
    assert.equal(paused.data!.item.updated_at, svc().clock.now());
    const again = await api.automation.UpdateRule({ rule_id: id, app_id: 'core', enabled: false });
    assert.equal(again.response.status, 200);
    assert.equal(again.data!.item.enabled, false);
    const resume = await svc().post('automation.UpdateRule', { rule_id: id, enabled: true }, { Authorization: `Bearer ${ws.keys.auto!.secret}`, 'Idempotency-Key': 'k2' });
    assert.deepEqual([resume.status, resume.body.error], [400, 'invalid_input']);
    assert.match(resume.body.message, /body\.enabled must be false: `false` pauses the rule; `true` is refused \(resume it on the settings page\)/);
    const rename = await svc().post('automation.UpdateRule', { rule_id: id, enabled: false, name: 'x' }, { Authorization: `Bearer ${ws.keys.auto!.secret}`, 'Idempotency-Key': 'k3' });
    assert.equal(rename.status, 400);
    assert.match(rename.body.message, /name/);
    assertRefused(await api.automation.UpdateRule({ rule_id: 'builtin.deal-closed', enabled: false }), 403, 'forbidden', /built in/);
    assertRefused(await api.automation.UpdateRule({ rule_id: 'ru_nope', enabled: false }), 404, 'not_found');
    const asAda = svc().client(ws.keys.auto!.secret, ws.members.ada!);
    assertRefused(await asAda.automation.UpdateRule({ rule_id: id, enabled: false }), 403, 'forbidden', /owners and admins/);
    const asBob = svc().client(ws.keys.auto!.secret, ws.members.bob!);
    assert.equal((await asBob.automation.UpdateRule({ rule_id: id, enabled: false })).response.status, 200);
  });

  it('pausing stops future trigger handling; changes made while paused never run it, even after resuming', async () => {
    const { ws, api, pipeline } = await workspace(svc(), { a: notifyOnDeal('A') });
    const id = ws.automations.a!;
    const olga = ws.members.olga!;
    await api.customers.CreateDeal(createDeal(pipeline.id, 'lead', { name: 'before pause' }));
    await settleAutomation(svc());
    assert.equal(await noticeCount(svc(), olga), 1);
    svc().clock.advance(1000);
    await api.automation.UpdateRule({ rule_id: id, enabled: false });
    svc().clock.advance(1000);
    await api.customers.CreateDeal(createDeal(pipeline.id, 'lead', { name: 'while paused (handled while paused)' }));
    await settleAutomation(svc());
    // Committed while paused, but read by the engine only after the resume: still no run.
    await api.customers.CreateDeal(createDeal(pipeline.id, 'lead', { name: 'while paused (handled after resume)' }));
    svc().clock.advance(1000);
    const resumed = await setEnabled(svc().db, svc().clock, ws.workspace_id, id, true, 'operator');
    assert.deepEqual(resumed, { rule_id: id, app_id: 'core', enabled: true, changed: true });
    await settleAutomation(svc());
    assert.equal(await noticeCount(svc(), olga), 1, 'no run for changes made while paused');
    svc().clock.advance(1000);
    await api.customers.CreateDeal(createDeal(pipeline.id, 'lead', { name: 'after resume' }));
    await settleAutomation(svc());
    assert.equal(await noticeCount(svc(), olga), 2);
    const runs = (await api.automation.GetRule({ rule_id: id })).data!.runs;
    assert.equal(runs.length, 2);
  });

  it('deletes with DeleteRule: act-as required, owners and admins only, built-ins refused, absent is deleted:false, queued runs stop', async () => {
    const { ws, api, pipeline } = await workspace(svc(), { a: notifyOnDeal('A'), b: notifyOnDeal('B') });
    const asOlga = svc().client(ws.keys.auto!.secret, ws.members.olga!);
    const asAda = svc().client(ws.keys.auto!.secret, ws.members.ada!);
    const noMember = await svc().post('automation.DeleteRule', { rule_id: ws.automations.a! }, { Authorization: `Bearer ${ws.keys.auto!.secret}`, 'Idempotency-Key': 'd1' });
    assert.equal(noMember.status, 400);
    assert.match(noMember.body.message, /service-act-as/i);
    assertRefused(await asAda.automation.DeleteRule({ rule_id: ws.automations.a! }), 403, 'forbidden', /owners and admins/);
    assertRefused(await asOlga.automation.DeleteRule({ rule_id: 'builtin.deal-closed', app_id: 'core' }), 403, 'forbidden', /built in/);
    // A queued run of a rule deleted before its run does nothing.
    await api.customers.CreateDeal(createDeal(pipeline.id, 'lead'));
    await settleAutomation(svc(), { jobs: false });
    const deleted = await asOlga.automation.DeleteRule({ rule_id: ws.automations.a!, app_id: 'core' });
    assert.deepEqual(deleted.data, { rule_id: ws.automations.a!, app_id: 'core', deleted: true });
    await svc().workers.runOnce('automation.runs');
    const titles = await svc().db.sql.all<{ title: string }>(`SELECT title FROM inbox_notifications WHERE member_id = ? ORDER BY title`, [ws.members.olga!]);
    assert.deepEqual(titles.map((t) => t.title), ['B: Fleet renewal'], 'the deleted rule did not run');
    assert.deepEqual((await asOlga.automation.DeleteRule({ rule_id: ws.automations.a! })).data, { rule_id: ws.automations.a!, app_id: 'core', deleted: false });
    assert.deepEqual((await asOlga.automation.DeleteRule({ rule_id: 'ru_never' })).data, { rule_id: 'ru_never', app_id: 'core', deleted: false });
    assertRefused(await api.automation.GetRule({ rule_id: ws.automations.a! }), 404, 'not_found');
    // The same key and body replays the stored answer.
    const key = { idempotencyKey: 'same-delete' };
    const b1 = await asOlga.automation.DeleteRule({ rule_id: ws.automations.b! }, key);
    const b2 = await asOlga.automation.DeleteRule({ rule_id: ws.automations.b! }, key);
    assert.deepEqual([b1.data!.deleted, b2.data!.deleted], [true, true]);
    assert.equal(b2.response.headers.get('idempotency-replayed'), 'true');
  });

  it('lists the automation operations in discovery for a key granted them', async () => {
    const { ws } = await workspace(svc(), {});
    const ops = (await svc().client(ws.keys.auto!.secret).listOperations()).data!;
    const ids = (ops as { items: Array<{ id: string }> }).items.map((o) => o.id);
    for (const id of ['automation.ListRules', 'automation.GetRule', 'automation.UpdateRule', 'automation.DeleteRule']) assert.ok(ids.includes(id), id);
  });

  it('refuses badly authored rules in the workspace file, naming the place and writing nothing', async () => {
    const bad: Array<[unknown, RegExp]> = [
      [{ name: 'x', trigger: { resource_type: 'core:Nope', event: 'created' }, actions: [{ type: 'notify', to: 'actor' }] }, /resource_type: no record operations/],
      [{ name: 'x', trigger: { resource_type: 'core:Deal', event: 'created', fields: ['name'] }, actions: [{ type: 'notify', to: 'actor' }] }, /fields: only for event updated/],
      [{ name: 'x', trigger: { resource_type: 'core:Deal', event: 'deleted' }, actions: [{ type: 'set_fields', data: { name: 'y' } }] }, /deleted record has no fields/],
      [{ name: 'x', trigger: { resource_type: 'core:Deal', event: 'created', conditions: [{ field: 'name', op: 'in', value: 'a' }] }, actions: [{ type: 'notify', to: 'actor' }] }, /needs an array value/],
      [{ name: 'x', trigger: { resource_type: 'core:Deal', event: 'created' }, actions: [{ type: 'notify', to: 'member', member_id: 'nobody' }] }, /no member "nobody"/],
      [{ name: 'x', trigger: { resource_type: 'core:Deal', event: 'whenever' }, actions: [{ type: 'notify', to: 'actor' }] }, /trigger\/event/],
      [{ name: 'x', app: 'nope', trigger: { resource_type: 'core:Deal', event: 'created' }, actions: [{ type: 'notify', to: 'actor' }] }, /no app "nope"/],
      [{ name: 'x', trigger: { resource_type: 'core:Deal', event: 'created' }, actions: [{ type: 'create_record', resource_type: 'core:Deal', data: {}, to: 'actor' }] }, /to is not a field of create_record/],
    ];
    const before = Number((await svc().db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM workspaces`))!.n);
    for (const [rule, message] of bad) {
      await assert.rejects(svc().apply({ ...acme(), automations: { broken: rule } } as never), (err: unknown) => err instanceof AdminError && message.test(err.message), JSON.stringify(rule));
    }
    assert.equal(Number((await svc().db.sql.one<{ n: number }>(`SELECT COUNT(*) AS n FROM workspaces`))!.n), before);
  });

  it('a run survives its worker dying mid-run: the next worker completes it once', async () => {
    const { ws, api, pipeline } = await workspace(svc(), {
      follow: { name: 'follow', trigger: { resource_type: 'core:Deal', event: 'created' }, actions: [{ type: 'create_record', resource_type: 'core:Company', data: { name: 'For {{record.data.name}}' } }, { type: 'notify', to: 'owners_and_admins', title: 't' }] },
    });
    await api.customers.CreateDeal(createDeal(pipeline.id, 'lead', { name: 'Crash' }));
    await settleAutomation(svc(), { jobs: false });
    // A worker claims the run and dies before its transaction commits: the run stays running under its lease.
    const now = svc().clock.now();
    const claimed = await claimRuns(svc().db.sql, { owner: 'dead-worker', now, ms: RUN_LEASE_MS }, 10);
    assert.equal(claimed.length, 1);
    assert.equal(claimed[0]!.status, 'running');
    assert.equal(await svc().workers.runOnce('automation.runs'), 0, 'the run is held by the dead worker until its lease ends');
    svc().clock.advance(RUN_LEASE_MS + 1);
    assert.equal(await svc().workers.runOnce('automation.runs'), 1);
    const [run] = (await api.automation.GetRule({ rule_id: ws.automations.follow! })).data!.runs;
    assert.equal(run!.status, 'succeeded');
    assert.equal(run!.attempts, 2);
    const companies = (await api.customers.ListCompanies({})).data!.items.filter((c) => c.data.name === 'For Crash');
    assert.equal(companies.length, 1, 'the effect happened once');
    assert.equal(await noticeCount(svc(), ws.members.olga!), 1);
  });

  it('two processes on one database start one run per (rule, event) and notify once (PostgreSQL)', async function () {
    // SQLite serves one process (a second writer waits on the file lock); several processes share PostgreSQL.
    if (svc().db.dialect !== 'pg') this.skip();
    const { ws, api, pipeline } = await workspace(svc(), { a: notifyOnDeal('A'), b: notifyOnDeal('B') });
    const second = await startTestService(svc().databaseUrl);
    try {
      for (let i = 0; i < 10; i++) await api.customers.CreateDeal(createDeal(pipeline.id, 'lead', { name: `Deal ${i}` }));
      second.clock.set(svc().clock.now());
      for (let round = 0; round < 5; round++) {
        await Promise.all([svc().outbox.runOnce(), second.outbox.runOnce()]);
        await Promise.all([svc().workers.runOnce('automation.runs'), second.workers.runOnce('automation.runs')]);
      }
      await settleAutomation(svc());
      const runs = await svc().db.sql.all<{ rule_id: string; event_id: string; status: string }>(`SELECT rule_id, event_id, status FROM automation_runs WHERE workspace_id = ?`, [ws.workspace_id]);
      assert.equal(runs.length, 20);
      assert.equal(new Set(runs.map((r) => `${r.rule_id}/${r.event_id}`)).size, 20);
      assert.ok(runs.every((r) => r.status === 'succeeded'), JSON.stringify(runs.filter((r) => r.status !== 'succeeded')));
      assert.equal(await noticeCount(svc(), ws.members.olga!), 20);
    } finally {
      await second.close({ keepData: true });
    }
  });
});
