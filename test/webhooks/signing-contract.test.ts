/**
 * The signing contract a subscription signs by (issue 16): a legacy `meeting.completed` subscription
 * keeps the bare hex HMAC until it is moved, one-way, to the timestamped `v1=` signature; the worker
 * and the test delivery sign by the stored contract; the move, approvals, rejections and rotations are
 * in the audit log. Deliveries go to a real HTTPS receiver; signatures are checked with openssl and
 * with the client package; the operator's move runs the real admin CLI.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import knexFactory from 'knex';
import { verifyLegacyWebhook, verifyWebhook, type WebhookHeaders } from '../../client/src/index.ts';
import { changeSigningContract, disableSubscription, enableSubscription, PROPOSAL_TTL_MS, recordMeetingCompleted, rejectProposal, rotateSecret, WebhookActionError } from '../../handlers/webhooks/subscriptions.ts';
import { insertProposal } from '../../handlers/webhooks/queries.ts';
import { OPERATOR } from '../../server/audit.ts';
import { newId } from '../../server/ids.ts';
import * as migration from '../../handlers/webhooks/migrations/20261229010000_webhook_signing_contract.ts';
import { admin } from '../support/cli.ts';
import { startReceiver } from '../support/receiver.ts';
import { forEachDatabase, type TestService } from '../support/service.ts';
import { deliver, hookWorkspace, opensslHmac, receiverPolicy, subscribe } from './support.ts';

const receiver = await startReceiver();
after(() => receiver.close());

type AuditRow = { actor_type: string; actor_id: string | null; actor_label: string; action: string; subject_type: string | null; subject_id: string | null; subject_label: string | null; details: string };

export const auditOf = (svc: TestService, subjectId: string, action: string) =>
  svc.db.sql.all<AuditRow>(`SELECT actor_type, actor_id, actor_label, action, subject_type, subject_id, subject_label, details FROM audit_log WHERE subject_id = ? AND action = ? ORDER BY at, id`, [subjectId, action]);

const contractOf = async (svc: TestService, id: string) => (await svc.db.sql.one<{ signing_contract: string }>(`SELECT signing_contract FROM webhook_subscriptions WHERE id = ?`, [id]))!.signing_contract;

forEachDatabase(
  'webhook signing contract',
  (svc) => {
    beforeEach(() => {
      receiver.requests.length = 0;
      receiver.answer(() => ({ status: 200, body: 'ok' }));
    });

    it('a legacy meeting.completed subscription signs the bare hex HMAC; resource events sign v1; the API shows which', async () => {
      const { ws, api } = await hookWorkspace(svc());
      const legacy = await subscribe(svc(), ws, receiver.url, 'meeting.completed', []);
      const resource = await subscribe(svc(), ws, receiver.url, 'resource.created', ['core:Deal']);
      assert.equal(await contractOf(svc(), legacy.id), 'legacy');
      assert.equal(await contractOf(svc(), resource.id), 'v1');
      const listed = (await api.webhooks.ListWebhookSubscriptions({})).data!.items;
      assert.deepEqual(Object.fromEntries(listed.map((s) => [s.webhook_id, s.signing_contract])), { [legacy.id]: 'legacy', [resource.id]: 'v1' });
      await recordMeetingCompleted(svc().db, svc().clock, ws.workspace_id, 'mtg_1');
      await deliver(svc());
      assert.equal(receiver.requests.length, 1);
      const got = receiver.requests[0]!;
      assert.equal(got.headers['x-webhook-timestamp'], undefined);
      assert.equal(got.headers['x-webhook-signature'], opensslHmac(legacy.secret, got.body));
      assert.equal((verifyLegacyWebhook(legacy.secret, got.headers as WebhookHeaders, got.body) as { meeting_id: string }).meeting_id, 'mtg_1');
    });

    it('the operator moves it with the admin CLI: the next delivery (and a retry of an earlier one) carries v1= with a timestamp; one-way; audited', async function () {
      this.timeout(60_000);
      const { ws, api } = await hookWorkspace(svc());
      const hook = await subscribe(svc(), ws, receiver.url, 'meeting.completed', []);
      // A delivery that fails before the move is retried after it: signed by the contract stored then.
      receiver.answer(() => ({ status: 500, body: 'down' }));
      await recordMeetingCompleted(svc().db, svc().clock, ws.workspace_id, 'mtg_before');
      await deliver(svc());
      assert.equal(receiver.requests.length, 1);
      assert.equal(receiver.requests[0]!.headers['x-webhook-signature'], opensslHmac(hook.secret, receiver.requests[0]!.body));
      receiver.answer(() => ({ status: 200, body: 'ok' }));

      const url = svc().databaseUrl;
      const moved = await admin(url, '--json', 'webhook', 'signing-contract', '--id', hook.id, '--to', 'v1');
      assert.equal(moved.code, 0, moved.stderr);
      const out = JSON.parse(moved.stdout) as { webhook_id: string; before: string; after: string; changed_at: number };
      assert.deepEqual([out.webhook_id, out.before, out.after], [hook.id, 'legacy', 'v1']);
      assert.equal(await contractOf(svc(), hook.id), 'v1');
      assert.equal((await api.webhooks.ListWebhookSubscriptions({})).data!.items.find((s) => s.webhook_id === hook.id)!.signing_contract, 'v1');
      const [entry, ...more] = await auditOf(svc(), hook.id, 'webhook.signing_contract_changed');
      assert.equal(more.length, 0);
      assert.deepEqual([entry!.actor_type, entry!.actor_id, entry!.subject_type], ['operator', null, 'webhook']);
      assert.deepEqual(JSON.parse(entry!.details), { before: 'legacy', after: 'v1' });
      assert.equal(entry!.subject_label, `meeting.completed to 127.0.0.1:${receiver.port}`, 'the host, never the path');

      // One-way, and refused plainly: again, back, unknown target, unknown id, another workspace.
      const again = await admin(url, 'webhook', 'signing-contract', '--id', hook.id, '--to', 'v1');
      assert.notEqual(again.code, 0);
      assert.match(again.stderr, /already signs with the timestamped v1 signature/);
      const back = await admin(url, 'webhooks', 'signing-contract', '--id', hook.id, '--to', 'legacy');
      assert.notEqual(back.code, 0);
      assert.match(back.stderr, /one-way/);
      assert.match((await admin(url, 'webhook', 'signing-contract', '--id', hook.id, '--to', 'v2')).stderr, /only move is --to v1/);
      assert.match((await admin(url, 'webhook', 'signing-contract', '--id', 'wh_nope', '--to', 'v1')).stderr, /No webhook subscription wh_nope/);
      assert.match((await admin(url, 'webhook', 'signing-contract', '--workspace', 'ws_other', '--id', hook.id, '--to', 'v1')).stderr, /No webhook subscription .* in this workspace/);
      assert.equal((await auditOf(svc(), hook.id, 'webhook.signing_contract_changed')).length, 1, 'refusals record nothing');

      // The retry of the earlier event and a new event: both v1, verified by openssl and the client.
      svc().clock.advance(60_000);
      await recordMeetingCompleted(svc().db, svc().clock, ws.workspace_id, 'mtg_after');
      await deliver(svc());
      const after = receiver.requests.slice(1);
      assert.equal(after.length, 2);
      for (const got of after) {
        const ts = String(got.headers['x-webhook-timestamp']);
        assert.equal(ts, String(Math.floor(svc().clock.now() / 1000)));
        assert.equal(got.headers['x-webhook-signature'], `v1=${opensslHmac(hook.secret, Buffer.concat([Buffer.from(`${ts}.`), got.body]))}`);
        const event = verifyWebhook(hook.secret, got.headers as WebhookHeaders, got.body, { now: svc().clock.now() });
        assert.equal(event.event, 'meeting.completed');
      }
      assert.deepEqual(after.map((r) => (JSON.parse(r.body.toString()) as { meeting_id: string }).meeting_id).sort(), ['mtg_after', 'mtg_before'], 'the same payload contract');
      assert.equal(after.find((r) => r.body.toString().includes('mtg_before'))!.body.toString(), receiver.requests[0]!.body.toString(), 'the retried body is the same bytes');
    });

    it('the test delivery of enabling signs by the stored contract', async function () {
      this.timeout(30_000);
      const { ws } = await hookWorkspace(svc());
      const hook = await subscribe(svc(), ws, receiver.url, 'meeting.completed', []);
      const egress = svc().config.egress;
      await disableSubscription(svc().db, svc().clock, ws.workspace_id, hook.id, 'test');
      assert.equal((await enableSubscription(svc().db, svc().clock, ws.workspace_id, hook.id, egress)).ok, true);
      const legacyTest = receiver.requests.at(-1)!;
      assert.equal(JSON.parse(legacyTest.body.toString()).event, 'webhook.test');
      assert.equal(legacyTest.headers['x-webhook-timestamp'], undefined);
      assert.equal(legacyTest.headers['x-webhook-signature'], opensslHmac(hook.secret, legacyTest.body));

      await changeSigningContract(svc().db, svc().clock, ws.workspace_id, hook.id, 'v1', OPERATOR);
      await disableSubscription(svc().db, svc().clock, ws.workspace_id, hook.id, 'test');
      assert.equal((await enableSubscription(svc().db, svc().clock, ws.workspace_id, hook.id, egress)).ok, true);
      const v1Test = receiver.requests.at(-1)!;
      const ts = String(v1Test.headers['x-webhook-timestamp']);
      assert.equal(v1Test.headers['x-webhook-signature'], `v1=${opensslHmac(hook.secret, Buffer.concat([Buffer.from(`${ts}.`), v1Test.body]))}`);
    });

    it('audits approvals, rejections and rotations with the member or operator as actor, never a secret', async () => {
      const { ws } = await hookWorkspace(svc());
      const hook = await subscribe(svc(), ws, `${receiver.url}?token=path-secret`, 'resource.created', ['core:Deal']);
      const [approved] = await auditOf(svc(), hook.id, 'webhook.approved');
      assert.deepEqual([approved!.actor_type, approved!.actor_id, approved!.actor_label], ['member', ws.members.olga, 'Olga Owner']);
      const details = JSON.parse(approved!.details) as Record<string, unknown>;
      assert.deepEqual([details.proposal_id, details.event, details.resource_types, details.signing_contract], [hook.proposal.proposal_id, 'resource.created', ['core:Deal'], 'v1']);

      const rotated = await rotateSecret(svc().db, svc().clock, ws.workspace_id, hook.id, { type: 'member', id: ws.members.bob!, label: 'Bob Admin' });
      const cli = await admin(svc().databaseUrl, 'webhooks', 'rotate-secret', '--workspace', ws.workspace_id, '--id', hook.id);
      assert.equal(cli.code, 0, cli.stderr);
      const rotations = await auditOf(svc(), hook.id, 'webhook.secret_rotated');
      assert.deepEqual(rotations.map((r) => [r.actor_type, r.actor_label]), [['member', 'Bob Admin'], ['operator', 'operator (admin CLI)']]);
      assert.equal(JSON.parse(rotations[0]!.details).previous_secret_valid_until, rotated.previous_valid_until);

      const proposalId = newId('whp');
      await insertProposal(svc().db.sql, {
        id: proposalId, workspace_id: ws.workspace_id, url: receiver.url, event: 'resource.deleted', resource_types: '["core:Deal"]', proposed_by_key: ws.keys.hooks!.id,
        proposed_by_member: null, status: 'pending', expires_at: svc().clock.now() + PROPOSAL_TTL_MS, decided_by: null, decided_at: null, webhook_id: null, created_at: svc().clock.now(),
      });
      await rejectProposal(svc().db, svc().clock, proposalId, { workspaceId: ws.workspace_id, memberId: ws.members.bob!, role: 'admin', name: 'Bob Admin' });
      const [rejected] = await auditOf(svc(), proposalId, 'webhook.rejected');
      assert.deepEqual([rejected!.actor_type, rejected!.actor_id, rejected!.subject_type], ['member', ws.members.bob, 'webhook']);

      const all = await svc().db.sql.all<{ details: string; subject_label: string | null }>(`SELECT details, subject_label FROM audit_log WHERE workspace_id = ? AND action LIKE 'webhook.%'`, [ws.workspace_id]);
      const text = JSON.stringify(all);
      for (const secret of [hook.secret, rotated.secret]) assert.equal(text.includes(secret), false, 'never a secret');
      assert.equal(text.includes('path-secret'), false, "never the destination's path");
      const current = (await svc().db.sql.one<{ secret: string }>(`SELECT secret FROM webhook_subscriptions WHERE id = ?`, [hook.id]))!.secret;
      assert.equal(text.includes(current), false);
    });

    it('the move refuses a subscription of another workspace and one already on v1 (409), recording nothing', async () => {
      const { ws } = await hookWorkspace(svc());
      const resource = await subscribe(svc(), ws, receiver.url, 'resource.updated', ['core:Deal']);
      await assert.rejects(changeSigningContract(svc().db, svc().clock, ws.workspace_id, resource.id, 'v1', OPERATOR), (err: unknown) => err instanceof WebhookActionError && err.status === 409 && /since its approval/.test(err.message));
      await assert.rejects(changeSigningContract(svc().db, svc().clock, 'ws_elsewhere', resource.id, 'v1', OPERATOR), (err: unknown) => err instanceof WebhookActionError && err.status === 404);
      assert.equal((await auditOf(svc(), resource.id, 'webhook.signing_contract_changed')).length, 0);
    });

    it('the migration keeps what existing subscriptions were signed with: meeting.completed legacy, resource events v1', async () => {
      if (svc().db.dialect === 'pg') {
        // The service's own database: its rows as they were before the migration (no column), then the migration.
        const { ws } = await hookWorkspace(svc());
        const legacy = await subscribe(svc(), ws, receiver.url, 'meeting.completed', []);
        const resource = await subscribe(svc(), ws, receiver.url, 'resource.deleted', ['core:Deal']);
        await changeSigningContract(svc().db, svc().clock, ws.workspace_id, legacy.id, 'v1', OPERATOR);
        await migration.down(svc().db.knex);
        await migration.up(svc().db.knex);
        assert.equal(await contractOf(svc(), legacy.id), 'legacy');
        assert.equal(await contractOf(svc(), resource.id), 'v1');
        return;
      }
      // SQLite (one connection, held by the service): a scratch database with the table's rows as they were.
      const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'wsops-wh-mig-')), 'db.sqlite');
      const knex = knexFactory({ client: 'better-sqlite3', connection: { filename: file }, useNullAsDefault: true });
      try {
        await knex.schema.createTable('webhook_subscriptions', (t) => {
          t.string('id', 40).primary();
          t.string('event', 40).notNullable();
        });
        await knex('webhook_subscriptions').insert([{ id: 'wh_meeting', event: 'meeting.completed' }, { id: 'wh_deal', event: 'resource.updated' }]);
        await migration.up(knex);
        const rows = await knex('webhook_subscriptions').select('id', 'signing_contract', 'signing_contract_changed_at').orderBy('id');
        assert.deepEqual(rows, [{ id: 'wh_deal', signing_contract: 'v1', signing_contract_changed_at: null }, { id: 'wh_meeting', signing_contract: 'legacy', signing_contract_changed_at: null }]);
      } finally {
        await knex.destroy();
        fs.rmSync(path.dirname(file), { recursive: true, force: true });
      }
    });
  },
  receiverPolicy(receiver),
);
