/**
 * Revocation reaches deliveries (seed 5.6): a subscription delivers with the access of the key that
 * proposed it and the member it acted for, judged when deliveries are made.
 */
import assert from 'node:assert/strict';
import { approveProposal, enableSubscription } from '../../handlers/webhooks/subscriptions.ts';
import { disableMember, replaceKey, revokeKey } from '../../server/admin.ts';
import { createSigninLink } from '../../server/signin.ts';
import { startReceiver } from '../support/receiver.ts';
import { forEachDatabase, type TestService } from '../support/service.ts';
import { deliver, deliveries, hookWorkspace, receiverPolicy, subscribe } from './support.ts';

const receiver = await startReceiver();
after(() => receiver.close());

async function subscriptionRow(svc: TestService, id: string) {
  return (await svc.db.sql.one<{ enabled: unknown; access_key_id: string; access_member_id: string | null; access_lost: string | null; disabled_reason: string | null }>(
    `SELECT enabled, access_key_id, access_member_id, access_lost, disabled_reason FROM webhook_subscriptions WHERE id = ?`,
    [id],
  ))!;
}

/** The subscription's settings page as the workspace's owner sees it (signed in through a one-time link). */
async function settingsPage(svc: TestService, ws: { workspace_id: string; members: Record<string, string> }, id: string): Promise<string> {
  const origin = svc.baseUrl.replace(/\/v1$/, '');
  const link = await createSigninLink(svc.db, svc.clock, { workspaceId: ws.workspace_id, memberId: ws.members.olga!, baseUrl: origin });
  const opened = await fetch(link.url, { redirect: 'manual' });
  const cookie = opened.headers.getSetCookie()[0]!.split(';')[0]!;
  const page = await fetch(`${origin}/settings/webhooks/${id}`, { headers: { Cookie: cookie } });
  assert.equal(page.status, 200);
  return page.text();
}

async function notices(svc: TestService, workspaceId: string) {
  return svc.db.sql.all<{ member_id: string; title: string; body: string; link: string }>(
    `SELECT member_id, title, body, link FROM inbox_notifications WHERE workspace_id = ? AND kind = 'webhooks.access_lost' ORDER BY member_id`,
    [workspaceId],
  );
}

forEachDatabase('webhook access', (svc) => {
  beforeEach(() => {
    receiver.requests.length = 0;
    receiver.answer(() => ({ status: 200 }));
  });

  it('a revoked key stops its subscriptions: nothing new is delivered, the reason is recorded, owners and admins are told, enabling is refused', async () => {
    const { ws, api } = await hookWorkspace(svc());
    const hook = await subscribe(svc(), ws, receiver.url, 'resource.created', ['core:Company']);
    await api.customers.CreateCompany({ data: { name: 'Before', domain: 'before.example' } });
    await deliver(svc());
    assert.equal(receiver.requests.length, 1);
    // Made before the revocation, attempted after it: not delivered either.
    await api.customers.CreateCompany({ data: { name: 'Pending', domain: 'pending.example' } });
    await revokeKey(svc().db, svc().clock, ws.keys.hooks!.id);
    await svc().client(ws.keys.sales!.secret).customers.CreateCompany({ data: { name: 'After', domain: 'after.example' } });
    await deliver(svc());
    assert.equal(receiver.requests.length, 1, 'nothing after the revocation');
    const row = await subscriptionRow(svc(), hook.id);
    assert.equal(Boolean(row.enabled), false);
    assert.equal(row.access_lost, 'key_revoked');
    assert.match(row.disabled_reason!, /access lost: the key "Webhook integration" \(ak_\w+\) that proposed it was revoked/);
    const notSent = (await deliveries(svc(), hook.id)).filter((d) => Number(d.attempts) === 0);
    assert.equal(notSent.length, 2, 'the one made before the revocation and the one after');
    assert.ok(notSent.every((d) => d.status === 'failed'), 'failed without an attempt');
    const told = await notices(svc(), ws.workspace_id);
    assert.deepEqual(told.map((n) => n.member_id).sort(), [ws.members.bob!, ws.members.olga!].sort());
    assert.match(told[0]!.title, /Webhook to 127\.0\.0\.1:\d+ stopped: access lost/);
    assert.equal(told[0]!.link, `/settings/webhooks/${hook.id}`);
    const enabling = await enableSubscription(svc().db, svc().clock, ws.workspace_id, hook.id, svc().config.egress);
    assert.equal(enabling.ok, false);
    assert.match(enabling.error!, /access lost/);
    assert.equal(receiver.requests.length, 1, 'no test delivery either');
    assert.equal((await notices(svc(), ws.workspace_id)).length, 2, 'told once');
    const page = await settingsPage(svc(), ws, hook.id);
    assert.match(page, /data-access-lost/);
    assert.match(page, /access lost: the key &quot;Webhook integration&quot; \(ak_\w+\) that proposed it was revoked/);
  });

  it('a key replaced by a new one hands its subscriptions over: rotating the key never stops its webhooks', async () => {
    const { ws, api } = await hookWorkspace(svc());
    const hook = await subscribe(svc(), ws, receiver.url, 'resource.created', ['core:Company']);
    const first = await replaceKey(svc().db, svc().clock, ws.keys.hooks!.id);
    const second = await replaceKey(svc().db, svc().clock, first.id);
    await revokeKey(svc().db, svc().clock, ws.keys.hooks!.id);
    await revokeKey(svc().db, svc().clock, first.id);
    const rotated = svc().client(second.secret);
    await rotated.customers.CreateCompany({ data: { name: 'After rotation', domain: 'rotated.example' } });
    await deliver(svc());
    assert.equal(receiver.requests.length, 1, 'delivered with the replacement key');
    const row = await subscriptionRow(svc(), hook.id);
    assert.equal(Boolean(row.enabled), true);
    assert.equal(row.access_key_id, second.id, 'handed to the newest replacement');
    assert.equal(row.access_lost, null);
    // Revoking the last replacement too stops it.
    await revokeKey(svc().db, svc().clock, second.id);
    await svc().client(ws.keys.sales!.secret).customers.CreateCompany({ data: { name: 'Never', domain: 'never.example' } });
    await deliver(svc());
    assert.equal(receiver.requests.length, 1);
    assert.equal((await subscriptionRow(svc(), hook.id)).access_lost, 'key_revoked');
    void api;
  });

  it('a disabled member stops what was proposed for them', async () => {
    const { ws } = await hookWorkspace(svc());
    const asAda = svc().client(ws.keys.hooks!.secret, ws.members.ada!);
    const proposed = await asAda.webhooks.PrepareWebhook({ url: receiver.url, event: 'resource.created', resource_types: ['core:Company'] });
    assert.equal(proposed.response.status, 200, JSON.stringify(proposed.error));
    const { webhook_id } = await approveProposal(svc().db, svc().clock, proposed.data!.proposal_id, { workspaceId: ws.workspace_id, memberId: ws.members.olga!, role: 'owner' });
    assert.equal((await subscriptionRow(svc(), webhook_id)).access_member_id, ws.members.ada);
    const api = svc().client(ws.keys.hooks!.secret);
    await api.customers.CreateCompany({ data: { name: 'Seen', domain: 'seen.example' } });
    await deliver(svc());
    assert.equal(receiver.requests.length, 1);
    await disableMember(svc().db, svc().clock, ws.members.ada!);
    await api.customers.CreateCompany({ data: { name: 'Unseen', domain: 'unseen.example' } });
    await deliver(svc());
    assert.equal(receiver.requests.length, 1, 'nothing after the member was disabled');
    const row = await subscriptionRow(svc(), webhook_id);
    assert.equal(row.access_lost, 'member_disabled');
    assert.match(row.disabled_reason!, /was disabled/);
    assert.equal((await notices(svc(), ws.workspace_id)).length, 2);
  });

  it('a key that may no longer act for the member it proposed for stops that subscription only', async () => {
    const { ws, api } = await hookWorkspace(svc());
    const asAda = svc().client(ws.keys.hooks!.secret, ws.members.ada!);
    const proposed = await asAda.webhooks.PrepareWebhook({ url: `${receiver.url}/ada`, event: 'resource.created', resource_types: ['core:Company'] });
    const forAda = (await approveProposal(svc().db, svc().clock, proposed.data!.proposal_id, { workspaceId: ws.workspace_id, memberId: ws.members.olga!, role: 'owner' })).webhook_id;
    const plain = await subscribe(svc(), ws, `${receiver.url}/plain`, 'resource.created', ['core:Company']);
    // No command narrows a key's delegation yet: the row changes as such a command would (with the auth version).
    await svc().db.sql.run(`UPDATE api_keys SET delegation = 'none' WHERE id = ?`, [ws.keys.hooks!.id]);
    await svc().db.sql.run(`UPDATE workspaces SET auth_version = auth_version + 1 WHERE id = ?`, [ws.workspace_id]);
    await api.customers.CreateCompany({ data: { name: 'Delegated', domain: 'delegated.example' } });
    await deliver(svc());
    assert.deepEqual(receiver.requests.map((r) => r.url), ['/hook/plain'], 'the subscription proposed without a member still delivers');
    assert.equal((await subscriptionRow(svc(), forAda)).access_lost, 'delegation_lost');
    assert.equal((await subscriptionRow(svc(), plain.id)).access_lost, null);
  });

  it('lost read on a subscribed type stops it', async () => {
    const { ws } = await hookWorkspace(svc());
    const hook = await subscribe(svc(), ws, receiver.url, 'resource.created', ['core:Company']);
    // No command narrows a key's grants yet: the row changes as such a command would (with the auth version).
    await svc().db.sql.run(`UPDATE api_keys SET resources = ? WHERE id = ?`, [JSON.stringify({ 'core:Deal': ['read', 'write'], 'core:SalesPipeline': ['read', 'write'] }), ws.keys.hooks!.id]);
    await svc().db.sql.run(`UPDATE workspaces SET auth_version = auth_version + 1 WHERE id = ?`, [ws.workspace_id]);
    await svc().client(ws.keys.sales!.secret).customers.CreateCompany({ data: { name: 'Hidden', domain: 'hidden.example' } });
    await deliver(svc());
    assert.equal(receiver.requests.length, 0);
    const row = await subscriptionRow(svc(), hook.id);
    assert.equal(row.access_lost, 'read_lost');
    assert.match(row.disabled_reason!, /may no longer read core:Company/);
  });
}, receiverPolicy(receiver));
